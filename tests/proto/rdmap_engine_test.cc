// proto::RdmapEngine without sockets and without verbs: two engines back to back over a byte
// stream that is cut into pieces of every size (and received straight into place where the
// engine offers a target), each engine's port a plain-memory stand-in for a QP. Covers the
// transmit order (fences, ORD, RTR first), Read Responses matched to Reads, and the Terminate
// paths: a violation queues exactly one Terminate, which the peer receives and reports.
#include "proto/rdmap_engine.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "proto/proto_test_util.h"
#include "wire/rdmap_ext.h"

namespace uwarp::proto {
namespace {

using testing::Bytes;
using testing::pattern;
namespace term = wire::term;

// A tagged buffer of the fake port.
struct Buffer {
  std::uint64_t base = 0;  // Tagged Offset of bytes[0]
  Bytes bytes;
  bool remote_write = true;
  bool remote_read = true;
  bool remote_atomic = true;
};

// A posted request: what peek/start report, plus its memory.
struct Posted {
  OutboundRequest request;
  Bytes payload;      // Send, Write
  Bytes* sink = nullptr;  // Read; atomic: its eight bytes take the original value
  wire::AtomicRequest atomic;  // atomic: operation and operands
};

// RdmapPort over plain memory, recording what the engine reports.
class FakePort final : public RdmapPort {
 public:
  std::map<std::uint32_t, Buffer> buffers;
  std::deque<Bytes> receives;          // posted receive buffers, in order
  std::vector<Bytes> received;         // completed receives, trimmed to their length
  std::vector<InboundSend> sends;      // their descriptions
  std::deque<Posted> sq;
  std::size_t sq_next = 0;
  std::vector<std::uint64_t> sent;         // request_sent
  std::vector<std::uint64_t> reads_done;   // read_complete
  std::vector<std::uint64_t> atomics_done;  // atomic_complete
  std::vector<wire::TerminateCode> terminates_queued;
  std::vector<wire::TerminateCode> terminates_received;
  int terminates_sent = 0;
  int rtrs = 0;

  std::uint64_t post(OutboundRequest::Kind kind, Bytes payload, bool fence = false) {
    Posted p;
    p.request.seq = sq.size() + 1;
    p.request.kind = kind;
    p.request.fence = fence;
    p.request.length = static_cast<std::uint32_t>(payload.size());
    p.payload = std::move(payload);
    sq.push_back(std::move(p));
    return sq.back().request.seq;
  }
  void post_write(Bytes payload, std::uint32_t stag, std::uint64_t to) {
    post(OutboundRequest::Kind::kWrite, std::move(payload));
    sq.back().request.remote_stag = wire::Stag{stag};
    sq.back().request.remote_offset = wire::TaggedOffset{to};
  }
  void post_write_immediate(Bytes payload, std::uint32_t stag, std::uint64_t to,
                            std::uint64_t immediate) {
    post_write(std::move(payload), stag, to);
    sq.back().request.kind = OutboundRequest::Kind::kWriteImmediate;
    sq.back().request.immediate = immediate;
  }
  void post_immediate(std::uint64_t immediate, bool solicited) {
    post(OutboundRequest::Kind::kImmediate, {});
    sq.back().request.immediate = immediate;
    sq.back().request.solicited = solicited;
  }
  void post_read(Bytes* sink, std::uint32_t sink_stag, std::uint32_t stag, std::uint64_t to,
                 bool fence = false) {
    post(OutboundRequest::Kind::kRead, {}, fence);
    Posted& p = sq.back();
    p.sink = sink;
    p.request.length = static_cast<std::uint32_t>(sink->size());
    p.request.remote_stag = wire::Stag{stag};
    p.request.remote_offset = wire::TaggedOffset{to};
    p.request.sink_stag = wire::Stag{sink_stag};
    p.request.sink_offset = wire::TaggedOffset{0};
  }
  void post_atomic(Bytes* result, wire::AtomicOpcode op, std::uint32_t stag, std::uint64_t to,
                   std::uint64_t data, std::uint64_t compare = 0) {
    post(OutboundRequest::Kind::kAtomic, {});
    Posted& p = sq.back();
    p.sink = result;
    p.request.length = 8;
    p.request.remote_stag = wire::Stag{stag};
    p.request.remote_offset = wire::TaggedOffset{to};
    p.atomic.opcode = static_cast<std::uint8_t>(op);
    p.atomic.add_swap_data = data;
    p.atomic.add_swap_mask = op == wire::AtomicOpcode::kFetchAdd ? 0 : ~std::uint64_t{0};
    p.atomic.compare_data = compare;
    p.atomic.compare_mask = ~std::uint64_t{0};
  }

