// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// The fused prepare kernel against the CPU reference, word for word. Built by
// nvcc (run on the H200) and by hipcc (compiled for gfx90a and gfx940).

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "device_support.hpp"
#include "idxplan/device/prepare_step.hpp"
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

  // Plans a step, runs the kernel and the CPU reference, and compares them.
  std::string run(const Geometry& g, const device::StepBuffers& buffers, test::HostBuffers& host,
                  const Words& qsl, const Words& lens, const Words& upper, int64_t num_tokens,
                  const Words& table, int32_t stride) {
    plan_step(g, qsl, upper, num_tokens, plan_);
    const test::DeviceInputs in(qsl, lens, table, stride);
    const auto extents = test::step_extents(plan_, host, buffers.outputs(), buffers.sizes());
    test::poison(extents, stream_);
    device::enqueue(g, plan_, in.inputs(), buffers, stream_);
    device::check(device::rt::stream_synchronize(stream_), "stream_synchronize");
    test::fill_reference(g, plan_, qsl, lens, table, stride, host);
    return test::compare(extents);
  }

  device::Stream stream_ = nullptr;
  StepPlan plan_;
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
  int scheduled = 0, native = 0, chunked = 0, gathers = 0;
  for (int i = 0; i < steps; ++i) {
    const std::size_t k = static_cast<std::size_t>(i) % geometries.size();
    const test::RandomStep s = test::random_step(geometries[k], rng);
    const std::string diff = run(geometries[k], buffers[k], host[k], s.query_start_loc, s.seq_lens,
                                 s.seq_lens_upper_bound, s.num_tokens, s.block_table, s.table_stride);
    ASSERT_EQ(diff, "") << "step " << i << " on geometry " << k;
    scheduled += plan_.decode.schedule.present();
    native += plan_.decode.native.present();
    chunked += plan_.prefill.size() > 1;
    gathers += !plan_.gather_launches.empty();
  }
  std::printf("%d random steps equal to the reference: %d scheduled, %d native, %d chunked, "
              "%d gathering\n", steps, scheduled, native, chunked, gathers);
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
    Words table(lens.size() * static_cast<std::size_t>(g.max_blocks_per_seq));
    for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i * 31 % 1000003);
    EXPECT_EQ(run(g, buffers, host, qsl, lens, lens, kUnpaddedTokens, table, g.max_blocks_per_seq), "");
    EXPECT_EQ(plan_.decode.native.present(), !ragged);
    EXPECT_TRUE(plan_.decode.schedule.present());  // 4096 one-row units fit 6144 workgroups
  }
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
  Words table(lens.size() * static_cast<std::size_t>(g.max_blocks_per_seq));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i % 1000003);
  EXPECT_EQ(run(g, buffers, host, qsl, lens, lens, kUnpaddedTokens, table, g.max_blocks_per_seq), "");
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
  EXPECT_EQ(Words(host.decode_schedule.begin(), host.decode_schedule.begin() + static_cast<std::ptrdiff_t>(words)),
            Words(words, 0));
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

TEST_F(PrepareStep, AStepWithNoTokensStillWritesTheContexts) {
  const Geometry g = make_geometry(test::deepseek_config());
  const device::StepBuffers buffers(g);
  test::HostBuffers host(g);
  EXPECT_EQ(run(g, buffers, host, Words{0, 0, 0}, Words{40, 80}, Words{40, 80}, kUnpaddedTokens,
                Words(2 * 8192, 1), 8192), "");
}

TEST_F(PrepareStep, AGraphReplaysOnNewLengthsOfTheSameShape) {
  IndexerConfig c = test::deepseek_config();
  c.num_compute_units = 132;
  const Geometry g = make_geometry(c);
  const device::StepBuffers buffers(g);
  test::HostBuffers host(g);
  // 256 MTP decodes and a prefill: the host bounds fix the plan's shape.
  Words qsl{0}, upper;
  for (int r = 0; r < 256; ++r) {
    qsl.push_back(qsl.back() + 2);
    upper.push_back(200000);
  }
  qsl.push_back(qsl.back() + 3000);
  upper.push_back(400000);
  plan_step(g, qsl, upper, kUnpaddedTokens, plan_);
  ASSERT_TRUE(plan_.decode.schedule.present());
  Words lens = upper;
  Words table(upper.size() * 8192);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  const test::DeviceInputs in(qsl, lens, table, 8192);

  device::rt::Graph graph = nullptr;
  device::rt::GraphExec exec = nullptr;
  device::check(device::rt::begin_capture(stream_), "begin_capture");
  device::enqueue(g, plan_, in.inputs(), buffers, stream_);
  device::check(device::rt::end_capture(stream_, &graph), "end_capture");
  device::check(device::rt::graph_instantiate(&exec, graph), "graph_instantiate");

  std::mt19937_64 rng(7);
  for (int replay = 0; replay < 3; ++replay) {
    // New exact lengths under the same bounds, written where the graph reads.
    for (std::size_t r = 0; r < lens.size(); ++r) {
      lens[r] = std::uniform_int_distribution<int32_t>(qsl[r + 1] - qsl[r], upper[r])(rng);
    }
    device::check(device::rt::memcpy_to_device(in.seq_lens.data(), lens.data(), lens.size() * 4), "lens");
    const auto extents = test::step_extents(plan_, host, buffers.outputs(), buffers.sizes());
    test::poison(extents, stream_);
    device::check(device::rt::graph_launch(exec, stream_), "graph_launch");
    device::check(device::rt::stream_synchronize(stream_), "stream_synchronize");
    test::fill_reference(g, plan_, qsl, lens, table, 8192, host);
    EXPECT_EQ(test::compare(extents), "") << "replay " << replay;
  }
  (void)device::rt::graph_exec_destroy(exec);
  (void)device::rt::graph_destroy(graph);
}

// Host-side, so these run wherever the device code builds, GPU or not.
TEST(LaunchGrid, GivesEachBufferItsOwnBlocks) {
  StepArgs a;
  a.num_reqs = 300;                     // 2 blocks of contexts
  a.num_decode_rows = 600;              // 3 of decode rows
  a.num_block_cols = 10;                // 3 quads a row: 8 blocks of table
  a.num_decode_tokens = 600;
  a.num_tokens = 600 + 1000;            // 4 of prefill rows
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
  // A packing-only launch writes its packed offsets alone.
  a.packing_only = true;
  const device::LaunchGrid packing = device::launch_grid(a, 1024);
  EXPECT_EQ((std::vector<int32_t>(packing.end, packing.end + device::kParts)),
            (std::vector<int32_t>{0, 2, 2, 2, 2, 2}));
  // A launch with nothing to write still has a block.
  EXPECT_EQ(device::launch_grid(StepArgs{}, 1024).blocks(), 1);
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
