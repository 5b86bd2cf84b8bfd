// proto::RdmapReceiver behind an FpduReader: message semantics, RTR handling and every row of the
// Terminate table that the receiver owns, against a recording RxDelegate.
#include "proto/rdmap_receiver.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "proto/fpdu_reader.h"
#include "proto/proto_test_util.h"
#include "wire/rdmap.h"
#include "wire/rdmap_ext.h"

namespace uwarp::proto {
namespace {

using testing::Bytes;
using testing::fpdu;
using testing::pattern;
using testing::tagged_header;
using testing::untagged_header;
using wire::RdmapOpcode;
namespace term = wire::term;

constexpr std::uint64_t kWriteBase = 0x10000;
constexpr std::uint64_t kSinkBase = 0x20000;

// Memory behind resolve_*: one write region, one read-response sink, one receive buffer.
class FakeDelegate final : public RxDelegate {
 public:
  struct Call {
    wire::Stag stag;
    wire::TaggedOffset to;
    std::size_t length = 0;
  };
  struct RecvCall {
    wire::Msn msn;
    wire::MessageOffset mo;
    std::size_t length = 0;
    bool first = false;
  };
  struct Term {
    wire::TerminateCode code;
    std::uint32_t raw_control = 0;
    Bytes ddp_header;
    Bytes rdmap_header;
  };

  Bytes write_mem = Bytes(8192, 0);
  Bytes sink_mem = Bytes(8192, 0);
  Bytes recv_mem = Bytes(8192, 0);

  std::vector<Call> writes, read_responses;
  std::vector<RecvCall> receives;
  std::vector<InboundSend> sends;
  std::vector<wire::ReadRequest> read_requests;
  std::vector<wire::AtomicRequest> atomic_requests;
  std::vector<wire::AtomicResponse> atomic_responses;
  std::vector<Term> terminates;
  std::vector<bool> terminate_has_control;
  int read_responses_complete = 0;
  int rtrs = 0;

  std::optional<wire::TerminateCode> fail_write, fail_read_response, fail_read_response_complete,
      fail_receive, fail_receive_complete, fail_read_request;

  ScatterResult resolve_write(wire::Stag stag, wire::TaggedOffset to,
                              std::size_t length) override {
    writes.push_back({stag, to, length});
    if (fail_write) return Unexpected{*fail_write};
    span_[0] = ByteSpan(write_mem).subspan(to - wire::TaggedOffset{kWriteBase}, length);
    return Scatter(span_, 1);
  }
  ScatterResult resolve_read_response(wire::Stag stag, wire::TaggedOffset to,
                                      std::size_t length) override {
    read_responses.push_back({stag, to, length});
    if (fail_read_response) return Unexpected{*fail_read_response};
    span_[0] = ByteSpan(sink_mem).subspan(to - wire::TaggedOffset{kSinkBase}, length);
    return Scatter(span_, 1);
  }
  std::optional<wire::TerminateCode> read_response_complete() override {
    ++read_responses_complete;
    return fail_read_response_complete;
  }
  ScatterResult resolve_receive(wire::Msn msn, wire::MessageOffset mo, std::size_t length,
                                bool first) override {
    receives.push_back({msn, mo, length, first});
    if (fail_receive) return Unexpected{*fail_receive};
    // Two pieces, to exercise the scatter list.
    const std::size_t half = length / 2;
    span_[0] = ByteSpan(recv_mem).subspan(mo.value(), half);
    span_[1] = ByteSpan(recv_mem).subspan(mo.value() + half, length - half);
    return Scatter(span_, 2);
  }
  bool wait_for_receive() override { return false; }
  std::optional<wire::TerminateCode> receive_complete(const InboundSend& send) override {
    sends.push_back(send);
    return fail_receive_complete;
  }
  std::optional<wire::TerminateCode> read_request(const wire::ReadRequest& request) override {
    read_requests.push_back(request);
    return fail_read_request;
  }
  std::optional<wire::TerminateCode> atomic_request(const wire::AtomicRequest& request) override {
    atomic_requests.push_back(request);
    return std::nullopt;
  }
  std::optional<wire::TerminateCode> atomic_response(const wire::AtomicResponse& response) override {
    atomic_responses.push_back(response);
    return std::nullopt;
  }
  void terminate_received(const wire::TerminateMessage& m) override {
    terminates.push_back({m.code, m.raw_control, Bytes(m.ddp_header.begin(), m.ddp_header.end()),
                          Bytes(m.rdmap_header.begin(), m.rdmap_header.end())});
    terminate_has_control.push_back(m.has_control);
  }
  void rtr_received() override { ++rtrs; }

 private:
  ByteSpan span_[2];
};

struct Rx {
  FakeDelegate d;
  RdmapReceiver r;
  FpduReader reader;
  bool crc;
  explicit Rx(std::uint32_t ird = 4, bool with_crc = true)
      : r(d, ird), reader(r, with_crc), crc(with_crc) {}

