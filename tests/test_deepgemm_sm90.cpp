// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/contracts/deepgemm_sm90.hpp"

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "idxplan/idxplan.hpp"
#include "test_support.hpp"

namespace idxplan::deepgemm_sm90 {
namespace {

using Words = std::vector<int32_t>;

// The metadata of `lens` ([batch, next_n], row-major) on `num_sms` SMs.
Words metadata(const Words& lens, int64_t next_n, int64_t num_sms) {
  const auto batch = static_cast<int64_t>(lens.size()) / next_n;
  const MetadataShape s = metadata_shape(batch, next_n, kBlockKv, num_sms);
  Words out(static_cast<std::size_t>(s.words()), -7);
  fill_metadata(s, lens, out);
  return out;
}

std::string error_of(const Words& lens, int64_t batch, int64_t next_n, int64_t block_kv, int64_t num_sms,
                     std::size_t out_words) {
  return test::error_of<StepError>([&] {
    const MetadataShape s = metadata_shape(batch, next_n, block_kv, num_sms);
    Words out(out_words);
    fill_metadata(s, lens, out);
  });
}

TEST(Splits, AreDeepGemmsUint32CeilingOf256Keys) {
  EXPECT_EQ(splits_of(0), 0u);
  EXPECT_EQ(splits_of(1), 1u);
  EXPECT_EQ(splits_of(256), 1u);
  EXPECT_EQ(splits_of(257), 2u);
  EXPECT_EQ(splits_of(std::numeric_limits<int32_t>::max()), 8388608u);
  // Read as uint32: -1 to -255 wrap past 2^32 to 0 splits, -256 does not.
  EXPECT_EQ(splits_of(-1), 0u);
  EXPECT_EQ(splits_of(-255), 0u);
  EXPECT_EQ(splits_of(-256), 16777215u);
}

TEST(Splits, FitUint32UnitsWithoutA64BitProductWrapping) {
  EXPECT_TRUE(units_fit(16777215, 256));   // 2^32 - 256 units
  EXPECT_FALSE(units_fit(16777217, 256));  // 2^32 + 256
  EXPECT_TRUE(units_fit(0, 1u << 30));
  // 2^38 splits of 2^30 atoms is 2^68 units: a uint64 product would wrap to 0.
  EXPECT_FALSE(units_fit(uint64_t{1} << 38, 1u << 30));
}

TEST(Metadata, GivesTheFirstSmsOneUnitMore) {
  // Splits 2, 0 and 3: five units on four SMs, SM 0 takes two.
  EXPECT_EQ(metadata({300, 0, 700}, 1, 4), (Words{0, 0, 2, 0, 2, 1, 2, 2, 3, 0}));
}

TEST(Metadata, WalksEachTwoRowAtomOfASequenceOverItsSplits) {
  // next_n 3 is two atoms; the last column's 513 and 256 keys are 3 and 1
  // splits: units (atom, split) 0-5 of sequence 0, 6-7 of sequence 1, on
  // three SMs of 3, 3 and 2.
  EXPECT_EQ(metadata({9, 9, 513, 9, 9, 256}, 3, 3), (Words{0, 0, 1, 0, 2, 0, 4, 0}));
  // next_n 2 is one atom: the same as one row a sequence.
  EXPECT_EQ(metadata({1, 513, 1, 256}, 2, 3), metadata({513, 256}, 1, 3));
}

TEST(Metadata, EndsEveryRowAtTheEndWithoutUnits) {
  EXPECT_EQ(metadata({0, 0, -1}, 1, 2), (Words{3, 0, 3, 0, 3, 0}));
  EXPECT_EQ(metadata({}, 2, 2), (Words{0, 0, 0, 0, 0, 0}));
}

TEST(Metadata, IsAUnitWalkOfEverySequencesAtomsAndSplits) {
  // Unit u of the work lies in the sequence whose units hold it, at atom
  // (u - first) / splits and split (u - first) % splits: the same rows,
  // walked rather than searched, for random steps.
  std::mt19937_64 rng(51);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t batch = uniform(0, 300);
    const int64_t next_n = uniform(1, 5);
    const int64_t num_sms = trial % 4 == 0 ? uniform(1, 8) : uniform(1, 300);
    Words lens(static_cast<std::size_t>(batch * next_n));
    for (int32_t& v : lens) v = static_cast<int32_t>(uniform(0, 5) == 0 ? uniform(-255, 0) : uniform(0, 20000));
    const Words got = metadata(lens, next_n, num_sms);

    const int64_t atoms = next_n >= 2 ? (next_n + 1) / 2 : 1;
    std::vector<int64_t> first(static_cast<std::size_t>(batch) + 1, 0);  // each sequence's first unit
    for (int64_t q = 0; q < batch; ++q) {
      const int32_t len = lens[static_cast<std::size_t>(q * next_n + next_n - 1)];
      const int64_t splits = len <= 0 ? 0 : (len + 255) / 256;
      first[static_cast<std::size_t>(q) + 1] = first[static_cast<std::size_t>(q)] + splits * atoms;
    }
    const int64_t total = first.back();
    for (int64_t sm = 0; sm <= num_sms; ++sm) {
      const int64_t u = sm * (total / num_sms) + std::min(sm, total % num_sms);
      int64_t want_atom = batch * atoms;
      int64_t want_split = 0;
      for (int64_t q = 0; q < batch; ++q) {
        if (u < first[static_cast<std::size_t>(q) + 1]) {
          const int64_t splits = (first[static_cast<std::size_t>(q) + 1] - first[static_cast<std::size_t>(q)]) / atoms;
          const int64_t offset = u - first[static_cast<std::size_t>(q)];
          want_atom = q * atoms + offset / splits;
          want_split = offset % splits;
          break;
        }
      }
      ASSERT_EQ(got[static_cast<std::size_t>(2 * sm)], want_atom) << "trial " << trial << " sm " << sm;
      ASSERT_EQ(got[static_cast<std::size_t>(2 * sm + 1)], want_split) << "trial " << trial << " sm " << sm;
    }
  }
}

TEST(MetadataShape, RefusesWhatDeepGemmRefusesOnSm90ByName) {
  EXPECT_EQ(error_of({}, 0, 1, 32, 132, 266),
            "get_paged_mqa_logits_metadata: block_kv=32; DeepGEMM's SM90 kernels take block_kv=64 only");
  EXPECT_EQ(error_of({}, 19361, 1, 64, 132, 266),
            "get_paged_mqa_logits_metadata: context_lens has 19361 rows (sequences); DeepGEMM's metadata kernel "
            "holds 0 to 19360 in shared memory");
  EXPECT_EQ(error_of({}, 0, 0, 64, 132, 266),
            "get_paged_mqa_logits_metadata: context_lens has 0 columns (next_n); it needs at least 1");
  EXPECT_EQ(error_of({}, 0, 1, 64, 0, 2), "get_paged_mqa_logits_metadata: num_sms=0 is not a positive int32");
}

TEST(Metadata, RefusesBuffersOfTheWrongSize) {
  EXPECT_EQ(error_of({1, 2, 3}, 2, 2, 64, 2, 6),
            "get_paged_mqa_logits_metadata: context_lens holds 3 words, and [2, 2] is 4");
  EXPECT_EQ(error_of({1, 2}, 2, 1, 64, 2, 5),
            "get_paged_mqa_logits_metadata: the metadata holds 5 words, and [num_sms + 1, 2] with num_sms=2 is 6");
}

TEST(Metadata, RefusesLengthsWhoseUnitsPassUint32) {
  // -256 keys is 16,777,215 splits as uint32; at next_n 512 (256 atoms) two
  // sequences come to 2^33 - 512 units, which DeepGEMM's sums wrap.
  const Words lens(2 * 512, -256);
  EXPECT_EQ(error_of(lens, 2, 512, 64, 132, 266),
            "get_paged_mqa_logits_metadata: context_lens come to 33554430 splits of 256 keys, 256 atoms a "
            "sequence: more (atom, KV split) units than uint32 counts, where DeepGEMM's sums wrap");
  // One such sequence fits: 4,294,967,040 units.
  EXPECT_EQ(metadata(Words(512, -256), 512, 1), (Words{0, 0, 256, 0}));
}

using test::deepgemm_config;

TEST(Geometry, SizesTheMetadataByTheGpusSmsAndRunsDeepGemmsNextN) {
  IndexerConfig c = deepgemm_config();
  c.num_speculative_tokens = 1;
  const Geometry g = make_geometry(c);
  EXPECT_EQ(g.schedule_words(), 2 * 133);
  EXPECT_EQ(step_buffer_sizes(g).decode_schedule, 2 * 133);
  EXPECT_EQ(g.native_next_n(), 2);
  c.num_speculative_tokens = 3;  // next_n 4: DeepGEMM's SM90 kernels take 1 or 2, so flattened
  EXPECT_EQ(make_geometry(c).native_next_n(), 1);
  EXPECT_EQ(make_geometry(c).decode_threshold(), 4);
  // The contract's name, both ways.
  Contract named = Contract::gluon_mxfp4;
  EXPECT_TRUE(contract_from_name("deepgemm_sm90", named));
  EXPECT_EQ(named, Contract::deepgemm_sm90);
  EXPECT_EQ(contract_name(Contract::deepgemm_sm90), "deepgemm_sm90");
}

TEST(Geometry, RefusesWhatDeepGemmsSm90KernelsCannotTakeByName) {
  IndexerConfig c = deepgemm_config();
  c.block_size = 128;
  EXPECT_EQ(test::error_of<ConfigError>([&] { (void)make_geometry(c); }),
            "contract=deepgemm_sm90 needs pages of 64 entries (DeepGEMM's SM90 block_kv), got block_size / "
            "compress_ratio = 128 / 1 = 128");
  c = deepgemm_config();
  c.max_num_seqs = 10000;
  c.num_speculative_tokens = 1;
  c.max_num_batched_tokens = 65536;
  EXPECT_EQ(test::error_of<ConfigError>([&] { (void)make_geometry(c); }),
            "contract=deepgemm_sm90: a step may have 20000 decode rows (max_num_seqs=10000 x 2 rows, within "
            "max_num_batched_tokens=65536), past the 19360 sequences DeepGEMM's metadata kernel holds");
  c = deepgemm_config();
  c.num_compute_units = std::numeric_limits<int32_t>::max();
  EXPECT_NE(test::error_of<ConfigError>([&] { (void)make_geometry(c); })
                .find("num_compute_units=2147483647 SMs make a metadata of 2147483648 rows"),
            std::string::npos);
}

TEST(Step, WritesTheMetadataOfTheDecodeLaunchsSequences) {
  // Two MTP decodes of 1,000 and 300 tokens, native in sequences of 2
  // (rows 999, 1000 and 299, 300 keys: 4 and 2 splits), and a prefill, on 4
  // SMs: six units, the first two SMs taking two.
  IndexerConfig c = deepgemm_config();
  c.num_compute_units = 4;
  const Geometry g = make_geometry(c);
  const Words qsl{0, 2, 4, 10};
  const Words lens{1000, 300, 6};
  const StepPlan plan = plan_step(g, qsl, lens);
  ASSERT_TRUE(plan.decode.native.present());
  EXPECT_EQ(plan.decode.metadata, (MetadataPlan{2, 2, 4}));
  HostStepBuffers b(g, -7);
  const Words table(3 * 4096, 5);
  fill_step_buffers(g, plan, make_step_inputs(lens, qsl, table, 4096), b.outputs());
  ASSERT_EQ(b.decode_schedule.size(), 10u);  // [num_sms + 1, 2]: the geometry's size is the step's
  EXPECT_EQ(b.decode_schedule, (Words{0, 0, 0, 2, 1, 0, 1, 1, 2, 0}));
  // No decodes, no metadata: the buffer is not written.
  const StepPlan prefill = plan_step(g, Words{0, 6}, Words{6});
  EXPECT_FALSE(prefill.decode.metadata.present());
  EXPECT_EQ(step_buffer_sizes(prefill).decode_schedule, 0);
}

}  // namespace
}  // namespace idxplan::deepgemm_sm90
