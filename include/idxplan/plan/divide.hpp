// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Integer division for the rules the device runs too, where a division is a
// long instruction sequence on the critical path.

#include <cstdint>
#include <string>

#include "idxplan/error.hpp"
#include "idxplan/host_device.hpp"

namespace idxplan {

namespace detail {

// a / b for a >= 0, b > 0. A 64-bit division is a long subroutine on a GPU
// and costs the schedule's critical path dearly; operands under 2^31, which
// every valid step has, take one 32-bit division instead.
IDXPLAN_HD int64_t div_nonnegative(int64_t a, int64_t b) {
  if (((a | b) >> 31) == 0) return static_cast<uint32_t>(a) / static_cast<uint32_t>(b);
  return a / b;
}

IDXPLAN_HD int64_t ceil_div(int64_t a, int64_t b) { return div_nonnegative(a + b - 1, b); }

// ceil(a / b) for b > 0 and a + b - 1 under 2^32: one unsigned 32-bit
// division and no branch.
IDXPLAN_HD uint32_t ceil_div_u32(uint32_t a, uint32_t b) { return (a + b - 1u) / b; }

// a / b and ceil(a / b) for int32 a >= 0, b > 0, as unsigned 32-bit
// divisions with no branch, so a thread's units' rules interleave on a GPU.
IDXPLAN_HD int32_t div32(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) / static_cast<uint32_t>(b));
}
IDXPLAN_HD int32_t ceil_div32(int32_t a, int32_t b) {
  return static_cast<int32_t>(ceil_div_u32(static_cast<uint32_t>(a), static_cast<uint32_t>(b)));
}

}  // namespace detail

// Division by a divisor fixed for a whole step (the compression ratio, a KV
// tile), as one widening multiply and a shift, exact for every dividend in
// [0, 2^31) (Granlund and Montgomery, "Division by invariant integers using
// multiplication", 1994): with l = ceil(log2 d), magic = ceil(2^(31 + l) / d)
// is under 2^32 and magic * d - 2^(31 + l) is under d <= 2^l, so the
// rounding error stays under 1/d. The host computes it, once a step.
class Divisor {
 public:
  constexpr Divisor() = default;
  explicit Divisor(int32_t d) : d_(d) {
    if (d < 1) throw StepError("idxplan::Divisor needs a divisor >= 1, got " + std::to_string(d));
    int32_t l = 0;
    while ((int64_t{1} << l) < d) ++l;
    shift_ = 31 + l;
    magic_ = static_cast<uint32_t>(((uint64_t{1} << shift_) + static_cast<uint64_t>(d) - 1) /
                                   static_cast<uint64_t>(d));
  }

  IDXPLAN_HD constexpr int32_t divisor() const { return d_; }
  // The multiplier alone, for divide_biased.
  IDXPLAN_HD constexpr uint32_t multiplier() const { return magic_; }
  // n / d, for 0 <= n < 2^31.
  IDXPLAN_HD constexpr int32_t divide(int32_t n) const {
    return static_cast<int32_t>((uint64_t{static_cast<uint32_t>(n)} * magic_) >> shift_);
  }
  // ceil(n / d), for 0 <= n < 2^31.
  IDXPLAN_HD constexpr int32_t divide_up(int32_t n) const {
    const int32_t q = divide(n);
    return n - q * d_ > 0 ? q + 1 : q;
  }

 private:
  int32_t d_ = 1;
  uint32_t magic_ = 1u << 31;  // d = 1: n * 2^31 >> 31
  int32_t shift_ = 31;
};

// floor((n + bias) / d) for n, bias >= 0 with n + bias < 2^31 and d >= 2,
// given Divisor(d).multiplier() m, for a divisor the device forms from
// fields it already holds, so that the arguments keep 4 bytes rather than
// a Divisor's 12. Its shift, 31 + ceil(log2 d), is past 32 for d >= 2: the
// quotient is the high word of one 32-bit multiply, shifted right by
// ceil(log2 d) - 1, which is Divisor(d)'s divide(n + bias)
// (tests/test_divide.cpp).
IDXPLAN_HD int32_t divide_biased(int32_t n, int32_t bias, int32_t d, uint32_t m) {
  const auto d_less_one = static_cast<uint32_t>(d - 1);
  // ceil(log2 d) - 1. __clz is nvcc's device intrinsic; elsewhere the
  // builtin, which clang's HIP device code has even where no HIP header is
  // included (the Python module's host sources, built as HIP).
#if defined(__CUDA_ARCH__)
  const int32_t log2_less_one = 31 - __clz(static_cast<int>(d_less_one));
#else
  const int32_t log2_less_one = 31 - __builtin_clz(d_less_one);
#endif
  const uint32_t sum = static_cast<uint32_t>(n) + static_cast<uint32_t>(bias);
  const auto high = static_cast<uint32_t>((uint64_t{sum} * m) >> 32);
  return static_cast<int32_t>(high >> log2_less_one);
}

// Division of many dividends in [0, 2^31) by a divisor d >= 1 that only the
// device knows (a unit's slices by the step's tiles a slice, which
// tiles_per_slice keeps at least 1; nothing here checks it): one 32-bit
// division for the reciprocal m = floor((2^32 - 1) / d), then a widening
// multiply, a multiply-add and two compares a dividend. m is at least
// 2^32 / d - 1, so q = n * m >> 32 is floor(n / d) or one less (n < 2^31
// keeps n * (2^32 / d - m) / 2^32 under a half), and r = n - q * d lies
// in [0, 2d): ceil(n / d) is q + (r > 0) + (r > d).
class Reciprocal {
 public:
  IDXPLAN_HD explicit Reciprocal(int32_t d)
      : d_(static_cast<uint32_t>(d)), m_(0xFFFFFFFFu / static_cast<uint32_t>(d)) {}

  // ceil(n / d), for 0 <= n < 2^31.
  IDXPLAN_HD int32_t divide_up(int32_t n) const {
    const auto u = static_cast<uint32_t>(n);
    const auto q = static_cast<uint32_t>((uint64_t{u} * m_) >> 32);
    const uint32_t r = u - q * d_;
    return static_cast<int32_t>(q + (r > 0 ? 1u : 0u) + (r > d_ ? 1u : 0u));
  }

 private:
  uint32_t d_;
  uint32_t m_;
};

}  // namespace idxplan
