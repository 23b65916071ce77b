// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/plan/divide.hpp"

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace idxplan {
namespace {

constexpr int32_t kMax = std::numeric_limits<int32_t>::max();

// Dividends where a multiply-and-shift division goes wrong first: around
// multiples of d, and the top of the range.
std::vector<int32_t> edge_dividends(int32_t d) {
  std::vector<int64_t> wide{0, 1, 2, kMax, kMax - 1, int64_t{kMax} - d + 1};
  for (const int64_t q : {int64_t{1}, int64_t{1} << 16, kMax / int64_t{d}}) {
    for (int64_t e = -1; e <= 1; ++e) wide.push_back(q * d + e);
  }
  std::vector<int32_t> n;
  for (const int64_t v : wide) {
    if (v >= 0 && v <= kMax) n.push_back(static_cast<int32_t>(v));
  }
  return n;
}

// Divisors where a division by multiplication goes wrong first: every one
// to 4096, around each power of two above, the top of the range, and 2000
// odd ones drawn from `rng`.
std::vector<int32_t> test_divisors(std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> any(0, kMax);
  std::vector<int32_t> divisors;
  for (int32_t d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int shift = 12; shift <= 30; ++shift) {
    for (const int32_t e : {-1, 0, 1}) divisors.push_back((1 << shift) + e);
  }
  divisors.push_back(kMax);
  divisors.push_back(kMax - 1);
  for (int i = 0; i < 2000; ++i) divisors.push_back(any(rng) | 1);
  return divisors;
}

// edge_dividends(d) and `random` more drawn from `rng`.
std::vector<int32_t> test_dividends(int32_t d, std::mt19937_64& rng, int random) {
  std::uniform_int_distribution<int32_t> any(0, kMax);
  std::vector<int32_t> n = edge_dividends(d);
  for (int i = 0; i < random; ++i) n.push_back(any(rng));
  return n;
}

TEST(Divisor, DividesEveryDividendExactly) {
  std::mt19937_64 rng(11);
  const std::vector<int32_t> divisors = test_divisors(rng);
  int64_t checked = 0;
  for (const int32_t d : divisors) {
    const Divisor by(d);
    ASSERT_EQ(by.divisor(), d);
    for (const int32_t v : test_dividends(d, rng, 64)) {
      ASSERT_EQ(by.divide(v), v / d) << v << " / " << d;
      ASSERT_EQ(by.divide_up(v), v / d + (v % d != 0)) << "ceil(" << v << " / " << d << ")";
      ++checked;
    }
  }
  EXPECT_GT(checked, 300000);
}

TEST(Divisor, EveryDividendBelowTwoToTheTwentyForSmallDivisors) {
  for (const int32_t d : {1, 2, 3, 4, 5, 7, 16, 63, 64, 100, 128}) {
    const Divisor by(d);
    for (int32_t v = 0; v < (1 << 20); ++v) ASSERT_EQ(by.divide(v), v / d) << v << " / " << d;
  }
}

// Reciprocal's q = n * m >> 32 falls one short of n / d at most, for every
// dividend under 2^31: the divisors and dividends of
// Divisor.DividesEveryDividendExactly, and every pair of small ones.
TEST(Reciprocal, DividesEveryDividendUpExactly) {
  std::mt19937_64 rng(12);
  const std::vector<int32_t> divisors = test_divisors(rng);
  int64_t checked = 0;
  for (const int32_t d : divisors) {
    const Reciprocal by(d);
    for (const int32_t v : test_dividends(d, rng, 64)) {
      ASSERT_EQ(by.divide_up(v), v / d + (v % d != 0)) << "ceil(" << v << " / " << d << ")";
      ++checked;
    }
  }
  for (int32_t d = 1; d <= 1024; ++d) {
    const Reciprocal by(d);
    for (int32_t v = 0; v < 4096; ++v) ASSERT_EQ(by.divide_up(v), v / d + (v % d != 0)) << v << " / " << d;
    checked += 4096;
  }
  EXPECT_GT(checked, 4000000);
}

// divide_biased with Divisor(d)'s multiplier is Divisor(d).divide(n + bias)
// for every split of an edge or random dividend into n + bias, every
// divisor from 2 of Divisor.DividesEveryDividendExactly.
TEST(DivideBiased, IsTheDivisorsDivisionOfTheSum) {
  std::mt19937_64 rng(13);
  const std::vector<int32_t> divisors = test_divisors(rng);
  int64_t checked = 0;
  for (const int32_t d : divisors) {
    if (d < 2) continue;
    const Divisor by(d);
    for (const int32_t sum : test_dividends(d, rng, 16)) {
      for (const int32_t bias : {0, 1, d - 1, d, sum / 2, sum}) {
        if (bias > sum) continue;
        ASSERT_EQ(divide_biased(sum - bias, bias, d, by.multiplier()), sum / d)
            << "(" << sum - bias << " + " << bias << ") / " << d;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 300000);
}

TEST(Divisor, RefusesANonPositiveDivisor) {
  EXPECT_THROW(Divisor(0), Error);
  EXPECT_THROW(Divisor(-4), Error);
  try {
    Divisor bad(0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("got 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace idxplan
