#include "rdmacm/rsocket_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rdmacm/cma.h"

namespace uwarp::rdmacm::rs {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the rsocket protocol carries host-order words: uwarp speaks it little-endian");

using Clock = std::chrono::steady_clock;

constexpr std::uint16_t kQpMinSize = 16;       // rdma-core's RS_QP_MIN_SIZE
constexpr std::uint16_t kQpMaxSize = 0xFFFE;   // and RS_QP_MAX_SIZE
constexpr std::uint32_t kCtrlSlots = 4;        // control WRs in flight (RS_QP_CTRL_SIZE)
constexpr std::uint32_t kSendLowWater = 2048;  // a transfer waits for this much staging space
constexpr std::uint32_t kMaxTransfer = 64u << 10;
constexpr std::uint32_t kMinBuffer = 2 * kSendLowWater;
constexpr std::uint32_t kMaxBuffer = 1u << 30;
constexpr std::uint32_t kInlineStack = 1024;  // inline data is gathered on the stack up to this
constexpr auto kShutdownWait = std::chrono::seconds(5);  // sends draining at rshutdown
// rclose: the connection closing after the disconnect (uwarp's core waits 3 s for the peer).
constexpr auto kCloseWait = std::chrono::seconds(4);
constexpr auto kConnectWait = std::chrono::seconds(60);  // a blocking rconnect, in all
constexpr int kResolveMs = 2000;
constexpr int kWaitSliceMs = 1000;  // a blocked thread re-checks at least this often

// Work request ids. Receives: kRecv | slot. Control WRs (credits, control messages): kCtrl.
// Other sends (data, riowrite, iomap entries): the staging bytes they hold, returned at their
// completion with their send queue entry.
constexpr std::uint64_t kRecv = 1ull << 63;
constexpr std::uint64_t kCtrl = 1ull << 62;

// Milliseconds from now to `deadline` (negative once it passed).
long ms_until(Clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
}

bool set_nonblock(int fd) {
  return ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) == 0;
}

std::uint32_t clamp_buffer(std::uint32_t v) {
  return std::clamp<std::uint32_t>(v, kMinBuffer, kMaxBuffer) & ~1u;
}

int event_errno(rdma_cm_event_type type, int status) {
  switch (type) {
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return ECONNREFUSED;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return EHOSTUNREACH;
    case RDMA_CM_EVENT_UNREACHABLE:
      return status == -ETIMEDOUT ? ETIMEDOUT : EHOSTUNREACH;
    default:
      return ECONNRESET;
  }
}

}  // namespace

void Region::reset() {
  if (mr != nullptr) ibv_dereg_mr(mr);
  std::free(data);
  mr = nullptr;
  data = nullptr;
  len = 0;
}

bool Region::allocate(ibv_pd* pd, std::size_t n, int access) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::size_t rounded = (n + page - 1) / page * page;
  void* p = nullptr;
  if (::posix_memalign(&p, page, rounded) != 0) {
    errno = ENOMEM;
    return false;
  }
  std::memset(p, 0, rounded);
  data = static_cast<std::uint8_t*>(p);
  len = n;
  mr = ibv_reg_mr(pd, data, n, access);
  return mr != nullptr;
}

Rsocket::~Rsocket() {
  if (kick_fd >= 0) ::close(kick_fd);
  if (accept_fd >= 0) ::close(accept_fd);
}

// --- connection ------------------------------------------------------------------------------

bool Rsocket::open_channel() {
  cm_channel = rdma_create_event_channel();
  if (cm_channel == nullptr || !set_nonblock(cm_channel->fd)) return false;
  fd = cm_channel->fd;
  kick_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  return kick_fd >= 0;
}

