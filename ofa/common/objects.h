// The OFA objects of libibverbs.so.1 and the uwarp core objects behind them.
//
// Every object handed to applications is the rdma-core struct (ibv_pd, ibv_cq, ...) as the
// first member of a standard-layout wrapper that also holds the uwarp handle, so that a pointer
// converts both ways with no lookup: `OfaCq::from(ibv_cq*)`. The ibv_context is the last
// member of a full struct verbs_context (rdma-core's extended-context contract), which is the
// first member of OfaContext.
//
// Internal to libibverbs.so.1: librdmacm.so.1 must not depend on these layouts; it uses the
// exported functions of uwarp_ofa.h instead.
//
// Lifetime: objects are created and destroyed by the ibv_* calls. A wrapper's core handle keeps
// what it was created from alive (see include/uwarp/verbs.h), so the order in which the
// application destroys things never frees memory the core still uses; the usage counts below
// only reproduce the EBUSY answers of the OFA API.
//
// Threads: the ibv_* struct fields are written at creation only, except the event counters
// (ibv_cq.comp_events_completed, async_events_completed, ibv_qp/ibv_srq.events_completed and the
// *_delivered counters here), which are guarded by the struct's own pthread mutex, as in
// rdma-core, and signalled on its condition variable.
#pragma once

#include <net/if.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <unordered_map>

#include "base/mutex.h"
#include "common/verbs_api.h"
#include "uwarp/verbs.h"

namespace uwarp::ofa {

// The identity of the single uwarp device, derived once per process from the first Ethernet
// interface (its MAC gives the node GUID and the link-local GID, as Linux siw does).
struct DeviceInfo {
  ibv_device ibv;           // what ibv_get_device_list returns (static storage)
  std::uint64_t node_guid;  // network byte order, as ibv_device_attr.node_guid
  ibv_gid gid;              // the one GID: fe80::/64 with the EUI-64 of the MAC
  unsigned ifindex;         // 0 if no interface was found
  ibv_mtu active_mtu;       // from the interface MTU
  char netdev[IF_NAMESIZE];
};
const DeviceInfo& device_info();
inline bool is_uwarp_device(const ibv_device* d) {
  return d == &device_info().ibv;
}

// The vendor and part ids reported by ibv_query_device: outside the tables of perftest and
// rdma-core providers (Mellanox, Chelsio, Intel, Broadcom, QLogic, EFA; siw is 0x626d74), so
// that tools treat the device as a generic iWARP RNIC. "uwp".
inline constexpr std::uint32_t kVendorId = 0x757770;
inline constexpr std::uint32_t kVendorPartId = 1;

// Converts a pointer to the ibv_* struct back to its wrapper. The struct is the first member of
// a standard-layout wrapper, so the two addresses are the same object address.
template <typename Wrapper, typename Ibv>
Wrapper* wrapper_of(Ibv* ibv) {
  static_assert(std::is_standard_layout_v<Wrapper>, "wrapper must be standard-layout");
  static_assert(offsetof(Wrapper, ibv) == 0, "the ibv_* struct must be the first member");
  return reinterpret_cast<Wrapper*>(ibv);
}

struct OfaQp;

struct OfaContext {
  verbs_context vctx{};  // first member; applications see &vctx.context
  Context core;
  // Async events name their QP by an id (the core QP's user context), never by pointer, so an
  // event that outlives its QP is recognised and dropped.
  Mutex objects_mu;
  std::unordered_map<std::uint64_t, OfaQp*> qps GUARDED_BY(objects_mu);
  std::atomic<std::uint64_t> next_id{1};

