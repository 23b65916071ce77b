// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// A C++17 stand-in for std::span: a pointer and a length, never owning.
// The planners take any range with size() and operator[]; Span is the one
// idxplan hands out and the easiest for an engine to make from its arrays.

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace idxplan {

template <class T>
class Span {
 public:
  using value_type = std::remove_cv_t<T>;

  constexpr Span() = default;
  constexpr Span(T* data, std::size_t size) : data_(data), size_(size) {}
  template <class Container,
            class = std::enable_if_t<std::is_convertible_v<
                decltype(std::declval<Container&>().data()), T*>>>
  constexpr Span(Container& c) : data_(c.data()), size_(c.size()) {}  // NOLINT: implicit, like std::span

  constexpr T* data() const { return data_; }
  constexpr std::size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr T& operator[](std::size_t i) const { return data_[i]; }
  constexpr T* begin() const { return data_; }
  constexpr T* end() const { return data_ + size_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

namespace detail {

// A range whose element i is f(i): lets a planner read derived values (a
// compressed context, a query length) without materialising an array.
template <class F>
class IndexView {
 public:
  constexpr IndexView(std::size_t size, F f) : size_(size), f_(f) {}
  constexpr std::size_t size() const { return size_; }
  constexpr auto operator[](std::size_t i) const { return f_(i); }

 private:
  std::size_t size_;
  F f_;
};

template <class F>
constexpr IndexView<F> index_view(std::size_t size, F f) {
  return IndexView<F>(size, f);
}

// The element of any range, as int64 so sums and products cannot overflow.
template <class Range>
constexpr int64_t at(const Range& r, std::size_t i) {
  return static_cast<int64_t>(r[i]);
}

}  // namespace detail
}  // namespace idxplan
