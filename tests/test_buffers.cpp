// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/plan/buffers.hpp"

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "idxplan/plan/launches.hpp"
#include "idxplan/plan/step.hpp"
#include "random_step.hpp"
#include "test_support.hpp"

namespace idxplan {
namespace {

using test::HostBuffers;
using Words = std::vector<int32_t>;
using test::slice;
using test::small_config;

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
  return std::max(static_cast<int32_t>((int64_t{keys} + s.block_kv - 1) / s.block_kv), 1);
}

// The arguments the unit-tile rules read, for sequences of n rows in row
// blocks of block_m; the caller sets the bound and the real rows.
StepArgs unit_tile_args(int32_t ratio, int32_t block_kv, int32_t n, int32_t block_m) {
  StepArgs a;
  a.compress_ratio = ratio;
  a.by_compress_ratio = Divisor(ratio);
  a.by_block_kv = Divisor(block_kv);
  a.schedule.rows_per_seq = n;
  a.schedule.block_m = block_m;
  a.schedule.row_blocks = (n + block_m - 1) / block_m;
  a.schedule.block_kv = block_kv;
  return a;
}

TEST(NativeUnitTiles, IsTheMaxOverTheUnitsRealRows) {
  int checked = 0;
  for (int32_t n = 2; n <= 12; ++n) {
    for (int32_t block_m = 1; block_m <= std::min(n, 7); ++block_m) {
      StepArgs a = unit_tile_args(4, 16, n, block_m);
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

// The device's lengths are clamped to the plan's bound before the rule, so
// any int32 gives the rule's tiles of the clamped length, up to a bound of
// INT32_MAX, where the last row's tokens still fit in int32.
TEST(NativeUnitTiles, TakesTheRuleOfTheClampedLengthForAnyLength) {
  constexpr int32_t kMax = 0x7FFFFFFF;
  int checked = 0;
  for (const int32_t bound : {0, 3, 1000, kMax - 1, kMax}) {
    for (const int32_t ratio : {1, 4, 128}) {
      for (const int32_t n : {1, 2, 5}) {
        for (const int32_t block_m : {1, 2, 4}) {
          StepArgs a = unit_tile_args(ratio, 64, n, block_m);
          a.max_decode_seq_len = bound;
          a.num_real_decode_rows = 2 * n - 1;  // the second sequence's last row is padding
          for (int32_t seq = 0; seq < 2; ++seq) {
            for (int32_t blk = 0; blk < a.schedule.row_blocks; ++blk) {
              for (const int32_t len : {-kMax - 1, -1, 0, 1, ratio - 1, ratio, 999, 1000, 1001, kMax - 1, kMax}) {
                const int32_t clamped = len < 0 ? 0 : std::min(len, bound);
                ASSERT_EQ(native_unit_tiles(a, seq, blk, len), literal_native_tiles(a, seq, blk, clamped))
                    << "bound=" << bound << " ratio=" << ratio << " n=" << n << " block_m=" << block_m
                    << " seq=" << seq << " blk=" << blk << " len=" << len;
                ++checked;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1500);
}

// A sequence's one row block (block_m >= rows_per_seq): the device's
// shorter rule is native_unit_tiles of row block 0, for lengths of any
// int32, real rows ending anywhere (within a sequence too) and any bound.
TEST(SequenceUnitTiles, IsNativeUnitTilesOfTheSequencesOneRowBlock) {
  constexpr int32_t kMax = 0x7FFFFFFF;
  int checked = 0;
  for (const int32_t ratio : {1, 4, 128}) {
    for (int32_t n = 1; n <= 9; ++n) {
      for (const int32_t block_m : {n, n + 1, 2 * n, 64}) {
        StepArgs a = unit_tile_args(ratio, 16, n, block_m);
        ASSERT_EQ(a.schedule.row_blocks, 1);
        const int32_t seqs = 4;
        for (const int32_t bound : {0, 1000, kMax}) {
          a.max_decode_seq_len = bound;
          for (int32_t real = 0; real <= seqs * n; ++real) {
            a.num_real_decode_rows = real;
            for (int32_t seq = 0; seq < seqs; ++seq) {
              for (const int32_t len : {-kMax - 1, -1, 0, 1, ratio - 1, ratio, n + 3, 100, 1001, kMax - 1, kMax}) {
                ASSERT_EQ(sequence_unit_tiles(a, seq, len), native_unit_tiles(a, seq, 0, len))
                    << "ratio=" << ratio << " n=" << n << " block_m=" << block_m << " bound=" << bound
                    << " real=" << real << " seq=" << seq << " len=" << len;
                ++checked;
              }
            }
            // The blocks' schedule takes the units past its work as
            // sequences of length 0, and keeps their tiles unselected.
            for (int32_t seq = seqs; seq < 2 * seqs; ++seq) ASSERT_EQ(sequence_unit_tiles(a, seq, 0), 0) << seq;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 10000);
}

// A sequence whose rows are all real: an add, a high multiply and a shift are
// sequence_unit_tiles, for lengths of any int32 and any bound that keeps
// the bound plus C * K - C in int32; past that, and where C * K is 1,
// set_whole_tiles turns them off.
TEST(WholeSequenceTiles, IsSequenceUnitTilesOfASequenceWithAllRowsReal) {
  constexpr int32_t kMax = 0x7FFFFFFF;
  int checked = 0;
  for (const int32_t ratio : {1, 2, 4, 128}) {
    for (const int32_t block_kv : {1, 3, 16, 64}) {
      for (const int32_t n : {1, 2, 4}) {
        StepArgs a = unit_tile_args(ratio, block_kv, n, n);
        a.schedule.num_ctas = 8;
        a.schedule.work = 4;
        a.num_real_decode_rows = 4 * n;
        const int32_t keys = ratio * block_kv;
        // The longest bound that fits: plus C * K - C it is kMax.
        const int32_t longest = kMax - (keys - ratio);
        for (const int32_t bound : {0, 1, 1000, longest, kMax}) {
          a.max_decode_seq_len = bound;
          set_whole_tiles(a);
          if (keys < 2 || bound > longest) {
            EXPECT_EQ(a.whole_tiles, 0u) << "ratio=" << ratio << " block_kv=" << block_kv << " bound=" << bound;
            continue;
          }
          ASSERT_EQ(a.whole_tiles, Divisor(keys).multiplier())
              << "ratio=" << ratio << " block_kv=" << block_kv << " bound=" << bound;
          for (int32_t seq = 0; seq < 4; ++seq) {
            for (const int32_t len : {-kMax - 1, -1, 0, 1, ratio - 1, ratio, ratio + 1, keys - 1, keys,
                                      keys + ratio, 999, 1000, 1001, kMax - 1, kMax}) {
              ASSERT_EQ(whole_sequence_tiles(a, len), sequence_unit_tiles(a, seq, len))
                  << "ratio=" << ratio << " block_kv=" << block_kv << " n=" << n << " bound=" << bound
                  << " seq=" << seq << " len=" << len;
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 3000);
}

TEST(CheckStepArgs, RefusesDivisorsThatAreNotTheFields) {
  StepArgs a;
  const auto error = [&a] { return test::error_of<StepError>([&a] { check_step_args(a); }); };
  a.compress_ratio = 4;  // by_compress_ratio still divides by 1
  EXPECT_NE(error().find("compress_ratio=4"), std::string::npos) << error();
  EXPECT_THROW(fill_step_launch(a), StepError);
  a.by_compress_ratio = Divisor(4);
  EXPECT_NO_THROW(check_step_args(a));  // no schedule: its divisors are not read
  a.schedule.num_ctas = 8;
  a.schedule.block_kv = 64;
  a.schedule.row_blocks = 1;
  a.schedule.work = 2;
  a.schedule.max_tiles = 17;
  EXPECT_THROW(check_step_args(a), StepError);
  a.by_block_kv = Divisor(64);
  // all_live still divides by 1 and 1: the schedule's are 6 and 3.
  EXPECT_NE(error().find("spare=6 and share=3"), std::string::npos) << error();
  a.all_live = slice_divisors(a.schedule);
  EXPECT_NO_THROW(check_step_args(a));
  a.candidate_block_size = 64;  // by_candidate_block still divides by 1
  EXPECT_NE(error().find("candidate_block_size=64"), std::string::npos) << error();
  a.by_candidate_block = Divisor(64);
  EXPECT_NO_THROW(check_step_args(a));
  a.native_next_n = 2;  // by_next_n still divides by 1
  EXPECT_NE(error().find("native_next_n=2"), std::string::npos) << error();
  a.by_next_n = Divisor(2);
  EXPECT_NO_THROW(check_step_args(a));
  set_whole_tiles(a);
  const uint32_t multiplier = Divisor(4 * 64).multiplier();
  EXPECT_EQ(a.whole_tiles, multiplier);
  EXPECT_NO_THROW(check_step_args(a));
  a.whole_tiles = multiplier + 1;  // would divide by something else
  EXPECT_NE(error().find(fmt::format("whole_tiles={} is not {}", multiplier + 1, multiplier)), std::string::npos)
      << error();
  a.whole_tiles = multiplier;
  a.max_decode_seq_len = 0x7FFFFFFF;  // with C = 1, the bound plus 63 would pass int32
  a.compress_ratio = 1;
  a.by_compress_ratio = Divisor(1);
  EXPECT_NE(error().find(fmt::format("whole_tiles={} is not 0", multiplier)), std::string::npos) << error();
  set_whole_tiles(a);
  EXPECT_EQ(a.whole_tiles, 0u);
  EXPECT_NO_THROW(check_step_args(a));
}

// A hand-built schedule whose slices may walk no tile: with every unit
// short of a tile, tiles_per_slice would be 0 and the CPU reference would
// divide by it (a SIGFPE), as would the kernel. check_step_args refuses it.
TEST(CheckStepArgs, RefusesAScheduleWhoseSlicesWalkNoTile) {
  const Words lens{1, 1, 1, 1};  // under compress_ratio: no unit has a tile
  const Words qsl{0, 1, 2, 3, 4};
  Words schedule(4 * 8, -1);
  Words row_lens(4, -1);
  StepArgs a = unit_tile_args(4, 64, 1, 1);
  a.schedule.num_seqs = 4;
  a.schedule.work = 4;
  a.schedule.num_ctas = 8;
  a.schedule.native = true;
  a.all_live = slice_divisors(a.schedule);
  a.in.seq_lens = lens.data();
  a.in.num_seq_lens = 4;
  a.in.query_start_loc = qsl.data();
  a.in.num_query_start_loc = 5;
  a.num_reqs = 4;
  a.num_decodes = 4;
  a.num_decode_rows = 4;
  a.num_real_decode_rows = 4;
  a.native_next_n = 1;
  a.max_decode_seq_len = 100;
  a.out.decode_schedule.data = schedule.data();
  a.out.decode_row_lens.data = row_lens.data();
  for (const int32_t max_tiles : {0, -3}) {
    a.schedule.max_tiles = max_tiles;
    const std::string error = test::error_of<StepError>([&a] { fill_step_launch(a); });
    EXPECT_NE(error.find(fmt::format("max_tiles={}", max_tiles)), std::string::npos) << error;
  }
  EXPECT_EQ(schedule, Words(4 * 8, -1));  // nothing written
  a.schedule.max_tiles = 1;
  fill_step_launch(a);
  EXPECT_EQ(schedule, Words(4 * 8, 0));  // no unit has a slice: every slot idle
  EXPECT_EQ(row_lens, Words(4, 0));
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

TEST(FillStepBuffers, WritesKeyBoundsAsTheBaseBuilderLaysTheChunksKeys) {
  const Geometry g = make_geometry(small_config());  // C = 4, a roomy budget
  // One decode, then one chunk of three prefills, the middle one without rows.
  const Words qsl{0, 1, 4, 4, 6};
  const Words lens{9, 40, 21, 10};
  const StepPlan plan = plan_step(g, qsl, lens);
  ASSERT_EQ(plan.prefill.size(), 1u);
  ASSERT_EQ(plan.prefill[0].num_reqs, 3);
  HostBuffers out(g);
  test::fill_reference(g, plan, qsl, lens, Words(4, 1), 1, out, false, true);
  // Contexts 10, 5, 2: request 1's rows start at 0, request 3's after 10 + 5.
  // Row ends: (38 + j) / 4 for request 1, (9 + j) / 4 for request 3.
  EXPECT_EQ(slice(out.prefill_key_starts, 6), (Words{0, 0, 0, 15, 15, -7}));
  EXPECT_EQ(slice(out.prefill_key_ends, 6), (Words{9, 9, 10, 17, 17, -7}));
  // Without the buffers nothing is written.
  HostBuffers plain(g);
  test::fill_reference(g, plan, qsl, lens, Words(4, 1), 1, plain);
  EXPECT_EQ(slice(plain.prefill_key_starts, 2), (Words{-7, -7}));
}

TEST(FillStepBuffers, StartsEachSliceOfAWideRequestAtItsOwnKeys) {
  IndexerConfig c = small_config();
  c.max_model_len = 65536;
  c.max_logits_mb = 1;  // 16 rows of 16384 columns
  const Geometry g = make_geometry(c);
  // A request with no rows opens the group, whose one wide request is cut
  // into slices: each slice's chunk is that request alone.
  const Words qsl{0, 0, 40};
  const Words lens{4000, 65536};
  const StepPlan plan = plan_step(g, qsl, lens);
  ASSERT_EQ(plan.prefill.size(), 3u);
  HostBuffers out(g);
  test::fill_reference(g, plan, qsl, lens, Words(2 * 512, 1), 512, out, false, true);
  for (std::size_t t = 0; t < 40; ++t) {
    EXPECT_EQ(out.prefill_key_starts[t], 0) << t;
    EXPECT_EQ(out.prefill_key_ends[t], out.prefill_row_ends[t]) << t;
  }
}

TEST(CheckStepBuffers, RefusesOneKeyBoundBufferWithoutTheOther) {
  const Geometry g = make_geometry(small_config());
  const Words qsl{0, 5};
  const Words lens{20};
  const StepPlan plan = plan_step(g, qsl, lens);
  HostBuffers out(g);
  StepOutputs o = out.outputs(false, true);
  o.prefill_key_ends = OutputBuffer{};
  const Words table{1};
  const StepInputs in = make_step_inputs(lens, qsl, table, 1);
  EXPECT_EQ(test::error_of<StepError>([&] { check_step_buffers(g, plan, in, o); }),
            "StepOutputs.prefill_key_ends is null, and the step writes 5 words of it (a key end a "
            "prefill row (prefill_key_starts is given))");
  o = out.outputs(false, true);
  o.prefill_key_starts.capacity = 4;
  EXPECT_EQ(test::error_of<StepError>([&] { check_step_buffers(g, plan, in, o); }),
            "StepOutputs.prefill_key_starts holds 4 words, and the step writes 5 (a key start a "
            "prefill row (prefill_key_ends is given))");
}

TEST(FillStepBuffers, KeyBoundsOnRandomStepsAreTheChunksContextsBeforeEachRow) {
  std::mt19937_64 rng(77);
  for (const Geometry& g : test::random_geometries()) {
    HostBuffers out(g);
    StepPlan plan;
    for (int i = 0; i < 150; ++i) {
      const test::RandomStep s = i % 4 == 3 ? test::zero_row_step(g, rng) : test::random_step(g, rng);
      plan_step(g, s.query_start_loc, s.seq_lens_upper_bound, s.num_tokens, plan);
      test::fill_reference(g, plan, s.query_start_loc, s.seq_lens, s.block_table, s.table_stride, out,
                           false, true);
      // Each chunk on its own: its requests' contexts (as written) before
      // each row's request, and that plus the row end.
      for (const PrefillPlan& chunk : plan.prefill) {
        for (int32_t t = chunk.token_start; t < chunk.token_end; ++t) {
          int32_t before = 0;
          for (int32_t r = chunk.first_request; s.query_start_loc[static_cast<std::size_t>(r) + 1] <= t; ++r) {
            before += out.context_lens[static_cast<std::size_t>(r)];
          }
          const auto row = static_cast<std::size_t>(t - plan.num_decode_tokens);
          ASSERT_EQ(out.prefill_key_starts[row], before) << "token " << t << " step " << i;
          ASSERT_EQ(out.prefill_key_ends[row], before + out.prefill_row_ends[row]) << "token " << t;
        }
      }
    }
  }
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

TEST(FillStepBuffers, ClampsEachPrefillRequestToItsOwnChunk) {
  // Request 1's device length is ten times its upper bound, beside a
  // 60,000-token request. Clamped to the step's longest bound, its rows
  // ended at up to 1,000 keys in a chunk 100 columns wide (4 pages);
  // clamped to its chunk's, they end within it.
  IndexerConfig c = test::deepseek_config();
  c.max_logits_mb = 1;  // 17 rows at 15,000 columns: request 0 is sliced, request 1 alone
  const Geometry g = make_geometry(c);
  const Words qsl{0, 50, 60};
  const Words upper{60000, 400};
  const Words exact{60000, 4000};
  const StepPlan plan = plan_step(g, qsl, upper);
  const PrefillPlan& last = plan.prefill.back();
  ASSERT_EQ(last.first_request, 1);
  ASSERT_EQ(last.width, 100);
  const int32_t stride = g.max_blocks_per_seq();
  const Words table(2 * static_cast<std::size_t>(stride), 1);
  HostBuffers out(g);
  test::fill_reference(g, plan, qsl, exact, table, stride, out);
  const StepInputs in = make_step_inputs(exact, qsl, table, stride);
  const PrefillLaunch l = prefill_launch(g, plan, plan.prefill.size() - 1, in, out.outputs());
  EXPECT_EQ(l.max_blocks, 4);
  EXPECT_EQ(l.context_lens[0], 100);
  EXPECT_EQ(Words(l.row_ends, l.row_ends + 10), (Words{97, 98, 98, 98, 98, 99, 99, 99, 99, 100}));
  EXPECT_EQ(launch_bound_violation(g, plan, in, out.outputs()), "");
  // Request 0's rows, in its own chunks, are its own: up to 15,000 keys.
  EXPECT_EQ(out.prefill_row_ends[49], 15000);
}

TEST(FillStepBuffers, ClampsADecodeContextToTheDecodeBound) {
  // The fuzzer's case: a native MTP decode whose device length is 4 tokens
  // past its bound (128 tokens: one 32-entry page), beside a longer prefill.
  // Its rows ended at 31 and 32 but its context, clamped to the step's
  // bound, was 33 keys against max_blocks of one page.
  IndexerConfig c = small_config();
  c.num_speculative_tokens = 1;
  const Geometry g = make_geometry(c);
  const Words qsl{0, 2, 7};
  const Words upper{128, 4000};
  const Words exact{132, 4000};
  const StepPlan plan = plan_step(g, qsl, upper);
  ASSERT_TRUE(plan.decode.native.present());
  const int32_t stride = g.max_blocks_per_seq();
  const Words table(2 * static_cast<std::size_t>(stride), 1);
  HostBuffers out(g);
  test::fill_reference(g, plan, qsl, exact, table, stride, out);
  const StepInputs in = make_step_inputs(exact, qsl, table, stride);
  const DecodeLaunch d = decode_launch(g, plan, in, out.outputs());
  EXPECT_EQ(d.max_blocks, 1);
  EXPECT_EQ(d.context_lens[0], 32);
  EXPECT_EQ(Words(d.row_ends, d.row_ends + 2), (Words{31, 32}));
  EXPECT_EQ(launch_bound_violation(g, plan, in, out.outputs()), "");
}

TEST(FillStepBuffers, ClampsDeviceLengthsOutsideTheirBounds) {
  // The host cannot check the device's exact lengths. A broken engine's
  // (negative, past the upper bound, INT32_MIN or INT32_MAX) read as 0 or
  // as the bound its request's launch was sized for: every value stays
  // defined (the sanitizer build checks), and no launch view tells its
  // launch to read past its width or block-table columns.
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
    const int32_t longest = plan.max_seq_len / g.config().compress_ratio;
    for (int32_t r = 0; r < plan.num_reqs; ++r) {
      ASSERT_GE(out.context_lens[static_cast<std::size_t>(r)], 0) << "step " << i;
      ASSERT_LE(out.context_lens[static_cast<std::size_t>(r)], longest) << "step " << i;
    }
    const StepInputs in = make_step_inputs(s.seq_lens, s.query_start_loc, s.block_table, s.table_stride);
    ASSERT_EQ(launch_bound_violation(g, plan, in, out.outputs()), "") << "step " << i;
    const ScheduleShape& sh = plan.decode.schedule;
    for (int32_t slot = 0; slot < sh.num_ctas; ++slot) {
      const int32_t* d = out.decode_schedule.data() + 4 * slot;
      ASSERT_TRUE(d[3] == 0 || (d[2] >= 0 && d[2] < d[3] && d[0] < sh.num_seqs && d[1] < sh.row_blocks))
          << "step " << i << " slot " << slot;
    }
  }
  EXPECT_GT(broken, 10000);
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
  EXPECT_GT(untouched, 400);
}

TEST(PackChunkGroups, FoldsTheSlicesOfOneRequest) {
  const Geometry g = make_geometry(test::deepseek_config());
  const StepPlan p = plan_step(g, Words{0, 2, 4, 8196}, Words{9000, 120000, 300000});
  // Five 1789-row slices of request 2, the last one shorter.
  EXPECT_EQ(p.chunk_groups, (std::vector<ChunkGroup>{{2, 1, 4, 8196, 1789, 0, 300000}}));
}

TEST(PackChunkGroups, KeepsGroupsOfSeveralRequestsApart) {
  std::vector<PrefillPlan> plans(3);
  plans[0] = PrefillPlan{0, 10, 0, 2, 100, 0, 2, 0, false, 400};
  plans[1] = PrefillPlan{10, 20, 2, 1, 100, 2, 1, 3, false, 401};
  plans[2] = PrefillPlan{20, 25, 2, 1, 100, 3, 1, 5, false, 401};
  std::vector<ChunkGroup> groups;
  pack_chunk_groups(plans, groups);
  EXPECT_EQ(groups, (std::vector<ChunkGroup>{{0, 2, 0, 10, 10, 0, 400}, {2, 1, 10, 25, 10, 3, 401}}));
}

}  // namespace
}  // namespace idxplan
