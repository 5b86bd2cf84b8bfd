// WireImagePool: buffers in which a TxBatch lays out small FPDUs byte for byte as they go on the
// wire (length, DDP header, payload, pad, CRC), so that one send hands the kernel one contiguous
// piece instead of three iovecs per FPDU. Between namespaces (MSS 1448) the kernel's copy of an
// FPDU's pieces cost the sender far more per byte than a contiguous copy: ib_write_bw -R 64 KiB
// moved 1.14-2.34x as much with the image (docs/performance.md, "Small FPDUs as one piece").
//
// A batch takes an image for its first such FPDU and gives it back when it drains, so an idle QP
// holds none. The pool lends at most `max_images` at once (a batch that finds none frames with
// iovecs, as for large FPDUs) and keeps a few given back for the next batch.
// Thread: any; acquire() and release() take the pool's mutex (a leaf: nothing is called under it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/mutex.h"

namespace uwarp::proto {

class WireImagePool {
 public:
  // A connection whose FPDUs are at most this many bytes (all of one: length field to CRC) copies
  // them into images (TxBatch::small_fpdu_size).
  static constexpr std::size_t kMaxFpduBytes = 2048;
  // An image holds a whole batch of such FPDUs (TxBatch::kMaxFpdus).
  static constexpr std::size_t kImageBytes = 48 * kMaxFpduBytes;
  // The process's pool: 64 images (6 MiB) lent at most.
  static constexpr std::size_t kProcessImages = 64;

  explicit WireImagePool(std::size_t max_images) : max_images_(max_images) {}
  WireImagePool(const WireImagePool&) = delete;
  WireImagePool& operator=(const WireImagePool&) = delete;

  static WireImagePool& process();

  // An image of kImageBytes, or nullptr if max_images are lent already.
  std::uint8_t* acquire();
  // Gives back what acquire() returned.
  void release(std::uint8_t* image);
  std::size_t lent() const;

 private:
  // Images kept for the next acquire() once given back.
  static constexpr std::size_t kMaxIdle = 8;

  const std::size_t max_images_;
  mutable Mutex mu_;
  std::vector<std::unique_ptr<std::uint8_t[]>> idle_ GUARDED_BY(mu_);
  std::size_t lent_ GUARDED_BY(mu_) = 0;
};

}  // namespace uwarp::proto
