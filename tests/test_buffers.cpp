// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/plan/buffers.hpp"

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "idxplan/plan/step.hpp"
#include "random_step.hpp"
#include "test_support.hpp"

namespace idxplan {
namespace {

using test::HostBuffers;
using Words = std::vector<int32_t>;

// A one-CU GPU with 4096-token contexts: schedules small enough to work by hand.
IndexerConfig small_config() {
  IndexerConfig c = test::deepseek_config();
  c.max_model_len = 4096;  // 1024 columns: 32 tiles of 32
  c.num_compute_units = 1;  // 8 workgroups for 2-row sequences, 12 for 1-row
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 64;
  c.sparse_logits = false;
  return c;
}

Words slice(const Words& w, std::size_t n) { return Words(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(n)); }

TEST(FindRequest, SkipsEmptyRequestsBeforeTheToken) {
  const Words qsl{0, 2, 2, 2, 5};
  EXPECT_EQ(find_request(qsl.data(), 0, 4, 0), 0);
  EXPECT_EQ(find_request(qsl.data(), 0, 4, 1), 0);
  EXPECT_EQ(find_request(qsl.data(), 0, 4, 2), 3);
  EXPECT_EQ(find_request(qsl.data(), 0, 4, 4), 3);
}

// docs/design.md section 6's rule, literally, in plain division: end is the max of the
// row ends of the unit's rows that exist and are real, from 0.
int32_t literal_native_tiles(const StepArgs& a, int32_t seq, int32_t blk, int32_t seq_len) {
  const ScheduleShape& s = a.schedule;
  const int32_t c = a.compress_ratio;
  const int32_t first_row = unit_first_row(s, blk);
  int32_t end = 0;
  for (int32_t k = 0; k < s.block_m && first_row + k < s.rows_per_seq; ++k) {
    if (seq * s.rows_per_seq + first_row + k >= a.num_real_decode_rows) continue;
    const int32_t tokens = seq_len - s.rows_per_seq + first_row + k + 1;
    end = std::max(end, tokens > 0 ? tokens / c : 0);
  }
  const int32_t ctx = seq_len / c;
  if (ctx <= 0) return 0;
  const int32_t keys = std::max(std::min(ctx, end), 0);
  return std::max((keys + s.block_kv - 1) / s.block_kv, 1);
}

TEST(NativeUnitTiles, IsTheMaxOverTheUnitsRealRows) {
  int checked = 0;
  for (int32_t n = 2; n <= 12; ++n) {
    for (int32_t block_m = 1; block_m <= std::min(n, 7); ++block_m) {
      StepArgs a;
      a.compress_ratio = 4;
      a.by_compress_ratio = Divisor(4);
      a.by_block_kv = Divisor(16);
      a.schedule.rows_per_seq = n;
      a.schedule.block_m = block_m;
      a.schedule.row_blocks = (n + block_m - 1) / block_m;
      a.schedule.block_kv = 16;
      a.max_decode_seq_len = 1 << 20;  // no length below is clamped
      const int32_t seqs = 3;
      for (int32_t real = 0; real <= seqs * n; real += 1 + n / 3) {  // padding rows from `real` on
        a.num_real_decode_rows = real;
        for (int32_t seq = 0; seq < seqs; ++seq) {
          for (int32_t blk = 0; blk < a.schedule.row_blocks; ++blk) {
            for (const int32_t len : {0, 1, n - 1, n, n + 3, 4 * n, 100, 1001}) {
              ASSERT_EQ(native_unit_tiles(a, seq, blk, len), literal_native_tiles(a, seq, blk, len))
                  << "n=" << n << " block_m=" << block_m << " real=" << real << " seq=" << seq
                  << " blk=" << blk << " len=" << len;
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 5000);
}

TEST(CheckStepArgs, RefusesDivisorsThatAreNotTheFields) {
  StepArgs a;
  a.compress_ratio = 4;  // by_compress_ratio still divides by 1
  try {
    check_step_args(a);
    FAIL() << "a StepArgs dividing by 1 for compress_ratio=4 was taken";
  } catch (const StepError& e) {
    EXPECT_NE(std::string(e.what()).find("compress_ratio=4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(fill_step_launch(a), StepError);
  a.by_compress_ratio = Divisor(4);
  EXPECT_NO_THROW(check_step_args(a));  // no schedule: its divisors are not read
  a.schedule.num_ctas = 8;
  a.schedule.block_kv = 64;
  a.schedule.row_blocks = 1;
  EXPECT_THROW(check_step_args(a), StepError);
  a.by_block_kv = Divisor(64);
  EXPECT_NO_THROW(check_step_args(a));
}

TEST(FillStepBuffers, WritesANativeStepAndItsSchedule) {
  const Geometry g = make_geometry(small_config());
  const Words qsl{0, 2, 4, 6, 8};
  const Words lens{400, 130, 4, 2};
  const StepPlan plan = plan_step(g, qsl, lens);
  ASSERT_TRUE(plan.decode.native.present());
  const ScheduleShape& s = plan.decode.schedule;
  ASSERT_TRUE(s.present());
  EXPECT_EQ(s.num_ctas, 8);
  EXPECT_EQ(s.max_tiles, 32);

  const int32_t stride = 8;
  Words table(4 * stride);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = 1000 + static_cast<int32_t>(i);
  HostBuffers out(g);
  test::fill_reference(g, plan, qsl, lens, table, stride, out);

  EXPECT_EQ(slice(out.context_lens, 4), (Words{100, 32, 1, 0}));
  // Row j of request r sees (L - 2 + j + 1) / 4 keys.
  EXPECT_EQ(slice(out.decode_row_lens, 8), (Words{99, 100, 32, 32, 0, 1, 0, 0}));
  // A native step's launches read the engine's table in place: no copy.
  EXPECT_FALSE(plan.decode.ragged());
  EXPECT_EQ(out.decode_block_table, Words(out.decode_block_table.size(), -7));
  // The engine asks for the flattened table anyway: the rows read up to 4
  // pages of 32 entries (400 tokens / 128), row i its request i / 2's.
  test::fill_reference(g, plan, qsl, lens, table, stride, out, true);
  EXPECT_EQ(plan.decode.num_block_cols, 4);
  EXPECT_EQ(slice(out.decode_block_table, 5), (Words{1000, 1001, 1002, 1003, -7}));
  EXPECT_EQ(out.decode_block_table[static_cast<std::size_t>(g.max_blocks_per_seq()) * 3 + 1], 1009);
  // Tiles per unit: 4, 1, 1, 0 -> 6 over 5 spare slots: 2 a slice.
  EXPECT_EQ(slice(out.decode_schedule, 32), (Words{0, 0, 0, 2, 0, 0, 1, 2, 1, 0, 0, 1, 2, 0, 0, 1,
                                                   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  // Past num_ctas nothing is written.
  EXPECT_EQ(out.decode_schedule[32], -7);
}

TEST(FillStepBuffers, ZerosThePaddingRows) {
  const Geometry g = make_geometry(small_config());
  const Words qsl{0, 2, 3};
  const Words lens{40, 41};
  const StepPlan plan = plan_step(g, qsl, lens, 6);
  ASSERT_EQ(plan.decode.num_rows, 6);
  ASSERT_EQ(plan.decode.num_real_rows, 3);
  const Words table{7, 8};
  HostBuffers out(g);
  test::fill_reference(g, plan, qsl, lens, table, 1, out);
  EXPECT_EQ(slice(out.decode_row_lens, 7), (Words{9, 10, 10, 0, 0, 0, -7}));
  EXPECT_EQ(out.decode_block_table[0], 7);
  EXPECT_EQ(out.decode_block_table[static_cast<std::size_t>(g.max_blocks_per_seq()) * 2], 8);
  EXPECT_EQ(out.decode_block_table[static_cast<std::size_t>(g.max_blocks_per_seq()) * 5], 0);
}

TEST(FillStepBuffers, WritesPrefillRowEndsAndPackedOffsets) {
  IndexerConfig c = small_config();
  c.max_logits_mb = 1;
  c.sparse_logits = true;
  c.candidate_topk_blocks = 4;
  const Geometry g = make_geometry(c);
  // One decode, then prefills of 3 and 2 rows.
  const Words qsl{0, 1, 4, 6};
  const Words lens{9, 11, 2};
  const StepPlan plan = plan_step(g, qsl, lens, 8);
  ASSERT_EQ(plan.num_decode_tokens, 1);
  ASSERT_EQ(plan.num_prefill_tokens, 7);
  ASSERT_EQ(plan.prefill.size(), 1u);
  HostBuffers out(g);
  test::fill_reference(g, plan, qsl, lens, Words{1, 2, 3}, 1, out);
  // Request 1: L 11, q 3 -> (9 + j) / 4; request 2: L 2, q 2 -> (1 + j) / 4;
  // tokens 6 and 7 are padding.
  EXPECT_EQ(slice(out.prefill_row_ends, 8), (Words{2, 2, 2, 0, 0, 0, 0, -7}));
  EXPECT_EQ(slice(out.prefill_block_ends, 5), (Words{1, 1, 1, 0, 0}));
  EXPECT_EQ(slice(out.prefill_query_start_loc, 4), (Words{0, 3, 5, -7}));
  EXPECT_EQ(slice(out.decode_block_ends, 2), (Words{1, -7}));
}

TEST(FillStepBuffers, AnAllZeroStepHasOnlyEmptyDescriptors) {
  // Graph capture runs steps with every compressed length 0.
  const Geometry g = make_geometry(small_config());
  const Words qsl{0, 2, 4, 6, 8, 10};
  const Words lens{2, 2, 2, 2, 2};
  const StepPlan plan = plan_step(g, qsl, lens);
  ASSERT_TRUE(plan.decode.schedule.present());
  HostBuffers out(g);
  test::fill_reference(g, plan, qsl, lens, Words(5, 3), 1, out);
  const auto words = static_cast<std::size_t>(4 * plan.decode.schedule.num_ctas);
  EXPECT_EQ(slice(out.decode_schedule, words), Words(words, 0));
  EXPECT_EQ(slice(out.decode_row_lens, 10), Words(10, 0));
}

TEST(FillStepBuffers, AStepWithNoRequestsWritesNothing) {
  const Geometry g = make_geometry(small_config());
  const StepPlan plan = plan_step(g, Words{0}, Words{}, 5);
  HostBuffers out(g);
  test::fill_reference(g, plan, Words{0}, Words{}, Words{}, 1, out);
  EXPECT_EQ(slice(out.prefill_row_ends, 6), Words(6, -7));
  EXPECT_EQ(slice(out.decode_row_lens, 6), Words(6, -7));
}

TEST(FillStepBuffers, PacksMoreChunkGroupsThanOneLaunchCarries) {
  IndexerConfig c = small_config();
  c.max_model_len = 65536;
  c.max_logits_mb = 1;  // 16 rows at 16384 columns: every 10-row request is a group
  c.max_num_seqs = 300;
  c.max_num_batched_tokens = 4096;
  const Geometry g = make_geometry(c);
  Words qsl{0};
  Words lens;
  for (int r = 0; r < 300; ++r) {
    qsl.push_back(qsl.back() + 10);
    lens.push_back(65536);
  }
  const StepPlan plan = plan_step(g, qsl, lens);
  ASSERT_EQ(plan.chunk_groups.size(), 300u);
  EXPECT_EQ(num_step_launches(plan), 3);
  HostBuffers out(g);
  test::fill_reference(g, plan, qsl, lens, Words(300 * 512, 1), 512, out);
  for (std::size_t i = 0; i < 300; ++i) {
    EXPECT_EQ(out.prefill_query_start_loc[2 * i], 0);
    EXPECT_EQ(out.prefill_query_start_loc[2 * i + 1], 10);
  }
  EXPECT_EQ(out.prefill_query_start_loc[600], -7);
}

TEST(FillStepBuffers, ClampsDeviceLengthsOutsideTheirBounds) {
  // The host cannot check the device's exact lengths. A broken engine's
  // (negative, past the upper bound, INT32_MIN or INT32_MAX) read as 0 or
  // as the step's longest bound: every value stays defined (the sanitizer
  // build checks) and within what the plan's widths and columns cover.
  const std::vector<Geometry> geometries = test::random_geometries();
  std::vector<HostBuffers> buffers;
  for (const Geometry& g : geometries) buffers.emplace_back(g);
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  std::mt19937_64 rng(99);
  int broken = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::size_t gi = static_cast<std::size_t>(i) % geometries.size();
    const Geometry& g = geometries[gi];
    test::RandomStep s = test::random_step(g, rng);
    for (std::size_t r = 0; r < s.seq_lens.size(); ++r) {
      const int32_t ub = s.seq_lens_upper_bound[r];
      const int32_t wild[] = {kMin, -1, 0, ub + 1, 2 * ub + 7, kMax, s.seq_lens[r]};
      s.seq_lens[r] = wild[std::uniform_int_distribution<std::size_t>(0, 6)(rng)];
      broken += s.seq_lens[r] != ub;
    }
    const StepPlan plan = plan_step(g, s.query_start_loc, s.seq_lens_upper_bound, s.num_tokens);
    HostBuffers& out = buffers[gi];
    test::fill_reference(g, plan, s.query_start_loc, s.seq_lens, s.block_table, s.table_stride, out);
    const int32_t c = g.config().compress_ratio;
    const int32_t longest = plan.max_seq_len / c;
    for (int32_t r = 0; r < plan.num_reqs; ++r) {
      ASSERT_GE(out.context_lens[static_cast<std::size_t>(r)], 0) << "step " << i;
      ASSERT_LE(out.context_lens[static_cast<std::size_t>(r)], longest) << "step " << i;
    }
    for (int32_t row = 0; row < plan.decode.num_rows; ++row) {
      const int32_t len = out.decode_row_lens[static_cast<std::size_t>(row)];
      ASSERT_GE(len, 0) << "step " << i;
      // Within the columns the decode block table holds.
      ASSERT_LE(len, plan.decode.num_block_cols * g.page_entries()) << "step " << i;
    }
    for (int32_t t = 0; t < plan.num_prefill_tokens; ++t) {
      ASSERT_GE(out.prefill_row_ends[static_cast<std::size_t>(t)], 0) << "step " << i;
      ASSERT_LE(out.prefill_row_ends[static_cast<std::size_t>(t)], longest) << "step " << i;
    }
    const ScheduleShape& sh = plan.decode.schedule;
    for (int32_t slot = 0; slot < sh.num_ctas; ++slot) {
      const int32_t* d = out.decode_schedule.data() + 4 * slot;
      ASSERT_TRUE(d[3] == 0 || (d[2] >= 0 && d[2] < d[3] && d[0] < sh.num_seqs && d[1] < sh.row_blocks))
          << "step " << i << " slot " << slot;
    }
  }
  EXPECT_GT(broken, 10000);
}

// The message check_step_buffers gives, or "no error".
std::string buffers_error(const Geometry& g, const StepPlan& plan, const StepInputs& in,
                          const StepOutputs& out) {
  return test::error_of<StepError>([&] { check_step_buffers(g, plan, in, out); });
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
  const StepInputs in{lens.data(), qsl.data(), table.data(), 32};
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

  StepInputs narrow = in;
  narrow.block_table_stride = 16;
  EXPECT_EQ(buffers_error(g, plan, narrow, ok),
            "StepInputs.block_table_stride=16 is below the 32 columns the step's launches read (the "
            "pages of its longest upper bound, 4000 tokens)");
  StepInputs missing = in;
  missing.seq_lens = nullptr;
  EXPECT_NE(buffers_error(g, plan, missing, ok).find("StepInputs.seq_lens is null"), std::string::npos);
  missing = in;
  missing.block_table = nullptr;
  EXPECT_NE(buffers_error(g, plan, missing, ok).find("StepInputs.block_table is null"), std::string::npos);
  // fill_step_buffers checks first and writes nothing.
  EXPECT_THROW(fill_step_buffers(g, plan, narrow, ok), StepError);
  EXPECT_EQ(slice(host.context_lens, 5), Words(5, -7));
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
  const StepInputs in{lens.data(), qsl.data(), table.data(), 32};
  const std::string e = buffers_error(g, plan, in, host.outputs());
  EXPECT_NE(e.find("the plan was made with another Geometry"), std::string::npos) << e;
  EXPECT_THROW(fill_step_buffers(g, plan, in, host.outputs()), StepError);
}

TEST(CheckStepBuffers, AStepThatReadsNothingNeedsNoPointers) {
  const Geometry g = make_geometry(small_config());
  const StepPlan plan = plan_step(g, Words{0}, Words{});
  EXPECT_EQ(buffers_error(g, plan, StepInputs{}, StepOutputs{}), "no error");
}

TEST(FillStepBuffers, WritesTheDecodeTableOnlyWhereALaunchReadsIt) {
  // Random steps: the table's rows stay poison unless the step is ragged or
  // the engine asks for the table, and then hold their requests' rows.
  const std::vector<Geometry> geometries = test::random_geometries();
  std::vector<HostBuffers> buffers;
  for (const Geometry& g : geometries) buffers.emplace_back(g);
  std::mt19937_64 rng(31);
  int written = 0, untouched = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::size_t gi = static_cast<std::size_t>(i) % geometries.size();
    const Geometry& g = geometries[gi];
    const test::RandomStep s = test::random_step(g, rng);
    const StepPlan plan = plan_step(g, s.query_start_loc, s.seq_lens_upper_bound, s.num_tokens);
    HostBuffers& out = buffers[gi];
    const auto rows_words = static_cast<std::size_t>(plan.decode.num_rows) * static_cast<std::size_t>(out.decode_block_table_stride);
    std::fill(out.decode_block_table.begin(), out.decode_block_table.begin() + static_cast<std::ptrdiff_t>(rows_words), -7);
    const bool always = rng() % 2 == 0;
    test::fill_reference(g, plan, s.query_start_loc, s.seq_lens, s.block_table, s.table_stride, out, always);
    const bool writes = plan.decode.ragged() || (always && plan.decode.num_rows > 0);
    ASSERT_EQ(writes_decode_block_table(plan, out.outputs(always)), writes);
    for (int32_t row = 0; row < plan.decode.num_rows; ++row) {
      const int32_t* got = out.decode_block_table.data() + static_cast<std::ptrdiff_t>(row) * out.decode_block_table_stride;
      // The request whose row this is, or -1 for a padding row.
      int32_t request = -1;
      if (row < plan.decode.num_real_rows) {
        request = 0;
        while (s.query_start_loc[static_cast<std::size_t>(request) + 1] <= row) ++request;
      }
      for (int32_t col = 0; col < out.decode_block_table_stride; ++col) {
        const bool copied = writes && col < plan.decode.num_block_cols;
        const int32_t want = !copied ? -7
                             : request < 0
                                 ? 0
                                 : s.block_table[static_cast<std::size_t>(request) * static_cast<std::size_t>(s.table_stride) +
                                                 static_cast<std::size_t>(col)];
        ASSERT_EQ(got[col], want) << "step " << i << " row " << row << " column " << col;
      }
    }
    written += writes;
    untouched += !writes && plan.decode.num_rows > 0;
  }
  EXPECT_GT(written, 500);
  EXPECT_GT(untouched, 500);
}

TEST(PackChunkGroups, FoldsTheSlicesOfOneRequest) {
  const Geometry g = make_geometry(test::deepseek_config());
  const StepPlan p = plan_step(g, Words{0, 2, 4, 8196}, Words{9000, 120000, 300000});
  // Five 1789-row slices of request 2, the last one shorter.
  EXPECT_EQ(p.chunk_groups, (std::vector<ChunkGroup>{{2, 1, 4, 8196, 1789, 0}}));
}

TEST(PackChunkGroups, KeepsGroupsOfSeveralRequestsApart) {
  std::vector<PrefillPlan> plans(3);
  plans[0] = PrefillPlan{0, 10, 0, 2, 100, 0, 2, 0, false};
  plans[1] = PrefillPlan{10, 20, 2, 1, 100, 2, 1, 3, false};
  plans[2] = PrefillPlan{20, 25, 2, 1, 100, 3, 1, 5, false};
  std::vector<ChunkGroup> groups;
  pack_chunk_groups(plans, groups);
  EXPECT_EQ(groups, (std::vector<ChunkGroup>{{0, 2, 0, 10, 10, 0}, {2, 1, 10, 25, 10, 3}}));
}

}  // namespace
}  // namespace idxplan
