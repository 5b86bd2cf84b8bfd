// A queue pair's side of its binding to a stream: the link while bound, the IRD and ORD the CM
// negotiated for it, and what the QP asks of the stream until the stream collects it (the
// runtime's RdmapDriver, after each call into the QP; verbs/qp_link.h).
//
// Owner: the QueuePair, which calls it only with its mutex held. attach() starts afresh: nothing
// asked of an earlier stream carries over to the next, except the bindings still to be swept.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "verbs/memory_region.h"
#include "verbs/qp_link.h"
#include "wire/ddp.h"

namespace uwarp::verbs {

class LinkBinding {
 public:
  void attach(QpLink* link, const LinkParams& params) {
    // Bindings still to be swept are the QP's memory, not the old stream's: they stay.
    std::vector<Sweep> sweeps = std::move(sweeps_);
    *this = LinkBinding{};
    sweeps_ = std::move(sweeps);
    link_ = link;
    ird_ = params.ird;
    ord_ = params.ord;
    fpdu_payload_ = params.max_ulpdu > wire::kMaxDdpHeaderSize
                        ? params.max_ulpdu - wire::kMaxDdpHeaderSize
                        : 1;
  }
  void detach() { link_ = nullptr; }
  QpLink* link() const { return link_; }
  std::uint16_t ird() const { return ird_; }
  std::uint16_t ord() const { return ord_; }
  // The payload bytes one FPDU of the connection carries at least, as it started (later MSS
  // changes aside: only verbs::posts_little asks).
  std::uint64_t fpdu_payload() const { return fpdu_payload_; }

  // Requests for the stream (TxRequests).
  void abandon() { requests_.abandon = true; }
  void request_shutdown() { requests_.shutdown = true; }
  void sweep_later(std::uint64_t seq, MemoryRegionRef revoked) {
    sweeps_.emplace_back(seq, std::move(revoked));
    requests_.sweep = true;
  }
  bool has_requests() const { return requests_.abandon || requests_.shutdown || requests_.sweep; }
  TxRequests take_requests() { return std::exchange(requests_, TxRequests{}); }
  // The bindings to sweep, taken by the progress thread (verbs::sweep_invalidations).
  std::vector<Sweep> take_sweeps() { return std::exchange(sweeps_, {}); }

  // Responder in peer-to-peer mode: the peer's RTR arrived, until the stream takes it.
  void rtr_received() { rtr_received_ = true; }
  bool take_rtr_received() { return std::exchange(rtr_received_, false); }

  // A graceful disconnect starts once per stream: true the first time.
  bool start_disconnect() { return !std::exchange(disconnecting_, true); }

 private:
  QpLink* link_ = nullptr;
  std::uint16_t ird_ = 0;
  std::uint16_t ord_ = 0;
  std::uint64_t fpdu_payload_ = 1;
  TxRequests requests_;
  std::vector<Sweep> sweeps_;
  bool rtr_received_ = false;
  bool disconnecting_ = false;
};

}  // namespace uwarp::verbs
