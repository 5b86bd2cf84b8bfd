#include "wire/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace uwarp::wire {

void Crc32c::update(ConstByteSpan bytes) {
  // crc32_iscsi takes an int length and a non-const pointer (it does not write through it).
  auto* p = const_cast<unsigned char*>(bytes.data());
  std::size_t left = bytes.size();
  while (left > 0) {
    const std::size_t chunk = std::min<std::size_t>(left, INT_MAX / 2);
    state_ = crc32_iscsi(p, static_cast<int>(chunk), state_);
    p += chunk;
    left -= chunk;
  }
}

std::uint32_t crc32c(ConstByteSpan bytes) {
  Crc32c crc;
  crc.update(bytes);
  return crc.value();
}

}  // namespace uwarp::wire
