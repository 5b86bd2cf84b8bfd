// verbs::SendQueue alone, with real protection checks and CQs but no engine: the checks of a
// posted request, what the engine is handed to send, completions in posting order whatever order
// the requests finish in, the flush of an error, and inline data that outlives its request.
#include "verbs/send_queue.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "verbs/verbs_test_util.h"

namespace uwarp::verbs {
namespace {

using testing::Buffer;
using testing::poll_all;
using testing::wr_ids;
using Kind = proto::OutboundRequest::Kind;

QpCaps small_caps() {
  QpCaps caps;
  caps.max_send_wr = 4;
  caps.max_send_sge = 3;
  return caps;
}

class SendQueueTest : public ::testing::Test {
 protected:
  SendQueueTest() {
    device_.set_async_sink(&events_);
    buf_ = testing::register_buffer(device_.stags(), &pd_, 4096, access::kLocalWrite);
  }

  SendWr wr(std::uint64_t id, WrOpcode opcode, const std::vector<Sge>& sges,
            std::uint32_t flags = send_flags::kSignaled) {
    sges_.push_back(sges);
    SendWr w;
    w.wr_id = id;
    w.opcode = opcode;
    w.sg_list = sges_.back();
    w.flags = flags;
    return w;
  }
  Status post(std::uint64_t id, WrOpcode opcode = WrOpcode::kSend,
              std::uint32_t flags = send_flags::kSignaled) {
    return sq_.post(wr(id, opcode, {buf_.sge(0, 64)}, flags), true);
  }
  // Starts the next request; its seq (0 if it failed).
  std::uint64_t start() {
    proto::OutboundRequest r;
    EXPECT_TRUE(sq_.peek(r));
    payload_.clear();
    return sq_.start(r, payload_, revoked_) ? r.seq : 0;
  }

