// A listening endpoint: accepts TCP connections on address:port and runs the responder side
// of the MPA exchange for each; complete requests become kConnectRequest events.
//
// Order: requests are reported in the order their TCP connections were accepted, which for a
// client connecting one after another is the order of its connects (perftest -q N pairs its
// QPs by it). The I/O backend may complete a later connection's request first (io_uring posts
// a receive that finds its data at submission before one that waited for it), so a complete
// request waits for those of the connections accepted before it. A connection keeps its place
// for kRequestOrderHold after it was accepted: a peer that connects and says nothing delays
// the requests behind it by at most that.
//
// Limits (ListenOptions): at most max_pending connections are pending (adopted: accepted and not
// yet accepted or rejected by the application); one accepted beyond is closed at once, and
// counted. A connection's MPA request must be complete within request_timeout of its accept.
// Accept errors are counted; the backend retries one out of descriptors after a pause.
//
// Threads: create and close from any thread; the work happens on the engine thread. counts()
// from any thread (the counters are atomics written on the engine thread).
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <unordered_map>

#include "cm/connection.h"
#include "cm/events.h"
#include "cm/listen_options.h"
#include "io/backend.h"
#include "runtime/engine.h"
#include "runtime/engine_pool.h"
#include "runtime/engine_timer.h"

namespace uwarp::cm {

class Listener final : public io::IoHandler, public std::enable_shared_from_this<Listener> {
 public:
  // `owner` (may be null) is kept alive by the listener and by every connection it accepts; it
  // is set before accepting starts, as connections may arrive at once.
  static Result<std::shared_ptr<Listener>> listen(runtime::EnginePool& engines,
                                                  const std::shared_ptr<EventChannel>& events,
                                                  const io::SocketAddress& address,
                                                  const ListenOptions& options,
                                                  std::shared_ptr<void> owner);
  ~Listener() override;
  // Stops accepting; pending (unanswered) requests are closed.
  void close();
  const io::SocketAddress& address() const { return address_; }
  const std::shared_ptr<void>& owner() const { return owner_; }
  ListenerCounts counts() const;
  // Engine thread: a pending connection was closed because its request did not come in time.
  void request_timed_out() { timed_out_.fetch_add(1, std::memory_order_relaxed); }

  static constexpr std::chrono::milliseconds kRequestOrderHold{50};

  // Pending connections (engine thread): adopt() keeps one alive until release(), and gives it
  // its place in the order of requests.
  void adopt(const std::shared_ptr<Connection>& c);
  void release(Connection* c);
  // `c`'s MPA request is complete: it is reported now or, to keep the order, later.
  void request_complete(Connection* c);

  void on_accept(Result<io::Fd> connection, const io::SocketAddress& peer) override;

 private:
  // A connection whose request is not yet reported, in accept order.
  struct Arrival {
    Connection* connection;
    runtime::Clock::time_point place_until;  // it keeps its place until then
    bool complete = false;                   // its request waits to be reported
  };

  Listener(runtime::EnginePool& engines, const std::shared_ptr<EventChannel>& events,
           const ListenOptions& options)
      : engines_(engines),
        engine_(engines.control()),
        events_(events),
        options_(options),
        order_timer_(engine_) {}
  void pending_changed() { pending_count_.store(pending_.size(), std::memory_order_relaxed); }
  // Reports the complete requests at the front of the order, drops the places that have
  // expired there, and sets a timer for the first expiry that holds back a complete request.
  void report_in_order();
  std::deque<Arrival>::iterator arrival_of(Connection* c);

  runtime::EnginePool& engines_;
  runtime::Engine& engine_;  // the control engine
  std::weak_ptr<EventChannel> events_;
  std::shared_ptr<void> owner_;  // keeps the engine's owner alive as long as this object
  io::Fd fd_;
  io::SocketAddress address_;
  const ListenOptions options_;
  std::unordered_map<Connection*, std::shared_ptr<Connection>> pending_;
  std::deque<Arrival> arrivals_;
  runtime::EngineTimer order_timer_;  // until the first place that holds back a request expires
  // Counts: written on the engine thread, read by counts() from any thread.
  std::atomic<std::uint64_t> accepted_{0};
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::uint64_t> pending_count_{0};  // pending_.size()
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> timed_out_{0};
  std::atomic<std::uint64_t> accept_errors_{0};
};

}  // namespace uwarp::cm
