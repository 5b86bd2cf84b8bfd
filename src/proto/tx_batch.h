// Transmit side of MPA framing: FPDUs built as scatter/gather lists for one vectored send each
// (RFC 5044 section 4: length, ULPDU, pad, CRC trailer; RFC 5041 section 4 headers; segmentation
// rules of RFC 5041 section 5.1: each segment fits in one FPDU, the L bit marks the last one).
//
// Payload bytes are not copied: iovecs point at registered memory, which the work request keeps
// valid until its completion; only headers, markers and trailers live in the batch. Except for
// messages of at most WireImagePool::kMaxMessageBytes on a connection whose FPDUs are small (its
// FPDU size at most WireImagePool::kMaxFpduBytes, as an MSS of 1448 makes it) and carry no
// markers: their FPDUs are copied whole, payload included, into the batch's wire image when they
// are added, consecutive ones into one iovec (proto/wire_image.h); a batch that gets no image
// frames them with iovecs. With
// markers (RFC 5044 section 5, wire/mpa_marker.h) the batch places one wherever the stream
// reaches a multiple of 512 bytes, splitting the FPDU's pieces there; it keeps the stream's
// place between markers across batches (it is the stream's one batch).
// Thread: not thread-safe; one owner at a time (the QP's transmit lock).
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/bytes.h"
#include "proto/revoked_region.h"
#include "proto/wire_image.h"
#include "wire/ddp.h"
#include "wire/fpdu.h"
#include "wire/mpa_marker.h"

namespace uwarp::proto {

// How FPDUs are framed on one connection, as MPA negotiated it for what this side sends.
struct Framing {
  bool crc = false;
  bool markers = false;
};

class TxBatch {
 public:
  static constexpr std::size_t kMaxIov = 128;
  static constexpr std::size_t kMaxFpdus = 48;
  static constexpr std::size_t kMaxMarks = kMaxFpdus;
  static_assert(kMaxFpdus * WireImagePool::kMaxFpduBytes <= WireImagePool::kImageBytes);

  // `images`: where small FPDUs' wire images come from; null: none (every FPDU as iovecs).
  explicit TxBatch(WireImagePool* images = &WireImagePool::process()) : images_(images) {}
  TxBatch(const TxBatch&) = delete;
  TxBatch& operator=(const TxBatch&) = delete;
  ~TxBatch() { give_back_image(); }

  // The iovecs still to send.
  std::span<const iovec> pending() const {
    return {iov_.data() + sent_iov_, iov_count_ - sent_iov_};
  }
  bool empty() const { return sent_iov_ == iov_count_; }
  std::size_t pending_bytes() const { return queued_bytes_ - sent_bytes_; }
  // FPDUs in the batch (a batch filled from empty: the FPDUs the fill added).
  std::size_t fpdus() const { return fpdus_; }
  // `n` bytes of pending() were sent.
  void consume(std::size_t n);
  // Cookies of messages whose last byte has been sent, oldest first; call after consume().
  bool pop_sent(std::uint64_t& cookie);
  // Forget everything (after a connection error).
  void clear();
  bool can_add_fpdu(std::size_t payload_pieces, Framing f) const {
    return fpdus_ < kMaxFpdus && iov_count_ + payload_pieces + fpdu_iov_overhead(f) <= kMaxIov &&
           marks_ < kMaxMarks;
  }
  std::size_t free_iov() const { return kMaxIov - iov_count_; }
  // iovecs an FPDU takes besides its payload pieces: header and trailer, and with markers (an
  // FPDU of at most wire::kMaxFpduWithMarkers bytes besides them) each marker and the split it
  // makes, and the trailer split in two.
  static constexpr std::size_t fpdu_iov_overhead(Framing f) {
    return f.markers ? kMarkedFpduIovOverhead : 2;
  }
  // `p` is in the batch's own storage (a header, trailer, marker, wire image or the copied rest of
  // an FPDU), not in memory the payload came from.
  bool owns(const void* p) const;
  // Some pending payload byte is read from the revoked region: bytes in its memory, queued from
  // that region or from one not known (add_fpdu's `region`). Bytes in the wire image were copied
  // when their FPDU was added, while the region was valid: they read nothing any more.
  bool reads_from(const RevokedRegion& revoked) const;

  // Appends one FPDU: `header` (the DDP header), then `payload` pieces, pad and the CRC trailer
  // (computed when framing.crc), with markers where they fall when framing.markers. The caller
  // checked can_add_fpdu(payload.size(), framing). `region`: what the payload was resolved
  // through (MessageSegmenter::Message::region), null if not known. `to_image`: copy it into
  // the wire image if the batch has or gets one (the message and the connection's FPDU size
  // allow it: MessageSegmenter::fill).
  void add_fpdu(const wire::DdpHeader& header, std::span<const iovec> payload,
                std::size_t payload_length, Framing framing, const void* region, bool to_image);
  // A connection whose ULPDUs are at most `max_ulpdu` bytes has FPDUs small enough for the image.
  static bool small_fpdu_size(std::size_t max_ulpdu);
  // Records that the message `cookie` ends with the last FPDU added.
  void mark_message_end(std::uint64_t cookie);

