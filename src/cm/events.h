// Connection-manager events, delivered through an EventChannel whose fd applications poll.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "runtime/event_queue.h"
#include "uwarp/status.h"

namespace uwarp::cm {

class Connection;
class Listener;

enum class CmEventType : std::uint8_t {
  kConnectRequest,  // passive side: a peer asks to connect; accept() or reject() it
  kEstablished,     // the QP is in RTS and may transfer data
  kRejected,        // active side: the peer rejected (private data may explain)
  kConnectError,    // active side: refused, timed out, or the MPA exchange failed
  kDisconnected,    // the connection ended (locally, by the peer, or by an error)
};
std::string_view to_string(CmEventType t);

struct CmEvent {
  CmEventType type = CmEventType::kConnectError;
  std::shared_ptr<Connection> connection;
  std::shared_ptr<Listener> listener;  // kConnectRequest: the listener it arrived on
  std::vector<std::uint8_t> private_data;
  Status status;  // why, for kConnectError, kRejected and kDisconnected
};

using EventChannel = runtime::EventQueue<CmEvent>;

}  // namespace uwarp::cm
