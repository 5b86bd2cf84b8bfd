#include "cm/setup_terminate.h"

#include <sys/uio.h>

#include <array>

#include "proto/tx_batch.h"
#include "wire/rdmap.h"

namespace uwarp::cm {

std::vector<std::uint8_t> setup_terminate(const wire::TerminateCode& code) {
  wire::TerminateMessage m;
  m.code = code;
  std::array<std::uint8_t, wire::kTerminateMaxSize> body{};
  const ConstByteSpan gather[] = {ConstByteSpan(body.data(), wire::encode_terminate(m, body))};
  // Segmented and framed as the RDMAP engine sends its Terminates (proto::MessageSegmenter,
  // proto::TxBatch), as the first message of the Terminate queue.
  proto::MessageSegmenter::Message message;
  message.header = wire::untagged_header(wire::RdmapOpcode::kTerminate, wire::kQueueTerminate,
                                         wire::kInitialMsn);
  message.gather = gather;
  message.length = gather[0].size();
  proto::MessageSegmenter segmenter;
  segmenter.start(message);
  proto::TxBatch batch;
  segmenter.fill(batch, message.header.size() + message.length, proto::Framing{});
  std::vector<std::uint8_t> out;
  for (const iovec& piece : batch.pending()) {
    const auto* p = static_cast<const std::uint8_t*>(piece.iov_base);
    out.insert(out.end(), p, p + piece.iov_len);
  }
  return out;
}

}  // namespace uwarp::cm
