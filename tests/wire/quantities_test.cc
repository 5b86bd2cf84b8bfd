// Tests for wire/quantities.h: the MSN's start and its wrap modulo 2^32, Tagged Offset order and
// distance, Message Offset advance, and what the types refuse at compile time (implicit
// conversion, mixing one quantity with another, ordering MSNs, arithmetic on STags).
#include "wire/quantities.h"

#include <gtest/gtest.h>

#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "support/quantity_printers.h"

namespace uwarp::wire {
namespace {

constexpr std::uint32_t kMax32 = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t kMax64 = std::numeric_limits<std::uint64_t>::max();

// --- what does not compile ---------------------------------------------------------------------

template <typename T, typename Raw>
constexpr bool kExplicitOnly = std::is_constructible_v<T, Raw> && !std::is_convertible_v<Raw, T> &&
                               !std::is_convertible_v<T, Raw>;
static_assert(kExplicitOnly<Stag, std::uint32_t>);
static_assert(kExplicitOnly<TaggedOffset, std::uint64_t>);
static_assert(kExplicitOnly<Msn, std::uint32_t>);
static_assert(kExplicitOnly<MessageOffset, std::uint32_t>);

// One quantity is not another, though Stag, Msn and MessageOffset share a representation.
static_assert(!std::is_convertible_v<Stag, Msn> && !std::is_constructible_v<Msn, Stag>);
static_assert(!std::is_convertible_v<Msn, MessageOffset> &&
              !std::is_constructible_v<MessageOffset, Msn>);
static_assert(!std::equality_comparable_with<Stag, Msn>);
static_assert(!std::equality_comparable_with<MessageOffset, std::uint32_t>);

// An MSN has no order (it wraps); a Tagged Offset has one.
template <typename T>
concept HasLess = requires(T a, T b) { a < b; };
static_assert(!HasLess<Msn>);
static_assert(!HasLess<Stag>);
static_assert(!HasLess<MessageOffset>);
static_assert(std::totally_ordered<TaggedOffset>);

// An STag is a name: no arithmetic. An MSN only increments.
template <typename T>
concept HasPlus = requires(T a) { a + 1u; };
static_assert(!HasPlus<Stag>);
static_assert(!HasPlus<Msn>);
static_assert(!HasPlus<TaggedOffset>);
static_assert(HasPlus<MessageOffset>);

// Usable in constant expressions.
static_assert(Msn{kMax32}++ == Msn{kMax32});
static_assert(++Msn{kMax32} == Msn{0});
static_assert((MessageOffset{8} + 4u).value() == 12u);
static_assert(TaggedOffset{0x1040} - TaggedOffset{0x1000} == 0x40u);

// --- Msn ---------------------------------------------------------------------------------------

TEST(wire_quantities, MsnStartsAtOne) {
  EXPECT_EQ(kInitialMsn.value(), 1u);
  EXPECT_EQ(Msn{}.value(), 0u) << "default construction is the raw fields' 0, not the first MSN";
}

TEST(wire_quantities, MsnIncrementsByOne) {
  Msn m = kInitialMsn;
  EXPECT_EQ((++m).value(), 2u);
  EXPECT_EQ(m.value(), 2u);
  const Msn before = m++;
  EXPECT_EQ(before.value(), 2u);
  EXPECT_EQ(m.value(), 3u);
}

TEST(wire_quantities, MsnWrapsModulo2To32) {
  Msn m{kMax32 - 1};
  ++m;
  EXPECT_EQ(m, Msn{kMax32});
  ++m;
  EXPECT_EQ(m, Msn{0}) << "0xFFFFFFFF is followed by 0";
  ++m;
  EXPECT_EQ(m, Msn{1});

  Msn last{kMax32};
  EXPECT_EQ(last++, Msn{kMax32});
  EXPECT_EQ(last, Msn{0});
}

TEST(wire_quantities, MsnEquality) {
  EXPECT_EQ(Msn{7}, Msn{7});
  EXPECT_NE(Msn{7}, Msn{8});
  EXPECT_NE(Msn{0}, kInitialMsn);
}

// --- Stag --------------------------------------------------------------------------------------

TEST(wire_quantities, StagKeepsEveryBit) {
  EXPECT_EQ(Stag{0xCAFE0001}.value(), 0xCAFE0001u);
  EXPECT_EQ(Stag{kMax32}.value(), kMax32);
  EXPECT_EQ(Stag{}.value(), 0u);
  EXPECT_EQ(Stag{0x100}, Stag{0x100});
  EXPECT_NE(Stag{0x100}, Stag{0x101});
}

// --- TaggedOffset ------------------------------------------------------------------------------

TEST(wire_quantities, TaggedOffsetKeepsAll64Bits) {
  EXPECT_EQ(TaggedOffset{kMax64}.value(), kMax64);
  EXPECT_EQ(TaggedOffset{0xFFFFFFFF00000010}.value(), 0xFFFFFFFF00000010u);
  EXPECT_EQ(TaggedOffset{}.value(), 0u);
}

TEST(wire_quantities, TaggedOffsetOrdersAsAnAddress) {
  EXPECT_LT(TaggedOffset{0xFFF}, TaggedOffset{0x1000});
  EXPECT_LE(TaggedOffset{0x1000}, TaggedOffset{0x1000});
  EXPECT_GT(TaggedOffset{0x100000000}, TaggedOffset{0xFFFFFFFF}) << "no 32-bit truncation";
  EXPECT_GT(TaggedOffset{kMax64}, TaggedOffset{0});
}

TEST(wire_quantities, TaggedOffsetDistance) {
  EXPECT_EQ(TaggedOffset{0x1040} - TaggedOffset{0x1000}, 0x40u);
  EXPECT_EQ(TaggedOffset{0x1000} - TaggedOffset{0x1000}, 0u);
  EXPECT_EQ(TaggedOffset{kMax64} - TaggedOffset{0}, kMax64);
  EXPECT_EQ(TaggedOffset{0x100000000} - TaggedOffset{0xFFFFFFFF}, 1u);
}

// --- MessageOffset -----------------------------------------------------------------------------

TEST(wire_quantities, MessageOffsetAdvancesByBytes) {
  MessageOffset mo{};
  mo = mo + 30u;
  EXPECT_EQ(mo, MessageOffset{30});
  mo = mo + 50u;
  EXPECT_EQ(mo.value(), 80u);
  EXPECT_EQ(mo + 0u, mo);
}

TEST(wire_quantities, MessageOffsetWrapsLikeTheField) {
  EXPECT_EQ(MessageOffset{kMax32} + 1u, MessageOffset{0});
  EXPECT_EQ(MessageOffset{kMax32 - 9} + 20u, MessageOffset{10});
}

}  // namespace
}  // namespace uwarp::wire
