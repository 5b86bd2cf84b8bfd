// On-demand paging through the native API over loopback, and between network namespaces under
// in_netns_pair.sh (docs/on-demand-paging.md): regions registered with access::kOnDemand take
// Sends, Writes, Reads and atomics as any region does, their payloads placed through copies that
// report a fault; the implicit region (nullptr, SIZE_MAX) reaches any mapped address; memory
// registered before it is mapped is reached once mapped; a request whose local on-demand memory is
// not mapped fails locally.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "support/connected_pair.h"

namespace uwarp::testing {
namespace {

constexpr std::uint32_t kAllRemote =
    access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;

// Fresh anonymous memory, untouched (no page present until reached).
struct Mapping {
  explicit Mapping(std::size_t n) : size(n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    bytes = static_cast<std::uint8_t*>(p);
  }
  ~Mapping() { munmap(bytes, size); }
  std::uint64_t addr(std::size_t offset = 0) const { return reinterpret_cast<std::uintptr_t>(bytes) + offset; }
  std::size_t size;
  std::uint8_t* bytes = nullptr;
};

// Posts `op` (an RDMA Write or Read, an atomic) from `local` of `from` to `addr` under `rkey`,
// and waits for its completion.
std::optional<WorkCompletion> remote_op(Side& from, WrOpcode op, Sge local, std::uint64_t addr,
                                        std::uint32_t rkey, std::uint64_t compare_add = 0) {
  SendWr wr{.wr_id = 1, .opcode = op, .sg_list = {&local, 1}};
  wr.remote_addr = addr;
  wr.rkey = rkey;
  wr.compare_add = compare_add;
  if (!from.qp.post_send(wr)) return std::nullopt;
  return wait_wc(from.cq);
}

// A 1 MiB Write into untouched on-demand memory, read back (both through the bounce buffer:
// such memory is never received into directly), then a Send into it and an atomic on it.
TEST(OnDemandPaging, WriteReadSendAndAtomicThroughAnOnDemandRegion) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  Side& sv = *p.server;
  constexpr std::size_t kSize = 1 << 20;
  Mapping m(2 * kSize);
  auto odp = sv.pd.reg_mr(m.bytes, m.size, kAllRemote | access::kOnDemand);
  ASSERT_TRUE(odp) << odp.error().to_string();

  const auto data = pattern(kSize, 7);
  std::memcpy(cl.buf.data(), data.data(), kSize);
  auto wc = remote_op(cl, WrOpcode::kRdmaWrite, cl.mr.sge(0, kSize), m.addr(123), odp->rkey());
  ASSERT_TRUE(wc);
  ASSERT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);

  std::memset(cl.buf.data(), 0, kSize);
  wc = remote_op(cl, WrOpcode::kRdmaRead, cl.mr.sge(0, kSize), m.addr(123), odp->rkey());
  ASSERT_TRUE(wc);
  ASSERT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
  EXPECT_EQ(std::memcmp(cl.buf.data(), data.data(), kSize), 0);
  EXPECT_EQ(std::memcmp(m.bytes + 123, data.data(), kSize), 0);

