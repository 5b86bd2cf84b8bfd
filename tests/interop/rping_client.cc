// A native uwarp client that speaks rping's protocol (rdma-core's librdmacm/examples/rping.c),
// for interoperability tests against a real `rping -s` (Linux siw in a QEMU guest). Per
// iteration: Send the source buffer's address/rkey/length; the server RDMA Reads it and Sends
// "go ahead"; Send the sink buffer's description; the server RDMA Writes into it and Sends
// again; the sink must then equal the source.
//   rping_client --port P [--host H] [--count N] [--size S] [--crc] [--p2p] [--mpa1]
//                [--timeout-ms T] [--provoke-terminate]
// --mpa1: initiate with MPA revision 1 (no IRD/ORD words, no peer-to-peer).
// --provoke-terminate: after the pings, RDMA Write to an STag the server never registered; the
// server must answer with a Terminate, which uwarp reports as an async event (checked).
#include <arpa/inet.h>
#include <endian.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "uwarp/uwarp.h"

using namespace uwarp;

namespace {

// rping's struct rping_rdma_info: big-endian address, rkey and length, 16 bytes.
void encode_info(std::uint8_t* out, std::uint64_t addr, std::uint32_t rkey, std::uint32_t size) {
  const std::uint64_t a = htobe64(addr);
  const std::uint32_t k = htonl(rkey);
  const std::uint32_t s = htonl(size);
  std::memcpy(out, &a, 8);
  std::memcpy(out + 8, &k, 4);
  std::memcpy(out + 12, &s, 4);
}

// The completions polled and not yet waited for. The Send and the receive its answer completes
// share one CQ, and nothing orders their completions (a Send may complete after the answer to
// it has arrived): each is kept until waited for, as rping's CQ handler does.
class Completions {
 public:
  explicit Completions(CompletionQueue& cq) : cq_(cq) {}

  bool wait_for(WcOpcode want, int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    WorkCompletion wc;
    while (count(want) == 0 && std::chrono::steady_clock::now() < deadline) {
      if (cq_.poll({&wc, 1}) == 0) continue;
      if (wc.status != WcStatus::kSuccess) {
        std::fprintf(stderr, "rping_client: completion failed: %s\n", std::string(to_string(wc.status)).c_str());
        return false;
      }
      if (wc.opcode == WcOpcode::kSend || wc.opcode == WcOpcode::kRecv) ++count(wc.opcode);
    }
    if (count(want) == 0) {
      std::fprintf(stderr, "rping_client: no completion in %d ms\n", timeout_ms);
      return false;
    }
    --count(want);
    return true;
  }

 private:
  int& count(WcOpcode op) { return op == WcOpcode::kSend ? sends_ : receives_; }

