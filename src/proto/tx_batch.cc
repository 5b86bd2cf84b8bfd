#include "proto/tx_batch.h"

#include <algorithm>
#include <cstring>

#include "wire/crc32c.h"

namespace uwarp::proto {

namespace {

// Writes an FPDU's MPA length field and DDP header at `out`; returns how many bytes that is.
std::size_t put_length_and_header(std::uint8_t* out, const wire::DdpHeader& header,
                                  std::size_t ulpdu) {
  store_be16(out, static_cast<std::uint16_t>(ulpdu));
  wire::encode_ddp_header(header, ByteSpan(out + wire::kMpaLengthFieldSize, header.size()));
  return wire::kMpaLengthFieldSize + header.size();
}

}  // namespace

bool TxBatch::small_fpdu_size(std::size_t max_ulpdu) {
  return wire::fpdu_size(max_ulpdu) <= WireImagePool::kMaxFpduBytes;
}

void TxBatch::add_fpdu(const wire::DdpHeader& header, std::span<const iovec> payload,
                       std::size_t payload_length, Framing framing, const void* region,
                       bool to_image) {
  const std::size_t first_iov = iov_count_;
  add_fpdu_iovecs(header, payload, payload_length, framing, to_image);
  std::fill(iov_region_.begin() + static_cast<std::ptrdiff_t>(first_iov),
            iov_region_.begin() + static_cast<std::ptrdiff_t>(iov_count_), region);
}

void TxBatch::add_fpdu_iovecs(const wire::DdpHeader& header, std::span<const iovec> payload,
                              std::size_t payload_length, Framing framing, bool to_image) {
  if (to_image && !framing.markers &&
      add_fpdu_to_image(header, payload, payload_length, framing.crc)) {
    return;
  }
  const std::size_t ulpdu = header.size() + payload_length;
  auto& h = headers_[fpdus_];
  auto& t = trailers_[fpdus_];
  ++fpdus_;
  const std::size_t hdr_len = put_length_and_header(h.data(), header, ulpdu);
  const std::size_t pad = wire::fpdu_pad_length(ulpdu);
  std::memset(t.data(), 0, pad);
  if (framing.markers) {
    add_fpdu_with_markers(iovec{h.data(), hdr_len}, payload, pad, framing.crc);
    return;
  }
  std::uint32_t crc = 0;
  if (framing.crc) {
    wire::Crc32c c;
    c.update(ConstByteSpan(h.data(), hdr_len));
    for (const iovec& p : payload) {
      c.update(ConstByteSpan(static_cast<const std::uint8_t*>(p.iov_base), p.iov_len));
    }
    c.update(ConstByteSpan(t.data(), pad));
    crc = c.value();
  }
  wire::store_crc_trailer(t.data() + pad, crc);

  iov_[iov_count_++] = iovec{h.data(), hdr_len};
  for (const iovec& p : payload) {
    if (p.iov_len > 0) iov_[iov_count_++] = p;
  }
  iov_[iov_count_++] = iovec{t.data(), pad + wire::kMpaCrcSize};
  queued_bytes_ += hdr_len + payload_length + pad + wire::kMpaCrcSize;
  fpdu_end_[fpdus_ - 1] = queued_bytes_;
}

bool TxBatch::add_fpdu_to_image(const wire::DdpHeader& header, std::span<const iovec> payload,
                                std::size_t payload_length, bool with_crc) {
  const std::size_t ulpdu = header.size() + payload_length;
  const std::size_t pad = wire::fpdu_pad_length(ulpdu);
  const std::size_t length = wire::fpdu_size(ulpdu);
  if (length > WireImagePool::kMaxFpduBytes || images_ == nullptr) return false;
  if (image_ == nullptr && (image_ = images_->acquire()) == nullptr) return false;
  if (image_used_ + length > WireImagePool::kImageBytes) return false;
  std::uint8_t* const fpdu = image_ + image_used_;
  std::uint8_t* at = fpdu + put_length_and_header(fpdu, header, ulpdu);
  for (const iovec& p : payload) {
    if (p.iov_len > 0) std::memcpy(at, p.iov_base, p.iov_len);
    at += p.iov_len;
  }
  std::memset(at, 0, pad);
  at += pad;
  std::uint32_t crc = 0;
  if (with_crc) {
    wire::Crc32c c;
    c.update(ConstByteSpan(fpdu, static_cast<std::size_t>(at - fpdu)));
    crc = c.value();
  }
  wire::store_crc_trailer(at, crc);
  ++fpdus_;
  image_used_ += length;
  // Follows the last iovec if that one ends where this FPDU begins (the image's previous FPDU).
  iovec* last = iov_count_ > sent_iov_ ? &iov_[iov_count_ - 1] : nullptr;
  if (last != nullptr && static_cast<std::uint8_t*>(last->iov_base) + last->iov_len == fpdu) {
    last->iov_len += length;
  } else {
    iov_[iov_count_++] = iovec{fpdu, length};
  }
  queued_bytes_ += length;
  fpdu_end_[fpdus_ - 1] = queued_bytes_;
  return true;
}

void TxBatch::give_back_image() {
  if (image_ == nullptr) return;
  images_->release(image_);
  image_ = nullptr;
  image_used_ = 0;
}

void TxBatch::add_fpdu_with_markers(const iovec& header, std::span<const iovec> payload,
                                    std::size_t pad, bool with_crc) {
  const std::size_t start = queued_bytes_;  // the FPDU's first byte, a marker's if one falls there
  const std::size_t first_iov = iov_count_;
  std::size_t at = start;
  const auto marker_if_due = [&] {
    if (phase_at(at) != 0) return;
    auto& m = markers_[markers_used_++];
    wire::store_marker(m.data(), static_cast<std::uint16_t>(at - start));
    iov_[iov_count_++] = iovec{m.data(), m.size()};
    at += m.size();
  };
  // One piece of the FPDU, split where markers fall.
  const auto add = [&](const iovec& piece) {
    auto* p = static_cast<std::uint8_t*>(piece.iov_base);
    std::size_t left = piece.iov_len;
    while (left > 0) {
      marker_if_due();
      const std::size_t n = std::min(left, wire::kMarkerInterval - phase_at(at));
      iov_[iov_count_++] = iovec{p, n};
      p += n;
      left -= n;
      at += n;
    }
  };
  auto& t = trailers_[fpdus_ - 1];
  add(header);
  for (const iovec& piece : payload) add(piece);
  add(iovec{t.data(), pad});
  marker_if_due();  // between the pad and the CRC: part of this FPDU
  std::uint32_t crc = 0;
  if (with_crc) {
    wire::Crc32c c;
    for (std::size_t v = first_iov; v < iov_count_; ++v) {
      c.update(ConstByteSpan(static_cast<const std::uint8_t*>(iov_[v].iov_base), iov_[v].iov_len));
    }
    crc = c.value();
  }
  wire::store_crc_trailer(t.data() + pad, crc);
  iov_[iov_count_++] = iovec{t.data() + pad, wire::kMpaCrcSize};
  queued_bytes_ = at + wire::kMpaCrcSize;
  fpdu_end_[fpdus_ - 1] = queued_bytes_;
}

void TxBatch::abandon_after_current_fpdu() {
  if (empty()) return;
  // The end of the FPDU that holds the next byte to send; at a boundary nothing is kept.
  std::size_t keep_until = sent_bytes_;
  for (std::size_t i = 0; i < fpdus_; ++i) {
    if (fpdu_end_[i] > sent_bytes_) {
      const std::size_t start = i == 0 ? 0 : fpdu_end_[i - 1];
      if (start < sent_bytes_) keep_until = fpdu_end_[i];
      break;
    }
  }
  std::vector<std::uint8_t> rest;
  rest.reserve(keep_until - sent_bytes_);
  for (std::size_t v = sent_iov_; v < iov_count_ && rest.size() < keep_until - sent_bytes_; ++v) {
    const auto* p = static_cast<const std::uint8_t*>(iov_[v].iov_base);
    const std::size_t take = std::min(iov_[v].iov_len, keep_until - sent_bytes_ - rest.size());
    rest.insert(rest.end(), p, p + take);
  }
  tail_ = std::move(rest);
  clear();
  if (tail_.empty()) return;
  // The kept bytes are all that is left; they count as the batch's first FPDU.
  iov_[0] = iovec{tail_.data(), tail_.size()};
  iov_region_[0] = nullptr;
  iov_count_ = 1;
  queued_bytes_ = tail_.size();
  fpdu_end_[0] = queued_bytes_;
  fpdus_ = 1;
}

void TxBatch::mark_message_end(std::uint64_t cookie) {
  mark_[marks_++] = Mark{queued_bytes_, cookie};
}

void TxBatch::consume(std::size_t n) {
  sent_bytes_ += n;
  while (n > 0 && sent_iov_ < iov_count_) {
    iovec& v = iov_[sent_iov_];
    const std::size_t take = std::min(n, v.iov_len);
    v.iov_base = static_cast<std::uint8_t*>(v.iov_base) + take;
    v.iov_len -= take;
    n -= take;
    if (v.iov_len == 0) ++sent_iov_;
  }
}

bool TxBatch::pop_sent(std::uint64_t& cookie) {
  if (marks_popped_ < marks_ && mark_[marks_popped_].end_offset <= sent_bytes_) {
    cookie = mark_[marks_popped_++].cookie;
    return true;
  }
  reset_if_drained();
  return false;
}

void TxBatch::reset_if_drained() {
  if (sent_iov_ == iov_count_ && marks_popped_ == marks_) clear();
}

void TxBatch::clear() {
  phase_start_ = phase_at(sent_bytes_);  // what was not sent never reaches the stream
  markers_used_ = 0;
  iov_count_ = sent_iov_ = 0;
  queued_bytes_ = sent_bytes_ = 0;
  fpdus_ = 0;
  marks_ = marks_popped_ = 0;
  give_back_image();
}

bool TxBatch::owns(const void* p) const {
  const auto* at = static_cast<const std::uint8_t*>(p);
  const auto in = [at](const auto& storage) {
    const auto* begin = reinterpret_cast<const std::uint8_t*>(storage.data());
    return at >= begin && at < begin + sizeof(storage[0]) * storage.size();
  };
  const bool in_image =
      image_ != nullptr && at >= image_ && at < image_ + WireImagePool::kImageBytes;
  return in_image || in(headers_) || in(trailers_) || in(markers_) || in(tail_);
}

bool TxBatch::reads_from(const RevokedRegion& revoked) const {
  for (std::size_t i = sent_iov_; i < iov_count_; ++i) {
    if (iov_region_[i] != nullptr && iov_region_[i] != revoked.region) continue;
    const iovec& v = iov_[i];
    if (overlaps(ConstByteSpan(static_cast<const std::uint8_t*>(v.iov_base), v.iov_len),
                 revoked.memory)) {
      return true;
    }
  }
  return false;
}

bool MessageSegmenter::reads_from(const RevokedRegion& revoked) const {
  if (!active_) return false;
  if (msg_.region != nullptr) return msg_.region == revoked.region;
  const ConstByteSpan memory = revoked.memory;
  for (std::size_t i = piece_; i < msg_.gather.size(); ++i) {
    const ConstByteSpan piece = msg_.gather[i];
    if (overlaps(i == piece_ ? piece.subspan(piece_offset_) : piece, memory)) return true;
  }
  return false;
}

void MessageSegmenter::start(const Message& m) {
  msg_ = m;
  active_ = true;
  offset_ = 0;
  piece_ = 0;
  piece_offset_ = 0;
}

bool MessageSegmenter::fill(TxBatch& batch, std::size_t max_ulpdu, Framing framing) {
  const std::size_t per_fpdu = max_ulpdu - msg_.header.size();
  // iovecs (plain structs) are not zeroed here, as an array of spans (2 KiB) would be on every
  // call: about a twentieth of a small message's instructions.
  std::array<iovec, TxBatch::kMaxIov> pieces;
  const std::size_t overhead = TxBatch::fpdu_iov_overhead(framing);
  const bool to_image =
      msg_.length <= WireImagePool::kMaxMessageBytes && TxBatch::small_fpdu_size(max_ulpdu);
  while (active_) {
    // Gather this segment's pieces without exceeding the batch's iovec room.
    const std::size_t want = std::min(per_fpdu, msg_.length - offset_);
    std::size_t got = 0;
    std::size_t n = 0;
    std::size_t piece = piece_;
    std::size_t piece_off = piece_offset_;
    const std::size_t room = batch.free_iov() >= overhead ? batch.free_iov() - overhead : 0;
    while (got < want && n < room && piece < msg_.gather.size()) {
      const ConstByteSpan p = msg_.gather[piece];
      const std::size_t take = std::min(p.size() - piece_off, want - got);
      if (take > 0) pieces[n++] = iovec{const_cast<std::uint8_t*>(p.data() + piece_off), take};
      got += take;
      piece_off += take;
      if (piece_off == p.size()) {
        ++piece;
        piece_off = 0;
      }
    }
    if (got < want && piece >= msg_.gather.size()) {
      // The gather list is shorter than the message: the caller broke its contract.
      active_ = false;
      return true;
    }
    // No payload fits (no iovec room left): wait for the next batch rather than send an empty
    // segment that is not the last, which a Read Request or Terminate must never be.
    if (!batch.can_add_fpdu(n, framing) || (got < want && got == 0)) return false;
    wire::DdpHeader h = msg_.header;
    if (h.tagged) {
      h.tagged_offset = msg_.header.tagged_offset + offset_;
    } else {
      h.message_offset = static_cast<std::uint32_t>(offset_);
    }
    h.last = offset_ + got == msg_.length;
    batch.add_fpdu(h, std::span<const iovec>(pieces.data(), n), got, framing, msg_.region,
                   to_image);
    offset_ += got;
    piece_ = piece;
    piece_offset_ = piece_off;
    if (h.last) {
      batch.mark_message_end(msg_.cookie);
      active_ = false;
      return true;
    }
  }
  return true;
}

}  // namespace uwarp::proto
