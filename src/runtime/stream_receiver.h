// StreamReceiver: the receive side of one stream. It receives into a buffer and, once a segment
// header says where a large payload goes, straight into that registered memory (one copy), and
// feeds what it received to the connection's engine (RdmapDriver). Its own receives go into the
// calling thread's receive buffer (large: fewer system calls and TCP window updates per byte when
// FPDUs are too small to place directly, as at MSS 1448); a watch's receive, which the kernel
// completes later, goes into the stream's own bounce buffer (small: one per QP).
//
// Contract with the backend (io::IoBackend::watch_readable): after each readiness report it
// receives until the socket is empty (EAGAIN, or a short read) or a bound (then it reports
// `more`, and the stream watches with maybe_readable). -EBUSY (a watch's own receive has the
// next bytes) counts as empty. While the engine waits for a receive (`waiting`) it holds the
// bytes the engine did not take, in the bounce buffer, and receives nothing: the stream must
// not watch (a watch would receive into that buffer); once resumed, receive() feeds them first.
// Everything else it received is fed to the engine before the call returns, so the thread's
// receive buffer holds nothing between calls.
//
// Lock: the stream mutex and the QP lock, held by the caller for every call (the thread is
// whichever holds them: the engine thread or a polling application thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/bytes.h"
#include "io/backend.h"
#include "runtime/rdmap_driver.h"
#include "verbs/queue_pair.h"

namespace uwarp::runtime {

class StreamReceiver {
 public:
  // What a receive call found.
  struct Outcome {
    bool progress = false;  // bytes were received
    bool more = false;      // stopped at the bound, not at an empty socket: receive again soon
    bool ended = false;     // the stream ended: `status` is 0 (the peer closed) or -errno
    long status = 0;
    // Reception waits for a receive (RdmapDriver::rx_waiting): the bytes the engine did not take
    // are held here, and nothing more is received until it resumes.
    bool waiting = false;
  };

  StreamReceiver(io::IoBackend& backend, int fd);

  // Feeds the bytes held first, then receives until the socket is empty, the stream ends,
  // reception waits, or kRxRounds receives.
  Outcome receive(verbs::QueuePair& qp, RdmapDriver& rdmap) REQUIRES(qp.mutex());
  // The buffer a watch may receive into (see io::IoBackend::watch_readable), or an empty span
  // when the next bytes are a large payload (this receiver places those itself, one copy).
  ByteSpan watch_buffer();
  // What the backend received into watch_buffer() for the watch: fed to the engine. `more`: the
  // receive was not short, so the socket may hold more.
  Outcome take_watched(verbs::QueuePair& qp, RdmapDriver& rdmap, long received)
      REQUIRES(qp.mutex());
  // Bytes that came with the MPA exchange, before the stream started: fed (held if the engine
  // waits for a receive). True if it waits.
  bool feed_early(verbs::QueuePair& qp, RdmapDriver& rdmap, ConstByteSpan bytes)
      REQUIRES(qp.mutex());
  // Looks at the engine after its bytes were handled: is a large placement target next?
  void note_direct_target(verbs::QueuePair& qp, RdmapDriver& rdmap) REQUIRES(qp.mutex());
  std::uint64_t bytes() const { return bytes_; }

