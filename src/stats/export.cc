#include "stats/export.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <vector>

#include "base/mutex.h"
#include "stats/count.h"
#include "stats/proc.h"

#ifndef UWARP_VERSION_STRING
#define UWARP_VERSION_STRING "unknown"
#endif

namespace uwarp::stats {
namespace {

std::uint64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

void copy_text(char* to, std::size_t size, std::string_view from) {
  const std::size_t n = std::min(size - 1, from.size());
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

std::uint32_t qp_slots_from_environment() {
  const char* v = std::getenv("UWARP_STATS_QPS");
  if (v == nullptr || *v == '\0') return kDefaultQpSlots;
  char* end = nullptr;
  const unsigned long n = std::strtoul(v, &end, 10);
  if (*end != '\0') return kDefaultQpSlots;
  return static_cast<std::uint32_t>(std::min<unsigned long>(n, kMaxQpSlots));
}

bool disabled_by_environment() {
  const char* v = std::getenv("UWARP_STATS");
  return v != nullptr && std::strcmp(v, "0") == 0;
}

// A directory for the file: made 0700 if missing; used only if it is a real directory of ours
// that no one else may enter.
bool usable_directory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return false;
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return false;
  return S_ISDIR(st.st_mode) && st.st_uid == ::getuid() && (st.st_mode & 077) == 0;
}

// Removes the file when the process exits (a static object's destructor), unless the process is
// a child that inherited the path through fork.
struct FileRemover {
  char path[256] = {};
  pid_t owner = 0;
  ~FileRemover() {
    if (path[0] != '\0' && ::getpid() == owner) ::unlink(path);
  }
};
FileRemover remover;

// The process's file: made on first use, never unmapped (a device closed by a static object's
// destructor after the file was removed still writes to valid memory).
class ProcessFile {
 public:
  static ProcessFile& get() {
    static ProcessFile* file = new ProcessFile();
    return *file;
  }
  Mutex& mutex() RETURN_CAPABILITY(mu_) { return mu_; }

  DeviceRecord* take_device() REQUIRES(mu_) {
    if (free_devices_.empty()) return nullptr;
    const std::uint32_t i = free_devices_.back();
    free_devices_.pop_back();
    return device_at(i);
  }
  void free_device(DeviceRecord* d) REQUIRES(mu_) {
    d->state.store(kFree, std::memory_order_release);
    free_devices_.push_back(d->index);
    std::sort(free_devices_.begin(), free_devices_.end(), std::greater<>());
  }
  QpSlot* take_qp() REQUIRES(mu_) {
    if (free_qps_.empty()) return nullptr;
    const std::uint32_t i = free_qps_.back();
    free_qps_.pop_back();
    return qp_at(i);
  }
  void free_qp(QpSlot* s) REQUIRES(mu_) {
    const auto i = static_cast<std::uint32_t>(
        (reinterpret_cast<std::uint8_t*>(s) - base_ - header()->qp_offset) / sizeof(QpSlot));
    s->state.store(kFree, std::memory_order_release);
    s->generation.fetch_add(1, std::memory_order_release);
    free_qps_.push_back(i);
    // Lowest first: the table stays dense, and so do the pages it touches.
    if (free_qps_.size() > 1 && free_qps_[free_qps_.size() - 2] < i)
      std::sort(free_qps_.begin(), free_qps_.end(), std::greater<>());
  }
  std::string path() const { return path_; }

