#include "rdmacm/rsocket_protocol.h"

#include <algorithm>

namespace uwarp::rdmacm::rs {
namespace {

template <std::size_t N>
void put_le(std::uint8_t* p, std::uint64_t v) {
  for (std::size_t i = 0; i < N; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
template <std::size_t N>
std::uint64_t get_le(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < N; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}
template <std::size_t N>
void put_be(std::uint8_t* p, std::uint64_t v) {
  for (std::size_t i = 0; i < N; ++i) p[N - 1 - i] = static_cast<std::uint8_t>(v >> (8 * i));
}
template <std::size_t N>
std::uint64_t get_be(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < N; ++i) v = (v << 8) | p[i];
  return v;
}

void put_wire_sge_be(std::uint8_t* p, const WireSge& s) {
  put_be<8>(p, s.addr);
  put_be<4>(p + 8, s.key);
  put_be<4>(p + 12, s.length);
}
WireSge get_wire_sge_be(const std::uint8_t* p) {
  return WireSge{get_be<8>(p), static_cast<std::uint32_t>(get_be<4>(p + 8)),
                 static_cast<std::uint32_t>(get_be<4>(p + 12))};
}

}  // namespace

std::array<std::uint8_t, kMessageSize> encode_message(std::uint32_t msg) {
  std::array<std::uint8_t, kMessageSize> b{};
  put_le<4>(b.data(), msg);
  return b;
}

std::uint32_t decode_message(std::span<const std::uint8_t> bytes) {
  std::array<std::uint8_t, kMessageSize> b{};
  std::copy_n(bytes.begin(), std::min(bytes.size(), b.size()), b.begin());
  return static_cast<std::uint32_t>(get_le<4>(b.data()));
}

std::array<std::uint8_t, kSgeSize> encode_sge(const WireSge& sge) {
  std::array<std::uint8_t, kSgeSize> b{};
  put_le<8>(b.data(), sge.addr);
  put_le<4>(b.data() + 8, sge.key);
  put_le<4>(b.data() + 12, sge.length);
  return b;
}

WireSge decode_sge(std::span<const std::uint8_t, kSgeSize> bytes) {
  return WireSge{get_le<8>(bytes.data()), static_cast<std::uint32_t>(get_le<4>(bytes.data() + 8)),
                 static_cast<std::uint32_t>(get_le<4>(bytes.data() + 12))};
}

std::array<std::uint8_t, kIomapEntrySize> encode_iomap(const IomapEntry& entry) {
  std::array<std::uint8_t, kIomapEntrySize> b{};
  put_le<8>(b.data(), entry.offset);
  const auto sge = encode_sge(entry.sge);
  std::copy(sge.begin(), sge.end(), b.begin() + 8);
  return b;
}

IomapEntry decode_iomap(std::span<const std::uint8_t, kIomapEntrySize> bytes) {
  return IomapEntry{get_le<8>(bytes.data()), decode_sge(bytes.subspan<8, kSgeSize>())};
}

std::array<std::uint8_t, kConnDataSize> encode_conn_data(const ConnData& conn) {
  std::array<std::uint8_t, kConnDataSize> b{};
  b[0] = conn.version;
  b[1] = conn.flags;
  put_be<2>(b.data() + 2, conn.credits);
  b[7] = conn.iomap_scale;
  put_wire_sge_be(b.data() + 8, conn.target_sgl);
  put_wire_sge_be(b.data() + 24, conn.data_buf);
  return b;
}

std::optional<ConnData> decode_conn_data(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < kConnDataSize) return std::nullopt;
  ConnData c;
  c.version = bytes[0];
  c.flags = bytes[1];
  c.credits = static_cast<std::uint16_t>(get_be<2>(bytes.data() + 2));
  c.iomap_scale = bytes[7];
  c.target_sgl = get_wire_sge_be(bytes.data() + 8);
  c.data_buf = get_wire_sge_be(bytes.data() + 24);
  return c;
}

std::uint8_t iomap_scale_of(int entries) {
  if (entries <= 0) return 0;
  if (entries <= 128) return static_cast<std::uint8_t>(entries);
  return static_cast<std::uint8_t>(128 | std::min(entries >> 8, 127));
}

int iomap_entries_of(std::uint8_t scale) {
  return scale <= 128 ? scale : (scale & 127) << 8;
}

ReceiveRing::ReceiveRing(std::uint32_t size, std::uint16_t depth)
    : size_(size & ~1u),
      depth_(std::max<std::uint16_t>(depth, 1)),
      offered_(size_ / 2),
      free_unoffered_(size_ / 2),
      next_offer_(size_ / 2),
      lengths_(depth_),
      credit_mark_(static_cast<std::uint16_t>(depth_ / 2)) {}

void ReceiveRing::set_peer_sgl_entries(std::uint32_t entries) {
  peer_sgl_entries_ = std::max<std::uint32_t>(entries, 1);
  next_sgl_ %= peer_sgl_entries_;
}

bool ReceiveRing::on_data(std::uint32_t length) {
  if (length > offered_ - announced_) return false;
  if (length == 0) {  // takes a credit and nothing else: taken at once
    ++taken_;
    return true;
  }
  if (messages_ >= depth_) return false;
  lengths_[(head_ + messages_) % depth_] = length;
  ++messages_;
  announced_ += length;
  return true;
}

std::array<ReceiveRing::Piece, 2> ReceiveRing::pieces(std::uint64_t n) const {
  n = std::min(n, readable());
  const auto start = static_cast<std::uint32_t>(consumed_ % size_);
  const auto first = static_cast<std::uint32_t>(std::min<std::uint64_t>(n, size_ - start));
  return {Piece{start, first}, Piece{0, static_cast<std::uint32_t>(n - first)}};
}

void ReceiveRing::consume(std::uint64_t n) {
  n = std::min(n, readable());
  consumed_ += n;
  free_unoffered_ += n;
  while (n > 0 && messages_ > 0) {
    const auto take = static_cast<std::uint32_t>(std::min<std::uint64_t>(n, lengths_[head_]));
    lengths_[head_] -= take;
    n -= take;
    if (lengths_[head_] == 0) {
      head_ = (head_ + 1) % depth_;
      --messages_;
      ++taken_;
    }
  }
}

bool ReceiveRing::credit_due() const {
  return free_unoffered_ >= half() || static_cast<std::int16_t>(taken_ - credit_mark_) >= 0;
}

ReceiveRing::CreditUpdate ReceiveRing::take_credit_update() {
  CreditUpdate u;
  credit_mark_ = static_cast<std::uint16_t>(taken_ + depth_ / 2);
  u.credits = (static_cast<std::uint32_t>(taken_) + depth_) & kMessageDataMask;
  if (free_unoffered_ >= half() && half() > 0) {
    u.offer = next_offer_;
    u.sgl_index = next_sgl_;
    next_offer_ += half();
    if (next_offer_ >= size_) next_offer_ = 0;
    next_sgl_ = (next_sgl_ + 1) % peer_sgl_entries_;
    offered_ += half();
    free_unoffered_ -= half();
  }
  return u;
}

}  // namespace uwarp::rdmacm::rs
