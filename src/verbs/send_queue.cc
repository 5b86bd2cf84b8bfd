#include "verbs/send_queue.h"

#include <cstring>

#include "base/faulting_memory.h"
#include "verbs/send_wr.h"
#include "wire/rdmap_ext.h"

namespace uwarp::verbs {

SendQueue::SendQueue(const QpCaps& caps, const DeviceLimits& limits, bool signal_all,
                     MemoryProtection& protection, QpReporter& reporter)
    : max_wr_(caps.max_send_wr),
      max_sge_(caps.max_send_sge),
      limits_(limits),
      signal_all_(signal_all),
      protection_(protection),
      reporter_(reporter) {}

Status SendQueue::post(const SendWr& wr, bool reads_allowed) {
  PostedShape shape;
  if (const char* refused = check_send_wr(wr, max_sge_, limits_, reads_allowed, shape)) {
    return Status(Errc::kInvalidArgument, refused);
  }
  if (sq_.size() >= max_wr_) return Status(Errc::kNoResources, "send queue is full");
  const std::uint64_t length = shape.length;
  const bool is_inline = shape.is_inline;
  Entry& e = sq_.push_back();  // a reused slot, as new but with its vectors' storage
  e.seq = next_seq_++;
  e.wr_id = wr.wr_id;
  e.opcode = wr.opcode;
  e.flags = wr.flags;
  e.remote_addr = wr.remote_addr;
  e.rkey = wr.rkey;
  e.invalidate_rkey = wr.invalidate_rkey;
  e.access = wr.access;
  e.imm_data = wr.imm_data;
  e.answered = writes_local_memory(wr.opcode);
  e.compare_add = wr.compare_add;
  e.swap = wr.swap;
  e.signaled = signal_all_ || (wr.flags & send_flags::kSignaled) != 0;
  e.length = static_cast<std::uint32_t>(length);
  if (is_inline) {
    // Copied now: the application may reuse its buffer when post_send returns.
    e.inline_data.resize(length);
    std::size_t at = 0;
    for (const Sge& s : wr.sg_list) {
      if (s.length > 0)
        std::memcpy(e.inline_data.data() + at, reinterpret_cast<const void*>(s.addr), s.length);
      at += s.length;
    }
  } else {
    e.sges.assign(wr.sg_list.begin(), wr.sg_list.end());
  }
  return Status::ok();
}

void SendQueue::flush_last() {
  Entry& e = sq_.back();
  e.phase = Phase::kDone;
  e.status = WcStatus::kWrFlushError;
  complete_in_order();
}

bool SendQueue::peek(proto::OutboundRequest& next) const {
  if (next_ >= sq_.size()) return false;
  const Entry& e = sq_[next_];
  next.seq = e.seq;
  next.kind = request_kind(e.opcode, e.length);
  next.fence = (e.flags & send_flags::kFence) != 0;
  return true;
}

bool SendQueue::start_local(Entry& e, MemoryRegionRef& revoked) {
  MemoryProtection::LocalOperation op;
  op.opcode = e.opcode;
  op.stag = e.opcode == WrOpcode::kLocalInvalidate ? e.invalidate_rkey : e.rkey;
  if (!e.sges.empty()) op.range = e.sges.front();
  op.iova = e.remote_addr;
  op.access = e.access;
  ++next_;
  auto done = protection_.run_local(op);
  if (!done) {
    e.phase = Phase::kDone;
    e.status = done.error();
    return false;
  }
  // Complete once the engine reports it sent (at once: nothing goes on the wire), or, when it
  // took a binding away, once every access through it has been cut off (swept()).
  e.phase = Phase::kInFlight;
  e.awaiting_sweep = *done != nullptr;
  revoked = std::move(*done);
  return true;
}

bool SendQueue::next_local_ready() const {
  if (next_ >= sq_.size() || !is_local_operation(sq_[next_].opcode)) return false;
  if ((sq_[next_].flags & send_flags::kFence) == 0) return true;
  for (std::size_t i = 0; i < next_; ++i) {
    if (sq_[i].answered && sq_[i].phase != Phase::kDone) return false;
  }
  return true;
}

bool SendQueue::run_ready_local(std::vector<Sweep>& revoked) {
  while (next_local_ready()) {
    Entry& e = sq_[next_];
    const std::uint64_t seq = e.seq;
    MemoryRegionRef taken;
    if (!start_local(e, taken)) return false;
    if (taken) revoked.emplace_back(seq, std::move(taken));
    sent(seq);
  }
  return true;
}

bool SendQueue::start(proto::OutboundRequest& r, std::vector<ConstByteSpan>& payload,
                      MemoryRegionRef& revoked) {
  Entry& e = sq_[next_];
  r.length = 0;
  if (is_local_operation(e.opcode)) return start_local(e, revoked);
  if (!e.inline_data.empty()) {
    payload.push_back(ConstByteSpan(e.inline_data));
  } else {
    const std::uint32_t needed = e.answered ? access::kLocalWrite : 0;
    if (!protection_.resolve_local(e.sges, needed, e.spans, e.mrs)) {
      e.phase = Phase::kDone;
      e.status = WcStatus::kLocalProtectionError;
      ++next_;
      return false;
    }
    if (!e.answered) {
      for (const ByteSpan& s : e.spans) payload.push_back(s);
    }
  }
  r.solicited = (e.flags & send_flags::kSolicited) != 0;
  r.length = e.length;
  r.remote_stag = wire::Stag{e.rkey};
  r.remote_offset = wire::TaggedOffset{e.remote_addr};
  r.invalidate_stag = wire::Stag{e.invalidate_rkey};
  r.immediate = wire::ImmediateData::from_verbs(e.imm_data).data;
  // A Read's sink is advertised as the first SGE's STag and address; a multi-SGE sink is
  // scattered locally by offset (read_sink), so the peer sees one tagged buffer.
  r.sink_stag = wire::Stag{e.sges.empty() ? 0 : e.sges.front().lkey};
  r.sink_offset = wire::TaggedOffset{e.sges.empty() ? 0 : e.sges.front().addr};
  e.phase = Phase::kInFlight;
  ++next_;
  return true;
}

void SendQueue::sent(std::uint64_t seq) {
  Entry* e = find(seq);
  if (e == nullptr || e->phase != Phase::kInFlight) return;  // flushed (or answered) meanwhile
  if (e->awaiting_sweep) return;
  if (e->answered) {
    e->phase = Phase::kAwaitingResponse;
    return;
  }
  succeed(*e);
}

bool SendQueue::uses(ConstByteSpan memory) const {
  for (std::size_t i = 0; i < sq_.size(); ++i) {
    const Entry& e = sq_[i];
    if (e.phase != Phase::kDone && overlaps_any(e.spans, memory)) return true;
  }
  return false;
}

const std::vector<ByteSpan>* SendQueue::read_sink(std::uint64_t seq) {
  Entry* e = find(seq);
  return e == nullptr ? nullptr : &e->spans;
}

void SendQueue::swept(std::uint64_t seq) {
  Entry* e = find(seq);
  if (e == nullptr || e->phase != Phase::kInFlight || !e->awaiting_sweep) return;
  succeed(*e);
}

void SendQueue::read_complete(std::uint64_t seq) {
  Entry* e = find(seq);
  if (e != nullptr) succeed(*e);
}

wire::AtomicRequest SendQueue::atomic_request(std::uint64_t seq) {
  const Entry* e = find(seq);
  return e == nullptr ? wire::AtomicRequest{} : atomic_operands(e->opcode, e->compare_add, e->swap);
}

bool SendQueue::atomic_complete(std::uint64_t seq, std::uint64_t original_value) {
  Entry* e = find(seq);
  // The answer may be received before the request is reported sent (sent() then finds it
  // done): a send's bytes are counted once its system call has returned, and the thread that
  // made it may take the QP lock back after the thread that receives.
  if (e == nullptr || (e->phase != Phase::kAwaitingResponse && e->phase != Phase::kInFlight)) return true;
  // One SGE of 8 bytes (check_send_wr), resolved with local write access in start().
  const ConstByteSpan value(reinterpret_cast<const std::uint8_t*>(&original_value), sizeof original_value);
  if (!e->mrs.front()->on_demand()) {
    std::memcpy(e->spans.front().data(), value.data(), value.size());
  } else if (!copy_to_faulting(e->spans.front(), value)) {
    // On-demand memory unmapped since the request started: the result cannot be kept. As a
    // request that fails to start, it is reported by the flush of the QP's failure.
    e->phase = Phase::kDone;
    e->status = WcStatus::kLocalProtectionError;
    return false;
  }
  succeed(*e);
  return true;
}

void SendQueue::flush(std::optional<WcStatus> first_status, std::uint32_t vendor_err) {
  bool first = true;
  for (std::size_t i = 0; i < sq_.size(); ++i) {
    Entry& e = sq_[i];
    if (e.phase == Phase::kDone) continue;
    // A local operation that took a binding away has taken effect; it completes once the
    // binding's accesses are cut off (swept()), and what follows it waits for it.
    if (e.awaiting_sweep) continue;
    // A Send or Write already handed to TCP (in flight) counts as sent unless the first error
    // belongs to it; everything else is flushed.
    if (first && first_status &&
        (e.phase == Phase::kAwaitingResponse || e.phase == Phase::kInFlight)) {
      e.status = *first_status;
      e.vendor_err = vendor_err;
    } else {
      e.status = WcStatus::kWrFlushError;
    }
    first = false;
    if (e.phase == Phase::kInFlight && !e.inline_data.empty())
      retired_inline_.push_back(std::move(e.inline_data));
    e.phase = Phase::kDone;
    e.mrs.clear();
  }
  complete_in_order();
}

void SendQueue::clear() {
  sq_.clear();
  next_ = 0;
}

SendQueue::Entry* SendQueue::find(std::uint64_t seq) {
  if (sq_.empty() || seq < sq_.front().seq) return nullptr;
  const std::size_t i = static_cast<std::size_t>(seq - sq_.front().seq);
  return i < sq_.size() ? &sq_[i] : nullptr;
}

void SendQueue::succeed(Entry& e) {
  e.phase = Phase::kDone;
  e.status = WcStatus::kSuccess;
  e.mrs.clear();
  complete_in_order();
}

void SendQueue::complete_in_order() {
  while (!sq_.empty() && sq_.front().phase == Phase::kDone) {
    const Entry& e = sq_.front();
    if (e.signaled || e.status != WcStatus::kSuccess) push_completion(e);
    sq_.pop_front();
    if (next_ > 0) --next_;
  }
}

void SendQueue::push_completion(const Entry& e) {
  WorkCompletion wc;
  wc.wr_id = e.wr_id;
  wc.status = e.status;
  wc.vendor_err = e.vendor_err;
  wc.qp_num = reporter_.qp_num();
  wc.opcode = completion_opcode(e.opcode);
  if (e.answered) wc.byte_len = e.length;
  reporter_.send_completion(wc);
}

}  // namespace uwarp::verbs
