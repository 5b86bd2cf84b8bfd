// QueuePair: application calls, the verbs state machine and its flush rules, and the binding to
// a stream. What the engine reaches the QP through is QpPort (qp_port.cc).
#include "verbs/queue_pair.h"

#include <new>

#include "verbs/send_wr.h"

namespace uwarp::verbs {

QueuePair::QueuePair(Device& device, const QpConfig& config)
    : device_(device),
      config_(config),
      stats_(device.stats(), device.allocate_qp_num()),
      reporter_(device, stats_.qp_num(), config.user_context, config.send_cq, config.recv_cq,
                stats_.counters()),
      own_rq_(config.srq != nullptr
                  ? nullptr
                  : std::make_unique<ReceiveQueue>(config.pd, config.caps.max_recv_wr,
                                                   config.caps.max_recv_sge)),
      rq_(config.srq != nullptr ? config.srq : own_rq_.get()),
      protection_(device.stags(), config.pd, this, &device.slots()),
      sq_(config.caps, device.limits(), config.signal_all, protection_, reporter_),
      receive_(*rq_, config.srq, protection_, reporter_) {
  if (config_.pd != nullptr) config_.pd->users.fetch_add(1);
  device.qps().add(this);
}

QueuePair::~QueuePair() {
  device_.qps().remove(this);
  if (config_.pd != nullptr) config_.pd->users.fetch_sub(1);
}

void QueuePair::revoke(const proto::RevokedRegion& revoked) {
  const ConstByteSpan memory = revoked.memory;
  MutexLock lock(mu_);
  // The receive being placed and the requests in flight hold resolved memory of their own
  // (a Send's later segments, a Read's sink); the stream checks its engine and its batch.
  const bool in_use = receive_.places_into(memory) || sq_.uses(memory);
  if (QpLink* link = binding_.link()) link->revoke(*this, revoked, in_use);
}

std::vector<Sweep> QueuePair::take_sweeps() {
  MutexLock lock(mu_);
  return binding_.take_sweeps();
}

void QueuePair::swept(const std::vector<Sweep>& done) {
  MutexLock lock(mu_);
  for (const Sweep& s : done) sq_.swept(s.first);
}

Status QueuePair::modify_state(QpState target) {
  MutexLock lock(mu_);
  if (Status s = check_qp_transition(state_, target); !s) return s;
  switch (target) {
    case QpState::kError:
      if (state_ != QpState::kError) {
        enter_error(std::nullopt, 0);
        binding_.request_shutdown();
      }
      break;
    case QpState::kReset:
      if (state_ != QpState::kError && state_ != QpState::kReset) enter_error(std::nullopt, 0);
      binding_.request_shutdown();
      sq_.clear();
      if (own_rq_) own_rq_->drain();
      // The stream's engine stays until the stream unbinds the QP: a Terminate it queued may
      // still go out; it receives nothing more (receiving_locked).
      state_ = QpState::kReset;
      break;
    default: {
      state_ = target;
      break;
    }
  }
  // Transmit work resumed (SQD to RTS), or requests for the stream (ERROR, RESET).
  if (QpLink* link = binding_.link()) link->doorbell(*this, Doorbell::kNow);
  return Status::ok();
}

Status QueuePair::post_send(const SendWr& wr) {
  MutexLock lock(mu_);
  bool kick = false;
  bool little = true;
  const Status s = post_send_locked(wr, kick, little);
  if (kick) binding_.link()->doorbell(*this, little ? Doorbell::kMayWait : Doorbell::kNow);
  return s;
}

Status QueuePair::post_send(std::span<const SendWr> wrs, std::size_t* posted) {
  MutexLock lock(mu_);
  bool kick = false;
  Status s = Status::ok();
  std::size_t n = 0;
  bool little = true;
  for (; n < wrs.size(); ++n) {
    // Out of memory fails this request alone (the ones before it stay posted), so that the
    // count is exact.
    try {
      s = post_send_locked(wrs[n], kick, little);
    } catch (const std::bad_alloc&) {
      s = Status(Errc::kNoResources, "out of memory");
    }
    if (!s) break;
  }
  if (posted != nullptr) *posted = n;
  // One transmit for all: consecutive messages leave in as few sendmsg calls as fit.
  if (kick) binding_.link()->doorbell(*this, little ? Doorbell::kMayWait : Doorbell::kNow);
  return s;
}

Status QueuePair::post_send_locked(const SendWr& wr, bool& kick, bool& little) {
  // One Status, returned from every path, is built in place in the caller's.
  Status s = state_ == QpState::kReset || state_ == QpState::kInit || state_ == QpState::kRtr
                 ? Status(Errc::kInvalidState, "post_send needs a QP in RTS, SQD or ERROR")
                 : sq_.post(wr, binding_.link() == nullptr || binding_.ord() != 0);
  if (!s) return s;
  little = little && posts_little(wr.opcode, sq_.last_length(), binding_.fpdu_payload());
  stats::count_posted(stats_.counters(), wr);
  if (state_ == QpState::kError) {
    // Posting to a QP in error completes the request at once with a flush error.
    sq_.flush_last();
  } else if (binding_.link() != nullptr && state_ == QpState::kRts) {
    // A local operation needs no turn of the engine when nothing is ahead of it; any other
    // request waits for the engine, which also runs the local operations queued behind it.
    if (is_local_operation(wr.opcode)) run_ready_local_locked();
    kick = true;
  }
  return s;
}

Status QueuePair::post_recv(const RecvWr& wr) {
  MutexLock lock(mu_);
  if (config_.srq != nullptr)
    return Status(Errc::kInvalidArgument, "QP uses a shared receive queue");
  if (state_ == QpState::kReset)
    return Status(Errc::kInvalidState, "post_recv needs a QP out of RESET");
  if (state_ == QpState::kError) {
    reporter_.recv_failed(wr.wr_id, WcStatus::kWrFlushError);
    return Status::ok();
  }
  // Reception waits for a receive: the stream resumes it on its own thread, once this call has
  // released the lock (so after the post; if the post fails, the engine only waits again).
  if (receive_wait_.receive_posted() && binding_.link() != nullptr) {
    binding_.link()->receive_posted(*this);
  }
  if (Status s = rq_->post(wr); !s) return s;
  stats::add(stats_.counters(), stats::Counter::kPostedRecv);
  return Status::ok();
}

void QueuePair::attach_link_locked(QpLink* link, const LinkParams& p) {
  // A new stream (with a new engine): its receive starts afresh, also for a QP used before and
  // taken back through RESET.
  receive_.reset();
  receive_wait_.reset();
  binding_.attach(link, p);
  state_ = QpState::kRts;
}

void QueuePair::disconnect_locked() {
  if (!binding_.start_disconnect()) return;
  if (state_ != QpState::kError) enter_error(std::nullopt, 0);
  binding_.request_shutdown();
}

void QueuePair::link_lost_locked(bool graceful, const std::string& why) {
  if (state_ == QpState::kError || state_ == QpState::kReset) return;
  enter_error(std::nullopt, 0);
  if (!graceful) reporter_.event(AsyncEventType::kQpFatal, why);
}

void QueuePair::run_ready_local_locked() {
  std::vector<Sweep> revoked;
  const bool started = sq_.run_ready_local(revoked);
  for (Sweep& s : revoked) binding_.sweep_later(s.first, std::move(s.second));
  if (!started) request_failed_locked(/*local=*/true);
}

void QueuePair::request_failed_locked(bool local) {
  // A local protection or bind error fails this request and, as the verbs require, the QP.
  enter_error(std::nullopt, 0);
  reporter_.event(AsyncEventType::kQpFatal, local ? "a local operation broke the memory binding rules"
                                                  : "local protection error on a send work request");
  binding_.request_shutdown();
}

void QueuePair::enter_error(std::optional<WcStatus> first_status, std::uint32_t vendor_err) {
  // The flush hands the requests' memory back: no send may still be reading it.
  if (QpLink* link = binding_.link()) link->settle_send(*this);
  state_ = QpState::kError;
  // The stream's engine continues no message and the stream drops what it has queued: both
  // collect this request after the call that led here, before they read memory again.
  binding_.abandon();
  sq_.flush(first_status, vendor_err);
  receive_.flush();
}

}  // namespace uwarp::verbs
