// The reader of statistics files (stats/layout.h, docs/statistics.md): which processes of this
// user have one, and a snapshot of one process's devices and QPs. Used by `uwarp stat`.
//
// A snapshot is read without any lock of the writer: each value is whole; a device's totals are
// taken under its seqlock (DeviceRecord::seq) so that a QP closing meanwhile is counted once;
// a slot that changed owner during its read is left out.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stats/layout.h"
#include "uwarp/expected.h"

namespace uwarp::stats {

struct CounterValues {
  std::array<std::uint64_t, kCounterSlots> value{};
  std::uint64_t operator[](Counter c) const { return value[static_cast<std::size_t>(c)]; }
  std::uint64_t& operator[](Counter c) { return value[static_cast<std::size_t>(c)]; }
  CounterValues& operator+=(const CounterValues& o) {
    for (std::size_t i = 0; i < kCounterSlots; ++i) value[i] += o.value[i];
    return *this;
  }
};

struct TerminateValues {
  std::uint8_t layer = 0, etype = 0, ecode = 0;
  std::uint64_t sent = 0, received = 0;
};

struct DeviceSnapshot {
  std::uint32_t index = 0;
  std::string name, io_backend;
  std::uint32_t send_budget = 0;
  std::uint64_t opened_ns = 0;
  std::uint64_t qps_created = 0, qps_destroyed = 0, qps_without_slot = 0;
  std::uint64_t terminate_codes_lost = 0;
  CounterValues totals;  // the QPs gone plus the live ones
  std::vector<TerminateValues> terminates;
};

struct QpSnapshot {
  std::uint32_t device = 0, qp_num = 0;
  std::uint64_t created_ns = 0;
  std::uint32_t connections = 0;
  std::string local, peer;  // "192.0.2.1:7174", "[2001:db8::1]:7174"; empty before connecting
  std::uint32_t tcp_rtt_us = 0, tcp_rttvar_us = 0, tcp_snd_cwnd = 0, tcp_state = 0;
  CounterValues counters;
};

struct Snapshot {
  pid_t pid = 0;
  std::uint32_t version = 0;
  std::string program, library_version;
  std::uint64_t created_ns = 0;
  std::uint64_t process_start_ticks = 0;  // of the writer (/proc/PID/stat field 22)
  std::uint32_t counter_count = 0;  // the counters the writer knows (later ones read 0)
  std::uint32_t qp_slots = 0;       // the size of the QP table
  std::uint64_t taken_ns = 0;       // CLOCK_MONOTONIC, for rates between snapshots
  std::vector<DeviceSnapshot> devices;
  std::vector<QpSnapshot> qps;  // by device, then slot
};

// Reads a file image (mapped or copied) of `size` bytes: checks magic, version and sizes.
Expected<Snapshot, std::string> read_snapshot(const void* data, std::size_t size);

struct ProcessFileInfo {
  pid_t pid = 0;
  std::string path;
  std::string program;  // from the file
};
// The statistics file of `pid` if its process is alive, in any of directories().
Expected<std::string, std::string> find_file(pid_t pid);
// Maps `pid`'s file and reads it; an error if the process that wrote it is gone.
Expected<Snapshot, std::string> read_process(pid_t pid);
// The processes with a statistics file, by PID. The files of processes that are gone (no such
// PID, or one that started at another time) are removed when remove_stale, else skipped.
std::vector<ProcessFileInfo> list_processes(bool remove_stale);

}  // namespace uwarp::stats
