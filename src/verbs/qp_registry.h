// The queue pairs of a device, so that a deregistration can reach every one that may be
// accessing the region (verbs/revocation.h).
//
// Owner: the Device. Thread: thread-safe. Lock order: the registry's mutex, then a QP's (for_each
// runs its function with the registry locked, so that no listed QP is destroyed meanwhile: a
// QueuePair removes itself in its destructor).
#pragma once

#include <algorithm>
#include <vector>

#include "base/mutex.h"

namespace uwarp::verbs {

class QueuePair;

class QpRegistry {
 public:
  void add(QueuePair* qp) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    qps_.push_back(qp);
  }
  void remove(QueuePair* qp) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    std::erase(qps_, qp);
  }
  template <typename F>
  void for_each(F&& f) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    for (QueuePair* qp : qps_) f(*qp);
  }
  // Runs f(qps) with the registry locked (no listed QP is destroyed meanwhile).
  template <typename F>
  void with_all(F&& f) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    f(static_cast<const std::vector<QueuePair*>&>(qps_));
  }

 private:
  Mutex mu_;
  std::vector<QueuePair*> qps_ GUARDED_BY(mu_);
};

}  // namespace uwarp::verbs
