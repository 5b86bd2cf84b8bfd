// libFuzzer target: proto::RdmapEngine alone, with no verbs behind it. Its port is plain memory
// (separate heap blocks, so that AddressSanitizer sees any byte placed or read outside them) and
// a send queue the input fills. The input is a small program: each step appends one FPDU with
// fuzzed header fields (or raw bytes) to the inbound stream, posts a local request, feeds the
// stream so far in fuzzed pieces (feed() or straight into the engine's direct target), or
// transmits. The checks below hold the engine to its contract with the port.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_check.h"
#include "proto/rdmap_engine.h"
#include "wire/fpdu.h"
#include "wire/rdmap_ext.h"

namespace uwarp {
namespace {

constexpr int kBuffers = 3;
constexpr std::size_t kBufferSize = 4096;
constexpr std::uint64_t kBase = 0x10000;

class Port final : public proto::RdmapPort {
 public:
  Port() {
    for (auto& b : mem_) b.reset(new std::uint8_t[kBufferSize]());
  }
  static std::uint32_t stag(int i) { return 0x100u + static_cast<std::uint32_t>(i); }

  proto::ScatterResult resolve_write(wire::Stag s, wire::TaggedOffset offset,
                                     std::size_t length) override {
    FUZZ_CHECK(!ended());
    auto span = find(s.value(), offset.value(), length);
    if (!span) return Unexpected{wire::term::kDdpTaggedInvalidStag};
    scatter_.assign(1, *span);
    return proto::Scatter(scatter_);
  }
  proto::ScatterResult resolve_receive(wire::Msn, wire::MessageOffset offset, std::size_t length,
                                       bool first) override {
    const std::uint32_t mo = offset.value();
    FUZZ_CHECK(!ended());
    if (first) {
      if (receives_ == 0) return Unexpected{wire::term::kDdpUntaggedNoBuffer};
      --receives_;
    }
    if (mo + length > kBufferSize) return Unexpected{wire::term::kDdpUntaggedTooLong};
    scatter_.assign(1, ByteSpan(mem_[0].get() + mo, length));
    return proto::Scatter(scatter_);
  }
  bool wait_for_receive() override {
    FUZZ_CHECK(!ended() && receives_ == 0);
    return waits_;
  }
  // Receiver not ready: a message with no receive waits for one (as a QP whose application
  // asked for receiver-not-ready retries) or is refused with the Terminate.
  bool waits_ = false;
  std::optional<wire::TerminateCode> receive_complete(const proto::InboundSend& send) override {
    FUZZ_CHECK(!ended());
    // A Send's length is what was placed; an Immediate Data's, that of the Write before it.
    if (!wire::is_immediate_data(send.opcode)) FUZZ_CHECK(send.length <= kBufferSize);
    return std::nullopt;
  }
  Expected<proto::ReadSource, wire::TerminateCode> resolve_read_source(
      wire::Stag s, wire::TaggedOffset offset, std::uint32_t length) override {
    FUZZ_CHECK(!ended());
    auto span = find(s.value(), offset.value(), length);
    if (!span) return Unexpected{wire::term::kRdmapInvalidStag};
    return proto::ReadSource{*span, nullptr};
  }
  proto::ScatterResult resolve_read_sink(std::uint64_t seq, std::size_t offset,
                                         std::size_t length) override {
    FUZZ_CHECK(seq >= 1 && seq <= posted_.size());
    const proto::OutboundRequest& r = posted_[seq - 1];
    FUZZ_CHECK(r.kind == proto::OutboundRequest::Kind::kRead);
    FUZZ_CHECK(offset + length <= r.length);  // the engine checked the advertised sink
    scatter_.assign(1, ByteSpan(mem_[1].get() + offset, length));
    return proto::Scatter(scatter_);
  }
  void read_complete(std::uint64_t seq) override {
    FUZZ_CHECK(seq > last_read_done_ && seq <= started_);
    FUZZ_CHECK(posted_[seq - 1].kind == proto::OutboundRequest::Kind::kRead);
    last_read_done_ = seq;
  }
  Expected<proto::ReadSource, wire::TerminateCode> resolve_atomic_target(
      wire::Stag s, wire::TaggedOffset offset) override {
    FUZZ_CHECK(!ended());
    auto span = find(s.value(), offset.value(), 8);
    if (!span) return Unexpected{wire::term::kRdmapInvalidStag};
    if (reinterpret_cast<std::uintptr_t>(span->data()) % 8 != 0) {
      return Unexpected{wire::term::kRdmapBaseBounds};
    }
    return proto::ReadSource{*span, nullptr};
  }
  // Reads and atomics complete in the order they were started (one queue, RFC 7306).
  void atomic_complete(std::uint64_t seq, std::uint64_t) override {
    FUZZ_CHECK(seq > last_read_done_ && seq <= started_);
    FUZZ_CHECK(posted_[seq - 1].kind == proto::OutboundRequest::Kind::kAtomic);
    last_read_done_ = seq;
  }
  bool peek_request(proto::OutboundRequest& next) override {
    if (started_ >= posted_.size()) return false;
    next = posted_[started_];
    return true;
  }
  bool start_request(proto::OutboundRequest& r, std::vector<ConstByteSpan>& payload) override {
    r = posted_[started_++];
    const bool carries_payload = r.kind != proto::OutboundRequest::Kind::kRead &&
                                 r.kind != proto::OutboundRequest::Kind::kAtomic;
    if (carries_payload && r.length > 0) {  // kImmediate: 0
      payload.push_back(ConstByteSpan(mem_[2].get(), r.length));
    }
    return true;
  }
  wire::AtomicRequest atomic_request(std::uint64_t seq) override {
    FUZZ_CHECK(seq >= 1 && seq <= started_ && posted_[seq - 1].kind == proto::OutboundRequest::Kind::kAtomic);
    return atomics_[seq - 1];
  }
  void request_sent(std::uint64_t seq) override {
    FUZZ_CHECK(seq > last_sent_ && seq <= started_);
    last_sent_ = seq;
  }
  void terminate_queued(const wire::TerminateCode&) override {
    FUZZ_CHECK(!queued_);
    queued_ = true;
  }
  void terminate_received(const wire::TerminateMessage&) override {
    FUZZ_CHECK(!received_);
    received_ = true;
  }
  void terminate_sent() override {
    FUZZ_CHECK(queued_ && !sent_terminate_);
    sent_terminate_ = true;
  }
  void rtr_received() override { ++rtrs_; FUZZ_CHECK(rtrs_ == 1); }

