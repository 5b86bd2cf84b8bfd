// uwarp-perf client: connects a control QP and --qps data QPs to a server, then for each size
// runs a bandwidth phase (a window of outstanding work requests per QP; Sends paced by the
// server's receive credits, as iWARP has no receiver-not-ready retry) and a latency phase
// (ping-pong on QP 0; a Read's round trip).
//
// The latency loop, as an application that polls its CQ: Send ping-pong: post a receive and
// the Send, then Endpoint::pump spins on the CQ until the echo's receive completion (half the
// round trip is reported). Write ping-pong (as ib_write_lat): the Write's last byte carries a
// marker and the server writes back when it sees it; each side waits with
// Endpoint::wait_for_byte, which looks at the last byte and polls the CQ in between. An empty
// CQ poll receives for the QPs on that CQ in the calling thread (busy polling,
// docs/threading.md), so the measured round trip has no progress-thread wake-up in it. Read:
// the whole round trip until the Read's completion; the server's application does nothing (its
// progress thread answers). Every 64th Write is signaled; its completion is reaped outside the
// timed part.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "endpoint.h"
#include "runner.h"

namespace uwarp::perf {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTimeoutMs = 60000;

std::uint32_t default_depth(std::uint32_t size) {
  const std::uint64_t by_volume = (8ull << 20) / std::max<std::uint32_t>(size, 1);
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(by_volume, 2, 64));
}

class Client {
 public:
  Client(const Options& o, Context& ctx)
      : o_(o), ctx_(ctx), events_(EventChannel::create(ctx).value()), ep_(ctx) {
    if (o.audit) ep_.enable_audit();
    max_size_ = *std::max_element(o.sizes.begin(), o.sizes.end());
    buffer_ = std::max<std::size_t>(2 * std::size_t{max_size_}, 4096);
    std::random_device rd;
    rng_.seed(rd());
  }

  bool connect() {
    if (!ep_.post_ctrl_receives()) return fail("cannot post control receives");
    Hello h;
    h.index = kControlIndex;
    h.qps = o_.qps;
    h.length = buffer_;
    h.flags = o_.shared_buffer ? kHelloSharedBuffer : 0;
    auto reply = connect_qp(ep_.ctrl(), h);
    if (!reply) return false;
    session_ = reply->session;
    for (std::uint32_t q = 0; q < o_.qps; ++q) {
      DataQp& d = ep_.add_data_qp(buffer_, o_.shared_buffer);
      Hello dh;
      dh.index = q;
      dh.qps = o_.qps;
      dh.session = session_;
      dh.rkey = d.mr.rkey();
      dh.addr = reinterpret_cast<std::uintptr_t>(d.buf.get());
      dh.length = d.length;
      auto r = connect_qp(d.qp, dh, &d.conn);
      if (!r) return false;
      if (r->length < max_size_) return fail("server buffer too small");
      d.peer = *r;
    }
    return true;
  }

  bool measure(std::uint32_t size, SizeResult& r) {
    r.op = o_.op;
    r.size = size;
    r.qps = o_.qps;
    r.crc = o_.crc;
    r.iters = o_.iters != 0 ? o_.iters : default_iters(size);
    SizeResult warmup = r;
    warmup.iters = warmup_iters(r.iters);
    if (!bandwidth(size, warmup) || !bandwidth(size, r)) return false;
    return !o_.latency || latency(size, r);
  }

  void bye() {
    CtrlMsg m;
    m.type = MsgType::kBye;
    (void)ep_.send_ctrl(m);
    std::vector<WorkCompletion> ignored;
    ep_.pump(100, ignored);  // let the Bye leave before the disconnect
    ep_.disconnect(ctrl_conn_, Endpoint::kCloseWaitMs);
  }

  const std::string& error() const { return error_; }

