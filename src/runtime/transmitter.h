// Transmitter: the transmit side of one stream. It fills batches of FPDUs from the
// connection's engine (RdmapDriver) and sends them with vectored non-blocking sends, inline on
// the calling thread while the socket takes them, else on the engine thread once the backend
// reports the socket writable (watch_writable). It reports each message handed to TCP
// completely, sizes FPDUs from the TCP MSS and the socket's unsent bytes from the engine's send
// budget, and closes the write side once asked and drained. It acts on what the QP asks of it
// (verbs::TxRequests, collected by the driver: drop the queued bytes of flushed requests, close)
// before it sends again.
//
// Sends and the QP lock. The batch is filled, and every send's result applied to it, under the
// QP lock. A posting thread (SendMode::kReleasing) makes its send system calls with the QP lock
// released, so that a thread the scheduler preempts on its way out of the call (the send woke
// the peer) holds no lock that the progress thread needs to place what arrives; every other
// thread sends under the lock. One send is under way at a time: while a send made without the
// lock has not been settled (its byte count applied to the batch), nobody touches the batch and
// nobody else sends; the thread that made it carries on with whatever was queued meanwhile once
// it has the lock back. A thread that gives memory back (a flush, a deregistration, unbinding)
// first waits for that send's call to return (settle_send): no send reads application memory
// after the QP has given it back.
//
// Lock: the QP lock, held by the caller for every call (the posting thread, a polling thread
// or the engine thread); the members belong to the engine thread once the QP is unbound.
// wire_mu_ is taken after the QP lock, and is held by the thread making a send without the QP
// lock from before it releases the QP lock until the call has returned.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/mutex.h"
#include "io/backend.h"
#include "proto/tx_batch.h"
#include "runtime/engine.h"
#include "runtime/rdmap_driver.h"
#include "verbs/queue_pair.h"

namespace uwarp::runtime {

class Transmitter {
 public:
  // What a call left for the stream to do.
  enum class Outcome : std::uint8_t {
    kNone,
    kFailed,  // a send failed (error()), reported once: no more sends; the stream is to end
  };

  // Whether the caller's send system calls may release the QP lock: only a thread that holds
  // the QP lock alone, keeps the QP alive across the call (an application's call into the QP)
  // and keeps this transmitter alive (Stream::doorbell).
  enum class SendMode : std::uint8_t { kUnderLock, kReleasing };

  Transmitter(Engine& engine, int fd);

  // The largest ULPDU for the connection's MSS as it is now (read once, at attach), or for
  // `fpdu_size` where that is larger (verbs::LinkParams::fpdu_size; kept for later refreshes).
  std::size_t first_max_ulpdu(std::size_t fpdu_size);
  // Collects the QP's requests, then fills and sends until the socket is full, the engine has
  // nothing, or sending stopped. Does nothing while another thread's send made without the QP
  // lock is under way (that thread carries on). With kReleasing the QP lock is released and
  // taken again around each send: the caller must not rely on what it read under the lock
  // before, and `rdmap` may have been destroyed when it returns (the stream unbound the QP
  // meanwhile: stop()).
  Outcome pump(verbs::QueuePair& qp, RdmapDriver& rdmap, SendMode mode = SendMode::kUnderLock)
      REQUIRES(qp.mutex());
  // The socket has send space (io::IoHandler::on_writable): sends what is queued.
  Outcome on_writable(verbs::QueuePair& qp, RdmapDriver& rdmap) REQUIRES(qp.mutex());
  // A polling application thread (Stream::poll_rx): if the socket was full, tries again now
  // instead of leaving the rest to the engine thread. The backend's write watch stays armed and
  // still fires once (on_writable then sends what is left, if anything); no second one is armed
  // meanwhile.
  Outcome poll_send(verbs::QueuePair& qp, RdmapDriver& rdmap) REQUIRES(qp.mutex());
  // Waits until no send made without the QP lock is still in its system call, and applies its
  // result to the batch. It touches nothing but this transmitter, so the QP may call it from
  // inside a call the stream makes into it (verbs::QpLink::settle_send).
  void settle_send(verbs::QueuePair& qp) REQUIRES(qp.mutex()) { settle(qp, /*wait=*/true); }
  // The stream is ending: settles a send under way and reports the messages whose last byte TCP
  // has taken, before the QP flushes what is left. Their sends completed, even if the peer
  // closed while the posting thread was still in its send call.
  void settle_and_report(verbs::QueuePair& qp, RdmapDriver& rdmap) REQUIRES(qp.mutex()) {
    settle_send(qp);
    report_sent(qp, rdmap);
  }
  // Some byte still to send is read from `memory` (a revocation must fail the connection); a
  // send under way is settled first.
  bool reads_from(verbs::QueuePair& qp, const proto::RevokedRegion& revoked) REQUIRES(qp.mutex()) {
    settle_send(qp);
    return batch_.reads_from(revoked);
  }
  // No more sends (the QP is being unbound); a send under way is settled first.
  void stop(verbs::QueuePair& qp) REQUIRES(qp.mutex()) {
    settle_send(qp);
    stopped_ = true;
  }

