// A test fixture base: one QueuePair with its two CQs and one registered region, and no stream,
// socket or thread, for tests that drive what sits above the QP (runtime::RdmapDriver, what
// feeds it) by hand. The region's TO is its buffer's virtual address, as OFA does it.
// A derived fixture's members (a driver bound to qp_) are destroyed before these.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "verbs/completion_queue.h"
#include "verbs/device.h"
#include "verbs/protection_domain.h"
#include "verbs/queue_pair.h"

namespace uwarp::testing {

class QpWithRegion : public ::testing::Test {
 protected:
  // A region of `bytes` bytes, each `fill`, registered with `access_bits`.
  QpWithRegion(std::size_t bytes, std::uint8_t fill, std::uint32_t access_bits)
      : memory_(bytes, fill) {
    verbs::QpConfig c;
    c.pd = &pd_;
    c.send_cq = &scq_;
    c.recv_cq = &rcq_;
    c.caps.max_send_wr = 8;
    c.caps.max_recv_wr = 8;
    qp_ = std::make_unique<verbs::QueuePair>(device_, c);
    mr_ = std::make_shared<verbs::MemoryRegion>();
    mr_->addr = memory_.data();
    mr_->length = memory_.size();
    mr_->iova = reinterpret_cast<std::uintptr_t>(memory_.data());
    mr_->access = access_bits;
    mr_->pd = &pd_;
    EXPECT_TRUE(device_.stags().insert(mr_));
  }

  verbs::Device device_;
  verbs::ProtectionDomain pd_{1};
  verbs::CompletionQueue scq_{64, nullptr, nullptr};
  verbs::CompletionQueue rcq_{64, nullptr, nullptr};
  std::vector<std::uint8_t> memory_;
  verbs::MemoryRegionRef mr_;
  std::unique_ptr<verbs::QueuePair> qp_;
};

}  // namespace uwarp::testing
