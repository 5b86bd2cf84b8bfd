// Whether a progress thread of this process is at work, so that an application thread spinning
// on an empty CQ can give its core to it (docs/threading.md, "Busy polling").
//
// A program that spins on one CQ while the data it waits for arrives on another QP (perftest's
// passive target polls its control connection's CQ while the progress thread receives the
// test's Writes) takes a core the progress thread needs: on a machine with few cores the two
// share one, and the receiving thread runs only when the scheduler preempts the spinner. So a
// poll that found nothing, and could receive nothing itself, yields the core once (sched_yield)
// while a progress thread has worked within kBusyWindow; with nothing else runnable on that
// core the call returns at once.
//
// Threads: any; one relaxed atomic. UWARP_POLL_YIELD=0 turns yielding off.
#pragma once

#include <chrono>

namespace uwarp::verbs {
class CompletionQueue;
}

namespace uwarp::runtime {

inline constexpr std::chrono::microseconds kBusyWindow{200};

// Progress (engine) thread: it has just handled events.
void note_progress_busy();
// Application thread: its CQ was empty and driving the CQ's streams received nothing. Yields the
// core once if a progress thread has been busy within kBusyWindow of `now` (when the poll began).
void yield_to_busy_progress(std::chrono::steady_clock::time_point now);
// Application thread: the work of a poll that found `cq` empty (the OFA poll_cq, the native
// CompletionQueue::poll). Drives the CQ's sources at one clock reading; when none of them made
// progress, yields as above. True if one did (the CQ is worth polling again).
bool drive_empty_poll(verbs::CompletionQueue& cq);

// An application thread polls a CQ (any CQ, before it looks at it): the posts it left queued
// on any stream (runtime/doorbell_batching.h) go out now. Cheap (a thread-local check) when there
// are none. Implemented by the stream (runtime/stream.cc).
void send_posts_left_queued();

}  // namespace uwarp::runtime
