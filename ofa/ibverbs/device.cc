// The device side of libibverbs.so.1: the one uwarp device (identity, ibv_get_device_list),
// opening a context (a uwarp::Context and its progress thread behind a full verbs_context),
// and the queries of device, port, GID and P_Key, plus the sysfs files that tools read.
//
// What the device reports (ibv_devinfo -v): node type RNIC, transport iWARP, one port, ACTIVE,
// link layer Ethernet, one GID and one P_Key (0xffff), limits from uwarp::DeviceLimits,
// max_msg_sz 2^31, IRD/ORD 128, atomics IBV_ATOMIC_GLOB (docs/atomics.md).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/boundary.h"
#include "common/errno_map.h"
#include "common/objects.h"
#include "ibverbs/ops.h"

namespace uwarp::ofa {
namespace {

constexpr char kDeviceName[] = "uwarp0";
constexpr char kUverbsName[] = "uwarp_uverbs0";
constexpr char kIbdevPath[] = "/sys/class/infiniband/uwarp0";
constexpr char kUverbsPath[] = "/sys/class/infiniband_verbs/uwarp_uverbs0";
constexpr std::uint16_t kDefaultPkey = 0xffff;
constexpr std::uint8_t kWidth4x = 2;          // active_width: 4X
constexpr std::uint8_t kSpeed25Gbps = 32;     // active_speed: 25 Gb/s per lane (EDR)
constexpr std::uint8_t kPhysStateLinkUp = 5;  // phys_state: LinkUp

ibv_mtu mtu_enum(int mtu) {
  if (mtu >= 4096) return IBV_MTU_4096;
  if (mtu >= 2048) return IBV_MTU_2048;
  if (mtu >= 1024) return IBV_MTU_1024;
  if (mtu >= 512) return IBV_MTU_512;
  return IBV_MTU_256;
}

int interface_mtu(const char* name) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 1500;
  ifreq req{};
  std::snprintf(req.ifr_name, sizeof req.ifr_name, "%s", name);
  const int rc = ::ioctl(fd, SIOCGIFMTU, &req);
  ::close(fd);
  return rc == 0 ? req.ifr_mtu : 1500;
}

// The first Ethernet interface (lowest ifindex, preferring interfaces that are up) with a MAC.
// Without one, a locally administered MAC derived from the host name.
void pick_interface(DeviceInfo& d, std::array<std::uint8_t, 6>& mac) {
  ifaddrs* list = nullptr;
  bool found = false;
  bool found_up = false;
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_PACKET) continue;
      if ((i->ifa_flags & IFF_LOOPBACK) != 0) continue;
      const auto* ll = reinterpret_cast<const sockaddr_ll*>(i->ifa_addr);
      if (ll->sll_halen != 6) continue;
      const bool zero_mac =
          std::all_of(ll->sll_addr, ll->sll_addr + 6, [](unsigned char b) { return b == 0; });
      if (zero_mac) continue;
      const bool up = (i->ifa_flags & IFF_UP) != 0;
      const auto index = static_cast<unsigned>(ll->sll_ifindex);
      const bool better = !found || (up && !found_up) || (up == found_up && index < d.ifindex);
      if (!better) continue;
      found = true;
      found_up = up;
      d.ifindex = index;
      std::snprintf(d.netdev, sizeof d.netdev, "%s", i->ifa_name);
      std::copy(ll->sll_addr, ll->sll_addr + 6, mac.begin());
    }
    ::freeifaddrs(list);
  }
  if (found) {
    d.active_mtu = mtu_enum(interface_mtu(d.netdev));
    return;
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (const char* p = host; *p != '\0'; ++p) h = (h ^ static_cast<std::uint8_t>(*p)) * 16777619u;
  mac = {0x02,
         0x75,
         static_cast<std::uint8_t>(h >> 24),
         static_cast<std::uint8_t>(h >> 16),
         static_cast<std::uint8_t>(h >> 8),
         static_cast<std::uint8_t>(h)};
  d.active_mtu = IBV_MTU_1024;
}