  // What uwarp reported about the connections' failure: async events (a QP's fatal error and
  // its cause) and the CM's disconnections. They may follow the completion that showed the
  // failure, and the other connections may fail a moment later: it gathers them until nothing
  // more is pending and every QP is in ERROR (or, after 200 ms, none is: the connections are
  // fine), for up to wait_ms; "" if none came. It notes the QPs in ERROR for the audit.
  std::string causes(int wait_ms) {
    constexpr std::size_t kMaxCauses = 6;
    std::vector<std::string> seen;
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::milliseconds(wait_ms);
    while (Clock::now() < deadline) {
      bool any = false;
      for (int n = 0; n < 64; ++n) {
        auto ae = ctx_.get_async_event(0);
        if (!ae) break;
        if (seen.size() < kMaxCauses)
          seen.push_back("QP " + std::to_string(ae->qp_num) + ": " + std::string(to_string(ae->type)) + ": " +
                         ae->detail);
        any = true;
      }
      if (auto ev = events_.get_event(10)) {
        if (ev->type == CmEventType::kDisconnected && seen.size() < kMaxCauses) {
          seen.push_back(ev->connection.peer_address() + " disconnected: " +
                         (ev->status.is_ok() ? std::string("closed by the server") : ev->status.to_string()));
        }
        continue;
      }
      if (any) continue;
      const std::size_t in_error = ep_.note_qps_in_error(0);
      if (in_error == ep_.qp_count()) break;
      if (in_error == 0 && Clock::now() - start > std::chrono::milliseconds(200)) break;
    }
    ep_.note_qps_in_error(0);
    std::string all;
    for (const std::string& c : seen) all += (all.empty() ? "" : "; ") + c;
    return all;
  }

  // --audit, after bye(): settles the endpoint (Endpoint::settle) and prints the audit line.
  void audit() {
    bool balanced = false;
    const std::string line = ep_.settle(kAuditSettleMs, balanced);
    std::fprintf(stderr, "uwarp-perf client: audit: %s\n", line.c_str());
    if (!balanced) audit_verdict().failed = true;
  }

 private:
  bool fail(std::string why) {
    error_ = std::move(why);
    return false;
  }
  std::string no_progress() const {
    return ep_.ctrl_failed() ? "the control connection failed"
                             : "no completion for " + std::to_string(kTimeoutMs / 1000) + " s";
  }

  std::optional<Hello> connect_qp(QueuePair& qp, const Hello& h, Connection* out = nullptr) {
    ConnectionParams p;
    p.private_data = encode(h);
    p.crc = o_.crc;
    p.fpdu_size = o_.fpdu_size;
    p.ird = 128;
    p.ord = 128;
    std::optional<Connection> conn;
    for (int attempt = 0; attempt < 50; ++attempt) {
      auto c = events_.connect(o_.host, o_.port, qp, p);
      if (!c) {
        fail("connect: " + c.error().to_string());
        return std::nullopt;
      }
      auto ev = events_.get_event(kTimeoutMs);
      if (!ev) {
        fail("no answer from the server");
        return std::nullopt;
      }
      if (ev->type == CmEventType::kEstablished) {
        if (out != nullptr) *out = ev->connection;
        if (h.index == kControlIndex) ctrl_conn_ = ev->connection;
        auto reply = decode_hello(ev->private_data);
        if (!reply) fail("server sent no buffer description");
        return reply;
      }
      // A server that is still starting refuses the TCP connection: try again shortly.
      if (ev->type == CmEventType::kConnectError && ev->status.code() == Errc::kConnectionRefused) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      fail(std::string(to_string(ev->type)) + ": " + ev->status.to_string());
      return std::nullopt;
    }
    fail("server refused the connection");
    return std::nullopt;
  }

  SendWr data_wr(DataQp& d, std::uint32_t q, std::uint32_t size, Sge& sge) {
    SendWr wr;
    wr.wr_id = make_wr_id(WrKind::kData, q, 0);
    wr.flags = send_flags::kSignaled;
    switch (o_.op) {
      case Op::kSend:
        wr.opcode = WrOpcode::kSend;
        break;
      case Op::kWrite:
        wr.opcode = WrOpcode::kRdmaWrite;
        wr.remote_addr = d.peer.addr;
        wr.rkey = d.peer.rkey;
        break;
      case Op::kRead:
        wr.opcode = WrOpcode::kRdmaRead;
        wr.remote_addr = d.peer.addr;
        wr.rkey = d.peer.rkey;
        break;
    }
    sge = d.mr.sge(0, size);
    wr.sg_list = {&sge, size ? 1u : 0u};
    return wr;
  }

