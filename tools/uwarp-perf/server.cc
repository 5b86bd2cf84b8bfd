// uwarp-perf server: accepts clients (each with a control connection and its data
// connections), prepares buffers and receives for each run the client announces, verifies what
// arrived, and echoes for latency runs. One thread per client; a client that misbehaves (bad
// frames, protection violations, disconnects) ends only its own session.
#include <poll.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "endpoint.h"
#include "runner.h"

namespace uwarp::perf {
namespace {

constexpr int kCtrlTimeoutMs = 120000;
constexpr std::uint32_t kMaxRecvSlots = 64;

class Session {
 public:
  Session(Context& ctx, std::uint32_t id, std::uint32_t qps, std::size_t buffer, bool shared)
      : id_(id), qps_(qps), buffer_(buffer), shared_(shared), ep_(ctx) {}

  std::uint32_t id() const { return id_; }
  Endpoint& endpoint() { return ep_; }
  bool complete() { return ep_.data().size() == qps_; }
  std::size_t buffer() const { return buffer_; }
  bool shared_buffer() const { return shared_; }
  std::atomic<bool> finished{false};
  std::string peer;
  Connection ctrl_conn;  // set by the accepting thread before run() starts
  // Why the session ended before the client's Bye; empty after a Bye. Read once finished.
  const std::string& error() const { return error_; }
  // Ends a session whose client left before all its QPs were connected (its run() never
  // started; called by the server's accepting thread).
  void abandon_setup() {
    fail("the control connection failed before every data QP was connected");
    finished = true;
  }

  void run() {
    // Bounded by the client's messages: each wait below ends within kCtrlTimeoutMs.
    while (true) {
      std::vector<WorkCompletion> data;
      // Wait for the next instruction from the client. A failed control connection ends the
      // session only once the messages that came before its failure are handled (the client's
      // Bye may arrive just ahead of its disconnect).
      while (ep_.ctrl_inbox().empty()) {
        const bool got = ep_.pump(kCtrlTimeoutMs, data);
        if (ep_.ctrl_inbox().empty() && (!got || ep_.ctrl_failed())) {
          fail(no_progress());
          finished = true;
          return;
        }
      }
      const CtrlMsg m = ep_.ctrl_inbox().front();
      ep_.ctrl_inbox().pop_front();
      bool ok = true;
      switch (m.type) {
        case MsgType::kBegin:
          ok = bandwidth_run(m);
          break;
        case MsgType::kLatBegin:
          ok = latency_run(m);
          break;
        case MsgType::kBye:
          // The client disconnects next; so does this side, so that neither end's connections
          // are destroyed while connected (that aborts them).
          ep_.disconnect(ctrl_conn, Endpoint::kCloseWaitMs);
          finished = true;
          return;
        default:
          break;
      }
      if (!ok) {
        finished = true;
        return;
      }
    }
  }

 private:
  // Records the first reason the session failed; returns false (for `return fail(...)`).
  bool fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }
  std::string no_progress() const {
    return ep_.ctrl_failed() ? "the control connection failed"
                             : "no message from the client for " + std::to_string(kCtrlTimeoutMs / 1000) + " s";
  }
  static std::string failed_completion(const WorkCompletion& wc) {
    return "work completion on data QP " + std::to_string(wr_qp(wc.wr_id)) + ": " + std::string(to_string(wc.status));
  }

  std::uint32_t slots_for(std::uint32_t size) const {
    const std::size_t fit = size == 0 ? kMaxRecvSlots : buffer_ / size;
    return static_cast<std::uint32_t>(
        std::max<std::size_t>(1, std::min<std::size_t>(fit, kMaxRecvSlots)));
  }

  Status post_data_recv(std::uint32_t q, std::uint32_t slot, std::uint32_t size) {
    DataQp& d = *ep_.data()[q];
    Sge s = d.mr.sge(static_cast<std::size_t>(slot) * size, size);
    return ep_.post_recv(d.qp, {make_wr_id(WrKind::kDataRecv, q, slot), {&s, size ? 1u : 0u}});
  }

