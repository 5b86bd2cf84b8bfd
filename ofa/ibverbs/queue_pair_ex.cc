// Extended QPs of libibverbs.so.1: the ibv_wr_* interface (ibv_wr_post(3)). A QP created through
// ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS is extended; ibv_qp_to_qp_ex gives its
// ibv_qp_ex, and null for any other QP.
//
// Contract: ibv_wr_start opens a batch; each ibv_wr_<operation> appends a request with the
// ibv_qp_ex's wr_id and wr_flags at that moment; ibv_wr_set_sge, _sge_list, _inline_data and
// _inline_data_list give the last request its data (inline data is copied when set, so the
// application may reuse its buffer at once). ibv_wr_complete posts the batch as one list through
// ibv_post_send's path and returns its errno (0 on success): a request that cannot be posted
// fails the batch, and those before it stay posted, as with ibv_post_send's bad_wr. A request
// uwarp does not carry (Send with Immediate, TSO, UD and XRC addressing, atomic write) makes
// ibv_wr_complete fail with EINVAL or EOPNOTSUPP. ibv_wr_abort drops the batch.
//
// Threads: the verbs API makes the application serialise a QP's batch as it serialises posts;
// the batch is the QP's (OfaQp::batch) and has no lock.
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/boundary.h"
#include "common/objects.h"
#include "ibverbs/ops.h"

namespace uwarp::ofa {

// The requests of one ibv_wr_start .. ibv_wr_complete. SGE lists and inline data are kept per
// request and linked to the requests only when the batch is posted (the vectors may move).
struct SendBatch {
  std::vector<ibv_send_wr> wrs;
  std::vector<std::vector<ibv_sge>> sges;
  std::vector<std::vector<std::uint8_t>> inline_data;
  int error = 0;  // the first refusal while building, reported by ibv_wr_complete

