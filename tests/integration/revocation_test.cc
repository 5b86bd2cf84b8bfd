// Memory given back in the middle of an access, and waits a peer holds open. Once dereg returns,
// uwarp touches the region no more. The region lives in its own mapping, made inaccessible
// (PROT_NONE) right after the deregistration, so that any later access by uwarp faults (a
// placement) or fails (a send) instead of passing unseen. A raw peer drives the access and stalls
// it: between a Write's header and the rest of its payload, or by not reading a Read Response (a
// zero window).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "integration/raw_peer.h"
#include "support/connected_pair.h"
#include "uwarp/uwarp.h"
#include "wire/rdmap_ext.h"

namespace uwarp::testing {
namespace {

using wire::RdmapOpcode;
using wire::TerminateCode;

constexpr int kTimeoutMs = 10000;

// Anonymous memory of its own mapping, which the test can make inaccessible.
class Mapping {
 public:
  explicit Mapping(std::size_t size) : size_(size) {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<std::uint8_t*>(p);
  }
  ~Mapping() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool poison() { return ::mprotect(data_, size_, PROT_NONE) == 0; }

 private:
  std::uint8_t* data_;
  std::size_t size_;
};

class RevocationTest : public ::testing::TestWithParam<bool> {
 protected:
  bool crc() const { return GetParam(); }

  void SetUp() override {
    ctx_.emplace(Context::open().value());
    channel_.emplace(EventChannel::create(*ctx_).value());
    pd_.emplace(ctx_->alloc_pd().value());
    cq_.emplace(ctx_->create_cq(256).value());
    auto l = channel_->listen("127.0.0.1", 0);
    ASSERT_TRUE(l) << l.error().to_string();
    listener_.emplace(*l);
  }

  void TearDown() override { qp_.reset(); }

  // The raw peer connects (rcvbuf > 0: a small receive window); uwarp accepts with qp_.
  void connect_raw(int rcvbuf = 0) {
    raw_ = RawPeer::connect_to("127.0.0.1", listener_->port(), rcvbuf);
    ASSERT_TRUE(raw_.valid());
    RawMpaOptions request;
    request.crc = crc();
    ASSERT_TRUE(raw_.send_mpa_request(request));
    auto req = channel_->get_event(kTimeoutMs);
    ASSERT_TRUE(req);
    ASSERT_EQ(req->type, CmEventType::kConnectRequest) << to_string(req->type);
    conn_ = req->connection;
    QpInitAttr attr;
    attr.send_cq = &*cq_;
    attr.recv_cq = &*cq_;
    qp_.emplace(pd_->create_qp(attr).value());
    ASSERT_TRUE(conn_.accept(*qp_, {}));
    auto est = channel_->get_event(kTimeoutMs);
    ASSERT_TRUE(est);
    ASSERT_EQ(est->type, CmEventType::kEstablished) << to_string(est->type);
    auto reply = raw_.read_mpa(wire::MpaFrameKind::kReply, kTimeoutMs);
    ASSERT_TRUE(reply);
    ASSERT_FALSE(reply->reject);
    raw_.set_crc(reply->crc);
  }

  // Deregisters the region and makes its memory inaccessible at once.
  void deregister_and_poison(Mapping& m) {
    ASSERT_TRUE(mr_->deregister());
    ASSERT_TRUE(m.poison());
  }

  // The raw peer receives exactly one Terminate, with `code`, and then uwarp closes; the QP is in
  // ERROR. Returns the payload bytes that arrived before the Terminate.
  std::size_t expect_terminate(const TerminateCode& code) {
    const RawPeer::Drain d = raw_.drain_until_closed(20000);
    EXPECT_TRUE(d.closed) << "uwarp did not close (" << to_string(d.last) << ")";
    EXPECT_EQ(d.terminates.size(), 1u);
    if (!d.terminates.empty()) {
      EXPECT_EQ(d.terminates[0].code, code)
          << "got " << wire::describe(d.terminates[0].code) << ", want " << wire::describe(code);
      EXPECT_TRUE(d.terminates[0].crc_ok);
    }
    EXPECT_EQ(qp_->state(), QpState::kError);
    return d.payload_bytes;
  }

