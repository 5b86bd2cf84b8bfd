// The native verbs API (include/uwarp/verbs.h) over the verbs and runtime layers.
#include "uwarp/verbs.h"

#include <thread>
#include <utility>

#include "api/impl.h"
#include "runtime/progress_activity.h"

namespace uwarp {

Result<Context> Context::open() {
  // The last reference may be dropped on the progress thread itself (by an object it retires);
  // the engine cannot join its own thread, so the context is then destroyed by another one.
  auto deleter = [](detail::ContextImpl* c) {
    if (c->engines.on_any_engine_thread()) {
      std::thread([c] { delete c; }).detach();
    } else {
      delete c;
    }
  };
  return Context(std::shared_ptr<detail::ContextImpl>(new detail::ContextImpl, deleter));
}

const DeviceLimits& Context::limits() const { return impl_->device.limits(); }

Result<ProtectionDomain> Context::alloc_pd() { return ProtectionDomain(std::make_shared<detail::PdImpl>(impl_)); }

Result<CompletionChannel> Context::create_comp_channel() {
  auto ch = std::make_shared<detail::ChannelImpl>();
  ch->ctx = impl_;
  return CompletionChannel(std::move(ch));
}

Result<CompletionQueue> Context::create_cq(std::uint32_t min_entries, CompletionChannel* channel, void* user_context) {
  if (min_entries == 0 || min_entries > impl_->device.limits().max_cqe) {
    return error(Errc::kInvalidArgument, "CQ size out of range");
  }
  return CompletionQueue(std::make_shared<detail::CqImpl>(impl_, channel ? channel->impl_ : nullptr, min_entries,
                                                          user_context));
}

int Context::async_fd() const { return impl_->async.fd(); }

std::optional<AsyncEvent> Context::get_async_event(int timeout_ms) {
  auto e = impl_->async.take(timeout_ms);
  if (!e) return std::nullopt;
  return *e;
}

std::uint32_t MemoryRegion::lkey() const { return impl_->mr->stag; }
std::uint32_t MemoryRegion::rkey() const { return impl_->mr->stag; }
void* MemoryRegion::addr() const { return impl_->mr->addr; }
std::size_t MemoryRegion::length() const { return impl_->mr->length; }
std::uint32_t MemoryRegion::access() const { return impl_->mr->access; }
Sge MemoryRegion::sge(std::size_t offset, std::uint32_t length) const {
  return Sge{impl_->mr->iova + offset, length, impl_->mr->stag};
}
Status MemoryRegion::deregister() { return impl_->deregister(); }

int CompletionChannel::fd() const { return impl_->channel.fd(); }

std::optional<void*> CompletionChannel::get_event(int timeout_ms) {
  verbs::CompletionQueue* cq = impl_->channel.wait(timeout_ms);
  if (cq == nullptr) return std::nullopt;
  return cq->user_context();
}

std::size_t CompletionQueue::poll(std::span<WorkCompletion> out) {
  // Busy polling: an empty CQ makes the caller receive for the QPs that complete on it, instead
  // of waiting for the progress thread to wake up (docs/threading.md).
  runtime::send_posts_left_queued();  // the posts this thread left for its next poll
  const std::size_t n = impl_->cq.poll(out);
  if (n != 0 || out.empty()) return n;
  return runtime::drive_empty_poll(impl_->cq) ? impl_->cq.poll(out) : 0;
}

Status CompletionQueue::req_notify(bool solicited_only) {
  if (!impl_->channel) return Status(Errc::kInvalidState, "CQ has no completion channel");
  impl_->cq.arm(solicited_only);
  return Status::ok();
}

std::uint32_t CompletionQueue::capacity() const { return impl_->cq.capacity(); }

Status SharedReceiveQueue::post_recv(const RecvWr& wr) { return impl_->rq.post(wr); }
void SharedReceiveQueue::arm_limit(std::uint32_t limit) { impl_->rq.arm_limit(limit); }
std::size_t SharedReceiveQueue::size() const { return impl_->rq.size(); }

std::uint32_t QueuePair::qp_num() const { return impl_->qp->qp_num(); }
QpState QueuePair::state() const { return impl_->qp->state(); }
Status QueuePair::post_send(const SendWr& wr) { return impl_->qp->post_send(wr); }
Status QueuePair::post_send(std::span<const SendWr> wrs, std::size_t* posted) {
  return impl_->qp->post_send(wrs, posted);
}
Status QueuePair::post_recv(const RecvWr& wr) { return impl_->qp->post_recv(wr); }
void QueuePair::set_receive_wait(std::chrono::milliseconds limit) {
  impl_->qp->set_receive_wait(limit);
}
Status QueuePair::modify_state(QpState target) { return impl_->qp->modify_state(target); }
std::uint16_t QueuePair::ird() const { return impl_->qp->ird(); }
std::uint16_t QueuePair::ord() const { return impl_->qp->ord(); }

Result<MemoryRegion> ProtectionDomain::reg_mr(void* addr, std::size_t length, std::uint32_t access_flags) {
  return reg_mr_iova(addr, length, reinterpret_cast<std::uintptr_t>(addr), access_flags);
}

Result<MemoryRegion> ProtectionDomain::reg_mr_iova(void* addr, std::size_t length, std::uint64_t iova,
                                                   std::uint32_t access_flags) {
  // The implicit on-demand region: the whole address space.
  const bool implicit = addr == nullptr && length == SIZE_MAX && (access_flags & access::kOnDemand) != 0;
  if (addr == nullptr && length > 0 && !implicit) return error(Errc::kInvalidArgument, "null address");
  if ((access_flags & ~(access::kAll | access::kOnDemand)) != 0) {
    return error(Errc::kInvalidArgument, "unknown access flags");
  }
  // The verbs rule: remote write or atomic access needs local write access too.
  if ((access_flags & (access::kRemoteWrite | access::kRemoteAtomic)) != 0 && (access_flags & access::kLocalWrite) == 0) {
    return error(Errc::kInvalidArgument, "remote write access requires local write access");
  }
  auto mr = std::make_shared<verbs::MemoryRegion>();
  mr->addr = static_cast<std::uint8_t*>(addr);
  mr->length = implicit ? UINT64_MAX : length;
  mr->iova = implicit ? 0 : iova;
  mr->access = access_flags;
  mr->pd = &impl_->pd;
  if (Status s = impl_->ctx->device.stags().insert(mr); !s) return Unexpected{std::move(s)};
  impl_->pd.users.fetch_add(1);
  auto m = std::make_shared<detail::MrImpl>();
  m->pd = impl_;
  m->mr = std::move(mr);
  return MemoryRegion(std::move(m));
}

namespace {

Result<std::shared_ptr<detail::SlotImpl>> alloc_slot(const std::shared_ptr<detail::PdImpl>& pd, verbs::StagKind kind) {
  verbs::Device& device = pd->ctx->device;
  auto slot = verbs::StagSlot::allocate(device.stags(), &pd->pd, kind);
  if (!slot) return Unexpected{slot.error()};
  device.slots().add(*slot);
  pd->pd.users.fetch_add(1);
  auto impl = std::make_shared<detail::SlotImpl>();
  impl->pd = pd;
  impl->slot = std::move(*slot);
  return impl;
}

std::uint32_t with_key(std::uint32_t stag, std::uint8_t key) { return (stag & ~0xFFu) | key; }

}  // namespace

WindowType MemoryWindow::type() const {
  return impl_->slot->kind() == verbs::StagKind::kWindow1 ? WindowType::kType1 : WindowType::kType2;
}
std::uint32_t MemoryWindow::rkey() const { return impl_->slot->stag(); }
std::uint32_t MemoryWindow::rkey_with_key(std::uint8_t key) const { return with_key(impl_->slot->stag(), key); }
std::uint32_t FastRegion::rkey() const { return impl_->slot->stag(); }
std::uint32_t FastRegion::rkey_with_key(std::uint8_t key) const { return with_key(impl_->slot->stag(), key); }

Result<MemoryWindow> ProtectionDomain::alloc_mw(WindowType type) {
  auto impl = alloc_slot(impl_, type == WindowType::kType1 ? verbs::StagKind::kWindow1 : verbs::StagKind::kWindow2);
  if (!impl) return Unexpected{impl.error()};
  return MemoryWindow(std::move(*impl));
}

Result<FastRegion> ProtectionDomain::alloc_fast_region() {
  auto impl = alloc_slot(impl_, verbs::StagKind::kFastRegion);
  if (!impl) return Unexpected{impl.error()};
  return FastRegion(std::move(*impl));
}

Result<std::uint32_t> QueuePair::bind_mw(MemoryWindow& window, const MemoryRegion& region, const Sge& range,
                                         std::uint32_t access_flags, std::uint64_t wr_id, std::uint32_t flags) {
  if (window.type() != WindowType::kType1) return error(Errc::kInvalidArgument, "bind_mw binds type 1 windows");
  const std::uint32_t rkey = window.impl_->slot->next_type1_stag();
  const Sge sge{range.addr, range.length, region.lkey()};
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kBindWindow;
  wr.sg_list = std::span<const Sge>(&sge, 1);
  wr.flags = flags;
  wr.rkey = rkey;
  wr.access = access_flags;
  if (Status s = post_send(wr); !s) return Unexpected{std::move(s)};
  return rkey;
}

Result<QueuePair> ProtectionDomain::create_qp(const QpInitAttr& attr) {
  if (attr.send_cq == nullptr || attr.recv_cq == nullptr) return error(Errc::kInvalidArgument, "a QP needs two CQs");
  const DeviceLimits& lim = impl_->ctx->device.limits();
  const QpCaps& c = attr.caps;
  if (c.max_send_wr == 0 || c.max_send_wr > lim.max_qp_wr || c.max_recv_wr > lim.max_qp_wr ||
      c.max_send_sge > lim.max_sge || c.max_recv_sge > lim.max_sge || c.max_inline_data > lim.max_inline_data) {
    return error(Errc::kInvalidArgument, "QP capabilities exceed the device limits");
  }
  auto q = std::make_shared<detail::QpImpl>();
  q->pd = impl_;
  q->send_cq = attr.send_cq->impl_;
  q->recv_cq = attr.recv_cq->impl_;
  q->srq = attr.srq ? attr.srq->impl_ : nullptr;
  verbs::QpConfig cfg;
  cfg.pd = &impl_->pd;
  cfg.send_cq = &q->send_cq->cq;
  cfg.recv_cq = &q->recv_cq->cq;
  cfg.srq = q->srq ? &q->srq->rq : nullptr;
  cfg.caps = c;
  cfg.signal_all = attr.signal_all;
  cfg.user_context = attr.user_context;
  q->qp = std::make_unique<verbs::QueuePair>(impl_->ctx->device, cfg);
  // As with rdma_cm, a new QP is ready for receives at once; connecting moves it to RTS. OFA's
  // ibv_create_qp asks for RESET instead.
  if (!attr.start_in_reset) {
    if (Status s = q->qp->modify_state(QpState::kInit); !s) return Unexpected{s};
  }
  return QueuePair(std::move(q));
}

Result<SharedReceiveQueue> ProtectionDomain::create_srq(std::uint32_t max_wr, std::uint32_t max_sge, void* user_context) {
  const DeviceLimits& lim = impl_->ctx->device.limits();
  if (max_wr == 0 || max_wr > lim.max_srq_wr || max_sge > lim.max_srq_sge) {
    return error(Errc::kInvalidArgument, "SRQ size exceeds the device limits");
  }
  return SharedReceiveQueue(std::make_shared<detail::SrqImpl>(impl_, max_wr, max_sge, user_context));
}

}  // namespace uwarp
