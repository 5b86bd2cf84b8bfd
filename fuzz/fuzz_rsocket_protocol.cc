// libFuzzer target: the rsocket protocol's decoders and the receiver's accounting
// (ofa/rdmacm/rsocket_protocol.h). The input is a peer's connection data followed by a script of
// what a peer and an application may do: data messages of any length, reads of any size,
// credit updates. Whatever the peer claims, what the application is handed lies inside the ring
// and never exceeds what the peer was offered, and every offer is a half of the ring.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_check.h"
#include "rdmacm/rsocket_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace uwarp::rdmacm::rs;
  std::span<const std::uint8_t> in(data, size);
  const auto conn = decode_conn_data(in);
  FUZZ_CHECK(conn.has_value() == (size >= kConnDataSize));
  if (conn) {
    const auto again = encode_conn_data(*conn);
    const auto back = decode_conn_data(again);
    FUZZ_CHECK(back && back->credits == conn->credits &&
               back->data_buf.addr == conn->data_buf.addr &&
               back->target_sgl.length == conn->target_sgl.length);
    in = in.subspan(kConnDataSize);
  }
  if (in.size() < 3) return 0;
  const std::uint32_t ring_size = 2u * (1u + (in[0] | (in[1] << 8)) % 4096);
  const auto depth = static_cast<std::uint16_t>(1 + in[2] % 64);
  in = in.subspan(3);
  ReceiveRing ring(ring_size, depth);
  ring.set_peer_sgl_entries(conn ? conn->target_sgl.length : 2);
  std::uint64_t offered = ring.half();
  std::uint64_t announced = 0;
  std::uint64_t consumed = 0;
  while (in.size() >= 5) {
    const std::uint8_t what = in[0] % 3;
    const std::uint32_t word = decode_message(in.subspan(1, 4));
    in = in.subspan(5);
    if (what == 0) {  // the peer announces data
      const std::uint32_t length = data_of(word);
      if (ring.on_data(length)) announced += length;
    } else if (what == 1) {  // the application reads
      const std::uint64_t want = word % (ring_size + 1);
      std::uint64_t got = 0;
      for (const ReceiveRing::Piece& p : ring.pieces(want)) {
        FUZZ_CHECK(std::uint64_t{p.offset} + p.length <= ring_size);
        got += p.length;
      }
      FUZZ_CHECK(got == std::min<std::uint64_t>(want, ring.readable()));
      ring.consume(want);
      consumed += got;
    } else if (ring.credit_due()) {
      const ReceiveRing::CreditUpdate u = ring.take_credit_update();
      FUZZ_CHECK(u.credits <= kMessageDataMask);
      if (u.offer) {
        FUZZ_CHECK(*u.offer % ring.half() == 0 && *u.offer < ring_size);
        FUZZ_CHECK(u.sgl_index <
                   (conn && conn->target_sgl.length > 0 ? conn->target_sgl.length : 2));
        offered += ring.half();
      }
    }
    FUZZ_CHECK(announced <= offered);
    FUZZ_CHECK(offered - consumed <= ring_size);
    FUZZ_CHECK(ring.readable() == announced - consumed);
  }
  return 0;
}