  // Binds a type 2 window over all of `region` (registered in mr_) on qp_, with `rights`, and
  // waits for the bind; its STag.
  std::uint32_t bind_window_over(Mapping& region, std::uint32_t rights) {
    window_.emplace(pd_->alloc_mw(WindowType::kType2).value());
    Sge range{reinterpret_cast<std::uintptr_t>(region.data()), static_cast<std::uint32_t>(region.size()),
              mr_->lkey()};
    SendWr wr;
    wr.opcode = WrOpcode::kBindWindow;
    wr.sg_list = {&range, 1};
    wr.rkey = window_->rkey_with_key(0x77);
    wr.access = rights;
    EXPECT_TRUE(qp_->post_send(wr));
    auto wc = wait_wc(*cq_);
    EXPECT_TRUE(wc && wc->status == WcStatus::kSuccess);
    return wr.rkey;
  }
  // Invalidates the window (a local invalidation), takes its completion and makes the memory
  // inaccessible at once.
  void invalidate_and_poison(Mapping& m) {
    SendWr wr;
    wr.opcode = WrOpcode::kLocalInvalidate;
    wr.invalidate_rkey = window_->rkey();
    ASSERT_TRUE(qp_->post_send(wr));
    auto wc = wait_wc(*cq_);
    ASSERT_TRUE(wc);
    ASSERT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
    ASSERT_TRUE(m.poison());
  }

  enum class Revoke : std::uint8_t { kDeregister, kInvalidateWindow };
  // What a source holds before the Write that sends it (the flush tests reuse it with another).
  static constexpr std::uint8_t kWrittenByte = 0x3C;
  void give_back_while_the_poster_sends(const std::function<void(Mapping&)>& give_back,
                                        const std::function<void(const RawFpdu&)>& visit,
                                        RawPeer::Drain& drained);
  void write_stalled_before(std::size_t rest, Revoke how = Revoke::kDeregister);

