// uwarp against a raw peer breaking iWARP rules: Terminate table, peer Terminates, MPA failures.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "integration/raw_peer.h"
#include "support/connected_pair.h"
#include "support/marker_model.h"
#include "uwarp/uwarp.h"
#include "wire/rdmap_ext.h"

namespace uwarp::testing {
namespace {

using wire::RdmapOpcode;
using wire::TerminateCode;
using wire::TermLayer;

constexpr int kTimeoutMs = 10000;

// What the server tells the raw client in its MPA reply private data, so that the raw client
// can aim at real memory: a region with remote write and read, one without remote access, and
// one registered in another PD.
struct ServerKeys {
  std::uint32_t rw_stag = 0;
  std::uint64_t rw_addr = 0;
  std::uint32_t rw_length = 0;
  std::uint32_t noremote_stag = 0;
  std::uint64_t noremote_addr = 0;
  std::uint32_t other_stag = 0;
  std::uint64_t other_addr = 0;

  static constexpr std::size_t kSize = 4 + 8 + 4 + 4 + 8 + 4 + 8;

  std::vector<std::uint8_t> encode() const {
    std::vector<std::uint8_t> b(kSize);
    std::uint8_t* p = b.data();
    store_be32(p, rw_stag);
    store_be64(p + 4, rw_addr);
    store_be32(p + 12, rw_length);
    store_be32(p + 16, noremote_stag);
    store_be64(p + 20, noremote_addr);
    store_be32(p + 28, other_stag);
    store_be64(p + 32, other_addr);
    return b;
  }
  static std::optional<ServerKeys> decode(const std::vector<std::uint8_t>& b) {
    if (b.size() != kSize) return std::nullopt;
    const std::uint8_t* p = b.data();
    ServerKeys k;
    k.rw_stag = load_be32(p);
    k.rw_addr = load_be64(p + 4);
    k.rw_length = load_be32(p + 12);
    k.noremote_stag = load_be32(p + 16);
    k.noremote_addr = load_be64(p + 20);
    k.other_stag = load_be32(p + 28);
    k.other_addr = load_be64(p + 32);
    return k;
  }
};

std::uint8_t first_byte(const TerminateCode& c) {
  return static_cast<std::uint8_t>((static_cast<unsigned>(c.layer) << 4) | c.etype);
}

// A uwarp QP with its own CQ and registered buffer.
struct Endpoint {
  CompletionQueue cq;
  QueuePair qp;
  std::vector<std::uint8_t> buf;
  MemoryRegion mr;
  Connection conn;
};

class TerminateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.emplace(Context::open().value());
    server_ch_.emplace(EventChannel::create(*ctx_).value());
    client_ch_.emplace(EventChannel::create(*ctx_).value());
    pd_.emplace(ctx_->alloc_pd().value());
    pd_other_.emplace(ctx_->alloc_pd().value());
    cq_.emplace(ctx_->create_cq(1024).value());
    rw_buf_.assign(64 * 1024, 0);
    noremote_buf_.assign(4096, 0);
    other_buf_.assign(4096, 0);
    rw_mr_.emplace(pd_->reg_mr(rw_buf_.data(), rw_buf_.size(),
                               access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead)
                       .value());
    noremote_mr_.emplace(
        pd_->reg_mr(noremote_buf_.data(), noremote_buf_.size(), access::kLocalWrite).value());
    other_mr_.emplace(pd_other_
                          ->reg_mr(other_buf_.data(), other_buf_.size(),
                                   access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead)
                          .value());
    keys_.rw_stag = rw_mr_->rkey();
    keys_.rw_addr = reinterpret_cast<std::uintptr_t>(rw_buf_.data());
    keys_.rw_length = static_cast<std::uint32_t>(rw_buf_.size());
    keys_.noremote_stag = noremote_mr_->rkey();
    keys_.noremote_addr = reinterpret_cast<std::uintptr_t>(noremote_buf_.data());
    keys_.other_stag = other_mr_->rkey();
    keys_.other_addr = reinterpret_cast<std::uintptr_t>(other_buf_.data());
    auto l = server_ch_->listen("127.0.0.1", 0);
    ASSERT_TRUE(l) << l.error().to_string();
    listener_.emplace(*l);
    // A well-behaved connection through the same Context, that must survive every violation.
    ASSERT_NO_FATAL_FAILURE(connect_uwarp_pair(bystander_client_, bystander_server_));
  }

  void TearDown() override {
    // QPs before their CQs and the Context (each handle keeps what it needs alive anyway).
    qp_.reset();
    bystander_client_.reset();
    bystander_server_.reset();
  }

  Endpoint make_endpoint(ProtectionDomain& pd, std::size_t size) {
    auto cq = ctx_->create_cq(256).value();
    QpInitAttr attr;
    attr.send_cq = &cq;
    attr.recv_cq = &cq;
    auto qp = pd.create_qp(attr).value();
    std::vector<std::uint8_t> buf(size);
    auto mr = pd.reg_mr(buf.data(), buf.size(),
                        access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead)
                  .value();
    return Endpoint{std::move(cq), std::move(qp), std::move(buf), std::move(mr), {}};
  }

  // A uwarp client (in the same Context) connected to the uwarp listener.
  void connect_uwarp_pair(std::optional<Endpoint>& client, std::optional<Endpoint>& server,
                          ProtectionDomain* server_pd = nullptr) {
    client.emplace(make_endpoint(*pd_, 4096));
    server.emplace(make_endpoint(server_pd != nullptr ? *server_pd : *pd_, 4096));
    auto c = client_ch_->connect("127.0.0.1", listener_->port(), client->qp);
    ASSERT_TRUE(c) << c.error().to_string();
    client->conn = *c;
    auto req = server_ch_->get_event(kTimeoutMs);
    ASSERT_TRUE(req);
    ASSERT_EQ(req->type, CmEventType::kConnectRequest) << to_string(req->type);
    server->conn = req->connection;
    ASSERT_TRUE(server->conn.accept(server->qp, {}));
    auto est_s = server_ch_->get_event(kTimeoutMs);
    ASSERT_TRUE(est_s);
    ASSERT_EQ(est_s->type, CmEventType::kEstablished) << to_string(est_s->type);
    auto est_c = client_ch_->get_event(kTimeoutMs);
    ASSERT_TRUE(est_c);
    ASSERT_EQ(est_c->type, CmEventType::kEstablished)
        << to_string(est_c->type) << " " << est_c->status.to_string();
  }

  // A verified Send from `client` to `server`.
  void verify_send(Endpoint& client, Endpoint& server, std::uint32_t seed) {
    const auto data = pattern(1000, seed);
    std::copy(data.begin(), data.end(), client.buf.begin());
    std::fill(server.buf.begin(), server.buf.end(), 0);
    Sge r = server.mr.sge(0, 2048);
    ASSERT_TRUE(server.qp.post_recv({seed, {&r, 1}}));
    Sge s = client.mr.sge(0, static_cast<std::uint32_t>(data.size()));
    SendWr wr;
    wr.wr_id = seed;
    wr.opcode = WrOpcode::kSend;
    wr.sg_list = {&s, 1};
    ASSERT_TRUE(client.qp.post_send(wr));
    auto swc = wait_wc(client.cq);
    ASSERT_TRUE(swc);
    EXPECT_EQ(swc->status, WcStatus::kSuccess) << to_string(swc->status);
    auto rwc = wait_wc(server.cq);
    ASSERT_TRUE(rwc);
    EXPECT_EQ(rwc->status, WcStatus::kSuccess) << to_string(rwc->status);
    EXPECT_EQ(rwc->wr_id, seed);
    EXPECT_EQ(rwc->byte_len, data.size());
    EXPECT_TRUE(std::equal(data.begin(), data.end(), server.buf.begin()));
  }

