#include "io/pcap_recorder.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/log.h"
#include "base/mutex.h"
#include "trace/pcap_format.h"
#include "trace/tcp_flow.h"

namespace uwarp::io {
namespace pcap_detail {

namespace {

void stop_in_child() {
  enabled.store(false, std::memory_order_relaxed);
}

bool tracing_at_load() {
  const char* v = std::getenv("UWARP_PCAP");
  if (v == nullptr || *v == '\0') return false;
  // A forked child shares the file and the recorder's state as they were: it traces nothing.
  ::pthread_atfork(nullptr, nullptr, stop_in_child);
  return true;
}

}  // namespace

std::atomic<bool> enabled{tracing_at_load()};

}  // namespace pcap_detail

namespace {

constexpr std::size_t kWakeWriterBytes = 1 << 20;
constexpr std::size_t kMaxPendingBytes = 16 << 20;
constexpr auto kFlushPeriod = std::chrono::milliseconds(200);

std::optional<trace::Endpoint> endpoint_of(const sockaddr_storage& s) {
  trace::Endpoint e;
  if (s.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(s);
    std::memcpy(e.address.data(), &a.sin_addr, 4);
    e.port = ntohs(a.sin_port);
    return e;
  }
  if (s.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(s);
    e.port = ntohs(a.sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&a.sin6_addr)) {  // the IPv4 peer of a dual-stack socket
      std::memcpy(e.address.data(), a.sin6_addr.s6_addr + 12, 4);
    } else {
      std::memcpy(e.address.data(), a.sin6_addr.s6_addr, 16);
      e.ipv6 = true;
    }
    return e;
  }
  return std::nullopt;
}

trace::PacketTime now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return {static_cast<std::uint32_t>(ts.tv_sec), static_cast<std::uint32_t>(ts.tv_nsec / 1000)};
}

bool write_all(int fd, const std::vector<std::uint8_t>& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

class Recorder {
 public:
  // The process's recorder, made (with its file and writer thread) on first use; nullptr if the
  // file could not be made (then tracing is off).
  static Recorder* get();

  void bytes(int fd, bool from_local, std::span<const iovec> iov, std::size_t n,
             ConstByteSpan bytes);
  void closing(int fd);
  void flush();

 private:
  struct Flow {
    trace::TcpFlow packets;
    bool mirror = false;  // the other end of a flow this process traces already
  };

  explicit Recorder(int file) : file_(file) { trace::append_file_header(pending_); }
  Flow* flow_locked(int fd) REQUIRES(mu_);
  void writer_loop();

  const int file_;
  Mutex mu_;
  std::condition_variable_any wake_writer_;  // pending_ passed kWakeWriterBytes
  std::condition_variable_any drained_;      // the writer took pending_
  std::unordered_map<int, Flow> flows_ GUARDED_BY(mu_);
  std::vector<std::uint8_t> pending_ GUARDED_BY(mu_);  // whole records, not yet written
  std::vector<std::uint8_t> gather_ GUARDED_BY(mu_);   // sent iovecs, made contiguous
  Mutex write_mu_;  // taken before mu_ by whoever writes: chunks reach the file in order
  bool failed_ GUARDED_BY(write_mu_) = false;
};

std::atomic<Recorder*> g_recorder{nullptr};
Mutex g_make_mu;
bool g_made GUARDED_BY(g_make_mu) = false;

void flush_at_exit() {
  if (Recorder* r = g_recorder.load(std::memory_order_acquire)) r->flush();
}

Recorder* Recorder::get() {
  if (Recorder* r = g_recorder.load(std::memory_order_acquire)) return r;
  MutexLock lock(g_make_mu);
  if (g_made) return g_recorder.load(std::memory_order_relaxed);
  g_made = true;
  const char* pattern = std::getenv("UWARP_PCAP");
  if (pattern == nullptr || *pattern == '\0') {
    pcap_detail::enabled.store(false, std::memory_order_relaxed);
    return nullptr;
  }
  const std::string path = pcap_file_name(pattern, static_cast<long>(::getpid()));
  const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (file < 0) {
    log::emit(
        log::Level::kError, "pcap",
        "cannot open UWARP_PCAP file " + path + ": " + std::strerror(errno) + "; not tracing");
    pcap_detail::enabled.store(false, std::memory_order_relaxed);
    return nullptr;
  }
  // Never destroyed: the writer thread and late callers (other threads during exit) may still
  // reach it after exit's handlers.
  auto* r = new Recorder(file);
  std::thread([r] { r->writer_loop(); }).detach();
  std::atexit(flush_at_exit);
  g_recorder.store(r, std::memory_order_release);
  if (log::enabled(log::Level::kInfo)) log::emit(log::Level::kInfo, "pcap", "tracing to " + path);
  return r;
}

Recorder::Flow* Recorder::flow_locked(int fd) {
  if (auto it = flows_.find(fd); it != flows_.end()) return &it->second;
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
    return nullptr;  // not a connected socket
  }
  const auto l = endpoint_of(local);
  const auto p = endpoint_of(peer);
  if (!l || !p) return nullptr;
  Flow flow{trace::TcpFlow(*l, *p)};
  for (const auto& [other_fd, other] : flows_) {
    if (other.packets.local() == *p && other.packets.peer() == *l) flow.mirror = true;
  }
  return &flows_.emplace(fd, std::move(flow)).first->second;
}

