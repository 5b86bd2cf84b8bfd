// Receive side of MPA framing over a TCP byte stream (RFC 5044 section 4, with the DDP segment
// header of RFC 5041 section 4): a resumable state machine that takes the stream in pieces of any
// size (partial reads, several FPDUs per read, an FPDU split anywhere), parses each FPDU's
// header, asks its sink where the payload goes, places it, and checks pad and CRC.
//
// States, as in Linux siw's receive path: get header, get payload, get trailer. The reader can
// stop anywhere and continue with the next bytes; an FPDU that lies whole in what feed() is
// given (the common case) is taken in one step instead. Two ways to feed it:
//  - feed(): bytes that arrived in a bounce buffer are copied into place;
//  - direct_target() / commit_direct(): the I/O layer receives straight into the placement
//    target (one copy from the kernel), then reports how many bytes landed there.
//
// Thread: not thread-safe; one owner (the connection's progress thread).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "base/bytes.h"
#include "proto/fpdu_sink.h"
#include "wire/crc32c.h"
#include "wire/ddp.h"
#include "wire/fpdu.h"
#include "wire/rdmap.h"

namespace uwarp::proto {

class FpduReader {
 public:
  FpduReader(FpduSink& sink, bool crc_enabled) : sink_(sink), crc_enabled_(crc_enabled) {}

  // Consumes as much of `input` as possible; returns the bytes consumed. Stops early only when
  // failed() or waiting() becomes true.
  std::size_t feed(ConstByteSpan input);
  // The sink asked to wait (Placement::kWait) with a segment's header complete: the reader takes
  // no byte until resume(), which asks the sink again where that segment's payload goes.
  bool waiting() const { return state_ == State::kWait && !failed(); }
  void resume() {
    if (waiting()) begin_segment();
  }

  // A span that the next payload bytes may be received into directly, or empty when the reader
  // needs header or trailer bytes (receive those into a bounce buffer and feed() them).
  ByteSpan direct_target() const;
  // `n` bytes (at most direct_target().size()) were written into direct_target().
  void commit_direct(std::size_t n);

  // Some of the payload still to come is to be placed in `memory`.
  bool places_into(ConstByteSpan memory) const;
  // The segment being received is tagged (its header is complete).
  bool segment_tagged() const {
    return header_complete_ && (header_[wire::kMpaLengthFieldSize] & wire::kDdpFlagTagged) != 0;
  }
  // Reception stops with `code`, as on a violation (the application revoked where the payload
  // goes); nothing more is placed.
  void abort(const wire::TerminateCode& code) {
    if (!failed()) fail(code);
  }

  bool failed() const { return failure_.has_value(); }
  const std::optional<RxFailure>& failure() const { return failure_; }
  // True between FPDUs (no partial FPDU pending).
  bool at_boundary() const { return state_ == State::kHeader && have_ == 0; }
  void set_crc_enabled(bool on) { crc_enabled_ = on; }

 private:
  enum class State : std::uint8_t { kHeader, kWait, kPayload, kTrailer };

  void fail(const wire::TerminateCode& code);
  // feed()'s fast path for an FPDU that lies whole at the start of `in` (the reader between
  // FPDUs): the same steps as the state machine, without its per-state rounds. Returns the
  // bytes consumed, 0 if the FPDU is not whole there (the state machine takes it then).
  std::size_t feed_whole_fpdu(ConstByteSpan in);
  void on_header_complete();
  // The whole header is in header_: decode it, ask the sink where the payload goes.
  void begin_segment();
  void on_payload_bytes(std::size_t n);
  // The payload is complete: pad and CRC come next.
  void begin_trailer();
  void on_trailer_complete();
  void begin_next_scatter();

  FpduSink& sink_;
  bool crc_enabled_;
  State state_ = State::kHeader;
  std::optional<RxFailure> failure_;

  // Header: MPA length field followed by the DDP header.
  std::array<std::uint8_t, wire::kMpaLengthFieldSize + wire::kMaxDdpHeaderSize> header_{};
  std::size_t need_ = wire::kMpaLengthFieldSize + wire::kDdpControlSize;  // bytes wanted in this state
  std::size_t have_ = 0;
  std::size_t ulpdu_length_ = 0;
  std::size_t header_size_ = 0;  // DDP header size of the current segment
  bool header_complete_ = false;  // header_ holds the whole header of the current segment

  // Payload.
  Placement placement_;
  std::size_t payload_left_ = 0;
  std::size_t scatter_index_ = 0;
  std::size_t scatter_offset_ = 0;
  std::array<std::uint8_t, kMaxBufferedPayload> buffered_{};
  std::size_t buffered_size_ = 0;

  // Trailer: pad + CRC.
  std::array<std::uint8_t, 3 + wire::kMpaCrcSize> trailer_{};
  wire::Crc32c crc_;
};

}  // namespace uwarp::proto
