// How the transmitter sizes FPDUs: from the TCP MSS as Linux siw does, or larger where this side
// asked for it (ConnectionParams::fpdu_size).
#include <gtest/gtest.h>

#include "runtime/transmitter.h"
#include "wire/fpdu.h"

namespace uwarp::runtime {
namespace {

TEST(runtime_fpdu_size, TheMssRoundedDownToEightBoundsTheWholeFpdu) {
  // At MSS 1448 an FPDU of 1448 bytes: 2-byte length, a ULPDU of 1442, no pad, 4-byte CRC.
  EXPECT_EQ(max_ulpdu_for_mss(1448), 1442u);
  EXPECT_EQ(wire::fpdu_size(max_ulpdu_for_mss(1448)), 1448u);
  EXPECT_EQ(max_ulpdu_for_mss(1455), max_ulpdu_for_mss(1448));
  EXPECT_EQ(max_ulpdu_for_mss(0), max_ulpdu_for_mss(1448));  // the MSS could not be read
  // Loopback's MSS: the ULPDU's 16-bit length is the bound.
  EXPECT_EQ(max_ulpdu_for_mss(65483), 65474u);
}

TEST(runtime_fpdu_size, ALargerFpduSizeAskedForWinsOverASmallerMss) {
  EXPECT_EQ(max_ulpdu_for(1448, 0), max_ulpdu_for_mss(1448));
  EXPECT_EQ(max_ulpdu_for(1448, 1000), max_ulpdu_for_mss(1448));  // the MSS is larger
  EXPECT_EQ(max_ulpdu_for(1448, 16384), wire::max_ulpdu_for_fpdu_size(16384));
  EXPECT_LE(wire::fpdu_size(max_ulpdu_for(1448, 16384)), 16384u);
  // The largest FPDU the length field allows, and no larger whatever is asked.
  EXPECT_EQ(max_ulpdu_for(1448, 65544), wire::kMaxUlpduLength - 1);
  EXPECT_EQ(max_ulpdu_for(1448, 1 << 20), wire::kMaxUlpduLength - 1);
}

}  // namespace
}  // namespace uwarp::runtime