  MemoryRegionRef revoked_;  // what a local operation took away
  Device device_;
  ProtectionDomain pd_{1};
  CompletionQueue cq_{64, nullptr, nullptr};
  testing::EventLog events_;
  QpCaps caps_ = small_caps();
  QpReporter reporter_{device_, 7, nullptr, &cq_, &cq_};
  MemoryProtection protection_{device_.stags(), &pd_};
  SendQueue sq_{caps_, device_.limits(), false, protection_, reporter_};
  Buffer buf_;
  std::deque<std::vector<Sge>> sges_;
  std::vector<ConstByteSpan> payload_;
};

TEST_F(SendQueueTest, EachLimitRefusesARequestAndLeavesTheQueueAsItWas) {
  const Sge s = buf_.sge(0, 8);
  const Status too_many_sges = sq_.post(wr(1, WrOpcode::kSend, {s, s, s, s}), true);
  EXPECT_EQ(too_many_sges.code(), Errc::kInvalidArgument);
  const Status read_at_ord_0 = sq_.post(wr(2, WrOpcode::kRdmaRead, {s}), false);
  EXPECT_EQ(read_at_ord_0.code(), Errc::kInvalidArgument);
  Sge huge = s;
  huge.length = device_.limits().max_msg_size;
  EXPECT_EQ(sq_.post(wr(3, WrOpcode::kSend, {huge, s}), true).code(), Errc::kInvalidArgument)
      << "longer than max_msg_size";
  Sge long_inline = s;
  long_inline.length = device_.limits().max_inline_data + 1;
  EXPECT_EQ(sq_.post(wr(4, WrOpcode::kSend, {long_inline}, send_flags::kInline), true).code(),
            Errc::kInvalidArgument);
  EXPECT_TRUE(sq_.empty());

  EXPECT_TRUE(sq_.post(wr(5, WrOpcode::kSend, {s, s, s, s}, send_flags::kInline), true).is_ok())
      << "inline data is not limited by max_send_sge";
  EXPECT_TRUE(sq_.post(wr(6, WrOpcode::kRdmaWrite, {s}), false).is_ok())
      << "ORD 0 refuses only Reads";
  for (std::uint64_t id = 7; id < 9; ++id) EXPECT_TRUE(post(id).is_ok());
  EXPECT_EQ(post(9).code(), Errc::kNoResources) << "max_send_wr is 4";
  EXPECT_EQ(sq_.size(), 4u);
}

TEST_F(SendQueueTest, TheEngineIsHandedRequestsInPostingOrderWithKindAndFence) {
  ASSERT_TRUE(post(1, WrOpcode::kSend).is_ok());
  ASSERT_TRUE(post(2, WrOpcode::kRdmaWrite, send_flags::kFence).is_ok());
  ASSERT_TRUE(post(3, WrOpcode::kRdmaRead).is_ok());
  ASSERT_TRUE(post(4, WrOpcode::kSendWithInvalidate).is_ok());
  const Kind kinds[] = {Kind::kSend, Kind::kWrite, Kind::kRead, Kind::kSendInvalidate};
  std::uint64_t last_seq = 0;
  for (int i = 0; i < 4; ++i) {
    proto::OutboundRequest r;
    ASSERT_TRUE(sq_.peek(r));
    EXPECT_GT(r.seq, last_seq);
    last_seq = r.seq;
    EXPECT_EQ(r.kind, kinds[i]);
    EXPECT_EQ(r.fence, i == 1);
    proto::OutboundRequest again;
    ASSERT_TRUE(sq_.peek(again));
    EXPECT_EQ(again.seq, r.seq) << "peeking does not start";
    EXPECT_EQ(start(), r.seq);
  }
  proto::OutboundRequest none;
  EXPECT_FALSE(sq_.peek(none));
}

TEST_F(SendQueueTest, StartHandsOverTheRegisteredBytesOrARead_sSink) {
  SendWr w = wr(1, WrOpcode::kRdmaWrite, {buf_.sge(16, 8), buf_.sge(100, 0), buf_.sge(40, 4)});
  w.remote_addr = 0x1234;
  w.rkey = 0xABCD;
  ASSERT_TRUE(sq_.post(w, true).is_ok());
  proto::OutboundRequest r;
  ASSERT_TRUE(sq_.peek(r));
  ASSERT_TRUE(sq_.start(r, payload_, revoked_));
  ASSERT_EQ(payload_.size(), 2u) << "a zero-length SGE adds nothing";
  EXPECT_EQ(payload_[0].data(), buf_.bytes.data() + 16);
  EXPECT_EQ(payload_[0].size(), 8u);
  EXPECT_EQ(payload_[1].data(), buf_.bytes.data() + 40);
  EXPECT_EQ(r.length, 12u);
  EXPECT_EQ(r.remote_offset, wire::TaggedOffset{0x1234});
  EXPECT_EQ(r.remote_stag, wire::Stag{0xABCD});

  ASSERT_TRUE(
      sq_.post(wr(2, WrOpcode::kRdmaRead, {buf_.sge(200, 10), buf_.sge(300, 6)}), true).is_ok());
  const std::uint64_t read = start();
  ASSERT_NE(read, 0u);
  EXPECT_TRUE(payload_.empty()) << "a Read sends no payload";
  const std::vector<ByteSpan>* sink = sq_.read_sink(read);
  ASSERT_NE(sink, nullptr);
  ASSERT_EQ(sink->size(), 2u);
  EXPECT_EQ((*sink)[1].data(), buf_.bytes.data() + 300);
  EXPECT_EQ(sq_.read_sink(read + 1), nullptr);
}

// RFC 7306: a Write with Immediate is handed to the engine with its value in the first four of
// the eight bytes; without data it is the Immediate Data message alone. Both complete as Writes.
TEST_F(SendQueueTest, AWriteWithImmediateCarriesItsValueAndCompletesAsAWrite) {
  SendWr w = wr(1, WrOpcode::kRdmaWriteWithImm, {buf_.sge(0, 64)});
  w.imm_data = 0x01020304;
  ASSERT_TRUE(sq_.post(w, true).is_ok());
  SendWr empty = wr(2, WrOpcode::kRdmaWriteWithImm, {});
  empty.imm_data = 5;
  ASSERT_TRUE(sq_.post(empty, true).is_ok());
  proto::OutboundRequest r;
  ASSERT_TRUE(sq_.peek(r));
  EXPECT_EQ(r.kind, proto::OutboundRequest::Kind::kWriteImmediate);
  ASSERT_TRUE(sq_.start(r, payload_, revoked_));
  EXPECT_EQ(r.immediate, 0x0102030400000000u);
  EXPECT_EQ(r.length, 64u);
  ASSERT_EQ(payload_.size(), 1u);
  ASSERT_TRUE(sq_.peek(r));
  EXPECT_EQ(r.kind, proto::OutboundRequest::Kind::kImmediate);
  payload_.clear();
  ASSERT_TRUE(sq_.start(r, payload_, revoked_));
  EXPECT_EQ(r.immediate, 0x0000000500000000u);
  EXPECT_TRUE(payload_.empty());
  sq_.sent(1);
  sq_.sent(2);
  WorkCompletion wc[2];
  ASSERT_EQ(cq_.poll(wc), 2u);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(wc[1].opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
}

TEST_F(SendQueueTest, ARead_sSinkIsAdvertisedAsItsFirstSge) {
  ASSERT_TRUE(sq_.post(wr(1, WrOpcode::kRdmaRead, {buf_.sge(200, 10)}), true).is_ok());
  proto::OutboundRequest r;
  ASSERT_TRUE(sq_.peek(r));
  ASSERT_TRUE(sq_.start(r, payload_, revoked_));
  EXPECT_EQ(r.sink_stag, buf_.stag());
  EXPECT_EQ(r.sink_offset, buf_.to(200));
  EXPECT_EQ(r.length, 10u);
}

TEST_F(SendQueueTest, CompletionsAreReportedInPostingOrderWhateverOrderRequestsFinishIn) {
  for (std::uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(post(id).is_ok());
  const std::uint64_t a = start();
  const std::uint64_t b = start();
  const std::uint64_t c = start();
  sq_.sent(c);
  sq_.sent(b);
  EXPECT_TRUE(poll_all(cq_).empty()) << "the oldest has not been sent";
  EXPECT_EQ(sq_.size(), 3u);
  sq_.sent(a);
  const auto wcs = poll_all(cq_);
  EXPECT_EQ(wr_ids(wcs), (std::vector<std::uint64_t>{1, 2, 3}));
  for (const WorkCompletion& wc : wcs) {
    EXPECT_EQ(wc.status, WcStatus::kSuccess);
    EXPECT_EQ(wc.opcode, WcOpcode::kSend);
    EXPECT_EQ(wc.qp_num, 7u);
  }
  EXPECT_TRUE(sq_.empty());
  sq_.sent(a);
  EXPECT_TRUE(poll_all(cq_).empty()) << "a seq no longer queued is ignored";
}

TEST_F(SendQueueTest, AReadCompletesWhenItsResponseHasArrivedNotWhenItsRequestIsSent) {
  ASSERT_TRUE(post(1, WrOpcode::kRdmaRead).is_ok());
  ASSERT_TRUE(post(2, WrOpcode::kRdmaWrite).is_ok());
  const std::uint64_t read = start();
  const std::uint64_t write = start();
  sq_.sent(read);
  sq_.sent(write);
  EXPECT_TRUE(poll_all(cq_).empty()) << "the Read awaits its response; the Write waits for it";
  sq_.read_complete(read);
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wr_ids(wcs), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(wcs[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(wcs[0].byte_len, 64u);
  EXPECT_EQ(wcs[1].opcode, WcOpcode::kRdmaWrite);
}

// The posting thread counts its send only once it has the QP lock back, so the progress thread
// may place the answer first: a Read and an atomic answered before sent() complete then, with
// their results, and the later sent() changes nothing.
TEST_F(SendQueueTest, AnAnswerThatComesBeforeItsRequestIsCountedSentCompletesIt) {
  const Buffer word = testing::register_buffer(device_.stags(), &pd_, 8, access::kLocalWrite);
  ASSERT_TRUE(post(1, WrOpcode::kRdmaRead).is_ok());
  ASSERT_TRUE(sq_.post(wr(2, WrOpcode::kAtomicFetchAdd, {word.sge(0, 8)}), true).is_ok());
  const std::uint64_t read = start();
  const std::uint64_t atomic = start();
  ASSERT_NE(atomic, 0u);
  sq_.read_complete(read);
  EXPECT_TRUE(sq_.atomic_complete(atomic, 0x1122334455667788u));
  sq_.sent(read);
  sq_.sent(atomic);
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wr_ids(wcs), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess) << to_string(wcs[1].status);
  EXPECT_EQ(wcs[1].opcode, WcOpcode::kAtomicFetchAdd);
  std::uint64_t value;
  std::memcpy(&value, word.bytes.data(), sizeof value);
  EXPECT_EQ(value, 0x1122334455667788u);
  EXPECT_TRUE(sq_.empty());
}

TEST_F(SendQueueTest, UnsignaledSuccessesCompleteSilentlyUnlessTheQueueSignalsAll) {
  ASSERT_TRUE(post(1, WrOpcode::kSend, 0).is_ok());
  ASSERT_TRUE(post(2).is_ok());
  sq_.sent(start());
  sq_.sent(start());
  EXPECT_EQ(wr_ids(poll_all(cq_)), (std::vector<std::uint64_t>{2}));

  SendQueue all(caps_, device_.limits(), true, protection_, reporter_);
  ASSERT_TRUE(all.post(wr(3, WrOpcode::kSend, {buf_.sge(0, 4)}, 0), true).is_ok());
  proto::OutboundRequest r;
  ASSERT_TRUE(all.peek(r));
  ASSERT_TRUE(all.start(r, payload_, revoked_));
  all.sent(r.seq);
  EXPECT_EQ(wr_ids(poll_all(cq_)), (std::vector<std::uint64_t>{3}));
}

TEST_F(SendQueueTest, AFlushGivesTheOldestStartedRequestTheErrorAndFlushesTheRest) {
  for (std::uint64_t id = 1; id <= 4; ++id) ASSERT_TRUE(post(id, WrOpcode::kSend, 0).is_ok());
  sq_.sent(start());  // 1: complete (unsignaled)
  start();            // 2: in flight
  start();            // 3: in flight
  sq_.flush(WcStatus::kRemoteAccessError, 0x11000000);
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wr_ids(wcs), (std::vector<std::uint64_t>{2, 3, 4})) << "errors are always reported";
  EXPECT_EQ(wcs[0].status, WcStatus::kRemoteAccessError);
  EXPECT_EQ(wcs[0].vendor_err, 0x11000000u);
  EXPECT_EQ(wcs[1].status, WcStatus::kWrFlushError);
  EXPECT_EQ(wcs[1].vendor_err, 0u);
  EXPECT_EQ(wcs[2].status, WcStatus::kWrFlushError);
  EXPECT_TRUE(sq_.empty());
}

TEST_F(SendQueueTest, AFlushBlamesNoRequestThatHadNotStarted) {
  ASSERT_TRUE(post(1).is_ok());
  ASSERT_TRUE(post(2).is_ok());
  sq_.sent(start());
  ASSERT_EQ(poll_all(cq_).size(), 1u);
  sq_.flush(WcStatus::kRemoteAccessError, 5);
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kWrFlushError) << "queued, never sent";
}

TEST_F(SendQueueTest, ARequestWhoseMemoryFailsItsCheckCompletesWithALocalProtectionError) {
  ASSERT_TRUE(
      sq_.post(wr(1, WrOpcode::kSend, {Sge{buf_.addr(), 8, buf_.mr->stag ^ 0xFF}}), true).is_ok());
  ASSERT_TRUE(post(2).is_ok());
  EXPECT_EQ(start(), 0u) << "an STag of no region";
  proto::OutboundRequest next;
  ASSERT_TRUE(sq_.peek(next));
  EXPECT_EQ(next.seq, 2u) << "the failed request is no longer next";
  sq_.flush(std::nullopt, 0);
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wr_ids(wcs), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(wcs[0].status, WcStatus::kLocalProtectionError);
  EXPECT_EQ(wcs[1].status, WcStatus::kWrFlushError);
}

TEST_F(SendQueueTest, AReadIntoMemoryWithoutLocalWriteFailsItsCheck) {
  Buffer read_only = testing::register_buffer(device_.stags(), &pd_, 64, 0);
  ASSERT_TRUE(sq_.post(wr(1, WrOpcode::kRdmaRead, {read_only.sge(0, 8)}), true).is_ok());
  ASSERT_TRUE(sq_.post(wr(2, WrOpcode::kSend, {read_only.sge(0, 8)}), true).is_ok());
  EXPECT_EQ(start(), 0u);
  EXPECT_NE(start(), 0u) << "a Send reads local memory, which every region allows";
}

TEST_F(SendQueueTest, APostToAQpInErrorCompletesAtOnceAsFlushed) {
  ASSERT_TRUE(post(1, WrOpcode::kSend, 0).is_ok());
  sq_.flush_last();
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wr_ids(wcs), (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(wcs[0].status, WcStatus::kWrFlushError);
  EXPECT_TRUE(sq_.empty());
}

TEST_F(SendQueueTest, InlineDataIsCopiedAtPostAndOutlivesARequestFlushedInFlight) {
  std::uint8_t app[6] = {'a', 'b', 'c', 'd', 'e', 'f'};
  const Sge part1{reinterpret_cast<std::uint64_t>(app), 3, 0};
  const Sge part2{reinterpret_cast<std::uint64_t>(app + 3), 3, 0};
  ASSERT_TRUE(sq_.post(wr(1, WrOpcode::kSend, {part1, part2}, send_flags::kInline), true).is_ok());
  std::memset(app, 'x', sizeof app);  // the application reuses its buffer at once
  ASSERT_NE(start(), 0u);
  ASSERT_EQ(payload_.size(), 1u);
  const ConstByteSpan in_flight = payload_[0];
  const std::string expected = "abcdef";
  ASSERT_EQ(std::string(in_flight.begin(), in_flight.end()), expected);

  sq_.flush(std::nullopt, 0);  // a transmit batch may still point at it
  poll_all(cq_);
  for (std::uint64_t id = 2; id <= 5; ++id) {
    ASSERT_TRUE(
        sq_.post(wr(id, WrOpcode::kSend, {part1, part2}, send_flags::kInline), true).is_ok());
  }
  EXPECT_EQ(std::string(in_flight.begin(), in_flight.end()), expected)
      << "a reused slot does not write over the bytes of the flushed request";
}

TEST_F(SendQueueTest, ClearDropsEveryRequestWithoutACompletion) {
  ASSERT_TRUE(post(1).is_ok());
  ASSERT_TRUE(post(2).is_ok());
  start();
  sq_.clear();
  EXPECT_TRUE(sq_.empty());
  proto::OutboundRequest r;
  EXPECT_FALSE(sq_.peek(r));
  EXPECT_TRUE(poll_all(cq_).empty());
  ASSERT_TRUE(post(3).is_ok());
  ASSERT_TRUE(sq_.peek(r));
  sq_.flush(std::nullopt, 0);
  EXPECT_EQ(wr_ids(poll_all(cq_)), (std::vector<std::uint64_t>{3}));
}

TEST_F(SendQueueTest, ACompletionTheCqHasNoRoomForIsReportedAsACqError) {
  CompletionQueue tiny{1, nullptr, nullptr};
  QpReporter reporter{device_, 7, nullptr, &tiny, &tiny};
  SendQueue sq{caps_, device_.limits(), false, protection_, reporter};
  for (std::uint64_t id = 1; id <= 2; ++id) {
    ASSERT_TRUE(sq.post(wr(id, WrOpcode::kSend, {buf_.sge(0, 4)}), true).is_ok());
  }
  sq.flush(std::nullopt, 0);
  EXPECT_EQ(poll_all(tiny).size(), 1u);
  EXPECT_EQ(events_.count(AsyncEventType::kCqError), 1);
}

}  // namespace
}  // namespace uwarp::verbs
