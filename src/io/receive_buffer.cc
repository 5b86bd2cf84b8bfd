#include "io/receive_buffer.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace uwarp::io {

std::size_t parse_short_path_receive_buffer(const char* value) {
  constexpr unsigned long long kMax = 1ull << 30;
  if (value == nullptr || *value == '\0' || value[0] < '0' || value[0] > '9') {
    return kDefaultShortPathReceiveBuffer;
  }
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(value, &end, 10);
  if (errno != 0) return kDefaultShortPathReceiveBuffer;
  if (*end == 'K' || *end == 'k') {
    v = v > kMax ? kMax : v << 10;
    ++end;
  } else if (*end == 'M' || *end == 'm') {
    v = v > kMax ? kMax : v << 20;
    ++end;
  }
  if (*end != '\0') return kDefaultShortPathReceiveBuffer;
  return static_cast<std::size_t>(v > kMax ? kMax : v);
}

std::size_t short_path_receive_buffer() {
  static const std::size_t bytes =
      parse_short_path_receive_buffer(std::getenv("UWARP_TCP_SHORT_PATH_RCVBUF"));
  return bytes;
}

std::size_t short_path_rcvbuf(std::uint32_t rtt_us, std::size_t rmem_max, std::size_t wanted) {
  if (wanted == 0 || rtt_us == 0 || rtt_us >= kShortPathRttUs) return 0;
  return wanted <= rmem_max ? wanted : 0;
}

std::size_t rmem_max() {
  std::FILE* f = std::fopen("/proc/sys/net/core/rmem_max", "re");
  if (f == nullptr) return 0;
  unsigned long long v = 0;
  const bool read = std::fscanf(f, "%llu", &v) == 1;
  std::fclose(f);
  return read ? static_cast<std::size_t>(v) : 0;
}

bool bound_short_path_receive_buffer(int fd, std::uint32_t rtt_us) {
  const std::size_t wanted = short_path_receive_buffer();
  // The round trip first: most connections of a long path never read the file.
  if (short_path_rcvbuf(rtt_us, ~std::size_t{0}, wanted) == 0) return false;
  const std::size_t bytes = short_path_rcvbuf(rtt_us, rmem_max(), wanted);
  if (bytes == 0) return false;
  const int v = static_cast<int>(bytes);
  return ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v) == 0;
}

}  // namespace uwarp::io