 private:
  ProcessFile() {
    if (disabled_by_environment()) return;
    const std::uint32_t qps = qp_slots_from_environment();
    const std::uint64_t device_offset = sizeof(FileHeader);
    const std::uint64_t qp_offset =
        device_offset + std::uint64_t{kDeviceRecords} * sizeof(DeviceRecord);
    const std::uint64_t size = qp_offset + std::uint64_t{qps} * sizeof(QpSlot);
    for (const std::string& dir : directories()) {
      if (!usable_directory(dir)) continue;
      if (map(dir + "/" + std::to_string(::getpid()), size)) break;
    }
    if (base_ == nullptr) return;
    FileHeader* h = header();
    std::memcpy(h->magic, kMagic, sizeof(kMagic));
    h->version = kVersion;
    h->header_size = sizeof(FileHeader);
    h->device_size = sizeof(DeviceRecord);
    h->device_count = kDeviceRecords;
    h->device_offset = device_offset;
    h->qp_size = sizeof(QpSlot);
    h->qp_count = qps;
    h->qp_offset = qp_offset;
    h->counter_count = kCounterCount;
    h->terminate_codes = kTerminateCodes;
    h->file_size = size;
    h->pid = static_cast<std::uint32_t>(::getpid());
    h->process_start_ticks = process_start_ticks(::getpid()).value_or(0);
    h->created_ns = realtime_ns();
    copy_text(h->library_version, sizeof(h->library_version), UWARP_VERSION_STRING);
    copy_text(h->program, sizeof(h->program), process_name(::getpid()));
    for (std::uint32_t i = 0; i < kDeviceRecords; ++i) device_at(i)->index = i;
    for (std::uint32_t i = kDeviceRecords; i > 0; --i) free_devices_.push_back(i - 1);
    free_qps_.reserve(qps);
    for (std::uint32_t i = qps; i > 0; --i) free_qps_.push_back(i - 1);
    h->ready.store(1, std::memory_order_release);
  }

  bool map(const std::string& path, std::uint64_t size) {
    if (path.size() >= sizeof(remover.path)) return false;
    int fd = -1;
    for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
      fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
      // A file of an earlier process with this PID: it is gone (we have the PID now).
      if (fd < 0 && errno == EEXIST) ::unlink(path.c_str());
    }
    if (fd < 0) return false;
    void* p = MAP_FAILED;
    if (::ftruncate(fd, static_cast<off_t>(size)) == 0)
      p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) {
      ::unlink(path.c_str());
      return false;
    }
    base_ = static_cast<std::uint8_t*>(p);
    path_ = path;
    copy_text(remover.path, sizeof(remover.path), path);
    remover.owner = ::getpid();
    return true;
  }

  FileHeader* header() { return reinterpret_cast<FileHeader*>(base_); }
  DeviceRecord* device_at(std::uint32_t i) {
    return reinterpret_cast<DeviceRecord*>(base_ + header()->device_offset) + i;
  }
  QpSlot* qp_at(std::uint32_t i) {
    return reinterpret_cast<QpSlot*>(base_ + header()->qp_offset) + i;
  }

  Mutex mu_;
  std::uint8_t* base_ = nullptr;  // null: no file
  std::string path_;
  std::vector<std::uint32_t> free_devices_ GUARDED_BY(mu_);  // highest first, popped from the back
  std::vector<std::uint32_t> free_qps_ GUARDED_BY(mu_);
};

void reset_counters(Counters& c) {
  for (auto& v : c.value) v.store(0, std::memory_order_relaxed);
}

}  // namespace

DeviceStats::DeviceStats() {
  ProcessFile& file = ProcessFile::get();
  MutexLock lock(file.mutex());
  record_ = file.take_device();
  if (record_ == nullptr) {
    private_ = std::make_unique<DeviceRecord>();
    record_ = private_.get();
    record_->index = kDeviceRecords;  // not among the file's
  }
  DeviceRecord& d = *record_;
  d.seq.store(0, std::memory_order_relaxed);
  d.send_budget = 0;
  d.opened_ns = realtime_ns();
  copy_text(d.name, sizeof(d.name), "uwarp0");
  copy_text(d.io_backend, sizeof(d.io_backend), "");
  d.qps_created.store(0, std::memory_order_relaxed);
  d.qps_destroyed.store(0, std::memory_order_relaxed);
  d.qps_without_slot.store(0, std::memory_order_relaxed);
  d.terminate_codes_lost.store(0, std::memory_order_relaxed);
  reset_counters(d.retired);
  for (TerminateCount& t : d.terminates) {
    t.key.store(0, std::memory_order_relaxed);
    t.sent.store(0, std::memory_order_relaxed);
    t.received.store(0, std::memory_order_relaxed);
  }
  d.state.store(kLive, std::memory_order_release);
}

DeviceStats::~DeviceStats() {
  ProcessFile& file = ProcessFile::get();
  MutexLock lock(file.mutex());
  if (private_ == nullptr) file.free_device(record_);
}

