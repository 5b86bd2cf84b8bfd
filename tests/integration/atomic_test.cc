// RFC 7306 atomic operations between two uwarp QPs over loopback (or two network namespaces:
// in_netns_pair.sh), through the native API: each operation's result and completion, the checks
// made when one is posted, and atomicity against other QPs and threads of the device and against
// the responder's own CPU atomics on the word.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "support/connected_pair.h"
#include "uwarp/uwarp.h"

namespace uwarp::testing {
namespace {

constexpr std::uint32_t kAtomicAccess =
    access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;

ConnectedPair::Options atomic_pair(bool crc) {
  ConnectedPair::Options o;
  o.buffer_size = 4096;
  o.access = kAtomicAccess;
  o.client_params.crc = crc;
  return o;
}

// The 64-bit word at `offset` of a side's buffer (8-byte aligned: the buffer is heap memory).
std::atomic_ref<std::uint64_t> word(Side& s, std::size_t offset) {
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(s.buf.data() + offset));
}

// Posts one atomic from `from` on the word at `offset` of `to`, its result to `result_offset` of
// `from`'s buffer; returns its completion.
std::optional<WorkCompletion> atomic(Side& from, Side& to, WrOpcode op, std::size_t offset,
                                     std::uint64_t compare_add, std::uint64_t swap = 0,
                                     std::size_t result_offset = 0, std::uint64_t wr_id = 1) {
  const Sge result = from.mr.sge(result_offset, 8);
  SendWr wr = remote_wr(op, result, to, offset, wr_id);
  wr.compare_add = compare_add;
  wr.swap = swap;
  if (Status s = from.qp.post_send(wr); !s) {
    ADD_FAILURE() << s.to_string();
    return std::nullopt;
  }
  return wait_wc(from.cq);
}

std::uint64_t result(Side& s, std::size_t offset = 0) { return word(s, offset).load(); }

class AtomicTest : public ::testing::TestWithParam<bool> {};

TEST_P(AtomicTest, EachOperationReturnsTheValueBeforeAndLeavesItsResult) {
  ConnectedPair p(atomic_pair(GetParam()));
  ASSERT_TRUE(p.connected);
  Side& c = *p.client;
  Side& s = *p.server;
  word(s, 64).store(1000);
  struct Step {
    WrOpcode op;
    std::uint64_t compare_add, swap;
    std::uint64_t before, after;
    WcOpcode completion;
  };
  const Step steps[] = {
      {WrOpcode::kAtomicFetchAdd, 5, 0, 1000, 1005, WcOpcode::kAtomicFetchAdd},
      {WrOpcode::kAtomicFetchAdd, ~std::uint64_t{0}, 0, 1005, 1004, WcOpcode::kAtomicFetchAdd},
      {WrOpcode::kAtomicCompareSwap, 1004, 77, 1004, 77, WcOpcode::kAtomicCompareSwap},
      {WrOpcode::kAtomicCompareSwap, 1004, 99, 77, 77, WcOpcode::kAtomicCompareSwap},  // no match
      {WrOpcode::kAtomicSwap, 0, 0xFEEDFACECAFEBEEFull, 77, 0xFEEDFACECAFEBEEFull,
       WcOpcode::kAtomicSwap},
  };
  std::uint64_t id = 1;
  for (const Step& st : steps) {
    auto wc = atomic(c, s, st.op, 64, st.compare_add, st.swap, 8, id);
    ASSERT_TRUE(wc) << "step " << id;
    EXPECT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
    EXPECT_EQ(wc->wr_id, id);
    EXPECT_EQ(wc->opcode, st.completion);
    EXPECT_EQ(wc->byte_len, 8u);
    EXPECT_EQ(result(c, 8), st.before) << "step " << id;
    EXPECT_EQ(result(s, 64), st.after) << "step " << id;
    ++id;
  }
  EXPECT_EQ(c.qp.state(), QpState::kRts);
  EXPECT_EQ(s.qp.state(), QpState::kRts);
}

TEST_P(AtomicTest, TheChecksOfAPostRefuseMalformedRequests) {
  ConnectedPair p(atomic_pair(GetParam()));
  ASSERT_TRUE(p.connected);
  Side& c = *p.client;
  Sge four = c.mr.sge(0, 4);
  SendWr wr;
  wr.opcode = WrOpcode::kAtomicFetchAdd;
  wr.sg_list = {&four, 1};
  wr.remote_addr = reinterpret_cast<std::uintptr_t>(p.server->buf.data());
  wr.rkey = p.server->mr.rkey();
  EXPECT_EQ(c.qp.post_send(wr).code(), Errc::kInvalidArgument) << "a 4-byte result";
  Sge eight = c.mr.sge(0, 8);
  wr.sg_list = {&eight, 1};
  wr.remote_addr += 4;
  EXPECT_EQ(c.qp.post_send(wr).code(), Errc::kInvalidArgument) << "a misaligned word";
  wr.remote_addr -= 4;
  ASSERT_TRUE(c.qp.post_send(wr)) << "the same request, well formed";
  auto wc = wait_wc(c.cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
}

// The responder's region must allow remote atomics: without, the requester's operation fails
// with a remote access error (the responder sends RDMAP / 1 / 0x02) and both QPs end in ERROR.
TEST_P(AtomicTest, ARegionWithoutRemoteAtomicAccessRefusesIt) {
  ConnectedPair::Options o = atomic_pair(GetParam());
  o.access = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;
  ConnectedPair p(o);
  ASSERT_TRUE(p.connected);
  auto wc = atomic(*p.client, *p.server, WrOpcode::kAtomicFetchAdd, 0, 1);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::kRemoteAccessError) << to_string(wc->status);
  EXPECT_EQ(word(*p.server, 0).load(), 0u) << "the word was changed";
}

// Atomicity across the device: requesters on several QPs, and the responder's own thread with
// CPU atomics, add to one word at the same time; no addition is lost.
TEST_P(AtomicTest, AdditionsFromManyQpsAndTheLocalCpuAreNeverLost) {
  constexpr int kPairs = 3;
  constexpr int kAddsPerQp = 300;
  constexpr std::uint64_t kMinLocalAdds = 20000;
  ConnectedPair responder(atomic_pair(GetParam()));
  ASSERT_TRUE(responder.connected);
  std::vector<std::unique_ptr<ConnectedPair>> others;
  // Each extra pair's server QP is given the responder's region by registering the same word
  // again in its own PD: the word is shared, the QPs and threads are not.
  std::uint64_t* shared = reinterpret_cast<std::uint64_t*>(responder.server->buf.data());
  std::vector<MemoryRegion> extra_regions;
  for (int i = 0; i < kPairs - 1; ++i) {
    others.push_back(std::make_unique<ConnectedPair>(atomic_pair(GetParam())));
    ASSERT_TRUE(others.back()->connected);
    extra_regions.push_back(others.back()->server->pd.reg_mr(shared, 8, kAtomicAccess).value());
  }
  auto adder = [&](Side& from, std::uint32_t rkey) {
    Sge r = from.mr.sge(0, 8);
    for (int i = 0; i < kAddsPerQp; ++i) {
      SendWr wr;
      wr.opcode = WrOpcode::kAtomicFetchAdd;
      wr.sg_list = {&r, 1};
      wr.remote_addr = reinterpret_cast<std::uintptr_t>(shared);
      wr.rkey = rkey;
      wr.compare_add = 1;
      ASSERT_TRUE(from.qp.post_send(wr));
      auto wc = wait_wc(from.cq);
      ASSERT_TRUE(wc);
      ASSERT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
    }
  };
  // The local CPU adds for as long as the requesters run (at least kMinLocalAdds times).
  std::atomic<bool> requesters_done{false};
  std::uint64_t local_adds = 0;
  std::thread local([&] {
    std::atomic_ref<std::uint64_t> w(*shared);
    while (local_adds < kMinLocalAdds || !requesters_done.load()) {
      w.fetch_add(1000, std::memory_order_relaxed);
      ++local_adds;
    }
  });
  std::vector<std::thread> requesters;
  requesters.emplace_back(adder, std::ref(*responder.client), responder.server->mr.rkey());
  for (int i = 0; i < kPairs - 1; ++i) {
    requesters.emplace_back(adder, std::ref(*others[i]->client), extra_regions[i].rkey());
  }
  for (auto& t : requesters) t.join();
  requesters_done = true;
  local.join();
  EXPECT_EQ(std::atomic_ref<std::uint64_t>(*shared).load(),
            std::uint64_t{kPairs} * kAddsPerQp + local_adds * 1000);
}

INSTANTIATE_TEST_SUITE_P(Crc, AtomicTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "crc" : "nocrc";
                         });

}  // namespace
}  // namespace uwarp::testing