DeviceInfo make_device_info() {
  DeviceInfo d{};
  d.ibv.node_type = IBV_NODE_RNIC;
  d.ibv.transport_type = IBV_TRANSPORT_IWARP;
  std::snprintf(d.ibv.name, sizeof d.ibv.name, "%s", kDeviceName);
  std::snprintf(d.ibv.dev_name, sizeof d.ibv.dev_name, "%s", kUverbsName);
  std::snprintf(d.ibv.dev_path, sizeof d.ibv.dev_path, "%s", kUverbsPath);
  std::snprintf(d.ibv.ibdev_path, sizeof d.ibv.ibdev_path, "%s", kIbdevPath);
  std::array<std::uint8_t, 6> mac{};
  pick_interface(d, mac);
  // Modified EUI-64 of the MAC (RFC 4291 appendix A), as Linux siw forms its node GUID.
  const std::array<std::uint8_t, 8> eui = {
      static_cast<std::uint8_t>(mac[0] ^ 0x02), mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
  std::memcpy(&d.node_guid, eui.data(), eui.size());
  d.gid.raw[0] = 0xfe;
  d.gid.raw[1] = 0x80;
  std::memcpy(&d.gid.raw[8], eui.data(), eui.size());
  return d;
}

bool valid_port(std::uint8_t port_num) {
  return port_num == kPortNum;
}

void fill_device_attr(const OfaContext& c, ibv_device_attr& a) {
  const DeviceLimits& lim = c.core.limits();
  const DeviceInfo& d = device_info();
  std::memset(&a, 0, sizeof a);
  std::snprintf(a.fw_ver, sizeof a.fw_ver, "%s", UWARP_OFA_VERSION);
  a.node_guid = d.node_guid;
  a.sys_image_guid = d.node_guid;
  a.max_mr_size = lim.max_mr_size;
  const long page = ::sysconf(_SC_PAGESIZE);
  a.page_size_cap = ~static_cast<std::uint64_t>((page > 0 ? page : 4096) - 1);
  a.vendor_id = kVendorId;
  a.vendor_part_id = kVendorPartId;
  a.hw_ver = 0;
  auto clamp = [](std::uint64_t v) {
    return static_cast<int>(std::min<std::uint64_t>(v, INT_MAX));
  };
  a.max_qp = clamp(lim.max_qp);
  a.max_qp_wr = clamp(lim.max_qp_wr);
  // Memory windows of type 1 and type 2B (a type 2 window is bound to one QP; no type 2A).
  a.device_cap_flags = IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
  a.max_sge = clamp(lim.max_sge);
  a.max_sge_rd = clamp(lim.max_sge_rd);
  a.max_cq = clamp(lim.max_cq);
  a.max_cqe = clamp(lim.max_cqe);
  a.max_mr = clamp(lim.max_mr);
  a.max_mw = clamp(lim.max_mr);  // windows and regions share the device's STag table
  a.max_pd = clamp(lim.max_pd);
  a.max_qp_rd_atom = clamp(lim.max_qp_rd_atom);
  a.max_qp_init_rd_atom = clamp(lim.max_qp_init_rd_atom);
  a.max_res_rd_atom = clamp(std::uint64_t{lim.max_qp_rd_atom} * lim.max_qp);
  // RFC 7306 atomics are carried out with the CPU's own atomic instructions
  // (proto/atomic_operation.h): atomic against every QP of the device and against the CPU.
  a.atomic_cap = IBV_ATOMIC_GLOB;
  a.max_srq = clamp(lim.max_srq);
  a.max_srq_wr = clamp(lim.max_srq_wr);
  a.max_srq_sge = clamp(lim.max_srq_sge);
  a.max_pkeys = 1;
  a.local_ca_ack_delay = 0;
  a.phys_port_cnt = 1;
}

void fill_port_attr(const OfaContext& c, ibv_port_attr& p) {
  std::memset(&p, 0, sizeof p);
  p.state = IBV_PORT_ACTIVE;
  p.max_mtu = IBV_MTU_4096;
  p.active_mtu = device_info().active_mtu;
  p.gid_tbl_len = 1;
  p.port_cap_flags = IBV_PORT_CM_SUP;
  p.max_msg_sz = c.core.limits().max_msg_size;
  p.pkey_tbl_len = 1;
  p.max_vl_num = 1;
  p.active_width = kWidth4x;
  p.active_speed = kSpeed25Gbps;
  p.phys_state = kPhysStateLinkUp;
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
}

std::string guid_string(std::uint64_t guid_be) {
  const std::uint64_t g = be64toh(guid_be);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%04x:%04x:%04x", static_cast<unsigned>(g >> 48) & 0xffff,
                static_cast<unsigned>(g >> 32) & 0xffff, static_cast<unsigned>(g >> 16) & 0xffff,
                static_cast<unsigned>(g) & 0xffff);
  return buf;
}

