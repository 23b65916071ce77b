// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/plan/step.hpp"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "random_step.hpp"
#include "test_support.hpp"

namespace idxplan {
namespace {

using test::deepseek_config;
using Words = std::vector<int32_t>;

std::string step_error(const Geometry& g, const Words& qsl, const Words& lens,
                       int64_t num_tokens = kUnpaddedTokens) {
  return test::error_of<StepError>([&] { plan_step(g, qsl, lens, num_tokens); });
}

TEST(PlanStep, PlansTheDesignExample) {
  const Geometry g = make_geometry(deepseek_config());
  const Words qsl{0, 2, 4, 8196};
  const Words lens{9000, 120000, 300000};
  const StepPlan p = plan_step(g, qsl, lens);
  EXPECT_EQ(p.num_decodes, 2);
  EXPECT_EQ(p.num_decode_tokens, 4);
  EXPECT_EQ(p.num_prefills, 1);
  EXPECT_EQ(p.num_prefill_tokens, 8192);
  EXPECT_EQ(p.max_seq_len, 300000);
  EXPECT_EQ(p.decode.native, (NativeDecode{2, 2}));
  EXPECT_FALSE(p.decode.schedule.present());  // 2 sequences: too few
  EXPECT_TRUE(p.decode.use_gather);            // 75000 >= 3 x 16384
  // 75000 columns: 1789 rows of logits fit 512 MiB, so five slices.
  ASSERT_EQ(p.prefill.size(), 5u);
  EXPECT_EQ(p.prefill[0].token_start, 4);
  EXPECT_EQ(p.prefill[0].token_end, 4 + 1789);
  EXPECT_EQ(p.prefill[4].token_end, 8196);
  for (const PrefillPlan& c : p.prefill) {
    EXPECT_EQ(c.first_request, 2);
    EXPECT_EQ(c.width, 75000);
    EXPECT_TRUE(c.use_gather);
  }
  // The slices join again: 8192 rows fit one consumer launch.
  EXPECT_EQ(p.gather_launches, (std::vector<GatherLaunch>{{4, 8196, 2}}));
  EXPECT_EQ(p.num_prefill_query_start_loc_words, 10);
}

TEST(PlanStep, NoTokensIsAnEmptyPlan) {
  const Geometry g = make_geometry(deepseek_config());
  const StepPlan p = plan_step(g, Words{0, 0, 0}, Words{5, 7});
  EXPECT_EQ(p.num_reqs, 2);
  EXPECT_EQ(p.num_decodes, 0);
  EXPECT_EQ(p.num_prefills, 0);
  EXPECT_EQ(p.decode, DecodePlan{});
  EXPECT_TRUE(p.prefill.empty());
  const StepPlan none = plan_step(g, Words{0}, Words{});
  EXPECT_EQ(none.num_reqs, 0);
}

TEST(PlanStep, AStepWithNoRequestsIsEmptyWhateverItsPadding) {
  // Padding tokens past the last request belong to a request's rows; with no
  // request they belong to none, and nothing launches.
  const Geometry g = make_geometry(deepseek_config());
  const StepPlan p = plan_step(g, Words{0}, Words{}, 5);
  EXPECT_EQ(p.num_tokens, 5);
  EXPECT_EQ(p.num_decodes, 0);
  EXPECT_EQ(p.num_decode_tokens, 0);
  EXPECT_EQ(p.num_prefills, 0);
  EXPECT_EQ(p.num_prefill_tokens, 0);
  EXPECT_EQ(p.decode, DecodePlan{});
  EXPECT_TRUE(p.prefill.empty());
}

TEST(PlanStep, AFullGraphStepOfPaddedDecodesRunsNative) {
  const Geometry g = make_geometry(deepseek_config());
  // 6 real MTP decodes padded to 8 requests and 16 tokens.
  const Words qsl{0, 2, 4, 6, 8, 10, 12, 12, 12};
  const Words lens{1000, 2000, 3000, 4000, 5000, 6000, 0, 0};
  const StepPlan p = plan_step(g, qsl, lens, 16);
  EXPECT_EQ(p.num_decodes, 8);
  EXPECT_EQ(p.decode.num_rows, 16);
  EXPECT_EQ(p.decode.num_real_rows, 12);
  EXPECT_EQ(p.decode.native, (NativeDecode{2, 8}));
  EXPECT_EQ(p.decode.schedule, schedule_shape(g, 8, 2, true));
  EXPECT_FALSE(p.decode.use_gather);
  EXPECT_EQ(p.decode.num_block_cols, 47);  // ceil(6000 / 128)
}

TEST(PlanStep, ARaggedDecodeStepRunsFlattened) {
  const Geometry g = make_geometry(deepseek_config());
  const Words qsl{0, 2, 3, 5, 6};
  const Words lens{1000, 2000, 3000, 4000};
  const StepPlan p = plan_step(g, qsl, lens);
  EXPECT_FALSE(p.decode.native.present());
  EXPECT_EQ(p.decode.schedule, schedule_shape(g, 6, 1, false));
  EXPECT_EQ(p.decode.schedule.num_seqs, 6);
}

TEST(PlanStep, PaddingOfAMixedStepBelongsToThePrefills) {
  const Geometry g = make_geometry(deepseek_config());
  const StepPlan p = plan_step(g, Words{0, 2, 12}, Words{100, 500}, 16);
  EXPECT_EQ(p.num_decode_tokens, 2);
  EXPECT_EQ(p.num_prefill_tokens, 14);
  ASSERT_EQ(p.prefill.size(), 1u);
  EXPECT_EQ(p.prefill[0].token_end, 12);
}

TEST(PlanStep, ChunksStartOnTheOwnerOfTheirFirstRow) {
  // Request 1 is empty and wide enough to end the first group, so the second
  // group's split starts on it; its chunks start on request 2, which owns
  // their rows (docs/design.md 5.6).
  IndexerConfig c = deepseek_config();
  c.num_speculative_tokens = 0;
  c.max_logits_mb = 1;  // 262144 / width rows a chunk
  const Geometry g = make_geometry(c);
  const Words qsl{0, 50, 50, 54};
  const Words lens{4000, 400000, 1000};
  const StepPlan p = plan_step(g, qsl, lens);
  ASSERT_EQ(p.num_prefills, 3);
  EXPECT_EQ(p.splits, (std::vector<ChunkSplit>{{0, 1, 0, 50}, {1, 3, 0, 2}, {1, 3, 2, 4}}));
  ASSERT_EQ(p.prefill.size(), 3u);
  EXPECT_EQ(p.prefill[1].first_request, 2);
  EXPECT_EQ(p.prefill[1].token_start, 50);
  EXPECT_EQ(p.prefill[1].token_end, 52);
  EXPECT_EQ(p.prefill[1].num_reqs, 1);
  EXPECT_EQ(p.prefill[1].width, 250);
  EXPECT_EQ(p.prefill[1].query_start_loc_offset, 2);
  EXPECT_EQ(p.pieces[static_cast<std::size_t>(p.prefill[1].first_piece)], (RequestRows{0, 2, 0}));
  EXPECT_EQ(p.num_prefill_query_start_loc_words, 2 + 2 + 2);
  // Both slices of request 2 fold into one group.
  EXPECT_EQ(p.prefill[1].max_seq_len, 1000);
  EXPECT_EQ(p.chunk_groups, (std::vector<ChunkGroup>{{0, 1, 0, 50, 50, 0, 4000}, {2, 1, 50, 54, 2, 2, 1000}}));
}

TEST(PlanStep, AMillionTokenContextIsCutAndJoinedAgain) {
  const Geometry g = make_geometry(deepseek_config());
  // A 1M-token request prefilling its last 8192 tokens: 262144 columns,
  // so 512 rows a chunk and 16 chunks.
  const Words qsl{0, 8192};
  const Words lens{1048576};
  const StepPlan p = plan_step(g, qsl, lens);
  ASSERT_EQ(p.prefill.size(), 16u);
  for (std::size_t i = 0; i < p.prefill.size(); ++i) {
    EXPECT_EQ(p.prefill[i].token_start, 512 * static_cast<int32_t>(i));
    EXPECT_EQ(p.prefill[i].token_end - p.prefill[i].token_start, 512);
    EXPECT_EQ(p.prefill[i].width, 262144);
    EXPECT_LE(int64_t{4} * 512 * p.prefill[i].width, g.max_logits_bytes());
  }
  EXPECT_EQ(p.gather_launches, (std::vector<GatherLaunch>{{0, 8192, 0}}));
}

TEST(PlanStep, AWideRequestSplitsIntoMoreGatherLaunchesThanItsBudgetHolds) {
  IndexerConfig c = deepseek_config();
  c.max_logits_mb = 64;  // 1024 consumer rows, 64 dense rows at 262144 columns
  c.max_num_batched_tokens = 4096;
  const Geometry g = make_geometry(c);
  const StepPlan p = plan_step(g, Words{0, 3000}, Words{1048576});
  EXPECT_EQ(p.prefill.size(), 47u);  // ceil(3000 / 64)
  EXPECT_EQ(p.gather_launches,
            (std::vector<GatherLaunch>{{0, 1024, 0}, {1024, 2048, 0}, {2048, 3000, 0}}));
}

TEST(PlanStep, AModelNeutralIndexerHasNoBlockEndsOrGathers) {
  IndexerConfig c = deepseek_config();
  c.sparse_logits = false;
  c.candidate_block_size = 0;
  c.candidate_topk_blocks = 0;
  const Geometry g = make_geometry(c);
  const StepPlan p = plan_step(g, Words{0, 2, 4, 8196}, Words{9000, 120000, 300000});
  EXPECT_FALSE(p.decode.use_gather);
  EXPECT_TRUE(p.gather_launches.empty());
  for (const PrefillPlan& chunk : p.prefill) EXPECT_FALSE(chunk.use_gather);
}

TEST(PlanStep, ReplanningIntoOnePlanGivesTheSamePlan) {
  const Geometry g = make_geometry(deepseek_config());
  StepPlan reused;
  reserve(reused, g);
  plan_step(g, Words{0, 8192}, Words{1048576}, kUnpaddedTokens, reused);
  plan_step(g, Words{0, 2, 4, 8196}, Words{9000, 120000, 300000}, kUnpaddedTokens, reused);
  EXPECT_EQ(reused, plan_step(g, Words{0, 2, 4, 8196}, Words{9000, 120000, 300000}));
}

TEST(PlanStep, TakesAnyIntegerRange) {
  const Geometry g = make_geometry(deepseek_config());
  const std::vector<int64_t> qsl{0, 2, 4, 8196};
  const int32_t lens[] = {9000, 120000, 300000};
  const Span<const int32_t> span(lens, 3);
  EXPECT_EQ(plan_step(g, qsl, span), plan_step(g, Words{0, 2, 4, 8196}, Words{9000, 120000, 300000}));
}

TEST(PlanStep, RejectsMalformedSteps) {
  const Geometry g = make_geometry(deepseek_config());
  EXPECT_NE(step_error(g, Words{0, 2}, Words{5, 5}).find("query_start_loc has 2 entries for 2"),
            std::string::npos);
  EXPECT_NE(step_error(g, Words{1, 2}, Words{5}).find("query_start_loc[0] is 1"), std::string::npos);
  EXPECT_NE(step_error(g, Words{0, 4, 3}, Words{5, 5}).find("decreases at request 1"),
            std::string::npos);
  EXPECT_NE(step_error(g, Words{0, 4, 8}, Words{5, 3})
                .find("seq_lens_upper_bound[1]=3 is below request 1's query length 4"),
            std::string::npos);
  EXPECT_NE(step_error(g, Words{0, 1, 2}, Words{5, -5}).find("seq_lens_upper_bound[1]=-5 is negative"),
            std::string::npos);
  EXPECT_NE(step_error(g, Words{0, 1}, Words{1048577})
                .find("seq_lens_upper_bound[0]=1048577 is past max_model_len=1048576"),
            std::string::npos);
  EXPECT_NE(step_error(g, Words{0, 4}, Words{5}, 3).find("num_tokens=3 is below"),
            std::string::npos);
  EXPECT_NE(step_error(g, Words{0, 4}, Words{5}, 70000).find("past max_num_batched_tokens"),
            std::string::npos);
  const Words many(1025, 1);
  Words qsl(1026);
  for (std::size_t i = 0; i < qsl.size(); ++i) qsl[i] = static_cast<int32_t>(i);
  EXPECT_NE(step_error(g, qsl, many).find("1025 requests, past max_num_seqs=1024"),
            std::string::npos);
}

// check_step finds every fault in one pass, then names the first request's
// first fault, as a walk that stops at it would.
TEST(PlanStep, NamesTheFirstFaultOfSeveral) {
  const Geometry g = make_geometry(deepseek_config());
  EXPECT_NE(step_error(g, Words{0, 1, 2, 1, 9}, Words{5, -5, 5, 1}).find("seq_lens_upper_bound[1]=-5 is negative"),
            std::string::npos);
  EXPECT_NE(step_error(g, Words{0, 1, 2, 1, 9}, Words{5, 5, 5, 1}).find("decreases at request 2"),
            std::string::npos);
  EXPECT_NE(step_error(g, Words{0, 1, 2, 3, 9}, Words{5, 5, 5, 1})
                .find("seq_lens_upper_bound[3]=1 is below request 3's query length 6"),
            std::string::npos);
}

// plan_step's one pass splits the step and finds native decodes as the
// rules' own walks do (split_decodes_and_prefills, native_decode).
TEST(PlanStep, SplitsAndFindsNativeDecodesAsTheRulesWalks) {
  std::mt19937_64 rng(11);
  int native = 0, mixed = 0;
  for (const Geometry& g : test::random_geometries()) {
    for (int i = 0; i < 400; ++i) {
      const test::RandomStep s = test::random_step(g, rng);
      const StepPlan plan = plan_step(g, s.query_start_loc, s.seq_lens_upper_bound, s.num_tokens);
      const BatchSplit split = split_decodes_and_prefills(s.query_start_loc, plan.num_tokens, g.decode_threshold());
      ASSERT_EQ(plan.num_decodes, split.num_decodes) << "step " << i;
      ASSERT_EQ(plan.num_decode_tokens, split.num_decode_tokens) << "step " << i;
      ASSERT_EQ(plan.num_prefills, split.num_prefills) << "step " << i;
      ASSERT_EQ(plan.num_prefill_tokens, split.num_prefill_tokens) << "step " << i;
      if (split.num_decodes > 0) {
        const NativeDecode want =
            native_decode(s.query_start_loc, split.num_decodes, split.num_decode_tokens, g.native_next_n());
        ASSERT_EQ(plan.decode.native.next_n, want.next_n) << "step " << i;
        ASSERT_EQ(plan.decode.native.num_seqs, want.num_seqs) << "step " << i;
      }
      native += plan.decode.native.present();
      mixed += plan.num_decodes > 0 && plan.num_prefills > 0;
    }
  }
  EXPECT_GT(native, 100);
  EXPECT_GT(mixed, 100);
}

TEST(PlanStep, RejectsMoreDecodeRowsThanTheBuffersHold) {
  IndexerConfig c = deepseek_config();
  c.max_num_seqs = 4;  // 8 decode rows
  const Geometry g = make_geometry(c);
  EXPECT_NE(step_error(g, Words{0, 2, 4}, Words{10, 10}, 9).find("9 rows, past the 8"),
            std::string::npos);
}

TEST(PlanStep, AThrowingStepLeavesThePlanAsItWas) {
  IndexerConfig c = deepseek_config();
  c.max_num_seqs = 4;  // 8 decode rows
  const Geometry g = make_geometry(c);
  StepPlan plan;
  plan_step(g, Words{0, 2, 4, 300}, Words{10, 10, 5000}, kUnpaddedTokens, plan);
  const StepPlan before = plan;
  // Refused at each of plan_step's checks: the decode rows, a length, the shape.
  EXPECT_THROW(plan_step(g, Words{0, 2, 4}, Words{10, 10}, 9, plan), StepError);
  EXPECT_EQ(plan, before);
  EXPECT_THROW(plan_step(g, Words{0, 2, 4}, Words{10, -1}, kUnpaddedTokens, plan), StepError);
  EXPECT_EQ(plan, before);
  EXPECT_THROW(plan_step(g, Words{0, 2}, Words{10, 10}, kUnpaddedTokens, plan), StepError);
  EXPECT_EQ(plan, before);
}

TEST(PlanStep, RecordsTheGeometryItWasMadeWith) {
  const Geometry g = make_geometry(deepseek_config());
  EXPECT_EQ(plan_step(g, Words{0, 2}, Words{100}).geometry, g.fingerprint());
  EXPECT_EQ(StepPlan{}.geometry, 0u);
}

TEST(PlanStep, RejectsInt64InputsPastInt32) {
  const Geometry g = make_geometry(deepseek_config());
  const std::vector<int64_t> qsl{0, int64_t{1} << 32};
  const std::vector<int64_t> lens{int64_t{1} << 33};
  EXPECT_THROW(plan_step(g, qsl, lens), StepError);
}

}  // namespace
}  // namespace idxplan
