// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// Span (plan/span.hpp): a pointer and a length, made from a pointer and a
// count or from any container with data() and size(), never owning.

#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "idxplan/idxplan.hpp"

namespace idxplan {
namespace {

TEST(Span, ViewsAContainerInPlace) {
  std::vector<int32_t> v{3, 1, 4};
  const Span<int32_t> s = v;
  EXPECT_EQ(s.data(), v.data());
  EXPECT_EQ(s.size(), 3u);
  s[1] = 9;  // the container's own word
  EXPECT_EQ(v[1], 9);
  int32_t sum = 0;
  for (const int32_t x : s) sum += x;
  EXPECT_EQ(sum, 16);
}

TEST(Span, OfConstFromAMutableOrConstContainer) {
  std::vector<int32_t> v{1, 2};
  const std::array<int32_t, 3> a{5, 6, 7};
  const Span<const int32_t> from_mutable = v;
  const Span<const int32_t> from_const = a;
  EXPECT_EQ(from_mutable.data(), v.data());
  EXPECT_EQ(from_const.size(), 3u);
  EXPECT_EQ(from_const[2], 7);
  // A span of mutable words cannot view a const container.
  EXPECT_FALSE((std::is_convertible_v<const std::vector<int32_t>&, Span<int32_t>>));
}

TEST(Span, FromAPointerAndACountAndEmpty) {
  const int32_t words[] = {8, 9, 10, 11};
  const Span<const int32_t> s(words + 1, 2);
  EXPECT_EQ(s[0], 9);
  EXPECT_EQ(s.end() - s.begin(), 2);
  EXPECT_FALSE(s.empty());
  const Span<const int32_t> none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(none.begin(), none.end());
}

}  // namespace
}  // namespace idxplan