  void verify_bystander() {
    ASSERT_TRUE(bystander_client_ && bystander_server_);
    EXPECT_EQ(bystander_server_->qp.state(), QpState::kRts);
    ASSERT_NO_FATAL_FAILURE(verify_send(*bystander_client_, *bystander_server_, ++bystander_seed_));
  }

  // The raw peer connects as an MPA initiator; the uwarp server accepts it with qp_ and tells it
  // its keys. server_params.private_data is replaced by the keys.
  void connect_raw(RawMpaOptions request = {}, ConnectionParams server_params = {}) {
    raw_ = RawPeer::connect_to("127.0.0.1", listener_->port());
    ASSERT_TRUE(raw_.valid());
    ASSERT_TRUE(raw_.send_mpa_request(request));
    auto req = server_ch_->get_event(kTimeoutMs);
    ASSERT_TRUE(req);
    ASSERT_EQ(req->type, CmEventType::kConnectRequest) << to_string(req->type);
    raw_conn_ = req->connection;
    QpInitAttr attr;
    attr.send_cq = &*cq_;
    attr.recv_cq = &*cq_;
    qp_.emplace(pd_->create_qp(attr).value());
    server_params.private_data = keys_.encode();
    ASSERT_TRUE(raw_conn_.accept(*qp_, server_params));
    auto est = server_ch_->get_event(kTimeoutMs);
    ASSERT_TRUE(est);
    ASSERT_EQ(est->type, CmEventType::kEstablished) << to_string(est->type);
    auto reply = raw_.read_mpa(wire::MpaFrameKind::kReply, kTimeoutMs);
    ASSERT_TRUE(reply);
    ASSERT_FALSE(reply->reject);
    ASSERT_EQ(reply->revision, 2);
    ASSERT_TRUE(reply->enhanced);
    ASSERT_TRUE(reply->words);
    EXPECT_EQ(reply->crc, request.crc);
    auto k = ServerKeys::decode(reply->app_data);
    ASSERT_TRUE(k);
    EXPECT_EQ(k->rw_stag, keys_.rw_stag);
    raw_.set_crc(reply->crc);
  }

  struct Expected {
    TerminateCode code;
    std::optional<std::vector<std::uint8_t>> ddp_header;  // the offending header, when one exists
    std::optional<std::uint16_t> segment_length;
    std::optional<std::vector<std::uint8_t>> rdmap_header;  // the offending Read Request
  };

  // The raw peer must receive exactly one Terminate with `e`, then see uwarp close; the uwarp side
  // must report DISCONNECTED and an async event naming the Terminate; the bystander keeps working.
  void expect_terminate(const Expected& e, std::size_t* drained_payload = nullptr) {
    const RawPeer::Drain d = raw_.drain_until_closed(20000);
    if (drained_payload != nullptr) *drained_payload = d.payload_bytes;
    EXPECT_TRUE(d.closed) << "uwarp did not close the connection (" << to_string(d.last)
                          << ") after " << d.fpdus << " FPDUs, " << d.payload_bytes
                          << " payload bytes";
    ASSERT_EQ(d.terminates.size(), 1u) << "Terminates received: " << d.terminates.size();
    const RawTerminate& t = d.terminates.front();
    EXPECT_EQ(t.first_byte, first_byte(e.code))
        << "got " << wire::describe(t.code) << ", want " << wire::describe(e.code);
    EXPECT_EQ(static_cast<int>(t.code.layer), static_cast<int>(e.code.layer));
    EXPECT_EQ(t.code.etype, e.code.etype);
    EXPECT_EQ(t.code.ecode, e.code.ecode)
        << "got " << wire::describe(t.code) << ", want " << wire::describe(e.code);
    EXPECT_TRUE(t.crc_ok);
    EXPECT_TRUE(t.header.last);
    EXPECT_EQ(t.header.msn, 1u);
    EXPECT_EQ(t.header.message_offset, 0u);
    if (e.ddp_header) {
      EXPECT_TRUE(t.d_flag);
      EXPECT_EQ(t.ddp_header, *e.ddp_header);
    }
    if (e.segment_length) {
      EXPECT_TRUE(t.m_flag);
      EXPECT_EQ(t.segment_length, *e.segment_length);
    }
    if (e.rdmap_header) {
      EXPECT_TRUE(t.r_flag);
      EXPECT_EQ(t.rdmap_header, *e.rdmap_header);
    }
    raw_.close();
    ASSERT_NO_FATAL_FAILURE(expect_disconnected());
    auto ae = ctx_->get_async_event(kTimeoutMs);
    ASSERT_TRUE(ae) << "no async event";
    EXPECT_EQ(ae->qp_num, qp_->qp_num());
    EXPECT_NE(ae->detail.find("Terminate"), std::string::npos) << ae->detail;
    EXPECT_NE(ae->detail.find(wire::describe(e.code)), std::string::npos) << ae->detail;
    const bool access_error = e.code.layer != TermLayer::kLlp && e.code.etype == 1;
    EXPECT_EQ(ae->type, access_error ? AsyncEventType::kQpAccessError : AsyncEventType::kQpFatal)
        << to_string(ae->type);
    auto more = ctx_->get_async_event(0);
    EXPECT_FALSE(more) << "a second async event: " << more->detail;
    EXPECT_EQ(qp_->state(), QpState::kError);
    ASSERT_NO_FATAL_FAILURE(verify_bystander());
  }

  // The next server event is DISCONNECTED for the raw peer's connection.
  void expect_disconnected() {
    auto ev = server_ch_->get_event(kTimeoutMs);
    ASSERT_TRUE(ev) << "no DISCONNECTED event";
    EXPECT_EQ(ev->type, CmEventType::kDisconnected) << to_string(ev->type);
    EXPECT_TRUE(ev->connection.same(raw_conn_));
  }

  // Sends one FPDU built from `h` and `payload` and expects `code`, with the offending header.
  void violate(const wire::DdpHeader& h, const std::vector<std::uint8_t>& payload,
               const TerminateCode& code) {
    ASSERT_TRUE(raw_.send_fpdu(h, payload));
    ASSERT_NO_FATAL_FAILURE(expect_terminate_of_segment(code, h, payload.size()));
  }
  // One Terminate with `code`, quoting the segment with header `h` and `payload_size` bytes.
  void expect_terminate_of_segment(const TerminateCode& code, const wire::DdpHeader& h,
                                   std::size_t payload_size) {
    Expected e;
    e.code = code;
    e.ddp_header = RawPeer::header_bytes(h);
    e.segment_length = static_cast<std::uint16_t>(h.size() + payload_size);
    ASSERT_NO_FATAL_FAILURE(expect_terminate(e));
  }

