#include <cstdlib>
#include <cstring>

#include "io/backend.h"

namespace uwarp::io {

std::unique_ptr<IoBackend> make_backend() {
  const char* choice = std::getenv("UWARP_IO");
  if (choice != nullptr && std::strcmp(choice, "epoll") == 0) return make_epoll_backend();
  if (auto uring = make_uring_backend()) return uring;
  return make_epoll_backend();
}

}  // namespace uwarp::io
