// How a cm::Listener accepts (the native API's ListenParams, with its defaults filled in), and
// what it counts.
//
// Defaults: UWARP_MAX_PENDING (a positive count; else 1024) and UWARP_MPA_REQUEST_TIMEOUT_MS (a
// positive count of milliseconds; else 5000, as Linux siw), read from the environment at each
// listen.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>

namespace uwarp::cm {

struct ListenOptions {
  int backlog = 128;
  // Connections accepted and not yet accepted or rejected by the application (in the MPA
  // exchange, or reported and unanswered): each one beyond is closed as soon as it is accepted.
  std::uint32_t max_pending = 1024;
  // From the TCP accept to a complete MPA request; then the connection is closed.
  std::chrono::milliseconds request_timeout{5000};

  static ListenOptions from_environment() {
    ListenOptions o;
    if (const long v = positive_env("UWARP_MAX_PENDING"); v > 0) o.max_pending = static_cast<std::uint32_t>(v);
    if (const long v = positive_env("UWARP_MPA_REQUEST_TIMEOUT_MS"); v > 0) o.request_timeout = std::chrono::milliseconds(v);
    return o;
  }

 private:
  // The variable as a positive number below 2^31, else 0.
  static long positive_env(const char* name) {
    const char* s = std::getenv(name);
    if (s == nullptr || *s == '\0') return 0;
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    return *end == '\0' && v > 0 && v < (1L << 31) ? v : 0;
  }
};

// A listener's counts since listen (cm::Listener::counts); the native API's ListenerStats says
// what each means.
struct ListenerCounts {
  std::uint64_t accepted = 0;
  std::uint64_t requests = 0;
  std::uint64_t pending = 0;
  std::uint64_t dropped = 0;
  std::uint64_t timed_out = 0;
  std::uint64_t accept_errors = 0;
};

}  // namespace uwarp::cm
