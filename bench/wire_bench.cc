// Microbenchmarks of the wire layer's per-FPDU work: CRC32c at typical FPDU and buffer sizes,
// DDP header encode/decode, and MPA FPDU encode (copy, pad, CRC).
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <vector>

#include "wire/crc32c.h"
#include "wire/ddp.h"
#include "wire/fpdu.h"

namespace uwarp::wire {
namespace {

std::vector<std::uint8_t> pattern(std::size_t size) {
  std::vector<std::uint8_t> v(size);
  for (std::size_t i = 0; i < size; ++i) v[i] = static_cast<std::uint8_t>(i * 131 + 7);
  return v;
}

// One pass over a buffer: 64 B (a small Send), 1448 B (one FPDU at MSS 1448), 4 KiB and 64 KiB.
void BM_Crc32c(benchmark::State& state) {
  const auto data = pattern(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc32c(data));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Crc32c)->Arg(18)->Arg(64)->Arg(1448)->Arg(4096)->Arg(65536);

DdpHeader tagged_header() {
  DdpHeader h;
  h.tagged = true;
  h.last = true;
  h.stag = 0x8bcc1500;
  h.tagged_offset = 0x0000563c6afc8550;
  return h;
}
DdpHeader untagged_header() {
  DdpHeader h;
  h.last = true;
  h.opcode = 3;  // Send
  h.queue = kQueueSend;
  h.msn = 1;
  return h;
}

void BM_DdpEncode(benchmark::State& state, DdpHeader h) {
  std::array<std::uint8_t, kMaxDdpHeaderSize> out{};
  for (auto _ : state) {
    benchmark::DoNotOptimize(h);
    benchmark::DoNotOptimize(encode_ddp_header(h, out));
    benchmark::ClobberMemory();
    ++h.tagged_offset;  // a new segment each time, as a sender produces them
    ++h.message_offset;
  }
}
BENCHMARK_CAPTURE(BM_DdpEncode, tagged, tagged_header());
BENCHMARK_CAPTURE(BM_DdpEncode, untagged, untagged_header());

void BM_DdpDecode(benchmark::State& state, DdpHeader h) {
  std::array<std::uint8_t, kMaxDdpHeaderSize> in{};
  if (encode_ddp_header(h, in) == 0) state.SkipWithError("encode failed");
  for (auto _ : state) {
    benchmark::DoNotOptimize(in.data());
    auto decoded = decode_ddp_header(in);
    benchmark::DoNotOptimize(decoded);
  }
}
BENCHMARK_CAPTURE(BM_DdpDecode, tagged, tagged_header());
BENCHMARK_CAPTURE(BM_DdpDecode, untagged, untagged_header());

// One whole FPDU around a ULPDU of the given size, with or without CRC: 64 B, and 1442 B (the
// largest ULPDU in a 1448-byte segment).
void BM_FpduEncode(benchmark::State& state) {
  const auto ulpdu = pattern(static_cast<std::size_t>(state.range(0)));
  const bool with_crc = state.range(1) != 0;
  std::vector<std::uint8_t> out(fpdu_size(ulpdu.size()));
  for (auto _ : state) {
    benchmark::DoNotOptimize(encode_fpdu(ulpdu, with_crc, out));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_FpduEncode)->ArgNames({"ulpdu", "crc"})->ArgsProduct({{64, 1442}, {0, 1}});

}  // namespace
}  // namespace uwarp::wire

BENCHMARK_MAIN();