  // The bounce buffer starts small (an idle QP costs little memory) and doubles, up to the
  // largest size, each time a watch's receive fills it. 32 KiB: 4 KiB Writes over 1000 QPs cost
  // 47 KiB per QP in all (70 KiB with 64 KiB), at the same single-QP speed (docs/performance.md).
  static constexpr std::size_t kBounceInitial = 4 * 1024;
  static constexpr std::size_t kBounceSize = 32 * 1024;
  // Each thread's receive buffer (one per progress thread or polling application thread). A
  // stream's receives into it ask for kBounceInitial at first and twice as much after each that
  // filled what it asked for, up to the whole buffer; a payload placed directly starts them
  // over (when FPDUs are large, bytes received here are copied twice: 64 KiB Reads on loopback
  // lost 10-15 % when they started at 32 KiB). 256 KiB against 32 KiB: ib_write_bw -R 1 MiB
  // between namespaces (MSS 1448) gained 14-36 % in three sets of interleaved pairs, ib_read_bw
  // 1 MiB 32 % (docs/performance.md, "Between namespaces: receives sized for small FPDUs").
  static constexpr std::size_t kThreadBufferSize = 256 * 1024;
  // A placement target at least this large is received into directly.
  static constexpr std::size_t kDirectMin = 2048;
  // Segments of at least this many payload bytes are received ahead of their headers where the
  // engine knows their places (a Read Response's). Not smaller ones: at 1,428-byte FPDUs (veth,
  // MSS 1448) a receive scattered over each payload and the 20-byte trailer and header between
  // cost the requester more than the copy it saves (64 KiB Reads lost a fifth); with 64 KiB
  // FPDUs 1 MiB Reads gained a tenth to a sixth (docs/performance.md, "Read Responses received
  // ahead").
  static constexpr std::size_t kAheadMin = 16 * 1024;
  // With large payloads, a receive into a buffer asks for only this much (trailer, next header),
  // so that the payload itself goes straight to its place; a receive into the place asks for this
  // much after the payload in the same call.
  static constexpr std::size_t kSmallRead = 512;
  // Where in the thread's buffer the bytes of a guess that did not hold are gathered; before it,
  // the trailers and headers of a receive scattered ahead (PlannedReceive).
  static constexpr std::size_t kGatherAt = 8 * 1024;
  // Receives per call before the thread lets others run (each up to the bounce buffer's size,
  // or a direct-placement round).
  static constexpr int kRxRounds = 16;

 private:
  // Receives straight into the placement target while one is pending and large: one system
  // call scattered over it, the places of the segments after it that the engine knows ahead (a
  // Read Response's) with their trailers and headers between, and up to kSmallRead bytes after
  // all of them, into the thread's buffer (PlannedReceive).
  bool receive_direct(verbs::QueuePair& qp, RdmapDriver& rdmap, long& status) REQUIRES(qp.mutex());
  // Feeds `received`, what a receive that asked for `want` bytes got; false if the receive was
  // short (the socket is empty) or the engine began to wait (the rest is held).
  bool feed_received(verbs::QueuePair& qp, RdmapDriver& rdmap, ConstByteSpan received,
                     std::size_t want) REQUIRES(qp.mutex());
  // Feeds `bytes` (after a Terminate the engine drops them); what it did not take because it
  // waits for a receive is held. False if it waits.
  bool feed(verbs::QueuePair& qp, RdmapDriver& rdmap, ConstByteSpan bytes) REQUIRES(qp.mutex());
  // Keeps `rest` at the start of the bounce buffer (it may already lie in it).
  void hold(ConstByteSpan rest);
  bool holding() const { return held_ > 0; }
  // How much the next receive into a buffer of `size` bytes asks for.
  std::size_t next_want(std::size_t size) const;

  io::IoBackend& backend_;
  const int fd_;
  std::vector<std::uint8_t> bounce_;  // a watch's receives; the bytes held
  // The last receive that got bytes placed a large payload directly (an empty receive into a
  // buffer leaves it set: the next one still asks for kSmallRead, not a payload's worth to copy).
  bool large_payloads_ = false;
  std::size_t thread_want_ = kBounceInitial;  // what a receive into the thread's buffer asks for
  bool direct_pending_ = false;  // when last looked, a large placement target waited
  std::size_t watch_want_ = 0;   // how many bytes the watch's receive asks for
  std::size_t held_ = 0;         // bounce_[0, held_): received, not yet taken
  std::uint64_t bytes_ = 0;
};

}  // namespace uwarp::runtime