  // A Send with Invalidate of `stag` into a receive posted for it (wr_id 9) gets `code`; the
  // receive completes in error.
  void refused_invalidation(std::uint32_t stag, std::uint32_t seed, const TerminateCode& code,
                            WcStatus expected_status) {
    ASSERT_NO_FATAL_FAILURE(post_server_recv(9, 64));
    auto h = RawPeer::untagged_header(RdmapOpcode::kSendInvalidate, wire::kQueueSend, 1);
    h.ulp_reserved = stag;
    violate(h, pattern(16, seed), code);
    auto wc = wait_wc(*cq_);
    ASSERT_TRUE(wc);
    EXPECT_EQ(wc->wr_id, 9u);
    EXPECT_EQ(wc->status, expected_status) << to_string(wc->status);
  }

  void post_server_recv(std::uint64_t wr_id, std::uint32_t length) {
    Sge r = rw_mr_->sge(0, length);
    ASSERT_TRUE(qp_->post_recv({wr_id, {&r, 1}}));
  }

  std::uint32_t unknown_stag() const {
    std::uint32_t s = keys_.rw_stag ^ 0x5A;
    while (s == keys_.rw_stag || s == keys_.noremote_stag || s == keys_.other_stag ||
           s == bystander_server_->mr.rkey() || s == bystander_client_->mr.rkey() || s == 0) {
      ++s;
    }
    return s;
  }

  void read_request_violation(const wire::ReadRequest& rr, const TerminateCode& code) {
    ASSERT_NO_FATAL_FAILURE(connect_raw());
    const auto h = RawPeer::untagged_header(RdmapOpcode::kReadRequest, wire::kQueueReadRequest, 1);
    const auto body = RawPeer::read_request_body(rr);
    ASSERT_TRUE(raw_.send_fpdu(h, body));
    Expected e;
    e.code = code;
    e.ddp_header = RawPeer::header_bytes(h);
    e.segment_length = static_cast<std::uint16_t>(h.size() + body.size());
    e.rdmap_header = body;
    ASSERT_NO_FATAL_FAILURE(expect_terminate(e));
  }

  static wire::AtomicRequest atomic_request(std::uint32_t stag, std::uint64_t to) {
    wire::AtomicRequest a;
    a.opcode = static_cast<std::uint8_t>(wire::AtomicOpcode::kCompareSwap);
    a.request_id = 0x5EED;
    a.remote_stag = stag;
    a.remote_to = to;
    a.add_swap_mask = ~std::uint64_t{0};
    a.compare_mask = ~std::uint64_t{0};
    return a;
  }
  static std::vector<std::uint8_t> atomic_body(const wire::AtomicRequest& a) {
    std::vector<std::uint8_t> body(wire::kAtomicRequestSize);
    wire::encode_atomic_request(a, body);
    return body;
  }
  // A raw peer's Atomic Request `a` gets `code` (no RDMAP header is copied: RFC 5040 copies
  // only a Read Request's).
  void atomic_violation(const wire::AtomicRequest& a, const TerminateCode& code) {
    ASSERT_NO_FATAL_FAILURE(connect_raw());
    violate(RawPeer::untagged_header(RdmapOpcode::kAtomicRequest, wire::kQueueReadRequest, 1),
            atomic_body(a), code);
  }

  std::optional<Context> ctx_;
  std::optional<EventChannel> server_ch_;
  std::optional<EventChannel> client_ch_;
  std::optional<ProtectionDomain> pd_;
  std::optional<ProtectionDomain> pd_other_;
  std::optional<CompletionQueue> cq_;
  std::vector<std::uint8_t> rw_buf_, noremote_buf_, other_buf_;
  std::optional<MemoryRegion> rw_mr_, noremote_mr_, other_mr_;
  ServerKeys keys_;
  std::optional<Listener> listener_;
  std::optional<Endpoint> bystander_client_, bystander_server_;
  std::uint32_t bystander_seed_ = 100;

  RawPeer raw_;
  Connection raw_conn_;
  std::optional<QueuePair> qp_;
};

// ---- Untagged buffer errors (RFC 5041 section 7.2, DDP etype 2) ----

TEST_F(TerminateTest, SendWithoutPostedReceive) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  violate(RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1), pattern(16, 1),
          wire::term::kDdpUntaggedNoBuffer);
}

TEST_F(TerminateTest, SendLargerThanPostedReceive) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  ASSERT_NO_FATAL_FAILURE(post_server_recv(77, 16));
  violate(RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1), pattern(64, 2),
          wire::term::kDdpUntaggedTooLong);
  auto wc = wait_wc(*cq_);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->wr_id, 77u);
  EXPECT_EQ(wc->status, WcStatus::kLocalLengthError) << to_string(wc->status);
}

TEST_F(TerminateTest, InvalidQueueNumber) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  ASSERT_NO_FATAL_FAILURE(post_server_recv(1, 64));
  violate(RawPeer::untagged_header(RdmapOpcode::kSend, 5, 1), pattern(16, 3),
          wire::term::kDdpUntaggedInvalidQn);
}

TEST_F(TerminateTest, WrongMsn) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  ASSERT_NO_FATAL_FAILURE(post_server_recv(1, 64));
  violate(RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 2), pattern(16, 4),
          wire::term::kDdpUntaggedInvalidMsn);
}

TEST_F(TerminateTest, WrongMsnAfterAGoodSend) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  ASSERT_NO_FATAL_FAILURE(post_server_recv(1, 64));
  ASSERT_NO_FATAL_FAILURE(post_server_recv(2, 64));
  ASSERT_TRUE(raw_.send_fpdu(RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1),
                             pattern(16, 5)));
  auto wc = wait_wc(*cq_);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::kSuccess);
  EXPECT_EQ(wc->byte_len, 16u);
  // MSN 1 again instead of 2.
  violate(RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1), pattern(16, 6),
          wire::term::kDdpUntaggedInvalidMsn);
}

TEST_F(TerminateTest, WrongMessageOffset) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  ASSERT_NO_FATAL_FAILURE(post_server_recv(1, 64));
  violate(RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1, /*mo=*/8),
          pattern(16, 7), wire::term::kDdpUntaggedInvalidMo);
}

// ---- Tagged buffer errors (RFC 5041 section 7.2, DDP etype 1) ----

TEST_F(TerminateTest, WriteToUnknownStag) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  violate(RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, unknown_stag(), keys_.rw_addr),
          pattern(32, 8), wire::term::kDdpTaggedInvalidStag);
}

TEST_F(TerminateTest, WriteOutOfBounds) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  violate(RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, keys_.rw_stag,
                                 keys_.rw_addr + keys_.rw_length - 8),
          pattern(16, 9), wire::term::kDdpTaggedBaseBounds);
  // Nothing was placed at the end of the region.
  EXPECT_TRUE(std::all_of(rw_buf_.end() - 8, rw_buf_.end(), [](std::uint8_t b) { return b == 0; }));
}

TEST_F(TerminateTest, WriteToStagOfAnotherPd) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  violate(RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, keys_.other_stag, keys_.other_addr),
          pattern(16, 10), wire::term::kDdpTaggedStagNotAssociated);
  EXPECT_TRUE(std::all_of(other_buf_.begin(), other_buf_.begin() + 16,
                          [](std::uint8_t b) { return b == 0; }));
}

