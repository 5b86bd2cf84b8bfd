#include "verbs/remote_terminate.h"

#include <cstdio>

namespace uwarp::verbs {

WcStatus status_for_remote_terminate(std::uint32_t raw_control) {
  const std::uint8_t hi = static_cast<std::uint8_t>(raw_control >> 28);
  const std::uint8_t lo = static_cast<std::uint8_t>((raw_control >> 24) & 0x0F);
  const std::uint8_t ecode = static_cast<std::uint8_t>(raw_control >> 16);
  // RFC layout first (layer, etype); if that is no valid pair, siw's swapped layout. siw writes
  // the word with little-endian bitfields: its M, D and R flags land in the low three bits of the
  // third byte, which RFC 5040 reserves (zero), while the RFC's flags (0xE0) stay clear. Such a
  // word is read the siw way even when the RFC reading is a valid pair too (siw's RDMAP / 1
  // arrives as 0x10, which would read as DDP / 0).
  auto valid = [](std::uint8_t layer, std::uint8_t etype) {
    return (layer == 0 && etype <= 2) || (layer == 1 && etype <= 2) || (layer == 2 && etype == 0);
  };
  const std::uint8_t flags = static_cast<std::uint8_t>(raw_control >> 8);
  const bool siw_layout = (flags & 0x07) != 0 && (flags & 0xE0) == 0;
  std::uint8_t layer = hi;
  std::uint8_t etype = lo;
  if ((siw_layout || !valid(hi, lo)) && valid(lo, hi)) {
    layer = lo;
    etype = hi;
  }
  if ((layer == 0 || layer == 1) && etype == 1) return WcStatus::kRemoteAccessError;
  if (layer == 0 && etype == 2 && (ecode == 0x05 || ecode == 0x06))
    return WcStatus::kRemoteInvalidRequestError;
  if (layer == 1 && etype == 2) return WcStatus::kRemoteInvalidRequestError;
  return WcStatus::kRemoteOperationError;
}

std::string describe_remote_terminate(const wire::TerminateMessage& m) {
  char detail[96];
  if (m.has_control) {
    std::snprintf(detail, sizeof detail, "peer sent Terminate, control word 0x%08x (%s)",
                  m.raw_control, wire::describe(m.code).c_str());
  } else {
    std::snprintf(detail, sizeof detail, "peer sent Terminate without a control word");
  }
  return detail;
}

}  // namespace uwarp::verbs
