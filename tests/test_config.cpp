// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/config.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace idxplan {
namespace {

using test::deepseek_config;

// The message of the ConfigError `c` raises.
std::string config_error(const IndexerConfig& c) {
  return test::error_of<ConfigError>([&] { make_geometry(c); });
}

TEST(MakeGeometry, DerivesTheDeepSeekGeometry) {
  const Geometry g = make_geometry(deepseek_config());
  EXPECT_EQ(g.page_entries(), 32);
  EXPECT_EQ(g.cache().n_per_tile, 32);
  EXPECT_EQ(g.cache().block_kv, 32);
  EXPECT_EQ(g.native_next_n(), 2);
  EXPECT_EQ(g.decode_threshold(), 2);
  EXPECT_EQ(g.logits_width(), 262144);
  EXPECT_EQ(g.max_logits_bytes(), int64_t{512} << 20);
  EXPECT_EQ(g.max_blocks_per_seq(), 8192);
  EXPECT_EQ(g.max_decode_rows(), 2048);
  EXPECT_EQ(g.num_candidate_cols(), 16384);
  // 512 MiB / (4 * 16384) rows of pool logits.
  EXPECT_EQ(g.gather_rows(), 8192);
  EXPECT_EQ(g.schedule_words(), 4 * 65536);
}

TEST(MakeGeometry, IsTheOnlyWayToAGeometry) {
  static_assert(!std::is_default_constructible_v<Geometry>, "no unchecked Geometry");
  const Geometry g = make_geometry(deepseek_config());
  // Each field of the config tells geometries apart; an equal config does not.
  EXPECT_EQ(make_geometry(deepseek_config()).fingerprint(), g.fingerprint());
  IndexerConfig c = deepseek_config();
  c.max_num_batched_tokens += 1;
  EXPECT_NE(make_geometry(c).fingerprint(), g.fingerprint());
  c = deepseek_config();
  c.adaptive_verification = true;
  EXPECT_NE(make_geometry(c).fingerprint(), g.fingerprint());
  EXPECT_NE(g.fingerprint(), 0u);
}

TEST(MakeGeometry, AdaptiveVerificationRunsFlattened) {
  IndexerConfig c = deepseek_config();
  c.adaptive_verification = true;
  const Geometry g = make_geometry(c);
  EXPECT_EQ(g.native_next_n(), 1);
  EXPECT_EQ(g.decode_threshold(), 2);
}

TEST(MakeGeometry, GatherGatesCompareWithoutRounding) {
  const Geometry g = make_geometry(deepseek_config());
  // Prefill: width >= 1.5 * 16384 = 24576.
  EXPECT_FALSE(g.prefill_gathers(24575));
  EXPECT_TRUE(g.prefill_gathers(24576));
  // Decode: context >= 3.0 * 16384 = 49152.
  EXPECT_FALSE(g.decode_gathers(49151));
  EXPECT_TRUE(g.decode_gathers(49152));
}

TEST(MakeGeometry, WithoutSparseLogitsNothingGathers) {
  IndexerConfig c = deepseek_config();
  c.sparse_logits = false;
  const Geometry g = make_geometry(c);
  EXPECT_EQ(g.num_candidate_cols(), 0);
  EXPECT_FALSE(g.prefill_gathers(1 << 28));
  EXPECT_FALSE(g.decode_gathers(1 << 28));
}

TEST(MakeGeometry, GatherRowsCapTheBudgetAtInt32) {
  IndexerConfig c = deepseek_config();
  c.max_logits_mb = 4096;  // 4 GiB: past what one launch may index
  const Geometry g = make_geometry(c);
  EXPECT_EQ(g.max_logits_bytes(), int64_t{4096} << 20);
  EXPECT_EQ(g.gather_rows(), ((int64_t{1} << 31) - 1) / (4 * 16384));
}

TEST(MakeGeometry, RejectsContextParallel) {
  IndexerConfig c = deepseek_config();
  c.dcp_world_size = 2;
  EXPECT_NE(config_error(c).find("dcp_world_size=2"), std::string::npos);
  c = deepseek_config();
  c.pcp_world_size = 4;
  EXPECT_NE(config_error(c).find("pcp_world_size=4"), std::string::npos);
}

TEST(MakeGeometry, SparseLogitsNeedCandidateBlocks) {
  IndexerConfig c = deepseek_config();
  c.candidate_block_size = 0;
  EXPECT_NE(config_error(c).find("two-level"), std::string::npos);
  c = deepseek_config();
  c.candidate_topk_blocks = 0;
  EXPECT_NE(config_error(c).find("candidate_topk_blocks=0"), std::string::npos);
}

TEST(MakeGeometry, SparseLogitsNeedAPowerOfTwoBlockCount) {
  IndexerConfig c = deepseek_config();
  c.candidate_topk_blocks = 2000;
  EXPECT_NE(config_error(c).find("power-of-two"), std::string::npos);
  EXPECT_NE(config_error(c).find("2000"), std::string::npos);
}

TEST(MakeGeometry, CandidateBlocksMustTileAPageAndFitAShuffleGroup) {
  IndexerConfig c = deepseek_config();
  c.candidate_block_size = 12;  // does not tile 32 entries
  EXPECT_NE(config_error(c).find("candidate_block_size=12"), std::string::npos);
  c.candidate_block_size = 64;  // past the 32-entry group
  c.block_size = 256;           // 64-entry pages, so it tiles them
  EXPECT_NE(config_error(c).find("32-entry shuffle group"), std::string::npos);
}

TEST(MakeGeometry, WithoutSparseLogitsCandidateBlocksAreNotChecked) {
  IndexerConfig c = deepseek_config();
  c.sparse_logits = false;
  c.candidate_topk_blocks = 2000;
  EXPECT_NO_THROW(make_geometry(c));
}

TEST(MakeGeometry, RejectsPlainNonsense) {
  IndexerConfig c = deepseek_config();
  c.num_heads = 0;
  EXPECT_NE(config_error(c).find("num_heads must be positive, got 0"), std::string::npos);
  c = deepseek_config();
  c.block_size = 130;
  EXPECT_NE(config_error(c).find("block_size=130"), std::string::npos);
  c = deepseek_config();
  c.head_dim = 112;
  EXPECT_NE(config_error(c).find("head_dim=112"), std::string::npos);
  c = deepseek_config();
  c.num_compute_units = -1;
  EXPECT_NE(config_error(c).find("num_compute_units"), std::string::npos);
  c = deepseek_config();
  c.num_speculative_tokens = -1;
  EXPECT_NE(config_error(c).find("num_speculative_tokens"), std::string::npos);
  c = deepseek_config();
  c.max_logits_mb = 0;
  EXPECT_NE(config_error(c).find("max_logits_mb"), std::string::npos);
}

TEST(MakeGeometry, RejectsALogitsRowPastTwoGiB) {
  IndexerConfig c = deepseek_config();
  c.compress_ratio = 1;
  c.block_size = 32;
  c.max_model_len = 1 << 29;  // 2^29 fp32 columns: exactly 2 GiB
  c.max_num_seqs = 1;
  c.max_num_batched_tokens = 2;
  c.sparse_logits = false;
  EXPECT_NE(config_error(c).find("2 GiB"), std::string::npos);
  c.max_model_len = (1 << 29) - 32;
  EXPECT_NO_THROW(make_geometry(c));
}

TEST(MakeGeometry, RejectsABlockTableTooNarrowForTheModel) {
  IndexerConfig c = deepseek_config();
  c.max_blocks_per_seq = 100;
  EXPECT_NE(config_error(c).find("max_blocks_per_seq=100"), std::string::npos);
}

TEST(MakeGeometry, RejectsADecodeBlockTablePastInt32Words) {
  IndexerConfig c = deepseek_config();
  c.max_num_seqs = 1 << 17;
  c.max_num_batched_tokens = 1 << 18;
  EXPECT_NE(config_error(c).find("past 2^31 words"), std::string::npos);
}

TEST(MakeGeometry, RejectsMoreWorkgroupsThanTheScheduleHolds) {
  IndexerConfig c = deepseek_config();
  c.num_compute_units = 1000;  // 12000 workgroups for one-row sequences
  EXPECT_NE(config_error(c).find("num_compute_units=1000"), std::string::npos);
}

TEST(MakeGeometry, RejectsComputeUnitsWhoseWorkgroupsOverflowInt32) {
  IndexerConfig c = deepseek_config();
  c.num_compute_units = 536870913;  // 4 x CUs x 2 waves passes 2^31
  const std::string e = config_error(c);
  EXPECT_NE(e.find("num_compute_units=536870913"), std::string::npos) << e;
  EXPECT_NE(e.find("6442450956 decode workgroups"), std::string::npos) << e;
}

TEST(MakeGeometry, RejectsADecodeThresholdPastTheStepsTokens) {
  IndexerConfig c = deepseek_config();
  c.num_speculative_tokens = std::numeric_limits<int32_t>::max();
  c.max_num_batched_tokens = std::numeric_limits<int32_t>::max();
  const std::string e = config_error(c);
  EXPECT_NE(e.find("num_speculative_tokens=2147483647"), std::string::npos) << e;
  // A decode of num_speculative_tokens + 1 tokens must fit a step.
  c.num_speculative_tokens = 7;
  c.max_num_batched_tokens = 7;
  EXPECT_NE(config_error(c).find("num_speculative_tokens=7"), std::string::npos);
  c.max_num_batched_tokens = 8;
  EXPECT_NO_THROW(make_geometry(c));
}

TEST(MakeGeometry, RejectsStepBuffersPastTheirBound) {
  IndexerConfig c = deepseek_config();
  c.max_num_batched_tokens = std::numeric_limits<int32_t>::max();
  const std::string e = config_error(c);
  EXPECT_NE(e.find("prefill_query_start_loc"), std::string::npos) << e;
  EXPECT_NE(e.find("max_num_batched_tokens=2147483647"), std::string::npos) << e;
}

TEST(MakeGeometry, RejectsAReservedPlanPastItsBound) {
  // 2^28 tokens: every buffer fits int32 words, but a plan reserved for
  // 2^28 one-row chunks is tens of GiB.
  IndexerConfig c = deepseek_config();
  c.max_num_batched_tokens = 1 << 28;
  const std::string e = config_error(c);
  EXPECT_NE(e.find("reserved plan"), std::string::npos) << e;
  EXPECT_NE(e.find("max_num_batched_tokens=268435456"), std::string::npos) << e;
}

TEST(MakeGeometry, ScheduleWordsCoverTheWidestTarget) {
  IndexerConfig c = deepseek_config();
  c.num_compute_units = 600;  // 7200 workgroups: still under 65536 slots
  EXPECT_EQ(make_geometry(c).schedule_words(), 4 * 65536);
}

}  // namespace
}  // namespace idxplan
