// How uwarp's Status codes become the errno values that the OFA C APIs return or set. One
// mapping for both OFA libraries (libibverbs.so.1 now, librdmacm.so.1 later), header-only.
//
// ibv_post_send(3) and friends document EINVAL (bad work request, wrong state), ENOMEM (queue
// full) and EFAULT; the rest follows the kernel's conventions for the same conditions.
#pragma once

#include <cerrno>

#include "uwarp/status.h"

namespace uwarp::ofa {

constexpr int to_errno(Errc code) {
  switch (code) {
    case Errc::kOk:
      return 0;
    case Errc::kInvalidArgument:
      return EINVAL;
    case Errc::kInvalidState:
      return EINVAL;
    case Errc::kNoResources:
      return ENOMEM;
    case Errc::kNotSupported:
      return EOPNOTSUPP;
    case Errc::kNotFound:
      return ENOENT;
    case Errc::kBusy:
      return EBUSY;
    case Errc::kConnectionRefused:
      return ECONNREFUSED;
    case Errc::kConnectionReset:
      return ECONNRESET;
    case Errc::kRejected:
      return ECONNREFUSED;
    case Errc::kTimedOut:
      return ETIMEDOUT;
    case Errc::kProtocolError:
      return EPROTO;
    case Errc::kIoError:
      return EIO;
  }
  return EIO;
}

inline int to_errno(const Status& status) {
  return to_errno(status.code());
}

}  // namespace uwarp::ofa