  // More than every socket buffer on the path holds.
  static constexpr std::size_t kBeyondBuffers = 32u << 20;
  // Registers `region` with `access_bits` and connects a peer with a 4 KiB receive buffer that it
  // never reads.
  void connect_shut_window(Mapping& region, std::uint32_t access_bits) {
    ASSERT_NE(region.data(), nullptr);
    mr_.emplace(pd_->reg_mr(region.data(), region.size(), access_bits).value());
    ASSERT_NO_FATAL_FAILURE(connect_raw(/*rcvbuf=*/4096));
  }
  // The peer asks for a Read of all of `region`; the response waits behind the shut window.
  // through_window: the Read names a type 2 window over the region instead of the region.
  void read_behind_shut_window(Mapping& region, bool through_window = false) {
    ASSERT_NO_FATAL_FAILURE(
        connect_shut_window(region, through_window ? access::kMwBind : access::kRemoteRead));
    wire::ReadRequest rr;
    rr.sink_stag = 0x1234;
    rr.size = static_cast<std::uint32_t>(region.size());
    rr.source_stag = through_window ? bind_window_over(region, access::kRemoteRead) : mr_->rkey();
    rr.source_to = reinterpret_cast<std::uintptr_t>(region.data());
    ASSERT_TRUE(raw_.send_fpdu(
        RawPeer::untagged_header(RdmapOpcode::kReadRequest, wire::kQueueReadRequest, 1),
        RawPeer::read_request_body(rr)));
    // Long enough for uwarp to fill every socket buffer and wait for the window.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  // uwarp posts a Write of all of `region` (send `flags`); it waits behind the shut window.
  void write_behind_shut_window(Mapping& region, std::uint32_t flags) {
    ASSERT_NO_FATAL_FAILURE(connect_shut_window(region, access::kLocalWrite));
    Sge sge = mr_->sge(0, static_cast<std::uint32_t>(region.size()));
    SendWr wr;
    wr.wr_id = 1;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.flags = flags;
    wr.sg_list = {&sge, 1};
    wr.rkey = 0x1234;
    ASSERT_TRUE(qp_->post_send(wr));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  // The close that began at `start` ends within its bound (a few seconds) with DISCONNECTED, and
  // the peer sees its socket closed (EOF or a reset after what was queued).
  void expect_closed_within_bound(std::chrono::steady_clock::time_point start) {
    auto ev = channel_->get_event(kTimeoutMs);
    ASSERT_TRUE(ev) << "no event within " << kTimeoutMs << " ms";
    EXPECT_EQ(ev->type, CmEventType::kDisconnected) << to_string(ev->type);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(6));
    EXPECT_TRUE(raw_.wait_closed(20000));
  }

  std::optional<Context> ctx_;
  std::optional<EventChannel> channel_;
  std::optional<ProtectionDomain> pd_;
  std::optional<CompletionQueue> cq_;
  std::optional<Listener> listener_;
  std::optional<MemoryRegion> mr_;
  std::optional<MemoryWindow> window_;
  std::optional<QueuePair> qp_;
  RawPeer raw_;
  Connection conn_;
};

// A Write's header and the first bytes of its payload arrive; the application deregisters the
// region and its memory goes away; then the rest arrives. Large rests are received straight
// into the region, small ones through the bounce buffer: neither may land. The peer gets the
// DDP Terminate for an invalid STag.
void RevocationTest::write_stalled_before(std::size_t rest, Revoke how) {
  Mapping region(64 * 1024);
  ASSERT_NE(region.data(), nullptr);
  mr_.emplace(pd_->reg_mr(region.data(), region.size(),
                          access::kLocalWrite | access::kRemoteWrite | access::kMwBind)
                  .value());
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  const std::uint32_t stag = how == Revoke::kInvalidateWindow
                                 ? bind_window_over(region, access::kRemoteWrite)
                                 : mr_->rkey();
  constexpr std::size_t kFirst = 1000;
  const std::vector<std::uint8_t> payload = pattern(kFirst + rest, 7);
  const wire::DdpHeader h = RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, stag,
                                                   reinterpret_cast<std::uintptr_t>(region.data()));
  const std::vector<std::uint8_t> fpdu = RawPeer::build_fpdu(h, payload, raw_.crc());
  const std::size_t head = wire::kMpaLengthFieldSize + h.size() + kFirst;
  ASSERT_TRUE(raw_.send_raw(fpdu.data(), head));
  // uwarp has placed the first bytes (bounded wait).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::memcmp(region.data(), payload.data(), kFirst) != 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the first bytes were not placed";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (how == Revoke::kInvalidateWindow) {
    ASSERT_NO_FATAL_FAILURE(invalidate_and_poison(region));
  } else {
    ASSERT_NO_FATAL_FAILURE(deregister_and_poison(region));
  }
  ASSERT_TRUE(raw_.send_raw(fpdu.data() + head, fpdu.size() - head));
  expect_terminate(wire::term::kDdpTaggedInvalidStag);
}

TEST_P(RevocationTest, WriteStalledBeforeALargeRest) {
  write_stalled_before(60000);
}
TEST_P(RevocationTest, WriteStalledBeforeASmallRest) {
  write_stalled_before(1000);
}
// The same through a type 2 window that the application invalidates: once the invalidation has
// completed, nothing lands in the window's memory.
TEST_P(RevocationTest, WriteThroughAWindowStalledBeforeItsInvalidation) {
  write_stalled_before(60000, Revoke::kInvalidateWindow);
}

// The peer asks for more than the sockets can hold and reads nothing: the Read Response waits
// for a window that stays shut. The application deregisters the source and its memory goes
// away; then the peer reads. It gets the start of the response and then the RDMAP Terminate for
// an invalid STag, never a byte read after the deregistration (a send from the poisoned memory
// would fail, and with CRC on the checksum would fault).
TEST_P(RevocationTest, ReadResponseHeldByAZeroWindow) {
  Mapping region(kBeyondBuffers);
  ASSERT_NE(region.data(), nullptr);
  std::memset(region.data(), 0x5A, region.size());
  ASSERT_NO_FATAL_FAILURE(read_behind_shut_window(region));
  ASSERT_NO_FATAL_FAILURE(deregister_and_poison(region));
  const std::size_t received = expect_terminate(wire::term::kRdmapInvalidStag);
  EXPECT_LT(received, kBeyondBuffers) << "the whole response went out";
}

// The same Read through a type 2 window, which the application invalidates while the response
// waits: once the invalidation has completed, no byte is read from the window's memory.
TEST_P(RevocationTest, ReadResponseThroughAWindowHeldByAZeroWindow) {
  Mapping region(kBeyondBuffers);
  ASSERT_NE(region.data(), nullptr);
  std::memset(region.data(), 0x5A, region.size());
  ASSERT_NO_FATAL_FAILURE(read_behind_shut_window(region, /*through_window=*/true));
  ASSERT_NO_FATAL_FAILURE(invalidate_and_poison(region));
  const std::size_t received = expect_terminate(wire::term::kRdmapInvalidStag);
  EXPECT_LT(received, kBeyondBuffers) << "the whole response went out";
}

// The same memory is registered twice, and the peer's Read goes through the first region. The
// application deregisters the second one (libfabric's registration cache does this when it
// merges regions): the memory is still registered through the first, so the Read Response goes
// on, whole and unchanged, and the QP stays in RTS.
TEST_P(RevocationTest, ReadResponseGoesOnWhenAnotherRegionOfItsMemoryIsDeregistered) {
  Mapping region(kBeyondBuffers);
  ASSERT_NE(region.data(), nullptr);
  for (std::size_t i = 0; i < region.size(); ++i)
    region.data()[i] = static_cast<std::uint8_t>(i * 7);
  auto other = pd_->reg_mr(region.data(), region.size(), access::kRemoteRead);
  ASSERT_TRUE(other);
  ASSERT_NO_FATAL_FAILURE(read_behind_shut_window(region));
  ASSERT_TRUE(other->deregister());
  std::size_t received = 0;
  bool last = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!last) {
    ReadStatus status{};
    auto f = raw_.read_fpdu_until(deadline, &status);
    ASSERT_TRUE(f) << "after " << received << " bytes: " << to_string(status);
    ASSERT_FALSE(f->is_terminate()) << "a Terminate after " << received << " bytes";
    ASSERT_TRUE(f->header && f->header->tagged);
    ASSERT_LE(received + f->payload.size(), region.size());
    ASSERT_EQ(std::memcmp(f->payload.data(), region.data() + received, f->payload.size()), 0)
        << "at offset " << received;
    received += f->payload.size();
    last = f->header->last;
  }
  EXPECT_EQ(received, region.size());
  EXPECT_EQ(qp_->state(), QpState::kRts);
}

