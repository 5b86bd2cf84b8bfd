// What a Terminate received from the peer means for the QP: the completion status of the work
// request it failed, and the text of the asynchronous event that reports it. Pure functions of
// the message; the QP calls them under its lock when the engine reports the Terminate.
#pragma once

#include <cstdint>
#include <string>

#include "uwarp/types.h"
#include "wire/rdmap.h"

namespace uwarp::verbs {

// The first incomplete-status mapping of a received Terminate (see docs/interop.md: siw sends
// layer and etype swapped, so both readings are considered).
WcStatus status_for_remote_terminate(std::uint32_t raw_control);

// The detail of the asynchronous event: the control word and its reading, if it had one.
std::string describe_remote_terminate(const wire::TerminateMessage& message);

}  // namespace uwarp::verbs