TEST_F(TerminateTest, WriteWithoutRemoteWriteAccess) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  violate(RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, keys_.noremote_stag, keys_.noremote_addr),
          pattern(16, 11), wire::term::kDdpTaggedInvalidStag);
  EXPECT_TRUE(std::all_of(noremote_buf_.begin(), noremote_buf_.begin() + 16,
                          [](std::uint8_t b) { return b == 0; }));
}

// ---- Read Request source errors (RFC 5040 section 7, RDMAP etype 1) ----

TEST_F(TerminateTest, ReadRequestWithInvalidSourceStag) {
  wire::ReadRequest rr;
  rr.sink_stag = 0x1234;
  rr.size = 64;
  rr.source_stag = unknown_stag();
  rr.source_to = keys_.rw_addr;
  read_request_violation(rr, wire::term::kRdmapInvalidStag);
}

TEST_F(TerminateTest, ReadRequestOutOfBounds) {
  wire::ReadRequest rr;
  rr.sink_stag = 0x1234;
  rr.size = 64;
  rr.source_stag = keys_.rw_stag;
  rr.source_to = keys_.rw_addr + keys_.rw_length - 32;
  read_request_violation(rr, wire::term::kRdmapBaseBounds);
}

TEST_F(TerminateTest, ReadRequestWithoutRemoteReadAccess) {
  wire::ReadRequest rr;
  rr.sink_stag = 0x1234;
  rr.size = 64;
  rr.source_stag = keys_.noremote_stag;
  rr.source_to = keys_.noremote_addr;
  read_request_violation(rr, wire::term::kRdmapAccessRights);
}

TEST_F(TerminateTest, ReadRequestForStagOfAnotherPd) {
  wire::ReadRequest rr;
  rr.sink_stag = 0x1234;
  rr.size = 64;
  rr.source_stag = keys_.other_stag;
  rr.source_to = keys_.other_addr;
  read_request_violation(rr, wire::term::kRdmapStagNotAssociated);
}

// More Read Requests than the negotiated IRD, while the responses cannot drain (the raw peer
// reads nothing yet, and each response is larger than the socket buffers, ~4 MiB on loopback).
TEST_F(TerminateTest, ReadRequestsBeyondIrd) {
  constexpr std::size_t kBig = 16 << 20;
  std::vector<std::uint8_t> big(kBig, 0x5C);
  auto big_mr = pd_->reg_mr(big.data(), big.size(), access::kLocalWrite | access::kRemoteRead);
  ASSERT_TRUE(big_mr);
  RawMpaOptions req;
  req.ord = 2;  // uwarp's IRD becomes min(its IRD, our ORD) = 2
  ASSERT_NO_FATAL_FAILURE(connect_raw(req));
  EXPECT_EQ(qp_->ird(), 2);
  std::vector<std::uint8_t> bytes;
  wire::DdpHeader last_header;
  std::vector<std::uint8_t> last_body;
  for (std::uint32_t msn = 1; msn <= 3; ++msn) {
    wire::ReadRequest rr;
    rr.sink_stag = 0x4321;
    rr.sink_to = 0;
    rr.size = static_cast<std::uint32_t>(kBig);
    rr.source_stag = big_mr->rkey();
    rr.source_to = reinterpret_cast<std::uintptr_t>(big.data());
    last_header = RawPeer::untagged_header(RdmapOpcode::kReadRequest, wire::kQueueReadRequest, msn);
    last_body = RawPeer::read_request_body(rr);
    const auto f = RawPeer::build_fpdu(last_header, last_body, raw_.crc());
    bytes.insert(bytes.end(), f.begin(), f.end());
  }
  ASSERT_TRUE(raw_.send_raw(bytes));
  // Read nothing until uwarp has judged the third request: were the raw peer draining already,
  // the first responses could be sent completely (freeing their IRD slots) before it arrives.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kTimeoutMs);
  while (qp_->state() != QpState::kError && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(qp_->state(), QpState::kError) << "uwarp took a third Read Request with IRD 2";
  Expected e;
  e.code = wire::term::kRdmapCatastrophicStream;
  e.ddp_header = RawPeer::header_bytes(last_header);
  e.segment_length = static_cast<std::uint16_t>(last_header.size() + last_body.size());
  e.rdmap_header = last_body;
  std::size_t drained = 0;
  ASSERT_NO_FATAL_FAILURE(expect_terminate(e, &drained));
  // The first Read Response was under way (it is what held the IRD slot) and was cut short.
  EXPECT_GT(drained, 0u);
  EXPECT_LT(drained, 2 * kBig);
}

// ---- Version and opcode errors ----

TEST_F(TerminateTest, TaggedDdpVersion2) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  auto h = RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, keys_.rw_stag, keys_.rw_addr);
  h.ddp_version = 2;
  violate(h, pattern(16, 12), wire::term::kDdpTaggedBadVersion);
}

TEST_F(TerminateTest, UntaggedDdpVersion2) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  ASSERT_NO_FATAL_FAILURE(post_server_recv(1, 64));
  auto h = RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1);
  h.ddp_version = 2;
  violate(h, pattern(16, 13), wire::term::kDdpUntaggedBadVersion);
}

TEST_F(TerminateTest, RdmapVersion2) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  ASSERT_NO_FATAL_FAILURE(post_server_recv(1, 64));
  auto h = RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1);
  h.rdmap_version = 2;
  violate(h, pattern(16, 14), wire::term::kRdmapBadVersion);
}

TEST_F(TerminateTest, UnknownOpcode0xC) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  ASSERT_NO_FATAL_FAILURE(post_server_recv(1, 64));
  auto h = RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1);
  h.opcode = 0xC;
  violate(h, pattern(16, 15), wire::term::kRdmapUnexpectedOpcode);
}

// ---- RFC 7306 Immediate Data from a raw peer ----

// A Write then an Immediate Data message (an RDMA Write with Immediate as RFC 7306 composes it):
// the Write is placed and the posted receive completes with the value and the Write's length.
TEST_F(TerminateTest, Rfc7306WriteThenImmediateDataCompletesAReceive) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  ASSERT_NO_FATAL_FAILURE(post_server_recv(1, 64));
  const auto data = pattern(24, 16);
  ASSERT_TRUE(raw_.send_fpdu(
      RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, keys_.rw_stag, keys_.rw_addr + 100), data));
  ASSERT_TRUE(raw_.send_fpdu(RawPeer::untagged_header(RdmapOpcode::kImmediateData, wire::kQueueSend, 1),
                             {0xCA, 0xFE, 0xF0, 0x0D, 0x11, 0x22, 0x33, 0x44}));
  auto wc = wait_wc(*cq_);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->wr_id, 1u);
  EXPECT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
  EXPECT_EQ(wc->opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(wc->flags, wc_flags::kWithImm);
  EXPECT_EQ(wc->imm_data, 0xCAFEF00Du);
  EXPECT_EQ(wc->byte_len, 24u);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), rw_buf_.begin() + 100));
}

TEST_F(TerminateTest, Rfc7306ImmediateDataWithoutAReceive) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  violate(RawPeer::untagged_header(RdmapOpcode::kImmediateDataSe, wire::kQueueSend, 1),
          pattern(8, 16), wire::term::kDdpUntaggedNoBuffer);
}

TEST_F(TerminateTest, Rfc7306ImmediateDataLongerThanEightBytes) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  ASSERT_NO_FATAL_FAILURE(post_server_recv(1, 64));
  violate(RawPeer::untagged_header(RdmapOpcode::kImmediateData, wire::kQueueSend, 1),
          pattern(9, 16), wire::term::kDdpUntaggedTooLong);
}