  Sge into = odp->sge(kSize + 5, 4096);
  ASSERT_TRUE(sv.qp.post_recv({3, {&into, 1}}));
  Sge send_sge = cl.mr.sge(0, 4000);
  ASSERT_TRUE(cl.qp.post_send({.wr_id = 4, .opcode = WrOpcode::kSend, .sg_list = {&send_sge, 1}}));
  wc = wait_wc(sv.cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
  EXPECT_EQ(wc->byte_len, 4000u);
  EXPECT_EQ(std::memcmp(m.bytes + kSize + 5, data.data(), 4000), 0);
  ASSERT_TRUE(wait_wc(cl.cq));

  wc = remote_op(cl, WrOpcode::kAtomicFetchAdd, cl.mr.sge(kSize - 8, 8), m.addr(2 * kSize - 64),
                 odp->rkey(), 41);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
  std::uint64_t word = 0;
  std::memcpy(&word, m.bytes + 2 * kSize - 64, sizeof word);
  EXPECT_EQ(word, 41u);
}

// The implicit region reaches any mapped address, also memory mapped after it was registered.
TEST(OnDemandPaging, TheImplicitRegionReachesMemoryMappedLater) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  Side& sv = *p.server;
  auto all = sv.pd.reg_mr(nullptr, SIZE_MAX, kAllRemote | access::kOnDemand);
  ASSERT_TRUE(all) << all.error().to_string();
  Mapping later(64 * 1024);  // mapped after the registration
  const auto data = pattern(60000, 8);
  std::memcpy(cl.buf.data(), data.data(), data.size());
  const auto size = static_cast<std::uint32_t>(data.size());
  auto wc = remote_op(cl, WrOpcode::kRdmaWrite, cl.mr.sge(0, size), later.addr(100), all->rkey());
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
  // The Write is placed when a Read behind it on the same stream returns.
  wc = remote_op(cl, WrOpcode::kRdmaRead, cl.mr.sge(size, 8), later.addr(100), all->rkey());
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
  EXPECT_EQ(cl.buf[size], data[0]);
  EXPECT_EQ(std::memcmp(later.bytes + 100, data.data(), data.size()), 0);
}

// A Send whose local on-demand memory is not mapped fails with a local protection error before
// anything is sent; the QP goes to ERROR, as the verbs ask of such a completion.
TEST(OnDemandPaging, ASendFromUnmappedOnDemandMemoryFailsLocally) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  Mapping m(2 * page);
  auto odp = cl.pd.reg_mr(m.bytes, m.size, access::kLocalWrite | access::kOnDemand);
  ASSERT_TRUE(odp);
  ASSERT_EQ(munmap(m.bytes + page, page), 0);
  Sge s = odp->sge(page, 64);
  ASSERT_TRUE(cl.qp.post_send({.wr_id = 1, .opcode = WrOpcode::kSend, .sg_list = {&s, 1}}));
  auto wc = wait_wc(cl.cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::kLocalProtectionError) << to_string(wc->status);
  m.size = page;  // the rest is already unmapped
}

// A window bound in an on-demand region reaches its memory as the region does: a Write through
// the window into a page that went away ends in the writer's QP failing (the Terminate), not in
// SIGSEGV at the responder, which then carries on.
TEST(OnDemandPaging, AWindowInAnOnDemandRegionFaultsAsTheRegionDoes) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  Side& sv = *p.server;
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  Mapping m(2 * page);
  auto odp = sv.pd.reg_mr(m.bytes, m.size, kAllRemote | access::kMwBind | access::kOnDemand);
  ASSERT_TRUE(odp);
  MemoryWindow mw = sv.pd.alloc_mw(WindowType::kType1).value();
  auto rkey = sv.qp.bind_mw(mw, *odp, Sge{m.addr(), static_cast<std::uint32_t>(2 * page), 0},
                            access::kRemoteWrite, 1);
  ASSERT_TRUE(rkey);
  auto wc = wait_wc(sv.cq);
  ASSERT_TRUE(wc);
  ASSERT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
  ASSERT_EQ(munmap(m.bytes + page, page), 0);
  m.size = page;

  // Its completion may come before or after the Terminate.
  remote_op(cl, WrOpcode::kRdmaWrite, cl.mr.sge(0, 64), m.addr(page + 8), *rkey);
  for (int i = 0; i < 5000 && cl.qp.state() != QpState::kError; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(cl.qp.state(), QpState::kError) << "the responder's Terminate ends the writer's QP";
  EXPECT_EQ(sv.qp.state(), QpState::kError);
}

TEST(OnDemandPaging, OnlyTheWholeAddressSpaceMayBeRegisteredAtNull) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  EXPECT_FALSE(p.server->pd.reg_mr(nullptr, 4096, access::kLocalWrite | access::kOnDemand));
  EXPECT_FALSE(p.server->pd.reg_mr(nullptr, SIZE_MAX, access::kLocalWrite));
}

}  // namespace
}  // namespace uwarp::testing
