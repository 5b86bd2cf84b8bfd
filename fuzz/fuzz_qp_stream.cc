// libFuzzer target: the whole receive path of a connected QP and its connection's driver
// (FpduReader, RdmapReceiver and the QP's placement, Read Request and Terminate handling, plus the
// transmit side they trigger). The input is a small program: each step appends one frame to the
// inbound byte stream (a Write, Send, Read Request, Read Response or Terminate with fuzzed fields,
// addressed to the QP's real STags by index, or raw bytes), posts a local work request, or feeds
// the stream so far to the QP in fuzzed pieces, via feed(), the direct-placement path, or a receive
// planned ahead of the headers (runtime::PlannedReceive: Read Response payloads put in their
// places before their headers are read, as the kernel fills a scattered receive).
// AddressSanitizer catches any byte placed outside registered memory; the checks below catch broken
// state.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "fuzz_check.h"
#include "proto/tx_batch.h"
#include "runtime/planned_receive.h"
#include "runtime/rdmap_driver.h"
#include "verbs/device.h"
#include "verbs/queue_pair.h"
#include "wire/rdmap_ext.h"
#include "verbs/revocation.h"
#include "wire/fpdu.h"
#include "wire/rdmap.h"

namespace uwarp {
namespace {

// As runtime::Stream's transmitter: after each call it takes what the QP asks; after an
// error nothing more is read from the flushed requests' memory.
class CollectingLink final : public verbs::QpLink {
 public:
  void doorbell(verbs::QueuePair&, verbs::Doorbell) override {}
  void settle_send(verbs::QueuePair&) override {}  // it makes no sends
  // As runtime::Stream: reception waited for a receive; it resumes before the next feed.
  void receive_posted(verbs::QueuePair&) override { resume = true; }
  // As runtime::Stream::revoke.
  void revoke(verbs::QueuePair& qp, const proto::RevokedRegion& revoked, bool qp_in_use) override {
    const bool queued = batch != nullptr && batch->reads_from(revoked);
    if (rdmap != nullptr) rdmap->revoke(qp, revoked, qp_in_use || queued);
  }
  void collect(verbs::QueuePair& qp) {
    const verbs::TxRequests r = rdmap->take_requests(qp);
    if (r.abandon && batch != nullptr) batch->abandon_after_current_fpdu();
    if (r.shutdown) shutdown = true;
    qp.take_rtr_received_locked();
  }
  runtime::RdmapDriver* rdmap = nullptr;
  proto::TxBatch* batch = nullptr;
  bool shutdown = false;
  bool resume = false;
};

constexpr int kRegions = 4;
constexpr std::size_t kRegionSize = 4096;

struct Harness {
  verbs::Device device;
  verbs::ProtectionDomain pd{1};
  verbs::ProtectionDomain other_pd{2};
  verbs::CompletionQueue cq{1u << 16, nullptr, nullptr};
  // Separate heap blocks, so that AddressSanitizer sees a write past any of them.
  std::array<std::unique_ptr<std::uint8_t[]>, kRegions> mem;
  std::array<verbs::MemoryRegionRef, kRegions> mr;

