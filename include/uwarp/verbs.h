// uwarp's native verbs API: a software iWARP RNIC in this process. RAII handles, results
// instead of exceptions. Lifetime rule: every object keeps what it was created from alive
// (a CQ keeps its context, an MR its PD), so handles may be destroyed in any order; a QP
// disconnects when destroyed.
//
//   auto ctx = uwarp::Context::open().value();
//   auto pd  = ctx.alloc_pd().value();
//   auto mr  = pd.reg_mr(buf, len, uwarp::access::kLocalWrite | uwarp::access::kRemoteWrite).value();
//   auto cq  = ctx.create_cq(256).value();
//   auto qp  = pd.create_qp({.send_cq = &cq, .recv_cq = &cq}).value();
//
// Threads: every call may be made from any thread. Data is placed and Read Requests are
// answered by a library progress thread (docs/threading.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "uwarp/status.h"
#include "uwarp/types.h"

namespace uwarp {

namespace detail {
struct ContextImpl;
struct PdImpl;
struct MrImpl;
struct CqImpl;
struct ChannelImpl;
struct SrqImpl;
struct QpImpl;
struct SlotImpl;
// Reaches the objects behind the handles; for in-tree adapters such as the OFA libraries
// (ofa/), defined in src/api/impl.h. Not for applications.
struct Access;
}  // namespace detail

class ProtectionDomain;
class CompletionQueue;
class CompletionChannel;
class SharedReceiveQueue;
class QueuePair;
class MemoryRegion;
class MemoryWindow;
class FastRegion;

// One software RNIC: device limits, a progress thread, the STag table.
class Context {
 public:
  static Result<Context> open();
  const DeviceLimits& limits() const;

  Result<ProtectionDomain> alloc_pd();
  Result<CompletionChannel> create_comp_channel();
  // A CQ of at least `min_entries`; events go to `channel` when armed; `user_context` is
  // returned by CompletionChannel::get_event.
  Result<CompletionQueue> create_cq(std::uint32_t min_entries, CompletionChannel* channel = nullptr,
                                    void* user_context = nullptr);
  // Asynchronous events (QP fatal, CQ overflow, SRQ limit): a pollable fd and the next event.
  int async_fd() const;
  std::optional<AsyncEvent> get_async_event(int timeout_ms);

 private:
  friend struct detail::Access;
  friend class EventChannel;
  friend class ProtectionDomain;
  explicit Context(std::shared_ptr<detail::ContextImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::ContextImpl> impl_;
};

class MemoryRegion {
 public:
  std::uint32_t lkey() const;
  std::uint32_t rkey() const;  // the STag a peer uses; equal to lkey
  void* addr() const;
  std::size_t length() const;
  std::uint32_t access() const;
  // An SGE covering [offset, offset + length) of this region.
  Sge sge(std::size_t offset, std::uint32_t length) const;
  // Deregisters now; later accesses by peers are refused. kBusy while memory windows are bound in
  // the region. The destructor deregisters too, invalidating such windows.
  Status deregister();

 private:
  friend struct detail::Access;
  friend class ProtectionDomain;
  explicit MemoryRegion(std::shared_ptr<detail::MrImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::MrImpl> impl_;
};

enum class WindowType : std::uint8_t { kType1 = 1, kType2 = 2 };

// A memory window: an STag of its own onto part of a region that allows binding
// (access::kMwBind), with remote rights of its own (read, write, atomic; write and atomic only in
// a region with local write). Bound by a WrOpcode::kBindWindow work request, which takes effect
// in posting order: type 1 through QueuePair::bind_mw, where each bind (and an unbind, length 0)
// moves it to the next key; type 2 with a key the application chooses, to the QP it is posted
// on, which alone may use it, and only while unbound: it is unbound by kLocalInvalidate or by the
// peer's Send with Invalidate. A region with windows bound is not deregistered (kBusy).
class MemoryWindow {
 public:
  WindowType type() const;
  // The STag of the current binding (or of the last one).
  std::uint32_t rkey() const;
  // Type 2: the STag a bind with `key` gives it (its index, that key).
  std::uint32_t rkey_with_key(std::uint8_t key) const;

 private:
  friend struct detail::Access;
  friend class ProtectionDomain;
  friend class QueuePair;
  explicit MemoryWindow(std::shared_ptr<detail::SlotImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::SlotImpl> impl_;
};

// A fast-registered region: an STag that a WrOpcode::kRegisterFastRegion work request binds to
// application memory (in posting order, with a key the application chooses, only while it is
// unregistered) and kLocalInvalidate, or the peer's Send with Invalidate, unbinds. Usable as an
// lkey and an rkey while registered.
class FastRegion {
 public:
  // The STag of the current registration (or of the last one).
  std::uint32_t rkey() const;
  // The STag a registration with `key` gives it (its index, that key).
  std::uint32_t rkey_with_key(std::uint8_t key) const;

 private:
  friend struct detail::Access;
  friend class ProtectionDomain;
  explicit FastRegion(std::shared_ptr<detail::SlotImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::SlotImpl> impl_;
};

class CompletionChannel {
 public:
  int fd() const;  // readable while events are undelivered
  // Waits for one event (timeout_ms: 0 polls, -1 forever); returns the CQ's user context,
  // or nullopt on timeout. Each armed CQ fires at most one event per req_notify.
  std::optional<void*> get_event(int timeout_ms);

