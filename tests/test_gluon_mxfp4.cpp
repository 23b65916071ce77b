// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/contracts/gluon_mxfp4.hpp"

#include <algorithm>
#include <cstdint>
#include <random>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace idxplan {
namespace {

TEST(ScheduleShape, MtpSequencesSpreadOverTheGpu) {
  const Geometry g = make_geometry(test::deepseek_config());
  // 8192 tiles a unit; 256 units, 2048 target workgroups, cap 64.
  const ScheduleShape s = schedule_shape(g, 256, 2, true);
  EXPECT_EQ(s.block_m, 2);
  EXPECT_EQ(s.row_blocks, 1);
  EXPECT_EQ(s.work, 256);
  EXPECT_EQ(s.block_kv, 32);
  EXPECT_EQ(s.num_ctas, 32768);  // 256 units x 128 slices
  EXPECT_EQ(s.max_tiles, 65);    // ceil(8192 * 256 / (32768 - 256))
  EXPECT_TRUE(s.native);
}

TEST(ScheduleShape, StopsAtSixtyFiveThousandSlots) {
  const Geometry g = make_geometry(test::deepseek_config());
  const ScheduleShape s = schedule_shape(g, 1024, 2, true);
  EXPECT_EQ(s.num_ctas, 65536);
  EXPECT_EQ(s.max_tiles, 131);  // ceil(8192 * 1024 / (65536 - 1024))
}

TEST(ScheduleShape, ShortContextsShrinkTheCap) {
  IndexerConfig c = test::deepseek_config();
  c.max_model_len = 8192;  // 2048 columns, 64 tiles
  c.num_speculative_tokens = 0;
  const Geometry g = make_geometry(c);
  const ScheduleShape s = schedule_shape(g, 5, 1, false);
  // plain = ceil(64 * 5 / (3072 - 5)) = 1 < 4 * 128: the cap drops to 1.
  EXPECT_EQ(s.block_m, 1);
  EXPECT_EQ(s.num_ctas, 3072);  // max(target, 5 units x 64 slices)
  EXPECT_EQ(s.max_tiles, 1);
  EXPECT_FALSE(s.native);
}

TEST(ScheduleShape, NoScheduleForFewSequences) {
  const Geometry g = make_geometry(test::deepseek_config());
  EXPECT_FALSE(schedule_shape(g, 3, 2, true).present());
  EXPECT_EQ(schedule_shape(g, 3, 2, true), ScheduleShape{});
}

TEST(ScheduleShape, NoScheduleForMoreUnitsThanWorkgroups) {
  const Geometry g = make_geometry(test::deepseek_config());
  EXPECT_TRUE(schedule_shape(g, 3072, 1, false).present());
  EXPECT_FALSE(schedule_shape(g, 3073, 1, false).present());
}

TEST(ScheduleShape, WideContextsStayInInt64) {
  IndexerConfig c = test::deepseek_config();
  c.compress_ratio = 1;
  c.block_size = 32;
  c.max_model_len = (1 << 29) - 32;  // 2^24 tiles of 32: n_tiles * work > 2^31
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 16;
  c.sparse_logits = false;
  const Geometry g = make_geometry(c);
  const ScheduleShape s = schedule_shape(g, 8, 2, true);
  ASSERT_TRUE(s.present());
  // 262144 slices a unit at the cap of 64, so the slot limit binds.
  EXPECT_EQ(s.num_ctas, 65536);
  // ceil((2^24 - 1) * 8 / (65536 - 8))
  EXPECT_EQ(s.max_tiles, 2049);
}

TEST(UnitFirstRow, PullsTheLastBlockBack) {
  ScheduleShape s;
  s.rows_per_seq = 7;
  s.block_m = 2;
  EXPECT_EQ(unit_first_row(s, 0), 0);
  EXPECT_EQ(unit_first_row(s, 2), 4);
  EXPECT_EQ(unit_first_row(s, 3), 5);  // 6 would run past row 6
  s.block_m = 1;
  EXPECT_EQ(unit_first_row(s, 3), 3);
}

TEST(UnitTiles, IsZeroOnlyForAnEmptyContext) {
  const Divisor block_kv(32);
  EXPECT_EQ(unit_tiles(block_kv, 0, 10), 0);
  EXPECT_EQ(unit_tiles(block_kv, 100, 0), 1);   // rows that see nothing still walk a tile
  EXPECT_EQ(unit_tiles(block_kv, 100, 64), 2);  // the rows' end bounds the walk
  EXPECT_EQ(unit_tiles(block_kv, 100, 1000), 4);
}

TEST(TilesPerSlice, SpreadsTilesOverTheSpareSlots) {
  ScheduleShape s;
  s.num_ctas = 8;
  s.max_tiles = 32;
  s.work = 3;
  // 6 tiles over 5 spare slots: 2 a slice; the largest unit's 4 tiles need 1.
  EXPECT_EQ(tiles_per_slice(s, slice_divisors(s), 6, 3, 4), 2);
  // Within max_tiles, unless the largest unit needs more than 4 slots a share.
  s.max_tiles = 1;
  s.work = 4;
  EXPECT_EQ(tiles_per_slice(s, slice_divisors(s), 600, 4, 400), 100);
  EXPECT_EQ(tiles_per_slice(s, slice_divisors(s), 0, 0, 0), 1);
  // 9 tiles over the 4 spare slots of 4 live units: 3 a slice; with one of
  // the 4 units without tiles, over 5 spare slots: 2.
  s.max_tiles = 32;
  EXPECT_EQ(tiles_per_slice(s, slice_divisors(s), 9, 4, 4), 3);
  EXPECT_EQ(tiles_per_slice(s, slice_divisors(s), 9, 3, 4), 2);
}

// docs/design.md section 6's rule, in int64 throughout.
int64_t plain_tiles_per_slice(int64_t num_ctas, int64_t max_tiles, int64_t total, int64_t live,
                              int64_t max_unit_tiles) {
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const int64_t spare = num_ctas - live;
  const int64_t per_slice = std::min(std::max(ceil_div(total, std::max<int64_t>(spare, 1)), int64_t{1}), max_tiles);
  const int64_t share = std::max(spare / std::max<int64_t>(live, 1), int64_t{1});
  return std::max(per_slice, ceil_div(max_unit_tiles, share * 4));
}

// The 32-bit arithmetic (and the cap on the share) gives the rule's value
// for every operand a schedule can meet, and for totals past int32, both
// with the host's divisors (every unit live) and with the divisions.
TEST(TilesPerSlice, IsTheRuleInInt64) {
  std::mt19937_64 rng(5);
  const auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int64_t edges[] = {0, 1, 2, 3, 4, 255, 256, 65535, 65536, (int64_t{1} << 29) - 1,
                           int64_t{1} << 29, (int64_t{1} << 31) - 2, (int64_t{1} << 31) - 1};
  for (int i = 0; i < 200000; ++i) {
    ScheduleShape s;
    const bool edge = i % 2 == 0;
    const auto value = [&](int64_t hi) { return edge ? std::min(edges[pick(0, 12)], hi) : pick(0, hi); };
    s.num_ctas = static_cast<int32_t>(std::max<int64_t>(value((int64_t{1} << 31) - 1), 1));
    s.max_tiles = static_cast<int32_t>(std::max<int64_t>(value((int64_t{1} << 31) - 1), 1));
    s.work = static_cast<int32_t>(value(s.num_ctas));
    // Every unit live (the divisors' path) half the time.
    const auto live = pick(0, 1) == 0 ? s.work : static_cast<int32_t>(value(s.work));
    const auto max_unit_tiles = static_cast<int32_t>(value((int64_t{1} << 31) - 1));
    // A total of live units of at most max_unit_tiles each.
    const int64_t total = live == 0 || max_unit_tiles == 0 ? 0 : pick(max_unit_tiles, int64_t{live} * max_unit_tiles);
    ASSERT_EQ(tiles_per_slice(s, slice_divisors(s), total, live, max_unit_tiles),
              plain_tiles_per_slice(s.num_ctas, s.max_tiles, total, live, max_unit_tiles))
        << "num_ctas=" << s.num_ctas << " work=" << s.work << " max_tiles=" << s.max_tiles << " total=" << total
        << " live=" << live << " max_unit_tiles=" << max_unit_tiles;
  }
}

}  // namespace
}  // namespace idxplan
