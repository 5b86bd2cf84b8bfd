// libFuzzer target: the MPA negotiation state machines (proto::MpaResponder reading a request,
// then accepting or rejecting; proto::MpaInitiator reading a reply), fed in fuzzed pieces. The
// verdict must not depend on how the bytes were split, `consumed` must stay within the input,
// and negotiated IRD/ORD fit their 14 bits.
#include <fuzzer/FuzzedDataProvider.h>

#include <vector>

#include "fuzz_check.h"
#include "proto/mpa_negotiator.h"

namespace uwarp {
namespace {

template <typename Feed>
proto::MpaProgress feed_in_pieces(FuzzedDataProvider& in, const std::vector<std::uint8_t>& bytes, Feed feed) {
  proto::MpaProgress p;
  std::size_t have = 0;
  while (have < bytes.size()) {
    have = std::min(bytes.size(), have + in.ConsumeIntegralInRange<std::size_t>(1, 64));
    p = feed(ConstByteSpan(bytes.data(), have));
    FUZZ_CHECK(p.consumed <= have);
    if (p.step != proto::MpaStep::kNeedMore) break;
  }
  return p;
}

void run_one(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  proto::MpaParams local;
  local.revision = in.ConsumeBool() ? 2 : 1;
  local.crc = in.ConsumeBool();
  local.peer_to_peer = local.revision == 2 && in.ConsumeBool();
  local.offer_write_rtr = in.ConsumeBool();
  local.offer_read_rtr = in.ConsumeBool();
  local.offer_send_rtr = in.ConsumeBool();
  local.ird = in.ConsumeIntegral<std::uint16_t>();
  local.ord = in.ConsumeIntegral<std::uint16_t>();
  const bool as_responder = in.ConsumeBool();
  const std::vector<std::uint8_t> bytes = in.ConsumeBytes<std::uint8_t>(in.ConsumeIntegralInRange<std::size_t>(0, 1200));

  if (as_responder) {
    proto::MpaResponder r;
    const auto split = feed_in_pieces(in, bytes, [&](ConstByteSpan b) { return r.on_request_bytes(b); });
    proto::MpaResponder whole;
    const auto once = whole.on_request_bytes(bytes);
    FUZZ_CHECK(once.step == split.step || split.step == proto::MpaStep::kNeedMore);
    if (split.step == proto::MpaStep::kDone) {
      FUZZ_CHECK(split.consumed == once.consumed);
      const auto reply = in.ConsumeBool() ? r.accept(local) : r.reject(r.request().private_data);
      FUZZ_CHECK(reply.size() >= wire::kMpaFrameHeaderSize || r.request().private_data.size() > proto::kMaxPrivateData);
      FUZZ_CHECK(r.outcome().ird <= wire::kMpaIrdOrdMask && r.outcome().ord <= wire::kMpaIrdOrdMask);
    }
    return;
  }
  proto::MpaInitiator i(local);
  const auto request = i.request();
  FUZZ_CHECK(request.size() >= wire::kMpaFrameHeaderSize);
  const auto split = feed_in_pieces(in, bytes, [&](ConstByteSpan b) { return i.on_reply_bytes(b); });
  proto::MpaInitiator whole(local);
  const auto once = whole.on_reply_bytes(bytes);
  FUZZ_CHECK(once.step == split.step || split.step == proto::MpaStep::kNeedMore);
  if (split.step == proto::MpaStep::kDone) {
    FUZZ_CHECK(split.consumed == once.consumed);
    FUZZ_CHECK(i.outcome().ird <= wire::kMpaIrdOrdMask && i.outcome().ord <= wire::kMpaIrdOrdMask);
    FUZZ_CHECK(!local.peer_to_peer || i.outcome().revision == 1 || i.outcome().rtr != proto::RtrType::kNone);
  }
}

}  // namespace
}  // namespace uwarp

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  uwarp::run_one(data, size);
  return 0;
}