  ScatterResult resolve_write(wire::Stag stag, wire::TaggedOffset to, std::size_t length) override {
    const std::uint64_t offset = to.value();
    auto it = buffers.find(stag.value());
    if (it == buffers.end() || !it->second.remote_write) return Unexpected{term::kDdpTaggedInvalidStag};
    Buffer& b = it->second;
    if (offset < b.base || offset - b.base + length > b.bytes.size()) {
      return Unexpected{term::kDdpTaggedBaseBounds};
    }
    scatter_.assign(1, ByteSpan(b.bytes).subspan(offset - b.base, length));
    return Scatter(scatter_);
  }
  ScatterResult resolve_receive(wire::Msn, wire::MessageOffset offset, std::size_t length,
                                bool first_segment) override {
    const std::uint32_t mo = offset.value();
    if (first_segment) {
      if (receives.empty()) return Unexpected{term::kDdpUntaggedNoBuffer};
      active_ = std::move(receives.front());
      receives.pop_front();
    }
    if (mo + length > active_.size()) return Unexpected{term::kDdpUntaggedTooLong};
    scatter_.assign(1, ByteSpan(active_).subspan(mo, length));
    return Scatter(scatter_);
  }
  // Receiver not ready: wait for a receive while `wait_for_receives` (counted in `waits`).
  bool wait_for_receive() override {
    ++waits;
    return wait_for_receives;
  }
  bool wait_for_receives = false;
  int waits = 0;
  std::optional<wire::TerminateCode> receive_complete(const InboundSend& send) override {
    active_.resize(send.length);
    received.push_back(std::move(active_));
    sends.push_back(send);
    return std::nullopt;
  }
  Expected<ReadSource, wire::TerminateCode> resolve_read_source(wire::Stag stag,
                                                                wire::TaggedOffset to,
                                                                std::uint32_t length) override {
    const std::uint64_t offset = to.value();
    auto it = buffers.find(stag.value());
    if (it == buffers.end()) return Unexpected{term::kRdmapInvalidStag};
    if (!it->second.remote_read) return Unexpected{term::kRdmapAccessRights};
    const Buffer& b = it->second;
    if (offset < b.base || offset - b.base + length > b.bytes.size()) {
      return Unexpected{term::kRdmapBaseBounds};
    }
    return ReadSource{ConstByteSpan(b.bytes).subspan(offset - b.base, length), nullptr};
  }
  ScatterResult resolve_read_sink(std::uint64_t seq, std::size_t offset, std::size_t length) override {
    Bytes* sink = sq.at(seq - 1).sink;
    if (sink == nullptr || offset + length > sink->size()) return Unexpected{term::kDdpTaggedBaseBounds};
    scatter_.assign(1, ByteSpan(*sink).subspan(offset, length));
    return Scatter(scatter_);
  }
  void read_complete(std::uint64_t seq) override { reads_done.push_back(seq); }
  Expected<ReadSource, wire::TerminateCode> resolve_atomic_target(wire::Stag stag,
                                                                  wire::TaggedOffset to) override {
    const std::uint64_t offset = to.value();
    auto it = buffers.find(stag.value());
    if (it == buffers.end()) return Unexpected{term::kRdmapInvalidStag};
    if (!it->second.remote_atomic) return Unexpected{term::kRdmapAccessRights};
    const Buffer& b = it->second;
    if (offset < b.base || offset - b.base + 8 > b.bytes.size()) return Unexpected{term::kRdmapBaseBounds};
    const ConstByteSpan word = ConstByteSpan(b.bytes).subspan(offset - b.base, 8);
    if (reinterpret_cast<std::uintptr_t>(word.data()) % 8 != 0) return Unexpected{term::kRdmapBaseBounds};
    return ReadSource{word, nullptr};
  }
  void atomic_complete(std::uint64_t seq, std::uint64_t original) override {
    std::memcpy(sq.at(seq - 1).sink->data(), &original, 8);
    atomics_done.push_back(seq);
  }
  bool peek_request(OutboundRequest& next) override {
    if (sq_next >= sq.size()) return false;
    next = sq[sq_next].request;
    return true;
  }
  bool start_request(OutboundRequest& r, std::vector<ConstByteSpan>& payload) override {
    Posted& p = sq[sq_next++];
    r = p.request;
    if (!p.payload.empty()) payload.push_back(ConstByteSpan(p.payload));
    return true;
  }
  void request_sent(std::uint64_t seq) override { sent.push_back(seq); }
  wire::AtomicRequest atomic_request(std::uint64_t seq) override { return sq.at(seq - 1).atomic; }
  void terminate_queued(const wire::TerminateCode& code) override {
    terminates_queued.push_back(code);
  }
  void terminate_received(const wire::TerminateMessage& m) override {
    terminates_received.push_back(m.code);
  }
  void terminate_sent() override { ++terminates_sent; }
  void rtr_received() override { ++rtrs; }

