// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// The fused prepare kernel against the CPU reference, word for word. Built by
// nvcc (run on the H200) and by hipcc (compiled for gfx90a and gfx940), and
// by the host compiler onto the CPU stand-in for a GPU (tests/cpu_device),
// as NVIDIA's and as AMD's, where every CPU build runs it.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "device_support.hpp"
#include "idxplan/device/prepare_step.hpp"
#include "idxplan/plan/launches.hpp"
#include "idxplan/plan/step.hpp"
#include "random_step.hpp"
#include "test_support.hpp"

namespace idxplan {
namespace {

using Words = std::vector<int32_t>;

class PrepareStep : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device::device_count() == 0) GTEST_SKIP() << "no GPU on this machine: GPU test skipped";
    device::check(device::rt::stream_create(&stream_), "stream_create");
  }
  void TearDown() override {
    if (stream_ != nullptr) (void)device::rt::stream_destroy(stream_);
  }

  // Plans a step, runs the kernel and the CPU reference, and compares them:
  // every word either writes, and the poison around them, decode_block_table
  // included where the step does not write it.
  std::string run(const Geometry& g, const device::StepBuffers& buffers, test::HostBuffers& host,
                  const Words& qsl, const Words& lens, const Words& upper, int64_t num_tokens,
                  const Words& table, int32_t stride, bool always_write_table = false,
                  bool key_bounds = false) {
    plan_step(g, qsl, upper, num_tokens, plan_);
    // The device lengths lens_offset_ words into their array.
    Words shifted(static_cast<std::size_t>(lens_offset_), -1);
    shifted.insert(shifted.end(), lens.begin(), lens.end());
    const test::DeviceInputs in(qsl, shifted, table, stride);
    StepInputs inputs = in.inputs();
    inputs.seq_lens += lens_offset_;
    inputs.num_seq_lens -= lens_offset_;
    const StepOutputs out = buffers.outputs(always_write_table, key_bounds);
    const auto extents = test::step_extents(plan_, host, out, buffers.sizes());
    test::poison(extents, stream_);
    device::enqueue(g, plan_, inputs, out, stream_);
    device::check(device::rt::stream_synchronize(stream_), "stream_synchronize");
    test::fill_reference(g, plan_, qsl, lens, table, stride, host, always_write_table, key_bounds);
    return test::compare(extents);
  }

  device::Stream stream_ = nullptr;
  StepPlan plan_;
  int32_t lens_offset_ = 0;
};

int env_steps(int fallback) {
  const char* v = std::getenv("IDXPLAN_GPU_STEPS");
  return v != nullptr ? std::atoi(v) : fallback;
}

TEST_F(PrepareStep, MatchesTheReferenceOnRandomSteps) {
  const std::vector<Geometry> geometries = test::random_geometries();
  std::vector<device::StepBuffers> buffers;
  std::vector<test::HostBuffers> host;
  for (const Geometry& g : geometries) {
    buffers.emplace_back(g);
    host.emplace_back(g);
  }
  std::mt19937_64 rng(4242);
  const int steps = env_steps(2000);
  int scheduled = 0, small = 0, native = 0, one_row = 0, ragged = 0, padded = 0, always = 0, copied = 0,
      chunked = 0, gathers = 0, zero_rows = 0, keyed = 0;
  // Native schedules by path (the warps' or the blocks') and by whether a
  // sequence is one unit (row_blocks 1), which both paths take apart. These
  // geometries' native schedules are mostly the warps', and on AMD's waves
  // never the blocks' of several row blocks a sequence, which
  // MatchesTheReferenceOnRandomBigSteps meets.
  int native_kinds[2][2] = {};
  for (int i = 0; i < steps; ++i) {
    const std::size_t k = static_cast<std::size_t>(i) % geometries.size();
    // One step in eight is full of requests with no rows; one in three asks
    // for the decode table on every step, one in two for the key bounds.
    const test::RandomStep s = i % 8 == 7 ? test::zero_row_step(geometries[k], rng)
                                          : test::random_step(geometries[k], rng);
    const bool always_write = i % 3 == 0;
    const bool key_bounds = i % 2 == 1;
    const std::string diff = run(geometries[k], buffers[k], host[k], s.query_start_loc, s.seq_lens,
                                 s.seq_lens_upper_bound, s.num_tokens, s.block_table, s.table_stride,
                                 always_write, key_bounds);
    ASSERT_EQ(diff, "") << "step " << i << " on geometry " << k;
    const DecodePlan& d = plan_.decode;
    scheduled += d.schedule.present();
    small += d.schedule.present() && device::detail::small_schedule(d.schedule);
    if (d.schedule.present() && d.schedule.native) {
      ++native_kinds[device::detail::small_schedule(d.schedule)][d.schedule.row_blocks == 1];
    }
    native += d.native.present();
    one_row += d.rows_are_requests;
    ragged += d.ragged();
    padded += d.num_rows > d.num_real_rows;
    always += always_write && d.num_rows > 0;
    copied += writes_decode_block_table(plan_, buffers[k].outputs(always_write));
    chunked += plan_.prefill.size() > 1;
    gathers += !plan_.gather_launches.empty();
    zero_rows += i % 8 == 7;
    keyed += key_bounds && !plan_.chunk_groups.empty();
  }
  std::printf("%d random steps equal to the reference: %d scheduled (%d by the warps), %d native, "
              "%d flattened one-row, %d ragged, %d padded, %d asking for the table, %d writing it; %d chunked, "
              "%d gathering, %d full of empty requests, %d writing key bounds\n",
              steps, scheduled, small, native, one_row, ragged, padded, always, copied, chunked, gathers,
              zero_rows, keyed);
  std::printf("native schedules by the blocks: %d of several row blocks a sequence, %d of one; by the warps: %d, %d\n",
              native_kinds[0][0], native_kinds[0][1], native_kinds[1][0], native_kinds[1][1]);
  if (steps >= 1000) {  // the default mix meets both kinds; a short run (a sanitizer's) need not
    EXPECT_GT(native_kinds[1][0], 0);
    EXPECT_GT(native_kinds[1][1], 0);
  }
}

