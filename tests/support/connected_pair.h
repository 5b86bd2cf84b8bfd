// Test support: two connected QPs over loopback TCP through the native API, with registered
// buffers on both sides and helpers that wait for completions with a time bound. Under
// tests/support/in_netns_pair.sh the two QPs are in two network namespaces instead (netns.h).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "support/netns.h"
#include "uwarp/uwarp.h"

namespace uwarp::testing {

inline constexpr int kEventTimeoutMs = 5000;

// n bytes of a pseudo-random pattern that `seed` determines.
inline std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

struct Side {
  ProtectionDomain pd;
  CompletionQueue cq;
  QueuePair qp;
  std::vector<std::uint8_t> buf;
  MemoryRegion mr;
  Connection conn;
};

// A work request of `op` whose local memory is `local` (an SGE of from.mr, which must outlive
// the request), aimed at `remote_offset` of `to`'s buffer (an RDMA Write or Read, an atomic).
inline SendWr remote_wr(WrOpcode op, const Sge& local, const Side& to, std::size_t remote_offset,
                        std::uint64_t wr_id) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = {&local, 1};
  wr.remote_addr = reinterpret_cast<std::uintptr_t>(to.buf.data()) + remote_offset;
  wr.rkey = to.mr.rkey();
  return wr;
}

// Waits for one completion on `cq`, up to `timeout`.
inline std::optional<WorkCompletion> wait_wc(CompletionQueue& cq, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  WorkCompletion wc;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cq.poll({&wc, 1}) == 1) return wc;
    std::this_thread::yield();
  }
  return std::nullopt;
}

// Collects `n` completions from `cq` (fewer if the time bound passes).
inline std::vector<WorkCompletion> wait_wcs(CompletionQueue& cq, std::size_t n,
                                            std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  std::vector<WorkCompletion> out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    WorkCompletion wc[16];
    const std::size_t got = cq.poll({wc, std::min<std::size_t>(16, n - out.size())});
    out.insert(out.end(), wc, wc + got);
    if (got == 0) std::this_thread::yield();
  }
  return out;
}

inline std::optional<CmEvent> wait_event(EventChannel& ch, CmEventType type, int timeout_ms = kEventTimeoutMs) {
  auto e = ch.get_event(timeout_ms);
  if (!e) {
    ADD_FAILURE() << "no CM event, expected " << to_string(type);
    return std::nullopt;
  }
  EXPECT_EQ(to_string(e->type), to_string(type)) << e->status.to_string();
  return e;
}

class ConnectedPair {
 public:
  struct Options {
    std::size_t buffer_size = 1 << 20;
    std::string host = "127.0.0.1";
    ConnectionParams client_params{};
    ConnectionParams server_params{};
    std::uint32_t access = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;
    std::uint32_t recv_wr = 64;
    QpCaps caps{};
  };

  ConnectedPair() : ConnectedPair(Options{}) {}
  explicit ConnectedPair(const Options& o)
      : ctx_(Context::open().value()),
        client_ch_(EventChannel::create(ctx_).value()),
        server_ch_(EventChannel::create(ctx_).value()) {
    client = make_side(o);
    server = make_side(o);
    const std::optional<NetnsPair> ns = netns_pair_from_environment();
    const std::string host = ns ? ns->server_host : o.host;
    auto listener = [&] {
      ScopedNetns in(ns ? ns->server_ns : "");
      EXPECT_TRUE(in.ok()) << "cannot enter the server's namespace " << ns->server_ns;
      return server_ch_.listen(host, 0);
    }();
    if (!listener) {
      ADD_FAILURE() << listener.error().to_string();
      return;
    }
    listener_.emplace(*listener);
    auto c = [&] {
      ScopedNetns in(ns ? ns->client_ns : "");
      EXPECT_TRUE(in.ok()) << "cannot enter the client's namespace " << ns->client_ns;
      return client_ch_.connect(host, listener_->port(), client->qp, o.client_params);
    }();
    if (!c) {
      ADD_FAILURE() << c.error().to_string();
      return;
    }
    client->conn = *c;
    auto req = wait_event(server_ch_, CmEventType::kConnectRequest);
    if (!req) return;
    server->conn = req->connection;
    request_private_data = req->private_data;
    if (Status s = server->conn.accept(server->qp, o.server_params); !s) {
      ADD_FAILURE() << s.to_string();
      return;
    }
    auto est_s = wait_event(server_ch_, CmEventType::kEstablished);
    auto est_c = wait_event(client_ch_, CmEventType::kEstablished);
    if (est_c) reply_private_data = est_c->private_data;
    connected = est_s && est_c && est_s->type == CmEventType::kEstablished &&
                est_c->type == CmEventType::kEstablished;
  }