 private:
  Bytes active_;
  std::vector<ByteSpan> scatter_;
};

struct Endpoint {
  explicit Endpoint(const RdmapEngine::Params& p) : engine(port, p) {}
  FakePort port;
  RdmapEngine engine;
  TxBatch batch;
  Bytes wire;  // everything it transmitted
  std::size_t delivered = 0;
  RdmapEngine::TxGate gate{true, true};
};

RdmapEngine::Params params(bool crc, std::size_t max_ulpdu = 512) {
  RdmapEngine::Params p;
  p.crc = crc;
  p.ird = 4;
  p.ord = 4;
  p.max_ulpdu = max_ulpdu;
  return p;
}

// Everything `e` may transmit now, handed to "TCP" whole; true if anything went.
bool transmit(Endpoint& e) {
  bool any = false;
  for (int round = 0; round < 10000 && e.engine.fill(e.batch, e.gate); ++round) {
    any = true;
    testing::append(e.wire, testing::flatten(e.batch.pending()));
    e.batch.consume(e.batch.pending_bytes());
    for (std::uint64_t cookie : testing::pop_all_sent(e.batch)) e.engine.sent(cookie);
  }
  return any;
}

// What `from` transmitted and `to` has not received yet, in pieces of `piece` bytes (0: all at
// once); where the engine offers a target, every other piece goes straight into it.
bool deliver(Endpoint& from, Endpoint& to, std::size_t piece) {
  if (from.delivered == from.wire.size()) return false;
  bool direct = false;
  while (from.delivered < from.wire.size()) {
    const std::size_t left = from.wire.size() - from.delivered;
    std::size_t n = piece == 0 ? left : std::min(piece, left);
    const std::uint8_t* src = from.wire.data() + from.delivered;
    const ByteSpan target = to.engine.rx_open() ? to.engine.direct_target() : ByteSpan{};
    if (direct && !target.empty()) {
      n = std::min(n, target.size());
      std::memcpy(target.data(), src, n);
      to.engine.commit_direct(n);
    } else {
      // It takes less only when it stops at a protocol violation (the rest is then dropped,
      // as the runtime drops it).
      if (to.engine.feed(ConstByteSpan(src, n)) < n) {
        EXPECT_FALSE(to.engine.rx_open());
      }
    }
    direct = !direct;
    from.delivered += n;
  }
  return true;
}

// Both ways until nothing moves (bounded).
void settle(Endpoint& a, Endpoint& b, std::size_t piece) {
  for (int round = 0; round < 1000; ++round) {
    const bool moved = transmit(a) | transmit(b) | deliver(a, b, piece) | deliver(b, a, piece);
    if (!moved) return;
  }
  ADD_FAILURE() << "the engines did not settle";
}

class EngineSplits : public ::testing::TestWithParam<std::tuple<bool, std::size_t>> {};

TEST_P(EngineSplits, SendWriteAndReadArriveWholeInAnySplit) {
  const auto [crc, piece] = GetParam();
  Endpoint a(params(crc)), b(params(crc));
  b.port.buffers[0x100] = Buffer{0x5000, Bytes(3000, 0)};
  b.port.buffers[0x200] = Buffer{0x9000, pattern(5000, 7)};
  b.port.receives.push_back(Bytes(200, 0));
  const Bytes send = pattern(150, 1);
  const Bytes write = pattern(3000, 2);
  Bytes sink(5000, 0);
  a.port.post(OutboundRequest::Kind::kSend, send);
  a.port.post_write(write, 0x100, 0x5000);
  a.port.post_read(&sink, 0x300, 0x200, 0x9000);

  settle(a, b, piece);

  ASSERT_EQ(b.port.received.size(), 1u);
  EXPECT_EQ(b.port.received[0], send);
  EXPECT_EQ(b.port.sends[0].msn, wire::kInitialMsn);
  EXPECT_EQ(b.port.buffers[0x100].bytes, write);
  EXPECT_EQ(sink, b.port.buffers[0x200].bytes);
  EXPECT_EQ(a.port.sent, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(a.port.reads_done, std::vector<std::uint64_t>{3});
  EXPECT_TRUE(a.port.terminates_queued.empty());
  EXPECT_TRUE(b.port.terminates_queued.empty());
  EXPECT_TRUE(a.engine.rx_open() && b.engine.rx_open());
  EXPECT_TRUE(a.engine.rx_at_boundary() && b.engine.rx_at_boundary());
}

INSTANTIATE_TEST_SUITE_P(CrcAndPieces, EngineSplits,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Values(std::size_t{1}, std::size_t{7},
                                                              std::size_t{1000}, std::size_t{0})));

// RFC 7306: an RDMA Write with Immediate is a Write, then an Immediate Data message that takes
// the next receive; the receive completes with the eight bytes and the Write's length, and the
// request completes once both were handed to TCP. The Immediate Data alone (with Solicited
// Event) takes a receive too; both use the Send queue's MSNs.
TEST_P(EngineSplits, WriteWithImmediateAndImmediateDataArriveInAnySplit) {
  const auto [crc, piece] = GetParam();
  Endpoint a(params(crc)), b(params(crc));
  b.port.buffers[0x100] = Buffer{0x5000, Bytes(3000, 0)};
  for (int i = 0; i < 3; ++i) b.port.receives.push_back(Bytes(200, 0));
  const Bytes send = pattern(150, 1);
  const Bytes write = pattern(3000, 2);
  a.port.post(OutboundRequest::Kind::kSend, send);
  a.port.post_write_immediate(write, 0x100, 0x5000, 0x1122334455667788u);
  a.port.post_immediate(0xdeadbeef00000000u, true);

  settle(a, b, piece);

  EXPECT_EQ(b.port.buffers[0x100].bytes, write);
  ASSERT_EQ(b.port.sends.size(), 3u);
  EXPECT_EQ(b.port.sends[0].opcode, wire::RdmapOpcode::kSend);
  EXPECT_EQ(b.port.sends[1].opcode, wire::RdmapOpcode::kImmediateData);
  EXPECT_EQ(b.port.sends[1].immediate, 0x1122334455667788u);
  EXPECT_EQ(b.port.sends[1].length, 3000u) << "the Write just before it";
  EXPECT_EQ(b.port.sends[1].msn, wire::Msn{2});
  EXPECT_EQ(b.port.sends[2].opcode, wire::RdmapOpcode::kImmediateDataSe);
  EXPECT_EQ(b.port.sends[2].immediate, 0xdeadbeef00000000u);
  EXPECT_EQ(b.port.sends[2].length, 0u) << "no Write came just before it";
  EXPECT_EQ(b.port.sends[2].msn, wire::Msn{3});
  EXPECT_TRUE(b.port.receives.empty()) << "each Immediate Data consumed a receive";
  EXPECT_EQ(a.port.sent, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_TRUE(b.port.terminates_queued.empty());
  EXPECT_TRUE(a.engine.rx_at_boundary() && b.engine.rx_at_boundary());
}

// Receiver not ready (RdmapPort::wait_for_receive). Delivers what `from` transmitted as the
// runtime does while the engine may wait: in pieces of `piece` bytes (0: all at once), and what
// the engine does not take stays undelivered. True if `to` waits for a receive.
bool deliver_until_wait(Endpoint& from, Endpoint& to, std::size_t piece) {
  while (from.delivered < from.wire.size() && !to.engine.rx_waiting()) {
    const std::size_t left = from.wire.size() - from.delivered;
    const std::size_t n = piece == 0 ? left : std::min(piece, left);
    from.delivered += to.engine.feed(ConstByteSpan(from.wire.data() + from.delivered, n));
  }
  return to.engine.rx_waiting();
}

// Two Sends, a Write and an Immediate Data reach a receiver with no receive posted that waits
// for one: the engine stops before the first Send's payload and takes no byte more (the Write
// behind it is not placed); each receive posted lets one message through, in order; no
// Terminate.
TEST_P(EngineSplits, MessagesWithoutAReceiveWaitForOneInAnySplit) {
  const auto [crc, piece] = GetParam();
  Endpoint a(params(crc)), b(params(crc));
  b.port.wait_for_receives = true;
  b.port.buffers[0x100] = Buffer{0x5000, Bytes(3000, 0)};
  const Bytes first = pattern(700, 1), second = pattern(90, 2), write = pattern(3000, 3);
  a.port.post(OutboundRequest::Kind::kSend, first);
  a.port.post(OutboundRequest::Kind::kSend, second);
  a.port.post_write(write, 0x100, 0x5000);
  a.port.post_immediate(0x0102030405060708u, false);
  transmit(a);

  ASSERT_TRUE(deliver_until_wait(a, b, piece));
  EXPECT_TRUE(b.engine.rx_open());
  EXPECT_TRUE(b.port.received.empty());
  const std::size_t held = a.wire.size() - a.delivered;
  EXPECT_EQ(b.engine.feed(ConstByteSpan(a.wire).subspan(a.delivered)), 0u) << "it takes nothing";
  b.engine.resume_rx();  // still no receive: it waits on
  EXPECT_TRUE(b.engine.rx_waiting());
  EXPECT_EQ(a.wire.size() - a.delivered, held);

  for (std::size_t message = 1; message <= 3; ++message) {
    b.port.receives.push_back(Bytes(1000, 0));
    b.engine.resume_rx();
    const bool waits = deliver_until_wait(a, b, piece);
    ASSERT_EQ(b.port.received.size(), message);
    EXPECT_EQ(waits, message < 3) << "message " << message;
    // The Write lies between the second Send and the Immediate Data.
    EXPECT_EQ(b.port.buffers[0x100].bytes == write, message >= 2) << "message " << message;
  }
  EXPECT_EQ(b.port.received[0], first);
  EXPECT_EQ(b.port.received[1], second);
  EXPECT_EQ(b.port.sends[2].opcode, wire::RdmapOpcode::kImmediateData);
  EXPECT_EQ(b.port.sends[2].immediate, 0x0102030405060708u);
  EXPECT_EQ(b.port.sends[2].length, 3000u) << "the Write just before it";
  EXPECT_TRUE(b.port.terminates_queued.empty());
  EXPECT_TRUE(b.engine.rx_at_boundary());
}

// A wait that runs out (the port no longer waits when asked again) ends in the Terminate for no
// buffer, naming the Send's header, as when no wait was asked for; the rest is drained.
TEST(RdmapEngine, AWaitForAReceiveThatRunsOutEndsInTheTerminateForNoBuffer) {
  Endpoint a(params(true)), b(params(true));
  b.port.wait_for_receives = true;
  a.port.post(OutboundRequest::Kind::kSend, pattern(300, 1));
  a.port.post(OutboundRequest::Kind::kSend, pattern(300, 2));
  transmit(a);
  ASSERT_TRUE(deliver_until_wait(a, b, 0));
  const int asked = b.port.waits;
  b.port.wait_for_receives = false;
  b.engine.resume_rx();
  EXPECT_EQ(b.port.waits, asked + 1) << "asked again";
  EXPECT_FALSE(b.engine.rx_waiting());
  EXPECT_FALSE(b.engine.rx_open());
  ASSERT_EQ(b.port.terminates_queued, std::vector<wire::TerminateCode>{term::kDdpUntaggedNoBuffer});
  EXPECT_EQ(b.engine.feed(ConstByteSpan(a.wire).subspan(a.delivered)), a.wire.size() - a.delivered);
  b.gate = RdmapEngine::TxGate{};
  EXPECT_TRUE(transmit(b));
  deliver(b, a, 0);
  EXPECT_EQ(a.port.terminates_received, std::vector<wire::TerminateCode>{term::kDdpUntaggedNoBuffer});
}

// On the wire: the Write's FPDUs, then at once the Immediate Data FPDU (QN 0, MSN 1, the eight
// bytes), with a Read Response to send as well; the request completes with the second.
TEST(RdmapEngine, TheImmediateDataFollowsItsWriteAtOnce) {
  Endpoint a(params(false, 64)), b(params(false, 64));
  a.port.buffers[0x200] = Buffer{0, pattern(100, 3)};
  b.port.buffers[0x100] = Buffer{0, Bytes(100, 0)};
  b.port.receives.push_back(Bytes(8, 0));
  Bytes sink(100, 0);
  b.port.post_read(&sink, 0x300, 0x200, 0);
  transmit(b);
  deliver(b, a, 0);  // a has a Read Response to send when it transmits its request
  a.port.post_write_immediate(pattern(100, 4), 0x100, 0, 0x0102030405060708u);
  transmit(a);
  const auto frames = testing::parse_stream(a.wire);
  ASSERT_TRUE(frames.has_value());
  std::vector<std::uint8_t> ops;
  for (const auto& f : *frames) ops.push_back(f.header.opcode);
  const auto imm = std::find(ops.begin(), ops.end(), 0x8);
  ASSERT_NE(imm, ops.end());
  ASSERT_NE(imm, ops.begin());
  EXPECT_EQ(*(imm - 1), 0x0) << "a Write FPDU just before it";
  EXPECT_EQ(std::count(imm, ops.end(), 0x0), 0) << "no Write FPDU after it";
  EXPECT_EQ(std::count(ops.begin(), ops.end(), 0x2), 2) << "the Read Response went too";
  const auto& f = (*frames)[static_cast<std::size_t>(imm - ops.begin())];
  EXPECT_TRUE(f.header.last);
  EXPECT_EQ(f.header.queue, wire::kQueueSend);
  EXPECT_EQ(f.header.msn, 1u);
  EXPECT_EQ(f.payload, (Bytes{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(a.port.sent, std::vector<std::uint64_t>{1});
}

// RFC 7306 atomics in the Read Request queue's order: a Read before an atomic on the same word
// sees the value before it (its response reads the word when TCP takes it, so the atomic waits
// for it to leave), a Read after sees the result, and each atomic returns the value before it.
TEST_P(EngineSplits, AtomicsRunInOrderWithReadsInAnySplit) {
  const auto [crc, piece] = GetParam();
  Endpoint a(params(crc)), b(params(crc));
  Bytes word(8, 0);
  const std::uint64_t initial = 1000;
  std::memcpy(word.data(), &initial, 8);
  b.port.buffers[0x400] = Buffer{0x8000, word};
  Bytes before(8, 0), after(8, 0), fetched(8, 0), compared(8, 0), missed(8, 0), swapped(8, 0);
  a.port.post_read(&before, 0x300, 0x400, 0x8000);
  a.port.post_atomic(&fetched, wire::AtomicOpcode::kFetchAdd, 0x400, 0x8000, 5);
  a.port.post_atomic(&compared, wire::AtomicOpcode::kCompareSwap, 0x400, 0x8000, 77, 1005);
  a.port.post_atomic(&missed, wire::AtomicOpcode::kCompareSwap, 0x400, 0x8000, 99, 1005);
  a.port.post_atomic(&swapped, wire::AtomicOpcode::kSwap, 0x400, 0x8000, 123);
  a.port.post_read(&after, 0x301, 0x400, 0x8000);
  settle(a, b, piece);
  const auto value = [](const Bytes& b8) {
    std::uint64_t v = 0;
    std::memcpy(&v, b8.data(), 8);
    return v;
  };
  EXPECT_EQ(value(before), 1000u);
  EXPECT_EQ(value(fetched), 1000u);
  EXPECT_EQ(value(compared), 1005u);
  EXPECT_EQ(value(missed), 77u);
  EXPECT_EQ(value(swapped), 77u);
  EXPECT_EQ(value(after), 123u);
  EXPECT_EQ(value(b.port.buffers[0x400].bytes), 123u);
  EXPECT_EQ(a.port.atomics_done, (std::vector<std::uint64_t>{2, 3, 4, 5}));
  EXPECT_EQ(a.port.reads_done, (std::vector<std::uint64_t>{1, 6}));
  EXPECT_TRUE(a.port.terminates_received.empty());
  EXPECT_TRUE(b.port.terminates_queued.empty());
}

TEST(RdmapEngine, AFenceHoldsARequestUntilEarlierReadsComplete) {
  Endpoint a(params(false)), b(params(false));
  b.port.buffers[0x200] = Buffer{0, pattern(100, 3)};
  b.port.receives.push_back(Bytes(10, 0));
  Bytes sink(100, 0);
  a.port.post_read(&sink, 0x300, 0x200, 0);
  a.port.post(OutboundRequest::Kind::kSend, pattern(10, 4), /*fence=*/true);
  transmit(a);
  EXPECT_EQ(a.port.sq_next, 1u) << "the fenced Send waits for the Read";
  deliver(a, b, 0);
  transmit(b);
  deliver(b, a, 0);
  EXPECT_EQ(a.port.reads_done, std::vector<std::uint64_t>{1});
  transmit(a);
  EXPECT_EQ(a.port.sq_next, 2u);
  deliver(a, b, 0);
  EXPECT_EQ(b.port.received.size(), 1u);
}

TEST(RdmapEngine, OrdBoundsTheReadsOutstanding) {
  RdmapEngine::Params p = params(false);
  p.ord = 1;
  Endpoint a(p), b(params(false));
  b.port.buffers[0x200] = Buffer{0, pattern(64, 5)};
  Bytes first(32, 0), second(32, 0);
  a.port.post_read(&first, 0x300, 0x200, 0);
  a.port.post_read(&second, 0x301, 0x200, 32);
  transmit(a);
  EXPECT_EQ(a.port.sq_next, 1u) << "ORD 1: one Read at a time";
  settle(a, b, 0);
  EXPECT_EQ(a.port.reads_done, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(Bytes(first.begin(), first.end()), Bytes(b.port.buffers[0x200].bytes.begin(),
                                                     b.port.buffers[0x200].bytes.begin() + 32));
  EXPECT_EQ(Bytes(second.begin(), second.end()), Bytes(b.port.buffers[0x200].bytes.begin() + 32,
                                                       b.port.buffers[0x200].bytes.end()));
}

class EngineRtr : public ::testing::TestWithParam<RtrType> {};

TEST_P(EngineRtr, TheResponderSendsNothingBeforeTheRtr) {
  RdmapEngine::Params pa = params(false), pb = params(false);
  pa.send_rtr = GetParam();
  pb.expect_rtr = GetParam();
  Endpoint a(pa), b(pb);
  b.port.buffers[0x100] = Buffer{0, Bytes(16, 0)};
  a.port.buffers[0x100] = Buffer{0, Bytes(16, 0)};
  b.port.post_write(pattern(16, 6), 0x100, 0);
  EXPECT_FALSE(transmit(b)) << "no transmission before the peer's RTR";
  EXPECT_TRUE(transmit(a));
  deliver(a, b, 0);
  EXPECT_EQ(b.port.rtrs, 1);
  settle(a, b, 0);
  EXPECT_EQ(a.port.buffers[0x100].bytes, pattern(16, 6));
  EXPECT_TRUE(a.port.terminates_queued.empty());
  EXPECT_TRUE(b.port.terminates_queued.empty());
  EXPECT_TRUE(a.port.sent.empty()) << "the RTR is no work request";
}

INSTANTIATE_TEST_SUITE_P(Types, EngineRtr,
                         ::testing::Values(RtrType::kWrite, RtrType::kRead, RtrType::kSend));

TEST(RdmapEngine, AnRtrOfTheWrongTypeIsTerminated) {
  RdmapEngine::Params pa = params(false), pb = params(false);
  pa.send_rtr = RtrType::kSend;
  pb.expect_rtr = RtrType::kWrite;
  Endpoint a(pa), b(pb);
  transmit(a);
  deliver(a, b, 0);
  EXPECT_EQ(b.port.terminates_queued, std::vector<wire::TerminateCode>{term::kLlpNoMatchingRtr});
  EXPECT_EQ(b.port.rtrs, 0);
}

// A peer's frames that break a rule, and the Terminate the engine answers with.
struct Violation {
  std::string name;
  std::function<Bytes()> frames;
  wire::TerminateCode code;
};

Bytes read_request(std::uint32_t msn, std::uint32_t source_stag, std::uint32_t size) {
  wire::ReadRequest rr;
  rr.sink_stag = 0x999;
  rr.size = size;
  rr.source_stag = source_stag;
  return testing::fpdu(testing::untagged_header(wire::RdmapOpcode::kReadRequest,
                                                wire::kQueueReadRequest, msn),
                       testing::read_request_body(rr), false);
}

// An Atomic Request (RFC 7306 operation `op`) on the word at `to` of `stag`.
Bytes atomic_request(std::uint32_t msn, std::uint8_t op, std::uint32_t stag, std::uint64_t to) {
  wire::AtomicRequest a;
  a.opcode = op;
  a.request_id = msn;
  a.remote_stag = stag;
  a.remote_to = to;
  Bytes body(wire::kAtomicRequestSize);
  wire::encode_atomic_request(a, body);
  return testing::fpdu(testing::untagged_header(wire::RdmapOpcode::kAtomicRequest,
                                                wire::kQueueReadRequest, msn),
                       body, false);
}

std::vector<Violation> violations() {
  using wire::RdmapOpcode;
  const Bytes ten = pattern(10, 9);
  return {
      {"WriteToAnUnknownStag",
       [=] { return testing::fpdu(testing::tagged_header(RdmapOpcode::kRdmaWrite, 0x777, 0), ten, false); },
       term::kDdpTaggedInvalidStag},
      {"WritePastTheBuffer",
       [=] { return testing::fpdu(testing::tagged_header(RdmapOpcode::kRdmaWrite, 0x100, 60), ten, false); },
       term::kDdpTaggedBaseBounds},
      {"SendWithoutAReceive",
       [=] {
         Bytes s = testing::fpdu(testing::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1), ten, false);
         testing::append(s, testing::fpdu(testing::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 2), ten, false));
         return s;
       },
       term::kDdpUntaggedNoBuffer},
      {"SendWithTheWrongMsn",
       [=] { return testing::fpdu(testing::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 5), ten, false); },
       term::kDdpUntaggedInvalidMsn},
      {"ReadResponseWithoutARead",
       [=] { return testing::fpdu(testing::tagged_header(RdmapOpcode::kReadResponse, 0x100, 0), ten, false); },
       term::kDdpTaggedInvalidStag},
      {"ImmediateDataWithoutAReceive",
       [] {
         Bytes s = testing::fpdu(testing::untagged_header(RdmapOpcode::kImmediateData, wire::kQueueSend, 1), Bytes(8, 1), false);
         testing::append(s, testing::fpdu(testing::untagged_header(RdmapOpcode::kImmediateDataSe, wire::kQueueSend, 2), Bytes(8, 2), false));
         return s;
       },
       term::kDdpUntaggedNoBuffer},
      {"ImmediateDataLongerThanEightBytes",
       [] { return testing::fpdu(testing::untagged_header(RdmapOpcode::kImmediateData, wire::kQueueSend, 1), Bytes(9, 1), false); },
       term::kDdpUntaggedTooLong},
      {"ImmediateDataShorterThanEightBytes",
       [] { return testing::fpdu(testing::untagged_header(RdmapOpcode::kImmediateData, wire::kQueueSend, 1), Bytes(4, 1), false); },
       term::kRdmapUnspecified},
      {"ImmediateDataInTwoSegments",
       [] { return testing::fpdu(testing::untagged_header(RdmapOpcode::kImmediateData, wire::kQueueSend, 1, 0, false), Bytes(8, 1), false); },
       term::kDdpUntaggedTooLong},
      {"ImmediateDataWithTheWrongMsn",
       [] { return testing::fpdu(testing::untagged_header(RdmapOpcode::kImmediateData, wire::kQueueSend, 4), Bytes(8, 1), false); },
       term::kDdpUntaggedInvalidMsn},
      {"ImmediateDataWithAMessageOffset",
       [] { return testing::fpdu(testing::untagged_header(RdmapOpcode::kImmediateData, wire::kQueueSend, 1, 8), Bytes(8, 1), false); },
       term::kDdpUntaggedInvalidMo},
      {"ImmediateDataBetweenTheSegmentsOfASend",
       [=] {
         Bytes s = testing::fpdu(testing::untagged_header(RdmapOpcode::kSend, wire::kQueueSend, 1, 0, false), ten, false);
         testing::append(s, testing::fpdu(testing::untagged_header(RdmapOpcode::kImmediateData, wire::kQueueSend, 1), Bytes(8, 1), false));
         return s;
       },
       term::kRdmapUnexpectedOpcode},
      {"ImmediateDataOnTheReadRequestQueue",
       [] { return testing::fpdu(testing::untagged_header(RdmapOpcode::kImmediateData, wire::kQueueReadRequest, 1), Bytes(8, 1), false); },
       term::kRdmapUnexpectedOpcode},
      {"ImmediateDataTagged",
       [] { return testing::fpdu(testing::tagged_header(RdmapOpcode::kImmediateData, 0x100, 0), Bytes(8, 1), false); },
       term::kRdmapUnexpectedOpcode},
      {"AtomicResponseWithNoAtomicOutstanding",
       [] { return testing::fpdu(testing::untagged_header(RdmapOpcode::kAtomicResponse, wire::kQueueAtomicResponse, 1), Bytes(12, 1), false); },
       term::kRdmapUnexpectedOpcode},
      {"AtomicRequestForAnUnknownStag", [] { return atomic_request(1, 0, 0x777, 0); }, term::kRdmapInvalidStag},
      {"AtomicRequestWithoutTheAtomicRight", [] { return atomic_request(1, 0, 0x101, 0); }, term::kRdmapAccessRights},
      {"AtomicRequestOutOfBounds", [] { return atomic_request(1, 0, 0x100, 64); }, term::kRdmapBaseBounds},
      {"AtomicRequestNotAligned", [] { return atomic_request(1, 0, 0x100, 4); }, term::kRdmapBaseBounds},
      {"AtomicRequestWithAnUndefinedOperation", [] { return atomic_request(1, 3, 0x100, 0); }, term::kRdmapUnexpectedOpcode},
      {"AtomicAndReadRequestsBeyondIrd",
       [] {
         Bytes s;
         for (std::uint32_t msn = 1; msn <= 4; ++msn) testing::append(s, read_request(msn, 0x100, 8));
         testing::append(s, atomic_request(5, 0, 0x100, 0));
         return s;
       },
       term::kRdmapCatastrophicStream},
      {"ReadRequestForAnUnknownStag", [] { return read_request(1, 0x777, 8); }, term::kRdmapInvalidStag},
      {"ReadRequestsBeyondIrd",
       [] {
         Bytes s;
         for (std::uint32_t msn = 1; msn <= 5; ++msn) testing::append(s, read_request(msn, 0x100, 8));
         return s;
       },
       term::kRdmapCatastrophicStream},
  };
}

void PrintTo(const Violation& v, std::ostream* os) { *os << v.name; }

class EngineViolations : public ::testing::TestWithParam<Violation> {};

TEST_P(EngineViolations, OneTerminateIsSentAndThePeerReportsIt) {
  Endpoint a(params(false)), b(params(false));
  b.port.buffers[0x100] = Buffer{0, Bytes(64, 0)};
  b.port.buffers[0x101] = Buffer{0, Bytes(64, 0)};
  b.port.buffers[0x101].remote_atomic = false;
  b.port.receives.push_back(Bytes(16, 0));
  a.wire = GetParam().frames();
  deliver(a, b, 3);
  ASSERT_EQ(b.port.terminates_queued, std::vector<wire::TerminateCode>{GetParam().code});
  EXPECT_FALSE(b.engine.rx_open());
  EXPECT_EQ(b.engine.feed(ConstByteSpan(a.wire)), a.wire.size()) << "the rest is drained";
  b.gate = RdmapEngine::TxGate{};  // the QP is in ERROR: only the Terminate may go
  EXPECT_TRUE(transmit(b));
  EXPECT_FALSE(transmit(b)) << "a Terminate is sent once";
  EXPECT_EQ(b.port.terminates_sent, 1);
  deliver(b, a, 5);
  EXPECT_EQ(a.port.terminates_received, std::vector<wire::TerminateCode>{GetParam().code});
  EXPECT_FALSE(a.engine.rx_open()) << "reception ends with a received Terminate";
}

INSTANTIATE_TEST_SUITE_P(Rules, EngineViolations, ::testing::ValuesIn(violations()),
                         [](const auto& test) { return test.param.name; });

// A Read Response as the peer sends it: its segments' [offset, offset + length) in the sink and
// whether each carries L=1; the Terminate the Read's initiator answers with, if any.
struct ReadResponseCase {
  std::string name;
  std::vector<std::tuple<std::uint64_t, std::size_t, bool>> segments;
  std::optional<wire::TerminateCode> code;
};

void PrintTo(const ReadResponseCase& c, std::ostream* os) { *os << c.name; }

class EngineReadResponses : public ::testing::TestWithParam<ReadResponseCase> {};

// `a` reads 100 bytes into sink STag 0x300 at TO 0; the peer answers with the case's segments.
// Only a response that writes every sink byte once, in order, completes the Read.
TEST_P(EngineReadResponses, OnlyEverySinkByteOnceCompletesTheRead) {
  Endpoint a(params(false)), peer(params(false));
  const Bytes source = pattern(110, 11);  // what the peer's segments carry, by sink offset
  Bytes sink(100, 0);
  a.port.post_read(&sink, 0x300, 0x200, 0);
  transmit(a);  // the Read Request; the peer's answer is written by hand
  for (const auto& [offset, length, last] : GetParam().segments) {
    const auto h = testing::tagged_header(wire::RdmapOpcode::kReadResponse, 0x300, offset, last);
    testing::append(peer.wire,
                    testing::fpdu(h, ConstByteSpan(source).subspan(offset, length), false));
  }
  deliver(peer, a, 5);
  if (!GetParam().code) {
    EXPECT_TRUE(a.port.terminates_queued.empty());
    EXPECT_EQ(a.port.reads_done, std::vector<std::uint64_t>{1});
    EXPECT_EQ(sink, Bytes(source.begin(), source.begin() + 100));
    return;
  }
  EXPECT_EQ(a.port.terminates_queued, std::vector<wire::TerminateCode>{*GetParam().code});
  EXPECT_TRUE(a.port.reads_done.empty()) << "the Read does not complete";
  EXPECT_FALSE(a.engine.rx_open());
}

std::vector<ReadResponseCase> read_responses() {
  const wire::TerminateCode bounds = term::kDdpTaggedBaseBounds;
  return {
      {"InOrder", {{0, 40, false}, {40, 0, false}, {40, 60, true}}, std::nullopt},
      {"Overlapping", {{0, 60, false}, {20, 40, true}}, bounds},  // [60, 100) never written
      {"Repeated", {{0, 50, false}, {0, 50, true}}, bounds},
      {"Gap", {{0, 40, false}, {60, 40, false}, {40, 20, true}}, bounds},
      {"LastSetEarly", {{0, 60, true}, {60, 40, true}}, bounds},
      {"PastTheLastByte", {{0, 100, false}, {100, 10, true}}, bounds},
  };
}

INSTANTIATE_TEST_SUITE_P(Responses, EngineReadResponses, ::testing::ValuesIn(read_responses()),
                         [](const auto& test) { return test.param.name; });

TEST(RdmapEngine, AbandonDropsTheMessageInProgress) {
  Endpoint a(params(false, 64)), b(params(false, 64));
  b.port.buffers[0x100] = Buffer{0, Bytes(10000, 0)};
  a.port.post_write(pattern(10000, 8), 0x100, 0);
  ASSERT_TRUE(a.engine.fill(a.batch, a.gate));
  const std::size_t first = a.batch.pending_bytes();
  EXPECT_LT(first, 10000u) << "a batch holds a bounded number of FPDUs";
  a.engine.abandon();
  a.batch.consume(first);
  testing::pop_all_sent(a.batch);
  EXPECT_FALSE(a.engine.fill(a.batch, a.gate)) << "the rest of the Write is not sent";
  EXPECT_TRUE(a.port.sent.empty());
}

}  // namespace
}  // namespace uwarp::proto
