// The quantities DDP and RDMAP name on the wire, as distinct types:
// - Stag, the 32-bit Steering Tag of a tagged buffer (RFC 5041 sections 4.2 and 5.1.1), also the
//   Invalidate STag of a Send with Invalidate (RFC 5040 section 4.2) and the Data Sink and Data
//   Source STags of a Read Request (RFC 5040 section 4.4);
// - TaggedOffset, the 64-bit TO that addresses a byte within a tagged buffer (RFC 5041 sections
//   4.2 and 5.1.1; RFC 5040 section 4.4);
// - Msn, the 32-bit Message Sequence Number of an untagged queue (RFC 5041 sections 4.3 and
//   5.1.2): its first value is 1 and it counts modulo 2^32 (0xFFFFFFFF is followed by 0);
// - MessageOffset, the 32-bit MO of an untagged segment: its first byte's offset within its
//   message (RFC 5041 section 4.3).
//
// Each holds the field's integer as on the wire (host order): constructed from it explicitly,
// given back by value(). They carry only the operations the RFCs give meaning to: equality for
// all; ordering and distance for Tagged Offsets (a TO and length that wrap are an error, not an
// order); advancing a Message Offset by a byte count; incrementing an MSN, modulo 2^32, with no
// ordering, since "less than" is not defined across the wrap. Default construction gives 0, as
// the raw fields had. Each is as large as its integer and trivially copyable, so it is passed
// and stored as the integer is.
#pragma once

#include <compare>
#include <cstdint>
#include <type_traits>

namespace uwarp::wire {

// A Steering Tag: names a tagged buffer (a registered region) at the Data Sink or Source.
class Stag {
 public:
  constexpr Stag() = default;
  constexpr explicit Stag(std::uint32_t value) : value_(value) {}
  constexpr std::uint32_t value() const { return value_; }
  friend constexpr bool operator==(Stag, Stag) = default;

 private:
  std::uint32_t value_ = 0;
};

// A Tagged Offset: the address of a byte in the tagged buffer of an STag. Offsets compare as
// addresses; `a - b` is the number of bytes from b to a, for a >= b.
class TaggedOffset {
 public:
  constexpr TaggedOffset() = default;
  constexpr explicit TaggedOffset(std::uint64_t value) : value_(value) {}
  constexpr std::uint64_t value() const { return value_; }
  friend constexpr bool operator==(TaggedOffset, TaggedOffset) = default;
  friend constexpr std::strong_ordering operator<=>(TaggedOffset, TaggedOffset) = default;
  friend constexpr std::uint64_t operator-(TaggedOffset a, TaggedOffset b) {
    return a.value_ - b.value_;
  }

 private:
  std::uint64_t value_ = 0;
};

// A Message Sequence Number. The first message on each untagged queue has kInitialMsn; each
// next one has the MSN after it, modulo 2^32. Two MSNs are equal or not; neither comes "before"
// the other.
class Msn {
 public:
  constexpr Msn() = default;
  constexpr explicit Msn(std::uint32_t value) : value_(value) {}
  constexpr std::uint32_t value() const { return value_; }
  friend constexpr bool operator==(Msn, Msn) = default;

  // The next MSN: 0xFFFFFFFF is followed by 0.
  constexpr Msn& operator++() {
    ++value_;  // unsigned: wraps modulo 2^32
    return *this;
  }
  // As ++, returning the MSN before the increment.
  constexpr Msn operator++(int) {
    const Msn before = *this;
    ++value_;
    return before;
  }

 private:
  std::uint32_t value_ = 0;
};

// RFC 5041 section 4.3: the MSN of the first message on each untagged queue.
inline constexpr Msn kInitialMsn{1};

// A Message Offset: where in its untagged message a segment's payload begins. `mo + n` is the
// offset n bytes further on, modulo 2^32 like the field (a message cannot exceed 2^32 bytes).
class MessageOffset {
 public:
  constexpr MessageOffset() = default;
  constexpr explicit MessageOffset(std::uint32_t value) : value_(value) {}
  constexpr std::uint32_t value() const { return value_; }
  friend constexpr bool operator==(MessageOffset, MessageOffset) = default;
  friend constexpr MessageOffset operator+(MessageOffset mo, std::uint32_t bytes) {
    return MessageOffset(mo.value_ + bytes);
  }

 private:
  std::uint32_t value_ = 0;
};

// As cheap as the raw integers: the same size, copied as they are.
static_assert(sizeof(Stag) == sizeof(std::uint32_t) && std::is_trivially_copyable_v<Stag>);
static_assert(sizeof(TaggedOffset) == sizeof(std::uint64_t) &&
              std::is_trivially_copyable_v<TaggedOffset>);
static_assert(sizeof(Msn) == sizeof(std::uint32_t) && std::is_trivially_copyable_v<Msn>);
static_assert(sizeof(MessageOffset) == sizeof(std::uint32_t) &&
              std::is_trivially_copyable_v<MessageOffset>);

}  // namespace uwarp::wire
