// WireImagePool: buffers in which a TxBatch lays out small FPDUs byte for byte as they go on the
// wire (length, DDP header, payload, pad, CRC), so that one send hands the kernel one contiguous
// piece instead of three iovecs per FPDU. Between namespaces (MSS 1448) the kernel's copy of
// 46 pieces of 1,424 bytes between 16- and 4-byte ones took the sending core's time where the
// copy of one piece did not: ib_write_bw -R 64 KiB was faster with the image in 39 of 56
// interleaved pairs, by 1.20x per pair (median; docs/performance.md, "Small FPDUs as one piece").
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
  // them into images (TxBatch::small_fpdu_size)...
  static constexpr std::size_t kMaxFpduBytes = 2048;
  // ... for messages of at most this many bytes. A larger message's source is no longer in the
  // cache when it is copied, and the copy then cost the sender more than it saved: ib_write_bw
  // -R 1 MiB between namespaces was slower with images in 18 of 24 interleaved pairs.
  static constexpr std::size_t kMaxMessageBytes = 64 * 1024;
  // An image holds a whole batch of such FPDUs (TxBatch::kMaxFpdus).
  static constexpr std::size_t kImageBytes = 48 * kMaxFpduBytes;
  // The process's pool: 64 images (6 MiB) lent at most.
  static constexpr std::size_t kProcessImages = 64;

  explicit WireImagePool(std::size_t max_images) : max_images_(max_images) {}
  WireImagePool(const WireImagePool&) = delete;
  WireImagePool& operator=(const WireImagePool&) = delete;

  // The process's pool (never destroyed).
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