TEST_F(TerminateTest, Rfc7306ImmediateDataShorterThanEightBytes) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  ASSERT_NO_FATAL_FAILURE(post_server_recv(1, 64));
  violate(RawPeer::untagged_header(RdmapOpcode::kImmediateData, wire::kQueueSend, 1),
          pattern(4, 16), wire::term::kRdmapUnspecified);
}

// ---- RFC 7306 Atomic Requests (queue 1, with the Read Requests) and Responses (queue 3) ----

// A raw peer's Atomic Request on a region with remote atomic access is carried out and
// answered: one Atomic Response on queue 3, MSN 1, naming the request, with the word's value
// before; the word holds the result.
TEST_F(TerminateTest, Rfc7306AtomicRequestIsAnsweredOnQueue3) {
  alignas(8) std::uint64_t word = 40;
  auto mr = pd_->reg_mr(&word, sizeof word, access::kLocalWrite | access::kRemoteAtomic);
  ASSERT_TRUE(mr);
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  wire::AtomicRequest a = atomic_request(mr->rkey(), reinterpret_cast<std::uintptr_t>(&word));
  a.opcode = static_cast<std::uint8_t>(wire::AtomicOpcode::kFetchAdd);
  a.add_swap_data = 2;
  ASSERT_TRUE(raw_.send_fpdu(RawPeer::untagged_header(RdmapOpcode::kAtomicRequest, wire::kQueueReadRequest, 1),
                             atomic_body(a)));
  auto f = raw_.read_fpdu(kTimeoutMs);
  ASSERT_TRUE(f && f->header);
  EXPECT_FALSE(f->header->tagged);
  EXPECT_EQ(f->header->opcode, static_cast<std::uint8_t>(RdmapOpcode::kAtomicResponse));
  EXPECT_EQ(f->header->queue, wire::kQueueAtomicResponse);
  EXPECT_EQ(f->header->msn, 1u);
  auto response = wire::decode_atomic_response(f->payload);
  ASSERT_TRUE(response);
  EXPECT_EQ(f->payload.size(), wire::kAtomicResponseSize);
  EXPECT_EQ(response->original_request_id, a.request_id);
  EXPECT_EQ(response->original_value, 40u);
  EXPECT_EQ(std::atomic_ref<std::uint64_t>(word).load(), 42u);
  EXPECT_EQ(qp_->state(), QpState::kRts);
}

TEST_F(TerminateTest, Rfc7306AtomicRequestWithInvalidStag) {
  atomic_violation(atomic_request(unknown_stag(), keys_.rw_addr), wire::term::kRdmapInvalidStag);
}

TEST_F(TerminateTest, Rfc7306AtomicRequestWithoutRemoteAtomicAccess) {
  atomic_violation(atomic_request(keys_.rw_stag, keys_.rw_addr), wire::term::kRdmapAccessRights);
}

TEST_F(TerminateTest, Rfc7306AtomicRequestOutOfBounds) {
  alignas(8) std::uint64_t words[2] = {};
  auto mr = pd_->reg_mr(words, sizeof words, access::kLocalWrite | access::kRemoteAtomic);
  ASSERT_TRUE(mr);
  atomic_violation(atomic_request(mr->rkey(), reinterpret_cast<std::uintptr_t>(&words[1]) + 8),
                   wire::term::kRdmapBaseBounds);
}

// A word that is not naturally aligned is no word the region holds: base or bounds violation.
TEST_F(TerminateTest, Rfc7306AtomicRequestNotAligned) {
  alignas(8) std::uint64_t words[2] = {};
  auto mr = pd_->reg_mr(words, sizeof words, access::kLocalWrite | access::kRemoteAtomic);
  ASSERT_TRUE(mr);
  atomic_violation(atomic_request(mr->rkey(), reinterpret_cast<std::uintptr_t>(words) + 4),
                   wire::term::kRdmapBaseBounds);
}

TEST_F(TerminateTest, Rfc7306AtomicRequestOfAnUndefinedOperation) {
  alignas(8) std::uint64_t word = 0;
  auto mr = pd_->reg_mr(&word, sizeof word, access::kLocalWrite | access::kRemoteAtomic);
  ASSERT_TRUE(mr);
  wire::AtomicRequest a = atomic_request(mr->rkey(), reinterpret_cast<std::uintptr_t>(&word));
  a.opcode = 3;
  atomic_violation(a, wire::term::kRdmapUnexpectedOpcode);
}

TEST_F(TerminateTest, Rfc7306AtomicResponseWithoutARequest) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  violate(RawPeer::untagged_header(RdmapOpcode::kAtomicResponse, wire::kQueueAtomicResponse, 1),
          pattern(12, 16), wire::term::kRdmapUnexpectedOpcode);
}

TEST_F(TerminateTest, Rfc7306AtomicResponseOnQueue4) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  violate(RawPeer::untagged_header(RdmapOpcode::kAtomicResponse, 4, 1), pattern(12, 16),
          wire::term::kDdpUntaggedInvalidQn);
}

TEST_F(TerminateTest, SendWithInvalidateOfStagOfAnotherPd) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  ASSERT_NO_FATAL_FAILURE(refused_invalidation(keys_.other_stag, 17,
                                               wire::term::kRdmapCannotInvalidateProtection,
                                               WcStatus::kRemoteInvalidRequestError));
  // The other PD's region was not invalidated: a QP of that PD can still write into it.
  std::optional<Endpoint> client, server;
  ASSERT_NO_FATAL_FAILURE(connect_uwarp_pair(client, server, &*pd_other_));
  const auto data = pattern(64, 21);
  std::copy(data.begin(), data.end(), client->buf.begin());
  Sge s = client->mr.sge(0, 64);
  SendWr wr;
  wr.wr_id = 3;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.sg_list = {&s, 1};
  wr.rkey = keys_.other_stag;
  wr.remote_addr = keys_.other_addr;
  ASSERT_TRUE(client->qp.post_send(wr));
  auto wwc = wait_wc(client->cq);
  ASSERT_TRUE(wwc);
  EXPECT_EQ(wwc->status, WcStatus::kSuccess) << to_string(wwc->status);
  // A Send behind the Write proves the Write was placed (and not refused with a Terminate).
  ASSERT_NO_FATAL_FAILURE(verify_send(*client, *server, 7));
  EXPECT_TRUE(std::equal(data.begin(), data.end(), other_buf_.begin()));
}

// A registered region is not the peer's to invalidate (only a type 2 window or a fast-registered
// region is): RDMAP, remote operation error, "STag cannot be invalidated"; the region stays.
TEST_F(TerminateTest, SendWithInvalidateOfARegisteredRegion) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  ASSERT_NO_FATAL_FAILURE(refused_invalidation(keys_.rw_stag, 19, wire::term::kRdmapCannotInvalidate,
                                               WcStatus::kRemoteInvalidRequestError));
  EXPECT_TRUE(rw_mr_->deregister()) << "still registered";
}

// ---- MPA framing errors, with CRC negotiated (RFC 5044 section 8) ----

