// The one way librdmacm.so.1's sources include rdma-core's <rdma/rdma_cma.h>, <rdma/rdma_verbs.h>
// and <rdma/rsocket.h> (with <infiniband/verbs.h> through common/verbs_api.h) and uwarp's C++ API.
//
// The library is built with -fvisibility=hidden. The rdma_* and r* declarations get default
// visibility here, so that exactly the functions the headers declare (and this library defines)
// are exported, at the version nodes of librdmacm.map. The uwarp C++ API is defined in
// libibverbs.so.1 (node UWARP_PRIVATE_1): its declarations need default visibility too, or the
// references would be hidden and could not bind to that library.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/verbs_api.h"

#pragma GCC visibility push(default)
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#include "common/uwarp_ofa.h"
#include "uwarp/cm.h"
#include "uwarp/status.h"
#include "uwarp/verbs.h"
#pragma GCC visibility pop
