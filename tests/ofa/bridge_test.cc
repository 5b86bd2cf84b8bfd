// Tests of the bridge librdmacm.so.1 will use (ofa/common/uwarp_ofa.h), and through it of the
// connected data path of libibverbs.so.1: two RC QPs created with ibv_* calls are connected over
// 127.0.0.1 with the native connection manager (what rdma_connect / rdma_accept will do), then
// Send, inline Send, Send with Invalidate, RDMA Write and RDMA Read are posted with
// ibv_post_send / ibv_post_recv and their completions polled with ibv_poll_cq; a remote access
// error and a disconnect end the QPs. Linked only against the drop-in libibverbs.so.1: the C++
// API comes from its UWARP_PRIVATE_1 node, as it will for librdmacm.so.1.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>

#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>

#include "common/uwarp_ofa.h"

namespace {

using uwarp::CmEvent;
using uwarp::CmEventType;
using uwarp::EventChannel;

constexpr int kBufSize = 4096;

struct Side {
  ibv_cq* cq = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  alignas(64) char buf[kBufSize] = {};
};

// Polls until one completion arrives (or 5 s pass).
std::optional<ibv_wc> poll_one(ibv_cq* cq) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  ibv_wc wc{};
  while (std::chrono::steady_clock::now() < deadline) {
    const int n = ibv_poll_cq(cq, 1, &wc);
    if (n == 1) return wc;
    if (n < 0) return std::nullopt;
  }
  return std::nullopt;
}

std::optional<CmEvent> next_event(EventChannel& ch, CmEventType type) {
  std::optional<CmEvent> e = ch.get_event(5000);
  if (!e || e->type != type) return std::nullopt;
  return e;
}

class BridgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ASSERT_NE(list, nullptr);
    ASSERT_EQ(n, 1);
    ctx_ = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    ASSERT_NE(ctx_, nullptr);
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    make_side(server_);
    make_side(client_);
  }

  void TearDown() override {
    for (Side* s : {&server_, &client_}) {
      if (s->qp != nullptr) {
        EXPECT_EQ(ibv_destroy_qp(s->qp), 0);
      }
      if (s->mr != nullptr) {
        EXPECT_EQ(ibv_dereg_mr(s->mr), 0);
      }
      if (s->cq != nullptr) {
        EXPECT_EQ(ibv_destroy_cq(s->cq), 0);
      }
      if (s->channel != nullptr) {
        EXPECT_EQ(ibv_destroy_comp_channel(s->channel), 0);
      }
    }
    if (pd_ != nullptr) {
      EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
    }
    if (ctx_ != nullptr) {
      EXPECT_EQ(ibv_close_device(ctx_), 0);
    }
  }

  void make_side(Side& s) {
    s.channel = ibv_create_comp_channel(ctx_);
    ASSERT_NE(s.channel, nullptr);
    s.cq = ibv_create_cq(ctx_, 64, &s, s.channel, 0);
    ASSERT_NE(s.cq, nullptr);
    ibv_qp_init_attr a{};
    a.send_cq = s.cq;
    a.recv_cq = s.cq;
    a.cap.max_send_wr = 16;
    a.cap.max_recv_wr = 16;
    a.cap.max_send_sge = 2;
    a.cap.max_recv_sge = 2;
    a.cap.max_inline_data = 0;  // inline is still accepted up to the device maximum
    a.qp_type = IBV_QPT_RC;
    s.qp = ibv_create_qp(pd_, &a);
    ASSERT_NE(s.qp, nullptr);
    s.mr = ibv_reg_mr(pd_, s.buf, sizeof s.buf,
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_NE(s.mr, nullptr);
  }

  static int modify_state(ibv_qp* qp, ibv_qp_state state) {
    ibv_qp_attr a{};
    a.qp_state = state;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE);
  }

  static ibv_qp_state state_of(ibv_qp* qp) {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    EXPECT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
    return a.qp_state;
  }

  int post_recv(Side& s, std::uint64_t wr_id, std::uint32_t offset, std::uint32_t length) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(s.buf) + offset, length, s.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(s.qp, &wr, &bad);
  }

  // An RDMA Write or Read work request on the server's buffer at `offset` (its own rkey).
  ibv_send_wr server_rdma(std::uint64_t wr_id, ibv_wr_opcode opcode, std::size_t offset) const {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = opcode;
    wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(server_.buf) + offset;
    wr.wr.rdma.rkey = server_.mr->rkey;
    return wr;
  }

  int post_send(Side& s, ibv_send_wr wr, std::uint32_t offset, std::uint32_t length) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(s.buf) + offset, length, s.mr->lkey};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags |= IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(s.qp, &wr, &bad);
  }

  // Connects client_.qp to server_.qp as rdma_connect / rdma_accept will: the server's QP goes
  // to INIT with a receive posted first, the client's stays in RESET.
  void connect() {
    uwarp::Context* core = uwarp::ofa::context_of(ctx_);
    ASSERT_NE(core, nullptr);
    auto ch = EventChannel::create(*core);
    ASSERT_TRUE(ch.has_value());
    events_.emplace(std::move(*ch));
    auto listener = events_->listen("127.0.0.1", 0);
    ASSERT_TRUE(listener.has_value()) << listener.error().to_string();
    ASSERT_EQ(modify_state(server_.qp, IBV_QPS_INIT), 0);
    ASSERT_EQ(post_recv(server_, 1, 0, 256), 0);
    EXPECT_FALSE(uwarp::ofa::qp_has_connection(client_.qp));
    EXPECT_EQ(modify_state(client_.qp, IBV_QPS_RTS), EINVAL);  // no peer yet

    auto conn = uwarp::ofa::connect_qp(*events_, client_.qp, "127.0.0.1", listener->port(), {});
    ASSERT_TRUE(conn.has_value()) << conn.error().to_string();
    client_conn_ = std::move(*conn);
    EXPECT_TRUE(uwarp::ofa::qp_has_connection(client_.qp));
    std::optional<CmEvent> request = next_event(*events_, CmEventType::kConnectRequest);
    ASSERT_TRUE(request.has_value());
    server_conn_ = request->connection;
    const uwarp::Status accepted = uwarp::ofa::accept_qp(server_conn_, server_.qp, {});
    ASSERT_TRUE(accepted.is_ok()) << accepted.to_string();
    ASSERT_TRUE(next_event(*events_, CmEventType::kEstablished).has_value());
    ASSERT_TRUE(next_event(*events_, CmEventType::kEstablished).has_value());
  }

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  Side server_;
  Side client_;
  std::optional<EventChannel> events_;
  uwarp::Connection client_conn_;
  uwarp::Connection server_conn_;
};

TEST_F(BridgeTest, MapsVerbsObjectsToCoreObjects) {
  EXPECT_EQ(uwarp::ofa::bridge_version(), uwarp::ofa::kBridgeVersion);
  EXPECT_EQ(uwarp::ofa::context_of(nullptr), nullptr);
  ASSERT_NE(uwarp::ofa::context_of(ctx_), nullptr);
  EXPECT_EQ(uwarp::ofa::context_of(ctx_)->limits().max_qp_rd_atom, 128u);
  ASSERT_NE(uwarp::ofa::pd_of(pd_), nullptr);
  ASSERT_NE(uwarp::ofa::qp_of(client_.qp), nullptr);
  EXPECT_EQ(uwarp::ofa::qp_of(client_.qp)->qp_num(), client_.qp->qp_num);
  EXPECT_EQ(uwarp::ofa::qp_of(client_.qp)->state(),
            uwarp::QpState::kInit);  // as Linux siw reports a new QP
  ASSERT_NE(uwarp::ofa::cq_of(client_.cq), nullptr);
  EXPECT_EQ(static_cast<int>(uwarp::ofa::cq_of(client_.cq)->capacity()), client_.cq->cqe);
  ASSERT_NE(uwarp::ofa::mr_of(client_.mr), nullptr);
  EXPECT_EQ(uwarp::ofa::mr_of(client_.mr)->lkey(), client_.mr->lkey);
  EXPECT_EQ(uwarp::ofa::channel_of(client_.channel)->fd(), client_.channel->fd);
  EXPECT_EQ(uwarp::ofa::qp_of(nullptr), nullptr);
  EXPECT_EQ(uwarp::ofa::srq_of(nullptr), nullptr);
}

