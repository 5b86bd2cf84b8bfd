// What /proc says about a process, for the statistics file's writer (who it is) and readers
// (whether the process that wrote a file is still the one with its PID).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace uwarp::stats {

// Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot. nullopt if
// there is no such process.
std::optional<std::uint64_t> process_start_ticks(pid_t pid);
// /proc/PID/comm without its newline ("" if unreadable).
std::string process_name(pid_t pid);

}  // namespace uwarp::stats
