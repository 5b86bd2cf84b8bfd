// Receive side of MPA framing over a TCP byte stream (RFC 5044 section 4, with the DDP segment
// header of RFC 5041 section 4): a resumable state machine that takes the stream in pieces of any
// size (partial reads, several FPDUs per read, an FPDU split anywhere), parses each FPDU's
// header, asks its sink where the payload goes, places it, and checks pad and CRC.
//
// With markers (RFC 5044 section 5, wire/mpa_marker.h) the reader takes a marker wherever the
// stream reaches a multiple of 512 bytes since the first FPDU, checks that it points back to the
// start of its FPDU (else the connection ends with the LLP Terminate 0x03, "marker and ULPDU
// length mismatch") and counts it in the CRC; no payload byte is placed across a marker's place.
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
#include "wire/mpa_marker.h"
#include "wire/rdmap.h"

namespace uwarp::proto {

class FpduReader {
 public:
  FpduReader(FpduSink& sink, bool crc_enabled, bool markers = false)
      : sink_(sink), crc_enabled_(crc_enabled), markers_(markers) {}

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
  // needs header or trailer bytes, or places into memory that may fault (receive those into a
  // bounce buffer and feed() them).
  ByteSpan direct_target() const;
  // `n` bytes (at most direct_target().size()) were written into direct_target().
  void commit_direct(std::size_t n);

  // A receive scattered ahead of the headers: the stream's next bytes as pieces, in order. First
  // the rest of the payload being received, in place (or of the trailer being received), then,
  // for each later segment whose place the sink knows ahead (FpduSink::placement_ahead; each
  // guessed as long as the current one), a piece for the trailer before it and its header, to
  // be received into a buffer and fed, and its payload in that place. At most out.size() pieces
  // and `most` bytes; only without markers, for memory that does not fault, past a payload in
  // one span, and only segments of at least `min_ahead` payload bytes (the current one too).
  // Returns the pieces written (0: nothing to receive in place). The pieces are guesses:
  // take_in_place() takes a piece's bytes only where the headers that came put them, and the
  // caller feeds the rest.
  struct Piece {  // trivial: arrays of them cost nothing to set up
    std::uint8_t* place;  // where it is received in place; null: into a buffer, to be fed
    std::size_t size;
  };
  std::size_t plan_ahead(std::span<Piece> out, std::size_t most, std::size_t min_ahead);
  // `bytes`, received into a piece's place, are the stream's next bytes: takes those that belong
  // exactly there (the payload being received goes to bytes.data()); returns how many.
  std::size_t take_in_place(ByteSpan bytes);
  // The next bytes are payload (fed, they would be placed).
  bool in_payload() const { return state_ == State::kPayload && !failed(); }

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
  // True between FPDUs (no partial FPDU pending, not even its leading marker).
  bool at_boundary() const {
    return state_ == State::kHeader && have_ == 0 && stream_at_ == fpdu_start_ && marker_have_ == 0;
  }
  void set_crc_enabled(bool on) { crc_enabled_ = on; }
  // FPDUs received whole and taken (their CRC checked, their segment accepted), so far.
  std::uint64_t fpdus() const { return fpdus_; }

 private:
  enum class State : std::uint8_t { kHeader, kWait, kPayload, kTrailer };

  void fail(const wire::TerminateCode& code);
  // Bytes before the next marker's place (0: a marker is due now); only with markers.
  std::size_t to_marker() const {
    return (wire::kMarkerInterval - wire::marker_phase(stream_at_)) % wire::kMarkerInterval;
  }
  // Takes bytes of the marker that is due; returns how many. A whole marker is checked.
  std::size_t take_marker(ConstByteSpan in);
  // Copies trailer bytes (the pad counts in the CRC as it comes, before a marker after it); the
  // caller advances the stream position.
  void take_trailer(ConstByteSpan in);
  // `n` stream bytes of header, payload or trailer were taken.
  void advance(std::size_t n) { stream_at_ += n; }
  // feed()'s fast path for an FPDU that lies whole at the start of `in` (the reader between
  // FPDUs): the same steps as the state machine, without its per-state rounds. Returns the
  // bytes consumed, 0 if the FPDU is not whole there (the state machine takes it then).
  std::size_t feed_whole_fpdu(ConstByteSpan in);
  void on_header_complete();
  // The whole header is in header_: decode it, ask the sink where the payload goes.
  void begin_segment();
  // Where the next payload bytes go (direct_target(), whatever the memory).
  ByteSpan payload_target() const;
  // `n` payload bytes landed in payload_target(): their CRC is read from there.
  void on_payload_bytes(std::size_t n);
  // `n` payload bytes were placed (their CRC taken already): the reader moves on.
  void payload_placed(std::size_t n);
  // The payload is complete: pad and CRC come next.
  void begin_trailer();
  void on_trailer_complete();
  void begin_next_scatter();

  FpduSink& sink_;
  bool crc_enabled_;
  const bool markers_;
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
  // Over the FPDU's bytes as they are taken, markers included; reset where an FPDU ends.
  wire::Crc32c crc_;

  // Where the reader is in the stream: bytes taken since the first FPDU (markers included), and
  // where the current FPDU began (its leading marker's place, if it has one).
  std::uint64_t stream_at_ = 0;
  std::uint64_t fpdu_start_ = 0;
  std::array<std::uint8_t, wire::kMarkerSize> marker_{};  // a marker split across feeds
  std::size_t marker_have_ = 0;
  std::uint64_t fpdus_ = 0;
};

}  // namespace uwarp::proto
