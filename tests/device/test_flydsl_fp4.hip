// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// The flydsl_fp4 schedules' device writer against their CPU fill, word for
// word, poison around them included. Built by nvcc and hipcc, and by the
// host compiler onto the CPU stand-in for a GPU (tests/cpu_device), where
// every CPU build runs it.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "idxplan/contracts/flydsl_fp4_device.hpp"

namespace idxplan::flydsl_fp4 {
namespace {

using Words = std::vector<int32_t>;

constexpr int32_t kPoison = -7;
constexpr std::size_t kGuard = 64;  // poisoned words past each output

class FlydslSchedule : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device::device_count() == 0) GTEST_SKIP() << "no GPU on this machine: GPU test skipped";
    device::check(device::rt::stream_create(&stream_), "stream_create");
  }
  void TearDown() override {
    if (stream_ != nullptr) (void)device::rt::stream_destroy(stream_);
  }

 public:
  static device::DeviceArray<int32_t> upload(const Words& host) {
    device::DeviceArray<int32_t> d(std::max<std::size_t>(host.size(), 1));
    if (!host.empty()) {
      device::check(device::rt::memcpy_to_device(d.data(), host.data(), host.size() * sizeof(int32_t)), "memcpy");
    }
    return d;
  }
  static Words download(const device::DeviceArray<int32_t>& d, std::size_t words) {
    Words host(words);
    device::check(device::rt::memcpy_to_host(host.data(), d.data(), words * sizeof(int32_t)), "memcpy");
    return host;
  }

 protected:
  device::Stream stream_ = nullptr;
};

int env_cases(int fallback) {
  const char* v = std::getenv("IDXPLAN_GPU_STEPS");
  return v != nullptr ? std::atoi(v) : fallback;
}

// Lengths of `rows` rows up to about `longest`, some 0, some negative, some
// past it; the CTAs from just enough to thousands more.
Words random_lengths(std::mt19937_64& rng, int64_t rows, int64_t longest) {
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Words v(static_cast<std::size_t>(rows));
  const bool short_rows = uniform(0, 3) == 0;
  for (int32_t& x : v) {
    const int64_t kind = uniform(0, 9);
    x = static_cast<int32_t>(kind == 0 ? 0 : kind == 1 ? -uniform(1, 600) : kind == 2 ? uniform(longest, 3 * longest + 1)
                                                                                       : uniform(0, short_rows ? 300 : longest));
  }
  return v;
}

// prefill_schedule on the device against the CPU fill, poison around them.
void expect_prefill_words(const Words& batches, const Words& starts, const Words& ends, int64_t block_k, int64_t ctas,
                          int64_t max_seq_len, device::Stream stream) {
  const PrefillShape s = prefill_shape(static_cast<int64_t>(ends.size()), block_k, ctas, max_seq_len);
  Words want(static_cast<std::size_t>(s.words()) + kGuard, kPoison);
  int32_t want_safe = kPoison;
  fill_prefill_schedule(s, batches, starts, ends, Span<int32_t>(want.data(), static_cast<std::size_t>(s.words())),
                        &want_safe);
  const auto d_batches = FlydslSchedule::upload(batches);
  const auto d_starts = FlydslSchedule::upload(starts);
  const auto d_ends = FlydslSchedule::upload(ends);
  auto d_info = FlydslSchedule::upload(Words(want.size(), kPoison));
  auto d_safe = FlydslSchedule::upload(Words{kPoison});
  enqueue_prefill_schedule(s, d_batches.data(), d_starts.data(), d_ends.data(), d_info.data(), d_safe.data(), stream);
  device::check(device::rt::stream_synchronize(stream), "stream_synchronize");
  ASSERT_EQ(FlydslSchedule::download(d_safe, 1)[0], want_safe);
  const Words got = FlydslSchedule::download(d_info, want.size());
  for (std::size_t w = 0; w < want.size(); ++w) ASSERT_EQ(got[w], want[w]) << "word " << w;
}

// varctx_schedule on the device against the CPU fill, poison around them.
void expect_varctx_words(const Words& contexts, int64_t block_k, int64_t ctas, int64_t max_seq_len, int64_t next_n,
                         device::Stream stream) {
  const VarctxShape s = varctx_shape(static_cast<int64_t>(contexts.size()), block_k, ctas, max_seq_len, next_n);
  Words want(static_cast<std::size_t>(s.words()) + kGuard, kPoison);
  int32_t want_safe = kPoison;
  fill_varctx_schedule(s, contexts, Span<int32_t>(want.data(), static_cast<std::size_t>(s.words())), &want_safe);
  const auto d_contexts = FlydslSchedule::upload(contexts);
  auto d_info = FlydslSchedule::upload(Words(want.size(), kPoison));
  auto d_safe = FlydslSchedule::upload(Words{kPoison});
  enqueue_varctx_schedule(s, d_contexts.data(), d_info.data(), d_safe.data(), stream);
  device::check(device::rt::stream_synchronize(stream), "stream_synchronize");
  ASSERT_EQ(FlydslSchedule::download(d_safe, 1)[0], want_safe);
  const Words got = FlydslSchedule::download(d_info, want.size());
  for (std::size_t w = 0; w < want.size(); ++w) ASSERT_EQ(got[w], want[w]) << "word " << w;
}

