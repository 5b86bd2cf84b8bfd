#include "runtime/stream_receiver.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "io/pcap_recorder.h"
#include "runtime/planned_receive.h"

namespace uwarp::runtime {

namespace {

// The calling thread's receive buffer (StreamReceiver::receive): allocated on its first receive,
// freed when it exits.
ByteSpan thread_buffer() {
  thread_local std::vector<std::uint8_t> buffer(StreamReceiver::kThreadBufferSize);
  return ByteSpan(buffer.data(), buffer.size());
}

}  // namespace

StreamReceiver::StreamReceiver(io::IoBackend& backend, int fd)
    : backend_(backend), fd_(fd), bounce_(kBounceInitial) {}

std::size_t StreamReceiver::next_want(std::size_t size) const {
  return large_payloads_ ? std::min(kSmallRead, size) : size;
}

bool StreamReceiver::receive_direct(verbs::QueuePair& qp, RdmapDriver& rdmap, long& status) {
  bool progress = false;
  const ByteSpan buffer = thread_buffer();
  for (int i = 0; i < 64 && status > 0 && !holding(); ++i) {
    if (!rdmap.rx_open(qp)) break;
    PlannedReceive planned;
    const PlannedReceive::Limits limits{buffer.size() - kGatherAt - kSmallRead, kDirectMin,
                                        kAheadMin};
    if (!planned.plan(qp, rdmap, buffer.first(kGatherAt), kSmallRead, limits)) {
      break;
    }
    large_payloads_ = true;
    const long n = backend_.try_recv(fd_, planned.iov());
    if (n > 0) {
      const auto got = static_cast<std::size_t>(n);
      planned.each_received(got, [&](ConstByteSpan bytes) { io::pcap_received(fd_, bytes); });
      bytes_ += got;
      // What a guess left unplaced goes the way of any received bytes (held if reception
      // waits: then the loop ends).
      const ConstByteSpan rest = planned.take(qp, rdmap, got, buffer.subspan(kGatherAt));
      if (!rest.empty()) feed(qp, rdmap, rest);
      progress = true;
      if (got < planned.size()) status = -EAGAIN;  // a short read: empty
      continue;
    }
    if (n == -EINTR) continue;
    status = n;  // -EAGAIN: drained; -EBUSY: a watch's receive has them; 0: EOF; < 0: error
  }
  return progress;
}

StreamReceiver::Outcome StreamReceiver::receive(verbs::QueuePair& qp, RdmapDriver& rdmap) {
  Outcome out;
  if (holding() && !rdmap.rx_waiting(qp)) {
    out.progress = true;  // the held bytes go in now
    feed(qp, rdmap, ConstByteSpan(bounce_.data(), held_));
  }
  if (holding() || rdmap.rx_waiting(qp)) {
    out.waiting = true;
    return out;
  }
  const ByteSpan buffer = thread_buffer();
  long status = 1;
  for (int round = 0; round < kRxRounds; ++round) {
    if (rdmap.rx_open(qp)) out.progress |= receive_direct(qp, rdmap, status);
    if (holding()) {  // what followed a payload received in place began a wait
      out.waiting = true;
      return out;
    }
    if (status > 0) {
      if (large_payloads_) thread_want_ = kBounceInitial;
      const std::size_t want = next_want(thread_want_);
      status = backend_.try_recv(fd_, buffer.first(want));
      if (status == static_cast<long>(thread_want_)) {
        thread_want_ = std::min(thread_want_ * 2, buffer.size());
      }
      if (status == -EINTR) {
        status = 1;
        continue;
      }
      if (status > 0) {
        out.progress = true;
        if (!feed_received(qp, rdmap, buffer.first(static_cast<std::size_t>(status)), want)) {
          out.waiting = holding();
          return out;
        }
        continue;
      }
    }
    if (status == -EAGAIN || status == -EWOULDBLOCK || status == -EBUSY) return out;
    out.ended = true;
    out.status = status;
    out.progress = true;
    return out;
  }
  out.more = true;
  return out;
}

bool StreamReceiver::feed_received(verbs::QueuePair& qp, RdmapDriver& rdmap,
                                   ConstByteSpan received, std::size_t want) {
  io::pcap_received(fd_, received);
  bytes_ += received.size();
  large_payloads_ = false;
  if (!feed(qp, rdmap, received)) return false;
  // A short read emptied the socket (io::IoBackend::watch_readable): no receive that would only
  // say EAGAIN.
  return received.size() >= want;
}

bool StreamReceiver::feed(verbs::QueuePair& qp, RdmapDriver& rdmap, ConstByteSpan bytes) {
  // After a Terminate (either way) incoming bytes are read and dropped until the peer closes.
  const std::size_t used = rdmap.rx_open(qp) ? rdmap.feed(qp, bytes) : bytes.size();
  held_ = 0;
  if (used < bytes.size() && rdmap.rx_waiting(qp)) {
    hold(bytes.subspan(used));
    return false;
  }
  if (bounce_.size() > kBounceSize) {  // it held more than a watch receives: give that back
    bounce_.resize(kBounceSize);
    bounce_.shrink_to_fit();
  }
  return true;
}

void StreamReceiver::hold(ConstByteSpan rest) {
  // Bytes from the bounce buffer never outgrow it, so growing it never moves `rest`.
  if (bounce_.size() < rest.size()) bounce_.resize(rest.size());
  std::memmove(bounce_.data(), rest.data(), rest.size());
  held_ = rest.size();
}

bool StreamReceiver::feed_early(verbs::QueuePair& qp, RdmapDriver& rdmap, ConstByteSpan bytes) {
  return !feed(qp, rdmap, bytes);
}

ByteSpan StreamReceiver::watch_buffer() {
  // Not while a payload is on its way to its place: this receiver receives it there directly
  // (one copy), where the watch's receive would take it through the bounce buffer.
  if (direct_pending_) return {};
  watch_want_ = next_want(bounce_.size());
  return ByteSpan(bounce_.data(), watch_want_);
}

StreamReceiver::Outcome StreamReceiver::take_watched(verbs::QueuePair& qp, RdmapDriver& rdmap,
                                                     long received) {
  Outcome out;
  if (received == -EINTR || received == -EAGAIN || received == -EWOULDBLOCK) {
    out.more = true;
    return out;
  }
  out.progress = true;
  if (received <= 0) {
    out.ended = true;
    out.status = received;
    return out;
  }
  const auto n = static_cast<std::size_t>(received);
  out.more = feed_received(qp, rdmap, ConstByteSpan(bounce_.data(), n), watch_want_);
  out.waiting = holding();
  // A receive that filled the bounce buffer asks for a larger one, up to kBounceSize (no
  // receive into it is in flight: the watch's has completed).
  if (!holding() && n == bounce_.size() && bounce_.size() < kBounceSize) {
    bounce_.resize(bounce_.size() * 2);
  }
  return out;
}

void StreamReceiver::note_direct_target(verbs::QueuePair& qp, RdmapDriver& rdmap) {
  direct_pending_ = rdmap.rx_open(qp) && rdmap.direct_target().size() >= kDirectMin;
}

}  // namespace uwarp::runtime
