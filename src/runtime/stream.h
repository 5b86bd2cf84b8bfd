// Stream: drives one connected QP over its TCP socket. It receives into a bounce buffer and,
// once a segment header says where a large payload goes, straight into registered memory
// (one copy); it transmits the QP's FPDU batches with vectored sends, inline from the posting
// thread when the socket accepts them, else from the engine thread once it is writable.
//
// Locking (docs/threading.md): mu_ guards qp_; I/O callbacks take mu_ and then the QP lock;
// QpLink calls arrive with the QP lock held and never take mu_. All other state is guarded by
// the QP lock while qp_ is set, and belongs to the engine thread after detach.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "io/backend.h"
#include "proto/tx_batch.h"
#include "runtime/engine.h"
#include "verbs/queue_pair.h"

namespace uwarp::runtime {

class StreamObserver {
 public:
  virtual ~StreamObserver() = default;
  // Responder in peer-to-peer mode: the RTR arrived; the connection is established.
  virtual void stream_rtr_received() = 0;
  // The stream is gone (engine thread). graceful: an orderly close at a message boundary.
  virtual void stream_closed(bool graceful, const std::string& why) = 0;
};

class Stream final : public io::IoHandler,
                     public verbs::QpLink,
                     public std::enable_shared_from_this<Stream> {
 public:
  Stream(Engine& engine, io::Fd fd, verbs::QueuePair& qp, std::weak_ptr<StreamObserver> observer);
  ~Stream() override;

  // Engine thread: binds the QP with the negotiated parameters (it enters RTS), feeds bytes that
  // arrived with the MPA exchange, and starts I/O.
  void start(const verbs::LinkParams& params, ConstByteSpan early_bytes);
  // Any thread: unbinds the QP now (it must not be used by this stream again) and closes.
  void abort();
  // Graceful disconnect: flush, close the write side, wait for the peer's close (bounded).
  void disconnect();
  int fd() const { return fd_.get(); }

  // verbs::QpLink (QP lock held).
  void tx_ready() override;
  void rtr_received() override;
  void shutdown_requested() override;
  void tx_abandon() override;

  // io::IoHandler (engine thread).
  void on_recv(long result) override;
  void on_send(long result) override;

 private:
  // The bounce buffer starts small (an idle QP costs little memory) and doubles, up to the
  // largest size, each time a receive fills it.
  static constexpr std::size_t kBounceInitial = 4 * 1024;
  static constexpr std::size_t kBounceSize = 64 * 1024;
  static constexpr std::size_t kDirectMin = 2048;
  static constexpr std::size_t kSmallRead = 512;

  void pump_tx_locked();
  void deliver_sent_locked();
  void receive_direct_locked(long& eof_or_error);
  void arm_recv_locked();
  void maybe_shut_write_locked();
  void lost_locked(bool graceful, const std::string& why);
  void teardown(bool graceful, const std::string& why);
  void refresh_fpdu_size_locked();

  Engine& engine_;
  io::Fd fd_;
  std::mutex mu_;
  verbs::QueuePair* qp_;
  std::weak_ptr<StreamObserver> observer_;

  std::vector<std::uint8_t> bounce_;
  bool large_payloads_ = false;
  proto::TxBatch batch_;
  bool send_armed_ = false;
  bool abandon_pending_ = false;  // tx_abandon while the backend was sending: apply in on_send
  bool pumping_ = false;
  bool pump_again_ = false;
  bool shutdown_requested_ = false;
  bool write_shut_ = false;
  bool torn_down_ = false;
  std::uint64_t linger_timer_ = 0;
  // Initiator only: if the peer stays silent after our first messages, one nudge (see
  // QueuePair::queue_nudge_locked) releases a Linux siw responder that missed them.
  void check_silent_peer(int round);
  bool initiator_ = false;
  std::uint64_t rx_bytes_ = 0;
  std::uint64_t tx_bytes_ = 0;
  std::size_t mss_ = 0;
};

// The largest ULPDU for a TCP MSS, as Linux siw sizes FPDUs: the MSS rounded down to a multiple
// of 8 bounds the whole FPDU, so each FPDU fits in one segment.
std::size_t max_ulpdu_for_mss(std::size_t mss);

}  // namespace uwarp::runtime
