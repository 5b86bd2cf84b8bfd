// The two RDMA Read queues of one connection (RFC 5040 section 5.2), which also carry the RFC
// 7306 Atomic Requests (they share the Read Requests' queue, order and ORD/IRD):
// - OutboundReadQueue (ORQ): our RDMA Reads and Atomic Requests that went out, oldest first,
//   that the peer's responses are matched against; it holds back a request behind a fence or
//   beyond ORD, and knows our own RFC 6581 RTR Read, whose empty response is no work request's;
// - InboundReadQueue (IRQ): the peer's Read and Atomic Requests waiting for their response, and
//   the one response being sent. IRD is enforced on receive (RdmapReceiver).
//
// Neither calls out: they hold the state and its rules, the engine talks to the port.
// Owner: the connection's RdmapEngine (members, no allocation per message beyond the deques').
// Thread: not thread-safe; the engine's owner thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

#include "base/bytes.h"
#include "uwarp/expected.h"
#include "wire/quantities.h"
#include "wire/rdmap.h"
#include "wire/rdmap_ext.h"

namespace uwarp::proto {

// An RDMA Read whose Read Request was sent: the local sink the peer writes its response to.
struct OutboundRead {
  std::uint64_t seq = 0;  // the port's name for the work request
  wire::Stag sink_stag;
  wire::TaggedOffset sink_offset;
  std::uint32_t length = 0;
  // Response bytes placed so far: the sink's first `placed` bytes, as the segments of one
  // message come in order (match_segment() accepts only the segment that continues them).
  std::uint32_t placed = 0;
  // An Atomic Request (RFC 7306), answered by an Atomic Response naming `request_id`; its
  // result goes to the request's local memory (the sink fields are unused).
  bool atomic = false;
  std::uint32_t request_id = 0;
};

// Which Read a Read Response segment (or whole response) belongs to.
struct ReadResponseTarget {
  bool rtr = false;       // our RTR Read: nothing to place, no work request to complete
  std::uint64_t seq = 0;  // otherwise the oldest outstanding Read
  std::size_t offset = 0;  // the segment's offset in that Read's sink
};

class OutboundReadQueue {
 public:
  explicit OutboundReadQueue(std::uint16_t ord) : ord_(ord) {}

  // Transmit: whether the next posted request may start now. A fenced request waits until
  // every earlier Read or Atomic has its response; a Read or Atomic (`read`) waits while ORD of
  // them are outstanding.
  bool may_start(bool read, bool fence) const {
    if (fence && !reads_.empty()) return false;
    return !read || reads_.size() < ord_;
  }
  // Its Read Request is being sent: the response is expected after those of earlier Reads.
  void push(const OutboundRead& read) { reads_.push_back(read); }
  // Our RTR Read is being sent: the next Read Response is its (empty) answer.
  void push_rtr_read() { rtr_read_pending_ = true; }

  // Receive: a Read Response segment for [to, to + length) of `stag`: the oldest Read's, if it
  // starts where the bytes already placed end (sink TO + placed) and stays in the sink that Read
  // advertised; else the DDP tagged-buffer error. So each sink byte is placed exactly once, and
  // a response that overlaps, repeats or skips bytes never completes its Read.
  Expected<ReadResponseTarget, wire::TerminateCode> match_segment(wire::Stag stag,
                                                                  wire::TaggedOffset to,
                                                                  std::size_t length) const;
  // The port placed `length` bytes of the segment match_segment() matched to the oldest Read
  // (no more than it allowed: `placed` never exceeds the Read's length).
  void placed(std::size_t length) { reads_.front().placed += static_cast<std::uint32_t>(length); }
  // Where `length` response bytes would go that follow `skip` bytes after those placed so far, in
  // the oldest Read's sink: its seq and the offset, and the length cut to the sink's end (none if
  // the oldest request is no Read, or the sink ends before them). The queue does not change.
  std::optional<ReadResponseTarget> ahead(std::size_t skip, std::size_t& length) const {
    if (rtr_read_pending_ || reads_.empty() || reads_.front().atomic) return std::nullopt;
    const OutboundRead& read = reads_.front();
    const std::size_t offset = std::size_t{read.placed} + skip;
    if (offset >= read.length) return std::nullopt;
    length = std::min<std::size_t>(length, read.length - offset);
    return ReadResponseTarget{false, read.seq, offset};
  }
  // The response's last segment (DDP L=1) has arrived: its Read leaves the queue. The error if
  // there is no Read or the response placed fewer bytes than the Read's length.
  Expected<ReadResponseTarget, wire::TerminateCode> complete();
  // An Atomic Response naming `request_id` has arrived: the oldest request, if it is the Atomic
  // Request of that identifier, leaves the queue (its seq); else RDMAP "unexpected opcode".
  Expected<std::uint64_t, wire::TerminateCode> complete_atomic(std::uint32_t request_id);

  // The QP failed: every Read is dropped (the RTR Read, which has no memory, stays expected).
  void clear() { reads_.clear(); }

 private:
  const std::uint16_t ord_;
  bool rtr_read_pending_ = false;  // our RTR Read awaits its response (it is not in reads_)
  std::deque<OutboundRead> reads_;
};

// The memory an inbound Read Request reads. `keep` holds the region alive until the Read
// Response that reads it has been handed to TCP or abandoned.
struct ReadSource {
  ConstByteSpan bytes;
  std::shared_ptr<const void> keep;
};

// A Read Request of the peer: where its response goes and what it reads. Or an Atomic Request
// of the peer (`atomic`): `source` is the 64-bit word it operates on (writable memory, naturally
// aligned, checked for remote atomic access), carried out when its response is sent.
struct InboundRead {
  wire::Stag sink_stag;
  wire::TaggedOffset sink_offset;
  ReadSource source;
  std::optional<wire::AtomicRequest> atomic;
};

class InboundReadQueue {
 public:
  bool empty() const { return queue_.empty(); }
  // The oldest request waiting (the caller checked !empty()) is an Atomic Request.
  bool next_is_atomic() const { return queue_.front().atomic.has_value(); }
  void push(InboundRead read) { queue_.push_back(std::move(read)); }
  // The oldest Read Request becomes the Read Response being sent (the caller checked !empty());
  // it, and its source, stay valid until response_sent() or clear().
  const InboundRead& start_response() {
    responding_ = std::move(queue_.front());
    queue_.pop_front();
    return responding_;
  }
  // The Read Response has been handed to TCP: its source may be released.
  void response_sent() { responding_ = InboundRead{}; }

  // A Read Request queued or being answered reads through `region` (its source's keep).
  bool reads_through(const void* region) const {
    if (responding_.source.keep.get() == region) return true;
    for (const InboundRead& r : queue_) {
      if (r.source.keep.get() == region) return true;
    }
    return false;
  }
  // The QP failed: no Read Response reads its source any more.
  void clear() {
    queue_.clear();
    responding_ = InboundRead{};
  }

 private:
  std::deque<InboundRead> queue_;  // Read Requests not yet answered, oldest first
  InboundRead responding_;         // the Read Response being sent
};

}  // namespace uwarp::proto
