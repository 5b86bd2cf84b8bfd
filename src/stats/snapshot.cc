#include "stats/snapshot.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <optional>
#include <thread>

#include "stats/proc.h"

namespace uwarp::stats {
namespace {

Unexpected<std::string> failure(std::string why) {
  return Unexpected<std::string>{std::move(why)};
}

std::uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

std::string text(const char* field, std::size_t size) {
  return std::string(field, strnlen(field, size));
}

std::uint64_t load(const std::atomic<std::uint64_t>& v) {
  return v.load(std::memory_order_relaxed);
}

CounterValues read_counters(const Counters& c, std::uint32_t count) {
  CounterValues out;
  for (std::size_t i = 0; i < count; ++i) out.value[i] = load(c.value[i]);
  return out;
}

// One slot, unless it changed owner (or is free): then false.
bool read_slot(const QpSlot& s, std::uint32_t counter_count, QpSnapshot& out) {
  const std::uint32_t gen = s.generation.load(std::memory_order_acquire);
  if (s.state.load(std::memory_order_acquire) != kLive) return false;
  out.device = s.device;
  out.qp_num = s.qp_num;
  out.created_ns = s.created_ns;
  out.connections = s.connected.load(std::memory_order_acquire);
  if (out.connections != 0) {
    out.local = endpoint(s.family, s.local_addr, s.local_port);
    out.peer = endpoint(s.family, s.peer_addr, s.peer_port);
  }
  out.tcp_rtt_us = s.tcp_rtt_us.load(std::memory_order_relaxed);
  out.tcp_rttvar_us = s.tcp_rttvar_us.load(std::memory_order_relaxed);
  out.tcp_snd_cwnd = s.tcp_snd_cwnd.load(std::memory_order_relaxed);
  out.tcp_state = s.tcp_state.load(std::memory_order_relaxed);
  out.counters = read_counters(s.counters, counter_count);
  std::atomic_thread_fence(std::memory_order_acquire);
  return s.generation.load(std::memory_order_relaxed) == gen &&
         s.state.load(std::memory_order_relaxed) == kLive;
}

}  // namespace

Expected<Snapshot, std::string> read_snapshot(const void* data, std::size_t size) {
  const auto* base = static_cast<const std::uint8_t*>(data);
  if (size < sizeof(FileHeader)) return failure(std::string("file too short for its header"));
  const auto& h = *reinterpret_cast<const FileHeader*>(base);
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0)
    return failure(std::string("not a uwarp statistics file (bad magic)"));
  if (h.version != kVersion)
    return failure("statistics format version " + std::to_string(h.version) +
                   ", this reader knows version " + std::to_string(kVersion));
  if (h.ready.load(std::memory_order_acquire) != 1)
    return failure(std::string("the file is still being made"));
  if (h.header_size < sizeof(FileHeader) || h.device_size < sizeof(DeviceRecord) ||
      h.qp_size < sizeof(QpSlot) || h.counter_count > kCounterSlots ||
      h.terminate_codes > kTerminateCodes)
    return failure(std::string("record sizes smaller than the format's"));
  const auto fits = [&](std::uint64_t offset, std::uint64_t count, std::uint64_t stride) {
    return offset >= h.header_size && offset <= size && count <= (size - offset) / stride;
  };
  if (h.file_size > size || !fits(h.device_offset, h.device_count, h.device_size) ||
      !fits(h.qp_offset, h.qp_count, h.qp_size))
    return failure(std::string("tables beyond the end of the file"));

  Snapshot snap;
  snap.pid = static_cast<pid_t>(h.pid);
  snap.version = h.version;
  snap.program = text(h.program, sizeof(h.program));
  snap.library_version = text(h.library_version, sizeof(h.library_version));
  snap.created_ns = h.created_ns;
  snap.process_start_ticks = h.process_start_ticks;
  snap.counter_count = h.counter_count;
  snap.qp_slots = h.qp_count;
  snap.taken_ns = monotonic_ns();
  const auto device_at = [&](std::uint32_t i) -> const DeviceRecord& {
    return *reinterpret_cast<const DeviceRecord*>(base + h.device_offset +
                                                  std::uint64_t{i} * h.device_size);
  };
  const auto slot_at = [&](std::uint32_t i) -> const QpSlot& {
    return *reinterpret_cast<const QpSlot*>(base + h.qp_offset + std::uint64_t{i} * h.qp_size);
  };