  // The QP failed: nothing more of its work requests may be read from their memory. FPDUs not
  // yet started are dropped (their messages are never reported sent); the rest of an FPDU that
  // is partly sent is copied into the batch, so that the stream stays FPDU-aligned for a
  // Terminate. Must not be called while a send of pending() is in progress.
  void abandon_after_current_fpdu();

 private:
  // The most markers an FPDU of wire::kMaxFpduWithMarkers bytes (besides them) can hold.
  static constexpr std::size_t kMaxMarkersPerFpdu =
      (wire::kMaxFpduWithMarkers + wire::kMarkerInterval - 1) /
          (wire::kMarkerInterval - wire::kMarkerSize) +
      1;
  static constexpr std::size_t kMarkedFpduIovOverhead = 2 + 1 + 2 * kMaxMarkersPerFpdu;

  void reset_if_drained();
  // Copies the FPDU into the wire image (taking one if the batch has none) as add_fpdu_iovecs
  // would frame it without markers; false if it is too large or no image is to be had.
  bool add_fpdu_to_image(const wire::DdpHeader& header, std::span<const iovec> payload,
                         std::size_t payload_length, bool with_crc);
  void give_back_image();
  // add_fpdu with markers: header, payload and pad in order, a marker before every byte that
  // falls on a marker's place, one before the CRC if the pad ends there.
  void add_fpdu_iovecs(const wire::DdpHeader& header, std::span<const iovec> payload,
                       std::size_t payload_length, Framing framing, bool to_image);
  void add_fpdu_with_markers(const iovec& header, std::span<const iovec> payload, std::size_t pad,
                             bool with_crc);
  // The stream's place between markers at `offset` bytes into the batch.
  std::size_t phase_at(std::size_t offset) const {
    return wire::marker_phase(phase_start_ + offset);
  }

  std::array<iovec, kMaxIov> iov_{};
  std::array<const void*, kMaxIov> iov_region_{};  // add_fpdu's `region`, for every iovec it added
  std::size_t iov_count_ = 0;
  std::size_t sent_iov_ = 0;
  std::size_t queued_bytes_ = 0;
  std::size_t sent_bytes_ = 0;

  // Header slots: length field + DDP header; trailer slots: pad + CRC.
  std::array<std::array<std::uint8_t, wire::kMpaLengthFieldSize + wire::kMaxDdpHeaderSize>,
             kMaxFpdus>
      headers_{};
  std::array<std::array<std::uint8_t, 8>, kMaxFpdus> trailers_{};
  std::array<std::size_t, kMaxFpdus> fpdu_end_{};  // queued_bytes_ at the end of each FPDU
  std::size_t fpdus_ = 0;
  WireImagePool* const images_;
  std::uint8_t* image_ = nullptr;  // images_'s, held from the first small FPDU until clear()
  std::size_t image_used_ = 0;
  std::vector<std::uint8_t> tail_;  // the copied rest of a partly sent FPDU (abandon)
  // Markers: the stream's place between markers where the batch's first byte goes (kept across
  // clear(), which starts the next batch where the sent bytes ended), and the markers' bytes.
  std::size_t phase_start_ = 0;
  std::array<std::array<std::uint8_t, wire::kMarkerSize>, kMaxIov / 2> markers_{};
  std::size_t markers_used_ = 0;

  struct Mark {
    std::size_t end_offset;  // queued_bytes_ when the message ended
    std::uint64_t cookie;
  };
  std::array<Mark, kMaxMarks> mark_{};
  std::size_t marks_ = 0;
  std::size_t marks_popped_ = 0;
};

// Segments one outbound RDMAP message into FPDUs that fit the connection's FPDU size.
class MessageSegmenter {
 public:
  struct Message {
    wire::DdpHeader header;  // tagged: STag, base TO; untagged: queue, MSN, STag to invalidate
    std::span<const ConstByteSpan> gather;  // payload pieces (registered memory); total = length
    std::size_t length = 0;
    std::uint64_t cookie = 0;
    // The region all of the payload was resolved through (a Read Response's source:
    // ReadSource::keep), or null when not known (the bytes decide: RevokedRegion).
    const void* region = nullptr;
  };

  void start(const Message& m);
  bool active() const { return active_; }
  // Some payload byte not yet segmented is read from the revoked region.
  bool reads_from(const RevokedRegion& revoked) const;
  // Adds FPDUs to `batch` until the message is fully queued (returns true) or the batch is full.
  bool fill(TxBatch& batch, std::size_t max_ulpdu, Framing framing);

 private:
  Message msg_;
  bool active_ = false;
  std::size_t offset_ = 0;  // payload bytes already segmented
  std::size_t piece_ = 0;   // gather position of offset_
  std::size_t piece_offset_ = 0;
};

}  // namespace uwarp::proto
