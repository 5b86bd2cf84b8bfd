// uwarp's log: one switch, UWARP_LOG=error|warn|info|debug (off when unset), and one line per
// message on stderr: "uwarp: <level>: <component>: <message>". Components name the layer that
// speaks ("cm", "qp", "pcap", "rdmacm", "ibverbs"); a message about a connection names its QP
// number and its peer's address.
//
// Cost when off: a caller tests enabled(level), one relaxed load and a predictable branch, and
// builds its message only behind it:
//
//   if (log::enabled(log::Level::kInfo)) log::emit(log::Level::kInfo, "cm", "QP 5: ...");
//
// The level is read from the environment once, when the library is loaded. UWARP_RDMACM_DEBUG
// and UWARP_IBVERBS_DEBUG (uwarp-run --debug), the older switches, mean UWARP_LOG=debug when
// UWARP_LOG is unset. Output: one write(2) of the whole line to fd 2, so that lines of threads
// do not interleave; nothing else.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace uwarp::log {

enum class Level : std::uint8_t { kOff = 0, kError = 1, kWarn = 2, kInfo = 3, kDebug = 4 };

namespace detail {
extern std::atomic<Level> threshold;
}  // namespace detail

// Whether messages of `level` are written.
inline bool enabled(Level level) {
  return level <= detail::threshold.load(std::memory_order_relaxed) && level != Level::kOff;
}

// "error", "warn", "info", "debug", "off" ("" too); nullopt for anything else.
std::optional<Level> parse_level(std::string_view text);
std::string_view to_string(Level level);
// The level the environment asks for: UWARP_LOG (`log_value`), else debug if either old switch
// (`rdmacm_debug`, `ibverbs_debug`: set, not empty and not "0") is on, else off. An UWARP_LOG
// that parse_level does not know gives warn (and the caller says so).
Level level_from_environment(const char* log_value, const char* rdmacm_debug,
                             const char* ibverbs_debug);

// The line written for a message, with its newline.
std::string format_line(Level level, std::string_view component, std::string_view message);
// Writes the line now, whatever the threshold (errors the user must see: a pcap file that
// cannot be opened).
void emit(Level level, std::string_view component, std::string_view message);
// For tests, and for programs that choose their level themselves.
void set_threshold(Level level);
Level threshold();

}  // namespace uwarp::log