int Rsocket::setup_endpoint(ConnData* conn) {
  ibv_device_attr dev{};
  if (ibv_query_device(id->verbs, &dev) != 0) return -1;
  const auto max_wr =
      static_cast<std::uint16_t>(std::clamp<int>(dev.max_qp_wr, kQpMinSize, kQpMaxSize));
  sq_size = std::clamp<std::uint16_t>(opt.sq_size, kQpMinSize, max_wr);
  rq_size = std::clamp<std::uint16_t>(opt.rq_size, kQpMinSize, max_wr);
  rbuf_size = clamp_buffer(opt.rbuf_size);
  sbuf_size = clamp_buffer(opt.sbuf_size);
  target_iomap_entries = iomap_entries_of(iomap_scale_of(opt.iomap_size));

  cq_channel = ibv_create_comp_channel(id->verbs);
  if (cq_channel == nullptr) return -1;
  if (!set_nonblock(cq_channel->fd)) return -1;
  cq = ibv_create_cq(id->verbs, sq_size + rq_size, this, cq_channel, 0);
  if (cq == nullptr) return -1;

  ibv_qp_init_attr qa{};
  qa.qp_context = this;
  qa.send_cq = cq;
  qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.sq_sig_all = 1;
  qa.cap.max_send_wr = sq_size;
  qa.cap.max_recv_wr = rq_size;
  qa.cap.max_send_sge = 2;
  qa.cap.max_recv_sge = 1;
  qa.cap.max_inline_data = opt.inline_size;
  if (rdma_create_qp(id, nullptr, &qa) != 0) return -1;
  sq_inline = qa.cap.max_inline_data;
  // Messages, SGL and iomap entries always travel inline.
  if (sq_inline < kIomapEntrySize) return fail(ENOTSUP);

  if (!sbuf.allocate(id->pd, sbuf_size, IBV_ACCESS_LOCAL_WRITE) ||
      !target.allocate(id->pd, kSglEntries * kSgeSize + target_iomap_entries * kIomapEntrySize,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) ||
      !rbuf.allocate(id->pd, rbuf_size + std::size_t{rq_size} * kMessageSize,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)) {
    return -1;
  }
  ring.emplace(rbuf_size, rq_size);
  sqe_avail = sq_size - kCtrlSlots;
  sbuf_free = sbuf_size;
  for (std::uint32_t slot = 0; slot < rq_size; ++slot) {
    if (!post_recv(slot)) return -1;
  }

  conn->version = kProtocolVersion;
  conn->flags = kConnFlagIomap;
  conn->credits = rq_size;
  conn->iomap_scale = iomap_scale_of(target_iomap_entries);
  conn->target_sgl = WireSge{reinterpret_cast<std::uintptr_t>(target.data), target.mr->rkey,
                             static_cast<std::uint32_t>(kSglEntries)};
  conn->data_buf =
      WireSge{reinterpret_cast<std::uintptr_t>(rbuf.data), rbuf.mr->rkey, ring->half()};
  return 0;
}

bool Rsocket::accept_conn_data(std::span<const std::uint8_t> private_data) {
  const std::optional<ConnData> c = decode_conn_data(private_data);
  if (!c || c->version != kProtocolVersion) {
    std::fprintf(stderr, "uwarp rsocket: the peer's connection data is not rsocket protocol 1\n");
    errno = EPROTO;
    return false;
  }
  if ((c->flags & kConnFlagNetOrder) != 0) {
    std::fprintf(stderr, "uwarp rsocket: big-endian rsocket peers are not supported\n");
    errno = EPROTO;
    return false;
  }
  remote_sgl = c->target_sgl;
  ring->set_peer_sgl_entries(remote_sgl.length);
  if ((c->flags & kConnFlagIomap) != 0) {
    remote_iomap =
        WireSge{remote_sgl.addr + std::uint64_t{kSgeSize} * remote_sgl.length, remote_sgl.key,
                static_cast<std::uint32_t>(iomap_entries_of(c->iomap_scale))};
  }
  const auto first = encode_sge(c->data_buf);
  std::memcpy(target.data, first.data(), first.size());
  sseq_comp = c->credits;
  return true;
}

void Rsocket::set_connected(bool initiator) {
  state = State::kConnected;
  readable = true;
  writable = true;
  peer_spoke = initiator;
  give_credits();  // the second half of the receive ring (initiator: at once)
  cv.notify_all();
}

