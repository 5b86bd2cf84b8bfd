#include "proto/fpdu_reader.h"

#include <algorithm>
#include <cstring>

#include "base/faulting_memory.h"

namespace uwarp::proto {
namespace {
constexpr std::size_t kPrefix = wire::kMpaLengthFieldSize + wire::kDdpControlSize;
}

void FpduReader::fail(const wire::TerminateCode& code) {
  RxFailure f;
  f.code = code;
  if (header_complete_) {
    f.have_header = true;
    f.ulpdu_length = static_cast<std::uint16_t>(ulpdu_length_);
    f.header_size = header_size_;
    std::memcpy(f.header.data(), header_.data() + wire::kMpaLengthFieldSize, header_size_);
    if (state_ == State::kTrailer && placement_.kind == Placement::Kind::kBuffered &&
        buffered_size_ >= wire::kReadRequestSize &&
        !(header_[2] & wire::kDdpFlagTagged) &&
        (header_[3] & wire::kRdmapOpcodeMask) == static_cast<std::uint8_t>(wire::RdmapOpcode::kReadRequest)) {
      f.have_rdmap_header = true;
      std::memcpy(f.rdmap_header.data(), buffered_.data(), wire::kReadRequestSize);
    }
  }
  failure_ = f;
}

std::size_t FpduReader::feed(ConstByteSpan input) {
  std::size_t used = 0;
  while (used < input.size() && !failed() && !waiting()) {
    std::size_t avail = input.size() - used;
    if (markers_) {
      const std::size_t gap = to_marker();
      if (gap == 0) {
        used += take_marker(input.subspan(used));
        continue;
      }
      avail = std::min(avail, gap);
    }
    if (state_ == State::kHeader && have_ == 0) {
      // Most FPDUs arrive whole in one receive: take those in one step.
      if (const std::size_t n = feed_whole_fpdu(input.subspan(used, avail)); n > 0) {
        used += n;
        continue;
      }
    }
    switch (state_) {
      case State::kHeader: {
        const std::size_t n = std::min(avail, need_ - have_);
        std::memcpy(header_.data() + have_, input.data() + used, n);
        if (crc_enabled_) crc_.update(input.subspan(used, n));
        have_ += n;
        used += n;
        advance(n);
        if (have_ == need_) on_header_complete();
        break;
      }
      case State::kPayload: {
        if (placement_.kind == Placement::Kind::kDiscard) {
          const std::size_t n = std::min(avail, payload_left_);
          if (crc_enabled_) crc_.update(input.subspan(used, n));
          payload_left_ -= n;
          used += n;
          advance(n);
          on_payload_bytes(0);
          break;
        }
        const ByteSpan target = payload_target();
        const std::size_t n = std::min(avail, target.size());
        if (placement_.on_demand) {
          // Memory that may fault: written by the kernel, the CRC taken from the input.
          if (!copy_to_faulting(target, input.subspan(used, n))) {
            fail(placement_.error);
            break;
          }
          if (crc_enabled_) crc_.update(input.subspan(used, n));
          used += n;
          payload_placed(n);
          break;
        }
        if (n > 0) std::memcpy(target.data(), input.data() + used, n);
        used += n;
        on_payload_bytes(n);
        break;
      }
      case State::kWait:  // the loop's condition
        break;
      case State::kTrailer: {
        const std::size_t n = std::min(avail, need_ - have_);
        take_trailer(input.subspan(used, n));
        advance(n);
        used += n;
        if (have_ == need_) on_trailer_complete();
        break;
      }
    }
  }
  return used;
}

void FpduReader::take_trailer(ConstByteSpan in) {
  const std::size_t pad = need_ - wire::kMpaCrcSize;
  if (crc_enabled_ && have_ < pad) crc_.update(in.first(std::min(in.size(), pad - have_)));
  std::memcpy(trailer_.data() + have_, in.data(), in.size());
  have_ += in.size();
}

std::size_t FpduReader::take_marker(ConstByteSpan in) {
  const std::size_t n = std::min(in.size(), marker_.size() - marker_have_);
  std::memcpy(marker_.data() + marker_have_, in.data(), n);
  marker_have_ += n;
  if (marker_have_ < marker_.size()) return n;
  marker_have_ = 0;
  // A marker between FPDUs begins the next one, so it points at itself (0).
  const std::uint64_t back = stream_at_ - fpdu_start_;
  if (wire::marker_fpduptr(marker_.data()) != back) {
    fail(wire::term::kLlpBadFpdu);  // RFC 5044 section 8: marker and ULPDU length mismatch
    return n;
  }
  if (crc_enabled_) crc_.update(marker_);
  stream_at_ += marker_.size();
  return n;
}

void FpduReader::on_header_complete() {
  if (have_ == kPrefix) {
    // Length field and DDP control byte known: the header size follows.
    ulpdu_length_ = load_be16(header_.data());
    header_size_ = wire::ddp_header_size(header_[2]);
    if (ulpdu_length_ < header_size_) {
      // The ULPDU cannot even hold its DDP header: the stream can no longer be delimited.
      header_size_ = 0;
      fail(wire::term::kLlpBadFpdu);
      return;
    }
    need_ = wire::kMpaLengthFieldSize + header_size_;
    return;
  }
  begin_segment();
}

void FpduReader::begin_segment() {
  header_complete_ = true;
  auto header = wire::decode_ddp_header(ConstByteSpan(header_.data() + 2, header_size_));
  payload_left_ = ulpdu_length_ - header_size_;
  placement_ = sink_.on_segment_header(*header, payload_left_);
  scatter_index_ = 0;
  scatter_offset_ = 0;
  buffered_size_ = 0;
  switch (placement_.kind) {
    case Placement::Kind::kReject:
      fail(placement_.error);
      return;
    case Placement::Kind::kBuffered:
      if (payload_left_ > buffered_.size()) {
        fail(wire::term::kDdpUntaggedTooLong);
        return;
      }
      break;
    case Placement::Kind::kScatter:
      begin_next_scatter();
      break;
    case Placement::Kind::kDiscard:
      break;
    case Placement::Kind::kWait:
      state_ = State::kWait;
      return;
  }
  state_ = State::kPayload;
  if (payload_left_ == 0) on_payload_bytes(0);
}

std::size_t FpduReader::feed_whole_fpdu(ConstByteSpan in) {
  if (in.size() < kPrefix) return 0;
  const std::size_t ulpdu_length = load_be16(in.data());
  const std::size_t header_size = wire::ddp_header_size(in[2]);
  // Not whole, or not even able to hold its header: the state machine waits or fails.
  if (ulpdu_length < header_size || in.size() < wire::fpdu_size(ulpdu_length)) return 0;
  const std::size_t header_end = wire::kMpaLengthFieldSize + header_size;
  std::memcpy(header_.data(), in.data(), header_end);  // kept for a Terminate, as feed() does
  ulpdu_length_ = ulpdu_length;
  header_size_ = header_size;
  have_ = need_ = header_end;
  begin_segment();
  if (failed() || waiting()) {
    // The state machine goes on from the payload (feed()): the CRC covers the header so far.
    if (crc_enabled_) crc_.update(in.first(header_end));
    advance(header_end);
    return header_end;
  }

  const ConstByteSpan payload = in.subspan(header_end, payload_left_);
  std::size_t placed = 0;
  switch (placement_.kind) {
    case Placement::Kind::kScatter:
      while (placed < payload.size()) {
        if (scatter_index_ >= placement_.scatter.size()) {
          fail(wire::term::kLlpLocalCatastrophic);  // the sink's bug, as in on_payload_bytes
          return header_end + placed;
        }
        const ByteSpan span = placement_.scatter[scatter_index_].subspan(scatter_offset_);
        const std::size_t n = std::min(span.size(), payload.size() - placed);
        if (!placement_.on_demand) {
          std::memcpy(span.data(), payload.data() + placed, n);
        } else if (!copy_to_faulting(span.first(n), payload.subspan(placed, n))) {
          fail(placement_.error);
          return header_end + placed;
        }
        placed += n;
        scatter_offset_ += n;
        begin_next_scatter();
      }
      break;
    case Placement::Kind::kBuffered:  // begin_segment checked that it fits
      std::memcpy(buffered_.data(), payload.data(), payload.size());
      buffered_size_ = payload.size();
      break;
    case Placement::Kind::kDiscard:
    case Placement::Kind::kReject:  // failed() above
    case Placement::Kind::kWait:    // waiting() above
      break;
  }
  payload_left_ = 0;

  begin_trailer();
  const std::size_t trailer_start = header_end + payload.size();
  const std::size_t end = trailer_start + need_;
  std::memcpy(trailer_.data(), in.data() + trailer_start, need_);
  have_ = need_;
  // Length, header, payload and pad lie together in `in`: one pass covers them.
  if (crc_enabled_) crc_.update(in.first(end - wire::kMpaCrcSize));
  advance(end);  // the whole FPDU: no marker lies inside it
  on_trailer_complete();
  return end;
}

void FpduReader::begin_next_scatter() {
  while (scatter_index_ < placement_.scatter.size() &&
         scatter_offset_ == placement_.scatter[scatter_index_].size()) {
    ++scatter_index_;
    scatter_offset_ = 0;
  }
}

ByteSpan FpduReader::direct_target() const {
  // Memory that may fault is written only by copies that report it (placement_.on_demand).
  return placement_.on_demand ? ByteSpan{} : payload_target();
}

ByteSpan FpduReader::payload_target() const {
  if (state_ != State::kPayload || failed() || payload_left_ == 0) return {};
  if (placement_.kind == Placement::Kind::kDiscard) return {};
  // With markers, payload stops at a marker's place: the marker is fed from the bounce buffer.
  const std::size_t most = markers_ ? std::min(payload_left_, to_marker()) : payload_left_;
  if (placement_.kind == Placement::Kind::kBuffered) {
    return ByteSpan(const_cast<std::uint8_t*>(buffered_.data()) + buffered_size_, most);
  }
  if (scatter_index_ >= placement_.scatter.size()) return {};
  const ByteSpan s = placement_.scatter[scatter_index_];
  return s.subspan(scatter_offset_, std::min(s.size() - scatter_offset_, most));
}

bool FpduReader::places_into(ConstByteSpan memory) const {
  if (state_ != State::kPayload || failed() || payload_left_ == 0) return false;
  if (placement_.kind != Placement::Kind::kScatter) return false;  // the reader's own buffer
  for (std::size_t i = scatter_index_; i < placement_.scatter.size(); ++i) {
    const ByteSpan s = placement_.scatter[i];
    if (overlaps(i == scatter_index_ ? s.subspan(scatter_offset_) : s, memory)) return true;
  }
  return false;
}

std::size_t FpduReader::plan_ahead(std::span<Piece> out, std::size_t most,
                                   std::size_t min_ahead) {
  if (markers_ || failed() || out.empty() || !header_complete_) return 0;
  if (placement_.kind != Placement::Kind::kScatter || placement_.on_demand) return 0;
  std::size_t n = 0;
  std::size_t bytes = 0;
  std::size_t gap = 0;  // trailer bytes still to come before the next header
  if (state_ == State::kPayload) {
    const ByteSpan rest = payload_target();
    if (rest.empty()) return 0;
    out[n++] = {rest.data(), rest.size()};
    bytes = rest.size();
    if (rest.size() != payload_left_) return n;  // more spans follow: no guess past them
    gap = wire::fpdu_pad_length(ulpdu_length_) + wire::kMpaCrcSize;
  } else if (state_ == State::kTrailer) {
    gap = need_ - have_;
  } else {
    return 0;
  }
  const std::size_t segment = ulpdu_length_ - header_size_;
  if (segment == 0 || segment < min_ahead || header_size_ != wire::kTaggedHeaderSize) return n;
  constexpr std::size_t kHeader = wire::kMpaLengthFieldSize + wire::kTaggedHeaderSize;
  std::size_t skip = 0;
  while (n + 2 <= out.size()) {
    const ByteSpan place = sink_.placement_ahead(skip, segment);
    if (place.empty() || place.size() < min_ahead || place.size() > segment ||
        bytes + gap + kHeader + place.size() > most) {
      break;
    }
    out[n++] = {nullptr, gap + kHeader};
    out[n++] = {place.data(), place.size()};
    bytes += gap + kHeader + place.size();
    skip += place.size();
    gap = wire::fpdu_pad_length(wire::kTaggedHeaderSize + place.size()) + wire::kMpaCrcSize;
    if (place.size() < segment) break;  // the message ends there
  }
  return n;
}

std::size_t FpduReader::take_in_place(ByteSpan bytes) {
  const ByteSpan target = direct_target();
  if (target.empty() || target.data() != bytes.data()) return 0;
  const std::size_t n = std::min(bytes.size(), target.size());
  commit_direct(n);
  return n;
}

void FpduReader::commit_direct(std::size_t n) {
  // Only payload can land in direct_target(); a commit outside a payload (necessarily of 0 bytes,
  // into an empty target) must not move the reader on to the trailer.
  if (state_ == State::kPayload && !failed()) on_payload_bytes(n);
}

void FpduReader::on_payload_bytes(std::size_t n) {
  if (n > 0 && crc_enabled_) crc_.update(payload_target().first(n));
  payload_placed(n);
}

void FpduReader::payload_placed(std::size_t n) {
  if (n > 0) {
    advance(n);
    payload_left_ -= n;
    if (placement_.kind == Placement::Kind::kBuffered) {
      buffered_size_ += n;
    } else {
      scatter_offset_ += n;
      begin_next_scatter();
    }
  }
  if (payload_left_ == 0) {
    begin_trailer();
  } else if (placement_.kind == Placement::Kind::kScatter && scatter_index_ >= placement_.scatter.size()) {
    // The sink promised a scatter list as long as the payload; anything else is its bug.
    fail(wire::term::kLlpLocalCatastrophic);
  }
}

void FpduReader::begin_trailer() {
  state_ = State::kTrailer;
  have_ = 0;
  need_ = wire::fpdu_pad_length(ulpdu_length_) + wire::kMpaCrcSize;
}

void FpduReader::on_trailer_complete() {
  const std::size_t pad = need_ - wire::kMpaCrcSize;
  if (crc_enabled_) {
    if (crc_.value() != wire::load_crc_trailer(trailer_.data() + pad)) {
      fail(wire::term::kLlpBadCrc);
      return;
    }
  }
  const ConstByteSpan buffered =
      placement_.kind == Placement::Kind::kBuffered ? ConstByteSpan(buffered_.data(), buffered_size_)
                                                    : ConstByteSpan{};
  if (auto err = sink_.on_segment_end(buffered)) {
    fail(*err);
    return;
  }
  ++fpdus_;
  if (crc_enabled_) crc_.reset();
  fpdu_start_ = stream_at_;
  state_ = State::kHeader;
  have_ = 0;
  need_ = kPrefix;
  header_size_ = 0;
  header_complete_ = false;
}

}  // namespace uwarp::proto