  // Feeds one FPDU; returns true while reception is healthy.
  bool feed(const wire::DdpHeader& h, ConstByteSpan payload = {}) {
    const Bytes f = fpdu(h, payload, crc);
    reader.feed(f);
    return !reader.failed();
  }
  bool feed_raw(ConstByteSpan f) {
    reader.feed(f);
    return !reader.failed();
  }
  std::optional<wire::TerminateCode> code() const {
    if (!reader.failed()) return std::nullopt;
    return reader.failure()->code;
  }
};

wire::ReadRequest read_request(std::uint32_t size, std::uint64_t source_to = 0x5000) {
  wire::ReadRequest rr;
  rr.sink_stag = 0x11223301;
  rr.sink_to = kSinkBase;
  rr.size = size;
  rr.source_stag = 0x44556601;
  rr.source_to = source_to;
  return rr;
}

// The failure names the offending segment: its ULPDU length and DDP header bytes.
void expect_failure_header(const Rx& rx, const wire::DdpHeader& h, std::size_t payload_length) {
  ASSERT_TRUE(rx.reader.failed());
  const RxFailure& f = *rx.reader.failure();
  EXPECT_TRUE(f.have_header);
  EXPECT_EQ(f.ulpdu_length, h.size() + payload_length);
  ASSERT_EQ(f.header_size, h.size());
  EXPECT_EQ(Bytes(f.header.begin(), f.header.begin() + static_cast<std::ptrdiff_t>(h.size())),
            testing::encode_header(h));
}

// RFC 7306: an Immediate Data message claims the next receive (no bytes placed) and completes
// it with its eight bytes; the length reported is that of the RDMA Write just before it.
TEST(proto_rdmap_receiver, ImmediateDataTakesAReceiveAndCarriesItsEightBytes) {
  Rx rx;
  ASSERT_TRUE(rx.feed(tagged_header(RdmapOpcode::kRdmaWrite, 1, kWriteBase, false), pattern(6, 1)));
  ASSERT_TRUE(rx.feed(tagged_header(RdmapOpcode::kRdmaWrite, 1, kWriteBase + 6), pattern(4, 2)));
  const Bytes imm = {0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1};
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kImmediateDataSe, 0, 1), imm));
  ASSERT_EQ(rx.d.receives.size(), 1u);
  EXPECT_EQ(rx.d.receives[0].length, 0u);
  EXPECT_TRUE(rx.d.receives[0].first);
  ASSERT_EQ(rx.d.sends.size(), 1u);
  EXPECT_EQ(rx.d.sends[0].opcode, RdmapOpcode::kImmediateDataSe);
  EXPECT_EQ(rx.d.sends[0].immediate, 0xdeadbeef00000001u);
  EXPECT_EQ(rx.d.sends[0].length, 10u);
  // The Send queue's MSN moved on: a Send with MSN 2 is next; a second Immediate Data after it
  // reports no Write length.
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kSend, 0, 2), pattern(4, 3)));
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kImmediateData, 0, 3), imm));
  ASSERT_EQ(rx.d.sends.size(), 3u);
  EXPECT_EQ(rx.d.sends[2].length, 0u);
}

TEST(proto_rdmap_receiver, ImmediateDataWithoutAReceiveIsRefusedWithTheReceivesCode) {
  Rx rx;
  rx.d.fail_receive = term::kDdpUntaggedNoBuffer;
  const auto h = untagged_header(RdmapOpcode::kImmediateData, 0, 1);
  EXPECT_FALSE(rx.feed(h, Bytes(8, 0)));
  EXPECT_EQ(rx.code(), term::kDdpUntaggedNoBuffer);
  expect_failure_header(rx, h, 8);
  EXPECT_TRUE(rx.d.sends.empty());
}

TEST(proto_rdmap_receiver, WriteIsPlacedAtItsTaggedOffsetSegmentBySegment) {
  Rx rx;
  const Bytes data = pattern(3000, 1);
  ASSERT_TRUE(rx.feed(tagged_header(RdmapOpcode::kRdmaWrite, 0xAB01, kWriteBase + 100, false),
                      ConstByteSpan(data).first(1428)));
  ASSERT_TRUE(
      rx.feed(tagged_header(RdmapOpcode::kRdmaWrite, 0xAB01, kWriteBase + 100 + 1428, false),
              ConstByteSpan(data).subspan(1428, 1428)));
  ASSERT_TRUE(rx.feed(tagged_header(RdmapOpcode::kRdmaWrite, 0xAB01, kWriteBase + 100 + 2856),
                      ConstByteSpan(data).subspan(2856)));
  ASSERT_EQ(rx.d.writes.size(), 3u);
  EXPECT_EQ(rx.d.writes[0].stag, wire::Stag{0xAB01});
  EXPECT_EQ(rx.d.writes[1].to, wire::TaggedOffset{kWriteBase + 100 + 1428});
  EXPECT_EQ(rx.d.writes[2].length, 3000u - 2856);
  EXPECT_EQ(Bytes(rx.d.write_mem.begin() + 100, rx.d.write_mem.begin() + 3100), data);
  EXPECT_EQ(rx.d.write_mem[99], 0);
  EXPECT_EQ(rx.d.write_mem[3100], 0);
  EXPECT_TRUE(rx.d.sends.empty());
}

TEST(proto_rdmap_receiver, ZeroLengthWriteTouchesNoMemory) {
  Rx rx;
  ASSERT_TRUE(rx.feed(tagged_header(RdmapOpcode::kRdmaWrite, 0xDEAD01, 0xFFFFFFFFFFFFFFFF)));
  EXPECT_TRUE(rx.d.writes.empty());
}

TEST(proto_rdmap_receiver, ReadResponseCompletesOnItsLastSegment) {
  Rx rx;
  const Bytes data = pattern(2000, 2);
  ASSERT_TRUE(rx.feed(tagged_header(RdmapOpcode::kReadResponse, 0x7701, kSinkBase, false),
                      ConstByteSpan(data).first(1500)));
  EXPECT_EQ(rx.d.read_responses_complete, 0);
  ASSERT_TRUE(rx.feed(tagged_header(RdmapOpcode::kReadResponse, 0x7701, kSinkBase + 1500),
                      ConstByteSpan(data).subspan(1500)));
  EXPECT_EQ(rx.d.read_responses_complete, 1);
  ASSERT_EQ(rx.d.read_responses.size(), 2u);
  EXPECT_EQ(rx.d.read_responses[1].to, wire::TaggedOffset{kSinkBase + 1500});
  EXPECT_EQ(Bytes(rx.d.sink_mem.begin(), rx.d.sink_mem.begin() + 2000), data);
}

