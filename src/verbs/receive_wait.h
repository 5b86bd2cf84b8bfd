// A queue pair's receiver-not-ready wait (docs/receiver-not-ready.md). iWARP has no RNR NAK on
// the wire: a Send or Immediate Data message that finds no posted receive either ends the
// connection with the Terminate for no buffer (RFC 5041's rule, and Linux siw's), or, if the
// application allows it, holds the connection's reception until a receive is posted, the
// peer held meanwhile by TCP flow control, for at most `limit` (then the Terminate after all).
//
// Owner: the QueuePair. Thread: the QP lock. The stream keeps the deadline (runtime::Stream).
#pragma once

#include <chrono>
#include <utility>

namespace uwarp::verbs {

class ReceiveWait {
 public:
  static constexpr std::chrono::milliseconds kForever = std::chrono::milliseconds::max();

  // Zero: no wait (the default); kForever: no limit.
  void set_limit(std::chrono::milliseconds limit) { limit_ = limit; }
  std::chrono::milliseconds limit() const { return limit_; }

  // The engine asks whether a message without a receive is to wait (RdmapPort::
  // wait_for_receive): yes unless waiting is off or the last wait ran out.
  bool begin() {
    if (limit_.count() <= 0 || expired_) return false;
    pending_ = true;
    return true;
  }
  // A receive was posted: true (once) if a wait is to hear of it.
  bool receive_posted() { return std::exchange(pending_, false); }
  // The wait ran out: the engine's next ask is refused, and the Terminate follows.
  void expire() { expired_ = true; }
  // A new stream: no wait is pending.
  void reset() {
    pending_ = false;
    expired_ = false;
  }

 private:
  std::chrono::milliseconds limit_{0};
  bool pending_ = false;  // a wait began and no receive was posted since
  bool expired_ = false;
};

}  // namespace uwarp::verbs