int Rsocket::drive_connect(bool nb) {
  const Clock::time_point deadline = Clock::now() + kConnectWait;
  while (state == State::kConnecting) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(cm_channel, &ev) != 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        fail_connection(errno);
        break;
      }
      if (nb) return fail(EINPROGRESS);
      const long left = ms_until(deadline);
      if (left <= 0) {
        fail_connection(ETIMEDOUT);
        break;
      }
      pollfd p{fd, POLLIN, 0};
      mu.unlock();
      const int r = ::poll(&p, 1, static_cast<int>(std::min<long>(left, kWaitSliceMs)));
      const int e = errno;
      mu.lock();
      if (r < 0 && e == EINTR) return fail(EINTR);
      continue;
    }
    const rdma_cm_event_type type = ev->event;
    const int status = ev->status;
    std::vector<std::uint8_t> pd;
    if (type == RDMA_CM_EVENT_ESTABLISHED && ev->param.conn.private_data != nullptr) {
      const auto* b = static_cast<const std::uint8_t*>(ev->param.conn.private_data);
      pd.assign(b, b + ev->param.conn.private_data_len);
    }
    rdma_ack_cm_event(ev);
    int r = 0;
    switch (type) {
      case RDMA_CM_EVENT_ADDR_RESOLVED:
        connect_phase = 1;
        r = rdma_resolve_route(id, kResolveMs);
        break;
      case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        connect_phase = 2;
        ConnData conn;
        r = setup_endpoint(&conn);
        if (r != 0) break;
        const auto bytes = encode_conn_data(conn);
        rdma_conn_param param{};
        param.private_data = bytes.data();
        param.private_data_len = static_cast<std::uint8_t>(bytes.size());
        param.initiator_depth = 1;  // rdma-core asks for one Read on iWARP (the RTR)
        param.responder_resources = 1;
        param.flow_control = 1;
        param.retry_count = 7;
        param.rnr_retry_count = 7;  // a receive queue that runs dry waits, as on InfiniBand
        r = rdma_connect(id, &param);
        break;
      }
      case RDMA_CM_EVENT_ESTABLISHED:
        if (!accept_conn_data(pd)) {
          fail_connection(EPROTO);
          return -1;
        }
        set_connected(/*initiator=*/true);
        return 0;
      default:
        fail_connection(event_errno(type, status));
        return -1;
    }
    if (r != 0) fail_connection(errno);
  }
  if (state == State::kConnected) return 0;
  return fail(err != 0 ? err : ECONNREFUSED);
}

void Rsocket::fail_connection(int error) {
  if (err == 0) err = error;
  readable = false;
  writable = false;
  if (state == State::kConnecting) {
    state = State::kConnectError;
  } else if (state == State::kConnected) {
    disconnect();
  }
  disconnected = true;
  cv.notify_all();
}

void Rsocket::disconnect() {
  if (disconnect_called) return;
  disconnect_called = true;
  rdma_disconnect(id);
}

void Rsocket::await_close() {
  const Clock::time_point deadline = Clock::now() + kCloseWait;
  for (;;) {
    rdma_cm_event* ev = nullptr;
    while (rdma_get_cm_event(cm_channel, &ev) == 0) {
      const bool closed = ev->event == RDMA_CM_EVENT_DISCONNECTED;
      rdma_ack_cm_event(ev);
      if (closed) return;
    }
    process_cq();  // rdma_cm holds a DISCONNECTED until the completions before it are polled
    const long left = ms_until(deadline);
    if (left <= 0) return;
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min<long>(left, 50)));
  }
}

// --- completions and waiting -----------------------------------------------------------------

bool Rsocket::post_send(ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  const int r = ibv_post_send(id->qp, wr, &bad);
  if (r == 0) return true;
  fail_connection(r);
  errno = r;
  return false;
}

bool Rsocket::post_recv(std::uint32_t slot) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(rbuf.data + rbuf_size + slot * kMessageSize),
              static_cast<std::uint32_t>(kMessageSize), rbuf.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = kRecv | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(id->qp, &wr, &bad) == 0;
}

bool Rsocket::post_inline(ibv_wr_opcode opcode, const void* bytes, std::size_t len,
                          std::uint64_t wr_id, std::uint64_t addr, std::uint32_t rkey) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(bytes), static_cast<std::uint32_t>(len), 0};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = addr;
  wr.wr.rdma.rkey = rkey;
  return post_send(&wr);
}

bool Rsocket::send_message(std::uint32_t msg, std::uint64_t wr_id) {
  const auto bytes = encode_message(msg);
  return post_inline(IBV_WR_SEND, bytes.data(), bytes.size(), wr_id);
}

