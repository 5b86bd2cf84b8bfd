#include "verbs/send_wr.h"

namespace uwarp::verbs {

const char* check_send_wr(const SendWr& wr, std::uint32_t max_sge, const DeviceLimits& limits,
                          bool reads_allowed, PostedShape& shape) {
  const bool local = is_local_operation(wr.opcode);
  if (local && wr.opcode != WrOpcode::kLocalInvalidate && wr.sg_list.size() != 1) {
    return "a bind or fast registration names its memory in one SGE";
  }
  shape.is_inline = (wr.flags & send_flags::kInline) != 0 && !writes_local_memory(wr.opcode) && !local;
  if (!shape.is_inline && wr.sg_list.size() > max_sge) {
    return "work request has more SGEs than max_send_sge";
  }
  if (writes_local_memory(wr.opcode) && !reads_allowed) {
    return "the connection allows no RDMA Reads or atomics (ORD 0)";
  }
  if (is_atomic(wr.opcode)) {
    if (wr.sg_list.size() != 1 || wr.sg_list[0].length != sizeof(std::uint64_t)) {
      return "an atomic operation takes one SGE of 8 bytes for its result";
    }
    if (wr.remote_addr % sizeof(std::uint64_t) != 0) {
      return "an atomic operation's remote address must be 8-byte aligned";
    }
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
    case WrOpcode::kAtomicFetchAdd:
    case WrOpcode::kAtomicCompareSwap:
    case WrOpcode::kAtomicSwap: return Kind::kAtomic;
  }
  return Kind::kSend;
}

wire::AtomicRequest atomic_operands(WrOpcode opcode, std::uint64_t compare_add,
                                    std::uint64_t swap) {
  constexpr std::uint64_t kWholeWord = ~std::uint64_t{0};
  wire::AtomicRequest a;
  switch (opcode) {
    case WrOpcode::kAtomicFetchAdd:
      a.opcode = static_cast<std::uint8_t>(wire::AtomicOpcode::kFetchAdd);
      a.add_swap_data = compare_add;  // Add Mask 0: one 64-bit addition
      break;
    case WrOpcode::kAtomicCompareSwap:
      a.opcode = static_cast<std::uint8_t>(wire::AtomicOpcode::kCompareSwap);
      a.add_swap_data = swap;
      a.add_swap_mask = kWholeWord;
      a.compare_data = compare_add;
      a.compare_mask = kWholeWord;
      break;
    default:  // kAtomicSwap
      a.opcode = static_cast<std::uint8_t>(wire::AtomicOpcode::kSwap);
      a.add_swap_data = swap;
      a.add_swap_mask = kWholeWord;
      break;
  }
  return a;
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
    case WrOpcode::kAtomicFetchAdd: return WcOpcode::kAtomicFetchAdd;
    case WrOpcode::kAtomicCompareSwap: return WcOpcode::kAtomicCompareSwap;
    case WrOpcode::kAtomicSwap: return WcOpcode::kAtomicSwap;
  }
  return WcOpcode::kSend;
}

}  // namespace uwarp::verbs
