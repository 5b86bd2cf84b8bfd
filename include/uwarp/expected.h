// A minimal value-or-error type (std::expected is C++23; clang 14 cannot compile libstdc++'s).
// Shared by the public API and every internal layer; never throws.
#pragma once

#include <cassert>
#include <type_traits>
#include <utility>
#include <variant>

namespace uwarp {

template <typename E>
struct Unexpected {
  E error;
};
template <typename E>
Unexpected(E) -> Unexpected<E>;

template <typename T, typename E>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Expected(Unexpected<E> e) : v_(std::in_place_index<1>, std::move(e.error)) {}  // NOLINT

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & {
    assert(has_value());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(has_value());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(has_value());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const E& error() const {
    assert(!has_value());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, E> v_;
};

}  // namespace uwarp
