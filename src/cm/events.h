// Connection-manager events, delivered through an EventChannel whose fd applications poll.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "runtime/event_queue.h"
#include "uwarp/status.h"
#include "uwarp/types.h"  // CmEventType

namespace uwarp::cm {

class Connection;
class Listener;

struct CmEvent {
  CmEventType type = CmEventType::kConnectError;
  std::shared_ptr<Connection> connection;
  std::shared_ptr<Listener> listener;  // kConnectRequest: the listener it arrived on
  std::vector<std::uint8_t> private_data;
  Status status;  // why, for kConnectError, kRejected and kDisconnected
};

using EventChannel = runtime::EventQueue<CmEvent>;

}  // namespace uwarp::cm
