// What a stream tells the one who made it (the CM's connection), on the engine thread.
#pragma once

#include <string>

namespace uwarp::runtime {

class StreamObserver {
 public:
  virtual ~StreamObserver() = default;
  // Responder in peer-to-peer mode: the RTR arrived; the connection is established.
  virtual void stream_rtr_received() = 0;
  // The stream is gone. graceful: an orderly close at a message boundary.
  virtual void stream_closed(bool graceful, const std::string& why) = 0;
};

}  // namespace uwarp::runtime
