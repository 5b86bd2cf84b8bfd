// libFuzzer target: the RDMA Read Request body (decode_read_request); all 28 bytes are fields, so
// a decoded Read Request must re-encode to the same bytes.
#include <array>
#include <cstddef>
#include <cstdint>

#include "fuzz_check.h"
#include "wire/rdmap.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace uwarp::wire;
  const uwarp::ConstByteSpan in(data, size);
  const auto decoded = decode_read_request(in);
  if (!decoded.has_value()) {
    FUZZ_CHECK(decoded.error() == DdpHeaderError::kTruncated && in.size() < kReadRequestSize);
    return 0;
  }
  FUZZ_CHECK(in.size() >= kReadRequestSize);
  std::array<std::uint8_t, kReadRequestSize> out{};
  FUZZ_CHECK(encode_read_request(*decoded, out) == kReadRequestSize);
  FUZZ_CHECK(uwarp::fuzz::same_bytes(out, in.first(kReadRequestSize)));
  return 0;
}
