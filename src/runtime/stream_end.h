// How a stream's end is reported, decided from what the receive side saw: an orderly close is
// one between FPDUs, or after reception had stopped (a Terminate, or the QP left RTS: the stream
// was only being drained); anything else, and any end behind a failed send (the socket's error,
// a reset), is a failure.
#pragma once

#include <string>

namespace uwarp::runtime {

struct StreamEnd {
  bool graceful = false;
  std::string why;
};

// What had stopped reception before the end, if anything.
enum class RxStopped {
  kNo,
  kByTerminate,  // a Terminate, either way
  kByQp,         // the QP left RTS (this side disconnected, or moved it to ERROR)
};

// status: 0 (the peer closed) or the receive's -errno; send_error: a failed send's -errno, or 0;
// at_boundary: no FPDU was partly received.
StreamEnd judge_stream_end(long status, long send_error, RxStopped stopped, bool at_boundary);

}  // namespace uwarp::runtime