TEST_F(BridgeTest, ConnectedQpsMoveDataThroughVerbs) {
  connect();
  if (HasFatalFailure()) return;
  EXPECT_EQ(state_of(client_.qp), IBV_QPS_RTS);
  EXPECT_EQ(state_of(server_.qp), IBV_QPS_RTS);
  // The connection owns RTR/RTS: asking for them now is accepted without effect.
  EXPECT_EQ(modify_state(client_.qp, IBV_QPS_RTR), 0);
  EXPECT_EQ(modify_state(client_.qp, IBV_QPS_RTS), 0);
  EXPECT_EQ(state_of(client_.qp), IBV_QPS_RTS);
  ibv_qp_attr qa{};
  ibv_qp_init_attr qia{};
  ASSERT_EQ(
      ibv_query_qp(client_.qp, &qa, IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, &qia), 0);
  EXPECT_GT(qa.max_rd_atomic, 0);
  EXPECT_GT(qa.max_dest_rd_atomic, 0);

  // Send into the receive posted before the connection.
  std::strcpy(client_.buf, "hello through ibv_post_send");
  ibv_send_wr send{};
  send.wr_id = 10;
  send.opcode = IBV_WR_SEND;
  ASSERT_EQ(post_send(client_, send, 0, 64), 0);
  auto wc = poll_one(client_.cq);
  ASSERT_TRUE(wc.has_value());
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc->status);
  EXPECT_EQ(wc->opcode, IBV_WC_SEND);
  EXPECT_EQ(wc->wr_id, 10u);
  EXPECT_EQ(wc->qp_num, client_.qp->qp_num);
  wc = poll_one(server_.cq);
  ASSERT_TRUE(wc.has_value());
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc->opcode, IBV_WC_RECV);
  EXPECT_EQ(wc->wr_id, 1u);
  EXPECT_EQ(wc->byte_len, 64u);
  EXPECT_EQ(wc->qp_num, server_.qp->qp_num);
  EXPECT_STREQ(server_.buf, "hello through ibv_post_send");

  // Inline Send although the QP asked for no inline data; the buffer is reusable at once.
  ASSERT_EQ(post_recv(server_, 2, 512, 512), 0);
  char inline_data[200];
  std::memset(inline_data, 'i', sizeof inline_data);
  ibv_sge inl{reinterpret_cast<std::uintptr_t>(inline_data), sizeof inline_data, 0};
  ibv_send_wr iw{};
  iw.wr_id = 11;
  iw.opcode = IBV_WR_SEND;
  iw.sg_list = &inl;
  iw.num_sge = 1;
  iw.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(client_.qp, &iw, &bad), 0);
  std::memset(inline_data, 'x', sizeof inline_data);
  wc = poll_one(client_.cq);
  ASSERT_TRUE(wc.has_value());
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  wc = poll_one(server_.cq);
  ASSERT_TRUE(wc.has_value());
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc->byte_len, sizeof inline_data);
  EXPECT_EQ(server_.buf[512], 'i');
  EXPECT_EQ(server_.buf[512 + sizeof inline_data - 1], 'i');

  // RDMA Write into the server's memory, then RDMA Read of it back.
  std::strcpy(client_.buf + 1024, "written with IBV_WR_RDMA_WRITE");
  ASSERT_EQ(post_send(client_, server_rdma(12, IBV_WR_RDMA_WRITE, 2048), 1024, 64), 0);
  wc = poll_one(client_.cq);
  ASSERT_TRUE(wc.has_value());
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc->opcode, IBV_WC_RDMA_WRITE);
  ASSERT_EQ(post_send(client_, server_rdma(13, IBV_WR_RDMA_READ, 2048), 3072, 64), 0);
  wc = poll_one(client_.cq);
  ASSERT_TRUE(wc.has_value());
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc->opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc->byte_len, 64u);
  EXPECT_STREQ(client_.buf + 3072, "written with IBV_WR_RDMA_WRITE");
  EXPECT_STREQ(server_.buf + 2048, "written with IBV_WR_RDMA_WRITE");

  // Send with Invalidate of a type 2 window the server bound (a registered region is not the
  // peer's to invalidate): the server learns the invalidated STag from its completion.
  static char extra[256];
  ibv_mr* target = ibv_reg_mr(pd_, extra, sizeof extra,
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
  ASSERT_NE(target, nullptr);
  ibv_mw* mw = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  ibv_send_wr bind{};
  bind.wr_id = 13;
  bind.opcode = IBV_WR_BIND_MW;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_mw.mw = mw;
  bind.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  bind.bind_mw.bind_info.mr = target;
  bind.bind_mw.bind_info.addr = reinterpret_cast<std::uintptr_t>(extra);
  bind.bind_mw.bind_info.length = sizeof extra;
  bind.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
  ibv_send_wr* bad_bind = nullptr;
  ASSERT_EQ(ibv_post_send(server_.qp, &bind, &bad_bind), 0);
  wc = poll_one(server_.cq);
  ASSERT_TRUE(wc.has_value());
  ASSERT_EQ(wc->status, IBV_WC_SUCCESS);
  ASSERT_EQ(wc->opcode, IBV_WC_BIND_MW);
  ASSERT_EQ(post_recv(server_, 3, 0, 256), 0);
  ibv_send_wr inv{};
  inv.wr_id = 14;
  inv.opcode = IBV_WR_SEND_WITH_INV;
  inv.invalidate_rkey = mw->rkey;
  ASSERT_EQ(post_send(client_, inv, 0, 16), 0);
  wc = poll_one(client_.cq);
  ASSERT_TRUE(wc.has_value());
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  wc = poll_one(server_.cq);
  ASSERT_TRUE(wc.has_value());
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_TRUE((wc->wc_flags & IBV_WC_WITH_INV) != 0);
  EXPECT_EQ(wc->invalidated_rkey, mw->rkey);
  EXPECT_EQ(ibv_dereg_mr(target), 0) << "the window is unbound";
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

// A list longer than the adapter's chunk of requests: the ones before the bad request are
// posted (and complete in order, their data in place), none after it.
TEST_F(BridgeTest, PostsAListUpToItsFirstBadRequest) {
  connect();
  if (HasFatalFailure()) return;
  constexpr int kList = 12;  // the bad one last, past the first chunk of 8
  std::array<ibv_sge, kList> sges{};
  std::array<ibv_send_wr, kList> list{};
  for (int i = 0; i < kList; ++i) {
    std::memset(client_.buf + i * 16, 'a' + i, 16);
    sges[i] = {reinterpret_cast<std::uintptr_t>(client_.buf) + i * 16, 16, client_.mr->lkey};
    list[i] = server_rdma(100 + i, IBV_WR_RDMA_WRITE, 1024 + i * 16);
    list[i].sg_list = &sges[i];
    list[i].num_sge = 1;
    list[i].send_flags = IBV_SEND_SIGNALED;
    list[i].next = i + 1 < kList ? &list[i + 1] : nullptr;
  }
  list[kList - 1].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(client_.qp, list.data(), &bad), EINVAL);
  EXPECT_EQ(bad, &list[kList - 1]);
  for (int i = 0; i < kList - 1; ++i) {
    auto wc = poll_one(client_.cq);
    ASSERT_TRUE(wc.has_value()) << i;
    EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << i;
    EXPECT_EQ(wc->wr_id, 100u + i);
  }
  // A Read behind the Writes completes after they were placed.
  ASSERT_EQ(post_send(client_, server_rdma(200, IBV_WR_RDMA_READ, 1024), 3072, 16), 0);
  auto wc = poll_one(client_.cq);
  ASSERT_TRUE(wc.has_value());
  EXPECT_EQ(wc->wr_id, 200u);
  for (int i = 0; i < kList - 1; ++i) EXPECT_EQ(server_.buf[1024 + i * 16 + 15], 'a' + i) << i;
  EXPECT_EQ(server_.buf[1024 + (kList - 1) * 16], 0);
}