TEST_F(TerminateTest, WrongCrc) {
  RawMpaOptions req;
  req.crc = true;
  ASSERT_NO_FATAL_FAILURE(connect_raw(req));
  ASSERT_TRUE(raw_.crc());
  ASSERT_NO_FATAL_FAILURE(post_server_recv(1, 64));
  const auto h = RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1);
  const auto payload = pattern(16, 18);
  auto f = RawPeer::build_fpdu(h, payload, true);
  f.back() ^= 0x01;  // the last CRC byte
  ASSERT_TRUE(raw_.send_raw(f));
  ASSERT_NO_FATAL_FAILURE(expect_terminate_of_segment(wire::term::kLlpBadCrc, h, payload.size()));
}

TEST_F(TerminateTest, GoodCrcIsAccepted) {
  RawMpaOptions req;
  req.crc = true;
  ASSERT_NO_FATAL_FAILURE(connect_raw(req));
  ASSERT_NO_FATAL_FAILURE(post_server_recv(1, 64));
  const auto payload = pattern(16, 19);
  ASSERT_TRUE(
      raw_.send_fpdu(RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1), payload));
  auto wc = wait_wc(*cq_);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), rw_buf_.begin()));
  EXPECT_EQ(qp_->state(), QpState::kRts);
}

TEST_F(TerminateTest, UlpduShorterThanDdpHeader) {
  RawMpaOptions req;
  req.crc = true;
  ASSERT_NO_FATAL_FAILURE(connect_raw(req));
  // An untagged DDP control byte, but only 10 bytes of ULPDU (an untagged header needs 18).
  std::vector<std::uint8_t> ulpdu(10, 0);
  ulpdu[0] = wire::kDdpFlagLast | wire::kDdpVersion;
  ulpdu[1] = static_cast<std::uint8_t>((wire::kRdmapVersion << 6) |
                                       static_cast<std::uint8_t>(RdmapOpcode::kSend));
  ASSERT_TRUE(raw_.send_raw(RawPeer::build_fpdu_from_ulpdu(ulpdu, true)));
  Expected e;
  e.code = wire::term::kLlpBadFpdu;
  ASSERT_NO_FATAL_FAILURE(expect_terminate(e));
}

// ---- A Terminate from the peer (RFC 5040 section 5.6) ----

class PeerTerminateTest : public TerminateTest {
 protected:
  // uwarp posts a receive, an RDMA Read and a fenced Send; the raw peer answers the Read Request
  // with a protection Terminate. Returns the raw control word sent.
  void provoke(std::uint32_t& raw_control) {
    ASSERT_NO_FATAL_FAILURE(connect_raw());
    ASSERT_NO_FATAL_FAILURE(post_server_recv(100, 64));
    Sge sink = rw_mr_->sge(1024, 4096);
    SendWr read;
    read.wr_id = 1;
    read.opcode = WrOpcode::kRdmaRead;
    read.sg_list = {&sink, 1};
    read.rkey = 0x00C0FFEE;
    read.remote_addr = 0x10000;
    ASSERT_TRUE(qp_->post_send(read));
    Sge src = rw_mr_->sge(8192, 16);
    SendWr send;
    send.wr_id = 2;
    send.opcode = WrOpcode::kSend;
    send.sg_list = {&src, 1};
    send.flags = send_flags::kSignaled | send_flags::kFence;
    ASSERT_TRUE(qp_->post_send(send));

    auto f = raw_.read_fpdu(kTimeoutMs);
    ASSERT_TRUE(f);
    ASSERT_TRUE(f->header);
    ASSERT_FALSE(f->header->tagged);
    ASSERT_EQ(f->header->queue, wire::kQueueReadRequest);
    ASSERT_EQ(f->header->opcode, static_cast<std::uint8_t>(RdmapOpcode::kReadRequest));
    auto rr = wire::decode_read_request(f->payload);
    ASSERT_TRUE(rr);
    EXPECT_EQ(rr->size, 4096u);
    EXPECT_EQ(rr->source_stag, 0x00C0FFEEu);
    EXPECT_EQ(rr->source_to, 0x10000u);
    EXPECT_EQ(rr->sink_stag, rw_mr_->lkey());

    wire::TerminateMessage m;
    m.code = wire::term::kRdmapInvalidStag;  // RDMAP / remote protection / invalid STag
    m.has_segment_length = true;
    m.segment_length = static_cast<std::uint16_t>(f->ulpdu.size());
    m.ddp_header = ConstByteSpan(f->ulpdu.data(), wire::kUntaggedHeaderSize);
    m.rdmap_header = ConstByteSpan(f->payload.data(), wire::kReadRequestSize);
    std::vector<std::uint8_t> body(wire::kTerminateMaxSize);
    body.resize(wire::encode_terminate(m, body));
    raw_control = load_be32(body.data());
    ASSERT_TRUE(raw_.send_fpdu(
        RawPeer::untagged_header(RdmapOpcode::kTerminate, wire::kQueueTerminate, 1), body));
  }

  // The three completions, by wr_id.
  std::map<std::uint64_t, WorkCompletion> completions() {
    std::map<std::uint64_t, WorkCompletion> out;
    for (int i = 0; i < 3; ++i) {
      auto wc = wait_wc(*cq_);
      if (!wc) break;
      out[wc->wr_id] = *wc;
    }
    return out;
  }
};

TEST_F(PeerTerminateTest, QpGoesToErrorAndWorkRequestsComplete) {
  std::uint32_t raw_control = 0;
  ASSERT_NO_FATAL_FAILURE(provoke(raw_control));
  auto wcs = completions();
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[1].status, WcStatus::kRemoteAccessError) << to_string(wcs[1].status);
  EXPECT_EQ(wcs[1].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(wcs[2].status, WcStatus::kWrFlushError) << to_string(wcs[2].status);
  EXPECT_EQ(wcs[100].status, WcStatus::kWrFlushError) << to_string(wcs[100].status);
  EXPECT_EQ(wcs[100].opcode, WcOpcode::kRecv);
  EXPECT_EQ(qp_->state(), QpState::kError);

  auto ae = ctx_->get_async_event(kTimeoutMs);
  ASSERT_TRUE(ae);
  EXPECT_EQ(ae->qp_num, qp_->qp_num());
  EXPECT_EQ(ae->type, AsyncEventType::kQpAccessError) << to_string(ae->type);
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", raw_control);
  EXPECT_NE(ae->detail.find(hex), std::string::npos) << ae->detail << " lacks " << hex;
  EXPECT_NE(ae->detail.find("Terminate"), std::string::npos) << ae->detail;

  // uwarp closes without answering the Terminate with one of its own.
  const RawPeer::Drain d = raw_.drain_until_closed(20000);
  EXPECT_TRUE(d.closed);
  EXPECT_TRUE(d.terminates.empty()) << "uwarp answered a Terminate with " << d.terminates.size();
  raw_.close();
  ASSERT_NO_FATAL_FAILURE(expect_disconnected());
  ASSERT_NO_FATAL_FAILURE(verify_bystander());
}

// include/uwarp/types.h: WorkCompletion::vendor_err is "the peer's raw Terminate control word,
// when one was received".
TEST_F(PeerTerminateTest, FailedReadCarriesTheRawControlWord) {
  std::uint32_t raw_control = 0;
  ASSERT_NO_FATAL_FAILURE(provoke(raw_control));
  auto wcs = completions();
  ASSERT_EQ(wcs.count(1), 1u);
  EXPECT_EQ(wcs[1].status, WcStatus::kRemoteAccessError);
  EXPECT_EQ(wcs[1].vendor_err, raw_control)
      << std::hex << "vendor_err 0x" << wcs[1].vendor_err << ", want 0x" << raw_control;
}