// An Atomic Request waits for its turn behind a Read Response the peer does not read (responses
// go in order, and an atomic is carried out only once the responses before it have left). The
// application deregisters the word's region meanwhile: the QP fails with the Terminate for an
// invalid STag, and the word is never operated on.
TEST_P(RevocationTest, AtomicWaitingBehindAReadResponseIsCutOffByDeregistration) {
  Mapping region(kBeyondBuffers);
  ASSERT_NE(region.data(), nullptr);
  ASSERT_NO_FATAL_FAILURE(read_behind_shut_window(region));
  alignas(8) std::uint64_t word = 5;
  auto word_mr = pd_->reg_mr(&word, sizeof word, access::kLocalWrite | access::kRemoteAtomic);
  ASSERT_TRUE(word_mr);
  wire::AtomicRequest add;
  add.opcode = static_cast<std::uint8_t>(wire::AtomicOpcode::kFetchAdd);
  add.request_id = 2;
  add.remote_stag = word_mr->rkey();
  add.remote_to = reinterpret_cast<std::uintptr_t>(&word);
  add.add_swap_data = 1;
  std::vector<std::uint8_t> body(wire::kAtomicRequestSize);
  wire::encode_atomic_request(add, body);
  ASSERT_TRUE(raw_.send_fpdu(
      RawPeer::untagged_header(RdmapOpcode::kAtomicRequest, wire::kQueueReadRequest, 2), body));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the request is in
  EXPECT_EQ(qp_->state(), QpState::kRts);
  ASSERT_TRUE(word_mr->deregister());
  expect_terminate(wire::term::kRdmapInvalidStag);
  EXPECT_EQ(std::atomic_ref<std::uint64_t>(word).load(), 5u) << "the word was operated on";
}

