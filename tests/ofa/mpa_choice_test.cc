// UWARP_MPA parsing (ofa/rdmacm/mpa_choice.h): the MPA choices of unmodified programs.
#include "rdmacm/mpa_choice.h"

#include <gtest/gtest.h>

namespace uwarp::rdmacm {
namespace {

TEST(MpaChoice, EmptyMeansRevisionTwoWithoutCrcOrPeerToPeer) {
  auto c = parse_mpa_choice("");
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->crc);
  EXPECT_FALSE(c->peer_to_peer);
  EXPECT_EQ(c->revision, 2);
}

TEST(MpaChoice, WordsCombineInAnyOrder) {
  auto c = parse_mpa_choice("p2p,crc");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->crc);
  EXPECT_TRUE(c->peer_to_peer);
  EXPECT_EQ(c->revision, 2);
  auto r = parse_mpa_choice("rev1,crc,");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->crc);
  EXPECT_EQ(r->revision, 1);
}

TEST(MpaChoice, PeerToPeerOffersBothRtrsOrTheOneNamed) {
  auto both = parse_mpa_choice("p2p");
  ASSERT_TRUE(both);
  EXPECT_EQ(both->rtr_offer, RtrOffer::kWriteOrRead);
  auto write = parse_mpa_choice("p2p-write");
  ASSERT_TRUE(write);
  EXPECT_TRUE(write->peer_to_peer);
  EXPECT_EQ(write->rtr_offer, RtrOffer::kWrite);
  auto read = parse_mpa_choice("crc,p2p-read");
  ASSERT_TRUE(read);
  EXPECT_TRUE(read->peer_to_peer);
  EXPECT_TRUE(read->crc);
  EXPECT_EQ(read->rtr_offer, RtrOffer::kRead);
  EXPECT_FALSE(parse_mpa_choice("rev1,p2p-read"));
}

TEST(MpaChoice, MarkersAreAskedFor) {
  auto c = parse_mpa_choice("crc,markers");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->crc);
  EXPECT_TRUE(c->markers);
  EXPECT_FALSE(parse_mpa_choice("crc")->markers);
}

TEST(MpaChoice, FpduSizeTakesBytesUpToTheLargestFpdu) {
  EXPECT_EQ(parse_mpa_choice("")->fpdu_size, 0u);
  auto c = parse_mpa_choice("crc,fpdu=65536");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->crc);
  EXPECT_EQ(c->fpdu_size, 65536u);
  EXPECT_EQ(parse_mpa_choice("fpdu=65544")->fpdu_size, kMaxFpduSize);
  for (const char* bad : {"fpdu=65545", "fpdu=", "fpdu=64K", "fpdu=-1", "fpdu=99999999999"}) {
    auto r = parse_mpa_choice(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message().find("at most 65544"), std::string::npos) << r.error().message();
  }
}

TEST(MpaChoice, UnknownWordIsNamed) {
  auto c = parse_mpa_choice("crc,marker");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(c.error().message().find("'marker'"), std::string::npos) << c.error().message();
}

TEST(MpaChoice, PeerToPeerNeedsRevisionTwo) {
  auto c = parse_mpa_choice("rev1,p2p");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message().find("revision 2"), std::string::npos) << c.error().message();
}

}  // namespace
}  // namespace uwarp::rdmacm
