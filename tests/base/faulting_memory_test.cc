// base/faulting_memory.h: copies into memory that is mapped, not yet touched, read-only or not
// mapped at all report a fault as false instead of raising SIGSEGV; prefault brings in what is
// mapped with the right asked for and refuses the rest.
#include "base/faulting_memory.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace uwarp {
namespace {

// Three pages: read-write, read-only, then a hole (unmapped).
class FaultingMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, 3 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    base_ = static_cast<std::uint8_t*>(p);
    ASSERT_EQ(mprotect(base_ + page_, page_, PROT_READ), 0);
    ASSERT_EQ(munmap(base_ + 2 * page_, page_), 0);
  }
  void TearDown() override { munmap(base_, 2 * page_); }

  ByteSpan writable() { return ByteSpan(base_, page_); }
  ByteSpan read_only() { return ByteSpan(base_ + page_, page_); }
  ByteSpan hole() { return ByteSpan(base_ + 2 * page_, page_); }

  std::size_t page_ = 0;
  std::uint8_t* base_ = nullptr;
};

TEST_F(FaultingMemoryTest, CopiesIntoMappedMemoryAndReportsTheRest) {
  std::vector<std::uint8_t> src(100, 0xA5);
  // Never touched: the copy faults the page in.
  EXPECT_TRUE(copy_to_faulting(writable().subspan(10, 100), src));
  EXPECT_EQ(std::memcmp(base_ + 10, src.data(), src.size()), 0);
  EXPECT_FALSE(copy_to_faulting(read_only().first(100), src));
  EXPECT_FALSE(copy_to_faulting(hole().first(100), src));
  // Across the end of what may be written: the part before it is written, the call says no.
  EXPECT_FALSE(copy_to_faulting(ByteSpan(base_ + page_ - 50, 100), src));
  EXPECT_TRUE(copy_to_faulting(hole().first(0), {}));
}

TEST_F(FaultingMemoryTest, PrefaultTakesWhatIsMappedWithTheRightAskedFor) {
  EXPECT_TRUE(prefault(writable(), Prefault::kWrite));
  EXPECT_TRUE(prefault(read_only(), Prefault::kRead));
  EXPECT_FALSE(prefault(read_only(), Prefault::kWrite));
  EXPECT_FALSE(prefault(hole(), Prefault::kRead));
  EXPECT_FALSE(prefault(ByteSpan(base_ + page_ - 8, 16), Prefault::kWrite));  // spans two pages
  EXPECT_TRUE(prefault(hole().first(0), Prefault::kWrite));
}

}  // namespace
}  // namespace uwarp
