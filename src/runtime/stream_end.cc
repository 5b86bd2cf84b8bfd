#include "runtime/stream_end.h"

#include <cstring>

namespace uwarp::runtime {

StreamEnd judge_stream_end(long status, long send_error, RxStopped stopped, bool at_boundary) {
  if (status == 0 && send_error != 0) {
    // The send that failed took the socket's error: the end of the stream is not an orderly close.
    return {false, std::string("send failed: ") + std::strerror(static_cast<int>(-send_error))};
  }
  if (status != 0) {
    return {false, std::string("receive failed: ") + std::strerror(static_cast<int>(-status))};
  }
  if (stopped == RxStopped::kByTerminate) return {true, "closed after a Terminate"};
  if (stopped == RxStopped::kByQp) return {true, "closed after the QP left RTS"};
  if (at_boundary) return {true, "the peer closed the connection"};
  return {false, "the peer closed the connection in the middle of an FPDU"};
}

}  // namespace uwarp::runtime
