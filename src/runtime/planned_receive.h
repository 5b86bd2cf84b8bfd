// PlannedReceive: one receive scattered ahead of the headers (proto::FpduReader::plan_ahead).
// The rest of the payload being received, and the payloads of the later segments whose places
// the engine knows ahead (a Read Response's), go straight to their places; the trailers and
// headers between them, and a few bytes after the last, go into a buffer. The bytes received
// are then taken in stream order: in place where the reader's payload goes exactly there, fed
// otherwise. What a wrong guess left where no header put it is copied out, in order, for the
// caller to feed as any received bytes (held if reception waits, dropped after a Terminate).
//
// Nothing is placed where the headers that came do not put it: a guess that fails costs a copy,
// and the bytes it put in place land only in memory the engine named as written in full by the
// message anyway (proto::FpduSink::placement_ahead).
//
// Owner: the receiving call (on its stack), for one receive. Lock: the QP lock, held by the
// caller from plan() through the system call to take().
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <span>

#include "base/bytes.h"
#include "proto/fpdu_reader.h"
#include "runtime/rdmap_driver.h"
#include "verbs/queue_pair.h"

namespace uwarp::runtime {

class PlannedReceive {
 public:
  // The most pieces planned (trailers and headers included; IOV_MAX is 1024).
  static constexpr std::size_t kMaxPieces = 255;

  struct Limits {
    std::size_t most = 0;          // bytes planned, at most (the tail aside)
    std::size_t min_in_place = 0;  // fewer in place: no plan (a receive into a buffer does as well)
    std::size_t min_ahead = 0;     // segments shorter than this: none guessed ahead
  };
  // Plans the receive: the pieces that are fed go to the start of `buffer`, then `tail` bytes
  // more; false if there is no plan. `buffer` must hold the pieces and the tail (the trailers and
  // headers of kMaxPieces / 2 segments take under 3 KiB).
  bool plan(verbs::QueuePair& qp, RdmapDriver& rdmap, ByteSpan buffer, std::size_t tail,
            const Limits& limits) REQUIRES(qp.mutex());
  std::span<const iovec> iov() const { return {iov_.data(), count_}; }
  // Bytes the receive asks for.
  std::size_t size() const { return size_; }
  // Calls `f` with the first `n` bytes received, in stream order, piece by piece.
  template <typename F>
  void each_received(std::size_t n, F&& f) const {
    for (std::size_t k = 0, at = 0; k < count_ && at < n; at += iov_[k].iov_len, ++k) {
      f(ConstByteSpan(piece(k).first(std::min(iov_[k].iov_len, n - at))));
    }
  }
  // Takes the `n` bytes received. Returns those left to feed, copied in order into `gather`
  // (which must hold size() bytes and lie apart from the pieces); empty if all were taken.
  ConstByteSpan take(verbs::QueuePair& qp, RdmapDriver& rdmap, std::size_t n, ByteSpan gather)
      REQUIRES(qp.mutex());

 private:
  ByteSpan piece(std::size_t k) const {
    return ByteSpan(static_cast<std::uint8_t*>(iov_[k].iov_base), iov_[k].iov_len);
  }

  // Left uninitialized (trivial types): set up anew for each receive, a few slots used.
  std::array<proto::FpduReader::Piece, kMaxPieces> plan_;
  std::array<iovec, kMaxPieces + 1> iov_;  // where each piece, then the tail, is received
  std::size_t planned_ = 0;
  std::size_t count_ = 0;  // planned_ + 1
  std::size_t size_ = 0;
};

}  // namespace uwarp::runtime
