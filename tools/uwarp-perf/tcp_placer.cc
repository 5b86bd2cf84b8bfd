#include "tcp_placer.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <mutex>

#include "tcp_io.h"

namespace uwarp::perf {
namespace {

// The placers whose sockets signal (kSignal), by socket: the handler finds its placer from the
// signal's si_fd. The handler is installed once and stays (this is a measuring tool).
constexpr int kMaxSignalledFd = 4096;
std::array<std::atomic<TcpPlacer*>, kMaxSignalledFd> g_signalled{};
bool signallable(int fd) { return fd >= 0 && fd < kMaxSignalledFd; }
std::once_flag g_handler_installed;
bool g_handler_ok = false;

// Bounds a receiving thread's blocking recv, so that a silent peer cannot hold it forever.
void set_receive_timeout(int fd, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

constexpr int kReceiveTimeoutMs = 20000;

}  // namespace

TcpPlacer::TcpPlacer(Placer kind, int fd, std::uint8_t* dst, std::uint32_t size, std::uint32_t count)
    : kind_(kind), fd_(fd), dst_(dst), size_(size), count_(count) {
  if (kind_ == Placer::kThread) {
    set_receive_timeout(fd_, kReceiveTimeoutMs);
    thread_ = std::thread([this] { receive_loop(); });
    ok_ = true;
    return;
  }
  if (kind_ != Placer::kSignal || !signallable(fd_)) return;
  std::call_once(g_handler_installed, [] {
    struct sigaction action {};
    action.sa_sigaction = &TcpPlacer::on_signal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    g_handler_ok = ::sigaction(SIGIO, &action, nullptr) == 0;
  });
  g_signalled[fd_].store(this, std::memory_order_release);
  const f_owner_ex owner{F_OWNER_TID, static_cast<pid_t>(::gettid())};
  const int flags = ::fcntl(fd_, F_GETFL);
  ok_ = g_handler_ok && ::fcntl(fd_, F_SETOWN_EX, &owner) == 0 && ::fcntl(fd_, F_SETSIG, SIGIO) == 0 &&
        flags >= 0 && ::fcntl(fd_, F_SETFL, flags | O_ASYNC) == 0;
  // Bytes that came before the socket signalled are taken now; later ones raise SIGIO.
  sigset_t sigio;
  sigemptyset(&sigio);
  sigaddset(&sigio, SIGIO);
  pthread_sigmask(SIG_BLOCK, &sigio, nullptr);
  if (ok_ && !take_available()) failed_ = true;
  pthread_sigmask(SIG_UNBLOCK, &sigio, nullptr);
}

TcpPlacer::~TcpPlacer() {
  if (thread_.joinable()) thread_.join();
  if (kind_ == Placer::kThread) set_receive_timeout(fd_, 0);
  if (kind_ != Placer::kSignal || !signallable(fd_)) return;
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_ASYNC);
  g_signalled[fd_].store(nullptr, std::memory_order_release);
}

void TcpPlacer::receive_loop() {
  for (std::uint32_t i = 0; i < count_; ++i) {
    if (!recv_all(fd_, dst_, size_)) {
      failed_.store(true, std::memory_order_release);
      return;
    }
    placed_.store(i + 1, std::memory_order_release);
  }
}

void TcpPlacer::on_signal(int, siginfo_t* info, void*) {
  const int saved = errno;
  const int fd = info->si_fd;
  TcpPlacer* p = signallable(fd) ? g_signalled[fd].load(std::memory_order_acquire) : nullptr;
  if (p != nullptr) {
    if (!p->take_available()) p->failed_.store(true, std::memory_order_release);
  }
  errno = saved;
}

bool TcpPlacer::take_available() {
  // Async-signal-safe: recv and atomics only.
  while (placed_.load(std::memory_order_relaxed) < count_) {
    const ssize_t k = ::recv(fd_, dst_ + at_, size_ - at_, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    at_ += static_cast<std::uint32_t>(k);
    if (at_ == size_) {
      at_ = 0;
      placed_.fetch_add(1, std::memory_order_release);
    }
  }
  return true;
}

bool TcpPlacer::wait_placed(std::uint32_t n, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (std::uint32_t spins = 0;; ++spins) {
    if (placed_.load(std::memory_order_acquire) >= n) return true;
    if (failed_.load(std::memory_order_acquire)) return false;
    if (spins % 1024 == 0 && std::chrono::steady_clock::now() > deadline) return false;
  }
}

}  // namespace uwarp::perf