  bool bandwidth(std::uint32_t size, SizeResult& r) {
    const std::uint32_t seed = static_cast<std::uint32_t>(rng_());
    const std::uint32_t depth = o_.depth != 0 ? o_.depth : default_depth(size);
    auto& qps = ep_.data();
    for (std::uint32_t q = 0; q < qps.size(); ++q) {
      DataQp& d = *qps[q];
      d.posted = d.completed = 0;
      d.outstanding = 0;
      if (o_.op != Op::kRead) fill_pattern(d.buf.get(), size, seed + q);
      if (o_.op == Op::kRead) std::fill(d.buf.get(), d.buf.get() + size, 0);
    }
    CtrlMsg begin;
    begin.type = MsgType::kBegin;
    begin.op = static_cast<std::uint8_t>(o_.op);
    begin.size = size;
    begin.iters = static_cast<std::uint32_t>(r.iters);
    begin.seed = seed;
    begin.verify = o_.verify ? 1 : 0;
    begin.block = o_.block ? 1 : 0;
    ep_.set_blocking(o_.block);
    if (!ep_.send_ctrl(begin)) return fail("control send failed");
    auto ready = ep_.wait_ctrl(MsgType::kReady, kTimeoutMs);
    if (!ready) return fail("server did not get ready: " + no_progress());
    for (auto& d : qps) d->credits = o_.op == Op::kSend ? ready->value : ~0u;

    const auto t0 = Clock::now();
    auto last_report = t0;
    auto last_completion = t0;
    Clock::duration max_gap{};
    std::uint64_t total_done = 0;
    const std::uint64_t total = r.iters * qps.size();
    std::vector<WorkCompletion> wcs;
    std::array<Sge, kMaxPostList> sges;
    std::array<SendWr, kMaxPostList> wrs;
    while (total_done < total) {
      for (std::uint32_t q = 0; q < qps.size(); ++q) {
        DataQp& d = *qps[q];
        // Up to --post-list requests per post_send (one list post: they leave together).
        while (d.outstanding < depth && d.posted < r.iters && d.credits > 0) {
          std::uint32_t n = 0;
          while (n < o_.post_list && d.outstanding + n < depth && d.posted + n < r.iters &&
                 n < d.credits) {
            wrs[n] = data_wr(d, q, size, sges[n]);
            ++n;
          }
          if (Status s = ep_.post_send(d.qp, std::span<SendWr>(wrs.data(), n)); !s)
            return fail("post_send: " + s.to_string());
          d.outstanding += n;
          d.posted += n;
          if (o_.op == Op::kSend) d.credits -= n;
        }
      }
      wcs.clear();
      if (!ep_.pump(kTimeoutMs, wcs)) return fail(no_progress());
      if (!wcs.empty()) {
        const auto now = Clock::now();
        max_gap = std::max(max_gap, now - last_completion);
        last_completion = now;
      }
      for (const WorkCompletion& wc : wcs) {
        if (wc.status != WcStatus::kSuccess) {
          return fail(std::string("work completion: ") + std::string(to_string(wc.status)));
        }
        DataQp& d = *qps[wr_qp(wc.wr_id)];
        --d.outstanding;
        ++d.completed;
        ++total_done;
      }
      while (!ep_.ctrl_inbox().empty() && ep_.ctrl_inbox().front().type == MsgType::kCredit) {
        const CtrlMsg c = ep_.ctrl_inbox().front();
        ep_.ctrl_inbox().pop_front();
        if (c.qp < qps.size()) qps[c.qp]->credits += c.value;
      }
      const auto now = Clock::now();
      if (o_.progress && now - last_report > std::chrono::seconds(1)) {
        last_report = now;
        std::fprintf(stderr, "  %s %u B: %3.0f%%\r", to_string(o_.op), size,
                     100.0 * double(total_done) / double(total));
      }
    }
    // A Write completes once TCP has it; a zero-length Read behind it on the same stream
    // completes only after the server has placed every byte before it.
    if (o_.op == Op::kWrite && !flush_writes()) return false;
    // The clock stops once the client knows that every byte is at its destination, as the TCP
    // baseline's stops at the server's answer: a Write's at the completion of the Read behind
    // it, a Read's at its own completion (both here), a Send's at the server's result (the
    // server counted the messages). The End/Result exchange of a Write or a Read only verifies.
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    CtrlMsg end;
    end.type = MsgType::kEnd;
    if (!ep_.send_ctrl(end)) return fail("control send failed");
    auto result = ep_.wait_ctrl(MsgType::kResult, kTimeoutMs);
    if (!result) return fail("server sent no result: " + no_progress());
    if (o_.op == Op::kSend) secs = std::chrono::duration<double>(Clock::now() - t0).count();
    bool good = result->value == 1;
    if (o_.op == Op::kRead && o_.verify) {
      for (std::uint32_t q = 0; q < qps.size(); ++q)
        good = good && check_pattern(qps[q]->buf.get(), size, seed + q);
    }
    r.seconds = secs;
    r.gbps = double(total) * size * 8 / secs / 1e9;
    r.msg_rate = double(total) / secs;
    r.max_gap_ms = std::chrono::duration<double, std::milli>(max_gap).count();
    r.verified = o_.verify && good;
    if (o_.verify && !good) return fail("data verification failed");
    return true;
  }

