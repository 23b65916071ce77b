// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/plan/launches.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "idxplan/plan/step.hpp"
#include "random_step.hpp"
#include "test_support.hpp"

namespace idxplan {
namespace {

using Words = std::vector<int32_t>;

// The reference's values, straight from the step's inputs: what each
// launch's arrays must hold.
struct Model {
  const Geometry& g;
  const test::RandomStep& s;

  int32_t request_of(int32_t t) const {  // the request owning step token t
    int32_t r = 0;
    while (s.query_start_loc[static_cast<std::size_t>(r) + 1] <= t) ++r;
    return r;
  }
  // Row end of step token t (prefill or decode alike), 0 past the requests.
  int32_t row_end(int32_t t) const {
    if (t >= s.query_start_loc.back()) return 0;
    const int32_t r = request_of(t);
    const auto i = static_cast<std::size_t>(r);
    const int64_t tokens = int64_t{s.seq_lens[i]} - (s.query_start_loc[i + 1] - s.query_start_loc[i]) +
                           (t - s.query_start_loc[i]) + 1;
    return static_cast<int32_t>(std::max<int64_t>(tokens, 0) / g.config().compress_ratio);
  }
  int32_t block_end(int32_t end) const {
    const int32_t b = g.config().candidate_block_size;
    return (end + b - 1) / b;
  }
  int32_t context(int32_t r) const {
    return s.seq_lens[static_cast<std::size_t>(r)] / g.config().compress_ratio;
  }
  const int32_t* engine_row(int32_t r) const {
    return s.block_table.data() + static_cast<std::ptrdiff_t>(r) * s.table_stride;
  }
};

// `table`'s row `row` (of `stride` words) holds request r's first `cols` pages.
::testing::AssertionResult holds_row(const int32_t* table, int32_t stride, int32_t row,
                                     const int32_t* engine, int32_t cols) {
  const int32_t* got = table + static_cast<std::ptrdiff_t>(row) * stride;
  for (int32_t c = 0; c < cols; ++c) {
    if (got[c] != engine[c]) {
      return ::testing::AssertionFailure() << "row " << row << " column " << c << ": " << got[c]
                                           << " != " << engine[c];
    }
  }
  return ::testing::AssertionSuccess();
}

void check_decode(const Model& m, const StepPlan& p, const StepInputs& in, const StepOutputs& out) {
  const DecodeLaunch d = decode_launch(m.g, p, in, out);
  if (p.decode.num_rows == 0) {
    EXPECT_EQ(d.num_seqs, 0);
    return;
  }
  const bool native = p.decode.native.present();
  ASSERT_EQ(d.num_seqs, native ? p.num_decodes : p.decode.num_rows);
  ASSERT_EQ(d.next_n, native ? m.g.native_next_n() : 1);
  const int32_t rows = d.num_seqs * d.next_n;
  ASSERT_EQ(rows, p.decode.num_rows);
  for (int32_t i = 0; i < rows; ++i) {
    const int32_t want = i < p.decode.num_real_rows ? m.row_end(i) : 0;
    ASSERT_EQ(d.row_ends[i], want) << "decode row " << i;
    if (m.g.config().candidate_block_size > 0) {
      ASSERT_EQ(d.block_ends[i], m.block_end(want)) << "decode row " << i;
    } else {
      ASSERT_EQ(d.block_ends, nullptr);
    }
  }
  for (int32_t seq = 0; seq < d.num_seqs; ++seq) {
    // A native sequence's context is its request's; a flattened row's its own length.
    ASSERT_EQ(d.context_lens[seq], native ? m.context(seq) : d.row_ends[seq]) << "sequence " << seq;
  }
  // The table: the engine's in place unless the rows are ragged.
  EXPECT_EQ(d.in_place, !p.decode.ragged());
  if (d.in_place) {
    EXPECT_EQ(d.block_table, in.block_table);
    EXPECT_EQ(d.block_table_stride, in.block_table_stride);
  } else {
    EXPECT_EQ(d.block_table, out.decode_block_table.data);
  }
  EXPECT_EQ(d.max_blocks, p.decode.num_block_cols);
  for (int32_t seq = 0; seq < d.num_seqs; ++seq) {
    const int32_t first_row = seq * d.next_n;
    if (first_row >= p.decode.num_real_rows) continue;  // padding: its rows read nothing
    const int32_t request = native ? seq : m.request_of(first_row);
    ASSERT_TRUE(holds_row(d.block_table, d.block_table_stride, seq, m.engine_row(request), d.max_blocks))
        << "sequence " << seq;
  }
  // The per-row table, where the step has one.
  const bool per_row = p.decode.rows_are_requests || writes_decode_block_table(p, out);
  ASSERT_EQ(d.row_block_table != nullptr, per_row);
  for (int32_t i = 0; per_row && i < p.decode.num_real_rows; ++i) {
    ASSERT_TRUE(holds_row(d.row_block_table, d.row_block_table_stride, i, m.engine_row(m.request_of(i)),
                          d.max_blocks))
        << "row " << i;
  }
  EXPECT_EQ(d.schedule != nullptr, p.decode.schedule.present());
  EXPECT_EQ(d.num_ctas, p.decode.schedule.num_ctas);
  EXPECT_EQ(d.use_gather, p.decode.use_gather);
}

void check_prefill(const Model& m, const StepPlan& p, const StepInputs& in, const StepOutputs& out) {
  const bool blocks = m.g.config().candidate_block_size > 0;
  for (std::size_t i = 0; i < p.prefill.size(); ++i) {
    const PrefillLaunch l = prefill_launch(m.g, p, i, in, out);
    const PrefillPlan& c = p.prefill[i];
    ASSERT_EQ(l.token_start, c.token_start);
    ASSERT_EQ(l.token_end, c.token_end);
    ASSERT_EQ(l.num_reqs, c.num_reqs);
    ASSERT_EQ(l.width, c.width);
    for (int32_t k = 0; k < l.token_end - l.token_start; ++k) {
      const int32_t want = m.row_end(l.token_start + k);
      ASSERT_EQ(l.row_ends[k], want) << "chunk " << i << " row " << k;
      if (blocks) {
        ASSERT_EQ(l.block_ends[k], m.block_end(want)) << "chunk " << i << " row " << k;
      }
    }
    if (!blocks) {
      ASSERT_EQ(l.block_ends, nullptr);
    }
    for (int32_t r = 0; r < l.num_reqs; ++r) {
      ASSERT_EQ(l.context_lens[r], m.context(c.first_request + r)) << "chunk " << i;
    }
    for (int32_t r = 0; r <= l.num_reqs; ++r) {
      const int32_t loc = m.s.query_start_loc[static_cast<std::size_t>(c.first_request + r)];
      ASSERT_EQ(l.query_start_loc[r], std::clamp(loc, l.token_start, l.token_end) - l.token_start)
          << "chunk " << i;
    }
    // The engine's rows, in place, from the chunk's first request on.
    EXPECT_EQ(l.block_table, m.engine_row(c.first_request));
    EXPECT_EQ(l.block_table_stride, in.block_table_stride);
    EXPECT_EQ(l.max_blocks, (c.width + m.g.page_entries() - 1) / m.g.page_entries());
    EXPECT_EQ(l.use_gather, c.use_gather);
  }
  for (std::size_t i = 0; i < p.gather_launches.size(); ++i) {
    const CandidateLaunch l = candidate_launch(m.g, p, i, in, out);
    ASSERT_EQ(*l.context_len, m.context(l.request));
    for (int32_t k = 0; k < l.token_end - l.token_start; ++k) {
      const int32_t want = m.row_end(l.token_start + k);
      ASSERT_EQ(l.row_ends[k], want) << "candidate launch " << i << " row " << k;
      ASSERT_EQ(l.block_ends[k], m.block_end(want)) << "candidate launch " << i << " row " << k;
    }
    EXPECT_EQ(l.block_table, m.engine_row(l.request));
  }
}

TEST(Launches, ViewsHoldTheReferencesValuesOnRandomSteps) {
  const std::vector<Geometry> geometries = test::random_geometries();
  std::vector<test::HostBuffers> buffers;
  for (const Geometry& g : geometries) buffers.emplace_back(g);
  std::mt19937_64 rng(909);
  StepPlan plan;
  int native = 0, in_place_rows = 0, ragged = 0, chunks = 0, candidates = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::size_t gi = static_cast<std::size_t>(i) % geometries.size();
    const Geometry& g = geometries[gi];
    const test::RandomStep s = test::random_step(g, rng);
    plan_step(g, s.query_start_loc, s.seq_lens_upper_bound, s.num_tokens, plan);
    const bool always = i % 3 == 0;
    test::fill_reference(g, plan, s.query_start_loc, s.seq_lens, s.block_table, s.table_stride,
                         buffers[gi], always);
    const StepInputs in = make_step_inputs(s.seq_lens, s.query_start_loc, s.block_table, s.table_stride);
    const StepOutputs out = buffers[gi].outputs(always);
    SCOPED_TRACE(::testing::Message() << "step " << i << " on geometry " << gi);
    const Model m{g, s};
    check_decode(m, plan, in, out);
    check_prefill(m, plan, in, out);
    if (::testing::Test::HasFatalFailure()) return;
    native += plan.decode.native.present();
    in_place_rows += plan.decode.rows_are_requests;
    ragged += plan.decode.ragged();
    chunks += static_cast<int>(plan.prefill.size());
    candidates += static_cast<int>(plan.gather_launches.size());
  }
  std::printf("native %d, rows are requests %d, ragged %d; %d chunks, %d candidate launches\n", native,
              in_place_rows, ragged, chunks, candidates);
  EXPECT_GT(native, 100);
  EXPECT_GT(in_place_rows, 100);
  EXPECT_GT(ragged, 100);
  EXPECT_GT(candidates, 100);
}

TEST(Launches, AStepWithoutDecodesHasNoDecodeLaunch) {
  const Geometry g = make_geometry(test::deepseek_config());
  const StepPlan p = plan_step(g, Words{0, 100}, Words{1000});
  const DecodeLaunch d = decode_launch(g, p, StepInputs{}, StepOutputs{});
  EXPECT_EQ(d.num_seqs, 0);
  EXPECT_EQ(d.block_table, nullptr);
}

TEST(Launches, RefuseAnIndexPastThePlansAndAPlanOfAnotherGeometry) {
  const Geometry g = make_geometry(test::deepseek_config());
  const StepPlan p = plan_step(g, Words{0, 100}, Words{1000});
  ASSERT_EQ(p.prefill.size(), 1u);
  try {
    prefill_launch(g, p, 1, StepInputs{}, StepOutputs{});
    FAIL() << "chunk 1 of 1 was described";
  } catch (const StepError& e) {
    EXPECT_NE(std::string(e.what()).find("chunk 1 of a plan that has 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(candidate_launch(g, p, 1, StepInputs{}, StepOutputs{}), StepError);
  IndexerConfig other = test::deepseek_config();
  other.max_num_seqs = 8;
  EXPECT_THROW(decode_launch(make_geometry(other), p, StepInputs{}, StepOutputs{}), StepError);
}

TEST(Launches, FlydslViewsNameEachGridsCtaInfoAndSafe) {
  const Geometry g = test::flydsl_geometries()[0];
  // Two MTP decodes (flattened), then two prompts, cut into chunks under a 1 MiB budget.
  const std::vector<int32_t> qsl{0, 2, 4, 1004, 3004};
  const std::vector<int32_t> lens{9000, 300, 40000, 2000};
  const StepPlan p = plan_step(g, qsl, lens);
  ASSERT_GT(p.prefill.size(), 2u);
  test::HostBuffers b(g);
  const std::vector<int32_t> table(4 * static_cast<std::size_t>(g.max_blocks_per_seq()), 0);
  const StepInputs in = make_step_inputs(lens, qsl, table, g.max_blocks_per_seq());
  const StepOutputs out = b.outputs();
  const DecodeLaunch d = decode_launch(g, p, in, out);
  EXPECT_EQ(d.num_seqs, 4);  // rows, flattened
  EXPECT_EQ(d.next_n, 1);
  EXPECT_EQ(d.context_lens, out.decode_row_lens.data);
  EXPECT_EQ(d.schedule, out.decode_schedule.data);
  EXPECT_EQ(d.num_ctas, std::min(4 * flydsl_fp4::chunks_cap(g.logits_width(), 256), 1024));
  EXPECT_EQ(d.safe, out.schedule_safe.data);
  EXPECT_EQ(d.max_seq_len, g.logits_width());
  int64_t words = 0;
  for (std::size_t k = 0; k < p.prefill.size(); ++k) {
    EXPECT_EQ(p.prefill[k].grid.words, words);  // one chunk's cta_info after the other
    words += 6 * int64_t{p.prefill[k].grid.ctas};
    const PrefillLaunch l = prefill_launch(g, p, k, in, out);
    EXPECT_EQ(l.schedule, out.prefill_schedule.data + p.prefill[k].grid.words);
    EXPECT_EQ(l.num_ctas, std::max(1024, l.token_end - l.token_start));
    EXPECT_EQ(l.safe, out.schedule_safe.data + 1 + k);
    EXPECT_EQ(l.max_blocks, flydsl_fp4::table_cols(p.prefill[k].max_seq_len / 4, g.page_entries()));
  }
  EXPECT_EQ(p.num_prefill_schedule_words, words);
}

}  // namespace
}  // namespace idxplan