  std::optional<Side> client;
  std::optional<Side> server;
  bool connected = false;
  std::vector<std::uint8_t> request_private_data;
  std::vector<std::uint8_t> reply_private_data;
  Context& context() { return ctx_; }
  EventChannel& client_events() { return client_ch_; }
  EventChannel& server_events() { return server_ch_; }

 private:
  Side make_side(const Options& o) {
    auto pd = ctx_.alloc_pd().value();
    auto cq = ctx_.create_cq(4096).value();
    QpInitAttr attr;
    attr.send_cq = &cq;
    attr.recv_cq = &cq;
    attr.caps = o.caps;
    auto qp = pd.create_qp(attr).value();
    std::vector<std::uint8_t> buf(o.buffer_size);
    auto mr = pd.reg_mr(buf.data(), buf.size(), o.access).value();
    return Side{std::move(pd), std::move(cq), std::move(qp), std::move(buf), std::move(mr), {}};
  }

  Context ctx_;
  EventChannel client_ch_;
  EventChannel server_ch_;
  std::optional<Listener> listener_;
};

// One more connection through a ConnectedPair's context and event channels, for tests of CQ
// events: the server QP `sqp` completes on `cq`, which has the completion channel `ch` (user
// context &tag) and a 256-byte buffer `mr`; the client QP `cqp` completes on `ccq`. The
// constructor stops at the connect request (check `req`), so that a test can post receives
// before accept() completes the connection.
struct EventedConnection {
  explicit EventedConnection(ConnectedPair& p)
      : pair(p),
        pd(p.context().alloc_pd().value()),
        ch(p.context().create_comp_channel().value()),
        cq(p.context().create_cq(64, &ch, &tag).value()),
        sqp(pd.create_qp({.send_cq = &cq, .recv_cq = &cq}).value()),
        buf(256),
        mr(pd.reg_mr(buf.data(), buf.size(), access::kLocalWrite).value()),
        listener(p.server_events().listen("127.0.0.1", 0).value()),
        cpd(p.context().alloc_pd().value()),
        ccq(p.context().create_cq(64).value()),
        cqp(cpd.create_qp({.send_cq = &ccq, .recv_cq = &ccq}).value()),
        conn(p.client_events().connect("127.0.0.1", listener.port(), cqp).value()),
        req(wait_event(p.server_events(), CmEventType::kConnectRequest)) {}

  // Accepts the request; true once both sides are established.
  bool accept() {
    return req && req->connection.accept(sqp, {}) &&
           wait_event(pair.server_events(), CmEventType::kEstablished) &&
           wait_event(pair.client_events(), CmEventType::kEstablished);
  }

  ConnectedPair& pair;
  int tag = 0;
  ProtectionDomain pd;
  CompletionChannel ch;
  CompletionQueue cq;
  QueuePair sqp;
  std::vector<std::uint8_t> buf;
  MemoryRegion mr;
  Listener listener;
  ProtectionDomain cpd;
  CompletionQueue ccq;
  QueuePair cqp;
  Connection conn;
  std::optional<CmEvent> req;
};

}  // namespace uwarp::testing