  bool flush_writes() {
    auto& qps = ep_.data();
    for (std::uint32_t q = 0; q < qps.size(); ++q) {
      SendWr wr;
      wr.wr_id = make_wr_id(WrKind::kData, q, 1);
      wr.opcode = WrOpcode::kRdmaRead;
      wr.remote_addr = qps[q]->peer.addr;
      wr.rkey = qps[q]->peer.rkey;
      if (Status s = ep_.post_send(qps[q]->qp, wr); !s) return fail("post_send: " + s.to_string());
    }
    std::vector<WorkCompletion> wcs;
    for (std::size_t done = 0; done < qps.size();) {
      wcs.clear();
      if (!ep_.pump(kTimeoutMs, wcs)) return fail("write flush: " + no_progress());
      for (const WorkCompletion& wc : wcs) {
        if (wc.status != WcStatus::kSuccess)
          return fail("write flush: " + std::string(to_string(wc.status)));
        ++done;
      }
    }
    return true;
  }

  bool latency(std::uint32_t size, SizeResult& r) {
    if (o_.op == Op::kWrite && size == 0) return true;  // nothing to poll on
    ep_.set_blocking(false);
    const std::uint32_t iters =
        static_cast<std::uint32_t>(std::min<std::uint64_t>(r.iters, size <= 65536 ? 1000 : 100));
    DataQp& d = *ep_.data()[0];
    CtrlMsg begin;
    begin.type = MsgType::kLatBegin;
    begin.op = static_cast<std::uint8_t>(o_.op);
    begin.size = size;
    begin.iters = iters;
    if (!ep_.send_ctrl(begin)) return fail("control send failed");
    if (!ep_.wait_ctrl(MsgType::kReady, kTimeoutMs)) return fail("server did not get ready: " + no_progress());
    std::vector<double> us;
    us.reserve(iters);
    std::vector<WorkCompletion> wcs;
    std::uint32_t unreaped = 0;  // Write: signaled Writes whose completion was not polled yet
    Sge sink = d.mr.sge(0, size);
    Sge src = d.mr.sge(size, size);
    for (std::uint32_t i = 0; i < iters; ++i) {
      SendWr wr;
      wr.wr_id = make_wr_id(WrKind::kData, 0, 0);
      wr.sg_list = {&src, size ? 1u : 0u};
      if (o_.op == Op::kSend) {
        if (!ep_.post_recv(d.qp, {make_wr_id(WrKind::kDataRecv, 0, 0), {&sink, size ? 1u : 0u}}))
          return fail("post_recv");
        wr.opcode = WrOpcode::kSend;
        wr.flags = 0;
      } else if (o_.op == Op::kWrite) {
        const std::uint8_t marker = static_cast<std::uint8_t>((i % 255) + 1);
        d.buf[2 * std::size_t{size} - 1] = marker;
        wr.opcode = WrOpcode::kRdmaWrite;
        wr.remote_addr = d.peer.addr;
        wr.rkey = d.peer.rkey;
        wr.flags = (i % 64 == 63) ? send_flags::kSignaled : 0;
      } else {
        wr.opcode = WrOpcode::kRdmaRead;
        wr.sg_list = {&sink, size ? 1u : 0u};
        wr.remote_addr = d.peer.addr;
        wr.rkey = d.peer.rkey;
        wr.flags = send_flags::kSignaled;
      }
      const auto t0 = Clock::now();
      if (Status s = ep_.post_send(d.qp, wr); !s) return fail("post_send: " + s.to_string());
      if (o_.op == Op::kWrite) {
        // Wait for the server's Write-back by watching the last byte, polling the CQ in
        // between (this thread then receives the Write itself, see Endpoint::wait_for_byte).
        if (wr.flags != 0) ++unreaped;
        const std::uint8_t marker = static_cast<std::uint8_t>((i % 255) + 1);
        wcs.clear();
        if (!ep_.wait_for_byte(d.buf.get() + size - 1, marker, 10000, wcs))
          return fail("write latency: no answer");
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2);
        // Reap the signaled Write's completion (outside the timed part).
        while (true) {
          for (const WorkCompletion& wc : wcs) {
            if (wc.status != WcStatus::kSuccess)
              return fail(std::string("write latency: ") + std::string(to_string(wc.status)));
            --unreaped;
          }
          wcs.clear();
          if (unreaped == 0) break;
          if (!ep_.pump(kTimeoutMs, wcs)) return fail("write latency: " + no_progress());
        }
        continue;
      }
      // Send: wait for the echo's receive completion; Read: for the Read's completion.
      bool done = false;
      while (!done) {
        wcs.clear();
        if (!ep_.pump(kTimeoutMs, wcs)) return fail("latency: " + no_progress());
        for (const WorkCompletion& wc : wcs) {
          if (wc.status != WcStatus::kSuccess)
            return fail(std::string("latency: ") + std::string(to_string(wc.status)));
          if ((o_.op == Op::kSend && wc.opcode == WcOpcode::kRecv) ||
              (o_.op == Op::kRead && wc.opcode == WcOpcode::kRdmaRead)) {
            done = true;
          }
        }
      }
      const double rtt = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      us.push_back(o_.op == Op::kRead ? rtt : rtt / 2);
    }
    // The last write-back was seen by polling memory; a completion orders it with what follows.
    if (o_.op == Op::kWrite && !flush_writes()) return false;
    r.lat_iters = iters;
    r.lat_mean_us = mean(us);
    r.lat_median_us = percentile(us, 0.5);
    r.lat_p99_us = percentile(us, 0.99);
    return true;
  }

  const Options& o_;
  Context& ctx_;
  EventChannel events_;
  Endpoint ep_;
  Connection ctrl_conn_;
  std::uint32_t session_ = 0;
  std::uint32_t max_size_ = 0;
  std::size_t buffer_ = 0;
  std::mt19937 rng_;
  std::string error_;
};

}  // namespace