TEST(proto_rdmap_receiver, MultiSegmentSendsAndMsnSequence) {
  Rx rx;
  const Bytes a = pattern(100, 3);
  ASSERT_TRUE(
      rx.feed(untagged_header(RdmapOpcode::kSend, 0, 1, 0, false), ConstByteSpan(a).first(30)));
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kSend, 0, 1, 30, false),
                      ConstByteSpan(a).subspan(30, 50)));
  EXPECT_TRUE(rx.d.sends.empty());
  ASSERT_TRUE(
      rx.feed(untagged_header(RdmapOpcode::kSend, 0, 1, 80, true), ConstByteSpan(a).subspan(80)));
  ASSERT_EQ(rx.d.receives.size(), 3u);
  EXPECT_TRUE(rx.d.receives[0].first);
  EXPECT_FALSE(rx.d.receives[1].first);
  EXPECT_FALSE(rx.d.receives[2].first);
  EXPECT_EQ(rx.d.receives[1].mo, wire::MessageOffset{30});
  EXPECT_EQ(rx.d.receives[2].mo, wire::MessageOffset{80});
  EXPECT_EQ(rx.d.receives[2].msn, wire::Msn{1});
  EXPECT_EQ(rx.d.receives[2].length, 20u);
  ASSERT_EQ(rx.d.sends.size(), 1u);
  EXPECT_EQ(rx.d.sends[0].msn, wire::Msn{1});
  EXPECT_EQ(rx.d.sends[0].length, 100u);
  EXPECT_EQ(rx.d.sends[0].opcode, RdmapOpcode::kSend);
  EXPECT_EQ(Bytes(rx.d.recv_mem.begin(), rx.d.recv_mem.begin() + 100), a);
  // The next message is MSN 2 and starts a new receive.
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kSend, 0, 2), pattern(7, 4)));
  ASSERT_EQ(rx.d.sends.size(), 2u);
  EXPECT_EQ(rx.d.sends[1].msn, wire::Msn{2});
  EXPECT_EQ(rx.d.sends[1].length, 7u);
  EXPECT_TRUE(rx.d.receives.back().first);
}

TEST(proto_rdmap_receiver, SendVariantsReportOpcodeAndInvalidateStag) {
  Rx rx;
  std::uint32_t msn = 1;
  for (RdmapOpcode op : {RdmapOpcode::kSend, RdmapOpcode::kSendInvalidate, RdmapOpcode::kSendSe,
                         RdmapOpcode::kSendSeInvalidate}) {
    wire::DdpHeader h = untagged_header(op, 0, msn++);
    h.ulp_reserved = 0xCAFE0001;
    ASSERT_TRUE(rx.feed(h, pattern(5, msn)));
  }
  ASSERT_EQ(rx.d.sends.size(), 4u);
  EXPECT_EQ(rx.d.sends[1].opcode, RdmapOpcode::kSendInvalidate);
  EXPECT_EQ(rx.d.sends[1].invalidate_stag, wire::Stag{0xCAFE0001});
  EXPECT_EQ(rx.d.sends[2].opcode, RdmapOpcode::kSendSe);
  EXPECT_EQ(rx.d.sends[3].opcode, RdmapOpcode::kSendSeInvalidate);
  EXPECT_EQ(rx.d.sends[3].invalidate_stag, wire::Stag{0xCAFE0001});
}

TEST(proto_rdmap_receiver, ZeroLengthSendConsumesAReceive) {
  Rx rx;
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kSend, 0, 1)));
  ASSERT_EQ(rx.d.receives.size(), 1u);
  EXPECT_TRUE(rx.d.receives[0].first);
  EXPECT_EQ(rx.d.receives[0].length, 0u);
  ASSERT_EQ(rx.d.sends.size(), 1u);
  EXPECT_EQ(rx.d.sends[0].length, 0u);
}

TEST(proto_rdmap_receiver, ReadRequestIsDecodedAndHandedOver) {
  Rx rx;
  const wire::ReadRequest rr = read_request(4096, 0x123456789A);
  ASSERT_TRUE(
      rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 1), testing::read_request_body(rr)));
  ASSERT_EQ(rx.d.read_requests.size(), 1u);
  const wire::ReadRequest& got = rx.d.read_requests[0];
  EXPECT_EQ(got.sink_stag, rr.sink_stag);
  EXPECT_EQ(got.sink_to, rr.sink_to);
  EXPECT_EQ(got.size, rr.size);
  EXPECT_EQ(got.source_stag, rr.source_stag);
  EXPECT_EQ(got.source_to, rr.source_to);
  ASSERT_TRUE(
      rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 2), testing::read_request_body(rr)));
  EXPECT_EQ(rx.d.read_requests.size(), 2u);
}