std::string gid_string(const ibv_gid& gid) {
  std::string s;
  char buf[8];
  for (int i = 0; i < 16; i += 2) {
    std::snprintf(buf, sizeof buf, "%s%02x%02x", i == 0 ? "" : ":", gid.raw[i], gid.raw[i + 1]);
    s += buf;
  }
  return s;
}

// The sysfs files of the uwarp device (there is no kernel device behind it): the attributes
// that tools read through ibv_read_sysfs_file, in the kernel's format. Null if unknown.
std::optional<std::string> virtual_sysfs_file(const std::string& dir, const std::string& file) {
  const DeviceInfo& d = device_info();
  if (dir == kUverbsPath) {
    if (file == "ibdev") return std::string(kDeviceName) + "\n";
    if (file == "abi_version") return std::string("1\n");
    return std::nullopt;
  }
  if (dir != kIbdevPath) return std::nullopt;
  if (file == "board_id") return std::string("uwarp software iWARP RNIC\n");
  if (file == "fw_ver") return std::string(UWARP_OFA_VERSION) + "\n";
  if (file == "hca_type") return std::string("uwarp\n");
  if (file == "hw_rev") return std::string("0\n");
  if (file == "node_type") return std::string("4: RNIC\n");
  if (file == "node_guid" || file == "sys_image_guid") return guid_string(d.node_guid) + "\n";
  if (file == "node_desc") {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return std::string(host) + " " + kDeviceName + "\n";
  }
  if (file == "ports/1/state") return std::string("4: ACTIVE\n");
  if (file == "ports/1/phys_state") return std::string("5: LinkUp\n");
  if (file == "ports/1/link_layer") return std::string("Ethernet\n");
  if (file == "ports/1/rate") return std::string("100 Gb/sec (4X EDR)\n");
  if (file == "ports/1/lid" || file == "ports/1/sm_lid") return std::string("0x0\n");
  if (file == "ports/1/gids/0") return gid_string(d.gid) + "\n";
  if (file == "ports/1/pkeys/0") return std::string("0xffff\n");
  return std::nullopt;
}

}  // namespace

const DeviceInfo& device_info() {
  static const DeviceInfo info = make_device_info();
  return info;
}

OfaContext* OfaContext::from(ibv_context* context) {
  static_assert(std::is_standard_layout_v<OfaContext>);
  static_assert(offsetof(OfaContext, vctx) == 0);
  if (context == nullptr || context->abi_compat != __VERBS_ABI_IS_EXTENDED ||
      !is_uwarp_device(context->device)) {
    return nullptr;
  }
  return reinterpret_cast<OfaContext*>(verbs_get_ctx(context));
}

int query_port_ex(ibv_context* context, std::uint8_t port_num, ibv_port_attr* attr,
                  std::size_t attr_len) {
  OfaContext* c = OfaContext::from(context);
  if (c == nullptr || attr == nullptr || !valid_port(port_num)) return EINVAL;
  ibv_port_attr p;
  fill_port_attr(*c, p);
  std::memcpy(attr, &p, std::min(attr_len, sizeof p));
  if (attr_len > sizeof p) {
    std::memset(reinterpret_cast<char*>(attr) + sizeof p, 0, attr_len - sizeof p);
  }
  return 0;
}

