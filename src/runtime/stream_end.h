// How a stream's end is reported, decided from what the receive side saw: an orderly close is
// one between FPDUs, or after a Terminate (the stream was only being drained); anything else,
// and any end behind a failed send (the socket's error, a reset), is a failure.
#pragma once

#include <string>

namespace uwarp::runtime {

struct StreamEnd {
  bool graceful = false;
  std::string why;
};

// status: 0 (the peer closed) or the receive's -errno; send_error: a failed send's -errno, or 0;
// terminated: a Terminate (either way) had stopped reception; at_boundary: no FPDU was partly
// received.
StreamEnd judge_stream_end(long status, long send_error, bool terminated, bool at_boundary);

}  // namespace uwarp::runtime
