// proto::atomic_result and execute_atomic: the RFC 7306 operations and their masks.
#include "proto/atomic_operation.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace uwarp::proto {
namespace {

using wire::AtomicOpcode;
constexpr std::uint64_t kAll = ~std::uint64_t{0};

wire::AtomicRequest request(AtomicOpcode op, std::uint64_t data, std::uint64_t data_mask,
                            std::uint64_t compare = 0, std::uint64_t compare_mask = 0) {
  wire::AtomicRequest r;
  r.opcode = static_cast<std::uint8_t>(op);
  r.add_swap_data = data;
  r.add_swap_mask = data_mask;
  r.compare_data = compare;
  r.compare_mask = compare_mask;
  return r;
}

TEST(proto_atomic_operation, FetchAddWithoutAMaskIsOne64BitAddition) {
  EXPECT_EQ(atomic_result(request(AtomicOpcode::kFetchAdd, 5, 0), 1000), 1005u);
  EXPECT_EQ(atomic_result(request(AtomicOpcode::kFetchAdd, 1, 0), kAll), 0u);  // wraps
  EXPECT_EQ(atomic_result(request(AtomicOpcode::kFetchAdd, kAll, 0), 7), 6u);  // adds -1
}

// A set bit of the Add Mask ends a field: its carry does not reach the next bit.
TEST(proto_atomic_operation, TheAddMaskSplitsTheWordIntoFields) {
  // Two 32-bit fields (boundary after bit 31 and bit 63): each wraps on its own.
  const std::uint64_t fields = (std::uint64_t{1} << 31) | (std::uint64_t{1} << 63);
  const std::uint64_t old = 0x00000001FFFFFFFFull;
  EXPECT_EQ(atomic_result(request(AtomicOpcode::kFetchAdd, 0x0000000100000001ull, fields), old),
            0x0000000200000000ull);
  // Eight 8-bit counters.
  const std::uint64_t bytes = 0x8080808080808080ull;
  EXPECT_EQ(atomic_result(request(AtomicOpcode::kFetchAdd, 0x0101010101010101ull, bytes),
                          0xFF00FF00FF00FF00ull),
            0x0001000100010001ull);
}

TEST(proto_atomic_operation, SwapTakesTheBitsOfItsMask) {
  EXPECT_EQ(atomic_result(request(AtomicOpcode::kSwap, 0x1234, kAll), 0xFFFF), 0x1234u);
  EXPECT_EQ(atomic_result(request(AtomicOpcode::kSwap, 0xABCD, 0x00FF), 0x1234), 0x12CDu);
  EXPECT_EQ(atomic_result(request(AtomicOpcode::kSwap, 0xABCD, 0), 0x1234), 0x1234u);
}

TEST(proto_atomic_operation, CompareSwapComparesTheBitsOfTheCompareMask) {
  EXPECT_EQ(atomic_result(request(AtomicOpcode::kCompareSwap, 9, kAll, 7, kAll), 7), 9u);
  EXPECT_EQ(atomic_result(request(AtomicOpcode::kCompareSwap, 9, kAll, 8, kAll), 7), 7u);
  // Only the low byte is compared, only the high byte swapped.
  const auto r = request(AtomicOpcode::kCompareSwap, 0xAA00, 0xFF00, 0x0034, 0x00FF);
  EXPECT_EQ(atomic_result(r, 0x1234), 0xAA34u);
  EXPECT_EQ(atomic_result(r, 0x1235), 0x1235u);
}

TEST(proto_atomic_operation, ExecuteChangesTheWordAndReturnsTheValueBefore) {
  alignas(8) std::uint64_t word = 40;
  EXPECT_EQ(execute_atomic(request(AtomicOpcode::kFetchAdd, 2, 0), word), 40u);
  EXPECT_EQ(word, 42u);
  EXPECT_EQ(execute_atomic(request(AtomicOpcode::kFetchAdd, 0x0101, 0x8080), word), 42u);
  EXPECT_EQ(word, 0x012Bu);
  EXPECT_EQ(execute_atomic(request(AtomicOpcode::kCompareSwap, 1, kAll, 0x012B, kAll), word), 0x012Bu);
  EXPECT_EQ(word, 1u);
  EXPECT_EQ(execute_atomic(request(AtomicOpcode::kSwap, 77, kAll), word), 1u);
  EXPECT_EQ(word, 77u);
}

TEST(proto_atomic_operation, OnlyTheThreeOperationsAreKnown) {
  for (std::uint8_t op = 0; op < 16; ++op) EXPECT_EQ(is_known_atomic(op), op <= 2) << int{op};
}

}  // namespace
}  // namespace uwarp::proto
