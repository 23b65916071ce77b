// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// Properties of plan_step and the CPU reference over seeded random steps,
// and a literal model of the reference's gather planning to compare with.

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "idxplan/idxplan.hpp"
#include "random_step.hpp"
#include "test_support.hpp"

namespace idxplan {
namespace {

constexpr int kSteps = 10000;

// The reference's plan_gather_launches, as written there: runs of row lists
// joined across chunks, concatenated, then cut.
std::vector<GatherLaunch> model_gather_launches(const StepPlan& p, int32_t gather_rows) {
  struct Run {
    int32_t token_start;
    int32_t request;
    std::vector<int32_t> rows;  // step tokens
  };
  std::vector<Run> runs;
  bool has_last = false;
  int32_t last_request = 0, last_token = 0;
  for (const PrefillPlan& c : p.prefill) {
    if (!c.use_gather) {
      has_last = false;
      continue;
    }
    for (int32_t k = 0; k < c.num_pieces; ++k) {
      const RequestRows& piece = p.pieces[static_cast<std::size_t>(c.first_piece + k)];
      const int32_t request = c.first_request + piece.request;
      const int32_t t_lo = c.token_start + piece.first_row;
      if (!has_last || last_request != request || last_token != t_lo) {
        runs.push_back(Run{t_lo, request, {}});
      }
      for (int32_t row = piece.first_row; row < piece.end_row; ++row) {
        runs.back().rows.push_back(c.token_start + row);
      }
      has_last = true;
      last_request = request;
      last_token = c.token_start + piece.end_row;
    }
  }
  std::vector<GatherLaunch> out;
  for (const Run& run : runs) {
    const auto n = static_cast<int32_t>(run.rows.size());
    for (int32_t lo = 0; lo < n; lo += gather_rows) {
      out.push_back(GatherLaunch{run.token_start + lo, run.token_start + std::min(lo + gather_rows, n),
                                 run.request});
    }
  }
  return out;
}

void check_prefill(const Geometry& g, const test::RandomStep& s, const StepPlan& p,
                   const test::HostBuffers& b) {
  const auto& qsl = s.query_start_loc;
  const int32_t first = p.num_decode_tokens;
  const int32_t last = qsl.back();
  // Every prefill row in exactly one split; chunks are the splits with context.
  std::vector<int> in_split(static_cast<std::size_t>(std::max(last - first, 0)), 0);
  std::size_t kept = 0;
  for (const ChunkSplit& sp : p.splits) {
    const int32_t base = qsl[static_cast<std::size_t>(sp.request_begin)];
    const int32_t t0 = base + sp.query_begin;
    const int32_t t1 = base + sp.query_end;
    ASSERT_LT(t0, t1);
    for (int32_t t = t0; t < t1; ++t) {
      ASSERT_GE(t, first);
      ASSERT_LT(t, last);
      // The row belongs to one of the split's requests.
      ASSERT_LE(qsl[static_cast<std::size_t>(sp.request_begin)], t);
      ASSERT_GT(qsl[static_cast<std::size_t>(sp.request_end)], t);
      ++in_split[static_cast<std::size_t>(t - first)];
    }
    // docs/design.md 5.6, by a linear scan: the chunk's requests run from the owner
    // of its first row to the owner of its last.
    auto owner = [&](int32_t t) {
      int32_t r = sp.request_begin;
      while (qsl[static_cast<std::size_t>(r) + 1] <= t) ++r;
      return r;
    };
    const int32_t first_request = owner(t0);
    const int32_t last_request = owner(t1 - 1);
    int64_t context = 0;
    int32_t widest = 0;
    for (int32_t r = first_request; r <= last_request; ++r) {
      const int32_t ctx = s.seq_lens_upper_bound[static_cast<std::size_t>(r)] / g.config().compress_ratio;
      context += ctx;
      widest = std::max(widest, ctx);
    }
    if (context == 0) continue;
    ASSERT_LT(kept, p.prefill.size());
    const PrefillPlan& c = p.prefill[kept++];
    EXPECT_EQ(c.token_start, t0);
    EXPECT_EQ(c.token_end, t1);
    EXPECT_EQ(c.first_request, first_request);
    EXPECT_EQ(c.num_reqs, last_request - first_request + 1);
    EXPECT_EQ(c.width, widest);
  }
  EXPECT_EQ(kept, p.prefill.size());
  for (int n : in_split) ASSERT_EQ(n, 1);

  int32_t words = 0;
  for (const PrefillPlan& c : p.prefill) {
    const int64_t rows = c.token_end - c.token_start;
    // Within budget unless it is one row.
    if (rows > 1) {
      EXPECT_LE(4 * rows * std::max(c.width, 1), g.max_logits_bytes());
    }
    EXPECT_EQ(c.query_start_loc_offset, words);
    words += c.num_reqs + 1;
    // The pieces tile the chunk's rows, request by request.
    int32_t row = 0;
    for (int32_t k = 0; k < c.num_pieces; ++k) {
      const RequestRows& piece = p.pieces[static_cast<std::size_t>(c.first_piece + k)];
      EXPECT_EQ(piece.first_row, row);
      EXPECT_GT(piece.end_row, piece.first_row);
      const auto r = static_cast<std::size_t>(c.first_request + piece.request);
      EXPECT_LE(qsl[r], c.token_start + piece.first_row);
      EXPECT_GE(qsl[r + 1], c.token_start + piece.end_row);
      row = piece.end_row;
    }
    EXPECT_EQ(row, c.token_end - c.token_start);
    // Trimmed: the chunk's first and last requests both have rows in it.
    ASSERT_GT(c.num_pieces, 0);
    EXPECT_EQ(p.pieces[static_cast<std::size_t>(c.first_piece)].request, 0);
    EXPECT_EQ(p.pieces[static_cast<std::size_t>(c.first_piece + c.num_pieces - 1)].request,
              c.num_reqs - 1);
    EXPECT_EQ(c.use_gather, g.prefill_gathers(c.width));
    // The packed offsets, chunk by chunk, as the reference's clamp.
    for (int32_t i = 0; i <= c.num_reqs; ++i) {
      const int32_t loc = qsl[static_cast<std::size_t>(c.first_request + i)];
      ASSERT_EQ(b.prefill_query_start_loc[static_cast<std::size_t>(c.query_start_loc_offset + i)],
                std::clamp(loc, c.token_start, c.token_end) - c.token_start);
    }
  }
  EXPECT_EQ(words, p.num_prefill_query_start_loc_words);
  // The bound the buffer is sized by (docs/design.md 5.6).
  EXPECT_LE(words, 2 * int64_t{p.num_prefill_tokens} + p.num_reqs);
  EXPECT_LE(words, step_buffer_sizes(g).prefill_query_start_loc);

  for (const GatherLaunch& l : p.gather_launches) {
    EXPECT_GT(l.token_end, l.token_start);
    EXPECT_LE(l.token_end - l.token_start, g.gather_rows());
    const auto r = static_cast<std::size_t>(l.request);
    EXPECT_LE(qsl[r], l.token_start);
    EXPECT_GE(qsl[r + 1], l.token_end);
  }
  if (g.num_candidate_cols() > 0) {
    EXPECT_EQ(p.gather_launches, model_gather_launches(p, g.gather_rows()));
  } else {
    EXPECT_TRUE(p.gather_launches.empty());
  }
}

void check_decode(const Geometry& g, const test::RandomStep& s, const StepPlan& p,
                  const test::HostBuffers& b) {
  const auto& qsl = s.query_start_loc;
  const int32_t C = g.config().compress_ratio;
  // Row lengths, request by request, against the formula.
  std::vector<int32_t> rows(static_cast<std::size_t>(p.decode.num_rows), 0);
  for (int32_t r = 0; r < p.num_decodes; ++r) {
    const int32_t q = qsl[static_cast<std::size_t>(r) + 1] - qsl[static_cast<std::size_t>(r)];
    for (int32_t j = 0; j < q; ++j) {
      const int32_t tokens = s.seq_lens[static_cast<std::size_t>(r)] - q + j + 1;
      rows[static_cast<std::size_t>(qsl[static_cast<std::size_t>(r)] + j)] = std::max(tokens, 0) / C;
    }
  }
  ASSERT_TRUE(std::equal(rows.begin(), rows.end(), b.decode_row_lens.begin()));

  const ScheduleShape& sh = p.decode.schedule;
  if (!sh.present()) return;
  EXPECT_LE(int64_t{4} * sh.num_ctas, g.schedule_words());
  // Each live unit owns slices 0..n-1 in consecutive slots, in unit order;
  // the rest of the num_ctas slots are empty.
  int32_t slot = 0;
  int32_t prev_unit = -1;
  while (slot < sh.num_ctas) {
    const int32_t* d = b.decode_schedule.data() + 4 * slot;
    if (d[3] == 0) break;
    const int32_t unit = d[0] * sh.row_blocks + d[1];
    ASSERT_GT(unit, prev_unit);
    ASSERT_LT(d[1], sh.row_blocks);
    ASSERT_LT(unit, sh.work);
    const int32_t n = d[3];
    ASSERT_LE(slot + n, sh.num_ctas);
    for (int32_t i = 0; i < n; ++i) {
      const int32_t* e = b.decode_schedule.data() + 4 * (slot + i);
      ASSERT_EQ(e[0], d[0]);
      ASSERT_EQ(e[1], d[1]);
      ASSERT_EQ(e[2], i);
      ASSERT_EQ(e[3], n);
    }
    prev_unit = unit;
    slot += n;
  }
  for (; slot < sh.num_ctas; ++slot) {
    for (int k = 0; k < 4; ++k) ASSERT_EQ(b.decode_schedule[static_cast<std::size_t>(4 * slot + k)], 0);
  }
  // Nothing past num_ctas is written.
  if (static_cast<std::size_t>(4 * sh.num_ctas) < b.decode_schedule.size()) {
    EXPECT_EQ(b.decode_schedule[static_cast<std::size_t>(4 * sh.num_ctas)], -7);
  }
}

TEST(Properties, RandomStepsKeepEveryInvariant) {
  const std::vector<Geometry> geometries = test::random_geometries();
  std::vector<test::HostBuffers> buffers;
  for (const Geometry& g : geometries) buffers.emplace_back(g);
  std::mt19937_64 rng(20261202);
  StepPlan plan;
  int with_schedule = 0, native = 0, gathers = 0, cut = 0;
  for (int i = 0; i < kSteps; ++i) {
    const std::size_t gi = static_cast<std::size_t>(i) % geometries.size();
    const Geometry& g = geometries[gi];
    const test::RandomStep s = test::random_step(g, rng);
    ASSERT_NO_THROW(plan_step(g, s.query_start_loc, s.seq_lens_upper_bound, s.num_tokens, plan))
        << "step " << i;
    test::HostBuffers& b = buffers[gi];
    std::fill(b.decode_schedule.begin(), b.decode_schedule.end(), -7);
    test::fill_reference(g, plan, s.query_start_loc, s.seq_lens, s.block_table, s.table_stride, b);
    SCOPED_TRACE(::testing::Message() << "step " << i << " on geometry " << gi);
    check_prefill(g, s, plan, b);
    check_decode(g, s, plan, b);
    with_schedule += plan.decode.schedule.present();
    native += plan.decode.native.present();
    gathers += !plan.gather_launches.empty();
    cut += plan.splits.size() > 1;
    if (::testing::Test::HasFatalFailure()) return;
  }
  // The generator reaches every kind of step the properties are about.
  std::printf("%d steps: %d scheduled, %d native, %d with gathers, %d with several chunks\n",
              kSteps, with_schedule, native, gathers, cut);
  EXPECT_GT(with_schedule, kSteps / 10);
  EXPECT_GT(native, kSteps / 20);
  EXPECT_GT(gathers, kSteps / 20);
  EXPECT_GT(cut, kSteps / 10);
}

TEST(Properties, ZeroRowRequestsKeepThePackedWordsWithinTheirBound) {
  // Buffers of exactly step_buffer_sizes: a word past them is a heap
  // overflow under the sanitizers, and a count past them fails here.
  std::vector<Geometry> geometries = test::random_geometries();
  IndexerConfig tiny = deepseek_v41_config(4);  // one-row slices of 1M-token requests
  tiny.max_num_seqs = 64;
  tiny.max_num_batched_tokens = 256;
  tiny.max_logits_mb = 1;
  geometries.push_back(make_geometry(tiny));
  std::mt19937_64 rng(5060);
  StepPlan plan;
  int sliced_after_empty = 0;
  for (int i = 0; i < kSteps / 4; ++i) {
    const std::size_t gi = static_cast<std::size_t>(i) % geometries.size();
    const Geometry& g = geometries[gi];
    const test::RandomStep s = test::zero_row_step(g, rng);
    ASSERT_NO_THROW(plan_step(g, s.query_start_loc, s.seq_lens_upper_bound, s.num_tokens, plan))
        << "step " << i;
    test::HostBuffers b(g);
    test::fill_reference(g, plan, s.query_start_loc, s.seq_lens, s.block_table, s.table_stride, b);
    SCOPED_TRACE(::testing::Message() << "step " << i << " on geometry " << gi);
    check_prefill(g, s, plan, b);
    for (const ChunkSplit& sp : plan.splits) {
      const bool empty_first = s.query_start_loc[static_cast<std::size_t>(sp.request_begin)] ==
                               s.query_start_loc[static_cast<std::size_t>(sp.request_begin) + 1];
      sliced_after_empty += empty_first && sp.query_begin > 0;
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
  // The steps reach the case the trim is for.
  EXPECT_GT(sliced_after_empty, kSteps / 4);
}

// A decode step of `g` whose decodes have no rows and bounds of 0, with
// graph padding rows: ragged where the geometry flattens, copying no column.
test::RandomStep padding_only_step(const Geometry& g, std::mt19937_64& rng) {
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  test::RandomStep s;
  const int64_t reqs = uniform(1, std::min<int64_t>(g.config().max_num_seqs, 16));
  s.query_start_loc.assign(static_cast<std::size_t>(reqs) + 1, 0);
  s.seq_lens.assign(static_cast<std::size_t>(reqs), 0);
  s.seq_lens_upper_bound = s.seq_lens;
  s.num_tokens = uniform(1, std::min<int64_t>(g.max_decode_rows(), 3 * reqs));
  s.table_stride = g.max_blocks_per_seq() + static_cast<int32_t>(uniform(0, 3));
  s.block_table.assign(static_cast<std::size_t>(reqs * s.table_stride), 1);
  return s;
}

// The step buffers the step writes, by name, with the words
// step_buffer_sizes(plan) gives each (the block ends only with candidate
// blocks, the key bounds only when asked).
std::vector<std::pair<OutputBuffer StepOutputs::*, int64_t>> written_buffers(
    const Geometry& g, const StepBufferSizes& s, bool key_bounds) {
  const bool blocks = g.config().candidate_block_size > 0;
  return {{&StepOutputs::context_lens, s.context_lens},
          {&StepOutputs::decode_row_lens, s.decode_rows},
          {&StepOutputs::decode_block_ends, blocks ? s.decode_rows : 0},
          {&StepOutputs::decode_block_table, s.decode_block_table},
          {&StepOutputs::prefill_row_ends, s.prefill_rows},
          {&StepOutputs::prefill_block_ends, blocks ? s.prefill_rows : 0},
          {&StepOutputs::prefill_query_start_loc, s.prefill_query_start_loc},
          {&StepOutputs::decode_schedule, s.decode_schedule},
          {&StepOutputs::prefill_key_starts, key_bounds ? s.prefill_rows : 0},
          {&StepOutputs::prefill_key_ends, key_bounds ? s.prefill_rows : 0},
          {&StepOutputs::prefill_schedule, s.prefill_schedule},
          {&StepOutputs::schedule_safe, s.schedule_safe}};
}

TEST(Properties, PlanSizedBuffersAreTakenAndOneWordLessIsRefused) {
  // Exactly step_buffer_sizes(plan): the checks take them and the fill
  // stays in them (the sanitizers watch), a buffer the step does not write
  // may be absent, and one word less of any it writes is refused by name.
  std::vector<Geometry> geometries = test::random_geometries();
  for (const Geometry& g : test::flydsl_geometries()) geometries.push_back(g);
  for (const Geometry& g : test::deepgemm_geometries()) geometries.push_back(g);
  std::mt19937_64 rng(49006);
  StepPlan plan;
  int padding_only = 0, no_columns = 0, tables = 0;
  for (int i = 0; i < kSteps; ++i) {
    const std::size_t gi = static_cast<std::size_t>(i) % geometries.size();
    const Geometry& g = geometries[gi];
    const int kind = i % 4;
    const test::RandomStep s = kind == 0   ? padding_only_step(g, rng)
                               : kind == 1 ? test::zero_row_step(g, rng)
                                           : test::random_step(g, rng);
    ASSERT_NO_THROW(plan_step(g, s.query_start_loc, s.seq_lens_upper_bound, s.num_tokens, plan)) << "step " << i;
    const bool always_write = (i / 4) % 2 == 1;
    const bool key_bounds = (i / 8) % 2 == 1;
    SCOPED_TRACE(::testing::Message() << "step " << i << " on geometry " << gi << ", always_write "
                                      << always_write << ", key bounds " << key_bounds << ": " << plan);
    const StepBufferSizes sizes = step_buffer_sizes(plan, always_write);
    HostStepBuffers host(sizes, plan.decode.num_block_cols, -7);
    const StepInputs in = make_step_inputs(s.seq_lens, s.query_start_loc, s.block_table, s.table_stride);
    StepOutputs out = host.outputs(always_write, key_bounds);
    const auto buffers = written_buffers(g, sizes, key_bounds);
    for (const auto& [field, words] : buffers) {
      if (words == 0) out.*field = OutputBuffer{};
    }
    ASSERT_NO_THROW(fill_step_buffers(g, plan, in, out));
    for (const auto& [field, words] : buffers) {
      if (words == 0) continue;
      StepOutputs less = out;
      (less.*field).capacity = words - 1;
      const std::string e = test::error_of<StepError>([&] { check_step_buffers(g, plan, in, less); });
      EXPECT_NE(e.find(fmt::format("holds {} words, and the step writes {}", words - 1, words)), std::string::npos)
          << e;
    }
    padding_only += plan.decode.ragged() && plan.decode.num_block_cols == 0;
    no_columns += plan.decode.num_rows > 0 && plan.decode.num_block_cols == 0;
    tables += sizes.decode_block_table > 0;
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GT(padding_only, kSteps / 20);
  EXPECT_GT(no_columns, kSteps / 10);
  EXPECT_GT(tables, kSteps / 10);
}

// Runs `check(g, s, plan, b)` on `steps` seeded random steps over
// `geometries` in turn, every fifth a step of decodes only, each planned and
// filled by the CPU reference; stops at the first fatal failure.
template <class Check>
void on_random_steps(const std::vector<Geometry>& geometries, uint64_t seed, int steps, const Check& check) {
  std::mt19937_64 rng(seed);
  StepPlan plan;
  for (int i = 0; i < steps; ++i) {
    const std::size_t gi = static_cast<std::size_t>(i) % geometries.size();
    const Geometry& g = geometries[gi];
    const test::RandomStep s = i % 5 == 0 ? test::full_decode_step(g, rng) : test::random_step(g, rng);
    ASSERT_NO_THROW(plan_step(g, s.query_start_loc, s.seq_lens_upper_bound, s.num_tokens, plan)) << "step " << i;
    test::HostBuffers b(g);
    test::fill_reference(g, plan, s.query_start_loc, s.seq_lens, s.block_table, s.table_stride, b);
    SCOPED_TRACE(::testing::Message() << "step " << i << " on geometry " << gi << ": " << plan);
    check(g, s, plan, b);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(Properties, FlydslStepSchedulesAreAitersOnTheStepsOwnLengths) {
  // The step's decode grid is compute_varctx_schedule of its batches'
  // contexts (rows, or native sequences), and each prefill chunk's grid
  // compute_prefill_schedule of its rows' ends, as idxplan.aiter computes
  // them (flydsl_fp4::grid_violation): the words the lengths the step
  // wrote give. A word changed is found.
  int decodes = 0, native = 0, chunks = 0;
  on_random_steps(test::flydsl_geometries(), 49007, kSteps / 4,
                  [&](const Geometry& g, const test::RandomStep& s, const StepPlan& plan, test::HostBuffers& b) {
    ASSERT_FALSE(plan.decode.schedule.present());
    ASSERT_EQ(plan.decode.grid.present(), plan.decode.num_rows > 0);
    ASSERT_TRUE(!plan.decode.native.present() || g.config().compress_ratio == 1);
    for (const PrefillPlan& c : plan.prefill) {
      ASSERT_EQ(c.grid.ctas, std::max(c.token_end - c.token_start, g.config().prefill_parallel_units > 0
                                                                        ? g.config().prefill_parallel_units
                                                                        : flydsl_fp4::kPrefillBaseCtas));
    }
    ASSERT_EQ(flydsl_fp4::grid_violation(g, plan, s.query_start_loc, b.outputs()), "");
    if (!plan.prefill.empty()) {
      ++b.prefill_schedule[static_cast<std::size_t>(plan.prefill.back().grid.words) + 3];
      ASSERT_NE(flydsl_fp4::grid_violation(g, plan, s.query_start_loc, b.outputs()), "");
    }
    decodes += plan.decode.grid.present();
    native += plan.decode.native.present();
    chunks += static_cast<int>(plan.prefill.size());
  });
  EXPECT_GT(decodes, kSteps / 10);
  EXPECT_GT(native, kSteps / 40);
  EXPECT_GT(chunks, kSteps / 10);
}

TEST(Properties, DeepgemmStepMetadataIsTheDropInsOnTheDecodeLaunchsRows) {
  // The step's decode_schedule is get_paged_mqa_logits_metadata of the
  // rows the decode launch hands DeepGEMM's kernel (context_lens [sequences,
  // next_n] native, [rows, 1] flattened) on the geometry's SMs, as
  // idxplan.deepgemm computes it; native sequences only where DeepGEMM's SM90
  // kernels take them (next_n 1 or 2).
  int decodes = 0, native = 0, padded = 0;
  on_random_steps(test::deepgemm_geometries(), 51001, kSteps / 4,
                  [&](const Geometry& g, const test::RandomStep& s, const StepPlan& plan, test::HostBuffers& b) {
    const DecodePlan& d = plan.decode;
    ASSERT_FALSE(d.schedule.present() || d.grid.present());
    ASSERT_EQ(d.metadata.present(), plan.num_decodes > 0);
    ASSERT_LE(d.native.next_n, 2);
    const StepInputs in = make_step_inputs(s.seq_lens, s.query_start_loc, s.block_table, s.table_stride);
    const DecodeLaunch l = decode_launch(g, plan, in, b.outputs());
    if (l.num_seqs == 0) return;
    ASSERT_EQ(l.schedule, b.decode_schedule.data());
    ASSERT_EQ(l.num_ctas, g.config().num_compute_units);
    ASSERT_EQ(l.schedule_words, 2 * (int64_t{g.config().num_compute_units} + 1));
    const deepgemm_sm90::MetadataShape shape =
        deepgemm_sm90::metadata_shape(l.num_seqs, l.next_n, 64, g.config().num_compute_units);
    std::vector<int32_t> want(static_cast<std::size_t>(shape.words()));
    const auto rows = static_cast<std::size_t>(int64_t{l.num_seqs} * l.next_n);
    deepgemm_sm90::fill_metadata(shape, Span<const int32_t>(l.row_ends, rows),
                                 Span<int32_t>(want.data(), want.size()));
    ASSERT_EQ(test::slice(b.decode_schedule, want.size()), want);
    decodes += 1;
    native += d.native.present();
    padded += d.num_real_rows < d.num_rows;
  });
  EXPECT_GT(decodes, kSteps / 10);
  EXPECT_GT(native, kSteps / 40);
  EXPECT_GT(padded, kSteps / 100);
}

TEST(Properties, FlydslStepsReadTheChunkPastTheirKeysInTheBlockTable) {
  // FlyDSL loads the page ids of the chunk after the one a CTA scores: the
  // columns a step reads, and decode_block_table copies, cover them.
  for (const Geometry& g : test::flydsl_geometries()) {
    const int32_t pages_a_chunk = flydsl_fp4::kBlockK / g.page_entries();
    EXPECT_EQ(g.max_blocks_per_seq(),
              flydsl_fp4::table_cols(g.logits_width(), g.page_entries()));
    // A 300-key row: chunks 0 and 1, and chunk 2 read ahead.
    const std::vector<int32_t> qsl{0, 1, 2};
    const std::vector<int32_t> lens{300 * g.config().compress_ratio, 1};
    const StepPlan p = plan_step(g, qsl, lens);
    EXPECT_EQ(p.decode.num_block_cols, 3 * pages_a_chunk);
    EXPECT_EQ(block_table_cols_read(g, p), 3 * pages_a_chunk);
  }
}

}  // namespace
}  // namespace idxplan
