// Test support: running a test's two ends in two network namespaces instead of over loopback.
//
// tests/support/in_netns_pair.sh creates the namespaces (joined by a veth pair with a 1500-byte
// MTU, so that TCP cuts the stream at its own places) and runs a test binary with
//   UWARP_TEST_NETNS="SERVER_NAMESPACE CLIENT_NAMESPACE SERVER_ADDRESS"
// (names under /run/netns). ConnectedPair then listens inside the first and connects from the
// second. A socket stays in the namespace it was created in, whichever thread uses it later, so
// only the thread that creates it needs to be inside: a ScopedNetns moves the calling thread
// there and back.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

namespace uwarp::testing {

struct NetnsPair {
  std::string server_ns;
  std::string client_ns;
  std::string server_host;
};

// The namespaces UWARP_TEST_NETNS names, if it is set.
inline std::optional<NetnsPair> netns_pair_from_environment() {
  const char* v = std::getenv("UWARP_TEST_NETNS");
  if (v == nullptr || *v == '\0') return std::nullopt;
  NetnsPair p;
  std::istringstream in(v);
  if (!(in >> p.server_ns >> p.client_ns >> p.server_host)) return std::nullopt;
  return p;
}

// Moves the calling thread into the network namespace /run/netns/NAME for its lifetime (an
// empty name: stays where it is). ok() is false, with the thread unmoved, if that failed.
class ScopedNetns {
 public:
  explicit ScopedNetns(const std::string& name) {
    if (name.empty()) return;
    home_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    const int target = ::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    moved_ = home_ >= 0 && target >= 0 && ::setns(target, CLONE_NEWNET) == 0;
    ok_ = moved_;
    if (target >= 0) ::close(target);
  }
  ~ScopedNetns() {
    if (moved_) ::setns(home_, CLONE_NEWNET);
    if (home_ >= 0) ::close(home_);
  }
  ScopedNetns(const ScopedNetns&) = delete;
  ScopedNetns& operator=(const ScopedNetns&) = delete;

  bool ok() const { return ok_; }

 private:
  int home_ = -1;
  bool moved_ = false;
  bool ok_ = true;
};

}  // namespace uwarp::testing
