// The Terminate sent when the MPA exchange fails (RFC 6581 section 4: e.g. no matching RTR;
// RFC 5044 section 7.1.2: an invalid reply). Linux siw sends the same: one FPDU without CRC or
// markers (neither is agreed yet) carrying an untagged Terminate on queue 2 with MSN 1, whose
// body is the control word alone.
#pragma once

#include <cstdint>
#include <vector>

#include "wire/rdmap.h"

namespace uwarp::cm {

// The whole FPDU, ready for the socket.
std::vector<std::uint8_t> setup_terminate(const wire::TerminateCode& code);

}  // namespace uwarp::cm
