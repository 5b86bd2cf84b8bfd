#include "verbs/send_wr.h"

namespace uwarp::verbs {

const char* check_send_wr(const SendWr& wr, std::uint32_t max_sge, const DeviceLimits& limits,
                          bool reads_allowed, PostedShape& shape) {
  const bool local = is_local_operation(wr.opcode);
  if (local && wr.opcode != WrOpcode::kLocalInvalidate && wr.sg_list.size() != 1) {
    return "a bind or fast registration names its memory in one SGE";
  }
  shape.is_inline = (wr.flags & send_flags::kInline) != 0 && wr.opcode != WrOpcode::kRdmaRead && !local;
  if (!shape.is_inline && wr.sg_list.size() > max_sge) {
    return "work request has more SGEs than max_send_sge";
  }
  if (wr.opcode == WrOpcode::kRdmaRead && !reads_allowed) {
    return "the connection allows no RDMA Reads (ORD 0)";
  }
  shape.length = 0;
  for (const Sge& s : wr.sg_list) shape.length += s.length;
  if (shape.length > limits.max_msg_size && !local) return "message too long";
  if (shape.is_inline && shape.length > limits.max_inline_data) {
    return "inline data longer than the device maximum";
  }
  return nullptr;
}

proto::OutboundRequest::Kind request_kind(WrOpcode opcode, std::uint32_t length) {
  using Kind = proto::OutboundRequest::Kind;
  switch (opcode) {
    case WrOpcode::kRdmaWriteWithImm:
      // A zero-length Write would place nothing: the Immediate Data message alone says it all.
      return length == 0 ? Kind::kImmediate : Kind::kWriteImmediate;
    case WrOpcode::kSend: return Kind::kSend;
    case WrOpcode::kSendWithInvalidate: return Kind::kSendInvalidate;
    case WrOpcode::kRdmaWrite: return Kind::kWrite;
    case WrOpcode::kRdmaRead: return Kind::kRead;
    case WrOpcode::kBindWindow:
    case WrOpcode::kLocalInvalidate:
    case WrOpcode::kRegisterFastRegion: return Kind::kLocal;
  }
  return Kind::kSend;
}

WcOpcode completion_opcode(WrOpcode opcode) {
  switch (opcode) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithInvalidate: return WcOpcode::kSend;
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm: return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead: return WcOpcode::kRdmaRead;
    case WrOpcode::kBindWindow: return WcOpcode::kBindWindow;
    case WrOpcode::kLocalInvalidate: return WcOpcode::kLocalInvalidate;
    case WrOpcode::kRegisterFastRegion: return WcOpcode::kRegisterFastRegion;
  }
  return WcOpcode::kSend;
}

}  // namespace uwarp::verbs
