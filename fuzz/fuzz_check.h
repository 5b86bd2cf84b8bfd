// Shared by the fuzz targets: a check that aborts, so that libFuzzer records the input as a crash.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/bytes.h"

// A macro for the message's file, line and condition text (std::source_location needs clang 15).
#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

namespace uwarp::fuzz {

inline bool same_bytes(ConstByteSpan a, ConstByteSpan b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// Whether `inner` lies within `outer` (a decoded view must point into the input).
inline bool within(ConstByteSpan inner, ConstByteSpan outer) {
  if (inner.empty()) return true;
  return inner.data() >= outer.data() && inner.data() + inner.size() <= outer.data() + outer.size();
}

}  // namespace uwarp::fuzz