  CompletionQueue& cq_;
  int sends_ = 0;
  int receives_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 7174;
  int count = 1;
  std::uint32_t size = 64;
  int timeout_ms = 20000;
  bool provoke_terminate = false;
  ConnectionParams params;
  params.ird = params.ord = 1;  // what rping asks for
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--host") host = next();
    else if (a == "--port") port = std::atoi(next());
    else if (a == "--count") count = std::atoi(next());
    else if (a == "--size") size = static_cast<std::uint32_t>(std::atoi(next()));
    else if (a == "--timeout-ms") timeout_ms = std::atoi(next());
    else if (a == "--crc") params.crc = true;
    else if (a == "--p2p") params.peer_to_peer = true;
    else if (a == "--mpa1") params.mpa_revision = 1;
    else if (a == "--provoke-terminate") provoke_terminate = true;
    else {
      std::fprintf(stderr, "rping_client: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (size < 16) size = 16;

  Context ctx = Context::open().value();
  ProtectionDomain pd = ctx.alloc_pd().value();
  CompletionQueue cq = ctx.create_cq(64).value();
  QueuePair qp = pd.create_qp({.send_cq = &cq, .recv_cq = &cq}).value();
  std::vector<std::uint8_t> start(size), sink(size), send_info(16), recv_info(16);
  MemoryRegion start_mr = pd.reg_mr(start.data(), size, access::kLocalWrite | access::kRemoteRead).value();
  MemoryRegion sink_mr = pd.reg_mr(sink.data(), size, access::kLocalWrite | access::kRemoteWrite).value();
  MemoryRegion send_mr = pd.reg_mr(send_info.data(), 16, access::kLocalWrite).value();
  MemoryRegion recv_mr = pd.reg_mr(recv_info.data(), 16, access::kLocalWrite).value();
  Sge recv_sge = recv_mr.sge(0, 16);
  Sge send_sge = send_mr.sge(0, 16);
  if (!qp.post_recv({1, {&recv_sge, 1}})) return 1;

  EventChannel events = EventChannel::create(ctx).value();
  auto conn = events.connect(host, static_cast<std::uint16_t>(port), qp, params);
  if (!conn) {
    std::fprintf(stderr, "rping_client: connect: %s\n", conn.error().to_string().c_str());
    return 1;
  }
  auto ev = events.get_event(timeout_ms);
  if (!ev || ev->type != CmEventType::kEstablished) {
    std::fprintf(stderr, "rping_client: not established: %s\n", ev ? ev->status.to_string().c_str() : "no event");
    return 1;
  }
  Completions completions(cq);
  auto wait_for = [&](WcOpcode want) { return completions.wait_for(want, timeout_ms); };
  auto send_description = [&](std::vector<std::uint8_t>& buf, const MemoryRegion& mr) {
    encode_info(send_info.data(), reinterpret_cast<std::uintptr_t>(buf.data()), mr.rkey(), size);
    return qp.post_send({.wr_id = 2, .opcode = WrOpcode::kSend, .sg_list = {&send_sge, 1}}).is_ok() &&
           wait_for(WcOpcode::kSend);
  };
  for (int it = 0; it < count; ++it) {
    // rping's pattern: "rdma-ping-N: " and then the printable characters, rotating.
    const int prefix = std::snprintf(reinterpret_cast<char*>(start.data()), size, "rdma-ping-%d: ", it);
    for (std::uint32_t i = static_cast<std::uint32_t>(prefix); i + 1 < size; ++i) {
      start[i] = static_cast<std::uint8_t>(65 + ((i - prefix + it) % 62));
    }
    start[size - 1] = 0;
    std::fill(sink.begin(), sink.end(), 0);
    if (!send_description(start, start_mr) || !wait_for(WcOpcode::kRecv)) return 1;
    if (!qp.post_recv({1, {&recv_sge, 1}})) return 1;
    if (!send_description(sink, sink_mr) || !wait_for(WcOpcode::kRecv)) return 1;
    if (!qp.post_recv({1, {&recv_sge, 1}})) return 1;
    if (start != sink) {
      std::fprintf(stderr, "rping_client: iteration %d: data mismatch\n", it);
      return 1;
    }
    std::printf("ping data: %s\n", reinterpret_cast<const char*>(sink.data()));
  }
  if (provoke_terminate) {
    // siw sends no Terminate while a work request of its own is in progress (its "go ahead"
    // Send may still be, although it arrived): wait as verbs_peer does after a provocation's
    // ACK (docs/interop.md, "A transmitted Send can still fail").
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    SendWr bad{.wr_id = 9, .opcode = WrOpcode::kRdmaWrite, .sg_list = {&send_sge, 1}};
    bad.rkey = 0x0badbad0;
    bad.remote_addr = 0x1000;
    if (!qp.post_send(bad)) return 1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    bool reported = false;
    while (!reported && std::chrono::steady_clock::now() < deadline) {
      auto ae = ctx.get_async_event(200);
      if (ae && ae->detail.find("peer sent Terminate") != std::string::npos) {
        std::printf("rping_client: %s\n", ae->detail.c_str());
        reported = true;
      }
    }
    if (!reported || qp.state() != QpState::kError) {
      std::fprintf(stderr, "rping_client: no Terminate reported for a Write to an unknown STag\n");
      return 1;
    }
  }
  conn->disconnect();
  std::printf("rping_client: %d iterations verified\n", count);
  return 0;
}
