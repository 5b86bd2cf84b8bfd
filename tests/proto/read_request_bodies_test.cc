// proto::ReadRequestBodies alone: each encoded body stays intact while the next kSlots - 1
// bodies are encoded (a full batch of Read Requests), and the slots are reused after that.
#include "proto/read_request_bodies.h"

#include <gtest/gtest.h>

#include <vector>

namespace uwarp::proto {
namespace {

wire::ReadRequest request(std::uint32_t i) {
  wire::ReadRequest rr;
  rr.sink_stag = 0x1000 + i;
  rr.sink_to = 0x10000ull * i;
  rr.size = i;
  rr.source_stag = 0x2000 + i;
  rr.source_to = 0x20000ull * i;
  return rr;
}

TEST(proto_read_request_bodies, ABatchFullOfBodiesStaysIntact) {
  ReadRequestBodies bodies;
  std::vector<ConstByteSpan> encoded;
  for (std::uint32_t i = 0; i < ReadRequestBodies::kSlots; ++i) {
    encoded.push_back(bodies.encode(request(i)));
    EXPECT_EQ(encoded.back().size(), wire::kReadRequestSize);
  }
  for (std::uint32_t i = 0; i < ReadRequestBodies::kSlots; ++i) {
    auto rr = wire::decode_read_request(encoded[i]);
    ASSERT_TRUE(rr.has_value());
    EXPECT_EQ(rr->sink_stag, 0x1000 + i);
    EXPECT_EQ(rr->sink_to, 0x10000ull * i);
    EXPECT_EQ(rr->size, i);
    EXPECT_EQ(rr->source_stag, 0x2000 + i);
    EXPECT_EQ(rr->source_to, 0x20000ull * i);
  }
}

TEST(proto_read_request_bodies, TheSlotsAreReusedInTurn) {
  ReadRequestBodies bodies;
  const ConstByteSpan first = bodies.encode(request(1));
  for (std::uint32_t i = 1; i < ReadRequestBodies::kSlots; ++i) {
    EXPECT_NE(bodies.encode(request(2)).data(), first.data());
  }
  const ConstByteSpan reused = bodies.encode(request(3));
  EXPECT_EQ(reused.data(), first.data());
  auto rr = wire::decode_read_request(first);
  ASSERT_TRUE(rr.has_value());
  EXPECT_EQ(rr->size, 3u);
}

}  // namespace
}  // namespace uwarp::proto
