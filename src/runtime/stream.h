// Stream: drives one connected QP over its TCP socket. It receives into a bounce buffer and,
// once a segment header says where a large payload goes, straight into registered memory
// (one copy); it transmits the QP's FPDU batches with vectored sends, inline from the posting
// thread when the socket accepts them, else from the engine thread once it is writable.
//
// Receiving: the backend reports readiness (watch_readable / on_readable); the receive system
// calls are made here, under mu_ and the QP lock, by whichever thread gets mu_: the engine
// thread on readiness, or an application thread polling a CQ of the QP (poll_rx, via
// verbs::CqPollSource), which only try-locks mu_ and so never waits for the engine thread.
// A watch names the bounce buffer, and a backend that can (io_uring) reads the first bytes into
// it itself; until that report has been handled, receives by a poller say -EBUSY (a poller's
// claim still makes the engine thread stop watching after it).
//
// Hand-off: an application that spins on a CQ (polls again within kSpinGap) claims the stream
// for kHandoff. A readiness report that finds the stream claimed is left to the poller: the
// engine thread does not watch again (the backend then stops waking it for this socket) and
// checks back when the claim lapses, then every kRecheck while it is renewed. Once the
// application has not polled for kHandoff, or arms the CQ (cq_armed: at once), the engine
// thread receives and watches again. So bytes wait for a receiver at most kHandoff after the
// application's last poll, or kRecheck after the engine's previous check, even if the
// application stops polling for good.
//
// Locking (docs/threading.md): mu_ guards qp_ and the receive state; I/O callbacks and poll_rx
// take mu_ and then the QP lock; QpLink calls arrive with the QP lock held and never take mu_.
// All other state is guarded by the QP lock while qp_ is set, and belongs to the engine thread
// after detach.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "io/backend.h"
#include "proto/tx_batch.h"
#include "runtime/engine.h"
#include "verbs/queue_pair.h"

