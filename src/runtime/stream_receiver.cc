#include "runtime/stream_receiver.h"

#include <algorithm>
#include <cerrno>

#include "io/pcap_recorder.h"

namespace uwarp::runtime {

StreamReceiver::StreamReceiver(io::IoBackend& backend, int fd)
    : backend_(backend), fd_(fd), bounce_(kBounceInitial) {}

std::size_t StreamReceiver::next_bounce_want() {
  const std::size_t want = large_payloads_ ? kSmallRead : bounce_.size();
  large_payloads_ = false;
  return want;
}

bool StreamReceiver::receive_direct(verbs::QueuePair& qp, RdmapDriver& rdmap, long& status) {
  bool progress = false;
  for (int i = 0; i < 64 && status > 0; ++i) {
    const ByteSpan target = rdmap.direct_target();
    if (target.size() < kDirectMin || !rdmap.rx_open(qp)) break;
    large_payloads_ = true;
    const long n = backend_.try_recv(fd_, target);
    if (n > 0) {
      io::pcap_received(fd_, target.first(static_cast<std::size_t>(n)));
      bytes_ += static_cast<std::size_t>(n);
      rdmap.commit_direct(qp, static_cast<std::size_t>(n));
      progress = true;
      if (static_cast<std::size_t>(n) < target.size()) status = -EAGAIN;  // a short read: empty
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
    feed(qp, rdmap, held_from_, held_to_);
  }
  if (holding() || rdmap.rx_waiting(qp)) {
    out.waiting = true;
    return out;
  }
  long status = 1;
  for (int round = 0; round < kRxRounds; ++round) {
    if (rdmap.rx_open(qp)) out.progress |= receive_direct(qp, rdmap, status);
    if (status > 0) {
      const std::size_t want = next_bounce_want();
      status = backend_.try_recv(fd_, ByteSpan(bounce_.data(), want));
      if (status == -EINTR) {
        status = 1;
        continue;
      }
      if (status > 0) {
        out.progress = true;
        if (!feed_bounce(qp, rdmap, static_cast<std::size_t>(status), want)) {
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

bool StreamReceiver::feed_bounce(verbs::QueuePair& qp, RdmapDriver& rdmap, std::size_t n,
                                 std::size_t want) {
  io::pcap_received(fd_, ConstByteSpan(bounce_.data(), n));
  bytes_ += n;
  if (!feed(qp, rdmap, 0, n)) return false;
  if (n == bounce_.size() && bounce_.size() < kBounceSize) {
    bounce_.resize(bounce_.size() * 2);  // no receive into it is in flight (the caller's locks)
  }
  // A short read emptied the socket (io::IoBackend::watch_readable): no receive that would only
  // say EAGAIN.
  return n >= want;
}

bool StreamReceiver::feed(verbs::QueuePair& qp, RdmapDriver& rdmap, std::size_t from,
                          std::size_t to) {
  // After a Terminate (either way) incoming bytes are read and dropped until the peer closes.
  const std::size_t used =
      rdmap.rx_open(qp) ? rdmap.feed(qp, ConstByteSpan(bounce_.data() + from, to - from)) : to - from;
  held_from_ = from + used;
  held_to_ = to;
  if (holding() && rdmap.rx_waiting(qp)) return false;
  held_from_ = held_to_ = 0;
  return true;
}

bool StreamReceiver::feed_early(verbs::QueuePair& qp, RdmapDriver& rdmap, ConstByteSpan bytes) {
  if (bounce_.size() < bytes.size()) bounce_.resize(bytes.size());
  std::copy(bytes.begin(), bytes.end(), bounce_.begin());
  return !feed(qp, rdmap, 0, bytes.size());
}

ByteSpan StreamReceiver::watch_buffer() {
  // Not while a payload is on its way to its place: this receiver receives it there directly
  // (one copy), where the watch's receive would take it through the bounce buffer.
  if (direct_pending_) return {};
  watch_want_ = next_bounce_want();
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
  out.more = feed_bounce(qp, rdmap, static_cast<std::size_t>(received), watch_want_);
  out.waiting = holding();
  return out;
}

void StreamReceiver::note_direct_target(verbs::QueuePair& qp, RdmapDriver& rdmap) {
  direct_pending_ = rdmap.rx_open(qp) && rdmap.direct_target().size() >= kDirectMin;
}

}  // namespace uwarp::runtime
