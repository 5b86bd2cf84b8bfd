// Extended completion queues of libibverbs.so.1 (ibv_create_cq_ex(3)): the same CQ as
// ibv_create_cq's, polled one completion at a time through ibv_start_poll, ibv_next_poll and
// ibv_end_poll, its fields read through the ibv_wc_read_* functions.
//
// Contract: ibv_start_poll and ibv_next_poll take the next completion into the CQ's `current`
// (0), or return ENOENT when there is none; ibv_end_poll is called only after a start_poll that
// returned 0 (the verbs API's rule) and has nothing to release. ibv_poll_cq works on the same CQ
// (ibv_cq_ex_to_cq). The fields a CQ offers are those of ibv_wc (IBV_WC_STANDARD_FLAGS); a CQ
// asked for timestamps, VLANs, flow tags or tag matching is refused with EOPNOTSUPP, as a
// provider without them does.
#include <cerrno>

#include "common/boundary.h"
#include "common/objects.h"
#include "ibverbs/ops.h"

namespace uwarp::ofa {
namespace {

const ibv_wc& current(ibv_cq_ex* cq) {
  return OfaCq::from(cq)->current;
}

int next_poll(ibv_cq_ex* cq) {
  OfaCq* q = OfaCq::from(cq);
  if (poll_cq(&q->ibv, 1, &q->current) != 1) return ENOENT;
  cq->wr_id = q->current.wr_id;
  cq->status = q->current.status;
  return 0;
}

int start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
  if (attr != nullptr && attr->comp_mask != 0) return EINVAL;
  return next_poll(cq);
}

void end_poll(ibv_cq_ex* /*cq*/) {}

ibv_wc_opcode read_opcode(ibv_cq_ex* cq) {
  return current(cq).opcode;
}
std::uint32_t read_vendor_err(ibv_cq_ex* cq) {
  return current(cq).vendor_err;
}
std::uint32_t read_byte_len(ibv_cq_ex* cq) {
  return current(cq).byte_len;
}
// Also ibv_wc_read_invalidated_rkey's: ibv_wc keeps both in one union.
__be32 read_imm_data(ibv_cq_ex* cq) {
  return current(cq).imm_data;
}
std::uint32_t read_qp_num(ibv_cq_ex* cq) {
  return current(cq).qp_num;
}
std::uint32_t read_src_qp(ibv_cq_ex* cq) {
  return current(cq).src_qp;
}
unsigned int read_wc_flags(ibv_cq_ex* cq) {
  return current(cq).wc_flags;
}
std::uint32_t read_slid(ibv_cq_ex* cq) {
  return current(cq).slid;
}
std::uint8_t read_sl(ibv_cq_ex* cq) {
  return current(cq).sl;
}
std::uint8_t read_dlid_path_bits(ibv_cq_ex* cq) {
  return current(cq).dlid_path_bits;
}

constexpr std::uint32_t kCreateFlags =
    IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;

}  // namespace

ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  return c_boundary<ibv_cq_ex*>(nullptr, [&]() -> ibv_cq_ex* {
    if (attr == nullptr) {
      errno = EINVAL;
      return nullptr;
    }
    // A parent domain, and fields beyond ibv_wc's, are not offered.
    if ((attr->comp_mask & ~static_cast<std::uint32_t>(IBV_CQ_INIT_ATTR_MASK_FLAGS)) != 0 ||
        (attr->wc_flags & ~static_cast<std::uint64_t>(IBV_WC_STANDARD_FLAGS)) != 0 ||
        ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) != 0 &&
         (attr->flags & ~kCreateFlags) != 0)) {
      errno = EOPNOTSUPP;
      return nullptr;
    }
    if (attr->cqe > static_cast<std::uint32_t>(INT32_MAX)) {
      errno = EINVAL;
      return nullptr;
    }
    OfaCq* q = new_cq(context, static_cast<int>(attr->cqe), attr->cq_context, attr->channel,
                      static_cast<int>(attr->comp_vector));
    if (q == nullptr) return nullptr;
    ibv_cq_ex& ex = q->ex;
    ex.comp_mask = 0;
    ex.start_poll = start_poll;
    ex.next_poll = next_poll;
    ex.end_poll = end_poll;
    ex.read_opcode = read_opcode;
    ex.read_vendor_err = read_vendor_err;
    ex.read_byte_len = read_byte_len;
    ex.read_imm_data = read_imm_data;
    ex.read_qp_num = read_qp_num;
    ex.read_src_qp = read_src_qp;
    ex.read_wc_flags = read_wc_flags;
    ex.read_slid = read_slid;
    ex.read_sl = read_sl;
    ex.read_dlid_path_bits = read_dlid_path_bits;
    return &ex;
  });
}

}  // namespace uwarp::ofa