// A Write waits for a window the peer keeps shut; the application moves the QP to ERROR, takes
// the flush completion and reuses the source at once (it fills it with a byte the Write never
// carried). The peer then reads: whole FPDUs up to an orderly close (the rest of the FPDU that
// was partly handed to TCP was copied before the flush), and not one byte written after the
// flush: nothing read the source once the QP had given it back.
TEST_P(RevocationTest, FlushWhileAWriteWaitsForTheWindow) {
  constexpr std::uint8_t kReusedAfterTheFlush = 0xEE;
  Mapping region(kBeyondBuffers);
  ASSERT_NE(region.data(), nullptr);
  std::memset(region.data(), kWrittenByte, region.size());
  ASSERT_NO_FATAL_FAILURE(write_behind_shut_window(region, send_flags::kSignaled));
  ASSERT_TRUE(qp_->modify_state(QpState::kError));
  auto wc = wait_wc(*cq_);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::kWrFlushError) << to_string(wc->status);
  std::memset(region.data(), kReusedAfterTheFlush, region.size());
  std::size_t reused_bytes_sent = 0;
  const RawPeer::Drain d = raw_.drain_until_closed(20000, 1u << 20, [&](const RawFpdu& f) {
    reused_bytes_sent += std::count(f.payload.begin(), f.payload.end(), kReusedAfterTheFlush);
  });
  EXPECT_EQ(reused_bytes_sent, 0u) << "bytes of the source were read after the flush completed";
  EXPECT_EQ(d.last, ReadStatus::kClosed) << to_string(d.last);
  EXPECT_GT(d.fpdus, 0u);
  EXPECT_LT(d.payload_bytes, kBeyondBuffers);
  EXPECT_EQ(raw_.buffered(), 0u) << "the stream was cut inside an FPDU";
  EXPECT_TRUE(d.terminates.empty());
}

