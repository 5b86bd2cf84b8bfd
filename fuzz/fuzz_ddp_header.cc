// libFuzzer target: DDP tagged/untagged headers with the RDMAP control byte (decode_ddp_header);
// every bit of a header is a field, so a decoded header must re-encode to the same bytes.
#include <array>
#include <cstddef>
#include <cstdint>

#include "fuzz_check.h"
#include "wire/ddp.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace uwarp::wire;
  const uwarp::ConstByteSpan in(data, size);
  const auto decoded = decode_ddp_header(in);
  if (!decoded.has_value()) {
    FUZZ_CHECK(decoded.error() == DdpHeaderError::kTruncated);
    FUZZ_CHECK(in.size() < kDdpControlSize || in.size() < ddp_header_size(in[0]));
    return 0;
  }
  const DdpHeader& h = *decoded;
  FUZZ_CHECK(h.size() == ddp_header_size(in[0]) && h.size() <= in.size());
  FUZZ_CHECK(h.tagged == ((in[0] & kDdpFlagTagged) != 0));
  FUZZ_CHECK(h.ddp_reserved <= 0xF && h.ddp_version <= 3 && h.rdmap_version <= 3 &&
             h.rdmap_reserved <= 3 && h.opcode <= 0xF);

  std::array<std::uint8_t, kMaxDdpHeaderSize> out{};
  const std::size_t n = encode_ddp_header(h, out);
  FUZZ_CHECK(n == h.size());
  FUZZ_CHECK(uwarp::fuzz::same_bytes(uwarp::ConstByteSpan(out).first(n), in.first(n)));

  const auto partial = decode_ddp_header(in.first(n - 1));
  FUZZ_CHECK(!partial.has_value() && partial.error() == DdpHeaderError::kTruncated);
  return 0;
}