// flydsl_fp4's steps: the decode grid and every prefill chunk's written in
// the step's launch, word for word the CPU fill's (itself the drop-ins'
// rules on the step's own lengths: tests/test_properties.cpp).
TEST_F(PrepareStep, MatchesTheReferenceOnFlydslSteps) {
  const std::vector<Geometry> geometries = test::flydsl_geometries();
  std::vector<device::StepBuffers> buffers;
  std::vector<test::HostBuffers> host;
  for (const Geometry& g : geometries) {
    buffers.emplace_back(g);
    host.emplace_back(g);
  }
  std::mt19937_64 rng(4949);
  const int steps = env_steps(600);
  int grids = 0, native = 0, chunks = 0, big = 0;
  for (int i = 0; i < steps; ++i) {
    const std::size_t k = static_cast<std::size_t>(i) % geometries.size();
    const test::RandomStep s = i % 8 == 7   ? test::zero_row_step(geometries[k], rng)
                               : i % 8 == 3 ? test::full_decode_step(geometries[k], rng)
                                            : test::random_step(geometries[k], rng);
    const std::string diff = run(geometries[k], buffers[k], host[k], s.query_start_loc, s.seq_lens,
                                 s.seq_lens_upper_bound, s.num_tokens, s.block_table, s.table_stride, i % 3 == 0,
                                 i % 2 == 1);
    ASSERT_EQ(diff, "") << "step " << i << " on geometry " << k;
    grids += plan_.decode.grid.present();
    native += plan_.decode.native.present();
    chunks += static_cast<int>(plan_.prefill.size());
    for (const PrefillPlan& c : plan_.prefill) big += c.token_end - c.token_start > 2048;
  }
  // Long chunks, whose rows a block stages as runs (past 2,048 rows): a
  // decode and a prompt of `rows` rows after a 4,000-token prefix.
  IndexerConfig c = geometries[0].config();
  c.max_num_batched_tokens = 20000;
  c.max_logits_mb = 512;
  const Geometry long_chunks = make_geometry(c);
  const device::StepBuffers long_buffers(long_chunks);
  test::HostBuffers long_host(long_chunks);
  for (const int32_t rows : {2047, 2049, 9000, 19000}) {
    const Words qsl{0, 2, 2 + rows};
    const Words lens{60000, 4000 + rows};
    const Words table(2 * static_cast<std::size_t>(long_chunks.max_blocks_per_seq()), 3);
    const std::string diff = run(long_chunks, long_buffers, long_host, qsl, lens, lens, 2 + rows, table,
                                 long_chunks.max_blocks_per_seq());
    ASSERT_EQ(diff, "") << rows << " prompt rows";
    ASSERT_EQ(plan_.prefill.size(), 1u);
    big += rows > 2048;
  }
  std::printf("%d flydsl_fp4 steps equal to the reference: %d decode grids (%d native), %d chunks (%d past 2,048 rows)\n",
              steps, grids, native, chunks, big);
  EXPECT_GT(grids, steps / 4);
  EXPECT_GT(chunks, steps / 4);
}

// deepgemm_sm90's steps: DeepGEMM's metadata written by the first block of
// the decode rows' part, word for word the CPU fill's (itself the drop-in's
// rule on the decode launch's rows: tests/test_properties.cpp), beside
// every other buffer; and two steps of the most rows DeepGEMM's kernel
// holds: one flattened, whose rows one block writes before the metadata,
// and one native, whose rows take many blocks.
TEST_F(PrepareStep, MatchesTheReferenceOnDeepgemmSteps) {
  const std::vector<Geometry> geometries = test::deepgemm_geometries();
  std::vector<device::StepBuffers> buffers;
  std::vector<test::HostBuffers> host;
  for (const Geometry& g : geometries) {
    buffers.emplace_back(g);
    host.emplace_back(g);
  }
  std::mt19937_64 rng(5151);
  const int steps = env_steps(600);
  int metadata = 0, native = 0;
  for (int i = 0; i < steps; ++i) {
    const std::size_t k = static_cast<std::size_t>(i) % geometries.size();
    const test::RandomStep s = i % 8 == 7   ? test::zero_row_step(geometries[k], rng)
                               : i % 8 == 3 ? test::full_decode_step(geometries[k], rng)
                                            : test::random_step(geometries[k], rng);
    const std::string diff = run(geometries[k], buffers[k], host[k], s.query_start_loc, s.seq_lens,
                                 s.seq_lens_upper_bound, s.num_tokens, s.block_table, s.table_stride, i % 3 == 0,
                                 i % 2 == 1);
    ASSERT_EQ(diff, "") << "step " << i << " on geometry " << k;
    metadata += plan_.decode.metadata.present() && plan_.decode.num_rows > 0;
    native += plan_.decode.native.present();
  }
  // 19,360 decodes of one token (DeepGEMM's most sequences), contexts of 1
  // to 4,096 tokens (16 splits), on an H100's SMs.
  IndexerConfig c = geometries[0].config();
  c.num_speculative_tokens = 0;
  c.max_num_seqs = deepgemm_sm90::kMaxBatch;
  c.max_num_batched_tokens = deepgemm_sm90::kMaxBatch;
  const Geometry wide = make_geometry(c);
  const device::StepBuffers wide_buffers(wide);
  test::HostBuffers wide_host(wide);
  Words qsl(deepgemm_sm90::kMaxBatch + 1);
  Words lens(deepgemm_sm90::kMaxBatch);
  for (int32_t r = 0; r < deepgemm_sm90::kMaxBatch; ++r) {
    qsl[static_cast<std::size_t>(r) + 1] = r + 1;
    lens[static_cast<std::size_t>(r)] = 1 + static_cast<int32_t>((int64_t{r} * 7919) % 4096);
  }
  const Words table(lens.size() * 64, 3);
  ASSERT_EQ(run(wide, wide_buffers, wide_host, qsl, lens, lens, deepgemm_sm90::kMaxBatch, table, 64), "");
  ASSERT_EQ(plan_.decode.metadata.batch, deepgemm_sm90::kMaxBatch);
  ASSERT_FALSE(plan_.decode.native.present());
  // 9,680 MTP decodes of two tokens (native sequences of two rows).
  c.num_speculative_tokens = 1;
  const Geometry mtp = make_geometry(c);
  const device::StepBuffers mtp_buffers(mtp);
  test::HostBuffers mtp_host(mtp);
  constexpr int32_t kSequences = deepgemm_sm90::kMaxBatch / 2;
  Words mtp_qsl(kSequences + 1);
  for (int32_t r = 0; r < kSequences; ++r) mtp_qsl[static_cast<std::size_t>(r) + 1] = 2 * (r + 1);
  Words mtp_lens(lens.begin(), lens.begin() + kSequences);
  for (int32_t& len : mtp_lens) len = std::max(len, 2);  // at least the two tokens
  ASSERT_EQ(run(mtp, mtp_buffers, mtp_host, mtp_qsl, mtp_lens, mtp_lens, mtp_qsl.back(), table, 64), "");
  ASSERT_TRUE(plan_.decode.native.present());
  ASSERT_EQ(plan_.decode.metadata.batch, kSequences);
  std::printf("%d deepgemm_sm90 steps equal to the reference: %d with metadata (%d native), one of %d rows "
              "(flattened) and one of %d sequences (native)\n",
              steps, metadata, native, deepgemm_sm90::kMaxBatch, kSequences);
  EXPECT_GT(metadata, steps / 4);
  EXPECT_GT(native, steps / 20);
}