// The posting thread sends with the QP lock released (runtime::Transmitter). It posts Writes of
// the whole source one after the other, each sent by its own post_send, to a peer that reads all
// the time, so that it spends most of its time inside send system calls; once the first bytes
// have arrived, another thread gives the source back: `give_back` does so and returns once the
// memory is no longer the application's. `visit` sees each FPDU the peer reads.
void RevocationTest::give_back_while_the_poster_sends(
    const std::function<void(Mapping&)>& give_back,
    const std::function<void(const RawFpdu&)>& visit, RawPeer::Drain& drained) {
  constexpr std::size_t kPiece = 1024 * 1024;
  Mapping region(kBeyondBuffers);
  ASSERT_NE(region.data(), nullptr);
  std::memset(region.data(), kWrittenByte, region.size());
  mr_.emplace(pd_->reg_mr(region.data(), region.size(), access::kLocalWrite).value());
  ASSERT_NO_FATAL_FAILURE(connect_raw());
  std::atomic<std::size_t> arrived{0};
  std::thread peer([&] {
    drained = raw_.drain_until_closed(20000, 1u << 20, [&](const RawFpdu& f) {
      if (visit) visit(f);
      arrived += f.payload.size();
    });
  });
  std::thread poster([&] {
    for (std::size_t offset = 0; offset < region.size(); offset += kPiece) {
      Sge sge = mr_->sge(offset, kPiece);
      SendWr wr;
      wr.wr_id = offset;
      wr.opcode = WrOpcode::kRdmaWrite;
      wr.flags = send_flags::kSignaled;
      wr.sg_list = {&sge, 1};
      wr.rkey = 0x1234;
      if (!qp_->post_send(wr)) break;  // the region is gone
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (arrived.load() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  EXPECT_GT(arrived.load(), 0u) << "no byte of the Writes arrived";
  give_back(region);
  poster.join();
  peer.join();
  EXPECT_TRUE(drained.closed) << "uwarp did not close (" << to_string(drained.last) << ")";
  EXPECT_LT(drained.payload_bytes, kBeyondBuffers) << "every Write went out";
  EXPECT_EQ(raw_.buffered(), 0u) << "the stream was cut inside an FPDU";
  EXPECT_EQ(qp_->state(), QpState::kError);
}

// Deregistered and made inaccessible while the posting thread sends: the deregistration waits
// for the send system call under way, so no send reads the memory afterwards (one would fail,
// "send failed: Bad address"). The QP fails in one of two ways, whichever comes first: the
// revocation finds the memory in use and the peer gets the Terminate for a local catastrophic
// error (CRC intact), or the engine starts the next Write after the region's STag is gone, and
// that request fails with a local protection error (no Terminate).
TEST_P(RevocationTest, DeregistrationWhileThePostingThreadSends) {
  RawPeer::Drain d;
  ASSERT_NO_FATAL_FAILURE(give_back_while_the_poster_sends(
      [&](Mapping& region) { deregister_and_poison(region); }, {}, d));
  auto event = ctx_->get_async_event(kTimeoutMs);
  ASSERT_TRUE(event);
  EXPECT_EQ(event->detail.find("send failed"), std::string::npos) << event->detail;
  if (d.terminates.empty()) {
    EXPECT_NE(event->detail.find("local protection error"), std::string::npos) << event->detail;
    return;
  }
  ASSERT_EQ(d.terminates.size(), 1u);
  EXPECT_EQ(d.terminates[0].code, wire::term::kRdmapLocalCatastrophic)
      << "got " << wire::describe(d.terminates[0].code);
  EXPECT_TRUE(d.terminates[0].crc_ok);
}

// Flushed while the posting thread sends: once the flush completion is out, the application
// reuses the source at once, and not one reused byte reaches the peer.
TEST_P(RevocationTest, FlushWhileThePostingThreadSends) {
  constexpr std::uint8_t kReusedAfterTheFlush = 0xEE;
  std::size_t reused_bytes_sent = 0;
  RawPeer::Drain d;
  ASSERT_NO_FATAL_FAILURE(give_back_while_the_poster_sends(
      [&](Mapping& region) {
        ASSERT_TRUE(qp_->modify_state(QpState::kError));
        // Writes sent whole complete first; the first one that was not is flushed.
        std::optional<WorkCompletion> wc;
        do {
          wc = wait_wc(*cq_);
        } while (wc && wc->status == WcStatus::kSuccess);
        ASSERT_TRUE(wc);
        EXPECT_EQ(wc->status, WcStatus::kWrFlushError) << to_string(wc->status);
        std::memset(region.data(), kReusedAfterTheFlush, region.size());
      },
      [&](const RawFpdu& f) {
        reused_bytes_sent += std::count(f.payload.begin(), f.payload.end(), kReusedAfterTheFlush);
      },
      d));
  EXPECT_EQ(reused_bytes_sent, 0u) << "bytes of the source were read after the flush completed";
  EXPECT_TRUE(d.terminates.empty());
}

// A wait the peer controls has a deadline: uwarp has much queued for a peer that keeps its
// window shut, and the application disconnects. The close ends within its bound (a few seconds)
// with DISCONNECTED, and the socket is closed (the peer sees the end of the stream), instead of
// waiting for ever for bytes that cannot leave.
TEST_P(RevocationTest, DisconnectEndsWhileThePeerKeepsItsWindowShut) {
  Mapping region(kBeyondBuffers);
  ASSERT_NO_FATAL_FAILURE(write_behind_shut_window(region, 0));
  const auto start = std::chrono::steady_clock::now();
  conn_.disconnect();
  expect_closed_within_bound(start);
}

// The same bound holds when the close comes from a Terminate that cannot leave: the peer fills
// its window with a Read Response it does not read, then breaks a rule. uwarp's QP fails at once
// and its Terminate waits behind the response; the stream still ends within the bound.
TEST_P(RevocationTest, ATerminateBehindAShutWindowStillEndsTheStream) {
  Mapping region(kBeyondBuffers);
  ASSERT_NO_FATAL_FAILURE(read_behind_shut_window(region));
  // A Write to an STag that does not exist: a Terminate is due.
  ASSERT_TRUE(
      raw_.send_fpdu(RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, mr_->rkey() ^ 0x5A5A00, 0),
                     std::vector<std::uint8_t>(16, 1)));
  expect_closed_within_bound(std::chrono::steady_clock::now());
}

INSTANTIATE_TEST_SUITE_P(Crc, RevocationTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "crc" : "nocrc";
                         });

}  // namespace
}  // namespace uwarp::testing
