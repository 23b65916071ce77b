// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/plan/step_io.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "idxplan/plan/buffers.hpp"
#include "idxplan/plan/step.hpp"
#include "test_support.hpp"

namespace idxplan {
namespace {

using test::HostBuffers;
using Words = std::vector<int32_t>;
using test::slice;
using test::small_config;

// The message check_step_buffers gives, or "no error".
std::string buffers_error(const Geometry& g, const StepPlan& plan, const StepInputs& in,
                          const StepOutputs& out) {
  return test::error_of<StepError>([&] { check_step_buffers(g, plan, in, out); });
}

TEST(MakeStepInputs, TakesEachExtentFromItsSpan) {
  const Words lens{1, 2, 3};
  const Words qsl{0, 1, 2, 3};
  const Words table(2 * 8 + 5);  // two whole rows of 8 and a partial third
  const StepInputs in = make_step_inputs(lens, qsl, table, 8);
  EXPECT_EQ(in.seq_lens, lens.data());
  EXPECT_EQ(in.num_seq_lens, 3);
  EXPECT_EQ(in.query_start_loc, qsl.data());
  EXPECT_EQ(in.num_query_start_loc, 4);
  EXPECT_EQ(in.block_table, table.data());
  EXPECT_EQ(in.block_table_rows, 2);  // a partial row is not a row
  EXPECT_EQ(in.block_table_cols, 8);
  EXPECT_EQ(in.block_table_stride, 8);
  EXPECT_EQ(test::error_of<StepError>([&] { make_step_inputs(lens, qsl, table, 0); }),
            "make_step_inputs: block_table_stride=0 for a block table of 21 words");
  EXPECT_EQ(make_step_inputs(lens, qsl, Span<const int32_t>(), 0).block_table_rows, 0);
}

TEST(CheckStepBuffers, NamesEachBufferTooSmallOrMissing) {
  IndexerConfig c = small_config();
  c.sparse_logits = true;
  c.candidate_topk_blocks = 4;
  c.max_logits_mb = 1;
  const Geometry g = make_geometry(c);
  // Three one-row decodes and a 2-row one (ragged), then a 5-row prefill.
  const Words qsl{0, 1, 2, 3, 5, 10};
  const Words lens{300, 40, 41, 900, 4000};
  const StepPlan plan = plan_step(g, qsl, lens);
  ASSERT_TRUE(plan.decode.ragged());
  ASSERT_TRUE(plan.decode.schedule.present());
  const Words table(5 * 32, 1);
  const StepInputs in = make_step_inputs(lens, qsl, table, 32);
  HostBuffers host(g);
  const StepOutputs ok = host.outputs();
  EXPECT_EQ(buffers_error(g, plan, in, ok), "no error");

  const auto shrunk = [&](OutputBuffer StepOutputs::*field, int64_t capacity) {
    StepOutputs out = ok;
    (out.*field).capacity = capacity;
    return buffers_error(g, plan, in, out);
  };
  EXPECT_EQ(shrunk(&StepOutputs::context_lens, 4),
            "StepOutputs.context_lens holds 4 words, and the step writes 5 (a context a request)");
  EXPECT_EQ(shrunk(&StepOutputs::decode_row_lens, 4),
            "StepOutputs.decode_row_lens holds 4 words, and the step writes 5 (a length a decode row)");
  EXPECT_NE(shrunk(&StepOutputs::decode_block_ends, 0).find("decode_block_ends holds 0 words"),
            std::string::npos);
  // Four rows of the table's stride and the fifth's 8 copied columns (the
  // longest decode, 900 tokens, is 8 pages).
  ASSERT_EQ(plan.decode.num_block_cols, 8);
  const int64_t table_words = 4 * int64_t{g.max_blocks_per_seq()} + 8;
  EXPECT_EQ(shrunk(&StepOutputs::decode_block_table, table_words), "no error");
  EXPECT_NE(shrunk(&StepOutputs::decode_block_table, table_words - 1)
                .find(fmt::format("holds {} words, and the step writes {}", table_words - 1, table_words)),
            std::string::npos);
  EXPECT_NE(shrunk(&StepOutputs::prefill_row_ends, 4).find("prefill_row_ends holds 4 words, and the step writes 5"),
            std::string::npos);
  EXPECT_NE(shrunk(&StepOutputs::prefill_block_ends, 4).find("prefill_block_ends"), std::string::npos);
  EXPECT_NE(shrunk(&StepOutputs::prefill_query_start_loc, 1).find("prefill_query_start_loc holds 1 words, and the step writes 2"),
            std::string::npos);
  EXPECT_NE(shrunk(&StepOutputs::decode_schedule, 31)
                .find(fmt::format("decode_schedule holds 31 words, and the step writes {}",
                                  4 * plan.decode.schedule.num_ctas)),
            std::string::npos);

  StepOutputs out = ok;
  out.prefill_row_ends.data = nullptr;
  EXPECT_EQ(buffers_error(g, plan, in, out),
            "StepOutputs.prefill_row_ends is null, and the step writes 5 words of it (a row end a prefill row)");
  out = ok;
  out.decode_block_table_stride = 7;
  EXPECT_EQ(buffers_error(g, plan, in, out),
            "StepOutputs.decode_block_table_stride=7 is below the 8 columns a decode row copies");

  const Words narrow_table(5 * 16, 1);
  const StepInputs narrow = make_step_inputs(lens, qsl, narrow_table, 16);
  EXPECT_EQ(buffers_error(g, plan, narrow, ok),
            "StepInputs.block_table_cols=16 is below the 32 columns the step's launches read (the "
            "pages of its longest upper bound, 4000 tokens)");
  StepInputs missing = in;
  missing.seq_lens = nullptr;
  EXPECT_EQ(buffers_error(g, plan, missing, ok),
            "StepInputs.seq_lens is null, and the step reads 5 of it (a length a request)");
  missing = in;
  missing.block_table = nullptr;
  EXPECT_NE(buffers_error(g, plan, missing, ok).find("StepInputs.block_table is null"), std::string::npos);
  // fill_step_buffers checks first and writes nothing.
  EXPECT_THROW(fill_step_buffers(g, plan, narrow, ok), StepError);
  EXPECT_EQ(slice(host.context_lens, 5), Words(5, -7));
}

// A 4-request ragged step (one request with 2 rows), as an engine hands it
// over with arrays too short: the extents say so, and nothing is read.
struct RaggedStep {
  Geometry g = make_geometry([] {
    IndexerConfig c = small_config();
    c.num_speculative_tokens = 1;
    return c;
  }());
  Words qsl{0, 1, 3, 4, 5};
  Words lens{1250, 100, 15000 / 8, 101};
  StepPlan plan = plan_step(g, qsl, lens);
  Words table = Words(4 * 32, 3);
};

TEST(CheckStepBuffers, RefusesABlockTableWithFewerRowsThanRequests) {
  // Before extents, the CPU fill copied the words past a 2-row table into
  // decode_block_table ([1, 0, 835701192] in the run).
  RaggedStep s;
  ASSERT_TRUE(s.plan.decode.ragged());
  HostBuffers host(s.g);
  const Words two_rows(2 * 32, 3);
  const StepInputs in = make_step_inputs(s.lens, s.qsl, two_rows, 32);
  EXPECT_EQ(buffers_error(s.g, s.plan, in, host.outputs()),
            "StepInputs.block_table_rows=2 is short: the step reads 4 (a row a request)");
  EXPECT_THROW(fill_step_buffers(s.g, s.plan, in, host.outputs()), StepError);
  EXPECT_EQ(slice(host.decode_block_table, 8), Words(8, -7));
}

TEST(CheckStepBuffers, RefusesSeqLensOrQueryStartLocShorterThanTheRequests) {
  RaggedStep s;
  HostBuffers host(s.g);
  const Words one{1250};
  EXPECT_EQ(buffers_error(s.g, s.plan, make_step_inputs(one, s.qsl, s.table, 32), host.outputs()),
            "StepInputs.num_seq_lens=1 is short: the step reads 4 (a length a request)");
  const Words four(s.qsl.begin(), s.qsl.end() - 1);
  EXPECT_EQ(buffers_error(s.g, s.plan, make_step_inputs(s.lens, four, s.table, 32), host.outputs()),
            "StepInputs.num_query_start_loc=4 is short: the step reads 5 (the requests' offsets)");
  EXPECT_EQ(buffers_error(s.g, s.plan, make_step_inputs(s.lens, s.qsl, s.table, 32), host.outputs()), "no error");
}

TEST(CheckStepBuffers, RefusesRowsThatOverlapOrHoldTooFewColumns) {
  RaggedStep s;
  HostBuffers host(s.g);
  StepInputs in = make_step_inputs(s.lens, s.qsl, s.table, 32);
  in.block_table_stride = 16;
  EXPECT_EQ(buffers_error(s.g, s.plan, in, host.outputs()),
            "StepInputs.block_table_stride=16 is below its block_table_cols=32: the rows overlap");
  in = make_step_inputs(s.lens, s.qsl, s.table, 32);
  in.block_table_cols = 12;  // the longest bound, 1875 tokens, is 15 pages
  EXPECT_EQ(buffers_error(s.g, s.plan, in, host.outputs()),
            "StepInputs.block_table_cols=12 is below the 15 columns the step's launches read (the "
            "pages of its longest upper bound, 1875 tokens)");
}

TEST(CheckStepBuffers, RefusesAPlanOfAnotherGeometry) {
  const Geometry g = make_geometry(small_config());
  IndexerConfig wider = small_config();
  wider.max_num_batched_tokens = 4096;
  const Geometry other = make_geometry(wider);
  const Words qsl{0, 2000};
  const Words lens{4000};
  const StepPlan plan = plan_step(other, qsl, lens);
  HostBuffers host(g);  // 64 prefill rows, for a plan of 2000
  const Words table(32, 1);
  const StepInputs in = make_step_inputs(lens, qsl, table, 32);
  const std::string e = buffers_error(g, plan, in, host.outputs());
  EXPECT_NE(e.find("the plan was made with another Geometry"), std::string::npos) << e;
  EXPECT_THROW(fill_step_buffers(g, plan, in, host.outputs()), StepError);
}

TEST(CheckStepBuffers, AStepThatReadsNothingNeedsNoPointers) {
  const Geometry g = make_geometry(small_config());
  const StepPlan plan = plan_step(g, Words{0}, Words{});
  EXPECT_EQ(buffers_error(g, plan, StepInputs{}, StepOutputs{}), "no error");
}

TEST(CheckStepBuffers, TakesPlanSizedBuffersOfARaggedStepOfPaddingOnly) {
  // Two decodes with no rows and bounds of 0, and three graph padding rows:
  // ragged, but no row copies a column, so the table gets no word.
  IndexerConfig c = test::deepseek_config();
  c.num_speculative_tokens = 1;
  c.adaptive_verification = true;
  const Geometry g = make_geometry(c);
  const Words qsl{0, 0, 0};
  const Words lens{0, 0};
  const StepPlan plan = plan_step(g, qsl, lens, 3);
  ASSERT_TRUE(plan.decode.ragged());
  ASSERT_EQ(plan.decode.num_block_cols, 0);
  const StepBufferSizes sizes = step_buffer_sizes(plan);
  EXPECT_EQ(sizes.decode_block_table, 0);
  // The engine's own stride: the rows would be that far apart, had they columns.
  HostStepBuffers host(sizes, g.max_blocks_per_seq(), -7);
  const Words table(static_cast<std::size_t>(2 * g.max_blocks_per_seq()), 5);
  const StepInputs in = make_step_inputs(lens, qsl, table, g.max_blocks_per_seq());
  EXPECT_EQ(buffers_error(g, plan, in, host.outputs()), "no error");
  fill_step_buffers(g, plan, in, host.outputs());
  EXPECT_EQ(host.decode_row_lens, (Words{0, 0, 0}));
  EXPECT_TRUE(host.decode_block_table.empty());
}

std::string outputs_error(const Geometry& g, const StepOutputs& out) {
  return test::error_of<StepError>([&] { check_step_outputs(g, out); });
}

TEST(CheckStepOutputs, TakesBuffersOfStepBufferSizes) {
  IndexerConfig c = small_config();
  c.sparse_logits = true;
  c.candidate_topk_blocks = 4;
  const Geometry g = make_geometry(c);
  HostBuffers host(g);
  EXPECT_EQ(outputs_error(g, host.outputs()), "no error");
  // Without candidate blocks, the block-end buffers may be absent.
  IndexerConfig neutral = small_config();
  neutral.candidate_block_size = 0;
  const Geometry plain = make_geometry(neutral);
  HostBuffers plain_host(plain);
  StepOutputs out = plain_host.outputs();
  out.decode_block_ends = out.prefill_block_ends = OutputBuffer{};
  EXPECT_EQ(outputs_error(plain, out), "no error");
}

TEST(CheckStepOutputs, RefusesAtStartWhatTheFirstBigStepWouldOverrun) {
  // Sized for decode steps: a mixed step's prefill rows would fail only
  // when it came. check_step_outputs fails at engine start.
  IndexerConfig c = small_config();
  c.sparse_logits = true;
  c.candidate_topk_blocks = 4;
  const Geometry g = make_geometry(c);
  HostBuffers host(g);
  const StepBufferSizes sizes = step_buffer_sizes(g);
  const auto shrunk = [&](OutputBuffer StepOutputs::*field) {
    StepOutputs out = host.outputs();
    (out.*field).capacity -= 1;
    return outputs_error(g, out);
  };
  EXPECT_EQ(shrunk(&StepOutputs::prefill_row_ends),
            fmt::format("StepOutputs.prefill_row_ends holds {} words; the geometry's steps write up to {} "
                        "(max_num_batched_tokens): size it by step_buffer_sizes",
                        sizes.prefill_rows - 1, sizes.prefill_rows));
  EXPECT_NE(shrunk(&StepOutputs::context_lens).find("StepOutputs.context_lens holds 15 words"), std::string::npos);
  EXPECT_NE(shrunk(&StepOutputs::decode_row_lens).find("decode_row_lens"), std::string::npos);
  EXPECT_NE(shrunk(&StepOutputs::decode_block_ends).find("decode_block_ends"), std::string::npos);
  EXPECT_NE(shrunk(&StepOutputs::decode_block_table).find("decode_block_table"), std::string::npos);
  EXPECT_NE(shrunk(&StepOutputs::prefill_block_ends).find("prefill_block_ends"), std::string::npos);
  EXPECT_NE(shrunk(&StepOutputs::prefill_query_start_loc).find("prefill_query_start_loc"), std::string::npos);
  EXPECT_NE(shrunk(&StepOutputs::decode_schedule).find("decode_schedule"), std::string::npos);

  StepOutputs out = host.outputs();
  out.decode_schedule.data = nullptr;
  EXPECT_EQ(outputs_error(g, out),
            fmt::format("StepOutputs.decode_schedule is null; the geometry's steps write up to {} words "
                        "of it (the schedule's most slots)",
                        sizes.decode_schedule));
  out = host.outputs();
  out.decode_block_table_stride = g.max_blocks_per_seq() - 1;
  EXPECT_EQ(outputs_error(g, out),
            fmt::format("StepOutputs.decode_block_table_stride={} is below max_blocks_per_seq={}, the "
                        "columns a decode row may copy",
                        g.max_blocks_per_seq() - 1, g.max_blocks_per_seq()));
}

}  // namespace
}  // namespace idxplan
