// Memory windows and fast-registered regions end to end over loopback (and between network
// namespaces: in_netns_pair.sh), through the native API: binds and registrations take effect in
// posting order, a peer reaches memory through them only while they are bound, type 2 windows and
// fast regions are unbound by a local invalidation, and the rules of binding are enforced with a
// completion status.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "support/connected_pair.h"

namespace uwarp::testing {
namespace {

constexpr std::uint32_t kBindable = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kMwBind;

class MemoryWindowTest : public ::testing::Test {
 protected:
  MemoryWindowTest() : pair_(options()) {}
  static ConnectedPair::Options options() {
    ConnectedPair::Options o;
    o.buffer_size = 64 * 1024;
    o.access = kBindable;
    return o;
  }
  Side& client() { return *pair_.client; }
  Side& server() { return *pair_.server; }

  // Posts a local operation on the server and waits for its completion.
  std::optional<WorkCompletion> run_on_server(SendWr wr) {
    wr.flags = send_flags::kSignaled;
    if (Status s = server().qp.post_send(wr); !s) {
      ADD_FAILURE() << s.to_string();
      return std::nullopt;
    }
    return wait_wc(server().cq);
  }
  SendWr bind_type2(MemoryWindow& mw, std::uint8_t key, const Sge& range, std::uint32_t rights) {
    range_ = range;
    SendWr wr{.wr_id = 100, .opcode = WrOpcode::kBindWindow, .sg_list = {&range_, 1}};
    wr.rkey = mw.rkey_with_key(key);
    wr.access = rights;
    return wr;
  }
  static SendWr local_invalidate(std::uint32_t rkey) {
    SendWr wr;
    wr.wr_id = 101;
    wr.opcode = WrOpcode::kLocalInvalidate;
    wr.invalidate_rkey = rkey;
    return wr;
  }
  // The client Writes (or Reads) `n` bytes of its buffer at `to` of `rkey`; the completion.
  std::optional<WorkCompletion> client_rdma(WrOpcode op, std::uint32_t rkey, std::uint64_t to, std::uint32_t n) {
    sge_ = client().mr.sge(0, n);
    SendWr wr{.wr_id = 7, .opcode = op, .sg_list = {&sge_, 1}};
    wr.remote_addr = to;
    wr.rkey = rkey;
    if (Status s = client().qp.post_send(wr); !s) {
      ADD_FAILURE() << s.to_string();
      return std::nullopt;
    }
    return wait_wc(client().cq);
  }
  std::uint64_t server_addr(std::size_t offset) const {
    return reinterpret_cast<std::uintptr_t>(pair_.server->buf.data() + offset);
  }

  ConnectedPair pair_;
  Sge range_;
  Sge sge_;
};

TEST_F(MemoryWindowTest, AType2WindowServesThePeerUntilItIsInvalidated) {
  ASSERT_TRUE(pair_.connected);
  MemoryWindow mw = server().pd.alloc_mw(WindowType::kType2).value();
  const Sge range{server_addr(1024), 4096, server().mr.lkey()};
  auto bound = run_on_server(bind_type2(mw, 0x42, range, access::kRemoteWrite | access::kRemoteRead));
  ASSERT_TRUE(bound);
  ASSERT_EQ(bound->status, WcStatus::kSuccess) << to_string(bound->status);
  EXPECT_EQ(bound->opcode, WcOpcode::kBindWindow);
  const std::uint32_t rkey = mw.rkey();
  EXPECT_EQ(rkey, mw.rkey_with_key(0x42));
  EXPECT_NE(rkey, server().mr.rkey());

  const auto data = pattern(512, 3);
  std::memcpy(client().buf.data(), data.data(), data.size());
  auto wrote = client_rdma(WrOpcode::kRdmaWrite, rkey, server_addr(2048), 512);
  ASSERT_TRUE(wrote);
  ASSERT_EQ(wrote->status, WcStatus::kSuccess) << to_string(wrote->status);
  // The Write completes once TCP has it; a Read behind it returns once it has been placed.
  auto read_back = client_rdma(WrOpcode::kRdmaRead, rkey, server_addr(2048), 512);
  ASSERT_TRUE(read_back);
  ASSERT_EQ(read_back->status, WcStatus::kSuccess) << to_string(read_back->status);
  EXPECT_EQ(std::memcmp(server().buf.data() + 2048, data.data(), data.size()), 0);
  EXPECT_EQ(server().mr.deregister().code(), Errc::kBusy) << "a window is bound in the region";

  auto invalidated = run_on_server(local_invalidate(rkey));
  ASSERT_TRUE(invalidated);
  ASSERT_EQ(invalidated->status, WcStatus::kSuccess) << to_string(invalidated->status);
  EXPECT_EQ(invalidated->opcode, WcOpcode::kLocalInvalidate);
  auto refused = client_rdma(WrOpcode::kRdmaRead, rkey, server_addr(2048), 64);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, WcStatus::kRemoteAccessError) << to_string(refused->status);
}

TEST_F(MemoryWindowTest, AType1WindowMovesToTheNextKeyWithEachBind) {
  ASSERT_TRUE(pair_.connected);
  MemoryWindow mw = server().pd.alloc_mw(WindowType::kType1).value();
  const Sge range{server_addr(0), 8192, 0};
  auto first = server().qp.bind_mw(mw, server().mr, range, access::kRemoteRead, 1);
  ASSERT_TRUE(first);
  auto wc = wait_wc(server().cq);
  ASSERT_TRUE(wc);
  ASSERT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
  EXPECT_EQ(mw.rkey(), *first);
  const auto data = pattern(256, 4);
  std::memcpy(server().buf.data() + 100, data.data(), data.size());
  auto read = client_rdma(WrOpcode::kRdmaRead, *first, server_addr(100), 256);
  ASSERT_TRUE(read);
  ASSERT_EQ(read->status, WcStatus::kSuccess) << to_string(read->status);
  EXPECT_EQ(std::memcmp(client().buf.data(), data.data(), data.size()), 0);

  auto second = server().qp.bind_mw(mw, server().mr, range, access::kRemoteRead, 2);
  ASSERT_TRUE(second);
  EXPECT_EQ(*second & 0xFFu, (*first + 1) & 0xFFu);
  EXPECT_EQ(*second >> 8, *first >> 8);
  wc = wait_wc(server().cq);
  ASSERT_TRUE(wc);
  ASSERT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
  auto stale = client_rdma(WrOpcode::kRdmaRead, *first, server_addr(100), 16);
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->status, WcStatus::kRemoteAccessError) << "the old key names nothing";
}

