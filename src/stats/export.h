// The writer of the process's statistics file (stats/layout.h, docs/statistics.md): a device
// record per open device (DeviceStats, held by verbs::Device) and a QP slot per QP (QpStats,
// held by verbs::QueuePair), in a shared-memory file that another process of the same user reads
// (`uwarp stat`). The file is made when the first device opens, mode 0600 in a directory of
// mode 0700, and removed when the process exits normally; a reader removes the file of a process
// that is gone.
//
// Full tables: a device or QP that finds no free record counts in private memory instead (its
// counters are the same to the library, and invisible to readers); a QP without a slot adds its
// counters to its device's totals when it closes and is counted in qps_without_slot. With
// UWARP_STATS=0 no file is made and every record is private. UWARP_STATS_QPS sets the size of
// the QP table (default kDefaultQpSlots).
//
// Threads: the constructors, destructors and Terminate counts take the process file's mutex (not
// on the data path). The counters themselves are written by the QP's single writer
// (stats/count.h) without a lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "stats/layout.h"

namespace uwarp::stats {

inline constexpr std::uint32_t kDefaultQpSlots = 4096;
inline constexpr std::uint32_t kMaxQpSlots = 1u << 20;
inline constexpr std::uint32_t kDeviceRecords = 16;

class DeviceStats {
 public:
  DeviceStats();
  ~DeviceStats();
  DeviceStats(const DeviceStats&) = delete;
  DeviceStats& operator=(const DeviceStats&) = delete;

  // What the runtime chose for the device (any thread, before its QPs carry traffic).
  void set_io(std::string_view io_backend, std::size_t send_budget);
  DeviceRecord& record() { return *record_; }
  // Counts a Terminate by code (any thread; a lock of its own while a new code takes an entry).
  void count_terminate(std::uint32_t key, bool sent);
  // The file this device's record is in, empty when it counts in private memory.
  static std::string file_path();

 private:
  friend class QpStats;
  DeviceRecord* record_;
  std::unique_ptr<DeviceRecord> private_;  // when the file has no record for it
};

class QpStats {
 public:
  QpStats(DeviceStats& device, std::uint32_t qp_num);
  ~QpStats();
  QpStats(const QpStats&) = delete;
  QpStats& operator=(const QpStats&) = delete;

  std::uint32_t qp_num() const { return qp_num_; }
  Counters& counters() { return slot_->counters; }
  QpSlot& slot() { return *slot_; }
  bool exported() const { return private_ == nullptr; }
  // A Terminate this QP sent or received (the QP lock held): counted in the QP and by code in its
  // device; a sent LLP "bad CRC" also counts as a CRC error.
  void terminate_sent(std::uint8_t layer, std::uint8_t etype, std::uint8_t ecode);
  void terminate_received(std::uint8_t layer, std::uint8_t etype, std::uint8_t ecode);
  // " (local A, peer B)" once the QP has had a connection, else empty: for log lines.
  std::string endpoints() const;

 private:
  DeviceStats& device_;
  const std::uint32_t qp_num_;
  QpSlot* slot_;
  std::unique_ptr<QpSlot> private_;  // when the table is full or there is no file
};

// Counters that no file holds and no one reads, for pieces made without a QP (unit tests of the
// verbs layer). Writers on several threads may lose counts in it; nothing depends on them.
Counters& discarded();

}  // namespace uwarp::stats
