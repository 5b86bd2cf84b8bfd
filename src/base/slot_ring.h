// SlotRing<T>: a first-in first-out queue (push at the back, pop at the front, index from the
// front) that reuses its slots. pop_front() does not destroy the element: it calls the
// element's recycle() if T has one (which must let go of what the element refers to and may
// keep storage, such as a vector's capacity), else assigns T{}; push_back() hands out that
// slot again as recycle() left it. So a queue that holds up to N elements at a time allocates
// only while it grows to N (doubling), where a std::deque allocates and frees a block every few
// elements, and each element its vectors.
//
// Not thread-safe; references stay valid until the element is popped or the ring grows.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace uwarp {

template <typename T>
class SlotRing {
 public:
  bool empty() const { return count_ == 0; }
  std::size_t size() const { return count_; }

  T& operator[](std::size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  const T& operator[](std::size_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  T& front() { return (*this)[0]; }
  T& back() { return (*this)[count_ - 1]; }
  const T& back() const { return (*this)[count_ - 1]; }

  // A slot at the back, as recycle() (or T{}) left it.
  T& push_back() {
    if (count_ == slots_.size()) grow();
    ++count_;
    return back();
  }
  void pop_front() {
    recycle(front());
    head_ = (head_ + 1) & (slots_.size() - 1);
    --count_;
  }
  void clear() {
    while (!empty()) pop_front();
  }

 private:
  static void recycle(T& t) {
    if constexpr (requires { t.recycle(); }) {
      t.recycle();
    } else {
      t = T{};
    }
  }

  // Twice the slots (a power of two, so that an index is masked, not divided); the elements
  // move to the front in order.
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 4 : 2 * slots_.size());
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = std::move((*this)[i]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
};

}  // namespace uwarp
