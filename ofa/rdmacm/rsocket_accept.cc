#include "rdmacm/rsocket_accept.h"

#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <unordered_map>
#include <vector>

#include "rdmacm/cma.h"

namespace uwarp::rdmacm::rs {
namespace {

class AcceptService {
 public:
  static AcceptService& get() {
    static AcceptService* s = new AcceptService;  // never destroyed: its thread runs until exit
    return *s;
  }

  int add(const std::shared_ptr<Rsocket>& s) {
    MutexLock lock(mu_);
    if (!started_ && start_locked() != 0) return -1;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = s->fd;
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, s->fd, &ev) != 0) return -1;
    watched_[s->fd] = s;
    return 0;
  }

  // Stops watching `s` (not whatever socket has its fd number now: numbers are reused once
  // a socket is released).
  void remove(const Rsocket* s) {
    MutexLock lock(mu_);
    auto it = watched_.find(s->fd);
    if (it == watched_.end() || it->second.get() != s) return;
    watched_.erase(it);
    ::epoll_ctl(epfd_, EPOLL_CTL_DEL, s->fd, nullptr);
  }

 private:
  int start_locked() REQUIRES(mu_) {
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) return -1;
    sigset_t all;
    sigset_t old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    try {
      std::thread([this] { run(); }).detach();
    } catch (...) {
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      return fail(EAGAIN);
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    started_ = true;
    return 0;
  }

  void run() {
    epoll_event evs[16];
    for (;;) {
      const int n = ::epoll_wait(epfd_, evs, 16, -1);
      for (int i = 0; i < n; ++i) {
        std::shared_ptr<Rsocket> s;
        {
          MutexLock lock(mu_);
          auto it = watched_.find(evs[i].data.fd);
          if (it != watched_.end()) s = it->second;
        }
        if (s) handle(s);
      }
    }
  }

  void handle(const std::shared_ptr<Rsocket>& s) {
    std::shared_ptr<Rsocket> established;
    {
      MutexLock lock(s->mu);
      if (s->state == State::kListening) {
        take_requests(s);
        return;
      }
      if (s->state != State::kAccepting) {
        remove(s.get());
        return;
      }
      rdma_cm_event* ev = nullptr;
      while (s->state == State::kAccepting && rdma_get_cm_event(s->cm_channel, &ev) == 0) {
        const rdma_cm_event_type type = ev->event;
        rdma_ack_cm_event(ev);
        remove(s.get());  // before release() closes the fd
        if (type == RDMA_CM_EVENT_ESTABLISHED) {
          s->set_connected(/*initiator=*/false);
          established = s;
        } else {
          s->release(
              /*graceful=*/false);  // rejected, unreachable, or gone before it was established
        }
      }
    }
    if (established) hand_over(established);
  }

  // Answers every connection request queued on the listener. Caller holds l->mu.
  void take_requests(const std::shared_ptr<Rsocket>& l) REQUIRES(l->mu) {
    rdma_cm_event* ev = nullptr;
    while (rdma_get_cm_event(l->cm_channel, &ev) == 0) {
      if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
        rdma_ack_cm_event(ev);
        continue;
      }
      rdma_cm_id* child = ev->id;
      const rdma_conn_param req = ev->param.conn;
      std::vector<std::uint8_t> pd;
      if (req.private_data != nullptr) {
        const auto* b = static_cast<const std::uint8_t*>(req.private_data);
        pd.assign(b, b + req.private_data_len);
      }
      rdma_ack_cm_event(ev);
      answer(l, child, req, pd);
    }
  }

  void answer(const std::shared_ptr<Rsocket>& l, rdma_cm_id* child, const rdma_conn_param& req,
              const std::vector<std::uint8_t>& pd) REQUIRES(l->mu) {
    auto c = std::make_shared<Rsocket>();
    if (!c->open_channel() || rdma_migrate_id(child, c->cm_channel) != 0) {
      rdma_reject(child, nullptr, 0);
      rdma_destroy_id(child);
      MutexLock lock(c->mu);
      c->release(/*graceful=*/false);
      return;
    }
    c->id = child;
    c->listener = l;
    MutexLock lock(c->mu);
    c->opt = l->opt;
    c->state = State::kAccepting;
    ConnData conn;
    if (c->setup_endpoint(&conn) != 0 || !c->accept_conn_data(pd)) {
      rdma_reject(child, nullptr, 0);
      c->release(/*graceful=*/false);
      return;
    }
    const auto bytes = encode_conn_data(conn);
    rdma_conn_param param = req;
    param.private_data = bytes.data();
    param.private_data_len = static_cast<std::uint8_t>(bytes.size());
    param.rnr_retry_count = 7;
    if (add(c) != 0 || rdma_accept(child, &param) != 0) {
      remove(c.get());
      c->release(/*graceful=*/false);
    }
  }

  // Queues an established socket on its listener, or drops it if that no longer listens.
  static void hand_over(const std::shared_ptr<Rsocket>& c) {
    if (auto l = c->listener.lock()) {
      MutexLock lock(l->mu);
      if (l->state == State::kListening) {
        l->accepted.push_back(c);
        if (!l->accept_signalled) {
          const std::uint64_t one = 1;
          [[maybe_unused]] ssize_t w = ::write(l->accept_fd, &one, sizeof one);
          l->accept_signalled = true;
        }
        l->cv.notify_all();
        return;
      }
    }
    MutexLock lock(c->mu);
    c->release(/*graceful=*/false);
  }

  Mutex mu_;
  std::unordered_map<int, std::shared_ptr<Rsocket>> watched_ GUARDED_BY(mu_);
  int epfd_ = -1;
  bool started_ GUARDED_BY(mu_) = false;
};

}  // namespace

int watch_listener(const std::shared_ptr<Rsocket>& listener) {
  return AcceptService::get().add(listener);
}

void unwatch_listener(const Rsocket& listener) {
  AcceptService::get().remove(&listener);
}

}  // namespace uwarp::rdmacm::rs