  Harness() {
    for (int i = 0; i < kRegions; ++i) add_region(i);
  }
  // Region i, registered afresh (a new STag) in new memory.
  void add_region(int i) {
    const std::uint32_t rights[kRegions] = {
        access::kAll, access::kLocalWrite | access::kRemoteWrite,
        access::kLocalWrite | access::kRemoteRead, access::kLocalWrite};
    mem[i].reset(new std::uint8_t[kRegionSize]());
    mr[i] = std::make_shared<verbs::MemoryRegion>();
    mr[i]->addr = mem[i].get();
    mr[i]->length = kRegionSize;
    mr[i]->iova = 0x10000u * (i + 1);
    mr[i]->access = rights[i];
    mr[i]->pd = i == 3 ? &other_pd : &pd;
    FUZZ_CHECK(device.stags().insert(mr[i]));
  }
};

Harness& harness() {
  static Harness h;
  return h;
}

std::uint32_t pick_stag(FuzzedDataProvider& in, Harness& h) {
  const int k = in.ConsumeIntegralInRange<int>(0, kRegions);
  if (k == kRegions) return in.ConsumeIntegral<std::uint32_t>();
  return h.mr[k]->stag;
}

void append_fpdu(std::vector<std::uint8_t>& stream, const wire::DdpHeader& h, ConstByteSpan payload,
                 bool crc, bool corrupt) {
  std::vector<std::uint8_t> ulpdu(h.size() + payload.size());
  wire::encode_ddp_header(h, ulpdu);
  if (!payload.empty()) std::memcpy(ulpdu.data() + h.size(), payload.data(), payload.size());
  std::vector<std::uint8_t> fpdu(wire::fpdu_size(ulpdu.size()));
  wire::encode_fpdu(ulpdu, crc, fpdu);
  if (corrupt && !fpdu.empty()) fpdu[fpdu.size() / 2] ^= 0x5A;
  stream.insert(stream.end(), fpdu.begin(), fpdu.end());
}

void run_one(const std::uint8_t* data, std::size_t size) {
  Harness& h = harness();
  FuzzedDataProvider in(data, size);
  verbs::QpConfig cfg;
  cfg.pd = &h.pd;
  cfg.send_cq = &h.cq;
  cfg.recv_cq = &h.cq;
  cfg.caps.max_send_wr = 64;
  cfg.caps.max_recv_wr = 64;
  verbs::QueuePair qp(h.device, cfg);
  CollectingLink link;
  // Receiver not ready: messages without a receive wait for one (docs/receiver-not-ready.md).
  if (in.ConsumeBool()) qp.set_receive_wait(verbs::ReceiveWait::kForever);
  verbs::LinkParams lp;
  lp.crc = in.ConsumeBool();
  lp.ird = in.ConsumeIntegralInRange<std::uint16_t>(0, 4);
  lp.ord = in.ConsumeIntegralInRange<std::uint16_t>(0, 4);
  lp.expect_rtr = static_cast<proto::RtrType>(in.ConsumeIntegralInRange<int>(0, 3));
  lp.max_ulpdu = in.ConsumeIntegralInRange<std::size_t>(64, 2048);
  std::unique_lock lock(qp.mutex());          // released around the calls that take it themselves
  runtime::RdmapDriver rdmap(qp, &link, lp);  // destroyed before qp
  link.rdmap = &rdmap;

  std::vector<std::uint8_t> stream;
  std::size_t fed = 0;
  std::uint32_t msn[3] = {1, 1, 1};
  std::vector<std::uint8_t> payload;
  proto::TxBatch batch;
  link.batch = &batch;
  std::array<Sge, 2> sges;
  std::vector<std::uint8_t> plan_buffer(8192);
  std::vector<std::uint8_t> gather(64 * 1024);

  for (int step = 0; step < 64 && in.remaining_bytes() > 0; ++step) {
    wire::DdpHeader d;
    d.last = in.ConsumeBool() || in.ConsumeBool();
    const bool corrupt = in.ConsumeIntegralInRange<int>(0, 15) == 0;
    const std::size_t len = in.ConsumeIntegralInRange<std::size_t>(0, 600);
    payload = in.ConsumeBytes<std::uint8_t>(len);
    switch (in.ConsumeIntegralInRange<int>(0, 10)) {
      case 0:  // RDMA Write
        d.tagged = true;
        d.opcode = 0;
        d.stag = pick_stag(in, h);
        d.tagged_offset = 0x10000u * in.ConsumeIntegralInRange<std::uint32_t>(0, 5) +
                          in.ConsumeIntegral<std::uint16_t>();
        break;
      case 1:  // Read Response
        d.tagged = true;
        d.opcode = 2;
        d.stag = pick_stag(in, h);
        d.tagged_offset = 0x10000u * in.ConsumeIntegralInRange<std::uint32_t>(0, 5) +
                          in.ConsumeIntegral<std::uint16_t>();
        break;
      case 2: {  // Send, with SE and/or Invalidate; or RFC 7306 Immediate Data (with SE)
        const int op = in.ConsumeIntegralInRange<int>(3, 8);
        d.opcode = static_cast<std::uint8_t>(op <= 6 ? op : op + 1);
        if (op > 6 && in.ConsumeBool()) payload.resize(wire::kImmediateDataSize);
        d.queue = 0;
        d.msn =
            msn[0] + in.ConsumeIntegralInRange<std::uint32_t>(0, 1) - (in.ConsumeBool() ? 1 : 0);
        d.message_offset = in.ConsumeIntegralInRange<std::uint32_t>(0, 2048);
        d.ulp_reserved = pick_stag(in, h);
        if (d.last) ++msn[0];
        break;
      }
      case 3: {  // Read Request
        wire::ReadRequest rr;
        rr.sink_stag = in.ConsumeIntegral<std::uint32_t>();
        rr.sink_to = in.ConsumeIntegral<std::uint64_t>();
        rr.size = in.ConsumeIntegralInRange<std::uint32_t>(0, 8192);
        rr.source_stag = pick_stag(in, h);
        rr.source_to = 0x10000u * in.ConsumeIntegralInRange<std::uint32_t>(0, 5) +
                       in.ConsumeIntegral<std::uint16_t>();
        payload.resize(wire::kReadRequestSize);
        wire::encode_read_request(rr, payload);
        d.opcode = 1;
        d.queue = 1;
        d.msn = msn[1]++;
        break;
      }
      case 4:  // Terminate
        d.opcode = 7;
        d.queue = 2;
        d.msn = msn[2]++;
        break;
      case 5:  // any header fields
        d.tagged = in.ConsumeBool();
        d.ddp_version = in.ConsumeIntegralInRange<std::uint8_t>(0, 3);
        d.rdmap_version = in.ConsumeIntegralInRange<std::uint8_t>(0, 3);
        d.opcode = in.ConsumeIntegralInRange<std::uint8_t>(0, 15);
        d.stag = pick_stag(in, h);
        d.queue = in.ConsumeIntegralInRange<std::uint32_t>(0, 4);
        d.msn = in.ConsumeIntegral<std::uint32_t>();
        d.message_offset = in.ConsumeIntegral<std::uint32_t>();
        break;
      case 6:  // raw bytes
        stream.insert(stream.end(), payload.begin(), payload.end());
        continue;
      case 9: {  // deregister a region in the middle of whatever is in progress and free it:
                 // AddressSanitizer catches any later access to it
        const int k = in.ConsumeIntegralInRange<int>(0, kRegions - 1);
        if (!h.mem[k]) continue;
        lock.unlock();
        // Only memory the region no longer covers may be freed (no window holds it here).
        if (verbs::deregister_region(h.device, h.mr[k])) h.mem[k].reset();
        lock.lock();
        continue;
      }
      case 7: {  // a local work request: receive, or an RDMA Read whose response may follow
        const int k = in.ConsumeIntegralInRange<int>(0, kRegions - 1);
        const std::uint32_t off = in.ConsumeIntegralInRange<std::uint32_t>(0, kRegionSize);
        sges[0] = Sge{h.mr[k]->iova + off, in.ConsumeIntegralInRange<std::uint32_t>(0, kRegionSize),
                      h.mr[k]->stag};
        sges[1] =
            Sge{h.mr[0]->iova, in.ConsumeIntegralInRange<std::uint32_t>(0, 64), h.mr[0]->stag};
        const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(0, 2);
        lock.unlock();
        if (in.ConsumeBool()) {
          (void)qp.post_recv(RecvWr{static_cast<std::uint64_t>(step), {sges.data(), n}});
        } else {
          SendWr wr;
          wr.wr_id = static_cast<std::uint64_t>(step);
          wr.opcode = static_cast<WrOpcode>(in.ConsumeIntegralInRange<int>(0, 4));
          wr.imm_data = in.ConsumeIntegral<std::uint32_t>();
          wr.sg_list = {sges.data(), n};
          wr.rkey = in.ConsumeIntegral<std::uint32_t>();
          // Inline copies from the SGE address as a pointer; the harness addresses are not.
          wr.flags = in.ConsumeIntegral<std::uint8_t>() & 0xF & ~send_flags::kInline;
          (void)qp.post_send(wr);
        }
        lock.lock();
        continue;
      }
      case 8: {  // feed what is pending, in fuzzed pieces, through feed() or direct placement
        // A wait resumes as the stream resumes it: a receive was posted, or its limit passed.
        const bool limit_passed = rdmap.rx_waiting(qp) && in.ConsumeIntegralInRange<int>(0, 7) == 0;
        if (limit_passed) qp.receive_wait_expired_locked();
        if (std::exchange(link.resume, false) || limit_passed) {
          rdmap.resume_rx(qp);
          link.collect(qp);
        }
        while (fed < stream.size() && rdmap.rx_open(qp)) {
          const std::size_t piece =
              std::min(stream.size() - fed, in.ConsumeIntegralInRange<std::size_t>(1, 4096));
          const ByteSpan direct = rdmap.direct_target();
          runtime::PlannedReceive planned;
          const bool try_plan = in.ConsumeIntegralInRange<int>(0, 2) == 0;
          const std::size_t tail = in.ConsumeIntegralInRange<std::size_t>(0, 600);
          runtime::PlannedReceive::Limits limits;
          limits.most = in.ConsumeIntegralInRange<std::size_t>(1, 56 * 1024);
          limits.min_in_place = 1;
          limits.min_ahead = in.ConsumeIntegralInRange<std::size_t>(1, 2048);
          if (try_plan && planned.plan(qp, rdmap, plan_buffer, tail, limits)) {
            link.collect(qp);
            const std::size_t n = std::min({stream.size() - fed, planned.size(), piece * 16});
            std::size_t copied = 0;
            for (const iovec& v : planned.iov()) {
              const std::size_t k = std::min(v.iov_len, n - copied);
              std::memcpy(v.iov_base, stream.data() + fed + copied, k);
              copied += k;
            }
            const ConstByteSpan rest = planned.take(qp, rdmap, n, gather);
            link.collect(qp);
            FUZZ_CHECK(rest.size() <= n);
            const std::size_t used = rest.empty() ? 0 : rdmap.feed(qp, rest);
            link.collect(qp);
            FUZZ_CHECK(used <= rest.size());
            // Bytes not taken stay in the stream, as the stream holds them.
            fed += n - rest.size() + used;
            if (used < rest.size()) {
              FUZZ_CHECK(!rdmap.rx_open(qp) || rdmap.rx_waiting(qp));
              break;
            }
          } else if (!direct.empty() && in.ConsumeBool()) {
            const std::size_t n = std::min(piece, direct.size());
            std::memcpy(direct.data(), stream.data() + fed, n);
            rdmap.commit_direct(qp, n);
            link.collect(qp);
            fed += n;
          } else {
            const std::size_t used = rdmap.feed(qp, ConstByteSpan(stream.data() + fed, piece));
            link.collect(qp);
            FUZZ_CHECK(used <= piece);
            fed += used;
            if (used < piece) {  // stopped at a failure, or waits for a receive
              FUZZ_CHECK(!rdmap.rx_open(qp) || rdmap.rx_waiting(qp));
              break;
            }
          }
        }
        continue;
      }
      default: {  // transmit whatever the QP has to send (Read Responses, a Terminate)
        for (int round = 0; round < 8 && rdmap.fill(qp, batch); ++round) {
          link.collect(qp);
          std::uint64_t cookie;
          batch.consume(batch.pending_bytes());
          while (batch.pop_sent(cookie)) rdmap.sent(qp, cookie);
          link.collect(qp);
        }
        continue;
      }
    }
    append_fpdu(stream, d, payload, lp.crc, corrupt);
  }
  // Feed the rest, then drain the transmit side and the CQ.
  if (fed < stream.size() && rdmap.rx_open(qp) && !rdmap.rx_waiting(qp)) {
    rdmap.feed(qp, ConstByteSpan(stream).subspan(fed));
  }
  link.collect(qp);
  for (int round = 0; round < 16 && rdmap.fill(qp, batch); ++round) {
    link.collect(qp);
    std::uint64_t cookie;
    batch.consume(batch.pending_bytes());
    while (batch.pop_sent(cookie)) rdmap.sent(qp, cookie);
    link.collect(qp);
  }
  qp.link_lost_locked(false, "fuzz input ended");
  qp.detach_link_locked();
  std::array<WorkCompletion, 64> wcs;
  while (h.cq.poll(wcs) > 0) {
  }
  for (int i = 0; i < kRegions; ++i) {
    if (!h.mem[i]) {
      h.add_region(i);  // deregistered by this input
    } else {
      h.mr[i]->valid.store(true);  // Send with Invalidate may have invalidated it
    }
  }
}

}  // namespace
}  // namespace uwarp

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  uwarp::run_one(data, size);
  return 0;
}