TEST_F(FlydslSchedule, DecodeMatchesTheCpuFillOnRandomLengths) {
  std::mt19937_64 rng(4901);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int cases = env_cases(120);
  for (int i = 0; i < cases; ++i) {
    const int64_t next_n = uniform(0, 2) == 0 ? uniform(1, 4) : 1;
    const int64_t batches = uniform(0, i % 8 == 0 ? 6000 : 300);
    const int64_t block_k = uniform(0, 3) == 0 ? uniform(1, 300) : 256;
    const int64_t max_seq_len = uniform(0, 200000);
    const Words contexts = random_lengths(rng, batches, max_seq_len);
    const int64_t ctas = next_n * (batches + uniform(0, uniform(0, 1) ? 4 : 5000));
    SCOPED_TRACE(::testing::Message() << "case " << i << ": " << batches << " batches, next_n " << next_n
                                      << ", block_k " << block_k << ", " << ctas << " CTAs, max_seq_len "
                                      << max_seq_len);
    expect_varctx_words(contexts, block_k, ctas, max_seq_len, next_n, stream_);
  }
}

// Around the warp's rows (32 lanes on NVIDIA, 64 on AMD), which each warp
// computes on its own past the block's barriers (write_warp_schedule):
// one less, as many, one more, with grids from just enough CTAs to more
// than one block's.
TEST_F(FlydslSchedule, DecodeAroundAWarpOfRowsMatchesTheCpuFill) {
  std::mt19937_64 rng(4902);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (const int64_t batches : {0, 1, 2, 31, 32, 33, 63, 64, 65}) {
    for (const int64_t extra : {0, 1, 700, 3000}) {
      const int64_t next_n = uniform(0, 1) == 0 ? 2 : 1;
      const int64_t max_seq_len = uniform(1000, 200000);
      const Words contexts = random_lengths(rng, batches, max_seq_len);
      const int64_t ctas = next_n * (batches + extra);
      SCOPED_TRACE(::testing::Message() << batches << " batches, next_n " << next_n << ", " << ctas << " CTAs");
      expect_varctx_words(contexts, 256, ctas, max_seq_len, next_n, stream_);
    }
  }
}

TEST_F(FlydslSchedule, PrefillMatchesTheCpuFillOnRandomLengths) {
  std::mt19937_64 rng(4902);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int cases = env_cases(120);
  for (int i = 0; i < cases; ++i) {
    const int64_t rows = uniform(0, i % 8 == 0 ? 20000 : 1500);
    const int64_t block_k = uniform(0, 3) == 0 ? uniform(1, 300) : 256;
    const int64_t max_seq_len = uniform(0, 100000);
    const Words ends = random_lengths(rng, rows, max_seq_len);
    Words batches(ends.size()), starts(ends.size());
    for (std::size_t r = 0; r < ends.size(); ++r) {
      batches[r] = static_cast<int32_t>(uniform(0, 50));
      starts[r] = static_cast<int32_t>(uniform(-3, 400));
    }
    const int64_t ctas = std::max<int64_t>(rows, uniform(0, 1) ? 1024 : rows + uniform(0, 3));
    SCOPED_TRACE(::testing::Message() << "case " << i << ": " << rows << " rows, block_k " << block_k << ", "
                                      << ctas << " CTAs, max_seq_len " << max_seq_len);
    expect_prefill_words(batches, starts, ends, block_k, ctas, max_seq_len, stream_);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST_F(FlydslSchedule, PrefillOfCausalRowsMatchesTheCpuFill) {
  // Rows of a few requests, each row's keys its causal end: runs of equal
  // chunk counts, staged as runs past 4,096 rows.
  std::mt19937_64 rng(4905);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < env_cases(24); ++i) {
    Words batches, starts, ends;
    const int64_t requests = uniform(1, 12);
    for (int64_t r = 0; r < requests; ++r) {
      const int64_t rows = uniform(1, i % 3 == 0 ? 12000 : 3000);
      const int64_t prefix = uniform(0, 400000);
      for (int64_t j = 0; j < rows; ++j) {
        batches.push_back(static_cast<int32_t>(r));
        starts.push_back(0);
        ends.push_back(static_cast<int32_t>((prefix + j + 1) / 4));
      }
    }
    const int64_t rows = static_cast<int64_t>(ends.size());
    SCOPED_TRACE(::testing::Message() << "case " << i << ": " << rows << " rows of " << requests << " requests");
    expect_prefill_words(batches, starts, ends, 256, std::max<int64_t>(1024, rows), 110000, stream_);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST_F(FlydslSchedule, PrefillOfAsManyRunsAsStagedOrOneMoreMatchesTheCpuFill) {
  // Runs of three rows, their count about the most shared memory stages.
  for (const int32_t runs : {kMaxRuns - 1, kMaxRuns, kMaxRuns + 1}) {
    Words ends;
    for (int32_t r = 0; r < 3 * runs; ++r) ends.push_back((r / 3 + 1) * 256);
    const Words zeros(ends.size(), 0);
    SCOPED_TRACE(::testing::Message() << runs << " runs");
    expect_prefill_words(zeros, zeros, ends, 256, static_cast<int64_t>(ends.size()) + 5, 1 << 20, stream_);
  }
}

TEST_F(FlydslSchedule, RefusesANullBufferTheScheduleWrites) {
  const VarctxShape s = varctx_shape(2, 256, 4, 1024, 1);
  auto d_safe = upload(Words{0});
  auto d_info = upload(Words(16));
  EXPECT_THROW(enqueue_varctx_schedule(s, nullptr, d_info.data(), d_safe.data(), stream_), StepError);
  EXPECT_THROW(enqueue_varctx_schedule(s, d_info.data(), nullptr, d_safe.data(), stream_), StepError);
  EXPECT_THROW(enqueue_varctx_schedule(s, d_info.data(), d_info.data(), nullptr, stream_), StepError);
}

}  // namespace
}  // namespace idxplan::flydsl_fp4
