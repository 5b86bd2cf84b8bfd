// Completion queues and completion channels of libibverbs.so.1, over uwarp::CompletionQueue
// and the runtime's CompletionChannel.
//
// Channel contract (ibv_get_cq_event(3), what rping relies on): channel->fd is the core's
// eventfd, readable exactly while events are undelivered; ibv_get_cq_event is one read() of it,
// so it blocks unless the application set O_NONBLOCK on the fd (then -1 with errno EAGAIN) and
// is a cancellation point. Each ibv_req_notify_cq arms one event. ibv_destroy_cq drops the CQ's
// undelivered events and waits until the application acknowledged (ibv_ack_cq_events) every
// event it was given, as rdma-core does.
//
// Polling: ibv_poll_cq is static inline and calls context->ops.poll_cq, here poll_cq(): one
// acquire load when the CQ is empty, no lock, no system call.
#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>

#include <algorithm>
#include <array>

#include "api/impl.h"
#include "common/boundary.h"
#include "common/errno_map.h"
#include "common/objects.h"
#include "ibverbs/ops.h"
#include "runtime/progress_activity.h"

namespace uwarp::ofa {
namespace {

ibv_wc_status wc_status(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess:
      return IBV_WC_SUCCESS;
    case WcStatus::kLocalLengthError:
      return IBV_WC_LOC_LEN_ERR;
    case WcStatus::kLocalQpOperationError:
      return IBV_WC_LOC_QP_OP_ERR;
    case WcStatus::kLocalProtectionError:
      return IBV_WC_LOC_PROT_ERR;
    case WcStatus::kWrFlushError:
      return IBV_WC_WR_FLUSH_ERR;
    case WcStatus::kRemoteInvalidRequestError:
      return IBV_WC_REM_INV_REQ_ERR;
    case WcStatus::kRemoteAccessError:
      return IBV_WC_REM_ACCESS_ERR;
    case WcStatus::kRemoteOperationError:
      return IBV_WC_REM_OP_ERR;
    case WcStatus::kFatalError:
      return IBV_WC_FATAL_ERR;
    case WcStatus::kMemoryWindowBindError:
      return IBV_WC_MW_BIND_ERR;
  }
  return IBV_WC_GENERAL_ERR;
}

ibv_wc_opcode wc_opcode(WcOpcode o) {
  switch (o) {
    case WcOpcode::kSend:
      return IBV_WC_SEND;
    case WcOpcode::kRdmaWrite:
      return IBV_WC_RDMA_WRITE;
    case WcOpcode::kRdmaRead:
      return IBV_WC_RDMA_READ;
    case WcOpcode::kRecv:
      return IBV_WC_RECV;
    case WcOpcode::kBindWindow:
      return IBV_WC_BIND_MW;
    case WcOpcode::kLocalInvalidate:
      return IBV_WC_LOCAL_INV;
    case WcOpcode::kRegisterFastRegion:  // not posted through libibverbs
      return IBV_WC_SEND;
    case WcOpcode::kRecvRdmaWithImm:
      return IBV_WC_RECV_RDMA_WITH_IMM;
    case WcOpcode::kAtomicFetchAdd:
      return IBV_WC_FETCH_ADD;
    case WcOpcode::kAtomicCompareSwap:
      return IBV_WC_COMP_SWAP;
    case WcOpcode::kAtomicSwap:  // not posted through libibverbs
      return IBV_WC_COMP_SWAP;
  }
  return IBV_WC_SEND;
}

void to_ibv(const WorkCompletion& c, ibv_wc& w) {
  w.wr_id = c.wr_id;
  w.status = wc_status(c.status);
  w.opcode = wc_opcode(c.opcode);
  w.vendor_err = c.vendor_err;
  w.byte_len = c.byte_len;
  w.wc_flags = 0;
  if ((c.flags & wc_flags::kWithInvalidate) != 0) {
    w.invalidated_rkey = c.invalidated_rkey;
    w.wc_flags |= IBV_WC_WITH_INV;
  } else if ((c.flags & wc_flags::kWithImm) != 0) {
    w.imm_data = htonl(c.imm_data);  // __be32, as the sender's application stored it
    w.wc_flags |= IBV_WC_WITH_IMM;
  } else {
    w.imm_data = 0;
  }
  w.qp_num = c.qp_num;
  w.src_qp = 0;
  w.pkey_index = 0;
  w.slid = 0;
  w.sl = 0;
  w.dlid_path_bits = 0;
}

// The runtime channel behind an ibv_comp_channel.
runtime::CompletionChannel& runtime_channel(OfaChannel& ch) {
  return detail::Access::impl(ch.core)->channel;
}

}  // namespace

int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) {
  if (num_entries <= 0) return 0;
  verbs::CompletionQueue& core = detail::Access::impl(*OfaCq::from(cq)->core)->cq;
  // Busy polling, as the native API's CompletionQueue::poll: the posts this thread left for its
  // next poll go out, and an empty CQ makes the caller receive for the QPs that complete on it
  // (docs/threading.md).
  runtime::send_posts_left_queued();
  if (core.size() == 0 && !runtime::drive_empty_poll(core)) return 0;
  constexpr int kBatch = 16;
  std::array<WorkCompletion, kBatch> batch;
  int done = 0;
  while (done < num_entries) {
    const std::size_t want = static_cast<std::size_t>(std::min(kBatch, num_entries - done));
    const std::size_t got = core.poll(std::span<WorkCompletion>(batch.data(), want));
    for (std::size_t i = 0; i < got; ++i) to_ibv(batch[i], wc[done + static_cast<int>(i)]);
    done += static_cast<int>(got);
    if (got < want) break;
  }
  return done;
}