  explicit OfaContext(Context c) : core(std::move(c)) {}
  ibv_context* ibv() { return &vctx.context; }
  // Null unless `context` was opened by this library.
  static OfaContext* from(ibv_context* context);
};

struct OfaPd {
  ibv_pd ibv{};
  ProtectionDomain core;
  std::atomic<std::uint32_t> users{0};  // MRs, MWs, QPs and SRQs: dealloc_pd answers EBUSY
  explicit OfaPd(ProtectionDomain p) : core(std::move(p)) {}
  static OfaPd* from(ibv_pd* p) { return wrapper_of<OfaPd>(p); }
};

struct OfaMr {
  ibv_mr ibv{};
  MemoryRegion core;
  explicit OfaMr(MemoryRegion m) : core(std::move(m)) {}
  static OfaMr* from(ibv_mr* m) { return wrapper_of<OfaMr>(m); }
};

// A memory window. ibv.rkey is the STag of the last bind posted (ibv_bind_mw, IBV_WR_BIND_MW),
// written when the bind is posted, as rdma-core's providers do; the application reads it.
struct OfaMw {
  ibv_mw ibv{};
  MemoryWindow core;
  explicit OfaMw(MemoryWindow w) : core(std::move(w)) {}
  static OfaMw* from(ibv_mw* w) { return wrapper_of<OfaMw>(w); }
};

struct OfaChannel {
  ibv_comp_channel ibv{};  // ibv.refcnt counts CQs (guarded by the context's ibv mutex)
  CompletionChannel core;
  explicit OfaChannel(CompletionChannel c) : core(std::move(c)) {}
  static OfaChannel* from(ibv_comp_channel* c) { return wrapper_of<OfaChannel>(c); }
};

struct OfaCq {
  // ibv_create_cq hands out &ibv, ibv_create_cq_ex &ex: ibv_cq_ex begins with ibv_cq's fields
  // (ibv_cq_ex_to_cq is a cast), then its polling functions.
  union {
    ibv_cq ibv;
    ibv_cq_ex ex;
  };
  // Extended polling (ibv_start_poll .. ibv_end_poll): the completion the read_* functions
  // report. Used only by the thread polling (the verbs API makes it serialise its polls).
  ibv_wc current{};
  OfaCq() : ex{} {}
  // Set right after construction: the core CQ's user context is this wrapper, which therefore
  // exists first.
  std::optional<CompletionQueue> core;
  std::atomic<std::uint32_t> qp_users{0};  // QPs using it as send or receive CQ (twice if both)
  // Events handed to the application (guarded by ibv.mutex); destroy waits until the
  // application has acknowledged as many (ibv.comp_events_completed, async_events_completed).
  std::uint32_t comp_events_delivered = 0;
  std::uint32_t async_events_delivered = 0;
  static OfaCq* from(ibv_cq* c) { return wrapper_of<OfaCq>(c); }
  static OfaCq* from(ibv_cq_ex* c) { return from(ibv_cq_ex_to_cq(c)); }
};

struct OfaSrq {
  ibv_srq ibv{};
  SharedReceiveQueue core;
  std::uint32_t max_wr = 0;
  std::uint32_t max_sge = 0;
  std::atomic<std::uint32_t> qp_users{0};
  std::uint32_t events_delivered = 0;  // guarded by ibv.mutex
  explicit OfaSrq(SharedReceiveQueue s) : core(std::move(s)) {}
  static OfaSrq* from(ibv_srq* s) { return wrapper_of<OfaSrq>(s); }
};

// Attributes ibv_modify_qp accepts that the core does not model; ibv_query_qp reports them.
struct QpAttributes {
  unsigned qp_access_flags = 0;
  std::uint8_t max_rd_atomic = 0;       // ORD asked for (the connection negotiates the rest)
  std::uint8_t max_dest_rd_atomic = 0;  // IRD asked for
  std::uint8_t timeout = 0;
  std::uint8_t retry_cnt = 0;
  std::uint8_t rnr_retry = 0;
  std::uint8_t min_rnr_timer = 0;
  std::uint32_t sq_psn = 0;
  std::uint32_t rq_psn = 0;
  int path_mtu = IBV_MTU_1024;  // enum ibv_mtu, as the application passed it
};

struct SendBatch;  // ibverbs/queue_pair_ex.cc

struct OfaQp {
  // ibv_create_qp hands out &ibv; ibv_qp_to_qp_ex gives &ex (whose first member is the same
  // ibv_qp) for a QP created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, whose ibv_wr_* functions build
  // `batch`.
  union {
    ibv_qp ibv;
    ibv_qp_ex ex;
  };
  QueuePair core;
  std::uint64_t id = 0;  // key in OfaContext::qps and the core QP's user context
  ibv_qp_cap cap{};      // what the QP was created with (as reported back to the application)
  bool sq_sig_all = false;
  Mutex attr_mu;
  QpAttributes attr GUARDED_BY(attr_mu);
  std::uint32_t events_delivered = 0;  // guarded by ibv.mutex
  // The requests between ibv_wr_start and ibv_wr_complete (null unless the QP is extended); the
  // verbs API makes the application serialise them, as posts.
  std::unique_ptr<SendBatch> batch;
  explicit OfaQp(QueuePair q);
  ~OfaQp();
  static OfaQp* from(ibv_qp* q) { return wrapper_of<OfaQp>(q); }
  static OfaQp* from(ibv_qp_ex* q) { return from(&q->qp_base); }
};

}  // namespace uwarp::ofa
