// The memory-polling ping-pong of the raw TCP baseline (uwarp-perf --tcp --placer thread|signal):
// what perftest's ib_write_lat -R asks of any RNIC built from threads over kernel TCP. Both ends'
// application threads spin on memory, never calling into the network, so something else must
// receive each message and place it where the application looks:
// - kThread: a receiving thread blocks in recv and places the message (a wake-up per message,
//   as uwarp's progress thread);
// - kSignal: the socket signals the spinning thread itself when bytes arrive (O_ASYNC,
//   F_SETOWN_EX to that thread, F_SETSIG), and the handler receives and places them (no
//   second thread; the application's own system calls may then be interrupted, which is why
//   uwarp does not do it: the figure is for comparison only).
// Messages are counted from 1: wait_placed(i) returns once message i is in place.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <thread>

namespace uwarp::perf {

enum class Placer : std::uint8_t { kNone, kThread, kSignal };

// One connection's placer for `count` messages of `size` bytes into `dst`. Construct it on the
// application thread (kSignal signals the constructing thread). Owner: that thread; the
// receiving side (thread or handler) writes dst, at_, placed_ and failed_ only.
class TcpPlacer {
 public:
  TcpPlacer(Placer kind, int fd, std::uint8_t* dst, std::uint32_t size, std::uint32_t count);
  ~TcpPlacer();
  TcpPlacer(const TcpPlacer&) = delete;
  TcpPlacer& operator=(const TcpPlacer&) = delete;

  bool ok() const { return ok_; }  // set up (kSignal: the socket signals this thread)
  // Spins (no yield, as perftest spins on memory) until message `n` is placed; false if the
  // connection failed or nothing came within `timeout_ms`.
  bool wait_placed(std::uint32_t n, int timeout_ms);

 private:
  void receive_loop();                      // kThread
  static void on_signal(int, siginfo_t*, void*);  // kSignal
  bool take_available();                    // kSignal: receives what is there; false on an error

  const Placer kind_;
  const int fd_;
  std::uint8_t* const dst_;
  const std::uint32_t size_;
  const std::uint32_t count_;
  std::uint32_t at_ = 0;  // kSignal: bytes of the current message received (by the handler)
  std::atomic<std::uint32_t> placed_{0};
  std::atomic<bool> failed_{false};
  bool ok_ = false;
  std::thread thread_;
};

}  // namespace uwarp::perf
