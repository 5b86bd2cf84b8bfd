#include "protocol.h"

#include <algorithm>
#include <chrono>

namespace uwarp::perf {
namespace {

void put32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}
std::uint32_t get32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         p[3];
}
void put64(std::uint8_t* p, std::uint64_t v) {
  put32(p, static_cast<std::uint32_t>(v >> 32));
  put32(p + 4, static_cast<std::uint32_t>(v));
}
std::uint64_t get64(const std::uint8_t* p) {
  return (std::uint64_t{get32(p)} << 32) | get32(p + 4);
}

std::uint8_t pattern_byte(std::size_t i, std::uint32_t seed) {
  const std::uint32_t x = static_cast<std::uint32_t>(i) * 2654435761u + seed;
  return static_cast<std::uint8_t>(x ^ (x >> 13) ^ (i >> 8));
}

}  // namespace

void encode(const CtrlMsg& m, std::uint8_t out[kCtrlMsgSize]) {
  std::memset(out, 0, kCtrlMsgSize);
  out[0] = static_cast<std::uint8_t>(m.type);
  out[1] = m.op;
  out[2] = m.verify;
  out[3] = m.block;
  put32(out + 4, m.size);
  put32(out + 8, m.iters);
  put32(out + 12, m.seed);
  put32(out + 16, m.value);
  put32(out + 20, m.qp);
}

CtrlMsg decode_ctrl(const std::uint8_t in[kCtrlMsgSize]) {
  CtrlMsg m;
  m.type = static_cast<MsgType>(in[0]);
  m.op = in[1];
  m.verify = in[2];
  m.block = in[3];
  m.size = get32(in + 4);
  m.iters = get32(in + 8);
  m.seed = get32(in + 12);
  m.value = get32(in + 16);
  m.qp = get32(in + 20);
  return m;
}

std::vector<std::uint8_t> encode(const Hello& h) {
  std::vector<std::uint8_t> out(40);
  put32(out.data(), h.magic);
  put32(out.data() + 4, h.index);
  put32(out.data() + 8, h.qps);
  put32(out.data() + 12, h.rkey);
  put64(out.data() + 16, h.addr);
  put64(out.data() + 24, h.length);
  put32(out.data() + 32, h.session);
  put32(out.data() + 36, h.flags);
  return out;
}

std::optional<Hello> decode_hello(std::span<const std::uint8_t> pd) {
  if (pd.size() < 40 || get32(pd.data()) != kMagic) return std::nullopt;
  Hello h;
  h.index = get32(pd.data() + 4);
  h.qps = get32(pd.data() + 8);
  h.rkey = get32(pd.data() + 12);
  h.addr = get64(pd.data() + 16);
  h.length = get64(pd.data() + 24);
  h.session = get32(pd.data() + 32);
  h.flags = get32(pd.data() + 36);
  return h;
}

void fill_pattern(std::uint8_t* p, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = 0; i < n; ++i) p[i] = pattern_byte(i, seed);
}

bool check_pattern(const std::uint8_t* p, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != pattern_byte(i, seed)) return false;
  }
  return true;
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto last = static_cast<double>(v.size() - 1);
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * last + 0.5))];
}

}  // namespace uwarp::perf