  bool bandwidth_run(const CtrlMsg& m) {
    const Op op = static_cast<Op>(m.op);
    ep_.set_blocking(m.block != 0);
    const std::uint32_t slots = slots_for(m.size);
    if (m.size > buffer_) return fail("a run larger than the agreed buffer");
    if (op == Op::kRead) {
      for (std::uint32_t q = 0; q < qps_; ++q)
        fill_pattern(ep_.data()[q]->buf.get(), m.size, m.seed + q);
    }
    // Never more receives than messages: a leftover receive would catch the next run's data.
    const std::uint32_t initial = std::min(slots, m.iters);
    if (op == Op::kSend) {
      for (std::uint32_t q = 0; q < qps_; ++q) {
        for (std::uint32_t s = 0; s < initial; ++s) {
          if (!post_data_recv(q, s, m.size)) return fail("post_recv failed");
        }
      }
    }
    CtrlMsg ready;
    ready.type = MsgType::kReady;
    ready.value = initial;
    if (!ep_.send_ctrl(ready)) return fail("control send failed");

    bool good = true;
    if (op == Op::kSend) {
      // Receive iters messages per QP, check them, repost, and return credits in batches.
      std::vector<std::uint64_t> posted(qps_, initial);
      std::vector<std::uint32_t> owed(qps_, 0);
      const std::uint32_t batch = std::max<std::uint32_t>(1, slots / 2);
      std::uint64_t left = std::uint64_t{m.iters} * qps_;
      std::vector<WorkCompletion> wcs;
      while (left > 0) {
        wcs.clear();
        if (!ep_.pump(kCtrlTimeoutMs, wcs)) return fail(no_progress());
        for (const WorkCompletion& wc : wcs) {
          if (wc.status != WcStatus::kSuccess) return fail(failed_completion(wc));
          const std::uint32_t q = wr_qp(wc.wr_id);
          const std::uint32_t slot = wr_slot(wc.wr_id);
          if (m.verify && (wc.byte_len != m.size ||
                           !check_pattern(ep_.data()[q]->buf.get() + std::size_t{slot} * m.size,
                                          m.size, m.seed + q))) {
            good = false;
          }
          --left;
          if (posted[q] < m.iters) {
            if (!post_data_recv(q, slot, m.size)) return fail("post_recv failed");
            ++posted[q];
            // Return credits in batches, and the last ones at once.
            if (++owed[q] >= batch || posted[q] == m.iters) {
              CtrlMsg credit;
              credit.type = MsgType::kCredit;
              credit.qp = q;
              credit.value = owed[q];
              owed[q] = 0;
              if (!ep_.send_ctrl(credit)) return fail("control send failed");
            }
          }
        }
      }
    }
    auto end = ep_.wait_ctrl(MsgType::kEnd, kCtrlTimeoutMs);
    if (!end) return fail(no_progress());
    if (op == Op::kWrite && m.verify) {
      for (std::uint32_t q = 0; q < qps_; ++q) {
        good = good && check_pattern(ep_.data()[q]->buf.get(), m.size, m.seed + q);
      }
    }
    CtrlMsg result;
    result.type = MsgType::kResult;
    result.value = good ? 1 : 0;
    return static_cast<bool>(ep_.send_ctrl(result));
  }