// ---- MPA connection setup (RFC 5044 section 7, RFC 6581) ----

// uwarp as the client, the raw peer as the server answering with a wrong key.
TEST_F(TerminateTest, MpaReplyWithWrongKey) {
  RawListener rl;
  ASSERT_TRUE(rl.valid());
  Endpoint client = make_endpoint(*pd_, 4096);
  auto c = client_ch_->connect("127.0.0.1", rl.port(), client.qp);
  ASSERT_TRUE(c) << c.error().to_string();
  RawPeer server = rl.accept(kTimeoutMs);
  ASSERT_TRUE(server.valid());
  auto req = server.read_mpa(wire::MpaFrameKind::kRequest, kTimeoutMs);
  ASSERT_TRUE(req);
  EXPECT_EQ(req->revision, 2);
  EXPECT_TRUE(req->enhanced);
  EXPECT_FALSE(req->markers);
  // A reply that carries the request key.
  ASSERT_TRUE(server.send_raw(RawPeer::build_mpa(wire::MpaFrameKind::kRequest, {})));
  auto ev = client_ch_->get_event(kTimeoutMs);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->type, CmEventType::kConnectError) << to_string(ev->type);
  EXPECT_FALSE(ev->status.is_ok());
  // RFC 5044 section 7.1.2 / siw: an LLP Terminate (invalid request/reply), then the close.
  const RawPeer::Drain d = server.drain_until_closed(kTimeoutMs);
  EXPECT_TRUE(d.closed);
  ASSERT_EQ(d.terminates.size(), 1u);
  EXPECT_EQ(d.terminates[0].first_byte, first_byte(wire::term::kLlpInvalidRequestReply));
  EXPECT_EQ(d.terminates[0].code.ecode, wire::term::kLlpInvalidRequestReply.ecode);
  EXPECT_NE(client.qp.state(), QpState::kRts);
  ASSERT_NO_FATAL_FAILURE(verify_bystander());
}

TEST_F(TerminateTest, MpaMarkersAskedForAreSent) {
  // The peer asks for markers (M in its request); uwarp accepts, does not ask for them itself,
  // and its first FPDU (here a Read Response) begins with a marker pointing at itself.
  RawMpaOptions req;
  req.markers = true;
  ASSERT_NO_FATAL_FAILURE(connect_raw(req));
  std::iota(rw_buf_.begin(), rw_buf_.begin() + 600, std::uint8_t{1});
  wire::ReadRequest rr;
  rr.sink_stag = 0x1234;
  rr.sink_to = 0;
  rr.size = 600;
  rr.source_stag = keys_.rw_stag;
  rr.source_to = keys_.rw_addr;
  ASSERT_TRUE(raw_.send_fpdu(
      RawPeer::untagged_header(RdmapOpcode::kReadRequest, wire::kQueueReadRequest, 1),
      RawPeer::read_request_body(rr)));
  // 600 bytes in one FPDU (loopback's MSS): marker, then the FPDU up to byte 512 of the stream,
  // a marker pointing 512 back, the rest.
  const auto h = RawPeer::tagged_header(RdmapOpcode::kReadResponse, 0x1234, 0);
  const std::vector<std::uint8_t> plain = RawPeer::build_fpdu(
      h, std::vector<std::uint8_t>(rw_buf_.begin(), rw_buf_.begin() + 600), false);
  const std::vector<std::uint8_t> expected = with_markers(plain, false);
  ASSERT_EQ(expected.size(), plain.size() + 8);
  std::vector<std::uint8_t> got(expected.size());
  ASSERT_EQ(raw_.read_exact(got.data(), got.size(), RawPeer::deadline_after(kTimeoutMs)),
            ReadStatus::kOk);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(qp_->state(), QpState::kRts);
}

TEST_F(TerminateTest, MpaMarkerThatPointsWrong) {
  // uwarp asks for markers; the peer's first Write carries right ones and lands, the second
  // carries one that points 4 bytes off: RFC 5044 section 8, "marker and ULPDU length mismatch".
  ConnectionParams server;
  server.markers = true;
  ASSERT_NO_FATAL_FAILURE(connect_raw({}, server));
  const auto first = pattern(100, 21);
  const auto second = pattern(600, 22);
  const auto h1 = RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, keys_.rw_stag, keys_.rw_addr);
  const auto h2 =
      RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, keys_.rw_stag, keys_.rw_addr + 1000);
  std::vector<std::uint8_t> plain = RawPeer::build_fpdu(h1, first, false);
  const std::vector<std::uint8_t> f2 = RawPeer::build_fpdu(h2, second, false);
  plain.insert(plain.end(), f2.begin(), f2.end());
  std::vector<std::uint8_t> stream = with_markers(plain, false);
  ASSERT_EQ(stream[512 + 3] % 4, 0);
  stream[512 + 3] = static_cast<std::uint8_t>(stream[512 + 3] + 4);
  ASSERT_TRUE(raw_.send_raw(stream));
  ASSERT_NO_FATAL_FAILURE(expect_terminate_of_segment(wire::term::kLlpBadFpdu, h2, second.size()));
  EXPECT_TRUE(std::equal(first.begin(), first.end(), rw_buf_.begin()));
}

// ---- On-demand paging: a region whose memory is not all mapped ----

// Three pages registered for on-demand paging, the middle one unmapped: an access there ends in
// the RFC's error for it, never in SIGSEGV (base/faulting_memory.h).
class OnDemandPages {
 public:
  explicit OnDemandPages(ProtectionDomain& pd) : page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))) {
    void* p = mmap(nullptr, 3 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    base_ = static_cast<std::uint8_t*>(p);
    EXPECT_EQ(munmap(base_ + page_, page_), 0);
    mr_.emplace(pd.reg_mr(base_, 3 * page_,
                          access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead |
                              access::kRemoteAtomic | access::kOnDemand)
                    .value());
  }
  ~OnDemandPages() {
    mr_.reset();
    munmap(base_, page_);
    munmap(base_ + 2 * page_, page_);
  }
  std::uint32_t rkey() const { return mr_->rkey(); }
  std::uint64_t mapped() const { return reinterpret_cast<std::uintptr_t>(base_); }
  std::uint64_t unmapped() const { return mapped() + page_; }
  std::uint8_t* bytes() const { return base_; }
  Sge sge(std::uint64_t addr, std::uint32_t length) const { return {addr, length, mr_->lkey()}; }

 private:
  std::size_t page_;
  std::uint8_t* base_ = nullptr;
  std::optional<MemoryRegion> mr_;
};

TEST_F(TerminateTest, OnDemandWriteIntoAnUnmappedPage) {
  OnDemandPages odp(*pd_);
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  // Into the mapped page: placed (through a copy that could have faulted).
  const auto first = pattern(3000, 40);
  ASSERT_TRUE(raw_.send_fpdu(RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, odp.rkey(), odp.mapped()),
                             first));
  // Into the hole: DDP / tagged / base or bounds.
  const auto h = RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, odp.rkey(), odp.unmapped() + 8);
  violate(h, pattern(64, 41), wire::term::kDdpTaggedBaseBounds);
  EXPECT_TRUE(std::equal(first.begin(), first.end(), odp.bytes()));
}

