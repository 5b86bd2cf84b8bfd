// librdmacm.so.1: rdma_getaddrinfo and rdma_freeaddrinfo, over getaddrinfo(3), as rdma-core's
// addrinfo.c does for IP addresses (AF_IB addresses and IB path resolution do not exist on
// iWARP: no ai_route is ever returned).
//
// The result is one entry: RAI_PASSIVE puts the resolved address (the wildcard for a NULL node)
// in ai_src_addr, otherwise in ai_dst_addr with hints->ai_src_addr copied as the source. The QP
// type and port space come from the hints, else from the socket type and protocol (stream/TCP:
// IBV_QPT_RC, RDMA_PS_TCP). Failures return -1 with errno set to the getaddrinfo code, as
// rdma-core does.
#include <netdb.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/boundary.h"
#include "rdmacm/cma.h"

namespace uwarp::rdmacm {
namespace {

int copy_addr(sockaddr** dst, socklen_t* dst_len, const sockaddr* src, socklen_t len) {
  *dst = static_cast<sockaddr*>(std::malloc(len));
  if (*dst == nullptr) return ENOMEM;
  std::memcpy(*dst, src, len);
  *dst_len = len;
  return 0;
}

addrinfo to_addrinfo_hints(const rdma_addrinfo& rai) {
  addrinfo ai{};
  if ((rai.ai_flags & RAI_PASSIVE) != 0) ai.ai_flags = AI_PASSIVE;
  if ((rai.ai_flags & RAI_NUMERICHOST) != 0) ai.ai_flags |= AI_NUMERICHOST;
  if (rai.ai_family != AF_IB) ai.ai_family = rai.ai_family;
  switch (rai.ai_qp_type) {
    case IBV_QPT_RC:
    case IBV_QPT_UC:
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV:
      ai.ai_socktype = SOCK_STREAM;
      break;
    case IBV_QPT_UD:
      ai.ai_socktype = SOCK_DGRAM;
      break;
    default:
      break;
  }
  switch (rai.ai_port_space) {
    case RDMA_PS_TCP:
      ai.ai_protocol = IPPROTO_TCP;
      break;
    case RDMA_PS_IPOIB:
    case RDMA_PS_UDP:
      ai.ai_protocol = IPPROTO_UDP;
      break;
    case RDMA_PS_IB:
      if (ai.ai_socktype == SOCK_STREAM) ai.ai_protocol = IPPROTO_TCP;
      if (ai.ai_socktype == SOCK_DGRAM) ai.ai_protocol = IPPROTO_UDP;
      break;
    default:
      break;
  }
  return ai;
}

int from_addrinfo(rdma_addrinfo* rai, const rdma_addrinfo& hints, const addrinfo& ai) {
  if (hints.ai_qp_type != 0) {
    rai->ai_qp_type = hints.ai_qp_type;
  } else if (ai.ai_socktype == SOCK_STREAM) {
    rai->ai_qp_type = IBV_QPT_RC;
  } else if (ai.ai_socktype == SOCK_DGRAM) {
    rai->ai_qp_type = IBV_QPT_UD;
  }
  if (hints.ai_port_space != 0) {
    rai->ai_port_space = hints.ai_port_space;
  } else if (ai.ai_protocol == IPPROTO_TCP) {
    rai->ai_port_space = RDMA_PS_TCP;
  } else if (ai.ai_protocol == IPPROTO_UDP) {
    rai->ai_port_space = RDMA_PS_UDP;
  }
  rai->ai_family = ai.ai_family;
  if ((ai.ai_flags & AI_PASSIVE) != 0) {
    rai->ai_flags = RAI_PASSIVE;
    if (ai.ai_canonname != nullptr) rai->ai_src_canonname = ::strdup(ai.ai_canonname);
    return copy_addr(&rai->ai_src_addr, &rai->ai_src_len, ai.ai_addr, ai.ai_addrlen);
  }
  if (ai.ai_canonname != nullptr) rai->ai_dst_canonname = ::strdup(ai.ai_canonname);
  return copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, ai.ai_addr, ai.ai_addrlen);
}

}  // namespace
}  // namespace uwarp::rdmacm

using namespace uwarp::rdmacm;
using uwarp::ofa::c_boundary;

extern "C" {

int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                     rdma_addrinfo** res) {
  return c_boundary(-1, [&]() -> int {
    if (res == nullptr || (service == nullptr && node == nullptr && hints == nullptr)) {
      return fail(EINVAL);
    }
    static const rdma_addrinfo kNoHints{};
    const bool have_hints = hints != nullptr;
    const rdma_addrinfo& h = have_hints ? *hints : kNoHints;
    auto* rai = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
    if (rai == nullptr) return fail(ENOMEM);
    int ret = 0;
    if (node != nullptr || service != nullptr) {
      addrinfo* ai = nullptr;
      if (have_hints) {
        const addrinfo ai_hints = to_addrinfo_hints(h);
        ret = ::getaddrinfo(node, service, &ai_hints, &ai);
      } else {
        ret = ::getaddrinfo(node, service, nullptr, &ai);
      }
      if (ret == 0) {
        ret = from_addrinfo(rai, h, *ai);
        ::freeaddrinfo(ai);
      }
    } else {
      rai->ai_flags = h.ai_flags;
      rai->ai_family = h.ai_family;
      rai->ai_qp_type = h.ai_qp_type;
      rai->ai_port_space = h.ai_port_space;
      if (h.ai_dst_len != 0) {
        ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, h.ai_dst_addr, h.ai_dst_len);
      }
    }
    if (ret == 0 && rai->ai_src_len == 0 && h.ai_src_len != 0) {
      ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, h.ai_src_addr, h.ai_src_len);
    }
    if (ret != 0) {
      rdma_freeaddrinfo(rai);
      return fail(ret);
    }
    *res = rai;
    return 0;
  });
}

void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res != nullptr) {
    rdma_addrinfo* rai = res;
    res = res->ai_next;
    std::free(rai->ai_connect);
    std::free(rai->ai_route);
    std::free(rai->ai_src_canonname);
    std::free(rai->ai_dst_canonname);
    std::free(rai->ai_src_addr);
    std::free(rai->ai_dst_addr);
    std::free(rai);
  }
}

}  // extern "C"
