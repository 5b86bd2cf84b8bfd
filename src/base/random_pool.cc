#include "base/random_pool.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace uwarp {

RandomSource kernel_random_source() {
  return [](std::span<std::uint8_t> out) -> ssize_t {
    return ::getrandom(out.data(), out.size(), 0);
  };
}

RandomPool::RandomPool(RandomSource source) : source_(std::move(source)) {}

Result<std::uint64_t> RandomPool::next() {
  if (used_ + sizeof(std::uint64_t) > bytes_.size()) {
    if (Status s = refill(); !s) return Unexpected{std::move(s)};
  }
  std::uint64_t word = 0;
  std::memcpy(&word, bytes_.data() + used_, sizeof(word));
  used_ += sizeof(word);
  return word;
}

Status RandomPool::refill() {
  used_ = bytes_.size();  // nothing of a failed refill is handed out
  std::size_t filled = 0;
  while (filled < bytes_.size()) {
    errno = 0;
    const ssize_t n = source_(std::span<std::uint8_t>(bytes_).subspan(filled));
    if (n > 0) {
      filled += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return Status(Errc::kIoError, "getrandom returned no bytes");
    return Status(Errc::kIoError, std::string("getrandom failed: ") + std::strerror(errno));
  }
  used_ = 0;
  return Status::ok();
}

}  // namespace uwarp