// Decode steps of up to 4,096 requests, on geometries whose schedules reach
// every kernel the launch picks: the warps' (0 units a thread below), and
// 1 to 32 units a thread of the blocks'.
TEST_F(PrepareStep, MatchesTheReferenceOnRandomBigSteps) {
  IndexerConfig c = test::deepseek_config();
  c.max_num_seqs = 4096;
  c.max_num_batched_tokens = 4096 * 5;
  c.max_model_len = 65536;
  c.num_compute_units = 640;  // 7,680 workgroups: schedules of up to 7,680 units
  std::vector<Geometry> geometries{make_geometry(c)};  // next_n 2: a unit a sequence
  c.num_speculative_tokens = 4;                        // next_n 5: two row blocks a sequence
  geometries.push_back(make_geometry(c));
  c.adaptive_verification = true;                      // flattened rows
  geometries.push_back(make_geometry(c));
  std::vector<device::StepBuffers> buffers;
  std::vector<test::HostBuffers> host;
  for (const Geometry& g : geometries) {
    buffers.emplace_back(g);
    host.emplace_back(g);
  }
  std::mt19937_64 rng(777);
  const int steps = env_steps(300);
  std::map<int32_t, int> kernels;  // schedules by units a thread
  int native_kinds[2][2] = {};     // as in MatchesTheReferenceOnRandomSteps
  for (int i = 0; i < steps; ++i) {
    const std::size_t k = static_cast<std::size_t>(i) % geometries.size();
    const test::RandomStep s =
        i % 2 == 0 ? test::full_decode_step(geometries[k], rng) : test::random_step(geometries[k], rng);
    const std::string diff = run(geometries[k], buffers[k], host[k], s.query_start_loc, s.seq_lens,
                                 s.seq_lens_upper_bound, s.num_tokens, s.block_table, s.table_stride);
    ASSERT_EQ(diff, "") << "step " << i << " on geometry " << k;
    const ScheduleShape& schedule = plan_.decode.schedule;
    if (!schedule.present()) continue;
    StepArgs shape;
    shape.schedule = schedule;
    ++kernels[device::launch_grid(shape, 1024).units_per_thread];
    if (schedule.native) ++native_kinds[device::detail::small_schedule(schedule)][schedule.row_blocks == 1];
  }
  std::string seen;
  for (const auto& [units, count] : kernels) seen += fmt::format(" <{}>: {}", units, count);
  std::printf("%d random big steps equal to the reference; schedules by prepare_step_kernel:%s\n", steps,
              seen.c_str());
  std::printf("native schedules by the blocks: %d of several row blocks a sequence, %d of one; by the warps: %d, %d\n",
              native_kinds[0][0], native_kinds[0][1], native_kinds[1][0], native_kinds[1][1]);
  if (steps >= 300) {  // the default run meets every kernel and kind; a short run (a sanitizer's) need not
    for (const int32_t units : {0, 1, 2, 4, 8, 16, 32}) {
      EXPECT_GT(kernels[units], 0) << "no schedule ran prepare_step_kernel<" << units << ">";
    }
    for (const auto& by_path : native_kinds) {
      EXPECT_GT(by_path[0], 0);
      EXPECT_GT(by_path[1], 0);
    }
  }
}

TEST_F(PrepareStep, MatchesTheReferenceOnFourThousandDecodeRows) {
  IndexerConfig c = test::deepseek_config();
  c.max_num_seqs = 4096;
  c.max_num_batched_tokens = 8192;
  c.max_model_len = 262144;
  c.num_compute_units = 512;  // a schedule for 2048 two-row sequences
  const Geometry g = make_geometry(c);
  const device::StepBuffers buffers(g);
  test::HostBuffers host(g);
  for (const bool ragged : {false, true}) {
    Words qsl{0}, lens;
    for (int32_t r = 0; r < (ragged ? 2731 : 2048); ++r) {
      qsl.push_back(qsl.back() + (ragged ? 1 + r % 2 : 2));
      lens.push_back(2 + (r * 7919) % 262000);
    }
    ASSERT_GE(qsl.back(), 4096);
    Words table(lens.size() * static_cast<std::size_t>(g.max_blocks_per_seq()));
    for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i * 31 % 1000003);
    EXPECT_EQ(run(g, buffers, host, qsl, lens, lens, kUnpaddedTokens, table, g.max_blocks_per_seq()), "");
    EXPECT_EQ(plan_.decode.native.present(), !ragged);
    EXPECT_TRUE(plan_.decode.schedule.present());  // 4096 one-row units fit 6144 workgroups
  }
}