void Rsocket::give_credits() {
  if (state != State::kConnected || disconnected || !peer_spoke || !ring || !ring->credit_due()) {
    return;
  }
  if (ctrl_inflight + 2 > kCtrlSlots) return;  // iWARP: an SGL update is a Write and a Send
  const ReceiveRing::CreditUpdate u = ring->take_credit_update();
  if (u.offer) {
    const auto sge = encode_sge(WireSge{reinterpret_cast<std::uintptr_t>(rbuf.data + *u.offer),
                                        rbuf.mr->rkey, ring->half()});
    if (!post_inline(IBV_WR_RDMA_WRITE, sge.data(), sge.size(), kCtrl,
                     remote_sgl.addr + std::uint64_t{kSgeSize} * u.sgl_index, remote_sgl.key)) {
      return;
    }
    ++ctrl_inflight;
  }
  if (send_message(message(Op::kSgl, u.credits), kCtrl)) ++ctrl_inflight;
}

void Rsocket::on_message(std::uint32_t msg) {
  switch (op_of(msg)) {
    case Op::kSgl:
      sseq_comp = static_cast<std::uint16_t>(data_of(msg));
      break;
    case Op::kCtrl:
      if (data_of(msg) == static_cast<std::uint32_t>(Ctrl::kDisconnect)) {
        readable = false;
        writable = false;
        disconnected = true;
        disconnect();  // nothing more goes either way: the peer's rclose need not wait for ours
      } else if (data_of(msg) == static_cast<std::uint32_t>(Ctrl::kShutdown)) {
        readable = false;
        if (!writable) disconnected = true;
      }
      break;
    case Op::kData:
      if (!ring->on_data(data_of(msg))) {
        std::fprintf(
            stderr,
            "uwarp rsocket: the peer announced a message of %u bytes, beyond the buffer it was "
            "offered or beyond its credits; closing the connection\n",
            data_of(msg));
        fail_connection(EPROTO);
      }
      break;
    default:  // kIomapSgl: the entry is in place already; nothing else is defined
      break;
  }
}