OfaCq* new_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
              int comp_vector) {
  OfaContext* c = OfaContext::from(context);
  // As the kernel's ib_uverbs for Linux siw: a vector the device does not have is EINVAL.
  if (c == nullptr || cqe <= 0 || comp_vector < 0 || comp_vector >= context->num_comp_vectors ||
      static_cast<std::uint32_t>(cqe) > c->core.limits().max_cqe) {
    errno = EINVAL;
    return nullptr;
  }
  if (channel != nullptr && channel->context != context) {
    errno = EINVAL;
    return nullptr;
  }
  auto* q = new OfaCq;
  OfaChannel* ch = channel != nullptr ? OfaChannel::from(channel) : nullptr;
  auto core =
      c->core.create_cq(static_cast<std::uint32_t>(cqe), ch != nullptr ? &ch->core : nullptr, q);
  if (!core) {
    delete q;
    errno = to_errno(core.error());
    return nullptr;
  }
  q->core.emplace(std::move(*core));
  q->ibv.context = context;
  q->ibv.channel = channel;
  q->ibv.cq_context = cq_context;
  q->ibv.handle = static_cast<std::uint32_t>(c->next_id.fetch_add(1));
  q->ibv.cqe = static_cast<int>(q->core->capacity());
  pthread_mutex_init(&q->ibv.mutex, nullptr);
  pthread_cond_init(&q->ibv.cond, nullptr);
  if (channel != nullptr) {
    pthread_mutex_lock(&context->mutex);
    ++channel->refcnt;
    pthread_mutex_unlock(&context->mutex);
  }
  return q;
}

int req_notify_cq(ibv_cq* cq, int solicited_only) {
  // Arming a CQ without a channel is allowed and has no effect (no event can be delivered).
  detail::Access::impl(*OfaCq::from(cq)->core)->cq.arm(solicited_only != 0);
  return 0;
}

}  // namespace uwarp::ofa

using namespace uwarp::ofa;

extern "C" {

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  return c_boundary<ibv_comp_channel*>(nullptr, [&]() -> ibv_comp_channel* {
    OfaContext* c = OfaContext::from(context);
    if (c == nullptr) {
      errno = EINVAL;
      return nullptr;
    }
    auto core = c->core.create_comp_channel();
    if (!core) {
      errno = to_errno(core.error());
      return nullptr;
    }
    auto* ch = new OfaChannel(std::move(*core));
    ch->ibv.context = context;
    ch->ibv.fd = ch->core.fd();
    ch->ibv.refcnt = 0;
    return &ch->ibv;
  });
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (channel == nullptr) return EINVAL;
  ibv_context* context = channel->context;
  pthread_mutex_lock(&context->mutex);
  const bool busy = channel->refcnt != 0;
  pthread_mutex_unlock(&context->mutex);
  if (busy) return EBUSY;
  delete OfaChannel::from(channel);
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
  return c_boundary<ibv_cq*>(nullptr, [&]() -> ibv_cq* {
    OfaCq* q = new_cq(context, cqe, cq_context, channel, comp_vector);
    return q != nullptr ? &q->ibv : nullptr;
  });
}

int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (cq == nullptr || cqe <= 0) return EINVAL;
  // The core's CQs have a fixed capacity: a size within it is already satisfied.
  return cqe <= cq->cqe ? 0 : EOPNOTSUPP;
}

int ibv_destroy_cq(ibv_cq* cq) {
  if (cq == nullptr) return EINVAL;
  OfaCq* q = OfaCq::from(cq);
  if (q->qp_users.load() != 0) return EBUSY;
  if (cq->channel != nullptr) {
    // Its undelivered events go; the delivered ones must be acknowledged first.
    runtime_channel(*OfaChannel::from(cq->channel))
        .forget(&uwarp::detail::Access::impl(*q->core)->cq);
  }
  pthread_mutex_lock(&cq->mutex);
  while (cq->comp_events_completed != q->comp_events_delivered ||
         cq->async_events_completed != q->async_events_delivered) {
    pthread_cond_wait(&cq->cond, &cq->mutex);
  }
  pthread_mutex_unlock(&cq->mutex);
  if (ibv_comp_channel* channel = cq->channel) {
    pthread_mutex_lock(&cq->context->mutex);
    --channel->refcnt;
    pthread_mutex_unlock(&cq->context->mutex);
  }
  pthread_cond_destroy(&cq->cond);
  pthread_mutex_destroy(&cq->mutex);
  delete q;
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (channel == nullptr || cq == nullptr || cq_context == nullptr) {
    errno = EINVAL;
    return -1;
  }
  uwarp::runtime::CompletionChannel& ch = runtime_channel(*OfaChannel::from(channel));
  while (true) {
    errno = 0;
    // One read() of channel->fd: blocks (a cancellation point) or fails with EAGAIN.
    uwarp::verbs::CompletionQueue* core = ch.wait_honouring_fd_mode();
    if (core == nullptr) {
      if (errno != 0) return -1;
      continue;  // the event of a destroyed CQ, or taken by another thread
    }
    auto* q = static_cast<OfaCq*>(core->user_context());
    pthread_mutex_lock(&q->ibv.mutex);
    ++q->comp_events_delivered;
    pthread_mutex_unlock(&q->ibv.mutex);
    *cq = &q->ibv;
    *cq_context = q->ibv.cq_context;
    return 0;
  }
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  if (cq == nullptr) return;
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_broadcast(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

}  // extern "C"
