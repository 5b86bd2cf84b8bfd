// A reliable-connected queue pair: the verbs state machine and its flush rules, the application's
// calls, and the binding to the stream of its connection. The protocol of that connection (FPDUs,
// RDMAP rules, the transmit order, Terminates) is a proto::RdmapEngine that the stream owns
// while bound (runtime::RdmapDriver); it reaches the QP's pieces through the QP's QpPort (a
// proto::RdmapPort): the send queue (SendQueue), the receive being placed (InboundReceive), the
// checks of every local and remote memory access against the PD's registrations
// (MemoryProtection).
//
// Locking: every method whose name ends in _locked requires mutex() to be held; the others take
// it themselves. The runtime holds it while it feeds received bytes or fills a transmit batch,
// so a QP, its engine and its pieces are driven by one thread at a time. Completions are pushed
// to the CQs under the lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "proto/rdmap_engine.h"
#include "proto/tx_batch.h"
#include "stats/export.h"
#include "uwarp/status.h"
#include "uwarp/types.h"
#include "verbs/completion_queue.h"
#include "verbs/device.h"
#include "verbs/inbound_receive.h"
#include "verbs/link_binding.h"
#include "verbs/memory_protection.h"
#include "verbs/protection_domain.h"
#include "verbs/qp_config.h"
#include "verbs/qp_link.h"
#include "verbs/qp_port.h"
#include "verbs/qp_reporter.h"
#include "verbs/qp_state.h"
#include "verbs/receive_queue.h"
#include "verbs/receive_wait.h"
#include "verbs/remote_terminate.h"
#include "verbs/send_queue.h"

namespace uwarp::verbs {

class QueuePair final {
 public:
  QueuePair(Device& device, const QpConfig& config);
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  std::uint32_t qp_num() const { return reporter_.qp_num(); }
  const QpConfig& config() const { return config_; }
  Mutex& mutex() const RETURN_CAPABILITY(mu_) { return mu_; }

  // Application calls (take the lock).
  Status post_send(const SendWr& wr);
  // Posts wrs in order up to the first that fails (*posted: how many were taken), then starts
  // transmitting them together.
  Status post_send(std::span<const SendWr> wrs, std::size_t* posted);
  Status post_recv(const RecvWr& wr);
  Status modify_state(QpState target);
  QpState state() const {
    MutexLock lock(mu_);
    return state_;
  }
  std::uint16_t ird() const {
    MutexLock lock(mu_);
    return binding_.ird();
  }
  std::uint16_t ord() const {
    MutexLock lock(mu_);
    return binding_.ord();
  }
  // How long a message that finds no posted receive waits for one (verbs/receive_wait.h).
  void set_receive_wait(std::chrono::milliseconds limit) {
    MutexLock lock(mu_);
    receive_wait_.set_limit(limit);
  }
  // The application deregisters a region, or a binding was invalidated (verbs/revocation.h): once
  // this returns, no access of this QP reaches it; one in progress fails the QP with a Terminate.
  void revoke(const proto::RevokedRegion& revoked);
  // The bindings this QP's local operations took away since the last call (TxRequests::sweep);
  // and, once every access through them is cut off, the completion of those requests.
  std::vector<Sweep> take_sweeps();
  void swept(const std::vector<Sweep>& done);
  Device& device() const { return device_; }
  // Its slot in the process's statistics file. The counters are written by whoever holds the
  // QP lock (stats/count.h); the slot's TCP_INFO fields by the stream (runtime::Stream).
  stats::QpStats& stats() { return stats_; }
  stats::Counters& counters() { return stats_.counters(); }

