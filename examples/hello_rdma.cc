// hello_rdma: the smallest complete uwarp program. A server and a client in one process connect
// over 127.0.0.1, then the client
//   1. sends a message into a receive buffer the server posted (Send/Receive),
//   2. writes into the server's memory without the server doing anything (RDMA Write),
//   3. reads it back (RDMA Read).
// Build: scripts/build normal hello_rdma; run: build/bin/hello_rdma. Against an installed uwarp:
// with examples/CMakeLists.txt (find_package(uwarp)), or with pkg-config:
//   g++ -std=c++20 hello_rdma.cc $(pkg-config --cflags --libs uwarp)
#include <cstdio>
#include <cstring>
#include <string>

#include "uwarp/uwarp.h"

using namespace uwarp;

// Waits for one completion and checks it succeeded.
static bool wait_ok(CompletionQueue& cq, const char* what) {
  WorkCompletion wc;
  for (long spins = 0; spins < 100'000'000; ++spins) {
    if (cq.poll({&wc, 1}) == 1) {
      if (wc.status != WcStatus::kSuccess) {
        std::printf("%s failed: %s\n", what, std::string(to_string(wc.status)).c_str());
        return false;
      }
      return true;
    }
  }
  std::printf("%s: no completion\n", what);
  return false;
}

int main() {
  // One context = one software RNIC with its progress thread.
  Context ctx = Context::open().value();

  // Each side: a protection domain, a completion queue, a queue pair and some registered memory.
  ProtectionDomain server_pd = ctx.alloc_pd().value();
  CompletionQueue server_cq = ctx.create_cq(16).value();
  QueuePair server_qp = server_pd.create_qp({.send_cq = &server_cq, .recv_cq = &server_cq}).value();
  char server_buf[64] = {};
  MemoryRegion server_mr =
      server_pd.reg_mr(server_buf, sizeof server_buf, access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead)
          .value();

  ProtectionDomain client_pd = ctx.alloc_pd().value();
  CompletionQueue client_cq = ctx.create_cq(16).value();
  QueuePair client_qp = client_pd.create_qp({.send_cq = &client_cq, .recv_cq = &client_cq}).value();
  char client_buf[64] = {};
  MemoryRegion client_mr = client_pd.reg_mr(client_buf, sizeof client_buf, access::kLocalWrite).value();

  // Connect: the server listens, the client connects, the server accepts.
  EventChannel events = EventChannel::create(ctx).value();
  Listener listener = events.listen("127.0.0.1", 0).value();
  Connection client_conn = events.connect("127.0.0.1", listener.port(), client_qp).value();
  std::optional<CmEvent> request = events.get_event(5000);
  if (!request || request->type != CmEventType::kConnectRequest) return 1;
  Connection server_conn = request->connection;
  // The server posts a receive before accepting, so the client's first Send has a place to go.
  Sge recv_sge = server_mr.sge(0, 32);
  if (!server_qp.post_recv({.wr_id = 1, .sg_list = {&recv_sge, 1}})) return 1;
  if (!server_conn.accept(server_qp, {})) return 1;
  for (int established = 0; established < 2;) {  // one ESTABLISHED event per side
    std::optional<CmEvent> e = events.get_event(5000);
    if (!e || e->type != CmEventType::kEstablished) return 1;
    ++established;
  }

  // 1. Send.
  std::strcpy(client_buf, "hello over iWARP");
  Sge sge = client_mr.sge(0, 32);
  if (!client_qp.post_send({.wr_id = 10, .opcode = WrOpcode::kSend, .sg_list = {&sge, 1}})) return 1;
  if (!wait_ok(client_cq, "send") || !wait_ok(server_cq, "receive")) return 1;
  std::printf("server received: \"%s\"\n", server_buf);

  // 2. RDMA Write into server_buf[32..63], addressed by the server's rkey and address.
  std::strcpy(client_buf, "written by RDMA");
  SendWr write{.wr_id = 11, .opcode = WrOpcode::kRdmaWrite, .sg_list = {&sge, 1}};
  write.remote_addr = reinterpret_cast<std::uintptr_t>(server_buf + 32);
  write.rkey = server_mr.rkey();
  if (!client_qp.post_send(write) || !wait_ok(client_cq, "write")) return 1;

  // 3. RDMA Read of the same bytes back into client_buf; it completes once they have arrived.
  std::memset(client_buf, 0, sizeof client_buf);
  SendWr read{.wr_id = 12, .opcode = WrOpcode::kRdmaRead, .sg_list = {&sge, 1}};
  read.remote_addr = write.remote_addr;
  read.rkey = server_mr.rkey();
  if (!client_qp.post_send(read) || !wait_ok(client_cq, "read")) return 1;
  std::printf("client read back: \"%s\"\n", client_buf);

  client_conn.disconnect();
  return std::strcmp(client_buf, "written by RDMA") == 0 ? 0 : 1;
}