// RFC 7306 as uwarp reads it: an Atomic Request is a message of the Read Request queue (QN 1):
// one MSN sequence with the Read Requests, and one IRD.
TEST(proto_rdmap_receiver, AtomicRequestSharesTheReadRequestQueueAndIrd) {
  Rx rx(2);
  wire::AtomicRequest a;
  a.opcode = 2;
  a.request_id = 0xA1B2C3D4;
  a.remote_stag = 0x11223344;
  a.remote_to = 0x1000;
  a.add_swap_data = 7;
  a.add_swap_mask = ~std::uint64_t{0};
  a.compare_data = 5;
  a.compare_mask = ~std::uint64_t{0};
  Bytes body(wire::kAtomicRequestSize);
  ASSERT_EQ(wire::encode_atomic_request(a, body), body.size());
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kAtomicRequest, 1, 1), body));
  ASSERT_EQ(rx.d.atomic_requests.size(), 1u);
  EXPECT_EQ(rx.d.atomic_requests[0].request_id, a.request_id);
  EXPECT_EQ(rx.d.atomic_requests[0].remote_to, a.remote_to);
  EXPECT_EQ(rx.d.atomic_requests[0].compare_data, a.compare_data);
  // The Read Request after it takes MSN 2 and the second IRD slot; a third request of either
  // kind is beyond IRD.
  const Bytes rr = testing::read_request_body(read_request(10));
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 2), rr));
  EXPECT_FALSE(rx.feed(untagged_header(RdmapOpcode::kAtomicRequest, 1, 3), body));
  EXPECT_EQ(rx.code(), term::kRdmapCatastrophicStream);
  EXPECT_EQ(rx.d.atomic_requests.size(), 1u);
}

TEST(proto_rdmap_receiver, AtomicResponsesHaveQueue3AndItsOwnMsns) {
  Rx rx;
  for (std::uint32_t msn = 1; msn <= 3; ++msn) {
    Bytes body(wire::kAtomicResponseSize);
    wire::encode_atomic_response(wire::AtomicResponse{msn * 10, 0x0102030405060708ull + msn}, body);
    ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kAtomicResponse, 3, msn), body)) << msn;
  }
  ASSERT_EQ(rx.d.atomic_responses.size(), 3u);
  EXPECT_EQ(rx.d.atomic_responses[2].original_request_id, 30u);
  EXPECT_EQ(rx.d.atomic_responses[2].original_value, 0x0102030405060708ull + 3);
  // The Read Request queue's MSNs are untouched.
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 1),
                      testing::read_request_body(read_request(10))));
}

TEST(proto_rdmap_receiver, TerminateIsDeliveredAndEndsReception) {
  Rx rx;
  const Bytes ddp = testing::encode_header(tagged_header(RdmapOpcode::kRdmaWrite, 5, 6));
  wire::TerminateMessage m;
  m.code = term::kDdpTaggedBaseBounds;
  m.has_segment_length = true;
  m.segment_length = 14 + 100;
  m.ddp_header = ddp;
  Bytes body(wire::kTerminateMaxSize);
  body.resize(wire::encode_terminate(m, body));
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kTerminate, 2, 1), body));
  ASSERT_EQ(rx.d.terminates.size(), 1u);
  EXPECT_EQ(rx.d.terminates[0].code, term::kDdpTaggedBaseBounds);
  EXPECT_EQ(rx.d.terminates[0].raw_control >> 16, 0x1101u);
  EXPECT_EQ(rx.d.terminates[0].ddp_header, ddp);
  EXPECT_TRUE(rx.r.terminated());
  // Whatever follows is drained quietly: no delegate call, no failure, whatever it carries.
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kSend, 0, 1)));
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kSend, 0, 7), pattern(3000, 1)));
  ASSERT_TRUE(rx.feed(tagged_header(RdmapOpcode::kRdmaWrite, 0xBAD, 0), pattern(100, 2)));
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 9),
                      testing::read_request_body(read_request(5))));
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kTerminate, 2, 2), body));
  wire::DdpHeader bad_version = untagged_header(RdmapOpcode::kSend, 0, 1);
  bad_version.ddp_version = 3;
  ASSERT_TRUE(rx.feed(bad_version, pattern(10, 3)));
  EXPECT_TRUE(rx.reader.direct_target().empty());
  EXPECT_TRUE(rx.d.receives.empty());
  EXPECT_TRUE(rx.d.sends.empty());
  EXPECT_TRUE(rx.d.writes.empty());
  EXPECT_TRUE(rx.d.read_requests.empty());
  EXPECT_EQ(rx.d.terminates.size(), 1u);
  EXPECT_TRUE(rx.reader.at_boundary());
}

TEST(proto_rdmap_receiver, SiwTerminateKeepsItsRawControlWord) {
  // siw-flavour-p2p-no-rtr: siw's LLP/0/0x07 with layer and etype swapped in the first byte.
  const Bytes siw = {0x00, 0x16, 0x41, 0x47, 0, 0, 0,    0,    0, 0, 0, 2, 0, 0,
                     0,    1,    0,    0,    0, 0, 0x02, 0x07, 0, 0, 0, 0, 0, 0};
  Rx rx(4, false);
  ASSERT_TRUE(rx.feed_raw(siw));
  ASSERT_EQ(rx.d.terminates.size(), 1u);
  EXPECT_EQ(rx.d.terminates[0].raw_control, 0x02070000u);
}

TEST(proto_rdmap_receiver, ShortTerminateStillEndsReception) {
  Rx rx;
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kTerminate, 2, 1), Bytes{0x20, 0x07}));
  ASSERT_EQ(rx.d.terminates.size(), 1u);
  EXPECT_FALSE(rx.d.terminate_has_control[0]);  // reported as such, not as control word 0
  EXPECT_TRUE(rx.r.terminated());
}

// One row of the Terminate table: an optional valid prefix, then the offending segment.
struct TableRow {
  const char* name;
  std::vector<std::pair<wire::DdpHeader, Bytes>> prefix;
  wire::DdpHeader bad;
  Bytes payload;
  wire::TerminateCode code;
};

wire::DdpHeader with_versions(wire::DdpHeader h, std::uint8_t ddp, std::uint8_t rdmap) {
  h.ddp_version = ddp;
  h.rdmap_version = rdmap;
  return h;
}
wire::DdpHeader op_on_queue(std::uint8_t opcode, std::uint32_t queue, std::uint32_t msn = 1) {
  wire::DdpHeader h = untagged_header(RdmapOpcode::kSend, queue, msn);
  h.opcode = opcode;
  return h;
}
wire::DdpHeader tagged_op(std::uint8_t opcode) {
  wire::DdpHeader h = tagged_header(RdmapOpcode::kRdmaWrite, 0x100, kWriteBase);
  h.opcode = opcode;
  return h;
}

