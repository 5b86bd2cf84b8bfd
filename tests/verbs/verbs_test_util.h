// What the tests of a QP's pieces share: memory registered in a protection domain, completions
// polled from a CQ, and the asynchronous events a device reported.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "verbs/completion_queue.h"
#include "verbs/device.h"
#include "verbs/memory_region.h"
#include "verbs/protection_domain.h"
#include "support/quantity_printers.h"
#include "verbs/stag_table.h"
#include "wire/quantities.h"

namespace uwarp::verbs::testing {

// Memory of the test registered in the STag table: bytes i hold i (mod 256) at first, and the
// region's Tagged Offsets are the bytes' addresses (as OFA registers them).
struct Buffer {
  std::vector<std::uint8_t> bytes;
  MemoryRegionRef mr;

  std::uint64_t addr(std::size_t offset = 0) const {
    return reinterpret_cast<std::uint64_t>(bytes.data() + offset);
  }
  // The region's STag, and the Tagged Offset of bytes[offset], as a peer names them.
  wire::Stag stag() const { return wire::Stag{mr->stag}; }
  wire::TaggedOffset to(std::size_t offset = 0) const { return wire::TaggedOffset{addr(offset)}; }
  Sge sge(std::size_t offset, std::uint32_t length) const {
    return Sge{addr(offset), length, mr->stag};
  }
};

inline Buffer register_buffer(StagTable& stags, const ProtectionDomain* pd, std::size_t size,
                              std::uint32_t access) {
  Buffer b;
  b.bytes.resize(size);
  for (std::size_t i = 0; i < size; ++i) b.bytes[i] = static_cast<std::uint8_t>(i);
  b.mr = std::make_shared<MemoryRegion>();
  b.mr->addr = b.bytes.data();
  b.mr->length = size;
  b.mr->iova = b.addr();
  b.mr->access = access;
  b.mr->pd = pd;
  EXPECT_TRUE(stags.insert(b.mr));
  return b;
}

inline std::vector<WorkCompletion> poll_all(CompletionQueue& cq) {
  std::vector<WorkCompletion> out;
  WorkCompletion wc[8];
  for (std::size_t n; (n = cq.poll(wc)) > 0;) out.insert(out.end(), wc, wc + n);
  return out;
}

inline std::vector<std::uint64_t> wr_ids(const std::vector<WorkCompletion>& wcs) {
  std::vector<std::uint64_t> ids;
  for (const WorkCompletion& wc : wcs) ids.push_back(wc.wr_id);
  return ids;
}

class EventLog final : public AsyncEventSink {
 public:
  void async_event(const AsyncEvent& event) override { events.push_back(event); }
  int count(AsyncEventType type) const {
    int n = 0;
    for (const AsyncEvent& e : events) n += e.type == type ? 1 : 0;
    return n;
  }
  std::vector<AsyncEvent> events;
};

}  // namespace uwarp::verbs::testing
