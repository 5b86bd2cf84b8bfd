// libFuzzer target: the Terminate message body (decode_terminate) with its optional segment
// length, copied DDP header and copied Read Request; re-encoding gives the same bytes except the
// 13 reserved bits of the control word, which uwarp sends as zero.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "wire/rdmap.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace uwarp::wire;
  using uwarp::ConstByteSpan;
  const ConstByteSpan in(data, size);
  const auto decoded = decode_terminate(in);
  if (!decoded.has_value()) {
    FUZZ_CHECK(decoded.error() == TerminateError::kTruncated);
    return 0;
  }
  const TerminateMessage& m = *decoded;
  const std::uint32_t ctrl = m.raw_control;
  FUZZ_CHECK(ctrl == uwarp::load_be32(in.data()));
  FUZZ_CHECK(static_cast<std::uint32_t>(m.code.layer) == ctrl >> 28);
  FUZZ_CHECK(m.code.etype == ((ctrl >> 24) & 0x0F) && m.code.ecode == ((ctrl >> 16) & 0xFF));
  FUZZ_CHECK(m.has_segment_length == ((ctrl & kTermFlagM) != 0));
  FUZZ_CHECK(m.ddp_header.empty() == ((ctrl & kTermFlagD) == 0));
  FUZZ_CHECK(m.rdmap_header.empty() == ((ctrl & kTermFlagR) == 0));
  if (!m.ddp_header.empty()) FUZZ_CHECK(m.ddp_header.size() == ddp_header_size(m.ddp_header[0]));
  if (!m.rdmap_header.empty()) FUZZ_CHECK(m.rdmap_header.size() == kReadRequestSize);
  FUZZ_CHECK(uwarp::fuzz::within(m.ddp_header, in) && uwarp::fuzz::within(m.rdmap_header, in));
  const std::size_t consumed = kTerminateControlSize + (m.has_segment_length ? 2 : 0) +
                               m.ddp_header.size() + m.rdmap_header.size();
  FUZZ_CHECK(consumed <= in.size() && consumed <= kTerminateMaxSize);
  FUZZ_CHECK(!describe(m.code).empty());

  std::array<std::uint8_t, kTerminateMaxSize> out{};
  FUZZ_CHECK(encode_terminate(m, out) == consumed);
  FUZZ_CHECK(uwarp::load_be32(out.data()) == (ctrl & ~std::uint32_t{0x1FFF}));
  FUZZ_CHECK(uwarp::fuzz::same_bytes(ConstByteSpan(out).subspan(4, consumed - 4),
                                     in.subspan(4, consumed - 4)));

  const auto partial = decode_terminate(in.first(consumed - 1));
  FUZZ_CHECK(!partial.has_value() && partial.error() == TerminateError::kTruncated);
  return 0;
}