TEST_F(BridgeTest, DisconnectFlushesReceivesAndFiresTheChannel) {
  connect();
  if (HasFatalFailure()) return;
  ASSERT_EQ(post_recv(server_, 20, 0, 64), 0);
  ASSERT_EQ(ibv_req_notify_cq(server_.cq, 0), 0);
  client_conn_.disconnect();
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  pollfd p{server_.channel->fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  ASSERT_EQ(ibv_get_cq_event(server_.channel, &ev_cq, &ev_ctx), 0);
  EXPECT_EQ(ev_cq, server_.cq);
  EXPECT_EQ(ev_ctx, &server_);
  ibv_ack_cq_events(ev_cq, 1);
  // Both posted receives (the one from connect() and this one) end flushed.
  for (std::uint64_t id : {1u, 20u}) {
    auto wc = poll_one(server_.cq);
    ASSERT_TRUE(wc.has_value());
    EXPECT_EQ(wc->wr_id, id);
    EXPECT_EQ(wc->status, IBV_WC_WR_FLUSH_ERR);
  }
  EXPECT_EQ(state_of(server_.qp), IBV_QPS_ERR);
}

TEST_F(BridgeTest, RemoteAccessErrorEndsBothQps) {
  connect();
  if (HasFatalFailure()) return;
  // An RDMA Read completes when its response arrives, so the peer's refusal reaches it (a Write
  // completes once TCP has its bytes, like Linux siw's).
  ibv_send_wr read = server_rdma(30, IBV_WR_RDMA_READ, 0);
  read.wr.rdma.rkey ^= 0x5a5a5a00;  // not a valid STag at the server
  ASSERT_EQ(post_send(client_, read, 0, 64), 0);
  auto wc = poll_one(client_.cq);
  ASSERT_TRUE(wc.has_value());
  EXPECT_EQ(wc->wr_id, 30u);
  EXPECT_EQ(wc->status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc->status);
  // The server's QP reports the violation as an asynchronous event naming it.
  pollfd p{ctx_->async_fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  ibv_async_event ev{};
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_TRUE(ev.event_type == IBV_EVENT_QP_ACCESS_ERR || ev.event_type == IBV_EVENT_QP_FATAL)
      << ibv_event_type_str(ev.event_type);
  EXPECT_TRUE(ev.element.qp == server_.qp || ev.element.qp == client_.qp);
  ibv_ack_async_event(&ev);
  // Drain whatever else the two QPs reported, so that destroying them does not wait.
  fcntl(ctx_->async_fd, F_SETFL, fcntl(ctx_->async_fd, F_GETFL) | O_NONBLOCK);
  while (ibv_get_async_event(ctx_, &ev) == 0) ibv_ack_async_event(&ev);
}

TEST_F(BridgeTest, RefusesToBindAQpInError) {
  ASSERT_EQ(modify_state(client_.qp, IBV_QPS_INIT), 0);
  ASSERT_EQ(modify_state(client_.qp, IBV_QPS_ERR), 0);
  auto ch = EventChannel::create(*uwarp::ofa::context_of(ctx_));
  ASSERT_TRUE(ch.has_value());
  auto conn = uwarp::ofa::connect_qp(*ch, client_.qp, "127.0.0.1", 9, {});
  ASSERT_FALSE(conn.has_value());
  EXPECT_EQ(conn.error().code(), uwarp::Errc::kInvalidState);
  EXPECT_FALSE(uwarp::ofa::qp_has_connection(client_.qp));
}

}  // namespace
