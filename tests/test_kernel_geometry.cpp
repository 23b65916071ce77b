// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/kernel_geometry.hpp"

#include <gtest/gtest.h>

namespace idxplan {
namespace {

TEST(CacheLayout, WideHeadsUseThirtyTwoEntryGroups) {
  const CacheLayout l = cache_layout(64, 128, 32);
  EXPECT_EQ(l.n_per_tile, 32);
  EXPECT_EQ(l.d_per_tile, 16);
  EXPECT_EQ(l.scale_lanes, 2);
  EXPECT_EQ(l.block_kv, 32);
  EXPECT_EQ(l.value_bytes, 64);
  EXPECT_EQ(l.scale_bytes, 4);
}

TEST(CacheLayout, FewHeadsWithWideDimsUseSixteenEntryGroups) {
  const CacheLayout l = cache_layout(16, 128, 16);
  EXPECT_EQ(l.n_per_tile, 16);
  EXPECT_EQ(l.scale_lanes, 4);
  EXPECT_EQ(l.block_kv, 16);
}

TEST(CacheLayout, NarrowDimsUseThirtyTwoEntryGroupsWhateverTheHeads) {
  EXPECT_EQ(cache_layout(8, 64, 32).n_per_tile, 32);
}

TEST(CacheLayout, BlockKvStopsAtSixtyFour) {
  EXPECT_EQ(cache_layout(64, 128, 256).block_kv, 64);
}

TEST(CacheLayout, RejectsAPageShorterThanItsShuffleGroup) {
  EXPECT_THROW(cache_layout(64, 128, 16), ConfigError);
}

TEST(CacheLayout, RejectsAPageThatIsNotWholeTiles) {
  // 96 entries: three 32-entry groups, but not whole 64-entry tiles.
  EXPECT_THROW(cache_layout(64, 128, 96), ConfigError);
}

TEST(CacheLayout, RejectsScalesThatDoNotFillTheirLanes) {
  // D = 96: 3 scale bytes an entry, not a multiple of the 4 lanes.
  EXPECT_THROW(cache_layout(16, 96, 16), ConfigError);
}

TEST(CacheLayout, RejectsNonPositiveSizes) {
  EXPECT_THROW(cache_layout(0, 128, 32), ConfigError);
  EXPECT_THROW(cache_layout(64, -128, 32), ConfigError);
}

TEST(LaunchConfig, OneRowWithManyHeadsRunsThreeWaves) {
  const LaunchConfig c = launch_config(64, 1, 256);
  EXPECT_EQ(c.block_m, 1);
  EXPECT_EQ(c.row_blocks, 1);
  EXPECT_EQ(c.waves_per_eu, 3);
  EXPECT_EQ(c.target_wgs, 3072);
  EXPECT_EQ(c.max_tiles_per_split, 128);
}

TEST(LaunchConfig, OneRowWithFewHeadsRunsTwoWaves) {
  const LaunchConfig c = launch_config(32, 1, 100);
  EXPECT_EQ(c.waves_per_eu, 2);
  EXPECT_EQ(c.target_wgs, 800);
}

TEST(LaunchConfig, MtpRowsPairUpWithManyHeads) {
  const LaunchConfig c = launch_config(64, 2, 256);
  EXPECT_EQ(c.block_m, 2);
  EXPECT_EQ(c.row_blocks, 1);
  EXPECT_EQ(c.waves_per_eu, 2);
  EXPECT_EQ(c.target_wgs, 2048);
  EXPECT_EQ(c.max_tiles_per_split, 64);
}

TEST(LaunchConfig, SmallRowCountsMinimiseBlocksThenPadding) {
  // H > 32, n <= 6: b in 1..3. n = 3: b = 3 gives one block of 3.
  EXPECT_EQ(launch_config(64, 3, 1).block_m, 3);
  // n = 4: b = 2 and b = 3 both give 2 blocks; b = 2 pads less.
  EXPECT_EQ(launch_config(64, 4, 1).block_m, 2);
  EXPECT_EQ(launch_config(64, 4, 1).row_blocks, 2);
  // n = 7: the cap drops to 2.
  EXPECT_EQ(launch_config(64, 7, 1).block_m, 2);
  EXPECT_EQ(launch_config(64, 7, 1).row_blocks, 4);
  // H <= 32: b up to 7. n = 5: one block of 5.
  EXPECT_EQ(launch_config(32, 5, 1).block_m, 5);
  // n = 8: one block of 7 is not enough; b = 4 gives 2 blocks with no padding.
  EXPECT_EQ(launch_config(32, 8, 1).block_m, 4);
}

TEST(LaunchConfig, LongerSequencesUseFixedBlocks) {
  EXPECT_EQ(launch_config(32, 20, 1).block_m, 3);
  EXPECT_EQ(launch_config(32, 20, 1).row_blocks, 7);
  EXPECT_EQ(launch_config(32, 100, 1).block_m, 4);
  EXPECT_EQ(launch_config(64, 20, 1).block_m, 2);
  EXPECT_EQ(launch_config(64, 20, 1).row_blocks, 10);
}

TEST(LaunchConfig, VeryLongSequencesRunThreeWaves) {
  const LaunchConfig few = launch_config(32, 600, 10);
  EXPECT_EQ(few.block_m, 3);
  EXPECT_EQ(few.waves_per_eu, 3);
  const LaunchConfig many = launch_config(64, 600, 10);
  EXPECT_EQ(many.block_m, 1);
  EXPECT_EQ(many.row_blocks, 600);
  EXPECT_EQ(many.target_wgs, 120);
}

}  // namespace
}  // namespace idxplan