// Graph padding sequences (native requests with no rows, after the real
// ones) whose device lengths are not 0: the reference gives such a
// sequence one tile once its length reaches the compression ratio, where
// its whole length would give more. The threads and lanes whose sequences'
// rows are all real take whole_sequence_tiles; those holding padding must
// not, on every path: the warps' gathered, at a unit and at two units a
// lane, and the blocks' at one and at many units a thread.
TEST_F(PrepareStep, PaddingSequencesWithLengthsTakeTheReferencesTiles) {
  IndexerConfig c = test::deepseek_config();
  c.max_num_seqs = 4096;
  c.max_num_batched_tokens = 8192;
  c.max_model_len = 16384;
  c.num_compute_units = 512;
  const Geometry g = make_geometry(c);
  const device::StepBuffers buffers(g);
  test::HostBuffers host(g);
  std::mt19937_64 rng(31);
  std::set<int32_t> kernels;  // units a thread, 0 for the warps'
  for (const int32_t seqs : {8, 24, 48, 200, 1000, 4000}) {
    for (const int32_t real : {1, seqs / 2 + 1, seqs - 1}) {
      Words qsl(static_cast<std::size_t>(seqs) + 1), lens(static_cast<std::size_t>(seqs));
      for (int32_t r = 0; r <= seqs; ++r) qsl[static_cast<std::size_t>(r)] = 2 * std::min(r, real);
      for (int32_t& len : lens) len = std::uniform_int_distribution<int32_t>(1000, 16000)(rng);
      const Words table(lens.size() * static_cast<std::size_t>(g.max_blocks_per_seq()), 5);
      EXPECT_EQ(run(g, buffers, host, qsl, lens, lens, 2 * seqs, table, g.max_blocks_per_seq()), "")
          << seqs << " sequences, " << real << " real";
      ASSERT_TRUE(plan_.decode.native.present());
      ASSERT_EQ(plan_.decode.num_real_rows, 2 * real);
      ASSERT_TRUE(plan_.decode.schedule.present());
      StepArgs shape;
      shape.schedule = plan_.decode.schedule;
      kernels.insert(device::launch_grid(shape, 1024).units_per_thread);
    }
  }
  EXPECT_EQ(kernels, (std::set<int32_t>{0, 1, 4, 16}));
}

TEST_F(PrepareStep, ReadsSixteenUnitsAThreadFourALoadOnlyFromAlignedLengths) {
  // prepare_step_kernel<16> loads a thread's lengths four at a time when a
  // sequence is one unit and the lengths are 16-byte aligned, one at a time
  // otherwise (and on AMD, device::kFourLengthsALoad); both equal the
  // reference, with the work a multiple of four and not (the last thread's
  // partial quad).
  IndexerConfig c = test::deepseek_config();
  c.max_num_seqs = 4096;
  c.max_num_batched_tokens = 8192;
  c.num_compute_units = 512;
  const Geometry g = make_geometry(c);
  const device::StepBuffers buffers(g);
  test::HostBuffers host(g);
  for (const int32_t seqs : {4096, 4093}) {
    Words qsl{0}, lens;
    for (int32_t r = 0; r < seqs; ++r) {
      qsl.push_back(qsl.back() + 2);
      lens.push_back(r % 9 == 8 ? 3 : 2 + (r * 7919) % 130000);  // some without tiles
    }
    Words table(lens.size() * static_cast<std::size_t>(g.max_blocks_per_seq()));
    for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i * 31 % 1000003);
    for (const int32_t offset : {0, 1}) {  // aligned (the device allocation's), then not
      lens_offset_ = offset;
      EXPECT_EQ(run(g, buffers, host, qsl, lens, lens, kUnpaddedTokens, table, g.max_blocks_per_seq()), "")
          << seqs << " sequences, lengths " << offset << " words in";
      ASSERT_TRUE(plan_.decode.native.present());
      ASSERT_EQ(plan_.decode.schedule.row_blocks, 1);
      StepArgs shape;
      shape.schedule = plan_.decode.schedule;
      EXPECT_EQ(device::launch_grid(shape, 1024).units_per_thread, 16) << seqs << " sequences";
    }
  }
}

TEST_F(PrepareStep, SchedulesByTheWarpsUpToTheirLanesUnitsAndByTheBlockPast) {
  // Native decodes of 4 sequences up to past the warps' schedule, of two
  // rows (a unit a sequence) and of five (two row blocks a sequence): a
  // schedule of at most kMaxLaneUnits units a lane takes the warps' path
  // (gathering each unit's slices up to kGatheredUnits units, in steps of
  // 4, 8 and 16, scanning a unit a lane past it, then kMaxLaneUnits units a
  // lane, prepare_step_lanes_kernel's), the rest the block's. All equal the
  // reference on each side of every boundary, with long and short contexts
  // mixed (units without tiles among the first, and the last sequence
  // short).
  namespace dd = device::detail;
  const int32_t warp = dd::Primitives::kWarpSize;
  static_assert(device::kGatheredUnits == 16, "the sizes below straddle its steps");
  std::vector<int32_t> sizes{4, 5, 8, 9, 16, 17, warp - 1};
  for (int32_t units = 1; units <= device::kMaxLaneUnits; units *= 2) {
    sizes.push_back(units * warp);
    sizes.push_back(units * warp + 1);
  }
  int small = 0, block = 0;
  std::set<int32_t> lane_units;  // of the warps' schedules met
  std::set<int32_t> row_blocks;
  for (const int32_t speculative : {1, 4}) {
    IndexerConfig c = test::deepseek_config();
    c.num_compute_units = 304;  // enough workgroups for every size's units
    c.max_num_seqs = 2 * device::kMaxLaneUnits * warp;
    c.num_speculative_tokens = speculative;
    const int32_t next_n = speculative + 1;
    const Geometry g = make_geometry(c);
    const device::StepBuffers buffers(g);
    test::HostBuffers host(g);
    for (const int32_t seqs : sizes) {
      for (const int32_t short_every : {5, 3}) {
        Words qsl{0}, lens;
        for (int32_t r = 0; r < seqs; ++r) {
          qsl.push_back(qsl.back() + next_n);
          const bool short_len = r % short_every == short_every - 1 || (short_every == 3 && r == seqs - 1);
          lens.push_back(short_len ? next_n + 1 : next_n + (r * 7919) % 150000);
        }
        Words table(lens.size() * static_cast<std::size_t>(g.max_blocks_per_seq()));
        for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i * 13 % 1000003);
        EXPECT_EQ(run(g, buffers, host, qsl, lens, lens, kUnpaddedTokens, table, g.max_blocks_per_seq()), "")
            << seqs << " sequences of " << next_n << " rows, one in " << short_every << " short";
        ASSERT_TRUE(plan_.decode.native.present()) << seqs << " sequences of " << next_n << " rows";
        const ScheduleShape& s = plan_.decode.schedule;
        ASSERT_TRUE(s.present()) << seqs << " sequences of " << next_n << " rows";
        const bool warps = dd::small_schedule(s);
        EXPECT_EQ(warps, s.work <= device::kMaxLaneUnits * warp) << seqs << " sequences of " << next_n << " rows";
        small += warps;
        block += !warps;
        StepArgs shape;
        shape.schedule = s;
        const device::LaunchGrid grid = device::launch_grid(shape, 1024);
        EXPECT_EQ(grid.units_per_thread == 0, warps);
        if (warps) {
          EXPECT_EQ(grid.lane_units, s.work <= warp ? 1 : device::kMaxLaneUnits) << s.work << " units";
          lane_units.insert(grid.lane_units);
        }
        row_blocks.insert(s.row_blocks);
      }
    }
  }
  EXPECT_GE(small, 24);
  EXPECT_GE(block, 4);
  EXPECT_EQ(*lane_units.rbegin(), device::kMaxLaneUnits);  // the widest lanes met
  EXPECT_EQ(row_blocks, (std::set<int32_t>{1, 2}));
}

