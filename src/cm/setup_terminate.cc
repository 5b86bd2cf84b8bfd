#include "cm/setup_terminate.h"

#include <array>

#include "wire/fpdu.h"

namespace uwarp::cm {

std::vector<std::uint8_t> setup_terminate(const wire::TerminateCode& code) {
  std::array<std::uint8_t, wire::kUntaggedHeaderSize + wire::kTerminateControlSize> ulpdu{};
  wire::DdpHeader h;
  h.tagged = false;
  h.last = true;
  h.opcode = static_cast<std::uint8_t>(wire::RdmapOpcode::kTerminate);
  h.queue = wire::kQueueTerminate;
  h.msn = 1;
  wire::encode_ddp_header(h, ulpdu);
  wire::TerminateMessage m;
  m.code = code;
  wire::encode_terminate(m, ByteSpan(ulpdu).subspan(wire::kUntaggedHeaderSize));
  std::vector<std::uint8_t> out(wire::fpdu_size(ulpdu.size()));
  wire::encode_fpdu(ulpdu, false, out);
  return out;
}

}  // namespace uwarp::cm
