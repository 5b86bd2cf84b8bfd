#include "proto/wire_image.h"

namespace uwarp::proto {

WireImagePool& WireImagePool::process() {
  // Never destroyed: a batch may give its image back from another static object's destructor
  // at exit (a stream torn down with its context).
  static WireImagePool* const pool = new WireImagePool(kProcessImages);
  return *pool;
}

std::uint8_t* WireImagePool::acquire() {
  MutexLock lock(mu_);
  if (lent_ >= max_images_) return nullptr;
  std::unique_ptr<std::uint8_t[]> image;
  if (idle_.empty()) {
    image.reset(new std::uint8_t[kImageBytes]);
  } else {
    image = std::move(idle_.back());
    idle_.pop_back();
  }
  ++lent_;
  return image.release();
}

void WireImagePool::release(std::uint8_t* image) {
  std::unique_ptr<std::uint8_t[]> owned(image);
  MutexLock lock(mu_);
  --lent_;
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(owned));
}

std::size_t WireImagePool::lent() const {
  MutexLock lock(mu_);
  return lent_;
}

}  // namespace uwarp::proto