TEST_F(PrepareStep, SchedulesFlattenedRowsOfMoreRequestsThanRows) {
  // 1000 decode requests, most of them with no rows: the schedule's blocks
  // take their requests in several passes of kPrepareThreads each.
  IndexerConfig c = test::deepseek_config();
  c.max_num_seqs = 1024;
  c.max_num_batched_tokens = 4096;
  c.max_model_len = 65536;
  c.num_compute_units = 32;  // 384 workgroups for the 215 one-row units
  const Geometry g = make_geometry(c);
  const device::StepBuffers buffers(g);
  test::HostBuffers host(g);
  Words qsl{0}, lens;
  for (int32_t r = 0; r < 1000; ++r) {
    const int32_t q = r % 7 == 3 ? 1 + r % 2 : 0;
    qsl.push_back(qsl.back() + q);
    lens.push_back(q + (r * 7919) % 65000);
  }
  Words table(lens.size() * static_cast<std::size_t>(g.max_blocks_per_seq()));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i % 1000003);
  EXPECT_EQ(run(g, buffers, host, qsl, lens, lens, kUnpaddedTokens, table, g.max_blocks_per_seq()), "");
  EXPECT_EQ(plan_.num_decodes, 1000);
  EXPECT_FALSE(plan_.decode.native.present());
  ASSERT_TRUE(plan_.decode.schedule.present());
  EXPECT_LT(plan_.decode.schedule.work, device::kPrepareThreads);  // one unit a thread, four passes
}

TEST_F(PrepareStep, AnAllZeroStepWritesEmptyDescriptors) {
  IndexerConfig c = test::deepseek_config();
  c.num_compute_units = 132;
  const Geometry g = make_geometry(c);
  const device::StepBuffers buffers(g);
  test::HostBuffers host(g);
  Words qsl{0}, lens;
  for (int r = 0; r < 512; ++r) {
    qsl.push_back(qsl.back() + 2);
    lens.push_back(2);  // under C tokens: every compressed length is 0
  }
  EXPECT_EQ(run(g, buffers, host, qsl, lens, lens, kUnpaddedTokens, Words(512 * 8192, 9), 8192), "");
  ASSERT_TRUE(plan_.decode.schedule.present());
  const std::size_t words = static_cast<std::size_t>(4 * plan_.decode.schedule.num_ctas);
  EXPECT_EQ(test::slice(host.decode_schedule, words), Words(words, 0));
}

TEST_F(PrepareStep, PacksMoreChunkGroupsThanOneLaunchCarries) {
  IndexerConfig c = test::deepseek_config();
  c.max_model_len = 65536;
  c.max_logits_mb = 1;
  c.max_num_seqs = 300;
  c.max_num_batched_tokens = 4096;
  const Geometry g = make_geometry(c);
  const device::StepBuffers buffers(g);
  test::HostBuffers host(g);
  Words qsl{0, 1, 2}, lens{100, 200};  // two decodes, then 298 one-group prefills
  for (int r = 0; r < 298; ++r) {
    qsl.push_back(qsl.back() + 10);
    lens.push_back(65536);
  }
  EXPECT_EQ(run(g, buffers, host, qsl, lens, lens, kUnpaddedTokens, Words(300 * 512, 3), 512), "");
  EXPECT_EQ(num_step_launches(plan_), 3);
}

TEST_F(PrepareStep, ClampsEachRequestToItsChunkInEveryLaunch) {
  // 298 one-chunk prefills over three launches, each request's device
  // length ten times its own upper bound: every launch writes its requests'
  // contexts and rows clamped to their own chunk, as the reference does.
  IndexerConfig c = test::deepseek_config();
  c.max_model_len = 65536;
  c.max_logits_mb = 1;
  c.max_num_seqs = 300;
  c.max_num_batched_tokens = 4096;
  const Geometry g = make_geometry(c);
  const device::StepBuffers buffers(g);
  test::HostBuffers host(g);
  Words qsl{0, 1, 2}, upper{100, 200}, exact{1000, 2000};
  for (int r = 0; r < 298; ++r) {
    qsl.push_back(qsl.back() + 10);
    upper.push_back(56000 + 30 * r);  // over 13,107 columns: under 20 rows a chunk
    exact.push_back(10 * upper.back());
  }
  const Words table(300 * 512, 3);
  EXPECT_EQ(run(g, buffers, host, qsl, exact, upper, kUnpaddedTokens, table, 512), "");
  ASSERT_EQ(num_step_launches(plan_), 3);
  const StepInputs in = make_step_inputs(exact, qsl, table, 512);
  EXPECT_EQ(launch_bound_violation(g, plan_, in, host.outputs()), "");
  EXPECT_EQ(host.context_lens[299], (56000 + 30 * 297) / 4);
}