  // Stream binding, driven by the runtime (runtime::RdmapDriver, which owns the connection's
  // engine). After each call into the QP or its port, the driver collects what the QP asks of
  // the stream (no call from the QP reaches the stream meanwhile).
  void attach_link_locked(QpLink* link, const LinkParams& params) REQUIRES(mu_);
  void detach_link_locked() REQUIRES(mu_) { binding_.detach(); }
  bool has_link_locked() const REQUIRES(mu_) { return binding_.link() != nullptr; }
  // What the connection's engine reaches the QP's queues and memory through.
  proto::RdmapPort& port_locked() REQUIRES(mu_) { return port_; }
  // Which messages the QP's state lets out (RTS: all; SQD: no new requests; else only a
  // Terminate), and whether it places received bytes (not ERROR, not RESET).
  proto::TxGate tx_gate_locked() const REQUIRES(mu_) {
    return proto::TxGate{.responses = state_ == QpState::kRts || state_ == QpState::kSqd,
                         .requests = state_ == QpState::kRts};
  }
  // A receive is posted for the QP: in its own receive queue, or in its SRQ.
  bool has_posted_receive_locked() const REQUIRES(mu_) { return rq_->size() > 0; }
  // Reception waits for a receive and the QP takes from an SRQ: `wake` runs after the SRQ's
  // next post (ReceiveQueue::wake_on_post). A post to the QP's own queue reaches the link
  // through QpLink::receive_posted instead.
  void wake_on_shared_post_locked(std::function<void()> wake) REQUIRES(mu_) {
    if (config_.srq != nullptr) config_.srq->wake_on_post(this, std::move(wake));
  }
  bool receiving_locked() const REQUIRES(mu_) {
    return state_ != QpState::kError && state_ != QpState::kReset;
  }
  bool has_tx_requests_locked() const REQUIRES(mu_) { return binding_.has_requests(); }
  TxRequests take_tx_requests_locked() REQUIRES(mu_) { return binding_.take_requests(); }
  // Responder in peer-to-peer mode: the peer's RTR has arrived since the last call.
  bool take_rtr_received_locked() REQUIRES(mu_) { return binding_.take_rtr_received(); }
  // Reception waits for a receive (QpLink::receive_posted ends the wait): for at most this long;
  // then the stream calls receive_wait_expired_locked and resumes, and the engine terminates.
  std::chrono::milliseconds receive_wait_limit_locked() const REQUIRES(mu_) {
    return receive_wait_.limit();
  }
  void receive_wait_expired_locked() REQUIRES(mu_) { receive_wait_.expire(); }

  // The stream ended: graceful (EOF at an FPDU boundary after a disconnect) or not.
  void link_lost_locked(bool graceful, const std::string& why) REQUIRES(mu_);
  // Graceful disconnect requested locally: flush what was not sent, then close.
  void disconnect_locked() REQUIRES(mu_);

 private:
  friend class QpPort;

  // Validates and queues one request; kick: the link is to be told (once, by the caller);
  // little: cleared unless the request queued is little (posts_little).
  Status post_send_locked(const SendWr& wr, bool& kick, bool& little) REQUIRES(mu_);
  // Local operations at the head of the send queue take effect now (SendQueue::run_ready_local).
  void run_ready_local_locked() REQUIRES(mu_);
  // A request failed to start (its memory, or the binding rules): the QP enters ERROR.
  void request_failed_locked(bool local) REQUIRES(mu_);
  // Errors.
  void enter_error(std::optional<WcStatus> first_status, std::uint32_t vendor_err) REQUIRES(mu_);

  Device& device_;
  QpConfig config_;
  stats::QpStats stats_;  // before reporter_, which counts into it
  QpReporter reporter_;
  mutable Mutex mu_;
  QpState state_ GUARDED_BY(mu_) = QpState::kReset;
  std::unique_ptr<ReceiveQueue> own_rq_;  // null with an SRQ
  ReceiveQueue* rq_;

  LinkBinding binding_ GUARDED_BY(mu_);  // the stream of the connection, while bound
  ReceiveWait receive_wait_ GUARDED_BY(mu_);

  // The pieces the engine reaches through the port (they refer to the members above).
  MemoryProtection protection_ GUARDED_BY(mu_);
  SendQueue sq_ GUARDED_BY(mu_);
  InboundReceive receive_ GUARDED_BY(mu_);
  QpPort port_{*this};  // the engine's way in (calls with mu_ held)
};

}  // namespace uwarp::verbs