  void post_receive() { ++receives_; }
  void post(FuzzedDataProvider& in) {
    proto::OutboundRequest r;
    r.seq = posted_.size() + 1;
    // Every kind but kLocal (the port's own); 6 stands for kAtomic.
    const int kind = in.ConsumeIntegralInRange<int>(0, 6);
    r.kind = kind == 6 ? proto::OutboundRequest::Kind::kAtomic
                       : static_cast<proto::OutboundRequest::Kind>(kind);
    r.fence = in.ConsumeBool();
    r.solicited = in.ConsumeBool();
    r.length = in.ConsumeIntegralInRange<std::uint32_t>(0, kBufferSize);
    r.remote_stag = wire::Stag{in.ConsumeIntegral<std::uint32_t>()};
    r.remote_offset = wire::TaggedOffset{in.ConsumeIntegral<std::uint64_t>()};
    r.sink_stag = wire::Stag{in.ConsumeIntegralInRange<std::uint32_t>(0x300, 0x302)};
    r.sink_offset = wire::TaggedOffset{in.ConsumeIntegralInRange<std::uint64_t>(0, 2) * kBase};
    r.immediate = in.ConsumeIntegral<std::uint64_t>();
    if (r.kind == proto::OutboundRequest::Kind::kImmediate) r.length = 0;
    wire::AtomicRequest a;
    if (r.kind == proto::OutboundRequest::Kind::kAtomic) {
      r.length = 8;
      a.opcode = in.ConsumeIntegralInRange<std::uint8_t>(0, 3);
      a.add_swap_data = in.ConsumeIntegral<std::uint64_t>();
      a.add_swap_mask = in.ConsumeIntegral<std::uint64_t>();
      a.compare_data = in.ConsumeIntegral<std::uint64_t>();
      a.compare_mask = in.ConsumeIntegral<std::uint64_t>();
    }
    posted_.push_back(r);
    atomics_.push_back(a);
  }
  bool ended() const { return received_; }
  bool queued() const { return queued_; }

