// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/plan/split.hpp"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace idxplan {
namespace {

using Splits = std::vector<ChunkSplit>;

// A budget of 4000 bytes: 10 rows of 100 columns, 20 of 50, 1 of 1000.
constexpr int64_t kBudget = 4000;

Splits split(const std::vector<int64_t>& contexts, const std::vector<int64_t>& query_lens,
             int32_t offset = 0) {
  Splits out;
  split_prefill_chunks(contexts, query_lens, kBudget, offset, out);
  return out;
}

TEST(MaxLogitsRows, IsTheBudgetOverARowAndAtLeastOne) {
  EXPECT_EQ(max_logits_rows(kBudget, 100), 10);
  EXPECT_EQ(max_logits_rows(kBudget, 0), 1000);  // an empty context is one column wide
  EXPECT_EQ(max_logits_rows(kBudget, 1000000), 1);
}

TEST(SplitDecodesAndPrefills, AllDecodesTakeThePadding) {
  const std::vector<int32_t> qsl{0, 2, 4, 5};
  EXPECT_EQ(split_decodes_and_prefills(qsl, 8, 2), (BatchSplit{3, 8, 0, 0}));
}

TEST(SplitDecodesAndPrefills, AFirstPrefillMakesEveryRequestAPrefill) {
  const std::vector<int32_t> qsl{0, 3, 4, 5};
  EXPECT_EQ(split_decodes_and_prefills(qsl, 6, 2), (BatchSplit{0, 0, 3, 6}));
}

TEST(SplitDecodesAndPrefills, DecodesEndAtTheFirstPrefill) {
  // Request 2 is short but comes after a prefill, so it is a prefill too.
  const std::vector<int32_t> qsl{0, 2, 1 + 2, 9, 10};
  EXPECT_EQ(split_decodes_and_prefills(qsl, 12, 2), (BatchSplit{2, 3, 2, 9}));
}

TEST(SplitDecodesAndPrefills, NoTokensIsAnEmptyStep) {
  const std::vector<int32_t> qsl{0, 0, 0};
  EXPECT_EQ(split_decodes_and_prefills(qsl, 0, 2), BatchSplit{});
  EXPECT_EQ(split_decodes_and_prefills(std::vector<int32_t>{0}, 0, 2), BatchSplit{});
}

TEST(SplitPrefillChunks, GroupsStopAtTheBudget) {
  // Three 4-row requests of 100 columns: 10 rows fit, so two then one.
  EXPECT_EQ(split({100, 100, 100}, {4, 4, 4}), (Splits{{0, 2, 0, 8}, {2, 3, 0, 4}}));
}

TEST(SplitPrefillChunks, AWiderRequestShrinksTheGroupsBudget) {
  // 12 rows fit at 50 columns (20), but not once a 100-column request joins (10).
  EXPECT_EQ(split({50, 100}, {12, 5}), (Splits{{0, 1, 0, 12}, {1, 2, 0, 5}}));
}

TEST(SplitPrefillChunks, CutsAWideRequestOnItsQueryRows) {
  EXPECT_EQ(split({100}, {25}), (Splits{{0, 1, 0, 10}, {0, 1, 10, 20}, {0, 1, 20, 25}}));
}

TEST(SplitPrefillChunks, TheFirstRequestAlwaysFits) {
  // 1000 columns: one row a launch.
  EXPECT_EQ(split({1000, 10}, {2, 1}), (Splits{{0, 1, 0, 1}, {0, 1, 1, 2}, {1, 2, 0, 1}}));
}

TEST(SplitPrefillChunks, RequestsCountFromTheOffset) {
  EXPECT_EQ(split({100, 100, 100}, {4, 4, 4}, 5), (Splits{{5, 7, 0, 8}, {7, 8, 0, 4}}));
}

TEST(SplitPrefillChunks, EmptyRequestsJoinTheGroupAndAnEmptyGroupHasNoChunk) {
  EXPECT_EQ(split({100, 100, 100}, {0, 3, 0}), (Splits{{0, 3, 0, 3}}));
  EXPECT_EQ(split({100, 100}, {0, 0}), Splits{});
}

TEST(SplitPrefillChunks, AnEmptyRequestWideEnoughEndsAGroup) {
  // The empty request's 1000 columns leave one row: the group of 8 stops,
  // and the next group starts on the empty request.
  EXPECT_EQ(split({100, 1000, 10}, {8, 0, 2}),
            (Splits{{0, 1, 0, 8}, {1, 3, 0, 1}, {1, 3, 1, 2}}));
}

}  // namespace
}  // namespace idxplan