  void refuse(int e) {
    if (error == 0) error = e;
  }
  void clear() {
    wrs.clear();
    sges.clear();
    inline_data.clear();
    error = 0;
  }
};

OfaQp::OfaQp(QueuePair q) : ex{}, core(std::move(q)) {}
OfaQp::~OfaQp() = default;

namespace {

SendBatch& batch_of(ibv_qp_ex* qp) {
  return *OfaQp::from(qp)->batch;
}

// Appends a request of `opcode` with the QP's current wr_id and flags; null (the batch failed)
// when memory ran out.
ibv_send_wr* append(ibv_qp_ex* qp, ibv_wr_opcode opcode) {
  SendBatch& b = batch_of(qp);
  try {
    ibv_send_wr wr{};
    wr.wr_id = qp->wr_id;
    wr.send_flags = qp->wr_flags;
    wr.opcode = opcode;
    b.wrs.push_back(wr);
    b.sges.emplace_back();
    b.inline_data.emplace_back();
  } catch (const std::bad_alloc&) {
    b.refuse(ENOMEM);
    return nullptr;
  }
  return &b.wrs.back();
}

// The last request, for the functions that complete it; null (the batch failed) if there is none.
ibv_send_wr* last(ibv_qp_ex* qp) {
  SendBatch& b = batch_of(qp);
  if (b.wrs.empty()) {
    b.refuse(EINVAL);
    return nullptr;
  }
  return &b.wrs.back();
}

void refuse(ibv_qp_ex* qp, int error) {
  batch_of(qp).refuse(error);
}

ibv_send_wr* remote(ibv_qp_ex* qp, ibv_wr_opcode opcode, std::uint32_t rkey,
                    std::uint64_t remote_addr) {
  ibv_send_wr* wr = append(qp, opcode);
  if (wr != nullptr) {
    wr->wr.rdma.rkey = rkey;
    wr->wr.rdma.remote_addr = remote_addr;
  }
  return wr;
}

void wr_rdma_write(ibv_qp_ex* qp, std::uint32_t rkey, std::uint64_t remote_addr) {
  remote(qp, IBV_WR_RDMA_WRITE, rkey, remote_addr);
}

void wr_rdma_read(ibv_qp_ex* qp, std::uint32_t rkey, std::uint64_t remote_addr) {
  remote(qp, IBV_WR_RDMA_READ, rkey, remote_addr);
}

void wr_rdma_write_imm(ibv_qp_ex* qp, std::uint32_t rkey, std::uint64_t remote_addr,
                       __be32 imm_data) {
  if (ibv_send_wr* wr = remote(qp, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, remote_addr)) {
    wr->imm_data = imm_data;
  }
}

void atomic(ibv_qp_ex* qp, ibv_wr_opcode opcode, std::uint32_t rkey, std::uint64_t remote_addr,
            std::uint64_t compare_add, std::uint64_t swap) {
  if (ibv_send_wr* wr = append(qp, opcode)) {
    wr->wr.atomic.rkey = rkey;
    wr->wr.atomic.remote_addr = remote_addr;
    wr->wr.atomic.compare_add = compare_add;
    wr->wr.atomic.swap = swap;
  }
}

void wr_atomic_cmp_swp(ibv_qp_ex* qp, std::uint32_t rkey, std::uint64_t remote_addr,
                       std::uint64_t compare, std::uint64_t swap) {
  atomic(qp, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, remote_addr, compare, swap);
}

void wr_atomic_fetch_add(ibv_qp_ex* qp, std::uint32_t rkey, std::uint64_t remote_addr,
                         std::uint64_t add) {
  atomic(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, remote_addr, add, 0);
}

void wr_send(ibv_qp_ex* qp) {
  append(qp, IBV_WR_SEND);
}

void wr_send_inv(ibv_qp_ex* qp, std::uint32_t invalidate_rkey) {
  if (ibv_send_wr* wr = append(qp, IBV_WR_SEND_WITH_INV)) wr->invalidate_rkey = invalidate_rkey;
}

void wr_local_inv(ibv_qp_ex* qp, std::uint32_t invalidate_rkey) {
  if (ibv_send_wr* wr = append(qp, IBV_WR_LOCAL_INV)) wr->invalidate_rkey = invalidate_rkey;
}

void wr_bind_mw(ibv_qp_ex* qp, ibv_mw* mw, std::uint32_t rkey, const ibv_mw_bind_info* info) {
  if (info == nullptr) return refuse(qp, EINVAL);
  if (ibv_send_wr* wr = append(qp, IBV_WR_BIND_MW)) {
    wr->bind_mw.mw = mw;
    wr->bind_mw.rkey = rkey;
    wr->bind_mw.bind_info = *info;
  }
}

// RFC 7306 has no Send with Immediate (docs/immediate-data.md): refused as ibv_post_send
// refuses IBV_WR_SEND_WITH_IMM.
void wr_send_imm(ibv_qp_ex* qp, __be32 /*imm_data*/) {
  refuse(qp, EINVAL);
}
void wr_send_tso(ibv_qp_ex* qp, void* /*hdr*/, std::uint16_t /*hdr_sz*/, std::uint16_t /*mss*/) {
  refuse(qp, EOPNOTSUPP);
}
void wr_set_ud_addr(ibv_qp_ex* qp, ibv_ah* /*ah*/, std::uint32_t /*remote_qpn*/,
                    std::uint32_t /*remote_qkey*/) {
  refuse(qp, EINVAL);  // an RC QP has no datagram address
}
void wr_set_xrc_srqn(ibv_qp_ex* qp, std::uint32_t /*remote_srqn*/) {
  refuse(qp, EINVAL);
}
void wr_atomic_write(ibv_qp_ex* qp, std::uint32_t /*rkey*/, std::uint64_t /*remote_addr*/,
                     const void* /*atomic_wr*/) {
  refuse(qp, EOPNOTSUPP);
}

void wr_set_sge_list(ibv_qp_ex* qp, std::size_t num_sge, const ibv_sge* sg_list) {
  if (last(qp) == nullptr) return;
  if (num_sge != 0 && sg_list == nullptr) return refuse(qp, EINVAL);
  SendBatch& b = batch_of(qp);
  try {
    b.sges.back().assign(sg_list, sg_list + num_sge);
  } catch (const std::bad_alloc&) {
    refuse(qp, ENOMEM);
  }
}

void wr_set_sge(ibv_qp_ex* qp, std::uint32_t lkey, std::uint64_t addr, std::uint32_t length) {
  const ibv_sge sge{addr, length, lkey};
  wr_set_sge_list(qp, 1, &sge);
}

void wr_set_inline_data_list(ibv_qp_ex* qp, std::size_t num_buf, const ibv_data_buf* buf_list) {
  ibv_send_wr* wr = last(qp);
  if (wr == nullptr) return;
  if (num_buf != 0 && buf_list == nullptr) return refuse(qp, EINVAL);
  SendBatch& b = batch_of(qp);
  std::vector<std::uint8_t>& data = b.inline_data.back();
  try {
    data.clear();
    for (std::size_t i = 0; i < num_buf; ++i) {
      const auto* p = static_cast<const std::uint8_t*>(buf_list[i].addr);
      data.insert(data.end(), p, p + buf_list[i].length);
    }
    b.sges.back().assign(1, ibv_sge{reinterpret_cast<std::uintptr_t>(data.data()),
                                    static_cast<std::uint32_t>(data.size()), 0});
  } catch (const std::bad_alloc&) {
    return refuse(qp, ENOMEM);
  }
  wr->send_flags |= IBV_SEND_INLINE;
}

void wr_set_inline_data(ibv_qp_ex* qp, void* addr, std::size_t length) {
  const ibv_data_buf buf{addr, length};
  wr_set_inline_data_list(qp, 1, &buf);
}

void wr_start(ibv_qp_ex* qp) {
  batch_of(qp).clear();
}

void wr_abort(ibv_qp_ex* qp) {
  batch_of(qp).clear();
}

int wr_complete(ibv_qp_ex* qp) {
  SendBatch& b = batch_of(qp);
  int err = b.error;
  if (err == 0 && !b.wrs.empty()) {
    for (std::size_t i = 0; i < b.wrs.size(); ++i) {
      ibv_send_wr& wr = b.wrs[i];
      wr.sg_list = b.sges[i].data();
      wr.num_sge = static_cast<int>(b.sges[i].size());
      wr.next = i + 1 < b.wrs.size() ? &b.wrs[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    err = post_send(&qp->qp_base, b.wrs.data(), &bad);
  }
  b.clear();
  return err;
}

}  // namespace

void make_extended(OfaQp& qp) {
  qp.batch = std::make_unique<SendBatch>();
  ibv_qp_ex& ex = qp.ex;
  ex.comp_mask = 0;
  ex.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  ex.wr_atomic_fetch_add = wr_atomic_fetch_add;
  ex.wr_bind_mw = wr_bind_mw;
  ex.wr_local_inv = wr_local_inv;
  ex.wr_rdma_read = wr_rdma_read;
  ex.wr_rdma_write = wr_rdma_write;
  ex.wr_rdma_write_imm = wr_rdma_write_imm;
  ex.wr_send = wr_send;
  ex.wr_send_imm = wr_send_imm;
  ex.wr_send_inv = wr_send_inv;
  ex.wr_send_tso = wr_send_tso;
  ex.wr_set_ud_addr = wr_set_ud_addr;
  ex.wr_set_xrc_srqn = wr_set_xrc_srqn;
  ex.wr_set_inline_data = wr_set_inline_data;
  ex.wr_set_inline_data_list = wr_set_inline_data_list;
  ex.wr_set_sge = wr_set_sge;
  ex.wr_set_sge_list = wr_set_sge_list;
  ex.wr_start = wr_start;
  ex.wr_complete = wr_complete;
  ex.wr_abort = wr_abort;
  ex.wr_atomic_write = wr_atomic_write;
}

}  // namespace uwarp::ofa

extern "C" {

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  if (qp == nullptr) return nullptr;
  uwarp::ofa::OfaQp* q = uwarp::ofa::OfaQp::from(qp);
  return q->batch != nullptr ? &q->ex : nullptr;
}

}  // extern "C"
