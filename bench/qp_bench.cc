// Google Benchmark microbenchmarks of uwarp's own work per message, without sockets: two
// verbs::QueuePairs (each with its connection's runtime::RdmapDriver) back to back in memory. One
// iteration is one message, all of it on the calling thread: post it on A, fill A's transmit batch,
// copy the batch's bytes (what sendmsg would copy), report them sent (A's completion), feed them to
// B (parse, check, place, B's completion for a Send) and poll both CQs. What it leaves out is the
// kernel's part (system calls, TCP) and waiting for a thread: the latency tables of
// docs/performance.md compare the two.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "proto/tx_batch.h"
#include "runtime/rdmap_driver.h"
#include "verbs/completion_queue.h"
#include "verbs/device.h"
#include "verbs/protection_domain.h"
#include "verbs/queue_pair.h"

namespace uwarp::verbs {
namespace {

class NullLink final : public QpLink {
 public:
  void doorbell(QueuePair&, Doorbell) override {}
  void settle_send(QueuePair&) override {}
  void revoke(QueuePair&, const proto::RevokedRegion&, bool) override {
  }                                                        // nothing deregisters here
  void receive_posted(QueuePair&) override {}              // receives never wait here
};

struct Side {
  Side(Device& device, std::uint32_t pd_handle) : pd(pd_handle) {
    QpConfig c;
    c.pd = &pd;
    c.send_cq = &scq;
    c.recv_cq = &rcq;
    c.caps.max_send_wr = 64;
    c.caps.max_recv_wr = 64;
    qp = std::make_unique<QueuePair>(device, c);
  }
  ProtectionDomain pd;
  CompletionQueue scq{256, nullptr, nullptr};
  CompletionQueue rcq{256, nullptr, nullptr};
  std::unique_ptr<QueuePair> qp;
  std::unique_ptr<runtime::RdmapDriver> rdmap;  // destroyed before qp
  NullLink link;
  proto::TxBatch batch;
};

class Pair {
 public:
  // max_ulpdu: the largest ULPDU that the path's MSS allows (65000 on loopback, 1442 with
  // MSS 1448 as on Ethernet).
  Pair(std::size_t size, bool crc, std::size_t max_ulpdu)
      : a_(device_, 1), b_(device_, 2), wire_(2 * size + 1024) {
    src_ = region(a_, size);
    dst_ = region(b_, size);
    for (Side* s : {&a_, &b_}) {
      LinkParams p;
      p.crc = crc;
      p.max_ulpdu = max_ulpdu;
      std::lock_guard lock(s->qp->mutex());
      s->rdmap = std::make_unique<runtime::RdmapDriver>(*s->qp, &s->link, p);
    }
  }

  // One message from A to B; false if anything failed. Not inlined, so that
  // bench/count-instructions can count the instructions of each call.
  [[gnu::noinline]] bool message(WrOpcode op, std::size_t size) {
    if (op == WrOpcode::kSend) {
      RecvWr rwr;
      Sge rsge{dst_->iova, static_cast<std::uint32_t>(size), dst_->stag};
      rwr.sg_list = {&rsge, 1};
      if (!b_.qp->post_recv(rwr)) return false;
    }
    SendWr wr;
    wr.opcode = op;
    wr.flags = send_flags::kSignaled;
    Sge sge{src_->iova, static_cast<std::uint32_t>(size), src_->stag};
    wr.sg_list = {&sge, 1};
    wr.remote_addr = dst_->iova;
    wr.rkey = dst_->stag;
    if (!a_.qp->post_send(wr)) return false;
    std::size_t n = 0;
    {
      std::lock_guard lock(a_.qp->mutex());
      // A batch holds a bounded number of FPDUs: fill until the message is out.
      // After each call the stream takes the QP's requests, as runtime::Transmitter.
      while (a_.rdmap->fill(*a_.qp, a_.batch)) {
        a_.rdmap->take_requests(*a_.qp);
        std::size_t batch_bytes = 0;
        for (const iovec& v : a_.batch.pending()) {  // what sendmsg copies
          if (n + v.iov_len > wire_.size()) return false;
          std::memcpy(wire_.data() + n, v.iov_base, v.iov_len);
          n += v.iov_len;
          batch_bytes += v.iov_len;
        }
        a_.batch.consume(batch_bytes);
        std::uint64_t cookie;
        while (a_.batch.pop_sent(cookie)) a_.rdmap->sent(*a_.qp, cookie);
        a_.rdmap->take_requests(*a_.qp);
      }
      if (n == 0) return false;
    }
    {
      std::lock_guard lock(b_.qp->mutex());
      b_.rdmap->feed(*b_.qp, ConstByteSpan(wire_.data(), n));
      b_.qp->take_rtr_received_locked();
      b_.rdmap->take_requests(*b_.qp);
    }
    WorkCompletion wc[4];
    bool ok = a_.scq.poll(wc) == 1 && wc[0].status == WcStatus::kSuccess;
    if (op == WrOpcode::kSend)
      ok = ok && b_.rcq.poll(wc) == 1 && wc[0].status == WcStatus::kSuccess;
    return ok;
  }

 private:
  MemoryRegionRef region(Side& s, std::size_t size) {
    buffers_.emplace_back(size + 1, 0x5a);
    auto mr = std::make_shared<MemoryRegion>();
    mr->addr = buffers_.back().data();
    mr->length = size + 1;
    mr->iova = reinterpret_cast<std::uintptr_t>(mr->addr);
    mr->access = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;
    mr->pd = &s.pd;
    if (!device_.stags().insert(mr)) std::abort();  // no STag: nothing to measure
    return mr;
  }

  Device device_;
  Side a_, b_;
  std::vector<std::vector<std::uint8_t>> buffers_;
  MemoryRegionRef src_, dst_;
  std::vector<std::uint8_t> wire_;
};

void BM_Message(benchmark::State& state, WrOpcode op) {
  const auto size = static_cast<std::size_t>(state.range(0));
  Pair pair(size, state.range(1) != 0, static_cast<std::size_t>(state.range(2)));
  for (auto _ : state) {
    if (!pair.message(op, size)) {
      state.SkipWithError("a message failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(size));
}

BENCHMARK_CAPTURE(BM_Message, send, WrOpcode::kSend)
    ->ArgNames({"size", "crc", "ulpdu"})
    ->ArgsProduct({{64, 4096, 65536}, {0, 1}, {65000}});
BENCHMARK_CAPTURE(BM_Message, write, WrOpcode::kRdmaWrite)
    ->ArgNames({"size", "crc", "ulpdu"})
    ->ArgsProduct({{64, 4096, 65536}, {0, 1}, {65000}});
// MSS 1448 (veth, Ethernet): a 64 KiB Write is 46 FPDUs, a 64 KiB Send 47.
BENCHMARK_CAPTURE(BM_Message, send_mss1448, WrOpcode::kSend)
    ->ArgNames({"size", "crc", "ulpdu"})
    ->ArgsProduct({{65536}, {0, 1}, {1442}});
BENCHMARK_CAPTURE(BM_Message, write_mss1448, WrOpcode::kRdmaWrite)
    ->ArgNames({"size", "crc", "ulpdu"})
    ->ArgsProduct({{65536}, {0, 1}, {1442}});

}  // namespace
}  // namespace uwarp::verbs

BENCHMARK_MAIN();
