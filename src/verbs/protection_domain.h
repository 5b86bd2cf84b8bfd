// A protection domain: memory and QPs of one PD may be used together; an STag of another PD is
// refused (RFC 5040 section 2.1, "STag not associated with RDMAP stream").
#pragma once

#include <atomic>
#include <cstdint>

namespace uwarp::verbs {

class ProtectionDomain {
 public:
  explicit ProtectionDomain(std::uint32_t handle) : handle_(handle) {}
  std::uint32_t handle() const { return handle_; }
  // Objects (MRs, QPs, SRQs) created in this PD and not yet destroyed.
  std::atomic<std::uint32_t> users{0};

 private:
  std::uint32_t handle_;
};

}  // namespace uwarp::verbs
