// RandomPool: 64-bit random words from the kernel's CSPRNG (getrandom(2)), read kRefillBytes at
// a time so that most draws copy eight bytes instead of making a system call. There is no
// fallback: when the source fails in a way a retry cannot mend, next() says so, and the caller
// fails whatever needed the bits (a predictable generator would make the values guessable).
//
// The source is injectable so that tests can count refills and play interrupted or short reads.
// Owner: whoever draws (the STag table keeps one). Thread: not thread-safe; the owner serializes
// draws (the STag table under its lock).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "uwarp/status.h"

namespace uwarp {

// Fills a prefix of `out` with random bytes and returns how many, or returns -1 with errno set:
// getrandom(2)'s contract. EINTR means "try again"; any other error, or 0 bytes for a non-empty
// `out`, is final for this attempt.
using RandomSource = std::function<ssize_t(std::span<std::uint8_t> out)>;

// getrandom(2) without flags: the kernel's urandom source, which blocks only until the kernel's
// pool is first initialised at boot.
RandomSource kernel_random_source();

class RandomPool {
 public:
  static constexpr std::size_t kRefillBytes = 256;  // 32 words per system call

  explicit RandomPool(RandomSource source = kernel_random_source());

  // The next 64 random bits (the source's next eight bytes, in memory order). An error
  // (kIoError, naming the cause) when a refill fails; no bits of a failed refill are handed out,
  // and the next call tries a fresh refill.
  Result<std::uint64_t> next();

 private:
  // Fills bytes_ whole: retries EINTR and continues after short reads.
  Status refill();

  RandomSource source_;
  std::array<std::uint8_t, kRefillBytes> bytes_{};
  std::size_t used_ = kRefillBytes;  // bytes_ already handed out (all: nothing drawn yet)
};

}  // namespace uwarp
