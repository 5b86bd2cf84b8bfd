// ThreadSanitizer cannot see the kernel carry bytes from one socket to another, least of all
// when io_uring performs the I/O without a system call of the thread. Like TSan's own model of
// socket calls, every send releases one process-wide object and every receive acquires it, so
// that what a thread did before sending happens before what the receiving thread does after.
// No code outside ThreadSanitizer builds.
#pragma once

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace uwarp::io {

#if defined(__SANITIZE_THREAD__)
inline char socket_bytes_token;
inline void annotate_socket_send() { __tsan_release(&socket_bytes_token); }
inline void annotate_socket_receive() { __tsan_acquire(&socket_bytes_token); }
#else
inline void annotate_socket_send() {}
inline void annotate_socket_receive() {}
#endif

}  // namespace uwarp::io
