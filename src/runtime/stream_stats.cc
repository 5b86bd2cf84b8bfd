#include "runtime/stream_stats.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "io/socket.h"

namespace uwarp::runtime {
namespace {

void copy_address(const io::SocketAddress& a, std::uint8_t (&to)[16]) {
  std::memset(to, 0, sizeof(to));
  if (a.family() == AF_INET)
    std::memcpy(to, &reinterpret_cast<const sockaddr_in*>(a.get())->sin_addr, 4);
  else if (a.family() == AF_INET6)
    std::memcpy(to, &reinterpret_cast<const sockaddr_in6*>(a.get())->sin6_addr, 16);
}

}  // namespace

void StreamStats::connected(verbs::QueuePair& qp, int fd) {
  stats::QpSlot& slot = qp.stats().slot();
  const io::SocketAddress local = io::local_address(fd);
  const io::SocketAddress peer = io::peer_address(fd);
  slot.family = static_cast<std::uint8_t>(local.family());
  slot.local_port = local.port();
  slot.peer_port = peer.port();
  copy_address(local, slot.local_addr);
  copy_address(peer, slot.peer_addr);
  slot.connected.fetch_add(1, std::memory_order_release);
  retrans_base_ = slot.counters[stats::Counter::kTcpRetransmits].load(std::memory_order_relaxed);
  sample_tcp(qp, fd);
}

void StreamStats::sample_tcp(verbs::QueuePair& qp, int fd) {
  io::TcpInfo info;
  if (!io::tcp_info(fd, info)) return;
  stats::QpSlot& slot = qp.stats().slot();
  slot.tcp_state.store(info.state, std::memory_order_relaxed);
  slot.tcp_rtt_us.store(info.rtt_us, std::memory_order_relaxed);
  slot.tcp_rttvar_us.store(info.rttvar_us, std::memory_order_relaxed);
  slot.tcp_snd_cwnd.store(info.snd_cwnd, std::memory_order_relaxed);
  slot.counters[stats::Counter::kTcpRetransmits].store(retrans_base_ + info.total_retrans,
                                                       std::memory_order_relaxed);
}

}  // namespace uwarp::runtime
