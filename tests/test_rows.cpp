// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/plan/rows.hpp"

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace idxplan {
namespace {

TEST(ClampSeqLen, ReadsALengthWithinZeroAndTheBound) {
  EXPECT_EQ(clamp_seq_len(-5, 100), 0);
  EXPECT_EQ(clamp_seq_len(std::numeric_limits<int32_t>::min(), 100), 0);
  EXPECT_EQ(clamp_seq_len(50, 100), 50);
  EXPECT_EQ(clamp_seq_len(101, 100), 100);
}

TEST(DecodeRowLen, SeesTheTokensUpToItsOwn) {
  // L = 400, q = 2, C = 4: row 0 sees 399 tokens (99 keys), row 1 all 400.
  EXPECT_EQ(decode_row_len(400, 2, 0, Divisor(4)), 99);
  EXPECT_EQ(decode_row_len(400, 2, 1, Divisor(4)), 100);
}

TEST(DecodeRowLen, IsZeroWhenTheLengthIsBelowTheRows) {
  EXPECT_EQ(decode_row_len(0, 2, 0, Divisor(4)), 0);
  EXPECT_EQ(decode_row_len(1, 2, 0, Divisor(4)), 0);
}

TEST(DecodeRowLen, StaysDefinedForDeviceLengthsPastAnyBound) {
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(decode_row_len(kMin, 2, 1, Divisor(4)), 0);
  EXPECT_EQ(decode_row_len(-1, 2, 0, Divisor(4)), 0);
  EXPECT_EQ(decode_row_len(kMax, 2, 1, Divisor(4)), kMax / 4);
  EXPECT_EQ(decode_row_len(kMax, 1, 0, Divisor(1)), kMax);
}

TEST(PrefillRowEnd, CountsTheKeysUpToTheRow) {
  // L = 100, q = 8, C = 4: row 0 sees (100 - 8 + 1) / 4 = 23 keys, row 7 25.
  EXPECT_EQ(prefill_row_end(100, 8, 0, 4), 23);
  EXPECT_EQ(prefill_row_end(100, 8, 7, 4), 25);
  // A first prompt: row j sees (j + 1) / C.
  EXPECT_EQ(prefill_row_end(8, 8, 2, 4), 0);
  EXPECT_EQ(prefill_row_end(8, 8, 3, 4), 1);
}

TEST(PrefillRowEnd, ClampsADeviceLengthBelowItsRows) {
  EXPECT_EQ(prefill_row_end(2, 8, 0, 4), 0);
}

TEST(PrefillRowEnd, StaysDefinedForDeviceLengthsPastAnyBound) {
  // An engine's device lengths are not checked; out of range they read as 0
  // (below) or stay within int32 (above).
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(prefill_row_end(kMin, 3, 0, 4), 0);
  EXPECT_EQ(prefill_row_end(kMin, 3, 2, 4), 0);
  EXPECT_EQ(prefill_row_end(kMax, 3, 2, 4), kMax / 4);
  EXPECT_EQ(prefill_row_end(kMax, 1, 0, 1), kMax);
}

TEST(BlockEnd, RoundsUp) {
  EXPECT_EQ(block_end(0, 8), 0);
  EXPECT_EQ(block_end(1, 8), 1);
  EXPECT_EQ(block_end(16, 8), 2);
  EXPECT_EQ(block_end(17, 8), 3);
}

TEST(BlockEnd, IsDefinedForAnyBlockSize) {
  // Without sparse logits make_geometry takes any candidate_block_size.
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(block_end(5, kMax), 1);
  EXPECT_EQ(block_end(kMax, kMax), 1);
  EXPECT_EQ(block_end(kMax, 8), kMax / 8 + 1);
  EXPECT_EQ(block_end(kMax, 1), kMax);
}

TEST(BlockEnd, TakesTheSameValueFromADivisor) {
  // The device's form (a multiply) against the rule, for sizes and row ends
  // across int32, negative row ends included.
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  std::mt19937 rng(11);
  std::vector<int32_t> sizes{1, 2, 3, 7, 8, 64, 127, 128, 1000, 65535, 65536, kMax / 2, kMax - 1, kMax};
  for (int i = 0; i < 50; ++i) sizes.push_back(std::uniform_int_distribution<int32_t>(1, kMax)(rng));
  int checked = 0;
  for (const int32_t size : sizes) {
    const Divisor by_size(size);
    std::vector<int64_t> ends{std::numeric_limits<int32_t>::min(), -1, 0, 1, size - 1, size, int64_t{size} + 1,
                              2 * int64_t{size} - 1, 2 * int64_t{size}, kMax - 1, kMax};
    for (int k = 0; k < 200; ++k) ends.push_back(std::uniform_int_distribution<int32_t>(0, kMax)(rng));
    for (const int64_t wide : ends) {
      if (wide > kMax) continue;
      const auto end = static_cast<int32_t>(wide);
      ASSERT_EQ(block_end(end, by_size), block_end(end, size)) << "row_end=" << end << " size=" << size;
      ++checked;
    }
  }
  EXPECT_GT(checked, 10000);
}

}  // namespace
}  // namespace idxplan