TEST_F(TerminateTest, OnDemandReadOfAnUnmappedPage) {
  OnDemandPages odp(*pd_);
  wire::ReadRequest rr;
  rr.sink_stag = 0x1234;
  rr.size = 64;
  rr.source_stag = odp.rkey();
  rr.source_to = odp.unmapped() - 32;  // its last 32 bytes lie in the hole
  read_request_violation(rr, wire::term::kRdmapBaseBounds);
}

TEST_F(TerminateTest, OnDemandAtomicOnAnUnmappedWord) {
  OnDemandPages odp(*pd_);
  atomic_violation(atomic_request(odp.rkey(), odp.unmapped() + 64), wire::term::kRdmapBaseBounds);
}

TEST_F(TerminateTest, OnDemandReceiveInAnUnmappedPage) {
  OnDemandPages odp(*pd_);
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  Sge r = odp.sge(odp.unmapped(), 64);
  ASSERT_TRUE(qp_->post_recv({9, {&r, 1}}));
  const auto h = RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1);
  violate(h, pattern(16, 42), wire::term::kRdmapCatastrophicStream);
  auto wc = wait_wc(*cq_);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->wr_id, 9u);
  EXPECT_EQ(wc->status, WcStatus::kLocalProtectionError) << to_string(wc->status);
}

TEST_F(TerminateTest, OnDemandReceiveWhosePageGoesAwayBetweenSegments) {
  // The receive was mapped when the Send's first segment took it; the application unmaps a page
  // before the second segment: the copy into it faults, a local catastrophic error.
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* base = static_cast<std::uint8_t*>(p);
  std::optional<MemoryRegion> mr(pd_->reg_mr(base, 2 * page, access::kLocalWrite | access::kOnDemand).value());
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  Sge r = mr->sge(0, static_cast<std::uint32_t>(2 * page));
  ASSERT_TRUE(qp_->post_recv({9, {&r, 1}}));
  const auto first = pattern(page, 43);
  ASSERT_TRUE(raw_.send_fpdu(
      RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1, 0, /*last=*/false), first));
  // The first segment has landed when its last byte has.
  for (int i = 0; i < 2000 && base[page - 1] != first.back(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(base[page - 1], first.back());
  ASSERT_EQ(munmap(base + page, page), 0);
  const auto h = RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1,
                                          static_cast<std::uint32_t>(page));
  violate(h, pattern(64, 44), wire::term::kRdmapLocalCatastrophic);
  mr.reset();
  munmap(base, page);
}

TEST_F(TerminateTest, GarbageInsteadOfMpaRequest) {
  raw_ = RawPeer::connect_to("127.0.0.1", listener_->port());
  ASSERT_TRUE(raw_.valid());
  const std::string junk = "GET / HTTP/1.1\r\nHost: uwarp\r\n\r\n";
  ASSERT_TRUE(raw_.send_raw(reinterpret_cast<const std::uint8_t*>(junk.data()), junk.size()));
  EXPECT_TRUE(raw_.wait_closed(kTimeoutMs));
  auto ev = server_ch_->get_event(0);
  EXPECT_FALSE(ev) << "unexpected event " << to_string(ev->type);
  // The listener keeps working: a real uwarp client connects and sends.
  std::optional<Endpoint> client, server;
  ASSERT_NO_FATAL_FAILURE(connect_uwarp_pair(client, server));
  ASSERT_NO_FATAL_FAILURE(verify_send(*client, *server, 5));
  ASSERT_NO_FATAL_FAILURE(verify_bystander());
}

TEST_F(TerminateTest, MpaRequestWithPrivateDataLength600) {
  raw_ = RawPeer::connect_to("127.0.0.1", listener_->port());
  ASSERT_TRUE(raw_.valid());
  // encode_mpa_frame refuses this, so the header is written by hand.
  std::vector<std::uint8_t> frame = RawPeer::build_mpa(wire::MpaFrameKind::kRequest, {});
  frame.resize(wire::kMpaFrameHeaderSize);
  store_be16(frame.data() + wire::kMpaKeySize + 2, 600);
  frame.resize(wire::kMpaFrameHeaderSize + 600, 0);
  ASSERT_TRUE(raw_.send_raw(frame));
  EXPECT_TRUE(raw_.wait_closed(kTimeoutMs));
  auto ev = server_ch_->get_event(0);
  EXPECT_FALSE(ev) << "unexpected event " << to_string(ev->type);
  std::optional<Endpoint> client, server;
  ASSERT_NO_FATAL_FAILURE(connect_uwarp_pair(client, server));
  ASSERT_NO_FATAL_FAILURE(verify_send(*client, *server, 6));
}

// ---- The stream ends in the middle of an FPDU ----

// The peer's TCP stream ends after half an FPDU: the iWARP stream was lost, not closed in order
// (src/verbs/queue_pair.h: "graceful (EOF at an FPDU boundary after a disconnect)").
TEST_F(TerminateTest, EofInTheMiddleOfAnFpduIsNotGraceful) {
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  ASSERT_NO_FATAL_FAILURE(post_server_recv(5, 64));
  auto f = RawPeer::build_fpdu(RawPeer::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1),
                               pattern(40, 20), false);
  ASSERT_TRUE(raw_.send_raw(f.data(), f.size() / 2));
  raw_.shutdown_write();
  auto wc = wait_wc(*cq_);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->wr_id, 5u);
  EXPECT_EQ(wc->status, WcStatus::kWrFlushError) << to_string(wc->status);
  EXPECT_EQ(qp_->state(), QpState::kError);
  auto ev = server_ch_->get_event(kTimeoutMs);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->type, CmEventType::kDisconnected) << to_string(ev->type);
  EXPECT_FALSE(ev->status.is_ok()) << "a stream cut mid-FPDU was reported as an orderly close";
  auto ae = ctx_->get_async_event(3000);
  EXPECT_TRUE(ae) << "no async event (QP fatal) for a stream lost mid-FPDU";
  raw_.close();
  ASSERT_NO_FATAL_FAILURE(verify_bystander());
}

// The peer sends a valid Read Request and resets the connection at once: uwarp answers the
// request from inside its receive path, the send fails, and the stream must end cleanly.
TEST_F(TerminateTest, PeerResetRightAfterAReadRequest) {
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    ASSERT_NO_FATAL_FAILURE(connect_raw());
    wire::ReadRequest rr;
    rr.sink_stag = 0x1234;
    rr.size = keys_.rw_length;
    rr.source_stag = keys_.rw_stag;
    rr.source_to = keys_.rw_addr;
    ASSERT_TRUE(raw_.send_fpdu(
        RawPeer::untagged_header(RdmapOpcode::kReadRequest, wire::kQueueReadRequest, 1),
        RawPeer::read_request_body(rr)));
    raw_.reset();
    ASSERT_NO_FATAL_FAILURE(expect_disconnected());
    EXPECT_EQ(qp_->state(), QpState::kError);
    for (int i = 0; i < 4 && ctx_->get_async_event(0); ++i) {
    }
  }
  ASSERT_NO_FATAL_FAILURE(verify_bystander());
}

}  // namespace
}  // namespace uwarp::testing