std::vector<TableRow> terminate_table() {
  const Bytes rr = testing::read_request_body(read_request(16));
  const auto send = [](std::uint32_t msn, std::uint32_t mo = 0, bool last = true) {
    return untagged_header(RdmapOpcode::kSend, 0, msn, mo, last);
  };
  std::vector<TableRow> t = {
      {"ddp version 0 tagged",
       {},
       with_versions(tagged_header(RdmapOpcode::kRdmaWrite, 1, kWriteBase), 0, 1),
       pattern(4, 1),
       term::kDdpTaggedBadVersion},
      {"ddp version 2 tagged",
       {},
       with_versions(tagged_header(RdmapOpcode::kReadResponse, 1, kSinkBase), 2, 1),
       pattern(4, 1),
       term::kDdpTaggedBadVersion},
      {"ddp version 0 untagged",
       {},
       with_versions(send(1), 0, 1),
       pattern(4, 1),
       term::kDdpUntaggedBadVersion},
      {"ddp version 3 untagged",
       {},
       with_versions(untagged_header(RdmapOpcode::kReadRequest, 1, 1), 3, 1),
       rr,
       term::kDdpUntaggedBadVersion},
      {"rdmap version 0 untagged",
       {},
       with_versions(send(1), 1, 0),
       pattern(4, 1),
       term::kRdmapBadVersion},
      {"rdmap version 2 tagged",
       {},
       with_versions(tagged_header(RdmapOpcode::kRdmaWrite, 1, kWriteBase), 1, 2),
       pattern(4, 1),
       term::kRdmapBadVersion},
      {"rdmap version 3 terminate",
       {},
       with_versions(untagged_header(RdmapOpcode::kTerminate, 2, 1), 1, 3),
       Bytes{0, 0, 0, 0},
       term::kRdmapBadVersion},
      {"tagged send", {}, tagged_op(0x3), pattern(4, 1), term::kRdmapUnexpectedOpcode},
      {"tagged read request", {}, tagged_op(0x1), rr, term::kRdmapUnexpectedOpcode},
      {"tagged terminate", {}, tagged_op(0x7), Bytes{0, 0, 0, 0}, term::kRdmapUnexpectedOpcode},
      {"tagged immediate data", {}, tagged_op(0x8), pattern(8, 1), term::kRdmapUnexpectedOpcode},
      {"tagged atomic request", {}, tagged_op(0xA), pattern(8, 1), term::kRdmapUnexpectedOpcode},
      {"tagged opcode 0xF", {}, tagged_op(0xF), pattern(8, 1), term::kRdmapUnexpectedOpcode},
      {"untagged write", {}, op_on_queue(0x0, 0), pattern(8, 1), term::kRdmapUnexpectedOpcode},
      {"untagged read response",
       {},
       op_on_queue(0x2, 0),
       pattern(8, 1),
       term::kRdmapUnexpectedOpcode},
      {"read request on queue 0", {}, op_on_queue(0x1, 0), rr, term::kRdmapUnexpectedOpcode},
      {"terminate on queue 0",
       {},
       op_on_queue(0x7, 0),
       Bytes{0, 0, 0, 0},
       term::kRdmapUnexpectedOpcode},
      {"send on queue 1", {}, op_on_queue(0x3, 1), rr, term::kRdmapUnexpectedOpcode},
      {"send on queue 2", {}, op_on_queue(0x3, 2), Bytes{0, 0, 0, 0}, term::kRdmapUnexpectedOpcode},
      {"rfc7306 immediate data too long",
       {},
       op_on_queue(0x8, 0),
       pattern(9, 1),
       term::kDdpUntaggedTooLong},
      {"rfc7306 immediate data se too short",
       {},
       op_on_queue(0x9, 0),
       pattern(7, 1),
       term::kRdmapUnspecified},
      {"rfc7306 immediate data on queue 2",
       {},
       op_on_queue(0x8, 2),
       pattern(8, 1),
       term::kRdmapUnexpectedOpcode},
      {"rfc7306 immediate data on queue 3",
       {},
       op_on_queue(0x8, 3),
       pattern(8, 1),
       term::kRdmapUnexpectedOpcode},
      {"rfc7306 atomic request on the response queue 3",
       {},
       op_on_queue(0xA, 3),
       pattern(52, 1),
       term::kRdmapUnexpectedOpcode},
      {"rfc7306 atomic response on the request queue 1",
       {},
       op_on_queue(0xB, 1),
       pattern(12, 1),
       term::kRdmapUnexpectedOpcode},
      {"rfc7306 atomic response on queue 4",
       {},
       op_on_queue(0xB, 4),
       pattern(12, 1),
       term::kDdpUntaggedInvalidQn},
      {"rfc7306 atomic request too long", {}, op_on_queue(0xA, 1), pattern(53, 1), term::kDdpUntaggedTooLong},
      {"rfc7306 atomic request too short", {}, op_on_queue(0xA, 1), pattern(51, 1), term::kRdmapUnspecified},
      {"rfc7306 atomic response too short", {}, op_on_queue(0xB, 3), pattern(11, 1), term::kRdmapUnspecified},
      {"rfc7306 atomic request msn 2 first",
       {},
       untagged_header(RdmapOpcode::kAtomicRequest, 1, 2),
       pattern(52, 1),
       term::kDdpUntaggedInvalidMsn},
      {"rfc7306 atomic response msn 2 first",
       {},
       untagged_header(RdmapOpcode::kAtomicResponse, 3, 2),
       pattern(12, 1),
       term::kDdpUntaggedInvalidMsn},
      {"reserved opcode 0xC", {}, op_on_queue(0xC, 0), pattern(8, 1), term::kRdmapUnexpectedOpcode},
      {"reserved opcode 0xF", {}, op_on_queue(0xF, 0), pattern(8, 1), term::kRdmapUnexpectedOpcode},
      {"send on queue 3", {}, op_on_queue(0x3, 3), pattern(8, 1), term::kRdmapUnexpectedOpcode},
      {"send on queue 4", {}, op_on_queue(0x3, 4), pattern(8, 1), term::kDdpUntaggedInvalidQn},
      {"atomic response on queue 5", {}, op_on_queue(0xB, 5), pattern(12, 1), term::kDdpUntaggedInvalidQn},
      {"read request on queue 0xffffffff",
       {},
       op_on_queue(0x1, 0xFFFFFFFF),
       rr,
       term::kDdpUntaggedInvalidQn},
      {"send msn 2 first", {}, send(2), pattern(8, 1), term::kDdpUntaggedInvalidMsn},
      {"send msn 0", {}, send(0), pattern(8, 1), term::kDdpUntaggedInvalidMsn},
      {"send msn repeated",
       {{send(1), pattern(3, 1)}},
       send(1),
       pattern(8, 1),
       term::kDdpUntaggedInvalidMsn},
      {"send msn changes mid-message",
       {{send(1, 0, false), pattern(3, 1)}},
       send(2, 3),
       pattern(8, 1),
       term::kDdpUntaggedInvalidMsn},
      {"read request msn 2 first",
       {},
       untagged_header(RdmapOpcode::kReadRequest, 1, 2),
       rr,
       term::kDdpUntaggedInvalidMsn},
      {"terminate msn 3",
       {},
       untagged_header(RdmapOpcode::kTerminate, 2, 3),
       Bytes{0, 0, 0, 0},
       term::kDdpUntaggedInvalidMsn},
      {"send first segment mo 1", {}, send(1, 1), pattern(8, 1), term::kDdpUntaggedInvalidMo},
      {"send second segment mo gap",
       {{send(1, 0, false), pattern(10, 1)}},
       send(1, 11),
       pattern(8, 1),
       term::kDdpUntaggedInvalidMo},
      {"send second segment mo overlap",
       {{send(1, 0, false), pattern(10, 1)}},
       send(1, 9),
       pattern(8, 1),
       term::kDdpUntaggedInvalidMo},
      {"read request mo 4",
       {},
       untagged_header(RdmapOpcode::kReadRequest, 1, 1, 4),
       rr,
       term::kDdpUntaggedInvalidMo},
      {"terminate mo 1",
       {},
       untagged_header(RdmapOpcode::kTerminate, 2, 1, 1),
       Bytes{0, 0, 0, 0},
       term::kDdpUntaggedInvalidMo},
      {"read request not last",
       {},
       untagged_header(RdmapOpcode::kReadRequest, 1, 1, 0, false),
       rr,
       term::kDdpUntaggedTooLong},
      {"read request too long",
       {},
       untagged_header(RdmapOpcode::kReadRequest, 1, 1),
       pattern(29, 1),
       term::kDdpUntaggedTooLong},
      {"read request too short",
       {},
       untagged_header(RdmapOpcode::kReadRequest, 1, 1),
       pattern(27, 1),
       term::kRdmapUnspecified},
  };
  return t;
}

