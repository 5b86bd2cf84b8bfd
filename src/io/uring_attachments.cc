#include "io/uring_attachments.h"

#include <algorithm>
#include <cerrno>

namespace uwarp::io::uring {

void Attachments::attach(int fd, IoHandler* handler) {
  MutexLock lock(mu_);
  const std::uint64_t id = next_id_++;
  // An fd attached again without detach: its old operations complete into nothing.
  if (auto old = ids_.find(fd); old != ids_.end() && states_[old->second].inflight == 0) {
    states_.erase(old->second);
  }
  ids_[fd] = id;
  State& s = states_[id];
  s.fd = fd;
  s.handler = handler;
}

std::uint64_t Attachments::detach(int fd, bool* inflight) {
  MutexLock lock(mu_);
  *inflight = false;
  auto it = ids_.find(fd);
  if (it == ids_.end()) return 0;
  const std::uint64_t id = it->second;
  ids_.erase(it);
  std::erase_if(requests_, [id](const Request& r) { return r.id == id; });
  std::erase_if(immediate_, [id](std::uint64_t i) { return i == id; });
  if (states_[id].inflight == 0) {
    states_.erase(id);
  } else {
    *inflight = true;
  }
  return id;
}

bool Attachments::completed_after_detach(std::uint64_t id) {
  MutexLock lock(mu_);
  auto it = states_.find(id);
  if (it == states_.end()) return true;
  if (--it->second.inflight > 0) return false;
  states_.erase(it);
  return true;
}

bool Attachments::start_watch(int fd, ByteSpan into) {
  MutexLock lock(mu_);
  auto it = ids_.find(fd);
  if (it == ids_.end()) return false;
  State& s = states_[it->second];
  if (s.watch_armed) return false;
  s.watch_armed = true;
  s.watch_buf = into;
  if (!into.empty()) ++s.receiving;
  requests_.push_back(Request{fd, it->second, Op::kWatch});
  return true;
}

bool Attachments::start_immediate(int fd) {
  MutexLock lock(mu_);
  auto it = ids_.find(fd);
  if (it == ids_.end()) return false;
  immediate_.push_back(it->second);
  return true;
}

void Attachments::take_started(std::vector<Request>& requests,
                               std::vector<std::uint64_t>& immediate) {
  MutexLock lock(mu_);
  requests.swap(requests_);
  immediate.swap(immediate_);
}

bool Attachments::submitting(const Request& r, Operands& out) {
  MutexLock lock(mu_);
  auto it = states_.find(r.id);
  if (it == states_.end() || !attached_locked(r.fd, r.id)) return false;
  State& s = it->second;
  ++s.inflight;
  out.recv_buf = s.recv_buf;
  out.watch_buf = s.watch_buf;
  out.msg = &s.msg;
  out.peer = &s.peer;
  return true;
}

bool Attachments::claim(std::uint64_t id, Op op, int res, Target& t) {
  MutexLock lock(mu_);
  auto it = states_.find(id);
  if (it == states_.end()) return false;
  State& s = it->second;
  t.fd = s.fd;
  --s.inflight;
  if (!attached_locked(t.fd, id)) {
    if (s.inflight == 0) states_.erase(it);  // the fd was attached again meanwhile
    return false;
  }
  t.handler = s.handler;
  t.watch_received = !s.watch_buf.empty();
  if (res == -EAGAIN || res == -EINTR) {
    // The kernel waits for readiness itself; should it ever give up, try again.
    requests_.push_back(Request{t.fd, id, op});
    return false;
  }
  if (op == Op::kWatch) s.watch_armed = false;  // reported now: the handler may watch again
  return true;
}

void Attachments::reported(std::uint64_t id) {
  MutexLock lock(mu_);
  if (auto it = states_.find(id); it != states_.end()) --it->second.receiving;
}

bool Attachments::receiving(int fd, std::uint64_t reporting) {
  MutexLock lock(mu_);
  auto it = ids_.find(fd);
  return it != ids_.end() && it->second != reporting && states_[it->second].receiving > 0;
}

IoHandler* Attachments::handler_of(std::uint64_t id) {
  MutexLock lock(mu_);
  auto it = states_.find(id);
  return it != states_.end() && attached_locked(it->second.fd, id) ? it->second.handler : nullptr;
}

SocketAddress Attachments::accepted(std::uint64_t id, int fd, int res, std::chrono::milliseconds* pause) {
  MutexLock lock(mu_);
  State& s = states_[id];
  const SocketAddress peer = s.peer;  // before the next accept is submitted into it
  *pause = std::chrono::milliseconds(0);
  if (res < 0 && accept_out_of_resources(-res)) {
    *pause = s.accept_backoff.next();  // the loop thread submits it again after the pause
  } else {
    s.accept_backoff.reset();
    requests_.push_back(Request{fd, id, Op::kAccept});  // accept stays armed
  }
  return peer;
}

void Attachments::clear() {
  MutexLock lock(mu_);
  states_.clear();
  ids_.clear();
}

bool Attachments::attached_locked(int fd, std::uint64_t id) const {
  auto it = ids_.find(fd);
  return it != ids_.end() && it->second == id;
}

}  // namespace uwarp::io::uring