TEST_F(PrepareStep, MatchesTheReferenceOnBrokenDeviceLengths) {
  // A broken engine's device lengths (negative, past the bound, INT32_MIN
  // and INT32_MAX): the kernel writes the reference's clamped words, and
  // no launch view reads past its plan.
  const std::vector<Geometry> geometries = test::random_geometries();
  std::vector<device::StepBuffers> buffers;
  std::vector<test::HostBuffers> host;
  for (const Geometry& g : geometries) {
    buffers.emplace_back(g);
    host.emplace_back(g);
  }
  std::mt19937_64 rng(977);
  const int steps = env_steps(600);
  for (int i = 0; i < steps; ++i) {
    const std::size_t k = static_cast<std::size_t>(i) % geometries.size();
    test::RandomStep s = test::random_step(geometries[k], rng);
    for (std::size_t r = 0; r < s.seq_lens.size(); ++r) {
      const int32_t ub = s.seq_lens_upper_bound[r];
      const int32_t wild[] = {INT32_MIN, -1, 0, ub + 4, 10 * (ub % 100000) + 7, INT32_MAX, s.seq_lens[r]};
      s.seq_lens[r] = wild[std::uniform_int_distribution<std::size_t>(0, 6)(rng)];
    }
    const std::string diff = run(geometries[k], buffers[k], host[k], s.query_start_loc, s.seq_lens,
                                 s.seq_lens_upper_bound, s.num_tokens, s.block_table, s.table_stride);
    ASSERT_EQ(diff, "") << "step " << i << " on geometry " << k;
    const StepInputs in = make_step_inputs(s.seq_lens, s.query_start_loc, s.block_table, s.table_stride);
    ASSERT_EQ(launch_bound_violation(geometries[k], plan_, in, host[k].outputs()), "") << "step " << i;
  }
}

TEST_F(PrepareStep, AStepWithNoTokensStillWritesTheContexts) {
  const Geometry g = make_geometry(test::deepseek_config());
  const device::StepBuffers buffers(g);
  test::HostBuffers host(g);
  EXPECT_EQ(run(g, buffers, host, Words{0, 0, 0}, Words{40, 80}, Words{40, 80}, kUnpaddedTokens,
                Words(2 * 8192, 1), 8192), "");
}

// What a consumer launch reads of a decode step, copied into `sink`: the
// rows' ends and block ends, the sequences' contexts and the schedule. Its
// grid and pointers are fixed, as in an engine's captured graph.
__global__ void consume_decode(const int32_t* row_ends, const int32_t* block_ends,
                               const int32_t* context_lens, const int32_t* schedule, int32_t rows,
                               int32_t seqs, int32_t schedule_words, int32_t* sink) {
  const int32_t words = 2 * rows + seqs + schedule_words;
  const auto stride = static_cast<int32_t>(gridDim.x * blockDim.x);
  for (auto w = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x); w < words; w += stride) {
    int32_t v;
    if (w < rows) v = row_ends[w];
    else if (w < 2 * rows) v = block_ends[w - rows];
    else if (w < 2 * rows + seqs) v = context_lens[w - 2 * rows];
    else v = schedule[w - 2 * rows - seqs];
    sink[w] = v;
  }
}