  // The stream is to close: the QP asked for it, or failed (its Terminate, if it queued one, is
  // the last thing sent). The write side shuts once the batch is sent.
  bool closing() const { return shutdown_requested_ || qp_failed_; }
  bool write_shut() const { return write_shut_; }
  long error() const { return error_; }  // of the settled sends (settle_send)
  std::string failure() const;  // the failed send's error, as a reason
  std::uint64_t bytes() const { return bytes_; }

 private:
  void fill_and_send(verbs::QueuePair& qp, RdmapDriver& rdmap, SendMode mode) REQUIRES(qp.mutex());
  // Sends the batch's pending bytes with the QP lock released, and takes it back. Returns true
  // if the caller goes on: its send is settled and sending has not stopped meanwhile.
  bool send_releasing(verbs::QueuePair& qp) REQUIRES(qp.mutex());
  // If a send made without the QP lock is unsettled, applies its result once its call has
  // returned (wait: blocks until then, else gives up if it has not). True if none is unsettled.
  bool settle(verbs::QueuePair& qp, bool wait) REQUIRES(qp.mutex());
  // Applies a send system call's result (bytes taken, a full socket, an error) to the batch.
  void apply_result(verbs::QueuePair& qp, long n) REQUIRES(qp.mutex());
  // Reports the messages sent completely to the engine, then collects the QP's requests.
  void report_sent(verbs::QueuePair& qp, RdmapDriver& rdmap) REQUIRES(qp.mutex());
  // What the QP asked since the last take: acted on now.
  void collect(verbs::QueuePair& qp, RdmapDriver& rdmap) REQUIRES(qp.mutex());
  // Drops what is queued after the FPDU being sent (the QP flushed the requests it belongs to).
  void abandon();
  Outcome finish();
  // Linux siw reads the MSS before each FPDU; here at most every kMssRecheck.
  void refresh_fpdu_size(RdmapDriver& rdmap);
  // Sets the socket's TCP_NOTSENT_LOWAT to this stream's share of the engine's send budget
  // when that share has changed.
  void apply_send_share();

  static constexpr std::chrono::milliseconds kMssRecheck{100};

  Engine& engine_;
  const int fd_;
  proto::TxBatch batch_;
  bool write_watched_ = false;  // the socket was full: waiting for on_writable (or poll_send)
  bool watch_armed_ = false;    // watch_writable was called; its on_writable has not come yet
  long error_ = 0;              // a send failed (-errno)
  bool failed_now_ = false;     // ... and the stream has not yet been told
  bool shutdown_requested_ = false;
  bool qp_failed_ = false;  // the QP entered ERROR (an abandon was collected)
  bool write_shut_ = false;
  bool stopped_ = false;
  std::uint64_t bytes_ = 0;
  std::size_t mss_ = 0;
  std::size_t fpdu_size_ = 0;        // the FPDU size asked for beyond the MSS (0: none)
  Clock::time_point mss_checked_{};  // when refresh_fpdu_size last read the MSS
  std::size_t notsent_lowat_ = 0;    // the share last set on the socket (0: the kernel's default)
  // A send made without the QP lock has not been settled: nobody touches batch_ but settle().
  bool unsettled_ = false;
  Mutex wire_mu_;
  long wire_result_ GUARDED_BY(wire_mu_) = 0;  // that send's result
};

// The largest ULPDU for a TCP MSS, as Linux siw sizes FPDUs: the MSS rounded down to a multiple
// of 8 bounds the whole FPDU, so each FPDU fits in one segment.
std::size_t max_ulpdu_for_mss(std::size_t mss);
// The same for FPDUs of `fpdu_size` bytes where the MSS is smaller (0: the MSS alone). Such FPDUs
// span segments: uwarp's and Linux siw's receivers reassemble them, as RFC 5044 requires of a
// receiver; a hardware RNIC may expect one FPDU per segment (ConnectionParams::fpdu_size).
std::size_t max_ulpdu_for(std::size_t mss, std::size_t fpdu_size);

}  // namespace uwarp::runtime
