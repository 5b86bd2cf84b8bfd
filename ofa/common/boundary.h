// The C ABI boundary of the OFA libraries: no C++ exception may cross it.
//
// The core reports failures as Status values and never throws; what can still escape a call is
// std::bad_alloc, which becomes the function's error result with errno ENOMEM. Thread
// cancellation is different: glibc implements it by unwinding with abi::__forced_unwind, which
// must pass through untouched (rping cancels a thread blocked in ibv_get_cq_event), so it is
// rethrown and the exported functions are not noexcept.
#pragma once

#include <cxxabi.h>

#include <cerrno>
#include <type_traits>
#include <utility>

namespace uwarp::ofa {

// Returns f(), or `on_error` with errno = ENOMEM if f throws.
template <typename R, typename F>
R c_boundary(R on_error, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (...) {
    errno = ENOMEM;
    return on_error;
  }
}

// For functions without a result.
template <typename F>
void c_boundary_void(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (...) {
    errno = ENOMEM;
  }
}

}  // namespace uwarp::ofa
