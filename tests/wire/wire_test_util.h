// Helpers shared by the wire tests: hex rendering, error extraction and printers for gtest.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "wire/ddp.h"
#include "wire/fpdu.h"
#include "wire/mpa_frame.h"
#include "wire/rdmap.h"

namespace uwarp::wire {

// "00 0e c1 40": readable in a failed EXPECT_EQ and diffable by eye.
inline std::string to_hex(ConstByteSpan bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i != 0) s += ' ';
    s += kDigits[bytes[i] >> 4];
    s += kDigits[bytes[i] & 0x0F];
  }
  return s;
}

inline std::vector<std::uint8_t> to_vector(ConstByteSpan bytes) {
  return {bytes.begin(), bytes.end()};
}

// The error of a result, or nullopt when it holds a value: lets a test say
// EXPECT_EQ(error_of(decode(...)), Error::kX) and see a value where an error was due.
template <typename T, typename E>
std::optional<E> error_of(const Expected<T, E>& result) {
  if (result.has_value()) return std::nullopt;
  return result.error();
}

// gtest printers (found by ADL), so that failures name the enumerator.
inline void PrintTo(MpaFrameError e, std::ostream* os) {
  switch (e) {
    case MpaFrameError::kNeedMore:
      *os << "kNeedMore";
      return;
    case MpaFrameError::kBadKey:
      *os << "kBadKey";
      return;
    case MpaFrameError::kPrivateDataTooLong:
      *os << "kPrivateDataTooLong";
      return;
  }
  *os << "MpaFrameError(" << static_cast<int>(e) << ")";
}
inline void PrintTo(FpduError e, std::ostream* os) {
  switch (e) {
    case FpduError::kNeedMore:
      *os << "kNeedMore";
      return;
    case FpduError::kBadCrc:
      *os << "kBadCrc";
      return;
  }
  *os << "FpduError(" << static_cast<int>(e) << ")";
}
inline void PrintTo(DdpHeaderError e, std::ostream* os) {
  *os << (e == DdpHeaderError::kTruncated ? "kTruncated" : "DdpHeaderError(?)");
}
inline void PrintTo(TerminateError e, std::ostream* os) {
  *os << (e == TerminateError::kTruncated ? "kTruncated" : "TerminateError(?)");
}
inline void PrintTo(const TerminateCode& c, std::ostream* os) {
  *os << describe(c);
}

}  // namespace uwarp::wire
