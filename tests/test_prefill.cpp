// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/plan/prefill.hpp"

#include "idxplan/plan/step.hpp"

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

TEST(PlanPrefillChunks, StartsAChunkOnTheOwnerOfItsFirstRow) {
  // The split put the empty request 1 first; the chunk starts on request 2,
  // which owns its first row, as the reference's bisect finds it, and takes
  // its width from the requests it covers.
  const Geometry g = make_geometry(test::deepseek_config());
  const std::vector<int32_t> qsl{0, 50, 50, 54};
  const std::vector<int32_t> lens{4000, 400000, 1000};
  const Planned p = plan(g, {{1, 3, 0, 2}}, qsl, lens);
  ASSERT_EQ(p.plans.size(), 1u);
  EXPECT_EQ(p.plans[0].first_request, 2);
  EXPECT_EQ(p.plans[0].num_reqs, 1);
  EXPECT_EQ(p.plans[0].width, 250);
  EXPECT_EQ(p.pieces, (std::vector<RequestRows>{{0, 2, 0}}));
  EXPECT_EQ(p.words, 2);
}

TEST(PlanPrefillChunks, EndsAChunkOnTheOwnerOfItsLastRow) {
  // Requests 1 and 3 have no rows: 1 sits between two requests with rows and
  // stays, 3 trails the chunk's last row and is not part of it.
  const Geometry g = make_geometry(test::deepseek_config());
  const std::vector<int32_t> qsl{0, 5, 5, 9, 9};
  const std::vector<int32_t> lens{40, 800, 44, 400000};
  const Planned p = plan(g, {{0, 4, 0, 9}}, qsl, lens);
  ASSERT_EQ(p.plans.size(), 1u);
  EXPECT_EQ(p.plans[0].first_request, 0);
  EXPECT_EQ(p.plans[0].num_reqs, 3);
  EXPECT_EQ(p.plans[0].width, 200);  // 800 / 4: request 3's 100000 is not the chunk's
  EXPECT_EQ(p.pieces, (std::vector<RequestRows>{{0, 5, 0}, {5, 9, 2}}));
  EXPECT_EQ(p.words, 4);
}

TEST(PlanPrefillChunks, DropsAChunkWhoseOwnRequestsHaveNoContext) {
  // Only the empty request 0 has context; the rows' own request has none.
  const Geometry g = make_geometry(test::deepseek_config());
  const std::vector<int32_t> qsl{0, 0, 3};
  const std::vector<int32_t> lens{4000, 3};
  EXPECT_TRUE(plan(g, {{0, 2, 0, 3}}, qsl, lens).plans.empty());
}

TEST(PlanPrefillChunks, SlicesOfAGroupOpenedByEmptyRequestsCarryOnlyTheirOwner) {
  // The robustness issue's step: empty requests 1 and 2 open a group that
  // takes the wide request 3, cut into 61 one-row slices. Each slice is
  // request 3 alone, so the packed words stay within step_buffer_sizes.
  IndexerConfig c = deepseek_v41_config(4);
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 64;
  c.max_logits_mb = 1;
  const Geometry g = make_geometry(c);
  const std::vector<int32_t> qsl{0, 3, 3, 3, 64};
  const std::vector<int32_t> lens{1048576, 0, 0, 1048576};
  const StepPlan p = plan_step(g, qsl, lens);
  ASSERT_EQ(p.prefill.size(), 64u);
  for (std::size_t i = 3; i < p.prefill.size(); ++i) {
    EXPECT_EQ(p.prefill[i].first_request, 3) << i;
    EXPECT_EQ(p.prefill[i].num_reqs, 1) << i;
  }
  EXPECT_EQ(p.num_prefill_query_start_loc_words, 128);
  EXPECT_LE(p.num_prefill_query_start_loc_words, step_buffer_sizes(g).prefill_query_start_loc);
}

}  // namespace
}  // namespace idxplan
