#include "base/faulting_memory.h"

#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

namespace uwarp {
namespace {

// process_vm_{readv,writev} on this process: `local` is ours to read or write, `remote` may fault.
bool copy_between(void* local, const void* remote_src, void* remote_dst, std::size_t n, bool write) {
  const pid_t self = getpid();
  std::size_t done = 0;
  while (done < n) {
    iovec here{static_cast<char*>(local) + done, n - done};
    iovec there{write ? static_cast<char*>(remote_dst) + done
                      : const_cast<char*>(static_cast<const char*>(remote_src)) + done,
                n - done};
    const ssize_t r = write ? process_vm_writev(self, &here, 1, &there, 1, 0)
                            : process_vm_readv(self, &here, 1, &there, 1, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;  // a fault at the first byte not yet done
    done += static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace

bool copy_to_faulting(ByteSpan dst, ConstByteSpan src) {
  if (src.empty()) return true;
  return copy_between(const_cast<std::uint8_t*>(src.data()), nullptr, dst.data(), src.size(), true);
}

bool copy_from_faulting(ByteSpan dst, ConstByteSpan src) {
  if (src.empty()) return true;
  return copy_between(dst.data(), src.data(), nullptr, src.size(), false);
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