int compat_query_port(ibv_context* context, std::uint8_t port_num, _compat_ibv_port_attr* attr) {
  OfaContext* c = OfaContext::from(context);
  if (c == nullptr || attr == nullptr || !valid_port(port_num)) return EINVAL;
  ibv_port_attr p;
  fill_port_attr(*c, p);
  std::memcpy(attr, &p, kCompatPortAttrSize);
  return 0;
}

int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, std::size_t attr_size) {
  OfaContext* c = OfaContext::from(context);
  if (c == nullptr || attr == nullptr || attr_size < sizeof(ibv_device_attr)) return EINVAL;
  if (input != nullptr && input->comp_mask != 0) return EINVAL;
  ibv_device_attr_ex ex;
  std::memset(&ex, 0, sizeof ex);
  fill_device_attr(*c, ex.orig_attr);
  ex.phys_port_cnt_ex = ex.orig_attr.phys_port_cnt;
  ex.device_cap_flags_ex = ex.orig_attr.device_cap_flags;  // the same bits, as the kernel's
  // On-demand paging (IBV_ACCESS_ON_DEMAND, the implicit region, ibv_advise_mr) for every RC
  // operation: docs/on-demand-paging.md.
  ex.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
  ex.odp_caps.per_transport_caps.rc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                                               IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                                               IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
  std::memcpy(attr, &ex, std::min(attr_size, sizeof ex));
  if (attr_size > sizeof ex) {
    std::memset(reinterpret_cast<char*>(attr) + sizeof ex, 0, attr_size - sizeof ex);
  }
  return 0;
}

}  // namespace uwarp::ofa

using namespace uwarp::ofa;

extern "C" {

ibv_device** ibv_get_device_list(int* num_devices) {
  return c_boundary<ibv_device**>(nullptr, [&]() -> ibv_device** {
    auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
    if (list == nullptr) {
      errno = ENOMEM;
      return nullptr;
    }
    list[0] = const_cast<ibv_device*>(&device_info().ibv);
    if (num_devices != nullptr) *num_devices = 1;
    return list;
  });
}

void ibv_free_device_list(ibv_device** list) {
  std::free(list);
}

const char* ibv_get_device_name(ibv_device* device) {
  return device != nullptr ? device->name : nullptr;
}

__be64 ibv_get_device_guid(ibv_device* device) {
  return is_uwarp_device(device) ? device_info().node_guid : 0;
}

int ibv_get_device_index(ibv_device* device) {
  return is_uwarp_device(device) ? 0 : -1;
}

ibv_context* ibv_open_device(ibv_device* device) {
  return c_boundary<ibv_context*>(nullptr, [&]() -> ibv_context* {
    if (!is_uwarp_device(device)) {
      errno = ENODEV;
      return nullptr;
    }
    auto core = uwarp::Context::open();
    if (!core) {
      errno = to_errno(core.error());
      return nullptr;
    }
    auto* c = new OfaContext(std::move(*core));
    ibv_context& ctx = c->vctx.context;
    ctx.device = device;
    ctx.cmd_fd = -1;  // there is no kernel uverbs device
    ctx.async_fd = c->core.async_fd();
    ctx.num_comp_vectors = 1;
    pthread_mutex_init(&ctx.mutex, nullptr);
    ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
    ctx.ops._compat_query_device = ibv_query_device;
    ctx.ops._compat_query_port = compat_query_port;
    ctx.ops.alloc_mw = alloc_mw;
    ctx.ops.bind_mw = bind_mw;
    ctx.ops.dealloc_mw = dealloc_mw;
    ctx.ops.poll_cq = poll_cq;
    ctx.ops.req_notify_cq = req_notify_cq;
    ctx.ops.post_srq_recv = post_srq_recv;
    ctx.ops.post_send = post_send;
    ctx.ops.post_recv = post_recv;
    verbs_context& v = c->vctx;
    v.query_port = query_port_ex;
    v.query_device_ex = query_device_ex;
    v.advise_mr = advise_mr;
    v.create_qp_ex = create_qp_ex;
    v.create_cq_ex = create_cq_ex;
    v.sz = sizeof(verbs_context);
    return &ctx;
  });
}

int ibv_close_device(ibv_context* context) {
  OfaContext* c = OfaContext::from(context);
  if (c == nullptr) return EINVAL;
  return c_boundary<int>(ENOMEM, [&] {
    pthread_mutex_destroy(&c->vctx.context.mutex);
    delete c;  // stops the progress thread once nothing else uses the core context
    return 0;
  });
}

int ibv_query_device(ibv_context* context, ibv_device_attr* device_attr) {
  OfaContext* c = OfaContext::from(context);
  if (c == nullptr || device_attr == nullptr) return EINVAL;
  fill_device_attr(*c, *device_attr);
  return 0;
}

int ibv_query_port(ibv_context* context, uint8_t port_num, _compat_ibv_port_attr* port_attr) {
  return compat_query_port(context, port_num, port_attr);
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                      ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  if (OfaContext::from(context) == nullptr || entry == nullptr || flags != 0) return EINVAL;
  if (port_num != kPortNum || gid_index != 0) return EINVAL;
  ibv_gid_entry e{};
  e.gid = device_info().gid;
  e.gid_index = 0;
  e.port_num = kPortNum;
  e.gid_type = IBV_GID_TYPE_IB;  // what the kernel reports for iWARP devices
  e.ndev_ifindex = device_info().ifindex;
  std::memcpy(entry, &e, std::min(entry_size, sizeof e));
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                             uint32_t flags, size_t entry_size) {
  if (OfaContext::from(context) == nullptr || flags != 0 || entries == nullptr) return -EINVAL;
  if (max_entries < 1) return -EINVAL;  // the table has one valid entry
  if (entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  const int rc = _ibv_query_gid_ex(context, kPortNum, 0, entries, 0, entry_size);
  return rc == 0 ? 1 : -rc;
}

int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  if (OfaContext::from(context) == nullptr || gid == nullptr || !valid_port(port_num) ||
      index != 0) {
    errno = EINVAL;
    return -1;
  }
  *gid = device_info().gid;
  return 0;
}

int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index, int* type) {
  if (OfaContext::from(context) == nullptr || type == nullptr || !valid_port(port_num) ||
      index != 0) {
    errno = EINVAL;
    return -1;
  }
  *type = 0;  // IBV_GID_TYPE_SYSFS_IB_ROCE_V1: the kernel's type for iWARP GIDs
  return 0;
}