  for (std::uint32_t i = 0; i < h.device_count; ++i) {
    const DeviceRecord& d = device_at(i);
    if (d.state.load(std::memory_order_acquire) != kLive) continue;
    // Under the device's seqlock (a QP closing meanwhile moves its counts into the totals).
    // Bounded: a writer holds it only while it adds one QP's counters.
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const std::uint32_t seq = d.seq.load(std::memory_order_acquire);
      if ((seq & 1) != 0) {
        std::this_thread::yield();
        continue;
      }
      DeviceSnapshot dev;
      dev.index = d.index;
      dev.name = text(d.name, sizeof(d.name));
      dev.io_backend = text(d.io_backend, sizeof(d.io_backend));
      dev.send_budget = d.send_budget;
      dev.opened_ns = d.opened_ns;
      dev.qps_created = load(d.qps_created);
      dev.qps_destroyed = load(d.qps_destroyed);
      dev.qps_without_slot = load(d.qps_without_slot);
      dev.terminate_codes_lost = load(d.terminate_codes_lost);
      dev.totals = read_counters(d.retired, h.counter_count);
      for (std::uint32_t t = 0; t < h.terminate_codes; ++t) {
        const TerminateCount& c = d.terminates[t];
        const std::uint32_t key = c.key.load(std::memory_order_acquire);
        if (key == 0) break;
        dev.terminates.push_back({static_cast<std::uint8_t>(key >> 16),
                                  static_cast<std::uint8_t>(key >> 8),
                                  static_cast<std::uint8_t>(key), load(c.sent), load(c.received)});
      }
      std::vector<QpSnapshot> qps;
      for (std::uint32_t q = 0; q < h.qp_count; ++q) {
        QpSnapshot s;
        if (read_slot(slot_at(q), h.counter_count, s) && s.device == dev.index) {
          dev.totals += s.counters;
          qps.push_back(std::move(s));
        }
      }
      std::atomic_thread_fence(std::memory_order_acquire);
      if (d.seq.load(std::memory_order_relaxed) != seq) continue;
      snap.devices.push_back(std::move(dev));
      for (QpSnapshot& s : qps) snap.qps.push_back(std::move(s));
      break;
    }
  }
  return snap;
}

Expected<std::string, std::string> find_file(pid_t pid) {
  for (const std::string& dir : directories()) {
    const std::string path = dir + "/" + std::to_string(pid);
    if (::access(path.c_str(), R_OK) == 0) return path;
  }
  return failure("no uwarp statistics for process " + std::to_string(pid) +
                 " (not using uwarp, started with UWARP_STATS=0, or another user's)");
}

Expected<Snapshot, std::string> read_process(pid_t pid) {
  Expected<std::string, std::string> path = find_file(pid);
  if (!path) return failure(path.error());
  const int fd = ::open(path->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return failure(*path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    return failure(*path + ": empty");
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return failure(*path + ": " + std::strerror(errno));
  Expected<Snapshot, std::string> snap = read_snapshot(p, size);
  ::munmap(p, size);
  if (snap && snap->pid != pid)
    return failure(*path + ": written by process " + std::to_string(snap->pid));
  // A file that outlived its process (killed by a signal): the PID is free, or another
  // process's now.
  const std::optional<std::uint64_t> started = process_start_ticks(pid);
  if (snap &&
      (!started || (snap->process_start_ticks != 0 && *started != snap->process_start_ticks)))
    return failure("process " + std::to_string(pid) + " is gone (" + *path +
                   " is what it left behind)");
  return snap;
}

std::vector<ProcessFileInfo> list_processes(bool remove_stale) {
  std::vector<ProcessFileInfo> out;
  for (const std::string& dir : directories()) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
      const auto pid = static_cast<pid_t>(std::stol(name));
      if (std::any_of(out.begin(), out.end(), [&](const auto& p) { return p.pid == pid; }))
        continue;
      const std::string path = dir + "/" + name;
      // The writer's start time against the PID's: a file that outlived its process is stale.
      FileHeader h{};
      bool stale = false;
      if (const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW); fd >= 0) {
        const ssize_t n = ::read(fd, &h, sizeof(h));
        ::close(fd);
        if (n != static_cast<ssize_t>(sizeof(h)) ||
            std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0)
          continue;  // not ours, or being made
        const std::optional<std::uint64_t> started = process_start_ticks(pid);
        stale = !started || (h.process_start_ticks != 0 && *started != h.process_start_ticks);
      } else {
        continue;
      }
      if (stale) {
        if (remove_stale) ::unlink(path.c_str());
        continue;
      }
      out.push_back({pid, path, text(h.program, sizeof(h.program))});
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  return out;
}

}  // namespace uwarp::stats