  bool latency_run(const CtrlMsg& m) {
    const Op op = static_cast<Op>(m.op);
    ep_.set_blocking(false);
    DataQp& d = *ep_.data()[0];
    if (op == Op::kSend && !post_data_recv(0, 0, m.size)) return fail("post_recv failed");
    CtrlMsg ready;
    ready.type = MsgType::kReady;
    if (!ep_.send_ctrl(ready)) return fail("control send failed");
    if (op == Op::kRead) return true;  // reads need nothing from the server's application
    std::vector<WorkCompletion> wcs;
    std::uint32_t unreaped = 0;  // Write: signaled Writes whose completion was not polled yet
    Sge src = d.mr.sge(0, m.size);
    for (std::uint32_t i = 0; i < m.iters; ++i) {
      if (op == Op::kSend) {
        // Echo each message back as soon as it arrives.
        bool got = false;
        while (!got) {
          wcs.clear();
          if (!ep_.pump(kCtrlTimeoutMs, wcs)) return fail(no_progress());
          for (const WorkCompletion& wc : wcs) {
            if (wc.status != WcStatus::kSuccess) return fail(failed_completion(wc));
            if (wc.opcode == WcOpcode::kRecv) got = true;
          }
        }
        if (i + 1 < m.iters && !post_data_recv(0, 0, m.size)) return fail("post_recv failed");
        SendWr wr;
        wr.wr_id = make_wr_id(WrKind::kData, 0, 0);
        wr.opcode = WrOpcode::kSend;
        wr.sg_list = {&src, m.size ? 1u : 0u};
        wr.flags = 0;  // unsignaled
        if (!ep_.post_send(d.qp, wr)) return fail("post_send failed");
      } else {
        // Write ping-pong as ib_write_lat: wait for the last byte to change (polling the CQ in
        // between, see Endpoint::wait_for_byte), then write back.
        const std::uint8_t marker = static_cast<std::uint8_t>((i % 255) + 1);
        wcs.clear();
        if (!ep_.wait_for_byte(d.buf.get() + m.size - 1, marker, 10000, wcs)) return fail(ep_.ctrl_failed() ? no_progress() : "write latency: no Write from the client for 10 s");
        for (const WorkCompletion& wc : wcs) {
          if (wc.status != WcStatus::kSuccess) return fail(failed_completion(wc));
          --unreaped;
        }
        SendWr wr;
        wr.wr_id = make_wr_id(WrKind::kData, 0, 0);
        wr.opcode = WrOpcode::kRdmaWrite;
        wr.sg_list = {&src, 1};
        wr.remote_addr = d.peer.addr;
        wr.rkey = d.peer.rkey;
        wr.flags = (i % 64 == 63) ? send_flags::kSignaled : 0;
        if (!ep_.post_send(d.qp, wr)) return fail("post_send failed");
        if (wr.flags != 0) ++unreaped;
        // The completion of a signaled Write may come with the next message's wait; all are
        // reaped by the end of the run.
        while (unreaped > 0 && (wr.flags != 0 || i + 1 == m.iters)) {
          wcs.clear();
          if (!ep_.pump(kCtrlTimeoutMs, wcs)) return fail(no_progress());
          for (const WorkCompletion& wc : wcs) {
            if (wc.status != WcStatus::kSuccess) return fail(failed_completion(wc));
            --unreaped;
          }
        }
      }
    }
    return true;
  }

  std::uint32_t id_;
  std::uint32_t qps_;
  std::size_t buffer_;
  bool shared_;
  Endpoint ep_;
  std::string error_;
};

}  // namespace

