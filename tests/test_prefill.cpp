// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/plan/prefill.hpp"

#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace idxplan {
namespace {

struct Planned {
  std::vector<PrefillPlan> plans;
  std::vector<RequestRows> pieces;
  int32_t words = 0;
};

Planned plan(const Geometry& g, const std::vector<ChunkSplit>& splits,
             const std::vector<int32_t>& qsl, const std::vector<int32_t>& seq_lens) {
  Planned p;
  p.words = plan_prefill_chunks(splits, qsl, seq_lens, g, p.plans, p.pieces);
  return p;
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

TEST(BlockEnd, RoundsUp) {
  EXPECT_EQ(block_end(0, 8), 0);
  EXPECT_EQ(block_end(1, 8), 1);
  EXPECT_EQ(block_end(16, 8), 2);
  EXPECT_EQ(block_end(17, 8), 3);
}

TEST(PlanPrefillChunks, PlansAGroupOfWholeRequests) {
  const Geometry g = make_geometry(test::deepseek_config());
  // Two decodes of 2 rows, then prefills of 5 and 3 rows.
  const std::vector<int32_t> qsl{0, 2, 4, 9, 12};
  const std::vector<int32_t> lens{10, 20, 4000, 100003};
  const Planned p = plan(g, {{2, 4, 0, 8}}, qsl, lens);
  ASSERT_EQ(p.plans.size(), 1u);
  const PrefillPlan& c = p.plans[0];
  EXPECT_EQ(c.token_start, 4);
  EXPECT_EQ(c.token_end, 12);
  EXPECT_EQ(c.first_request, 2);
  EXPECT_EQ(c.num_reqs, 2);
  EXPECT_EQ(c.width, 25000);  // 100003 / 4
  EXPECT_TRUE(c.use_gather);  // 25000 >= 24576
  EXPECT_EQ(c.query_start_loc_offset, 0);
  EXPECT_EQ(p.words, 3);
  EXPECT_EQ(p.pieces, (std::vector<RequestRows>{{0, 5, 0}, {5, 8, 1}}));
}

TEST(PlanPrefillChunks, PlansTheQuerySlicesOfOneRequest) {
  const Geometry g = make_geometry(test::deepseek_config());
  const std::vector<int32_t> qsl{0, 10};
  const std::vector<int32_t> lens{4000};
  const Planned p = plan(g, {{0, 1, 0, 4}, {0, 1, 4, 8}, {0, 1, 8, 10}}, qsl, lens);
  ASSERT_EQ(p.plans.size(), 3u);
  EXPECT_EQ(p.plans[1].token_start, 4);
  EXPECT_EQ(p.plans[1].token_end, 8);
  EXPECT_EQ(p.plans[1].query_start_loc_offset, 2);
  EXPECT_FALSE(p.plans[1].use_gather);  // 1000 columns
  EXPECT_EQ(p.pieces, (std::vector<RequestRows>{{0, 4, 0}, {0, 4, 0}, {0, 2, 0}}));
  EXPECT_EQ(p.words, 6);
}

TEST(PlanPrefillChunks, DropsAChunkWithNoContext) {
  const Geometry g = make_geometry(test::deepseek_config());
  // Lengths under C tokens: nothing compressed yet.
  const std::vector<int32_t> qsl{0, 3, 6};
  const std::vector<int32_t> lens{3, 3};
  EXPECT_TRUE(plan(g, {{0, 2, 0, 6}}, qsl, lens).plans.empty());
}

TEST(PlanPrefillChunks, KeepsAnEmptyLeadingRequestInItsChunk) {
  // The reference's bisect would start this chunk at request 2, skipping the
  // empty request 1 the split put first; the chunk's requests would then
  // index one past where they belong.
  const Geometry g = make_geometry(test::deepseek_config());
  const std::vector<int32_t> qsl{0, 50, 50, 54};
  const std::vector<int32_t> lens{4000, 400000, 1000};
  const Planned p = plan(g, {{1, 3, 0, 2}}, qsl, lens);
  ASSERT_EQ(p.plans.size(), 1u);
  EXPECT_EQ(p.plans[0].first_request, 1);
  EXPECT_EQ(p.plans[0].num_reqs, 2);
  EXPECT_EQ(p.plans[0].width, 100000);
  EXPECT_EQ(p.pieces, (std::vector<RequestRows>{{0, 2, 1}}));
}

}  // namespace
}  // namespace idxplan
