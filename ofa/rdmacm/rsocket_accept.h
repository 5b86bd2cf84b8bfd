// The accept service of stream rsockets: one process-wide thread (all signals blocked) that
// answers the connection requests of listening rsockets at once, as a kernel completes a TCP
// handshake before accept(): it sets up each new socket (QP, buffers, connection data),
// accepts, and once ESTABLISHED queues it on its listener for raccept. A request whose
// connection data is not the rsocket protocol is rejected.
//
// Locks: a socket's mu may be held when calling in here (the service's own lock comes after
// every socket's); the service takes a listener's mu before a new socket's.
#pragma once

#include <memory>

#include "rdmacm/rsocket_stream.h"

namespace uwarp::rdmacm::rs {

// Starts answering `listener`'s requests (rlisten; its state is kListening). 0, or -1 with errno.
int watch_listener(const std::shared_ptr<Rsocket>& listener);
// Stops (rclose of a listener). Requests already taken finish and are then dropped, since the
// listener is no longer listening.
void unwatch_listener(const Rsocket& listener);

}  // namespace uwarp::rdmacm::rs
