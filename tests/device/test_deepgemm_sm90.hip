// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// The deepgemm_sm90 metadata's device writer against its CPU fill, word for
// word, poison past it included. Built by nvcc and hipcc, and by the host
// compiler onto the CPU stand-in for a GPU (tests/cpu_device), where every
// CPU build runs it.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "idxplan/contracts/deepgemm_sm90_device.hpp"

namespace idxplan::deepgemm_sm90 {
namespace {

using Words = std::vector<int32_t>;

constexpr int32_t kPoison = -7;
constexpr std::size_t kGuard = 64;  // poisoned words past the metadata

class DeepGemmMetadata : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device::device_count() == 0) GTEST_SKIP() << "no GPU on this machine: GPU test skipped";
    device::check(device::rt::stream_create(&stream_), "stream_create");
  }
  void TearDown() override {
    if (stream_ != nullptr) (void)device::rt::stream_destroy(stream_);
  }

  // The device's words for `lens` ([batch, next_n]) and the guard past them.
  Words device_words(const MetadataShape& s, const Words& lens) {
    device::DeviceArray<int32_t> d_lens(std::max<std::size_t>(lens.size(), 1));
    if (!lens.empty()) {
      device::check(device::rt::memcpy_to_device(d_lens.data(), lens.data(), lens.size() * sizeof(int32_t)),
                    "memcpy");
    }
    const Words poison(static_cast<std::size_t>(s.words()) + kGuard, kPoison);
    device::DeviceArray<int32_t> d_out(poison.size());
    device::check(device::rt::memcpy_to_device(d_out.data(), poison.data(), poison.size() * sizeof(int32_t)),
                  "memcpy");
    enqueue_metadata(s, d_lens.data(), d_out.data(), stream_);
    device::check(device::rt::stream_synchronize(stream_), "stream_synchronize");
    Words got(poison.size());
    device::check(device::rt::memcpy_to_host(got.data(), d_out.data(), got.size() * sizeof(int32_t)), "memcpy");
    return got;
  }

  device::Stream stream_ = nullptr;
};

int env_cases(int fallback) {
  const char* v = std::getenv("IDXPLAN_GPU_STEPS");
  return v != nullptr ? std::atoi(v) : fallback;
}

TEST_F(DeepGemmMetadata, MatchesTheCpuFillOnRandomSteps) {
  std::mt19937_64 rng(5190);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int cases = env_cases(120);
  for (int c = 0; c < cases; ++c) {
    // Up to the largest batch DeepGEMM takes, now and then; SM counts from
    // one to past an H200's; lengths of 0, of -1 to -255 (0 splits as
    // uint32), short and up to a 1M-token context at compression 4.
    const int64_t batch = c % 25 == 0 ? kMaxBatch - uniform(0, 40) : uniform(0, c % 3 == 0 ? 5000 : 600);
    const int64_t next_n = uniform(1, 4);
    const int64_t num_sms = c % 5 == 0 ? uniform(1, 40) : uniform(60, 300);
    Words lens(static_cast<std::size_t>(batch * next_n));
    const bool short_lens = uniform(0, 3) == 0;
    for (int32_t& v : lens) {
      const int64_t kind = uniform(0, 9);
      v = static_cast<int32_t>(kind == 0 ? 0 : kind == 1 ? -uniform(1, 255) : uniform(0, short_lens ? 600 : 262144));
    }
    const MetadataShape s = metadata_shape(batch, next_n, kBlockKv, num_sms);
    Words want(static_cast<std::size_t>(s.words()) + kGuard, kPoison);
    fill_metadata(s, lens, Span<int32_t>(want.data(), static_cast<std::size_t>(s.words())));
    ASSERT_EQ(device_words(s, lens), want) << "case " << c << ": batch " << batch << ", next_n " << next_n
                                           << ", num_sms " << num_sms;
  }
}

TEST_F(DeepGemmMetadata, EndsEveryRowWhereTheUnitsPassUint32) {
  // Two sequences of -256 keys (16,777,215 splits as uint32) at next_n 512:
  // the CPU fill refuses them, and the device, which cannot, writes every
  // row as the end, (B * atoms, 0).
  const MetadataShape s = metadata_shape(2, 512, kBlockKv, 3);
  const Words got = device_words(s, Words(2 * 512, -256));
  Words want(static_cast<std::size_t>(s.words()) + kGuard, kPoison);
  for (int32_t sm = 0; sm <= s.num_sms; ++sm) store_end_row(s, want.data() + 2 * sm);
  EXPECT_EQ(got, want);
}

TEST_F(DeepGemmMetadata, RefusesNullBuffersByName) {
  const MetadataShape s = metadata_shape(4, 1, kBlockKv, 8);
  device::DeviceArray<int32_t> out(static_cast<std::size_t>(s.words()));
  try {
    enqueue_metadata(s, nullptr, out.data(), stream_);
    FAIL() << "a null context_lens was taken";
  } catch (const StepError& e) {
    EXPECT_STREQ(e.what(), "get_paged_mqa_logits_metadata: context_lens is null, and the metadata reads 4 "
                           "sequences of it");
  }
}

}  // namespace
}  // namespace idxplan::deepgemm_sm90