TEST_F(PrepareStep, EagerPrepareThenAReplayedConsumerGraphSeesEachStep) {
  // docs/design.md section 6's graph pattern: the prepare launch enqueued eagerly each step,
  // then a graph of consumer reads captured once and replayed. The steps
  // share a shape (64 decode requests padded to 128 tokens, as a graph's
  // batch) and differ in everything else: real requests, lengths, the
  // schedule's contents, the block-table columns.
  IndexerConfig c = test::deepseek_config();
  c.num_compute_units = 132;
  c.max_num_seqs = 64;
  c.max_num_batched_tokens = 4096;
  const Geometry g = make_geometry(c);
  const device::StepBuffers buffers(g);
  const StepOutputs out = buffers.outputs();
  const int32_t seqs = 64, rows = 128;
  Words qsl(seqs + 1), lens(seqs), table(static_cast<std::size_t>(seqs) * 8192);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i % 100003);
  const test::DeviceInputs in(Words(seqs + 1, 0), Words(seqs, 0), table, 8192);

  // The first step fixes the graph's shape: a full native batch.
  for (int32_t r = 0; r <= seqs; ++r) qsl[static_cast<std::size_t>(r)] = 2 * r;
  plan_step(g, qsl, Words(seqs, 1000), rows, plan_);
  ASSERT_TRUE(plan_.decode.native.present());
  ASSERT_TRUE(plan_.decode.schedule.present());
  const int32_t schedule_words = 4 * plan_.decode.schedule.num_ctas;
  const int32_t words = 2 * rows + seqs + schedule_words;
  device::DeviceArray<int32_t> sink(static_cast<std::size_t>(words));
  device::rt::Graph graph = nullptr;
  device::rt::GraphExec exec = nullptr;
  device::check(device::rt::begin_capture(stream_), "begin_capture");
  IDXPLAN_KERNEL_LAUNCH(consume_decode, 8, 256, 0, stream_)(out.decode_row_lens.data, out.decode_block_ends.data,
                                                           out.context_lens.data, out.decode_schedule.data, rows,
                                                           seqs, schedule_words, sink.data());
  device::check(device::rt::end_capture(stream_, &graph), "end_capture");
  device::check(device::rt::graph_instantiate(&exec, graph), "graph_instantiate");

  std::mt19937_64 rng(8);
  test::HostBuffers host(g);
  Words got(static_cast<std::size_t>(words));
  int differing = 0;
  uint64_t last_plan = 0;
  for (int step = 0; step < 50; ++step) {
    // 1 to 64 real requests, the rest padding, with new lengths.
    const int32_t real = std::uniform_int_distribution<int32_t>(1, seqs)(rng);
    for (int32_t r = 0; r <= seqs; ++r) qsl[static_cast<std::size_t>(r)] = 2 * std::min(r, real);
    for (int32_t r = 0; r < seqs; ++r) {
      lens[static_cast<std::size_t>(r)] =
          r < real ? std::uniform_int_distribution<int32_t>(2, 1 << std::uniform_int_distribution<int>(2, 20)(rng))(rng) : 0;
    }
    plan_step(g, qsl, lens, rows, plan_);
    ASSERT_EQ(4 * plan_.decode.schedule.num_ctas, schedule_words) << "the step's shape changed";
    const uint64_t digest = std::hash<std::string>{}(fmt::format("{}", plan_));
    differing += digest != last_plan;
    last_plan = digest;
    device::check(device::rt::memcpy_to_device(in.query_start_loc.data(), qsl.data(), qsl.size() * 4), "qsl");
    device::check(device::rt::memcpy_to_device(in.seq_lens.data(), lens.data(), lens.size() * 4), "lens");
    device::enqueue(g, plan_, in.inputs(), out, stream_);  // eager, every step
    device::check(device::rt::graph_launch(exec, stream_), "graph_launch");
    // The stream is non-blocking: a plain copy would not wait for it.
    device::check(device::rt::stream_synchronize(stream_), "stream_synchronize");
    device::check(device::rt::memcpy_to_host(got.data(), sink.data(), got.size() * 4), "sink");
    test::fill_reference(g, plan_, qsl, lens, table, 8192, host);
    Words want(host.decode_row_lens.begin(), host.decode_row_lens.begin() + rows);
    want.insert(want.end(), host.decode_block_ends.begin(), host.decode_block_ends.begin() + rows);
    want.insert(want.end(), host.context_lens.begin(), host.context_lens.begin() + seqs);
    want.insert(want.end(), host.decode_schedule.begin(), host.decode_schedule.begin() + schedule_words);
    ASSERT_EQ(got, want) << "step " << step << " (" << real << " real requests)";
  }
  EXPECT_GT(differing, 40);  // the plans did differ from step to step
  (void)device::rt::graph_exec_destroy(exec);
  (void)device::rt::graph_destroy(graph);
}

TEST_F(PrepareStep, RefusesBuffersTooSmallAndLaunchesNothing) {
  const Geometry g = make_geometry(test::deepseek_config());
  const device::StepBuffers buffers(g);
  const Words qsl{0, 2, 4, 8196}, lens{9000, 120000, 300000};
  plan_step(g, qsl, lens, kUnpaddedTokens, plan_);
  const test::DeviceInputs in(qsl, lens, Words(3 * 8192, 1), 8192);
  StepOutputs out = buffers.outputs();
  out.prefill_row_ends.capacity = 100;
  const Words poison(8192, test::kPoison);
  device::check(device::rt::memcpy_to_device(out.prefill_row_ends.data, poison.data(), poison.size() * 4), "poison");
  try {
    device::enqueue(g, plan_, in.inputs(), out, stream_);
    FAIL() << "a 100-word prefill_row_ends took 8192 row ends";
  } catch (const StepError& e) {
    EXPECT_NE(std::string(e.what()).find("prefill_row_ends holds 100 words, and the step writes 8192"),
              std::string::npos) << e.what();
  }
  StepInputs narrow = in.inputs();
  narrow.block_table_cols = narrow.block_table_stride = 16;  // the step reads 2344 columns
  EXPECT_THROW(device::enqueue(g, plan_, narrow, buffers.outputs(), stream_), StepError);
  device::check(device::rt::stream_synchronize(stream_), "stream_synchronize");
  Words after(poison.size());
  device::check(device::rt::memcpy_to_host(after.data(), out.prefill_row_ends.data, after.size() * 4), "read");
  EXPECT_EQ(after, poison);
}

TEST_F(PrepareStep, RefusesInputsShorterThanThePlanReadsAndLaunchesNothing) {
  // The issue's cases on the device: a 2-row block table and a 1-entry
  // seq_lens for a 4-request ragged step were read past (out-of-bounds
  // device reads); their extents now refuse them before the launch.
  IndexerConfig c = test::deepseek_config();
  c.num_speculative_tokens = 1;
  const Geometry g = make_geometry(c);
  const device::StepBuffers buffers(g);
  const Words qsl{0, 1, 3, 4, 5}, lens{1250, 100, 15000, 101};
  plan_step(g, qsl, lens, kUnpaddedTokens, plan_);
  ASSERT_TRUE(plan_.decode.ragged());
  const StepOutputs out = buffers.outputs();
  const Words poison(8, test::kPoison);
  device::check(device::rt::memcpy_to_device(out.context_lens.data, poison.data(), 32), "poison");
  const test::DeviceInputs two_rows(qsl, lens, Words(2 * 128, 1), 128);
  const test::DeviceInputs one_length(qsl, Words{1250}, Words(4 * 128, 1), 128);
  EXPECT_EQ(test::error_of<StepError>([&] { device::enqueue(g, plan_, two_rows.inputs(), out, stream_); }),
            "StepInputs.block_table_rows=2 is short: the step reads 4 (a row a request)");
  EXPECT_EQ(test::error_of<StepError>([&] { device::enqueue(g, plan_, one_length.inputs(), out, stream_); }),
            "StepInputs.num_seq_lens=1 is short: the step reads 4 (a length a request)");
  device::check(device::rt::stream_synchronize(stream_), "stream_synchronize");
  Words after(8);
  device::check(device::rt::memcpy_to_host(after.data(), out.context_lens.data, 32), "read");
  EXPECT_EQ(after, poison);
  const test::DeviceInputs whole(qsl, lens, Words(4 * 128, 1), 128);
  EXPECT_NO_THROW(device::enqueue(g, plan_, whole.inputs(), out, stream_));
  device::check(device::rt::stream_synchronize(stream_), "stream_synchronize");
}

