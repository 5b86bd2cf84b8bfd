// FPDU-shaped TCP, for the raw TCP baseline's --framed stream: each message goes over the
// connection as uwarp carries an RDMA Write where FPDUs fit the TCP segment (RFC 5044 section 4:
// the 2-byte length field, a tagged DDP header's 14 bytes, the payload, pad and the 4-byte
// trailer, CRC off), with the least work known for it in user space:
// - the sender copies a message of at most 64 KiB, frames and all, into one buffer and sends
//   that, as uwarp does where FPDUs are this small (proto/wire_image.h: the kernel's copy of
//   three pieces per frame cost more than the copy); a larger message it gathers, header,
//   payload and trailer of up to kFramesPerSend frames into one sendmsg, the payload straight
//   from the message;
// - the receiver receives into a buffer of its own and copies each payload to its place (a
//   receive per frame costs more than the copy, and a receive spread over where frames not yet
//   seen would go could write past a Write's end: docs/performance.md).
// Nothing else an RNIC does (no header checks, keys, queues or completions), so what the
// stream costs above plain TCP is what framing itself costs any endpoint over this kernel's TCP.
// Thread: one per object.
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace uwarp::perf {

// The payload of one frame on a connection whose MSS is `mss` (0: not known): as much as an FPDU
// of one segment holds, as uwarp segments a Write there (runtime::max_ulpdu_for_mss).
std::size_t frame_payload_for_mss(std::size_t mss);

class FrameSender {
 public:
  // Frames per sendmsg: three iovecs each, within IOV_MAX (1024).
  static constexpr std::size_t kFramesPerSend = 341;

  explicit FrameSender(std::size_t max_payload) : max_payload_(max_payload) {}
  std::size_t max_payload() const { return max_payload_; }
  // Sends `size` bytes of `src` as frames of up to max_payload bytes each, blocking; false on an
  // error or the peer closing.
  bool send_message(int fd, const std::uint8_t* src, std::size_t size);

 private:
  // Length field and DDP header of a frame with `payload` bytes.
  using Header = std::array<std::uint8_t, 16>;
  static Header header_for(std::size_t payload);
  bool send_image(int fd, const std::uint8_t* src, std::size_t size);
  bool send_gathered(int fd, const std::uint8_t* src, std::size_t size);
  // Sends iov_[0, n), resuming within an iovec after a partial send.
  bool send_iovecs(int fd, std::size_t n);

  const std::size_t max_payload_;
  std::array<iovec, 3 * kFramesPerSend> iov_{};
  std::vector<std::uint8_t> image_;  // send_image's frames
};

class FrameReceiver {
 public:
  // Frames from the peer carry at most `max_payload` bytes (at most 65520).
  explicit FrameReceiver(std::size_t max_payload);
  // Receives frames until `size` payload bytes are at `dst`, in order; bytes that follow stay
  // for the next message. False on an error, the peer closing, or a frame that is not one.
  bool receive_message(int fd, std::uint8_t* dst, std::size_t size);

 private:
  const std::size_t max_payload_;
  std::vector<std::uint8_t> buf_;  // received bytes [begin_, end_) not yet taken
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

}  // namespace uwarp::perf
