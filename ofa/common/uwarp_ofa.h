// The bridge between uwarp's two drop-in OFA libraries: how librdmacm.so.1 reaches the uwarp
// core objects behind the verbs objects that libibverbs.so.1 created, and binds connections to
// QPs. See ofa/README.md.
//
// There is one core per process and it lives in libibverbs.so.1. That library exports, under
// the private version node UWARP_PRIVATE_1 (never used by applications):
//   - the functions declared here (namespace uwarp::ofa);
//   - the whole native C++ API of include/uwarp/ (uwarp::Context, EventChannel, Connection,
//     Listener, QueuePair, ..., uwarp::to_string), so that librdmacm.so.1 links against
//     libibverbs.so.1 and calls the same core instead of carrying a second copy.
// librdmacm.so.1 is built in this tree with the same compiler, so C++ types may cross.
//
// Contracts: every function accepts only objects created by this libibverbs.so.1 and not yet
// destroyed (the *_of accessors return null for a null argument or for an ibv_context that is
// not ours). Returned pointers stay valid until the ibv_* object is destroyed. All functions may
// be called from any thread and never throw.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "uwarp/cm.h"
#include "uwarp/status.h"
#include "uwarp/verbs.h"

struct ibv_context;
struct ibv_pd;
struct ibv_mr;
struct ibv_cq;
struct ibv_comp_channel;
struct ibv_qp;
struct ibv_srq;

#define UWARP_OFA_BRIDGE __attribute__((visibility("default")))

namespace uwarp::ofa {

// Bumped when a declaration here changes incompatibly (both libraries are built together; this
// catches a stale one on LD_LIBRARY_PATH).
inline constexpr int kBridgeVersion = 3;
UWARP_OFA_BRIDGE int bridge_version() noexcept;

// The uwarp objects behind verbs objects. The Context is the one librdmacm gives to its
// EventChannel for connections of QPs of this ibv_context.
UWARP_OFA_BRIDGE Context* context_of(ibv_context* context) noexcept;
UWARP_OFA_BRIDGE ProtectionDomain* pd_of(ibv_pd* pd) noexcept;
UWARP_OFA_BRIDGE MemoryRegion* mr_of(ibv_mr* mr) noexcept;
UWARP_OFA_BRIDGE CompletionChannel* channel_of(ibv_comp_channel* channel) noexcept;
UWARP_OFA_BRIDGE CompletionQueue* cq_of(ibv_cq* cq) noexcept;
UWARP_OFA_BRIDGE QueuePair* qp_of(ibv_qp* qp) noexcept;
UWARP_OFA_BRIDGE SharedReceiveQueue* srq_of(ibv_srq* srq) noexcept;

// rdma_connect: connects `qp` (in RESET or INIT, with receives possibly posted) to host:port
// over `channel`; kEstablished, kRejected or kConnectError follows on the channel. From this
// call on the connection owns the QP's RTR/RTS transitions: the QP enters RTS when the MPA
// exchange completes, and ibv_modify_qp to RTR or RTS succeeds without effect. The connection
// lives as long as the QP (ibv_destroy_qp aborts it).
UWARP_OFA_BRIDGE Result<Connection> connect_qp(EventChannel& channel, ibv_qp* qp,
                                               const std::string& host, std::uint16_t port,
                                               const ConnectionParams& params);

// rdma_accept: accepts the pending request `connection` (after kConnectRequest) on `qp`; the
// QP is in RTS when this returns OK (kEstablished follows; in peer-to-peer mode once the RTR
// arrived). Same ownership rules as connect_qp.
UWARP_OFA_BRIDGE Status accept_qp(Connection& connection, ibv_qp* qp,
                                  const ConnectionParams& params);

// rdma_connect, rdma_accept: the connection's rdma_conn_param.rnr_retry_count becomes the QP's
// rnr_retry attribute, and with its min_rnr_timer the QP's receive wait (common/receive_wait.h).
UWARP_OFA_BRIDGE void set_rnr_retry(ibv_qp* qp, std::uint8_t rnr_retry) noexcept;

// A test that is true once the application has polled (or destroyed) every completion that
// `qp`'s send and receive CQs held when this was called: rdma_cm reports a peer's disconnection
// only after the completions that preceded it (cma.cc). `qp` may be a QP of `context` that the
// application is destroying, or has destroyed, on another thread: it is looked up among the
// context's live QPs, never dereferenced otherwise. The test keeps the CQs' state alive, not
// the QP; it may be called from any thread, after the QP and CQs were destroyed too. An empty
// function when `qp` is not a live QP of `context` (or when out of memory): nothing to wait for.
UWARP_OFA_BRIDGE std::function<bool()> completions_polled_test(ibv_context* context,
                                                               ibv_qp* qp) noexcept;

// The live QP of `context` whose number is `qp_num`, or null: the QP an application names by
// rdma_conn_param.qp_num instead of creating it on the rdma_cm id (an "external" QP).
UWARP_OFA_BRIDGE ibv_qp* qp_by_number(ibv_context* context, std::uint32_t qp_num) noexcept;

// True once connect_qp or accept_qp bound a connection to `qp`.
UWARP_OFA_BRIDGE bool qp_has_connection(ibv_qp* qp) noexcept;

}  // namespace uwarp::ofa
