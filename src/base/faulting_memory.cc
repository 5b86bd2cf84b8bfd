#include "base/faulting_memory.h"

#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

namespace uwarp {

bool copy_to_faulting(ByteSpan dst, ConstByteSpan src) {
  if (src.empty()) return true;
  const pid_t self = getpid();
  std::size_t done = 0;
  while (done < src.size()) {
    iovec from{const_cast<std::uint8_t*>(src.data()) + done, src.size() - done};
    iovec to{dst.data() + done, src.size() - done};
    const ssize_t r = process_vm_writev(self, &from, 1, &to, 1, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;  // a fault at the first byte not yet written
    done += static_cast<std::size_t>(r);
  }
  return true;
}

bool prefault(ConstByteSpan memory, Prefault how) {
  if (memory.empty()) return true;
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(memory.data()) & ~(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(memory.data()) + memory.size();
  const int advice = how == Prefault::kWrite ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
  while (madvise(reinterpret_cast<void*>(begin), end - begin, advice) != 0) {
    if (errno != EINTR) return false;
  }
  return true;
}

}  // namespace uwarp
