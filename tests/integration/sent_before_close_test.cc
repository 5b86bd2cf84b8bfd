// A message whose every byte was handed to TCP has completed, also when the peer closes the
// connection before the posting thread is back from its send system call. The posting thread
// sends with the QP lock released (runtime/transmitter.h); if the engine thread sees the peer's
// close meanwhile, it settles that send and must report the message sent before the QP flushes
// what is left. (libfabric's fi_msg_inject met this: its server exits as soon as the message
// arrives, and its client read a flush error for a message the server had received.)
//
// This binary interposes sendmsg: one call of the test's thread, armed by the test, is held
// after it has returned from the kernel until the peer has closed and the engine thread has had
// time to see it. The hold is bounded.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "support/connected_pair.h"
#include "uwarp/uwarp.h"

namespace {

std::atomic<bool> hold_armed{false};
std::atomic<pthread_t> held_thread{};
std::atomic<bool> held{false};         // the armed call was held
std::atomic<bool> peer_closed{false};  // the test's helper closed the server side

}  // namespace

extern "C" ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
  using SendMsg = ssize_t (*)(int, const struct msghdr*, int);
  static const auto real = reinterpret_cast<SendMsg>(dlsym(RTLD_NEXT, "sendmsg"));
  const ssize_t n = real(fd, msg, flags);
  if (n > 0 && pthread_equal(held_thread.load(), pthread_self()) && hold_armed.exchange(false)) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!peer_closed.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // The engine thread reads the close and waits for this call to return (settle_send).
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    held = true;
  }
  return n;
}

namespace uwarp::testing {
namespace {

TEST(SentBeforeClose, AMessageHandedToTcpCompletesWhenThePeerClosesDuringTheSendCall) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  Side& sv = *p.server;
  Sge s = sv.mr.sge(0, 4096);
  ASSERT_TRUE(sv.qp.post_recv({7, {&s, 1}}));

  // The server takes the message and closes at once, as fi_msg_inject's server exits.
  std::thread closer([&] {
    const auto rwc = wait_wc(sv.cq);
    EXPECT_TRUE(rwc && rwc->status == WcStatus::kSuccess);
    sv.conn.disconnect();
    peer_closed = true;
  });

  Sge src = cl.mr.sge(0, 64);
  SendWr send;
  send.wr_id = 1;
  send.sg_list = {&src, 1};
  held_thread = pthread_self();
  hold_armed = true;
  const bool posted = static_cast<bool>(cl.qp.post_send(send));
  closer.join();
  ASSERT_TRUE(posted);
  ASSERT_TRUE(held) << "the Send was not made by the posting thread: nothing was tested";

  const auto wc = wait_wc(cl.cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->wr_id, 1u);
  EXPECT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
}

}  // namespace
}  // namespace uwarp::testing
