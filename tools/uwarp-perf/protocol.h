// uwarp-perf's own control protocol: small Send messages on a control QP, and the private data
// of its connections. Byte order: big-endian, field by field.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

namespace uwarp::perf {

inline constexpr std::uint32_t kMagic = 0x55575046;  // "UWPF"
inline constexpr std::size_t kCtrlMsgSize = 32;

enum class MsgType : std::uint8_t {
  kBegin = 1,     // client: a bandwidth run starts (op, size, iters, seed, verify)
  kReady = 2,     // server: prepared; value = receive credits per QP (send runs)
  kEnd = 3,       // client: all messages posted and completed
  kResult = 4,    // server: value = 1 if everything arrived and verified
  kCredit = 5,    // server: value more receives posted on data QP `qp`
  kLatBegin = 6,  // client: a latency run starts
  kBye = 7,
};

struct CtrlMsg {
  MsgType type = MsgType::kBye;
  std::uint8_t op = 0;
  std::uint8_t verify = 0;
  std::uint8_t block = 0;  // kBegin: the server too waits by blocking (--wait block)
  std::uint32_t size = 0;
  std::uint32_t iters = 0;
  std::uint32_t seed = 0;
  std::uint32_t value = 0;
  std::uint32_t qp = 0;
};

void encode(const CtrlMsg& m, std::uint8_t out[kCtrlMsgSize]);
CtrlMsg decode_ctrl(const std::uint8_t in[kCtrlMsgSize]);

// Connection private data: which QP this is and where its buffer lives.
struct Hello {
  std::uint32_t magic = kMagic;
  std::uint32_t index = 0;  // 0xFFFFFFFF: the control connection
  std::uint32_t qps = 0;
  std::uint32_t session = 0;  // the server's id for one client's connections
  std::uint32_t rkey = 0;
  std::uint64_t addr = 0;
  std::uint64_t length = 0;
  std::uint32_t flags = 0;  // control connection: kHelloSharedBuffer
};
// Every data QP of the session uses one buffer (registered once) instead of a buffer each, so
// that many QPs touch no more memory than one: what is measured is then uwarp's cost per QP,
// not the caches' (--shared-buffer; data cannot be verified).
inline constexpr std::uint32_t kHelloSharedBuffer = 1;
inline constexpr std::uint32_t kControlIndex = 0xFFFFFFFFu;
std::vector<std::uint8_t> encode(const Hello& h);
std::optional<Hello> decode_hello(std::span<const std::uint8_t> pd);

// The data pattern of a run: deterministic from (seed, offset), cheap to check.
void fill_pattern(std::uint8_t* p, std::size_t n, std::uint32_t seed);
bool check_pattern(const std::uint8_t* p, std::size_t n, std::uint32_t seed);

// The p-quantile (0..1) of `v` (sorted in place); 0 for an empty vector.
double percentile(std::vector<double>& v, double p);
// The arithmetic mean (0 for none): what programs that divide a total time by their iterations
// (fi_pingpong) report.
double mean(const std::vector<double>& v);

}  // namespace uwarp::perf
