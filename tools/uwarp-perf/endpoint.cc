#include "endpoint.h"

#include <chrono>
#include <thread>

namespace uwarp::perf {

QpInitAttr qp_attr(CompletionQueue& cq, std::uint32_t depth) {
  QpInitAttr a;
  a.send_cq = &cq;
  a.recv_cq = &cq;
  a.caps.max_send_wr = depth;
  a.caps.max_recv_wr = depth;
  a.caps.max_send_sge = 1;
  a.caps.max_recv_sge = 1;
  a.caps.max_inline_data = 64;
  return a;
}

Endpoint::Endpoint(Context& ctx)
    : ctx_(ctx),
      pd_(ctx.alloc_pd().value()),
      channel_(ctx.create_comp_channel().value()),
      cq_(ctx.create_cq(65536, &channel_).value()),
      ctrl_qp_(pd_.create_qp(qp_attr(cq_, 2 * kCtrlSlots)).value()),
      ctrl_buf_(new std::uint8_t[kCtrlSlots * kCtrlMsgSize]()),
      ctrl_mr_(
          pd_.reg_mr(ctrl_buf_.get(), kCtrlSlots * kCtrlMsgSize, access::kLocalWrite).value()) {}

DataQp& Endpoint::add_data_qp(std::size_t length, bool shared) {
  auto d = std::make_unique<DataQp>(DataQp{
      pd_.create_qp(qp_attr(cq_, 1024)).value(), nullptr, 0, MemoryRegion(ctrl_mr_), {}, {}});
  d->length = length;
  if (shared && !data_.empty() && data_.front()->length == length) {
    d->buf = data_.front()->buf;
    d->mr = data_.front()->mr;
  } else {
    d->buf = std::shared_ptr<std::uint8_t[]>(new std::uint8_t[length]());
    d->mr = pd_.reg_mr(d->buf.get(), length,
                       access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead)
                .value();
  }
  data_.push_back(std::move(d));
  return *data_.back();
}

Status Endpoint::post_ctrl_receives() {
  for (std::uint32_t i = 0; i < kCtrlSlots; ++i) {
    Sge s = ctrl_mr_.sge(i * kCtrlMsgSize, kCtrlMsgSize);
    if (Status st = post_recv(ctrl_qp_, {make_wr_id(WrKind::kCtrlRecv, 0, i), {&s, 1}}); !st)
      return st;
  }
  return Status::ok();
}

Status Endpoint::post_send(QueuePair& qp, std::span<SendWr> wrs) {
  if (!ledger_) return qp.post_send(std::span<const SendWr>(wrs));
  for (SendWr& wr : wrs) {
    wr.wr_id = ledger_->posted(wr_queue(wr.wr_id), wr.wr_id, (wr.flags & send_flags::kSignaled) != 0);
  }
  std::size_t n = 0;
  Status s = qp.post_send(std::span<const SendWr>(wrs), &n);
  for (std::size_t i = wrs.size(); i > n; --i) ledger_->unposted(wr_queue(wrs[i - 1].wr_id));
  return s;
}

Status Endpoint::post_recv(QueuePair& qp, RecvWr wr) {
  if (!ledger_) return qp.post_recv(wr);
  wr.wr_id = ledger_->posted(wr_queue(wr.wr_id), wr.wr_id, true);
  Status s = qp.post_recv(wr);
  if (!s) ledger_->unposted(wr_queue(wr.wr_id));
  return s;
}

std::size_t Endpoint::wait_qps_in_error(int wait_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
  std::size_t in_error = 0;
  while (true) {
    in_error = ctrl_qp_.state() == QpState::kError ? 1 : 0;
    for (auto& d : data_) in_error += d->qp.state() == QpState::kError ? 1 : 0;
    if (in_error == qp_count() || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return in_error;
}

std::size_t Endpoint::note_qps_in_error(int wait_ms) {
  noted_in_error_ = wait_qps_in_error(wait_ms);
  return *noted_in_error_;
}

void Endpoint::disconnect(Connection& ctrl, int wait_ms) {
  for (auto& d : data_) d->conn.disconnect();
  ctrl.disconnect();
  (void)wait_qps_in_error(wait_ms);
}

std::string Endpoint::settle(int timeout_ms, bool& balanced) {
  using Clock = std::chrono::steady_clock;
  std::vector<QueuePair*> qps{&ctrl_qp_};
  for (auto& d : data_) qps.push_back(&d->qp);
  const std::size_t in_error = noted_in_error_ ? *noted_in_error_ : note_qps_in_error(0);
  for (QueuePair* qp : qps) (void)qp->modify_state(QpState::kError);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto last = Clock::now();
  std::vector<WorkCompletion> data;
  while (Clock::now() < deadline) {
    data.clear();
    if (poll_once(data)) {
      last = Clock::now();
      continue;
    }
    if (ledger_ && ledger_->awaiting() == 0 && Clock::now() - last > std::chrono::milliseconds(50)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  balanced = ledger_ && ledger_->balanced();
  return "work requests: " + (ledger_ ? ledger_->summary() : std::string("not recorded")) + "; QPs in ERROR before the audit: " +
         std::to_string(in_error) + " of " + std::to_string(qps.size());
}

Status Endpoint::send_ctrl(const CtrlMsg& m) {
  std::uint8_t bytes[kCtrlMsgSize];
  encode(m, bytes);
  Sge s{reinterpret_cast<std::uintptr_t>(bytes), kCtrlMsgSize, 0};
  SendWr wr;
  wr.wr_id = make_wr_id(WrKind::kCtrlSend, 0, 0);
  wr.opcode = WrOpcode::kSend;
  wr.sg_list = {&s, 1};
  wr.flags = send_flags::kInline | send_flags::kSignaled;
  return post_send(ctrl_qp_, wr);
}

bool Endpoint::poll_once(std::vector<WorkCompletion>& data_out) {
  WorkCompletion wcs[64];
  const std::size_t n = cq_.poll(wcs);
  bool got = false;
  for (std::size_t i = 0; i < n; ++i) {
    const WorkCompletion& wc = wcs[i];
    if (ledger_) ledger_->completed(wr_queue(wc.wr_id), wc);
    switch (wr_kind(wc.wr_id)) {
      case WrKind::kCtrlRecv: {
        if (wc.status != WcStatus::kSuccess) {
          ctrl_failed_ = true;
          break;
        }
        const std::uint32_t slot = wr_slot(wc.wr_id);
        inbox_.push_back(decode_ctrl(ctrl_buf_.get() + slot * kCtrlMsgSize));
        Sge s = ctrl_mr_.sge(slot * kCtrlMsgSize, kCtrlMsgSize);
        if (!post_recv(ctrl_qp_, {wc.wr_id & ~WorkLedger::kSeqMask, {&s, 1}})) ctrl_failed_ = true;
        got = true;
        break;
      }
      case WrKind::kCtrlSend:
        if (wc.status != WcStatus::kSuccess) ctrl_failed_ = true;
        break;
      default:
        data_out.push_back(wc);
        got = true;
        break;
    }
  }
  return got;
}

bool Endpoint::wait_for_byte(const volatile std::uint8_t* byte, std::uint8_t value,
                             int timeout_ms, std::vector<WorkCompletion>& data_out) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (std::uint32_t spin = 0;; ++spin) {
    if (*byte == value) return true;
    poll_once(data_out);  // may place the awaited Write itself: look again before yielding
    if (*byte == value) return true;
    if (ctrl_failed_) return false;
    if ((spin & 255) == 0 && Clock::now() > deadline) return false;
    std::this_thread::yield();
  }
}

bool Endpoint::pump(int timeout_ms, std::vector<WorkCompletion>& data_out) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  bool armed = false;
  while (true) {
    if (poll_once(data_out)) return true;
    if (ctrl_failed_) return false;
    const auto now = Clock::now();
    if (now >= deadline) return false;
    if (!armed && !blocking_ && now - start < kSpinBeforeBlock) {
      std::this_thread::yield();
      continue;
    }
    if (!armed) {
      (void)cq_.req_notify(false);
      armed = true;
      continue;  // poll once more: a completion may have come before the arm
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    (void)channel_.get_event(static_cast<int>(std::min<long long>(left + 1, 100)));
    armed = false;
  }
}

std::optional<CtrlMsg> Endpoint::wait_ctrl(MsgType type, int timeout_ms,
                                           std::vector<WorkCompletion>* data_out) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<WorkCompletion> ignored;
  while (true) {
    for (auto it = inbox_.begin(); it != inbox_.end(); ++it) {
      if (it->type == type) {
        CtrlMsg m = *it;
        inbox_.erase(it);
        return m;
      }
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0 || ctrl_failed_) return std::nullopt;
    pump(static_cast<int>(left), data_out ? *data_out : ignored);
  }
}

}  // namespace uwarp::perf