int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  if (OfaContext::from(context) == nullptr || pkey == nullptr || !valid_port(port_num) ||
      index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htons(kDefaultPkey);
  return 0;
}

int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
  if (OfaContext::from(context) == nullptr || !valid_port(port_num)) {
    errno = EINVAL;
    return -1;
  }
  if (ntohs(pkey) != kDefaultPkey) {
    errno = ENOENT;
    return -1;
  }
  return 0;
}

const char* ibv_get_sysfs_path(void) {
  return "/sys";
}

// As rdma-core: reads dir/file into buf, strips one trailing newline, NUL-terminates; returns
// the length or -1. The uwarp device's own directories are served from memory.
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  if (dir == nullptr || file == nullptr || buf == nullptr || size == 0) {
    errno = EINVAL;
    return -1;
  }
  return c_boundary<int>(-1, [&]() -> int {
    std::string content;
    if (auto v = virtual_sysfs_file(dir, file)) {
      content = std::move(*v);
    } else if (std::strcmp(dir, kIbdevPath) == 0 || std::strcmp(dir, kUverbsPath) == 0) {
      errno = ENOENT;
      return -1;
    } else {
      const std::string path = std::string(dir) + "/" + file;
      FILE* f = std::fopen(path.c_str(), "re");
      if (f == nullptr) return -1;
      content.resize(size);
      content.resize(std::fread(content.data(), 1, size, f));
      std::fclose(f);
    }
    std::size_t len = std::min(content.size(), size);
    std::memcpy(buf, content.data(), len);
    if (len > 0) {
      if (buf[len - 1] == '\n') {
        buf[--len] = '\0';
      } else if (len < size) {
        buf[len] = '\0';
      } else {
        return -1;  // no room for the terminating NUL
      }
    }
    return static_cast<int>(len);
  });
}

}  // extern "C"