std::uint32_t default_iters(std::uint32_t size) {
  const std::uint64_t by_volume = (256ull << 20) / std::max<std::uint32_t>(size, 1);
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(by_volume, 64, 20000));
}

bool run_client(const Options& o, std::vector<SizeResult>& results) {
  auto ctx = Context::open();
  if (!ctx) {
    std::fprintf(stderr, "uwarp-perf client: %s\n", ctx.error().to_string().c_str());
    return false;
  }
  Client c(o, *ctx);
  // The failure and, after it, what uwarp said about the connections (Client::causes).
  auto explain = [&c](std::string why) {
    const std::string causes = c.causes(kAuditFailureSpreadMs);
    return causes.empty() ? why : why + " (" + causes + ")";
  };
  if (!c.connect()) {
    std::fprintf(stderr, "uwarp-perf client: %s\n", explain(c.error()).c_str());
    if (o.audit) c.audit();
    return false;
  }
  bool ok = true;
  for (std::uint32_t size : o.sizes) {
    SizeResult r;
    if (!c.measure(size, r)) {
      r.error = explain(c.error());
      std::fprintf(stderr, "uwarp-perf client: %s %u B: %s\n", to_string(o.op), size,
                   r.error.c_str());
      results.push_back(r);
      ok = false;
      break;
    }
    results.push_back(r);
  }
  if (o.progress) std::fprintf(stderr, "%40s\r", "");
  // --hold: the QPs stay (and their counters with them) for `uwarp stat` to look at.
  std::this_thread::sleep_for(std::chrono::seconds(o.hold_s));
  c.bye();
  if (o.audit) c.audit();
  return ok;
}

}  // namespace uwarp::perf
