#include "base/log.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace uwarp::log {
namespace {

bool switch_on(const char* v) {
  return v != nullptr && *v != '\0' && std::string_view(v) != "0";
}

Level level_at_load() {
  const char* value = std::getenv("UWARP_LOG");
  const Level level = level_from_environment(value, std::getenv("UWARP_RDMACM_DEBUG"),
                                             std::getenv("UWARP_IBVERBS_DEBUG"));
  if (value != nullptr && !parse_level(value)) {
    emit(Level::kWarn, "log",
         std::string("UWARP_LOG=") + value +
             " is not one of error, warn, info, debug, off: using warn");
  }
  return level;
}

}  // namespace

namespace detail {
std::atomic<Level> threshold{level_at_load()};
}  // namespace detail

std::optional<Level> parse_level(std::string_view t) {
  if (t == "error") return Level::kError;
  if (t == "warn" || t == "warning") return Level::kWarn;
  if (t == "info") return Level::kInfo;
  if (t == "debug") return Level::kDebug;
  if (t == "off" || t.empty()) return Level::kOff;
  return std::nullopt;
}

std::string_view to_string(Level level) {
  switch (level) {
    case Level::kOff:
      return "off";
    case Level::kError:
      return "error";
    case Level::kWarn:
      return "warn";
    case Level::kInfo:
      return "info";
    case Level::kDebug:
      return "debug";
  }
  return "?";
}

Level level_from_environment(const char* log_value, const char* rdmacm_debug,
                             const char* ibverbs_debug) {
  if (log_value != nullptr) return parse_level(log_value).value_or(Level::kWarn);
  if (switch_on(rdmacm_debug) || switch_on(ibverbs_debug)) return Level::kDebug;
  return Level::kOff;
}

std::string format_line(Level level, std::string_view component, std::string_view message) {
  std::string line = "uwarp: ";
  line += to_string(level);
  line += ": ";
  line += component;
  line += ": ";
  line += message;
  line += '\n';
  return line;
}

void emit(Level level, std::string_view component, std::string_view message) {
  const std::string line = format_line(level, component, message);
  const int saved = errno;  // callers may be between a failed call and its errno's use
  std::string_view rest = line;
  while (!rest.empty()) {
    const ssize_t n = ::write(2, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  errno = saved;
}

void set_threshold(Level level) {
  detail::threshold.store(level, std::memory_order_relaxed);
}
Level threshold() {
  return detail::threshold.load(std::memory_order_relaxed);
}

}  // namespace uwarp::log
