// AcceptBackoff: the pause after each accept that failed for want of resources doubles from 1 ms
// to at most 100 ms, and a successful accept starts again from 1 ms.
#include "io/accept_backoff.h"

#include <gtest/gtest.h>

#include <vector>

namespace uwarp::io {
namespace {

using std::chrono::milliseconds;

TEST(AcceptBackoff, DoublesUpToTheMaximumAndResets) {
  AcceptBackoff b;
  std::vector<long> pauses;
  for (int i = 0; i < 10; ++i) pauses.push_back(static_cast<long>(b.next().count()));
  EXPECT_EQ(pauses, (std::vector<long>{1, 2, 4, 8, 16, 32, 64, 100, 100, 100}));
  b.reset();
  EXPECT_EQ(b.next(), milliseconds(1));
  EXPECT_EQ(b.next(), milliseconds(2));
}

TEST(AcceptBackoff, OnlyResourceErrorsPause) {
  EXPECT_TRUE(accept_out_of_resources(EMFILE));
  EXPECT_TRUE(accept_out_of_resources(ENFILE));
  EXPECT_TRUE(accept_out_of_resources(ENOBUFS));
  EXPECT_TRUE(accept_out_of_resources(ENOMEM));
  EXPECT_FALSE(accept_out_of_resources(ECONNABORTED));
  EXPECT_FALSE(accept_out_of_resources(EPROTO));
}

}  // namespace
}  // namespace uwarp::io