TEST(proto_rdmap_receiver, TerminateTable) {
  for (const TableRow& row : terminate_table()) {
    SCOPED_TRACE(row.name);
    Rx rx;
    for (const auto& [h, payload] : row.prefix) ASSERT_TRUE(rx.feed(h, payload));
    EXPECT_FALSE(rx.feed(row.bad, row.payload));
    EXPECT_EQ(rx.code(), row.code);
    expect_failure_header(rx, row.bad, row.payload.size());
    EXPECT_TRUE(rx.d.read_requests.empty());
    EXPECT_TRUE(rx.d.terminates.empty());
  }
}

TEST(proto_rdmap_receiver, ReadRequestBeyondIrd) {
  Rx rx(2);
  const Bytes rr1 = testing::read_request_body(read_request(10, 1));
  const Bytes rr2 = testing::read_request_body(read_request(20, 2));
  const Bytes rr3 = testing::read_request_body(read_request(30, 3));
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 1), rr1));
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 2), rr2));
  const wire::DdpHeader third = untagged_header(RdmapOpcode::kReadRequest, 1, 3);
  EXPECT_FALSE(rx.feed(third, rr3));
  EXPECT_EQ(rx.code(), term::kRdmapCatastrophicStream);
  expect_failure_header(rx, third, 28);
  ASSERT_TRUE(rx.reader.failure()->have_rdmap_header);
  const auto& rh = rx.reader.failure()->rdmap_header;
  EXPECT_EQ(Bytes(rh.begin(), rh.end()), rr3);
  EXPECT_EQ(rx.d.read_requests.size(), 2u);  // the third never reached the delegate
}

TEST(proto_rdmap_receiver, SentReadResponsesFreeIrdSlots) {
  Rx rx(1);
  const Bytes rr = testing::read_request_body(read_request(10));
  for (std::uint32_t msn = 1; msn <= 5; ++msn) {
    ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, msn), rr)) << msn;
    rx.r.read_response_sent();
  }
  EXPECT_EQ(rx.d.read_requests.size(), 5u);
  // Extra "sent" notices do not create credit.
  rx.r.read_response_sent();
  rx.r.read_response_sent();
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 6), rr));
  EXPECT_FALSE(rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 7), rr));
  EXPECT_EQ(rx.code(), term::kRdmapCatastrophicStream);
}