void DeviceStats::set_io(std::string_view io_backend, std::size_t send_budget) {
  ProcessFile& file = ProcessFile::get();
  MutexLock lock(file.mutex());
  // Fixed fields change only under the seqlock, so that a reader never takes a torn name.
  DeviceRecord& d = *record_;
  const std::uint32_t s = d.seq.load(std::memory_order_relaxed);
  d.seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  copy_text(d.io_backend, sizeof(d.io_backend), io_backend);
  d.send_budget = static_cast<std::uint32_t>(std::min<std::size_t>(send_budget, UINT32_MAX));
  d.seq.store(s + 2, std::memory_order_release);
}

void DeviceStats::count_terminate(std::uint32_t key, bool sent) {
  ProcessFile& file = ProcessFile::get();
  MutexLock lock(file.mutex());
  DeviceRecord& d = *record_;
  for (TerminateCount& t : d.terminates) {
    const std::uint32_t k = t.key.load(std::memory_order_relaxed);
    if (k == 0) t.key.store(key, std::memory_order_release);
    if (k == 0 || k == key) {
      add(sent ? t.sent : t.received);
      return;
    }
  }
  add(d.terminate_codes_lost);
}

Counters& discarded() {
  static Counters counters{};
  return counters;
}

std::string DeviceStats::file_path() {
  return ProcessFile::get().path();
}

std::string QpStats::endpoints() const {
  const QpSlot& s = *slot_;
  if (s.connected.load(std::memory_order_acquire) == 0) return {};
  return " (local " + endpoint(s.family, s.local_addr, s.local_port) + ", peer " +
         endpoint(s.family, s.peer_addr, s.peer_port) + ")";
}

QpStats::QpStats(DeviceStats& device, std::uint32_t qp_num) : device_(device), qp_num_(qp_num) {
  ProcessFile& file = ProcessFile::get();
  MutexLock lock(file.mutex());
  DeviceRecord& d = device.record();
  slot_ = device.private_ == nullptr ? file.take_qp() : nullptr;
  if (slot_ == nullptr) {
    private_ = std::make_unique<QpSlot>();
    slot_ = private_.get();
    add(d.qps_without_slot);
  }
  QpSlot& s = *slot_;
  s.generation.fetch_add(1, std::memory_order_relaxed);
  s.device = d.index;
  s.qp_num = qp_num;
  s.created_ns = realtime_ns();
  s.connected.store(0, std::memory_order_relaxed);
  s.family = 0;
  s.local_port = s.peer_port = 0;
  std::memset(s.local_addr, 0, sizeof(s.local_addr));
  std::memset(s.peer_addr, 0, sizeof(s.peer_addr));
  s.tcp_rtt_us.store(0, std::memory_order_relaxed);
  s.tcp_rttvar_us.store(0, std::memory_order_relaxed);
  s.tcp_snd_cwnd.store(0, std::memory_order_relaxed);
  s.tcp_state.store(0, std::memory_order_relaxed);
  reset_counters(s.counters);
  add(d.qps_created);
  s.state.store(kLive, std::memory_order_release);
}

QpStats::~QpStats() {
  ProcessFile& file = ProcessFile::get();
  MutexLock lock(file.mutex());
  DeviceRecord& d = device_.record();
  // Under the device's seqlock: a reader sees the counts either in the slot or in the totals.
  const std::uint32_t seq = d.seq.load(std::memory_order_relaxed);
  d.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (std::size_t i = 0; i < kCounterSlots; ++i)
    add(d.retired.value[i], slot_->counters.value[i].load(std::memory_order_relaxed));
  if (private_ == nullptr) file.free_qp(slot_);
  add(d.qps_destroyed);
  d.seq.store(seq + 2, std::memory_order_release);
}

void QpStats::terminate_sent(std::uint8_t layer, std::uint8_t etype, std::uint8_t ecode) {
  add(counters(), Counter::kTerminatesSent);
  // RFC 5044's LLP error "MPA CRC error" (wire::term::kLlpBadCrc).
  if (layer == 2 && etype == 0 && ecode == 0x02) add(counters(), Counter::kCrcErrors);
  device_.count_terminate(terminate_key(layer, etype, ecode), true);
}

void QpStats::terminate_received(std::uint8_t layer, std::uint8_t etype, std::uint8_t ecode) {
  add(counters(), Counter::kTerminatesReceived);
  device_.count_terminate(terminate_key(layer, etype, ecode), false);
}

}  // namespace uwarp::stats