 private:
  std::optional<ByteSpan> find(std::uint32_t s, std::uint64_t offset, std::size_t length) {
    for (int i = 0; i < kBuffers; ++i) {
      if (s != stag(i)) continue;
      if (offset < kBase || offset - kBase > kBufferSize || length > kBufferSize - (offset - kBase)) {
        return std::nullopt;
      }
      return ByteSpan(mem_[i].get() + (offset - kBase), length);
    }
    return std::nullopt;
  }

  std::array<std::unique_ptr<std::uint8_t[]>, kBuffers> mem_;
  std::vector<ByteSpan> scatter_;
  std::vector<proto::OutboundRequest> posted_;
  std::vector<wire::AtomicRequest> atomics_;  // the operands of posted_[i] if it is a kAtomic
  std::size_t started_ = 0;
  std::uint64_t last_sent_ = 0;
  std::uint64_t last_read_done_ = 0;
  int receives_ = 0;
  int rtrs_ = 0;
  bool queued_ = false;
  bool received_ = false;
  bool sent_terminate_ = false;
};

void transmit(proto::RdmapEngine& engine, proto::TxBatch& batch, proto::RdmapEngine::TxGate gate) {
  for (int round = 0; round < 16 && engine.fill(batch, gate); ++round) {
    batch.consume(batch.pending_bytes());
    std::uint64_t cookie;
    while (batch.pop_sent(cookie)) engine.sent(cookie);
  }
}

void run_one(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  Port port;
  proto::RdmapEngine::Params p;
  p.crc = in.ConsumeBool();
  p.ird = in.ConsumeIntegralInRange<std::uint16_t>(0, 4);
  p.ord = in.ConsumeIntegralInRange<std::uint16_t>(0, 4);
  p.send_rtr = static_cast<proto::RtrType>(in.ConsumeIntegralInRange<int>(0, 3));
  p.expect_rtr = static_cast<proto::RtrType>(in.ConsumeIntegralInRange<int>(0, 3));
  p.max_ulpdu = in.ConsumeIntegralInRange<std::size_t>(64, 2048);
  port.waits_ = in.ConsumeBool();
  proto::RdmapEngine engine(port, p);
  proto::TxBatch batch;
  proto::RdmapEngine::TxGate gate{true, true};

  std::vector<std::uint8_t> stream;
  std::size_t fed = 0;
  std::uint32_t msn[wire::kUntaggedQueues] = {1, 1, 1, 1};
  for (int step = 0; step < 64 && in.remaining_bytes() > 0; ++step) {
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
      case 0: {  // one FPDU with fuzzed fields
        wire::DdpHeader d;
        d.tagged = in.ConsumeBool();
        d.last = in.ConsumeBool() || in.ConsumeBool();
        d.opcode = in.ConsumeIntegralInRange<std::uint8_t>(0, 11);  // RFC 5040 and RFC 7306
        d.stag = in.ConsumeBool() ? Port::stag(in.ConsumeIntegralInRange<int>(0, 3))
                                  : in.ConsumeIntegral<std::uint32_t>();
        d.tagged_offset = kBase * in.ConsumeIntegralInRange<std::uint32_t>(0, 2) +
                          in.ConsumeIntegralInRange<std::uint32_t>(0, kBufferSize);
        d.queue = in.ConsumeIntegralInRange<std::uint32_t>(0, 4);
        const bool known_queue = d.queue < wire::kUntaggedQueues;
        d.msn = known_queue && in.ConsumeBool() ? msn[d.queue] : in.ConsumeIntegral<std::uint32_t>();
        if (known_queue && d.last && !d.tagged) ++msn[d.queue];
        d.message_offset = in.ConsumeIntegralInRange<std::uint32_t>(0, 2 * kBufferSize);
        if (in.ConsumeIntegralInRange<int>(0, 7) == 0) d.rdmap_version = 0;
        // The RFC 7306 bodies have one size: often give them that.
        const auto op = static_cast<wire::RdmapOpcode>(d.opcode);
        std::size_t exact = 0;
        if (wire::is_immediate_data(op)) exact = wire::kImmediateDataSize;
        if (op == wire::RdmapOpcode::kAtomicRequest) exact = wire::kAtomicRequestSize;
        if (op == wire::RdmapOpcode::kAtomicResponse) exact = wire::kAtomicResponseSize;
        auto payload = in.ConsumeBytes<std::uint8_t>(
            exact != 0 && in.ConsumeBool() ? exact : in.ConsumeIntegralInRange<std::size_t>(0, 700));
        std::vector<std::uint8_t> ulpdu(d.size() + payload.size());
        wire::encode_ddp_header(d, ulpdu);
        if (!payload.empty()) std::memcpy(ulpdu.data() + d.size(), payload.data(), payload.size());
        std::vector<std::uint8_t> fpdu(wire::fpdu_size(ulpdu.size()));
        wire::encode_fpdu(ulpdu, p.crc, fpdu);
        stream.insert(stream.end(), fpdu.begin(), fpdu.end());
        break;
      }
      case 1: {  // raw bytes
        auto raw = in.ConsumeBytes<std::uint8_t>(in.ConsumeIntegralInRange<std::size_t>(0, 64));
        stream.insert(stream.end(), raw.begin(), raw.end());
        break;
      }
      case 2:
        if (in.ConsumeBool()) {
          port.post_receive();
          engine.resume_rx();  // as verbs does when a receive is posted
        } else if (engine.rx_waiting() && in.ConsumeBool()) {
          port.waits_ = false;  // the wait ran out: the Terminate for no buffer
          engine.resume_rx();
        } else {
          port.post(in);
        }
        break;
      case 3:  // feed what is pending, in fuzzed pieces
        while (fed < stream.size() && engine.rx_open()) {
          const std::size_t piece =
              std::min(stream.size() - fed, in.ConsumeIntegralInRange<std::size_t>(1, 4096));
          const ByteSpan direct = engine.direct_target();
          if (!direct.empty() && in.ConsumeBool()) {
            const std::size_t n = std::min(piece, direct.size());
            std::memcpy(direct.data(), stream.data() + fed, n);
            engine.commit_direct(n);
            fed += n;
          } else {
            const std::size_t used = engine.feed(ConstByteSpan(stream.data() + fed, piece));
            FUZZ_CHECK(used <= piece);
            fed += used;
            if (used < piece) {
              // It stops early only at a violation, or to wait for a receive.
              FUZZ_CHECK(!engine.rx_open() || engine.rx_waiting());
              break;
            }
          }
        }
        break;
      case 4:
        transmit(engine, batch, gate);
        break;
      default:  // the QP fails, as verbs would tell the engine
        gate = proto::RdmapEngine::TxGate{};
        engine.abandon();
        break;
    }
    if (port.queued() || port.ended()) FUZZ_CHECK(!engine.rx_open());
  }
  if (fed < stream.size()) engine.feed(ConstByteSpan(stream).subspan(fed));
  transmit(engine, batch, gate);
}

}  // namespace
}  // namespace uwarp

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  uwarp::run_one(data, size);
  return 0;
}