// Host-side, so these run wherever the device code builds, GPU or not.
TEST(LaunchGrid, GivesEachBufferItsOwnBlocks) {
  StepArgs a;
  a.num_reqs = 300;
  a.request_end = 300;                  // 2 blocks of contexts
  a.num_decodes = 400;                  // 400 decode requests and 200 padding rows:
  a.num_decode_rows = 600;              // 3 blocks of decode rows
  a.num_real_decode_rows = 400;
  a.num_block_cols = 10;                // 3 quads an item: 8 blocks of table
  a.num_decode_tokens = 600;
  a.token_begin = 600;
  a.token_end = 600 + 1000;             // 4 of prefill rows
  a.word_begin = 5;
  a.word_end = 5 + 257;                 // 2 of packed offsets
  a.schedule.num_ctas = 2048;           // 4 of schedule slots
  a.schedule.work = 1000;               // 4 units a thread
  const device::LaunchGrid g = device::launch_grid(a, 1024);
  EXPECT_EQ((std::vector<int32_t>(g.end, g.end + device::kParts)), (std::vector<int32_t>{4, 6, 8, 11, 19, 23}));
  EXPECT_EQ(g.units_per_thread, 4);
  EXPECT_EQ(g.blocks(), 23);
  // Each part is capped at max_blocks; the schedule's slots are not.
  const device::LaunchGrid capped = device::launch_grid(a, 2);
  EXPECT_EQ((std::vector<int32_t>(capped.end, capped.end + device::kParts)),
            (std::vector<int32_t>{4, 6, 8, 10, 12, 14}));
  // A native step's decode rows are an item a row: 400 requests of next_n 2
  // and 200 padding rows make 1,000 items, 4 blocks. The table's items stay
  // each request's quads, then each padding row's: 8 blocks.
  StepArgs native = a;
  native.native_next_n = 2;
  native.num_decode_rows = 1000;
  native.num_real_decode_rows = 800;
  const device::LaunchGrid n = device::launch_grid(native, 1024);
  EXPECT_EQ((std::vector<int32_t>(n.end, n.end + device::kParts)), (std::vector<int32_t>{4, 6, 8, 12, 20, 24}));
  // A further launch writes its groups' packed offsets, and the contexts
  // and prefill rows of their requests; no decode buffer.
  a.writes_decode = false;
  a.request_begin = 100;                // 1 block of contexts
  a.token_begin = 1000;                 // 3 of prefill rows
  const device::LaunchGrid further = device::launch_grid(a, 1024);
  EXPECT_EQ((std::vector<int32_t>(further.end, further.end + device::kParts)),
            (std::vector<int32_t>{0, 2, 3, 3, 3, 6}));
  // A launch with nothing to write still has a block.
  EXPECT_EQ(device::launch_grid(StepArgs{}, 1024).blocks(), 1);
}

TEST(LaunchGrid, GivesANativeScheduleOfUpToTheLanesUnitsToTheWarps) {
  namespace dd = device::detail;
  StepArgs a;
  a.schedule.num_ctas = 1024;
  a.schedule.native = true;
  a.schedule.work = device::kMaxLaneUnits * dd::Primitives::kWarpSize;
  EXPECT_EQ(device::launch_grid(a, 1024).units_per_thread, 0);
  EXPECT_EQ(device::launch_grid(a, 1024).lane_units, device::kMaxLaneUnits);  // prepare_step_lanes_kernel
  a.schedule.work = dd::Primitives::kWarpSize;
  EXPECT_EQ(device::launch_grid(a, 1024).units_per_thread, 0);
  EXPECT_EQ(device::launch_grid(a, 1024).lane_units, 1);  // prepare_step_kernel<0>
  a.schedule.work = device::kMaxLaneUnits * dd::Primitives::kWarpSize;
  // kSmallWarps warps a block, two slots a lane.
  EXPECT_EQ(dd::kSmallSlotsPerBlock, 2 * dd::kSmallWarps * dd::Primitives::kWarpSize);
  EXPECT_EQ(device::launch_grid(a, 1024).end[0], 1024 / dd::kSmallSlotsPerBlock);
  EXPECT_EQ(device::shared_bytes(a), 0u);
  a.schedule.work += 1;
  EXPECT_EQ(device::launch_grid(a, 1024).units_per_thread, 1);  // the blocks', a unit a thread
  EXPECT_EQ(device::launch_grid(a, 1024).lane_units, 0);
  EXPECT_EQ(device::launch_grid(a, 1024).end[0], 1024 / device::kSlotsPerBlock);
  EXPECT_GT(device::shared_bytes(a), 0u);
  a.schedule.native = false;  // flattened rows: the blocks' schedule at any size
  a.schedule.work = 4;
  EXPECT_EQ(device::launch_grid(a, 1024).units_per_thread, 1);
}

TEST(LaunchGrid, RefusesMoreUnitsThanTheKernelTakes) {
  StepArgs a;
  a.schedule.num_ctas = 65536;
  a.schedule.work = 32 * device::kPrepareThreads + 1;
  const device::LaunchGrid g = device::launch_grid(a, 1024);
  EXPECT_EQ(g.units_per_thread, 64);
  try {
    device::launch(a, g, nullptr);
    FAIL() << "a schedule past the kernel's units was launched";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("work=8193"), std::string::npos) << e.what();
  }
}

TEST(LaunchGrid, RefusesArgumentsNotMadeByMakeStepArgs) {
  StepArgs a;
  a.compress_ratio = 4;  // by_compress_ratio still divides by 1
  EXPECT_THROW(device::launch(a, device::launch_grid(a, 1024), nullptr), StepError);
}

TEST(DeviceRuntime, AFailedCallNamesTheError) {
  if (device::device_count() == 0) GTEST_SKIP() << "no GPU on this machine: GPU test skipped";
  try {
    device::DeviceArray<int32_t> huge(std::size_t{1} << 50);
    FAIL() << "a 4 PiB allocation succeeded";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("malloc failed"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace idxplan