int Rsocket::process_cq() {
  if (cq == nullptr) return 0;
  int total = 0;
  ibv_wc wc[16];
  int n;
  while ((n = ibv_poll_cq(cq, 16, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      const ibv_wc& c = wc[i];
      if ((c.wr_id & kRecv) != 0) {
        if (c.status != IBV_WC_SUCCESS) {  // flushed: the connection is gone
          readable = false;
          writable = false;
          disconnected = true;
          continue;
        }
        const auto slot = static_cast<std::uint32_t>(c.wr_id);
        if (slot >= rq_size) continue;
        peer_spoke = true;
        on_message(decode_message(std::span<const std::uint8_t>(
            rbuf.data + rbuf_size + slot * kMessageSize, std::min<std::uint32_t>(c.byte_len, 4))));
        if (!disconnected && !post_recv(slot)) fail_connection(EIO);
        continue;
      }
      if ((c.wr_id & kCtrl) != 0) {
        --ctrl_inflight;
      } else {
        ++sqe_avail;
        sbuf_free += static_cast<std::uint32_t>(c.wr_id);
      }
      if (c.status != IBV_WC_SUCCESS && !disconnected) fail_connection(EIO);
    }
    total += n;
  }
  if (total > 0) {
    give_credits();
    cv.notify_all();
    if (cq_waiter) {
      const std::uint64_t one = 1;
      [[maybe_unused]] ssize_t w = ::write(kick_fd, &one, sizeof one);
    }
  }
  return total;
}

bool Rsocket::arm() {
  if (cq == nullptr) return false;
  if (!cq_armed) {
    ibv_req_notify_cq(cq, 0);
    cq_armed = true;
  }
  return process_cq() > 0;
}

void Rsocket::after_wait() {
  if (cq_channel == nullptr) return;
  ibv_cq* ev_cq = nullptr;
  void* ctx = nullptr;
  if (ibv_get_cq_event(cq_channel, &ev_cq, &ctx) == 0) {
    ibv_ack_cq_events(ev_cq, 1);
    cq_armed = false;
  }
}

template <typename Pred>
int Rsocket::wait_for(Pred pred, bool nb, std::optional<Clock::time_point> deadline) {
  for (;;) {
    process_cq();
    if (pred()) return 0;
    if (nb) return fail(EAGAIN);
    int slice = kWaitSliceMs;
    if (deadline) {
      const long left = ms_until(*deadline);
      if (left <= 0) return fail(ETIMEDOUT);
      slice = static_cast<int>(std::min<long>(left, slice));
    }
    if (cq_waiter || cq == nullptr) {
      cv.wait_for(mu, std::chrono::milliseconds(slice));
      continue;
    }
    if (arm()) continue;
    cq_waiter = true;
    pollfd p[2] = {{cq_channel->fd, POLLIN, 0}, {kick_fd, POLLIN, 0}};
    mu.unlock();
    const int r = ::poll(p, 2, slice);
    const int e = errno;
    mu.lock();
    cq_waiter = false;
    if ((p[1].revents & POLLIN) != 0) {
      std::uint64_t v;
      [[maybe_unused]] ssize_t rd = ::read(kick_fd, &v, sizeof v);
    }
    if ((p[0].revents & POLLIN) != 0) after_wait();
    cv.notify_all();
    if (r < 0 && e == EINTR) return fail(EINTR);
  }
}

// --- data ------------------------------------------------------------------------------------

WireSge Rsocket::target_entry(std::uint32_t index) const {
  // The peer writes these entries with RDMA Writes at any time: read each field once.
  auto* p = target.data + std::size_t{index} * kSgeSize;
  WireSge e;
  e.length = __atomic_load_n(reinterpret_cast<std::uint32_t*>(p + 12), __ATOMIC_ACQUIRE);
  e.addr = __atomic_load_n(reinterpret_cast<std::uint64_t*>(p), __ATOMIC_RELAXED);
  e.key = __atomic_load_n(reinterpret_cast<std::uint32_t*>(p + 8), __ATOMIC_RELAXED);
  return e;
}

void Rsocket::consume_target(std::uint32_t index, std::uint32_t length) {
  auto* p = target.data + std::size_t{index} * kSgeSize;
  const WireSge e = target_entry(index);
  __atomic_store_n(reinterpret_cast<std::uint64_t*>(p), e.addr + length, __ATOMIC_RELAXED);
  __atomic_store_n(reinterpret_cast<std::uint32_t*>(p + 12), e.length - length, __ATOMIC_RELEASE);
  if (e.length == length) target_sge = (target_sge + 1) % kSglEntries;
}

bool Rsocket::can_send() const {
  return state == State::kConnected && writable && peer_spoke && sqe_avail >= 2 &&
         sbuf_free >= kSendLowWater && sseq_no != sseq_comp && target_entry(target_sge).length != 0;
}

bool Rsocket::have_data() const {
  return ring && ring->readable() > 0;
}

bool Rsocket::all_sends_done() const {
  return sqe_avail == sq_size - kCtrlSlots && ctrl_inflight == 0;
}

namespace {

// Walks an iovec array as one byte sequence.
class IovCursor {
 public:
  IovCursor(const iovec* iov, int n) : iov_(iov), n_(n) {}
  // Copies `len` bytes out of (to_iov = false) or into the iovecs, advancing.
  void copy(std::uint8_t* p, std::size_t len, bool to_iov) {
    while (len > 0 && i_ < n_) {
      const std::size_t take = std::min(len, iov_[i_].iov_len - off_);
      auto* base = static_cast<std::uint8_t*>(iov_[i_].iov_base) + off_;
      if (to_iov) {
        std::memcpy(base, p, take);
      } else {
        std::memcpy(p, base, take);
      }
      p += take;
      len -= take;
      off_ += take;
      if (off_ == iov_[i_].iov_len) {
        ++i_;
        off_ = 0;
      }
    }
  }

 private:
  const iovec* iov_;
  int n_;
  int i_ = 0;
  std::size_t off_ = 0;
};

std::size_t iov_total(const iovec* iov, int n) {
  std::size_t t = 0;
  for (int i = 0; i < n; ++i) t += iov[i].iov_len;
  return t;
}

// The gather list of a transfer of `xfer` bytes taken from `cur`: copied to `stack` and sent
// inline up to the inline limit, else staged in the send ring (two pieces where it wraps).
// Returns the number of SGEs and sets *flags. Caller holds s.mu.
int stage_transfer(Rsocket& s, IovCursor& cur, std::uint32_t xfer, std::uint8_t* stack,
                   ibv_sge* sges, unsigned* flags) REQUIRES(s.mu) {
  if (xfer <= std::min({s.sq_inline, s.opt.inline_size, kInlineStack})) {
    cur.copy(stack, xfer, false);
    sges[0] = ibv_sge{reinterpret_cast<std::uintptr_t>(stack), xfer, 0};
    *flags = IBV_SEND_INLINE;
    return 1;
  }
  *flags = 0;
  const std::uint32_t first = std::min(xfer, s.sbuf_size - s.sbuf_head);
  std::uint8_t* at = s.sbuf.data + s.sbuf_head;
  cur.copy(at, first, false);
  sges[0] = ibv_sge{reinterpret_cast<std::uintptr_t>(at), first, s.sbuf.mr->lkey};
  s.sbuf_head = (s.sbuf_head + xfer) % s.sbuf_size;
  if (first == xfer) return 1;
  cur.copy(s.sbuf.data, xfer - first, false);
  sges[1] = ibv_sge{reinterpret_cast<std::uintptr_t>(s.sbuf.data), xfer - first, s.sbuf.mr->lkey};
  return 2;
}

}  // namespace

ssize_t Rsocket::send(const iovec* iov, int iovcnt, bool nb) {
  const std::size_t total = iov_total(iov, iovcnt);
  if (send_iomaps(nb) != 0 && errno != EAGAIN) return -1;
  IovCursor cur(iov, iovcnt);
  std::size_t sent = 0;
  while (sent < total) {
    if (!can_send()) {
      const int r =
          wait_for([this] { return can_send() || !writable || state != State::kConnected; }, nb);
      if (r != 0) break;
    }
    if (!writable || state != State::kConnected) {
      errno = err != 0 ? err : (disconnected ? ECONNRESET : EPIPE);
      break;
    }
    const WireSge t = target_entry(target_sge);
    const auto xfer = static_cast<std::uint32_t>(
        std::min<std::size_t>({total - sent, kMaxTransfer, sbuf_free, t.length}));
    if (xfer == 0) break;  // can_send() saw room: only a peer rewriting the entry in use
    ibv_sge sges[2];
    std::uint8_t stack[kInlineStack];
    unsigned flags = 0;
    const int nsge = stage_transfer(*this, cur, xfer, stack, sges, &flags);
    const auto msg = encode_message(message(Op::kData, xfer));
    ibv_sge msg_sge{reinterpret_cast<std::uintptr_t>(msg.data()),
                    static_cast<std::uint32_t>(msg.size()), 0};
    ibv_send_wr wr[2]{};
    wr[0].wr_id = xfer;
    wr[0].sg_list = sges;
    wr[0].num_sge = nsge;
    wr[0].opcode = IBV_WR_RDMA_WRITE;
    wr[0].send_flags = flags;
    wr[0].wr.rdma.remote_addr = t.addr;
    wr[0].wr.rdma.rkey = t.key;
    wr[0].next = &wr[1];
    wr[1].wr_id = 0;
    wr[1].sg_list = &msg_sge;
    wr[1].num_sge = 1;
    wr[1].opcode = IBV_WR_SEND;
    wr[1].send_flags = IBV_SEND_INLINE;
    // The entry is updated before the Write is posted: once posted, the peer may take the data
    // and offer this entry again before this thread runs on.
    consume_target(target_sge, xfer);
    ++sseq_no;
    sqe_avail -= 2;
    sbuf_free -= xfer;
    if (!post_send(wr)) break;
    sent += xfer;
  }
  if (sent > 0 || total == 0) return static_cast<ssize_t>(sent);
  return -1;
}

ssize_t Rsocket::recv(const iovec* iov, int iovcnt, int flags, bool nb) {
  const std::size_t total = iov_total(iov, iovcnt);
  IovCursor cur(iov, iovcnt);
  std::size_t got = 0;
  for (;;) {
    if (!have_data()) {
      if (!readable || state != State::kConnected) break;
      if (got > 0 && (flags & MSG_WAITALL) == 0) break;
      if (wait_for([this] { return have_data() || !readable || state != State::kConnected; }, nb) !=
          0) {
        if (got > 0) break;
        return -1;
      }
      continue;
    }
    const std::uint64_t n = std::min<std::uint64_t>(total - got, ring->readable());
    for (const ReceiveRing::Piece& piece : ring->pieces(n)) {
      cur.copy(rbuf.data + piece.offset, piece.length, true);
    }
    got += n;
    if ((flags & MSG_PEEK) != 0) break;
    ring->consume(n);
    give_credits();
    if (got == total || (flags & MSG_WAITALL) == 0) break;
  }
  if (got == 0 && err != 0 && total > 0 && !have_data()) {
    // A failed connection ends the stream with its error once the data is read.
    return fail(err);
  }
  return static_cast<ssize_t>(got);
}

int Rsocket::send_iomaps(bool nb) {
  for (LocalIomap& m : iomaps) {
    if (m.index < 0 || m.sent) continue;
    const auto ready = [this] {
      return (state == State::kConnected && writable && peer_spoke && sqe_avail >= 2 &&
              sseq_no != sseq_comp) ||
             !writable || state != State::kConnected;
    };
    if (wait_for(ready, nb) != 0) return -1;
    if (!writable || state != State::kConnected) return fail(ECONNRESET);
    const auto entry = encode_iomap(
        IomapEntry{m.offset, WireSge{reinterpret_cast<std::uintptr_t>(m.mr->addr), m.mr->rkey,
                                     static_cast<std::uint32_t>(m.mr->length)}});
    const std::uint64_t addr = remote_iomap.addr + std::uint64_t{kIomapEntrySize} * m.index;
    if (!post_inline(IBV_WR_RDMA_WRITE, entry.data(), entry.size(), 0, addr, remote_iomap.key)) {
      return -1;
    }
    if (!send_message(message(Op::kIomapSgl, static_cast<std::uint32_t>(m.index)), 0)) return -1;
    ++sseq_no;
    sqe_avail -= 2;
    m.sent = true;
  }
  return 0;
}

ssize_t Rsocket::iowrite(const std::uint8_t* buf, std::size_t count, std::uint64_t offset,
                         bool nb) {
  if (send_iomaps(nb) != 0 && errno != EAGAIN) return -1;
  const iovec whole{const_cast<std::uint8_t*>(buf), count};
  IovCursor cur(&whole, 1);
  std::size_t sent = 0;
  while (sent < count) {
    // The peer's iomap entries, written into `target` behind the SGL entries.
    std::optional<IomapEntry> map;
    for (int i = 0; i < target_iomap_entries && !map; ++i) {
      const IomapEntry e = decode_iomap(std::span<const std::uint8_t, kIomapEntrySize>(
          target.data + kSglEntries * kSgeSize + std::size_t{kIomapEntrySize} * i,
          kIomapEntrySize));
      const std::uint64_t at = offset + sent;
      if (e.sge.length != 0 && at >= e.offset && at - e.offset < e.sge.length) map = e;
    }
    if (!map) {
      if (sent == 0) return fail(EINVAL);
      break;
    }
    const auto room = [this] {
      return (state == State::kConnected && writable && peer_spoke && sqe_avail >= 1 &&
              sbuf_free >= kSendLowWater) ||
             !writable || state != State::kConnected;
    };
    if (wait_for(room, nb) != 0) break;
    if (!writable || state != State::kConnected) {
      errno = err != 0 ? err : ECONNRESET;
      break;
    }
    const std::uint64_t at = offset + sent;
    const auto xfer = static_cast<std::uint32_t>(std::min<std::uint64_t>(
        {count - sent, kMaxTransfer, sbuf_free, map->sge.length - (at - map->offset)}));
    ibv_sge sges[2];
    std::uint8_t stack[kInlineStack];
    unsigned flags = 0;
    const int nsge = stage_transfer(*this, cur, xfer, stack, sges, &flags);
    ibv_send_wr wr{};
    wr.wr_id = xfer;
    wr.sg_list = sges;
    wr.num_sge = nsge;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = flags;
    wr.wr.rdma.remote_addr = map->sge.addr + (at - map->offset);
    wr.wr.rdma.rkey = map->sge.key;
    if (!post_send(&wr)) break;
    --sqe_avail;
    sbuf_free -= xfer;
    sent += xfer;
  }
  return sent > 0 ? static_cast<ssize_t>(sent) : -1;
}

int Rsocket::shutdown(int how) {
  if (state != State::kConnected) return fail(ENOTCONN);
  Ctrl ctrl;
  if (how == SHUT_RDWR) {
    ctrl = Ctrl::kDisconnect;
    readable = false;
    writable = false;
  } else if (how == SHUT_WR) {
    writable = false;
    ctrl = readable ? Ctrl::kShutdown : Ctrl::kDisconnect;
  } else if (how == SHUT_RD) {
    readable = false;
    if (writable) return 0;
    ctrl = Ctrl::kDisconnect;
  } else {
    return fail(EINVAL);
  }
  if (disconnected) return 0;
  const Clock::time_point deadline = Clock::now() + kShutdownWait;
  // An acceptor that never heard from its peer may not send at all (RFC 5044: the initiator
  // sends the first FPDU): then the disconnect alone tells the peer.
  if (wait_for([this] { return (ctrl_inflight < kCtrlSlots && peer_spoke) || disconnected; }, false,
               deadline) == 0 &&
      !disconnected) {
    if (send_message(message(Op::kCtrl, static_cast<std::uint32_t>(ctrl)), kCtrl)) {
      ++ctrl_inflight;
    }
  }
  wait_for([this] { return all_sends_done() || disconnected; }, false, deadline);
  if (ctrl == Ctrl::kDisconnect) {
    disconnected = true;
    disconnect();
  }
  cv.notify_all();
  return 0;
}

void Rsocket::release(bool graceful) {
  if (id != nullptr && id->qp != nullptr) {
    if (state == State::kConnected) {
      disconnect();
      // Destroying the QP aborts the connection, and bytes the peer has not taken yet (this
      // side's last data, its disconnect message) would be lost with it: first let the
      // connection close, as the kernel lets a closed socket's bytes go.
      if (graceful) await_close();
    }
    rdma_destroy_qp(id);
  }
  for (LocalIomap& m : iomaps) ibv_dereg_mr(m.mr);
  iomaps.clear();
  ring.reset();
  rbuf.reset();
  target.reset();
  sbuf.reset();
  if (cq != nullptr) {
    after_wait();  // an event not taken yet must be acknowledged before the CQ goes
    ibv_destroy_cq(cq);
    cq = nullptr;
  }
  if (cq_channel != nullptr) {
    ibv_destroy_comp_channel(cq_channel);
    cq_channel = nullptr;
  }
  if (id != nullptr) {
    rdma_destroy_id(id);
    id = nullptr;
  }
  if (cm_channel != nullptr) {
    rdma_destroy_event_channel(cm_channel);
    cm_channel = nullptr;
  }
  state = State::kClosed;
  readable = false;
  writable = false;
  cv.notify_all();
}

// --- readiness ---------------------------------------------------------------------------------

short Rsocket::revents(short events) {
  const short in = events & (POLLIN | POLLRDNORM);
  const short out = events & (POLLOUT | POLLWRNORM);
  switch (state) {
    case State::kListening:
      return accepted.empty() ? 0 : in;
    case State::kConnecting:
      if (drive_connect(true) != 0 && state == State::kConnecting) return 0;
      return revents(events);
    case State::kConnectError:
      return static_cast<short>(in | out | POLLERR);
    case State::kConnected: {
      process_cq();
      short r = 0;
      if (have_data() || !readable) r |= in;
      if (can_send()) r |= out;
      // The end is reported once the data before it is read (as TCP reports POLLHUP only when
      // nothing more can be received), so that a poller never takes the last bytes for lost.
      if (disconnected && !have_data()) r |= err != 0 ? POLLERR : POLLHUP;
      return r;
    }
    default:
      return 0;
  }
}

int Rsocket::wait_fd() const {
  switch (state) {
    case State::kListening:
      return accept_fd;
    case State::kConnecting:
      return fd;
    case State::kConnected:
      return cq_channel != nullptr ? cq_channel->fd : -1;
    default:
      return -1;
  }
}

}  // namespace uwarp::rdmacm::rs
