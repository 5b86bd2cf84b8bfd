// A TCP connection on loopback, its connecting end set up as every stream socket is
// (io::tcp_connect_start), for tests of the options streams get. The listener stays open with it.
#pragma once

#include <optional>

#include "io/socket.h"

namespace uwarp::io {

struct LoopbackConnection {
  Fd listener;
  Fd connected;
};

inline std::optional<LoopbackConnection> connect_on_loopback() {
  auto addr = SocketAddress::resolve("127.0.0.1", 0);
  if (!addr) return std::nullopt;
  auto listener = tcp_listen(*addr, 4);
  if (!listener) return std::nullopt;
  auto connected = tcp_connect_start(local_address(listener->get()));
  if (!connected) return std::nullopt;
  return LoopbackConnection{std::move(*listener), std::move(*connected)};
}

}  // namespace uwarp::io