TEST(proto_rdmap_receiver, IrdZeroRefusesEveryReadRequest) {
  Rx rx(0);
  EXPECT_FALSE(rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 1),
                       testing::read_request_body(read_request(1))));
  EXPECT_EQ(rx.code(), term::kRdmapCatastrophicStream);
}

TEST(proto_rdmap_receiver, ZeroLengthWriteRtr) {
  Rx rx;
  rx.r.expect_rtr(RtrType::kWrite);
  ASSERT_TRUE(rx.feed(tagged_header(RdmapOpcode::kRdmaWrite, kRtrStag, 0)));
  EXPECT_EQ(rx.d.rtrs, 1);
  EXPECT_TRUE(rx.d.writes.empty());
  // The RTR consumed no MSN: the first Send is MSN 1.
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kSend, 0, 1), pattern(4, 1)));
  ASSERT_TRUE(rx.feed(tagged_header(RdmapOpcode::kRdmaWrite, kRtrStag, 0)));  // an ordinary one now
  EXPECT_EQ(rx.d.rtrs, 1);
}

TEST(proto_rdmap_receiver, ZeroLengthReadRtr) {
  Rx rx;
  rx.r.expect_rtr(RtrType::kRead);
  wire::ReadRequest rr;
  rr.source_stag = kRtrStag;
  ASSERT_TRUE(
      rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 1), testing::read_request_body(rr)));
  EXPECT_EQ(rx.d.rtrs, 1);
  // It is answered like any Read: handed over, with size 0.
  ASSERT_EQ(rx.d.read_requests.size(), 1u);
  EXPECT_EQ(rx.d.read_requests[0].size, 0u);
  EXPECT_EQ(rx.d.read_requests[0].source_stag, kRtrStag);
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 2),
                      testing::read_request_body(read_request(8))));
  EXPECT_EQ(rx.d.read_requests.size(), 2u);
  EXPECT_EQ(rx.d.rtrs, 1);
}

TEST(proto_rdmap_receiver, ReadRtrDoesNotCountAgainstIrd) {
  Rx rx(0);  // no inbound Reads at all, yet the RTR Read is accepted
  rx.r.expect_rtr(RtrType::kRead);
  wire::ReadRequest rr;
  rr.source_stag = kRtrStag;
  ASSERT_TRUE(
      rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 1), testing::read_request_body(rr)));
  EXPECT_EQ(rx.d.rtrs, 1);
  EXPECT_EQ(rx.d.read_requests.size(), 1u);
}

// The RTR Read's response is sent first and frees no IRD slot, since the RTR held none: with
// IRD 1, a Read Request taken before that response still holds the only slot afterwards.
TEST(proto_rdmap_receiver, TheRtrReadResponseFreesNoIrdSlot) {
  Rx rx(1);
  rx.r.expect_rtr(RtrType::kRead);
  wire::ReadRequest rtr;
  rtr.source_stag = kRtrStag;
  ASSERT_TRUE(
      rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 1), testing::read_request_body(rtr)));
  const Bytes rr = testing::read_request_body(read_request(8));
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 2), rr));
  rx.r.read_response_sent();  // the RTR Read's empty response
  EXPECT_FALSE(rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 3), rr))
      << "two Reads outstanding with IRD 1";
  EXPECT_EQ(rx.code(), term::kRdmapCatastrophicStream);
  EXPECT_EQ(rx.d.read_requests.size(), 2u);  // the RTR Read and the first real one
}

TEST(proto_rdmap_receiver, AfterTheRtrReadEachResponseFreesItsSlot) {
  Rx rx(1);
  rx.r.expect_rtr(RtrType::kRead);
  wire::ReadRequest rtr;
  rtr.source_stag = kRtrStag;
  ASSERT_TRUE(
      rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 1), testing::read_request_body(rtr)));
  rx.r.read_response_sent();  // the RTR Read's
  const Bytes rr = testing::read_request_body(read_request(8));
  for (std::uint32_t msn = 2; msn <= 4; ++msn) {
    ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, msn), rr)) << msn;
    rx.r.read_response_sent();
  }
}

TEST(proto_rdmap_receiver, ReadRtrMustAskForZeroBytes) {
  Rx rx;
  rx.r.expect_rtr(RtrType::kRead);
  EXPECT_FALSE(rx.feed(untagged_header(RdmapOpcode::kReadRequest, 1, 1),
                       testing::read_request_body(read_request(8))));
  EXPECT_EQ(rx.code(), term::kLlpNoMatchingRtr);
  EXPECT_EQ(rx.d.rtrs, 0);
  EXPECT_TRUE(rx.d.read_requests.empty());
}

TEST(proto_rdmap_receiver, ZeroLengthSendRtr) {
  Rx rx;
  rx.r.expect_rtr(RtrType::kSend);
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kSend, 0, 1)));
  EXPECT_EQ(rx.d.rtrs, 1);
  EXPECT_TRUE(rx.d.receives.empty());  // the RTR claims no receive buffer
  EXPECT_TRUE(rx.d.sends.empty());
  // It used MSN 1: the first real Send is MSN 2.
  ASSERT_TRUE(rx.feed(untagged_header(RdmapOpcode::kSend, 0, 2), pattern(6, 1)));
  ASSERT_EQ(rx.d.sends.size(), 1u);
  EXPECT_EQ(rx.d.sends[0].msn, wire::Msn{2});
}

