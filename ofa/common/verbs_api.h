// The one way uwarp's OFA libraries include rdma-core's <infiniband/verbs.h>: compiled against
// the installed header, every struct layout matches Debian's libibverbs by construction.
//
// The libraries are built with -fvisibility=hidden; the header's declarations are given default
// visibility here, so that exactly the ibv_* functions it declares (and that the library defines)
// are exported, and the GNU version script (ofa/ibverbs/libibverbs.map) assigns their version
// nodes. Everything else (the C++ core included) stays local.
#pragma once

// Included after <infiniband/verbs.h>, the ibv_* declarations would be hidden and not exported.
#ifdef INFINIBAND_VERBS_H
#error "include common/verbs_api.h before any rdma-core header"
#endif

#pragma GCC visibility push(default)
#include <infiniband/verbs.h>
#pragma GCC visibility pop

#include <cstring>
#include <type_traits>

// The header turns these names into macros over static inline helpers that pick the newest
// entry point; the library defines the real exported functions under these names.
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_query_port
#undef ibv_get_device_list

// The value of an enum that the application supplied, as an int. Applications may pass values
// outside the enumerators (rdma-core answers "unknown" or EINVAL); in C++ loading such a value
// as the enum type is undefined, so it is copied out as its int representation instead.
template <typename E>
inline int enum_value(const E& e) {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// The exported ibv_query_port fills this many bytes: the port attributes of rdma-core before
// port_cap_flags2 was added (struct _compat_ibv_port_attr). Old binaries pass a struct of this
// size, so nothing beyond it may be written.
inline constexpr unsigned kCompatPortAttrSize = 48;
static_assert(__builtin_offsetof(struct ibv_port_attr, port_cap_flags2) == kCompatPortAttrSize,
              "struct ibv_port_attr changed: revisit the compat ibv_query_port");

// Exported functions that no installed header declares (rdma-core keeps their prototypes in
// the uninstalled sysfs.h, marshall.h and driver.h), with rdma-core's signatures.
struct ibv_sa_path_rec;
struct ib_user_path_rec;
struct ib_uverbs_qp_attr;
struct ib_uverbs_ah_attr;
extern "C" {
#pragma GCC visibility push(default)
// IBVERBS_1.0
const char* ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr* dst, struct ib_uverbs_qp_attr* src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec* dst, struct ib_user_path_rec* src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec* dst, struct ibv_sa_path_rec* src);
// IBVERBS_1.1
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr* dst, struct ib_uverbs_ah_attr* src);
int ibv_dontfork_range(void* base, size_t size);
int ibv_dofork_range(void* base, size_t size);
// IBVERBS_PRIVATE_34 (the other private symbols are stubs, declared in stubs.cc).
// rdma-core's enum ibv_gid_type_sysfs: 0 = IB or RoCE v1, 1 = RoCE v2.
int ibv_query_gid_type(struct ibv_context* context, uint8_t port_num, unsigned int index,
                       int* type);
#pragma GCC visibility pop
}
