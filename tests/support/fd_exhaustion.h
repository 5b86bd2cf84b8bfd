// Test support: a stretch of a test during which this process has no free file descriptor. The
// soft RLIMIT_NOFILE is lowered to one above the highest descriptor open, and every free number
// below it is taken, so that the next descriptor any thread asks for (accept, socket, open)
// fails with EMFILE. release() or the destructor gives the numbers and the limit back.
//
// Process-wide: use it only where no other test runs in the same process meanwhile (CTest runs
// each test of a gtest_discover_tests binary in a process of its own; a binary run by hand runs
// its tests one after another). Create the sockets the stretch needs before it.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

namespace uwarp::testing {

// Under AddressSanitizer/UndefinedBehaviorSanitizer the sanitizer runtime itself needs free
// descriptors for its checks (UBSan's vptr check reported a false "invalid vptr" with none
// free), so tests that exhaust them skip there, saying why; the normal builds run them.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitizerNeedsDescriptors = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitizerNeedsDescriptors = true;
#else
inline constexpr bool kSanitizerNeedsDescriptors = false;
#endif
#else
inline constexpr bool kSanitizerNeedsDescriptors = false;
#endif
inline constexpr const char* kSanitizerSkip =
    "the sanitizer runtime needs free descriptors for its own checks; this test exhausts them";

class FdExhaustion {
 public:
  FdExhaustion() {
    const int highest = highest_open_fd();
    if (highest < 0 || ::getrlimit(RLIMIT_NOFILE, &saved_) != 0) return;
    rlimit lowered = saved_;
    lowered.rlim_cur = static_cast<rlim_t>(highest) + 1;
    if (::setrlimit(RLIMIT_NOFILE, &lowered) != 0) return;
    lowered_ = true;
    // At most `highest` numbers are free below the limit: the loop ends by then.
    for (int i = 0; i <= highest; ++i) {
      const int fd = ::fcntl(highest, F_DUPFD_CLOEXEC, 0);
      if (fd < 0) {
        full_ = errno == EMFILE;
        return;
      }
      taken_.push_back(fd);
    }
  }
  ~FdExhaustion() { release(); }
  FdExhaustion(const FdExhaustion&) = delete;
  FdExhaustion& operator=(const FdExhaustion&) = delete;

  // Every descriptor number is taken (the next one fails with EMFILE).
  bool ok() const { return lowered_ && full_; }

  void release() {
    for (int fd : taken_) ::close(fd);
    taken_.clear();
    if (lowered_) ::setrlimit(RLIMIT_NOFILE, &saved_);
    lowered_ = false;
  }

 private:
  static int highest_open_fd() {
    DIR* d = ::opendir("/proc/self/fd");
    if (d == nullptr) return -1;
    int highest = -1;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const int fd = std::atoi(e->d_name);
      if (fd != ::dirfd(d) && fd > highest) highest = fd;
    }
    ::closedir(d);
    return highest;
  }

  rlimit saved_{};
  std::vector<int> taken_;
  bool lowered_ = false;
  bool full_ = false;
};

}  // namespace uwarp::testing
