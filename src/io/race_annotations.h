// ThreadSanitizer cannot see the kernel carry bytes from one socket to another, least of all
// when io_uring performs the I/O without a system call of the thread. Like TSan's own model of
// socket calls, every send releases one process-wide object and every receive acquires it, so
// that what a thread did before sending happens before what the receiving thread does after.
// No code outside ThreadSanitizer builds.
#pragma once

#include <cstddef>

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
// Exported by the TSan runtime (its instrumentation's range check), not declared by GCC's header.
extern "C" void __tsan_read_range(void* addr, unsigned long size);
#endif

namespace uwarp::io {

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kRaceAnnotations = true;
inline char socket_bytes_token;
inline void annotate_socket_send() { __tsan_release(&socket_bytes_token); }
inline void annotate_socket_receive() { __tsan_acquire(&socket_bytes_token); }
// The kernel read these bytes during a send system call that has returned (scripts/test runs
// TSan with intercept_send=0, so that a send's reads of application memory are not checked:
// this names the ones the caller wants checked, its own).
inline void annotate_sent_bytes(const void* p, std::size_t n) {
  __tsan_read_range(const_cast<void*>(p), n);
}
#else
inline constexpr bool kRaceAnnotations = false;
inline void annotate_socket_send() {}
inline void annotate_socket_receive() {}
inline void annotate_sent_bytes(const void*, std::size_t) {}
#endif

}  // namespace uwarp::io
