// The rsocket protocol without I/O (ofa/rdmacm/rsocket_protocol.h): rdma-core's wire layouts,
// and the receiver's accounting that keeps a peer inside the buffer it was offered.
#include "rdmacm/rsocket_protocol.h"

#include <gtest/gtest.h>

#include <vector>

namespace uwarp::rdmacm::rs {
namespace {

TEST(RsocketWire, ConnDataIsRdmaCoresLayout) {
  ConnData c;
  c.credits = 384;
  c.iomap_scale = 1;
  c.target_sgl = WireSge{0x1122334455667788, 0xAABBCCDD, 2};
  c.data_buf = WireSge{0x0102030405060708, 0x01020304, 65536};
  const auto b = encode_conn_data(c);
  const std::vector<std::uint8_t> want = {
      1,    2,    0x01, 0x80, 0,    0,    0,    1,     // version, flags (iomap), credits, scale
      0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // target_sgl.addr (big-endian)
      0xAA, 0xBB, 0xCC, 0xDD, 0,    0,    0,    2,     // key, length
      1,    2,    3,    4,    5,    6,    7,    8,     // data_buf.addr
      1,    2,    3,    4,    0,    1,    0,    0};    // key, length
  EXPECT_EQ(std::vector<std::uint8_t>(b.begin(), b.end()), want);
  const auto back = decode_conn_data(b);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->credits, 384);
  EXPECT_EQ(back->target_sgl.addr, c.target_sgl.addr);
  EXPECT_EQ(back->data_buf.length, 65536u);
}

TEST(RsocketWire, ShortConnDataIsRefusedLongerIsRead) {
  std::vector<std::uint8_t> b(kConnDataSize - 1, 0);
  EXPECT_FALSE(decode_conn_data(b));
  b.resize(kConnDataSize + 16, 0);
  b[0] = 1;
  EXPECT_TRUE(decode_conn_data(b));
}

TEST(RsocketWire, MessagesSgeAndIomapAreLittleEndianHostWords) {
  const std::uint32_t m = message(Op::kData, 65536);
  EXPECT_EQ(op_of(m), Op::kData);
  EXPECT_EQ(data_of(m), 65536u);
  EXPECT_EQ(message(Op::kCtrl, 2), 0xE0000002u);
  const auto mb = encode_message(message(Op::kSgl, 0x1234));
  EXPECT_EQ(std::vector<std::uint8_t>(mb.begin(), mb.end()),
            (std::vector<std::uint8_t>{0x34, 0x12, 0x00, 0x80}));
  EXPECT_EQ(decode_message(mb), message(Op::kSgl, 0x1234));
  EXPECT_EQ(decode_message(std::vector<std::uint8_t>{1}), 1u);  // a short message is zero-filled

  const auto sb = encode_sge(WireSge{0x0807060504030201, 0x0C0B0A09, 0x100F0E0D});
  for (std::size_t i = 0; i < sb.size(); ++i) EXPECT_EQ(sb[i], i + 1);
  EXPECT_EQ(decode_sge(sb).key, 0x0C0B0A09u);
  const auto ib = encode_iomap(IomapEntry{42, WireSge{7, 8, 9}});
  const IomapEntry e = decode_iomap(ib);
  EXPECT_EQ(e.offset, 42u);
  EXPECT_EQ(e.sge.length, 9u);
}

TEST(RsocketWire, IomapScaleMatchesRdmaCore) {
  EXPECT_EQ(iomap_scale_of(0), 0);
  EXPECT_EQ(iomap_scale_of(128), 128);
  EXPECT_EQ(iomap_entries_of(iomap_scale_of(128)), 128);
  EXPECT_EQ(iomap_entries_of(iomap_scale_of(512)), 512);  // 128 | 2: units of 256
  EXPECT_EQ(iomap_entries_of(iomap_scale_of(300)), 256);
}

TEST(ReceiveRing, OffersTheSecondHalfAtOnceThenEachHalfOnceConsumed) {
  ReceiveRing r(1024, 8);
  ASSERT_TRUE(r.credit_due());
  auto u = r.take_credit_update();
  ASSERT_TRUE(u.offer);
  EXPECT_EQ(*u.offer, 512u);
  EXPECT_EQ(u.sgl_index, 1u);
  EXPECT_EQ(u.credits, 8u);
  EXPECT_FALSE(r.credit_due());
  ASSERT_TRUE(r.on_data(512));
  ASSERT_TRUE(r.on_data(100));
  r.consume(511);
  EXPECT_FALSE(r.credit_due());
  r.consume(1);
  ASSERT_TRUE(r.credit_due());
  u = r.take_credit_update();
  ASSERT_TRUE(u.offer);
  EXPECT_EQ(*u.offer, 0u);  // the first half again, into entry 0
  EXPECT_EQ(u.sgl_index, 0u);
  EXPECT_EQ(u.credits, 9u);  // one message taken
}

TEST(ReceiveRing, PiecesWrapAroundTheRing) {
  ReceiveRing r(1024, 8);
  r.take_credit_update();
  ASSERT_TRUE(r.on_data(1000));
  r.consume(1000);
  r.take_credit_update();
  ASSERT_TRUE(r.on_data(24));   // the rest of the second half
  ASSERT_TRUE(r.on_data(100));  // the first half again
  ASSERT_EQ(r.readable(), 124u);
  const auto p = r.pieces(124);
  EXPECT_EQ(p[0].offset, 1000u);
  EXPECT_EQ(p[0].length, 24u);
  EXPECT_EQ(p[1].offset, 0u);
  EXPECT_EQ(p[1].length, 100u);
}

TEST(ReceiveRing, RefusesDataBeyondWhatWasOffered) {
  ReceiveRing r(1024, 8);
  EXPECT_FALSE(r.on_data(513));  // only the first half is offered before any update
  ASSERT_TRUE(r.on_data(512));
  EXPECT_FALSE(r.on_data(1));
  r.take_credit_update();  // offers the second half
  EXPECT_TRUE(r.on_data(512));
  EXPECT_FALSE(r.on_data(1));
  EXPECT_EQ(r.readable(), 1024u);
}

TEST(ReceiveRing, RefusesMoreMessagesThanCredits) {
  ReceiveRing r(1 << 20, 4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(r.on_data(1));
  EXPECT_FALSE(r.on_data(1));
  r.consume(1);
  EXPECT_TRUE(r.on_data(1));
}

TEST(ReceiveRing, PartialConsumptionKeepsTheMessage) {
  ReceiveRing r(1024, 4);
  ASSERT_TRUE(r.on_data(100));
  r.consume(40);
  EXPECT_TRUE(r.has_data());
  EXPECT_EQ(r.readable(), 60u);
  r.consume(60);
  EXPECT_FALSE(r.has_data());
  // Half the queue (2 messages) taken since the last update makes an update due.
  ASSERT_TRUE(r.on_data(1));
  r.consume(1);
  r.take_credit_update();
  EXPECT_FALSE(r.credit_due());
  ASSERT_TRUE(r.on_data(1));
  ASSERT_TRUE(r.on_data(1));
  r.consume(2);
  EXPECT_TRUE(r.credit_due());
}

TEST(ReceiveRing, SglEntriesFollowThePeersTableSize) {
  ReceiveRing r(1024, 4);
  r.set_peer_sgl_entries(1);  // the next update goes to entry 0: nothing beyond the table
  const auto u = r.take_credit_update();
  ASSERT_TRUE(u.offer);
  EXPECT_EQ(u.sgl_index, 0u);
  r.set_peer_sgl_entries(0);  // nonsense from a peer: still a valid index
  ASSERT_TRUE(r.on_data(512));
  r.consume(512);
  EXPECT_EQ(r.take_credit_update().sgl_index, 0u);
}

}  // namespace
}  // namespace uwarp::rdmacm::rs
