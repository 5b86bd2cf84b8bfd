#include "tcp_frames.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "proto/wire_image.h"
#include "runtime/transmitter.h"
#include "wire/ddp.h"
#include "wire/fpdu.h"

namespace uwarp::perf {
namespace {

constexpr std::size_t kHeaderBytes = wire::kMpaLengthFieldSize + wire::kTaggedHeaderSize;
// The most a frame adds to its payload: header, up to 3 bytes of pad, trailer.
constexpr std::size_t kFrameOverhead = kHeaderBytes + 3 + wire::kMpaCrcSize;
// The receiver's buffer: as large as each uwarp progress thread's (StreamReceiver).
constexpr std::size_t kReceiveBuffer = 256 * 1024;
// Pad and trailer of every frame: zeros (CRC off).
constexpr std::uint8_t kZeros[8] = {};

}  // namespace

std::size_t frame_payload_for_mss(std::size_t mss) {
  const std::size_t ulpdu = runtime::max_ulpdu_for_mss(mss);
  return ulpdu > wire::kTaggedHeaderSize ? ulpdu - wire::kTaggedHeaderSize : 4;
}

FrameSender::Header FrameSender::header_for(std::size_t payload) {
  Header h{};
  const std::size_t ulpdu = wire::kTaggedHeaderSize + payload;
  h[0] = static_cast<std::uint8_t>(ulpdu >> 8);
  h[1] = static_cast<std::uint8_t>(ulpdu);
  h[2] = wire::kDdpFlagTagged | wire::kDdpVersion;
  return h;
}

bool FrameSender::send_message(int fd, const std::uint8_t* src, std::size_t size) {
  const bool small_frames = wire::fpdu_size(wire::kTaggedHeaderSize + max_payload_) <=
                            proto::WireImagePool::kMaxFpduBytes;
  return small_frames && size <= proto::WireImagePool::kMaxMessageBytes
             ? send_image(fd, src, size)
             : send_gathered(fd, src, size);
}

bool FrameSender::send_image(int fd, const std::uint8_t* src, std::size_t size) {
  image_.resize((size / max_payload_ + 1) * (max_payload_ + kFrameOverhead));
  std::uint8_t* p = image_.data();
  for (std::size_t offset = 0; offset < size;) {
    const std::size_t payload = std::min(max_payload_, size - offset);
    const Header h = header_for(payload);
    std::memcpy(p, h.data(), h.size());
    std::memcpy(p + h.size(), src + offset, payload);
    const std::size_t trailer =
        wire::fpdu_pad_length(wire::kTaggedHeaderSize + payload) + wire::kMpaCrcSize;
    std::memset(p + h.size() + payload, 0, trailer);
    p += h.size() + payload + trailer;
    offset += payload;
  }
  iov_[0] = {image_.data(), static_cast<std::size_t>(p - image_.data())};
  return send_iovecs(fd, 1);
}

bool FrameSender::send_gathered(int fd, const std::uint8_t* src, std::size_t size) {
  const Header full = header_for(max_payload_);
  Header last{};
  std::size_t offset = 0;
  while (offset < size) {
    std::size_t n = 0;
    for (std::size_t f = 0; f < kFramesPerSend && offset < size; ++f) {
      const std::size_t payload = std::min(max_payload_, size - offset);
      const Header* h = &full;
      if (payload != max_payload_) {
        last = header_for(payload);
        h = &last;
      }
      iov_[n++] = {const_cast<std::uint8_t*>(h->data()), h->size()};
      iov_[n++] = {const_cast<std::uint8_t*>(src + offset), payload};
      const std::size_t pad = wire::fpdu_pad_length(wire::kTaggedHeaderSize + payload);
      iov_[n++] = {const_cast<std::uint8_t*>(kZeros), pad + wire::kMpaCrcSize};
      offset += payload;
    }
    if (!send_iovecs(fd, n)) return false;
  }
  return true;
}

bool FrameSender::send_iovecs(int fd, std::size_t n) {
  std::size_t first = 0;
  while (first < n) {
    msghdr m{};
    m.msg_iov = iov_.data() + first;
    m.msg_iovlen = n - first;
    ssize_t k = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    while (first < n && static_cast<std::size_t>(k) >= iov_[first].iov_len) {
      k -= static_cast<ssize_t>(iov_[first].iov_len);
      ++first;
    }
    if (first < n) {
      iov_[first].iov_base = static_cast<std::uint8_t*>(iov_[first].iov_base) + k;
      iov_[first].iov_len -= static_cast<std::size_t>(k);
    }
  }
  return true;
}

FrameReceiver::FrameReceiver(std::size_t max_payload)
    : max_payload_(max_payload), buf_(kReceiveBuffer) {}

bool FrameReceiver::receive_message(int fd, std::uint8_t* dst, std::size_t size) {
  std::size_t placed = 0;
  while (placed < size) {
    // Take every whole frame received.
    while (end_ - begin_ >= kHeaderBytes) {
      const std::uint8_t* p = buf_.data() + begin_;
      const std::size_t ulpdu = std::size_t{p[0]} << 8 | p[1];
      if (ulpdu < wire::kTaggedHeaderSize) return false;
      const std::size_t payload = ulpdu - wire::kTaggedHeaderSize;
      if (payload > max_payload_ || payload > size - placed) return false;
      const std::size_t frame = wire::fpdu_size(ulpdu);
      if (end_ - begin_ < frame) break;
      std::memcpy(dst + placed, p + kHeaderBytes, payload);
      placed += payload;
      begin_ += frame;
      if (placed == size) return true;
    }
    // Keep the start of the next frame, then receive after it.
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    const ssize_t k = ::recv(fd, buf_.data() + end_, buf_.size() - end_, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    end_ += static_cast<std::size_t>(k);
  }
  return true;
}

}  // namespace uwarp::perf