void Recorder::bytes(int fd, bool from_local, std::span<const iovec> iov, std::size_t n,
                     ConstByteSpan bytes) {
  MutexLock lock(mu_);
  Flow* flow = flow_locked(fd);
  if (flow == nullptr || flow->mirror) return;
  if (!iov.empty()) {
    gather_.clear();
    for (const iovec& piece : iov) {
      if (gather_.size() == n) break;
      const auto* p = static_cast<const std::uint8_t*>(piece.iov_base);
      gather_.insert(gather_.end(), p, p + std::min(piece.iov_len, n - gather_.size()));
    }
    bytes = gather_;
  }
  flow->packets.bytes(now(), from_local, bytes, pending_);
  if (pending_.size() >= kWakeWriterBytes) wake_writer_.notify_one();
  // Bounded memory: wait (rarely) for the writer rather than drop bytes from the trace.
  while (pending_.size() > kMaxPendingBytes) drained_.wait_for(mu_, kFlushPeriod);
}

void Recorder::closing(int fd) {
  MutexLock lock(mu_);
  auto it = flows_.find(fd);
  if (it == flows_.end()) return;
  if (!it->second.mirror) it->second.packets.closed(now(), pending_);
  flows_.erase(it);
}

void Recorder::flush() {
  MutexLock write_lock(write_mu_);
  std::vector<std::uint8_t> chunk;
  {
    MutexLock lock(mu_);
    chunk.swap(pending_);
    drained_.notify_all();
  }
  if (chunk.empty() || failed_) return;
  if (!write_all(file_, chunk)) {
    failed_ = true;
    log::emit(log::Level::kError, "pcap",
              std::string("writing the UWARP_PCAP file failed: ") + std::strerror(errno) +
                  "; tracing stops");
    pcap_detail::enabled.store(false, std::memory_order_relaxed);
  }
  chunk.clear();
  MutexLock lock(mu_);
  if (pending_.empty() && pending_.capacity() < chunk.capacity()) pending_.swap(chunk);  // reuse
}

void Recorder::writer_loop() {
  for (;;) {
    {
      MutexLock lock(mu_);
      wake_writer_.wait_for(mu_, kFlushPeriod,
                            [this]() REQUIRES(mu_) { return pending_.size() >= kWakeWriterBytes; });
    }
    flush();
  }
}

}  // namespace

namespace pcap_detail {

void sent(int fd, std::span<const iovec> iov, std::size_t n) {
  if (n == 0) return;
  if (Recorder* r = Recorder::get()) r->bytes(fd, true, iov, n, {});
}

void sent(int fd, ConstByteSpan bytes) {
  if (bytes.empty()) return;
  if (Recorder* r = Recorder::get()) r->bytes(fd, true, {}, 0, bytes);
}

void received(int fd, ConstByteSpan bytes) {
  if (bytes.empty()) return;
  if (Recorder* r = Recorder::get()) r->bytes(fd, false, {}, 0, bytes);
}

void closing(int fd) {
  if (Recorder* r = g_recorder.load(std::memory_order_acquire)) r->closing(fd);
}

}  // namespace pcap_detail

std::string pcap_file_name(std::string_view pattern, long pid) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'p') {
      out += std::to_string(pid);
      ++i;
    } else if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == '%') {
      out += '%';
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

void pcap_flush() {
  if (Recorder* r = g_recorder.load(std::memory_order_acquire)) r->flush();
}

}  // namespace uwarp::io