int run_server(const Options& o, std::atomic<bool>& stop, std::atomic<int>* bound_port) {
  auto ctx = Context::open();
  if (!ctx) {
    std::fprintf(stderr, "uwarp-perf server: %s\n", ctx.error().to_string().c_str());
    return 1;
  }
  auto events = EventChannel::create(*ctx).value();
  auto listener = events.listen(o.addr, o.port);
  if (!listener) {
    std::fprintf(stderr, "uwarp-perf server: listen on %s:%u: %s\n", o.addr.c_str(), o.port,
                 listener.error().to_string().c_str());
    return 1;
  }
  if (bound_port != nullptr) bound_port->store(listener->port());
  if (o.mode == Mode::kServer)
    std::fprintf(stderr, "uwarp-perf server: listening on %s port %u\n", o.addr.c_str(),
                 listener->port());

  std::map<std::uint32_t, std::shared_ptr<Session>> sessions;
  std::map<std::uint32_t, std::thread> threads;
  std::uint32_t next_session = 1;
  bool served_one = false;
  bool any_failed = false;
  // A finished session's thread has ended (joined); its endpoint is this thread's now.
  auto report = [&](Session& s) {
    if (!s.error().empty()) {
      any_failed = true;
      std::fprintf(stderr, "uwarp-perf server: client %s failed: %s\n", s.peer.c_str(), s.error().c_str());
    } else if (o.mode == Mode::kServer) {
      std::fprintf(stderr, "uwarp-perf server: client %s done\n", s.peer.c_str());
    }
    if (s.endpoint().auditing()) {
      // After a failure the session's other connections may take a moment to fail as well
      // (on a path gone silent, each within the liveness bound of the last word it heard).
      if (!s.error().empty()) s.endpoint().note_qps_in_error(kAuditFailureSpreadMs);
      bool balanced = false;
      const std::string line = s.endpoint().settle(kAuditSettleMs, balanced);
      std::fprintf(stderr, "uwarp-perf server: client %s: audit: %s\n", s.peer.c_str(), line.c_str());
      if (!balanced) audit_verdict().failed = true;
    }
  };
  while (!stop.load()) {
    // Reap finished sessions, and those whose client left while connecting its QPs.
    for (auto it = sessions.begin(); it != sessions.end();) {
      Session& s = *it->second;
      if (!s.finished.load() && !threads.count(it->first) &&
          s.endpoint().ctrl().state() == QpState::kError) {
        s.abandon_setup();
      }
      if (s.finished.load()) {
        if (threads.count(it->first)) {
          threads[it->first].join();
          threads.erase(it->first);
        }
        report(s);
        it = sessions.erase(it);
        served_one = true;
      } else {
        ++it;
      }
    }
    if (o.once && served_one && sessions.empty()) break;
    while (auto ae = ctx->get_async_event(0)) {
      std::fprintf(stderr, "uwarp-perf server: QP %u: %s: %s\n", ae->qp_num,
                   std::string(to_string(ae->type)).c_str(), ae->detail.c_str());
    }
    auto ev = events.get_event(100);
    if (!ev) continue;
    if (ev->type == CmEventType::kDisconnected && !ev->status.is_ok() && o.mode == Mode::kServer) {
      std::fprintf(stderr, "uwarp-perf server: %s disconnected: %s\n",
                   ev->connection.peer_address().c_str(), ev->status.to_string().c_str());
    }
    if (ev->type != CmEventType::kConnectRequest) continue;
    auto hello = decode_hello(ev->private_data);
    if (!hello || hello->qps == 0 || hello->qps > 1024 || hello->length > (256u << 20)) {
      std::fprintf(stderr, "uwarp-perf server: refusing %s: not a uwarp-perf client\n",
                   ev->connection.peer_address().c_str());
      static const std::uint8_t kWhy[] = {'n', 'o', 't', ' ', 'u', 'w', 'a',
                                          'r', 'p', '-', 'p', 'e', 'r', 'f'};
      (void)ev->connection.reject(kWhy);
      continue;
    }
    std::shared_ptr<Session> s;
    Hello reply;
    if (hello->index == kControlIndex) {
      const std::uint32_t id = next_session++;
      s = std::make_shared<Session>(*ctx, id, hello->qps, hello->length,
                                    (hello->flags & kHelloSharedBuffer) != 0);
      if (o.audit) s->endpoint().enable_audit();
      s->peer = ev->connection.peer_address();
      sessions[id] = s;
      reply.session = id;
      reply.index = kControlIndex;
      if (!s->endpoint().post_ctrl_receives()) {
        sessions.erase(id);
        continue;
      }
      ConnectionParams p;
      p.private_data = encode(reply);
      p.fpdu_size = o.fpdu_size;
      if (Status st = ev->connection.accept(s->endpoint().ctrl(), p); !st) {
        sessions.erase(id);
        continue;
      }
      s->ctrl_conn = ev->connection;
      s->endpoint().data().reserve(hello->qps);
      if (o.mode == Mode::kServer)
        std::fprintf(stderr, "uwarp-perf server: client %s, %u QP(s)\n", s->peer.c_str(),
                     hello->qps);
      continue;
    }
    auto it = sessions.find(hello->session);
    if (it == sessions.end() || it->second->complete() ||
        hello->index != it->second->endpoint().data().size()) {
      (void)ev->connection.reject({});
      continue;
    }
    s = it->second;
    DataQp& d = s->endpoint().add_data_qp(s->buffer(), s->shared_buffer());
    d.peer = *hello;
    reply.session = s->id();
    reply.index = hello->index;
    reply.rkey = d.mr.rkey();
    reply.addr = reinterpret_cast<std::uintptr_t>(d.buf.get());
    reply.length = d.length;
    ConnectionParams p;
    p.private_data = encode(reply);
    p.fpdu_size = o.fpdu_size;
    p.ird = 128;
    p.ord = 128;
    d.conn = ev->connection;
    if (Status st = ev->connection.accept(d.qp, p); !st) continue;
    if (s->complete()) threads[s->id()] = std::thread([s] { s->run(); });
  }
  for (auto& [id, t] : threads) {
    sessions[id]->endpoint().ctrl().modify_state(QpState::kError).is_ok();
    t.join();
    report(*sessions[id]);
  }
  if (o.mode == Mode::kServer) {
    // What the listener saw: every connection accepted is counted once (ListenerStats).
    const ListenerStats ls = listener->stats();
    auto n = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
    std::fprintf(stderr,
                 "uwarp-perf server: listener: %llu accepted, %llu MPA requests, %llu pending, "
                 "%llu timed out, %llu dropped, %llu accept errors\n",
                 n(ls.accepted), n(ls.requests), n(ls.pending), n(ls.timed_out), n(ls.dropped),
                 n(ls.accept_errors));
  }
  // With --once the exit status is that of the one client's session.
  return o.once && any_failed ? 1 : 0;
}

}  // namespace uwarp::perf