namespace uwarp::runtime {

class StreamObserver {
 public:
  virtual ~StreamObserver() = default;
  // Responder in peer-to-peer mode: the RTR arrived; the connection is established.
  virtual void stream_rtr_received() = 0;
  // The stream is gone (engine thread). graceful: an orderly close at a message boundary.
  virtual void stream_closed(bool graceful, const std::string& why) = 0;
};

class Stream final : public io::IoHandler,
                     public verbs::QpLink,
                     public verbs::CqPollSource,
                     public std::enable_shared_from_this<Stream> {
 public:
  Stream(Engine& engine, io::Fd fd, verbs::QueuePair& qp, std::weak_ptr<StreamObserver> observer);
  ~Stream() override;

  // Engine thread: binds the QP with the negotiated parameters (it enters RTS), feeds bytes that
  // arrived with the MPA exchange, and starts I/O.
  void start(const verbs::LinkParams& params, ConstByteSpan early_bytes);
  // Any thread: unbinds the QP now (it must not be used by this stream again) and closes.
  void abort();
  // Graceful disconnect: flush, close the write side, wait for the peer's close (bounded).
  void disconnect();
  int fd() const { return fd_.get(); }

  // verbs::QpLink (QP lock held).
  void tx_ready() override;
  void rtr_received() override;
  void shutdown_requested() override;
  void tx_abandon() override;

  // io::IoHandler (engine thread).
  void on_readable(std::optional<long> received) override;
  void on_send(long result) override;

  // Any thread, no locks held: receives and processes what the socket holds, exactly as the
  // engine thread would, unless another thread is inside the stream (then returns false at
  // once). claim: the caller will keep polling (see Hand-off above). Returns true if bytes were
  // received or the stream ended.
  bool poll_rx(bool claim);

  // verbs::CqPollSource.
  bool cq_poll_rx(bool claim) override { return poll_rx(claim); }
  void cq_armed() override;

  // How long a claim by a polling application keeps the engine thread from receiving:
  // UWARP_POLL_HANDOFF_US from the environment (0: no hand-off), else kHandoff.
  static constexpr std::chrono::microseconds kHandoff{100};
  static std::chrono::microseconds handoff();
  // A poll within kSpinGap of the previous one claims the stream (see poll_rx).
  static constexpr std::chrono::microseconds kSpinGap{20};
  // While an application keeps polling, how often the engine thread checks the claim.
  static constexpr std::chrono::microseconds kRecheck{1000};

 private:
  // The bounce buffer starts small (an idle QP costs little memory) and doubles, up to the
  // largest size, each time a receive fills it. 32 KiB: 4 KiB Writes over 1000 QPs cost 47 KiB
  // per QP in all (70 KiB with 64 KiB), at the same single-QP speed (docs/performance.md).
  static constexpr std::size_t kBounceInitial = 4 * 1024;
  static constexpr std::size_t kBounceSize = 32 * 1024;
  static constexpr std::size_t kDirectMin = 2048;
  static constexpr std::size_t kSmallRead = 512;

  void pump_tx_locked();
  void send_failed_locked(long error);
  std::string send_failure() const;  // the failed send's error, as a reason
  void deliver_sent_locked();
  // Receives until the socket is empty (EAGAIN or a short read) or a bound (then *more = true);
  // false if nothing was received.
  bool receive_locked(bool* more);
  bool receive_direct_locked(long& status);
  // Feeds n bytes received into the bounce buffer by a receive that asked for `want`; false if
  // the receive was short (the socket is empty).
  bool feed_bounce_locked(std::size_t n, std::size_t want);
  // A receive found the end of the stream (0) or failed (-errno): the stream ends.
  void receive_ended_locked(long status);
  // Watches for readability, naming the bounce buffer for the backend to receive into unless
  // maybe_readable, a large payload is next, or an application spins on the CQ.
  void watch_locked(bool maybe_readable);
  // What the backend received for the watch (io::IoHandler::on_readable), fed to the QP; false
  // if the socket is empty or the stream ended.
  bool take_watched_locked(long received);
  // QP lock held: the next bytes are payload for a large placement target.
  bool direct_target_pending_locked();
  // An application polled this stream within kSpinGap.
  bool application_spinning() const;
  // Engine thread, mu_ held: receive and watch again unless an application claims the stream.
  void engine_receive_locked();
  bool claimed(Clock::time_point now) const;
  void schedule_handback_locked();
  void unbind_qp_locked();
  void maybe_shut_write_locked();
  void lost_locked(bool graceful, const std::string& why);
  void teardown(bool graceful, const std::string& why);
  void refresh_fpdu_size_locked();
  // Sets the socket's TCP_NOTSENT_LOWAT to this stream's share of the engine's send budget
  // when that share has changed (QP lock held).
  void apply_send_share_locked();

  Engine& engine_;
  io::Fd fd_;
  std::mutex mu_;
  verbs::QueuePair* qp_;
  std::weak_ptr<StreamObserver> observer_;

  std::vector<std::uint8_t> bounce_;
  bool large_payloads_ = false;
  bool watching_ = false;          // a readiness watch is armed (mu_)
  std::size_t watch_want_ = 0;     // how many bytes that receive asks for (mu_)
  bool direct_pending_ = false;    // when last received, a large placement target waited (mu_)
  std::uint64_t handback_timer_ = 0;  // pending hand-back check (mu_)
  // When an application last claimed the stream (steady clock, ns; 0: none or handed back).
  std::atomic<std::int64_t> claimed_at_ns_{0};
  std::atomic<std::int64_t> last_poll_ns_{0};
  int handback_checks_ = 0;  // checks in this hand-off period (mu_)
  verbs::CompletionQueue* cqs_[2] = {nullptr, nullptr};  // registered as poll source (mu_)
  proto::TxBatch batch_;
  bool send_armed_ = false;
  bool abandon_pending_ = false;  // tx_abandon while the backend was sending: apply in on_send
  bool pumping_ = false;
  long send_error_ = 0;  // a send failed (-errno): no more sends; the engine thread ends the stream
  bool pump_again_ = false;
  bool shutdown_requested_ = false;
  bool write_shut_ = false;
  bool torn_down_ = false;
  std::uint64_t linger_timer_ = 0;
  // Initiator only: if the peer stays silent after our first messages, one nudge (see
  // QueuePair::queue_nudge_locked) releases a Linux siw responder that missed them.
  void check_silent_peer(int round);
  bool initiator_ = false;
  std::uint64_t rx_bytes_ = 0;
  std::uint64_t tx_bytes_ = 0;
  std::size_t mss_ = 0;
  bool counted_ = false;           // counted in the engine's streams (send budget; mu_)
  std::size_t notsent_lowat_ = 0;  // the share last set on the socket (0: the kernel's default)
  static constexpr std::chrono::milliseconds kMssRecheck{100};
  Clock::time_point mss_checked_{};  // when refresh_fpdu_size_locked last read the MSS
};

// The largest ULPDU for a TCP MSS, as Linux siw sizes FPDUs: the MSS rounded down to a multiple
// of 8 bounds the whole FPDU, so each FPDU fits in one segment.
std::size_t max_ulpdu_for_mss(std::size_t mss);

}  // namespace uwarp::runtime
