// Asynchronous events of libibverbs.so.1 (ibv_get_async_event(3)) over the core's async event
// queue of the context.
//
// context->async_fd is the queue's eventfd: readable while events are undelivered;
// ibv_get_async_event is one read() of it (blocking unless the application set O_NONBLOCK, then
// -1 with errno EAGAIN). The core names the QP an event concerns by the QP's user context, which
// libibverbs sets to an id that never repeats; an event whose QP was destroyed before delivery
// is dropped. CQ overflow and SRQ limit events are reported by a QP of the CQ or SRQ and are
// delivered for that CQ or SRQ. Every delivered event must be acknowledged
// (ibv_ack_async_event): ibv_destroy_qp/cq/srq wait for it, as in rdma-core.
// UWARP_IBVERBS_DEBUG=1 prints every delivered event with the core's reason on stderr (e.g.
// the Terminate that ended the QP), which ibv_async_event cannot carry.
#include <pthread.h>

#include <cstdio>
#include <cstdlib>

#include "api/impl.h"
#include "base/log.h"
#include "common/boundary.h"
#include "common/objects.h"

namespace uwarp::ofa {
namespace {

// Counts a delivery on an object's ibv mutex (its destroy waits for the matching ack).
template <typename Ibv>
void count_delivery(Ibv& ibv, std::uint32_t& delivered) {
  pthread_mutex_lock(&ibv.mutex);
  ++delivered;
  pthread_mutex_unlock(&ibv.mutex);
}

// Fills `out` for a core event; false if its object is gone. Caller holds c.objects_mu, so the
// QP (and the CQs and SRQ it uses) cannot be destroyed meanwhile.
bool translate(OfaContext& c, const uwarp::AsyncEvent& e, ibv_async_event& out)
    REQUIRES(c.objects_mu) {
  const auto id = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(e.context));
  const auto it = c.qps.find(id);
  if (it == c.qps.end()) return false;
  OfaQp& q = *it->second;
  switch (e.type) {
    case AsyncEventType::kQpFatal:
    case AsyncEventType::kQpAccessError:
    case AsyncEventType::kQpLastWqeReached:
      out.event_type = e.type == AsyncEventType::kQpFatal         ? IBV_EVENT_QP_FATAL
                       : e.type == AsyncEventType::kQpAccessError ? IBV_EVENT_QP_ACCESS_ERR
                                                                  : IBV_EVENT_QP_LAST_WQE_REACHED;
      out.element.qp = &q.ibv;
      count_delivery(q.ibv, q.events_delivered);
      return true;
    case AsyncEventType::kCqError: {
      // The QP reports the overflow of one of its CQs: the one that overflowed.
      OfaCq* cq = OfaCq::from(q.ibv.send_cq);
      if (!detail::Access::impl(*cq->core)->cq.overflowed()) cq = OfaCq::from(q.ibv.recv_cq);
      out.event_type = IBV_EVENT_CQ_ERR;
      out.element.cq = &cq->ibv;
      count_delivery(cq->ibv, cq->async_events_delivered);
      return true;
    }
    case AsyncEventType::kSrqLimitReached: {
      if (q.ibv.srq == nullptr) return false;
      OfaSrq* srq = OfaSrq::from(q.ibv.srq);
      out.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
      out.element.srq = &srq->ibv;
      count_delivery(srq->ibv, srq->events_delivered);
      return true;
    }
  }
  return false;
}

// UWARP_LOG=debug (or UWARP_IBVERBS_DEBUG=1, its older name) logs every async event.
bool debug_enabled() {
  return uwarp::log::enabled(uwarp::log::Level::kDebug);
}

void trace(const uwarp::AsyncEvent& e) {
  uwarp::log::emit(uwarp::log::Level::kDebug, "ibverbs",
                   "async event " + std::string(to_string(e.type)) + ", QP " +
                       std::to_string(e.qp_num) + ": " +
                       (e.detail.empty() ? std::string("-") : e.detail));
}

template <typename Ibv>
void ack(Ibv* ibv) {
  if (ibv == nullptr) return;
  pthread_mutex_lock(&ibv->mutex);
  ++ibv->events_completed;
  pthread_cond_broadcast(&ibv->cond);
  pthread_mutex_unlock(&ibv->mutex);
}

}  // namespace
}  // namespace uwarp::ofa

using namespace uwarp::ofa;

extern "C" {

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  OfaContext* c = OfaContext::from(context);
  if (c == nullptr || event == nullptr) {
    errno = EINVAL;
    return -1;
  }
  uwarp::runtime::AsyncEventQueue& queue = uwarp::detail::Access::impl(c->core)->async;
  while (true) {
    errno = 0;
    auto e = queue.take_honouring_fd_mode();  // one read() of async_fd; a cancellation point
    if (!e) {
      if (errno != 0) return -1;
      continue;
    }
    const bool delivered = c_boundary<bool>(false, [&] {
      uwarp::MutexLock lock(c->objects_mu);
      return translate(*c, *e, *event);
    });
    if (delivered) {
      if (debug_enabled()) trace(*e);
      return 0;
    }
    // The event's QP is gone: drop it and wait for the next.
  }
}

void ibv_ack_async_event(ibv_async_event* event) {
  if (event == nullptr) return;
  switch (enum_value(event->event_type)) {
    case IBV_EVENT_CQ_ERR:
      if (ibv_cq* cq = event->element.cq) {
        pthread_mutex_lock(&cq->mutex);
        ++cq->async_events_completed;
        pthread_cond_broadcast(&cq->cond);
        pthread_mutex_unlock(&cq->mutex);
      }
      return;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      ack(event->element.qp);
      return;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      ack(event->element.srq);
      return;
    default:
      return;  // device and port events name no object
  }
}

}  // extern "C"