TEST(proto_rdmap_receiver, SomethingElseWhereTheRtrBelongs) {
  struct Case {
    const char* name;
    RtrType expected;
    wire::DdpHeader h;
    Bytes payload;
  };
  wire::ReadRequest zero;
  zero.source_stag = kRtrStag;
  const Bytes zero_rr = testing::read_request_body(zero);
  const Case cases[] = {
      {"send instead of write", RtrType::kWrite, untagged_header(RdmapOpcode::kSend, 0, 1),
       pattern(4, 1)},
      {"zero-length send instead of write",
       RtrType::kWrite,
       untagged_header(RdmapOpcode::kSend, 0, 1),
       {}},
      {"non-empty write", RtrType::kWrite, tagged_header(RdmapOpcode::kRdmaWrite, kRtrStag, 0),
       pattern(1, 1)},
      {"write not last",
       RtrType::kWrite,
       tagged_header(RdmapOpcode::kRdmaWrite, kRtrStag, 0, false),
       {}},
      {"read request instead of write", RtrType::kWrite,
       untagged_header(RdmapOpcode::kReadRequest, 1, 1), zero_rr},
      {"read response instead of write",
       RtrType::kWrite,
       tagged_header(RdmapOpcode::kReadResponse, 0, 0),
       {}},
      {"write instead of send",
       RtrType::kSend,
       tagged_header(RdmapOpcode::kRdmaWrite, kRtrStag, 0),
       {}},
      {"non-empty send", RtrType::kSend, untagged_header(RdmapOpcode::kSend, 0, 1), pattern(1, 1)},
      {"send with msn 2", RtrType::kSend, untagged_header(RdmapOpcode::kSend, 0, 2), {}},
      {"send with se", RtrType::kSend, untagged_header(RdmapOpcode::kSendSe, 0, 1), {}},
      {"write instead of read",
       RtrType::kRead,
       tagged_header(RdmapOpcode::kRdmaWrite, kRtrStag, 0),
       {}},
      {"send instead of read", RtrType::kRead, untagged_header(RdmapOpcode::kSend, 0, 1), {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Rx rx;
    rx.r.expect_rtr(c.expected);
    EXPECT_FALSE(rx.feed(c.h, c.payload));
    EXPECT_EQ(rx.code(), term::kLlpNoMatchingRtr);
    expect_failure_header(rx, c.h, c.payload.size());
    EXPECT_EQ(rx.d.rtrs, 0);
    EXPECT_TRUE(rx.d.writes.empty());
    EXPECT_TRUE(rx.d.receives.empty());
  }
}

TEST(proto_rdmap_receiver, DelegateRefusalsBecomeTheTerminate) {
  {
    Rx rx;
    rx.d.fail_write = term::kDdpTaggedBaseBounds;
    const wire::DdpHeader h = tagged_header(RdmapOpcode::kRdmaWrite, 9, kWriteBase);
    EXPECT_FALSE(rx.feed(h, pattern(64, 1)));
    EXPECT_EQ(rx.code(), term::kDdpTaggedBaseBounds);
    expect_failure_header(rx, h, 64);
  }
  {
    Rx rx;
    rx.d.fail_read_response = term::kDdpTaggedInvalidStag;
    EXPECT_FALSE(rx.feed(tagged_header(RdmapOpcode::kReadResponse, 9, kSinkBase), pattern(64, 1)));
    EXPECT_EQ(rx.code(), term::kDdpTaggedInvalidStag);
  }
  {
    Rx rx;
    rx.d.fail_read_response_complete = term::kDdpTaggedBaseBounds;
    EXPECT_FALSE(rx.feed(tagged_header(RdmapOpcode::kReadResponse, 9, kSinkBase), pattern(64, 1)));
    EXPECT_EQ(rx.code(), term::kDdpTaggedBaseBounds);
  }
  {
    Rx rx;
    rx.d.fail_receive = term::kDdpUntaggedNoBuffer;
    const wire::DdpHeader h = untagged_header(RdmapOpcode::kSend, 0, 1);
    EXPECT_FALSE(rx.feed(h, pattern(64, 1)));
    EXPECT_EQ(rx.code(), term::kDdpUntaggedNoBuffer);
    expect_failure_header(rx, h, 64);
    EXPECT_TRUE(rx.d.sends.empty());
  }
  {
    Rx rx;
    rx.d.fail_receive_complete = term::kRdmapCannotInvalidateProtection;
    EXPECT_FALSE(rx.feed(untagged_header(RdmapOpcode::kSendInvalidate, 0, 1), pattern(64, 1)));
    EXPECT_EQ(rx.code(), term::kRdmapCannotInvalidateProtection);
  }
  {
    Rx rx;
    rx.d.fail_read_request = term::kRdmapAccessRights;
    const Bytes body = testing::read_request_body(read_request(64));
    const wire::DdpHeader h = untagged_header(RdmapOpcode::kReadRequest, 1, 1);
    EXPECT_FALSE(rx.feed(h, body));
    EXPECT_EQ(rx.code(), term::kRdmapAccessRights);
    expect_failure_header(rx, h, 28);
    ASSERT_TRUE(rx.reader.failure()->have_rdmap_header);
    const auto& rh = rx.reader.failure()->rdmap_header;
    EXPECT_EQ(Bytes(rh.begin(), rh.end()), body);
  }
}

TEST(proto_rdmap_receiver, CorruptedSegmentIsNeverHandedOver) {
  // With CRC on, a Send whose CRC is wrong must not complete a receive.
  Rx rx;
  Bytes f = fpdu(untagged_header(RdmapOpcode::kSend, 0, 1), pattern(20, 1), true);
  f[25] ^= 0x80;
  EXPECT_FALSE(rx.feed_raw(f));
  EXPECT_EQ(rx.code(), term::kLlpBadCrc);
  EXPECT_TRUE(rx.d.sends.empty());
}

}  // namespace
}  // namespace uwarp::proto
