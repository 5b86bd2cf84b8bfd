// The bridge of uwarp_ofa.h over the wrappers of objects.h: what librdmacm.so.1 calls in
// libibverbs.so.1 to reach the core objects and to bind connections to QPs.
#include "common/uwarp_ofa.h"

#include <algorithm>
#include <mutex>

#include "api/impl.h"
#include "common/objects.h"
#include "common/receive_wait.h"

namespace uwarp::ofa {
namespace {

// Connections may be bound to a QP that never carried one: RESET or INIT (as rdma_cm).
Status check_bindable(ibv_qp* qp) {
  if (qp == nullptr) return Status(Errc::kInvalidArgument, "no QP");
  const QpState s = OfaQp::from(qp)->core.state();
  if (s != QpState::kReset && s != QpState::kInit) {
    return Status(Errc::kInvalidState, "a connection needs a QP in RESET or INIT");
  }
  if (qp_has_connection(qp)) return Status(Errc::kInvalidState, "the QP already has a connection");
  return Status::ok();
}

}  // namespace

int bridge_version() noexcept {
  return kBridgeVersion;
}

Context* context_of(ibv_context* context) noexcept {
  OfaContext* c = OfaContext::from(context);
  return c != nullptr ? &c->core : nullptr;
}
ProtectionDomain* pd_of(ibv_pd* pd) noexcept {
  return pd != nullptr ? &OfaPd::from(pd)->core : nullptr;
}
MemoryRegion* mr_of(ibv_mr* mr) noexcept {
  return mr != nullptr ? &OfaMr::from(mr)->core : nullptr;
}
CompletionChannel* channel_of(ibv_comp_channel* channel) noexcept {
  return channel != nullptr ? &OfaChannel::from(channel)->core : nullptr;
}
CompletionQueue* cq_of(ibv_cq* cq) noexcept {
  return cq != nullptr ? &*OfaCq::from(cq)->core : nullptr;
}
QueuePair* qp_of(ibv_qp* qp) noexcept {
  return qp != nullptr ? &OfaQp::from(qp)->core : nullptr;
}
SharedReceiveQueue* srq_of(ibv_srq* srq) noexcept {
  return srq != nullptr ? &OfaSrq::from(srq)->core : nullptr;
}

void set_rnr_retry(ibv_qp* qp, std::uint8_t rnr_retry) noexcept {
  if (qp == nullptr) return;
  OfaQp& q = *OfaQp::from(qp);
  MutexLock lock(q.attr_mu);
  q.attr.rnr_retry = rnr_retry;
  q.core.set_receive_wait(receive_wait_for(rnr_retry, q.attr.min_rnr_timer));
}

std::function<bool()> completions_polled_test(ibv_context* context, ibv_qp* qp) noexcept {
  OfaContext* c = OfaContext::from(context);
  if (c == nullptr || qp == nullptr) return {};
  try {
    std::shared_ptr<detail::CqImpl> send;
    std::shared_ptr<detail::CqImpl> recv;
    {
      // ibv_destroy_qp takes the QP out of qps under this lock before it frees anything, and
      // its CQs cannot go while it exists.
      MutexLock lock(c->objects_mu);
      const OfaQp* q = OfaQp::from(qp);
      const bool live = std::any_of(c->qps.begin(), c->qps.end(),
                                    [q](const auto& entry) { return entry.second == q; });
      if (!live) return {};
      send = detail::Access::impl(*OfaCq::from(qp->send_cq)->core);
      recv = detail::Access::impl(*OfaCq::from(qp->recv_cq)->core);
    }
    const std::uint64_t send_mark = send->cq.pushed_total();
    const std::uint64_t recv_mark = recv->cq.pushed_total();
    return [send = std::move(send), recv = std::move(recv), send_mark, recv_mark] {
      return send->cq.left_total() >= send_mark && recv->cq.left_total() >= recv_mark;
    };
  } catch (...) {
    return {};
  }
}

ibv_qp* qp_by_number(ibv_context* context, std::uint32_t qp_num) noexcept {
  OfaContext* c = OfaContext::from(context);
  if (c == nullptr) return nullptr;
  MutexLock lock(c->objects_mu);
  for (const auto& [id, q] : c->qps) {
    if (q->ibv.qp_num == qp_num) return &q->ibv;
  }
  return nullptr;
}

bool qp_has_connection(ibv_qp* qp) noexcept {
  if (qp == nullptr) return false;
  const auto& impl = detail::Access::impl(OfaQp::from(qp)->core);
  MutexLock lock(impl->mu);
  return impl->connection != nullptr;
}

Result<Connection> connect_qp(EventChannel& channel, ibv_qp* qp, const std::string& host,
                              std::uint16_t port, const ConnectionParams& params) {
  try {
    if (Status s = check_bindable(qp); !s) return Unexpected{s};
    return channel.connect(host, port, OfaQp::from(qp)->core, params);
  } catch (...) {
    return error(Errc::kNoResources, "out of memory");
  }
}

Status accept_qp(Connection& connection, ibv_qp* qp, const ConnectionParams& params) {
  try {
    if (Status s = check_bindable(qp); !s) return s;
    return connection.accept(OfaQp::from(qp)->core, params);
  } catch (...) {
    return Status(Errc::kNoResources, "out of memory");
  }
}

}  // namespace uwarp::ofa
