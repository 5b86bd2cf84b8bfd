// What the FPDU reader (fpdu_reader.h) asks of the layer above it, segment by segment: where a
// segment's payload goes (Placement) and what its end means (FpduSink); and why reception
// stopped (RxFailure), which feeds the one Terminate.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "base/bytes.h"
#include "wire/ddp.h"
#include "wire/rdmap.h"

namespace uwarp::proto {

// Where the payload of one DDP segment goes.
struct Placement {
  enum class Kind : std::uint8_t {
    kScatter,   // into `scatter`, in order; the spans' total size equals the payload length
    kBuffered,  // into the reader's own buffer (at most kMaxBufferedPayload bytes), handed to
                // on_segment_end; for Read Requests and Terminates
    kReject,    // protocol violation: the connection terminates with `error`
    kDiscard,   // read and drop the payload (after a Terminate, the stream is only drained)
    kWait,      // not yet: the reader stops before the payload (FpduReader::waiting) and asks
                // again when resumed (a receiver not ready for an untagged message)
  };
  Kind kind = Kind::kReject;
  std::span<const ByteSpan> scatter;  // owned by the sink; valid until on_segment_end
  wire::TerminateCode error;  // kReject: the Terminate; on_demand: the one for a fault
  // kScatter: the memory may fault (on-demand paging): it is written by copies that report a
  // fault (base/faulting_memory.h), never received into directly, and a fault fails the stream
  // with `error`.
  bool on_demand = false;

  static Placement into(std::span<const ByteSpan> s) { return {Kind::kScatter, s, {}, false}; }
  static Placement buffered() { return {Kind::kBuffered, {}, {}, false}; }
  static Placement reject(wire::TerminateCode e) { return {Kind::kReject, {}, e, false}; }
  static Placement discard() { return {Kind::kDiscard, {}, {}, false}; }
  static Placement wait() { return {Kind::kWait, {}, {}, false}; }
};

inline constexpr std::size_t kMaxBufferedPayload = wire::kTerminateMaxSize + 64;

class FpduSink {
 public:
  virtual ~FpduSink() = default;
  // The ULPDU header of the next segment is complete. `payload_length` excludes the DDP header.
  virtual Placement on_segment_header(const wire::DdpHeader& header, std::size_t payload_length) = 0;
  // The segment's trailer arrived and its CRC (if on) matched. `buffered` holds the payload for
  // Placement::kBuffered, else is empty. Returns a Terminate code to end the connection.
  virtual std::optional<wire::TerminateCode> on_segment_end(ConstByteSpan buffered) = 0;
  // Where `length` payload bytes would go that begin `skip` payload bytes after the current
  // segment's (a tagged one, its header complete), if later segments of the same message carry
  // them: only memory that the message is bound to write in full whatever its segmentation, so
  // that bytes put there before their headers are read (FpduReader::plan_ahead) harm nothing
  // when the guess is wrong; at most `length` bytes (fewer where the message ends), else empty.
  virtual ByteSpan placement_ahead(std::size_t /*skip*/, std::size_t /*length*/) { return {}; }
};

// Why reception stopped for good; the copied header feeds the Terminate message.
struct RxFailure {
  wire::TerminateCode code;
  bool have_header = false;
  std::uint16_t ulpdu_length = 0;
  std::array<std::uint8_t, wire::kMaxDdpHeaderSize> header{};  // the terminated DDP header
  std::size_t header_size = 0;
  std::array<std::uint8_t, wire::kReadRequestSize> rdmap_header{};  // a terminated Read Request
  bool have_rdmap_header = false;
};

}  // namespace uwarp::proto