TEST_F(MemoryWindowTest, AFastRegionRegistersApplicationMemoryUntilItIsInvalidated) {
  ASSERT_TRUE(pair_.connected);
  FastRegion fr = server().pd.alloc_fast_region().value();
  std::vector<std::uint8_t> memory = pattern(4096, 5);
  Sge where{reinterpret_cast<std::uintptr_t>(memory.data()), 4096, 0};
  SendWr reg{.wr_id = 9, .opcode = WrOpcode::kRegisterFastRegion, .sg_list = {&where, 1}};
  reg.rkey = fr.rkey_with_key(0x17);
  reg.remote_addr = 0x100000;
  reg.access = access::kRemoteRead | access::kLocalWrite;
  auto done = run_on_server(reg);
  ASSERT_TRUE(done);
  ASSERT_EQ(done->status, WcStatus::kSuccess) << to_string(done->status);
  EXPECT_EQ(done->opcode, WcOpcode::kRegisterFastRegion);
  auto read = client_rdma(WrOpcode::kRdmaRead, reg.rkey, 0x100000 + 64, 128);
  ASSERT_TRUE(read);
  ASSERT_EQ(read->status, WcStatus::kSuccess) << to_string(read->status);
  EXPECT_EQ(std::memcmp(client().buf.data(), memory.data() + 64, 128), 0);

  auto invalidated = run_on_server(local_invalidate(reg.rkey));
  ASSERT_TRUE(invalidated);
  ASSERT_EQ(invalidated->status, WcStatus::kSuccess) << to_string(invalidated->status);
  auto refused = client_rdma(WrOpcode::kRdmaRead, reg.rkey, 0x100000, 16);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, WcStatus::kRemoteAccessError) << to_string(refused->status);
}

TEST_F(MemoryWindowTest, ABindThatBreaksTheRulesCompletesInErrorAndFailsTheQp) {
  ASSERT_TRUE(pair_.connected);
  MemoryWindow mw = server().pd.alloc_mw(WindowType::kType2).value();
  // Local write is not a right a window carries.
  auto wc = run_on_server(bind_type2(mw, 1, Sge{server_addr(0), 64, server().mr.lkey()}, access::kLocalWrite));
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::kMemoryWindowBindError) << to_string(wc->status);
  EXPECT_EQ(wc->opcode, WcOpcode::kBindWindow);
  EXPECT_EQ(server().qp.state(), QpState::kError);
}

TEST_F(MemoryWindowTest, OnlyAType2WindowOrAFastRegionIsInvalidatedLocally) {
  ASSERT_TRUE(pair_.connected);
  auto wc = run_on_server(local_invalidate(server().mr.rkey()));
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::kLocalProtectionError) << "a registered region is not invalidated";
  EXPECT_TRUE(server().mr.deregister()) << "and stays registered until deregistered";
}

}  // namespace
}  // namespace uwarp::testing
