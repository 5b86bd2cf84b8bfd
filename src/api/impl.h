// The objects behind the public handles (include/uwarp/verbs.h, cm.h). Each keeps alive what it
// was created from, so that handles may be destroyed in any order.
#pragma once

#include <memory>

#include "base/mutex.h"
#include "cm/connection.h"
#include "cm/events.h"
#include "runtime/completion_channel.h"
#include "runtime/engine_pool.h"
#include "verbs/completion_queue.h"
#include "verbs/device.h"
#include "verbs/protection_domain.h"
#include "verbs/queue_pair.h"
#include "verbs/receive_queue.h"
#include "verbs/revocation.h"

namespace uwarp::detail {

struct ContextImpl {
  verbs::Device device;
  runtime::AsyncEventQueue async;
  // Last member: the progress threads stop first, before anything they may touch.
  runtime::EnginePool engines;
  ContextImpl() {
    device.set_async_sink(&async);
    device.stats().set_io(engines.control().backend().name(), runtime::Engine::default_send_budget());
  }
  ~ContextImpl() { device.set_async_sink(nullptr); }
};

struct PdImpl {
  std::shared_ptr<ContextImpl> ctx;
  verbs::ProtectionDomain pd;
  PdImpl(std::shared_ptr<ContextImpl> c) : ctx(std::move(c)), pd(ctx->device.allocate_pd_handle()) {}
};

struct MrImpl {
  std::shared_ptr<PdImpl> pd;
  verbs::MemoryRegionRef mr;
  Mutex mu;
  bool registered GUARDED_BY(mu) = true;
  // force: the handle is destroyed, and windows bound in the region are invalidated with it.
  Status deregister(bool force = false) {
    MutexLock lock(mu);
    if (!registered) return Status::ok();
    if (Status s = verbs::deregister_region(pd->ctx->device, mr, force); !s) return s;
    registered = false;
    pd->pd.users.fetch_sub(1);
    return Status::ok();
  }
  ~MrImpl() { [[maybe_unused]] Status s = deregister(/*force=*/true); }
};

// A window or a fast region: its STag slot, registered with the device so that work requests
// find it by STag.
struct SlotImpl {
  std::shared_ptr<PdImpl> pd;
  std::shared_ptr<verbs::StagSlot> slot;
  ~SlotImpl() { pd->pd.users.fetch_sub(1); }
};

struct ChannelImpl {
  std::shared_ptr<ContextImpl> ctx;
  runtime::CompletionChannel channel;
};

struct CqImpl {
  std::shared_ptr<ContextImpl> ctx;
  std::shared_ptr<ChannelImpl> channel;
  verbs::CompletionQueue cq;
  CqImpl(std::shared_ptr<ContextImpl> c, std::shared_ptr<ChannelImpl> ch, std::uint32_t n, void* user)
      : ctx(std::move(c)), channel(std::move(ch)), cq(n, channel ? &channel->channel : nullptr, user) {}
  // Events of this CQ not yet taken from the channel must not outlive it (the channel would hand
  // out a dangling CQ).
  ~CqImpl() {
    if (channel) channel->channel.forget(&cq);
  }
};

struct SrqImpl {
  std::shared_ptr<PdImpl> pd;
  verbs::ReceiveQueue rq;
  void* user_context;
  SrqImpl(std::shared_ptr<PdImpl> p, std::uint32_t max_wr, std::uint32_t max_sge, void* user)
      : pd(std::move(p)), rq(&pd->pd, max_wr, max_sge), user_context(user) {}
};

struct QpImpl {
  std::shared_ptr<PdImpl> pd;
  std::shared_ptr<CqImpl> send_cq;
  std::shared_ptr<CqImpl> recv_cq;
  std::shared_ptr<SrqImpl> srq;
  std::unique_ptr<verbs::QueuePair> qp;
  Mutex mu;
  // The connection carrying this QP lives at least as long as the QP.
  std::shared_ptr<cm::Connection> connection GUARDED_BY(mu);
  void bind(const std::shared_ptr<cm::Connection>& c) {
    std::shared_ptr<cm::Connection> old;
    MutexLock lock(mu);
    old = std::exchange(connection, c);
    if (old && old != c) old->abort();
  }
  ~QpImpl() {
    // The connection must stop using the QP before it goes.
    std::shared_ptr<cm::Connection> c;
    {
      MutexLock lock(mu);
      c = std::move(connection);
    }
    if (c) c->abort();
  }
};

struct EventChannelImpl {
  std::shared_ptr<ContextImpl> ctx;
  std::shared_ptr<cm::EventChannel> events = std::make_shared<cm::EventChannel>();
};

// The objects behind the public handles, for in-tree adapters that map another API onto the
// core (the OFA libraries in ofa/). A friend of every handle class. Not part of the installed
// API: the detail:: types may change at any time.
struct Access {
  template <typename Handle>
  static const auto& impl(const Handle& handle) {
    return handle.impl_;
  }
  // A handle around an existing object (e.g. a second handle to the same QP).
  template <typename Handle, typename Impl>
  static Handle wrap(std::shared_ptr<Impl> impl) {
    return Handle(std::move(impl));
  }
};

}  // namespace uwarp::detail
