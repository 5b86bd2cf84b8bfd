// A minimal value-or-error type (std::expected is C++23; clang 14 cannot compile libstdc++'s).
// Shared by the public API and every internal layer; never throws.
#pragma once

#include <cstdio>
#include <cstdlib>
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
    require(has_value());
    return *std::get_if<0>(&v_);
  }
  const T& value() const& {
    require(has_value());
    return *std::get_if<0>(&v_);
  }
  T&& value() && {
    require(has_value());
    return std::move(*std::get_if<0>(&v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const E& error() const {
    require(!has_value());
    return *std::get_if<1>(&v_);
  }

 private:
  // Reading the wrong alternative is a programming error: stop at once, in every build (no
  // exception is thrown, as nothing in uwarp throws).
  static void require(bool ok) {
    if (!ok) {
      std::fputs("uwarp: Expected accessed for the alternative it does not hold\n", stderr);
      std::abort();
    }
  }
  std::variant<T, E> v_;
};

}  // namespace uwarp