 private:
  friend struct detail::Access;
  friend class Context;
  explicit CompletionChannel(std::shared_ptr<detail::ChannelImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::ChannelImpl> impl_;
};

class CompletionQueue {
 public:
  // Moves up to out.size() completions into out; returns how many. Never waits for I/O. When
  // the CQ is empty, the calling thread receives for the QPs that complete on this CQ (busy
  // polling: non-blocking receive system calls, skipped for a QP another thread is receiving
  // on) and looks again, so a thread that spins on poll gets its completions without waiting
  // for the library's progress thread. An application that stops polling needs nothing else:
  // the progress thread takes over again (docs/threading.md).
  std::size_t poll(std::span<WorkCompletion> out);
  // Arms the CQ for one event on its channel: the next completion, or (solicited_only) the
  // next Send with Solicited Event or error completion. Receiving for the CQ's QPs goes back
  // to the progress thread at once (the caller is about to block).
  Status req_notify(bool solicited_only = false);
  std::uint32_t capacity() const;

 private:
  friend struct detail::Access;
  friend class Context;
  friend class ProtectionDomain;
  explicit CompletionQueue(std::shared_ptr<detail::CqImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::CqImpl> impl_;
};

class SharedReceiveQueue {
 public:
  Status post_recv(const RecvWr& wr);
  // Arms the SRQ limit event: fires once when fewer than `limit` receives remain.
  void arm_limit(std::uint32_t limit);
  std::size_t size() const;

 private:
  friend struct detail::Access;
  friend class ProtectionDomain;
  explicit SharedReceiveQueue(std::shared_ptr<detail::SrqImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::SrqImpl> impl_;
};

struct QpInitAttr {
  CompletionQueue* send_cq = nullptr;
  CompletionQueue* recv_cq = nullptr;
  SharedReceiveQueue* srq = nullptr;
  QpCaps caps{};
  bool signal_all = false;  // every send WR completes with a completion
  void* user_context = nullptr;
  // OFA semantics (ibv_create_qp): the QP starts in RESET instead of INIT.
  bool start_in_reset = false;
};

class QueuePair {
 public:
  std::uint32_t qp_num() const;
  QpState state() const;
  // Posts one work request. Errors: a request the QP cannot take (bad opcode, too many SGEs,
  // full queue, QP not yet connected). Failures during processing become completions.
  Status post_send(const SendWr& wr);
  // Posts a list in order, up to the first request that cannot be posted (*posted, if given:
  // how many were), and hands them to the transport together: consecutive messages leave in as
  // few socket writes as fit (ibv_post_send's list). The error is that request's.
  Status post_send(std::span<const SendWr> wrs, std::size_t* posted = nullptr);
  Status post_recv(const RecvWr& wr);
  // Receiver not ready: how long an inbound Send or Immediate Data message that finds no
  // posted receive holds the connection's reception, waiting for one (TCP flow control holds
  // the peer meanwhile), before the QP fails with the Terminate for no buffer. Zero (the
  // default): at once, as Linux siw; kWaitForever: no limit. A QP with a shared receive queue
  // does not wait. Takes effect for the next wait (docs/receiver-not-ready.md).
  static constexpr std::chrono::milliseconds kWaitForever = std::chrono::milliseconds::max();
  void set_receive_wait(std::chrono::milliseconds limit);
  // Type 1 window: posts a kBindWindow request that binds `window` over `range` (in `region`'s
  // address space; length 0 unbinds) with `access`, and returns the STag it will have once the
  // request has taken effect (ibv_bind_mw).
  Result<std::uint32_t> bind_mw(MemoryWindow& window, const MemoryRegion& region, const Sge& range,
                                std::uint32_t access, std::uint64_t wr_id,
                                std::uint32_t flags = send_flags::kSignaled);
  Status modify_state(QpState target);
  // The negotiated inbound and outbound RDMA Read limits (after connection).
  std::uint16_t ird() const;
  std::uint16_t ord() const;

 private:
  friend struct detail::Access;
  friend class ProtectionDomain;
  friend class EventChannel;
  friend class Connection;
  explicit QueuePair(std::shared_ptr<detail::QpImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::QpImpl> impl_;
};

class ProtectionDomain {
 public:
  // Registers [addr, addr + length) with the access:: rights given. The memory stays owned by
  // the application and must stay valid until the region is deregistered; with
  // access::kOnDemand it need not be mapped at all (an access to what is not mapped ends in an
  // error), and (nullptr, SIZE_MAX) registers the whole address space.
  Result<MemoryRegion> reg_mr(void* addr, std::size_t length, std::uint32_t access);
  // As reg_mr, but peers and local SGEs address the region as [iova, iova + length) instead of
  // by its virtual address (ibv_reg_mr_iova).
  Result<MemoryRegion> reg_mr_iova(void* addr, std::size_t length, std::uint64_t iova,
                                   std::uint32_t access);
  Result<MemoryWindow> alloc_mw(WindowType type);
  Result<FastRegion> alloc_fast_region();
  Result<QueuePair> create_qp(const QpInitAttr& attr);
  Result<SharedReceiveQueue> create_srq(std::uint32_t max_wr, std::uint32_t max_sge, void* user_context = nullptr);

 private:
  friend struct detail::Access;
  friend class Context;
  explicit ProtectionDomain(std::shared_ptr<detail::PdImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::PdImpl> impl_;
};

}  // namespace uwarp
