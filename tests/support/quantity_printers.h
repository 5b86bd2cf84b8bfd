// Test support: gtest printers for the RFC quantities of wire/quantities.h, so that a failed
// expectation shows "Stag(0x100)" or "Msn(2)" rather than the object's bytes.
#pragma once

#include <ostream>

#include "wire/quantities.h"

namespace uwarp::wire {

inline void PrintTo(Stag s, std::ostream* os) {
  *os << "Stag(0x" << std::hex << s.value() << std::dec << ")";
}
inline void PrintTo(TaggedOffset to, std::ostream* os) {
  *os << "TaggedOffset(0x" << std::hex << to.value() << std::dec << ")";
}
inline void PrintTo(Msn msn, std::ostream* os) { *os << "Msn(" << msn.value() << ")"; }
inline void PrintTo(MessageOffset mo, std::ostream* os) {
  *os << "MessageOffset(" << mo.value() << ")";
}

}  // namespace uwarp::wire
