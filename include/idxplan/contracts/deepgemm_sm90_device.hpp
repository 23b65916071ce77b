// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The deepgemm_sm90 contract's device writer: the metadata of
// deepgemm_sm90.hpp, word for word, in one block of one launch, with no
// device allocation and no sync. DeepGEMM's own kernel keeps every
// sequence's prefix sum in shared memory and runs a binary search a row;
// here the block walks the sequences a tile of kThreads at a time, a 64-bit
// scan a tile, and each sequence writes the rows that start among its
// units: the SMs whose first unit lies in [before * atoms, after * atoms)
// (first_sm inverts first_unit). The rows that start past every unit are
// the end rows. Where the units pass uint32, every row is an end row (the
// CPU fill refuses those lengths).

#include <cstdint>

#include "idxplan/contracts/deepgemm_sm90.hpp"
#include "idxplan/contracts/deepgemm_sm90_step.hpp"
#include "idxplan/device/block.hpp"
#include "idxplan/device/runtime.hpp"
#include "idxplan/device/scan.hpp"

namespace idxplan::deepgemm_sm90 {

// Threads of the standalone launch (idxplan.deepgemm's).
inline constexpr int kMetadataThreads = 512;

// The first SM in [0, num_sms] whose first unit of `total` is at least
// `unit` (unit <= total): SMs [0, rest] start every q + 1 units, the
// others every q units after rest of them.
IDXPLAN_HD int32_t first_sm(const MetadataShape& s, uint32_t total, uint64_t unit) {
  const uint64_t q = total / static_cast<uint32_t>(s.num_sms);
  const uint64_t rest = total % static_cast<uint32_t>(s.num_sms);
  if (unit <= rest * (q + 1)) return static_cast<int32_t>((unit + q) / (q + 1));
  return static_cast<int32_t>((unit - rest + q - 1) / q);  // q > 0 here, as unit <= total = num_sms * q + rest
}

template <int kThreads>
struct MetadataShared {
  using Primitives = device::BlockPrimitives<kThreads>;
  int64_t warps[Primitives::kWarps];  // the warps' partial sums
};

namespace detail {

// The block's exclusive sum of `v` (thread order) and, in `total`, their
// sum, in 64 bits: warp scans by shuffles, then the warps' sums through
// shared memory. Two barriers.
template <int kThreads>
__device__ __forceinline__ int64_t block_exclusive_sum(int64_t v, int64_t& total, MetadataShared<kThreads>& sh) {
  using Primitives = typename MetadataShared<kThreads>::Primitives;
  const int lane = static_cast<int>(threadIdx.x) % Primitives::kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / Primitives::kWarpSize;
  int64_t x = v;
  for (int d = 1; d < Primitives::kWarpSize; d *= 2) {
    const int64_t y = device::lane_value(x, lane >= d ? lane - d : lane);
    x += lane >= d ? y : 0;
  }
  if (lane == Primitives::kWarpSize - 1) sh.warps[warp] = x;
  __syncthreads();
  int64_t before = 0;
  int64_t all = 0;
  for (int w = 0; w < Primitives::kWarps; ++w) {
    before += w < warp ? sh.warps[w] : 0;
    all += sh.warps[w];
  }
  __syncthreads();
  total = all;
  return before + x - v;
}

}  // namespace detail

// The last column of an engine's context_lens [batch, next_n].
struct LastColumn {
  const int32_t* context_lens;
  int32_t next_n;
  __device__ int32_t keys(int32_t q) const { return context_lens[int64_t{q} * next_n + next_n - 1]; }
};

// The metadata of s.batch sequences whose keys `source.keys(q)` gives into
// `out` ([num_sms + 1, 2]), by the block of kThreads threads that calls it.
template <int kThreads, class Source>
__device__ void write_metadata(const MetadataShape& s, const Source& source, int32_t* out,
                               MetadataShared<kThreads>& sh) {
  const int t = static_cast<int>(threadIdx.x);
  const auto splits_at = [&](int32_t q) { return q < s.batch ? splits_of(source.keys(q)) : 0u; };
  // The splits' sum: each thread's share, then the block's.
  int64_t mine = 0;
  for (int32_t q = t; q < s.batch; q += kThreads) mine += splits_at(q);
  int64_t splits = 0;
  detail::block_exclusive_sum(mine, splits, sh);
  const uint32_t atoms = s.atoms();
  if (!units_fit(static_cast<uint64_t>(splits), atoms)) {
    for (int32_t sm = t; sm <= s.num_sms; sm += kThreads) store_end_row(s, out + int64_t{sm} * kRowWords);
    return;
  }
  const auto total = static_cast<uint32_t>(static_cast<uint64_t>(splits) * atoms);
  int64_t carry = 0;  // the splits of the tiles before
  for (int32_t base = 0; base < s.batch; base += kThreads) {
    const int32_t q = base + t;
    const uint32_t own = splits_at(q);
    int64_t tile = 0;
    const int64_t before = carry + detail::block_exclusive_sum(int64_t{own}, tile, sh);
    if (own > 0) {
      const uint64_t first = static_cast<uint64_t>(before) * atoms;
      const int32_t end = first_sm(s, total, first + uint64_t{own} * atoms);
      for (int32_t sm = first_sm(s, total, first); sm < end; ++sm) {
        const uint32_t offset = first_unit(s, total, sm) - static_cast<uint32_t>(first);
        int32_t* row = out + int64_t{sm} * kRowWords;
        row[0] = static_cast<int32_t>(static_cast<uint32_t>(q) * atoms + offset / own);
        row[1] = static_cast<int32_t>(offset % own);
      }
    }
    carry += tile;
  }
  for (int32_t sm = first_sm(s, total, total) + t; sm <= s.num_sms; sm += kThreads) {
    store_end_row(s, out + int64_t{sm} * kRowWords);
  }
}

// One launch of the standalone metadata (idxplan.deepgemm's drop-in).
struct MetadataLaunch {
  MetadataShape shape;
  const int32_t* context_lens;  // [batch, next_n]
  int32_t* out;                 // [num_sms + 1, 2]
};

// A template, so that every file that includes this header may define it.
template <int = 0>
__global__ void IDXPLAN_LAUNCH_BOUNDS(kMetadataThreads, 0) metadata_kernel(MetadataLaunch a) {
  __shared__ MetadataShared<kMetadataThreads> sh;
  write_metadata(a.shape, LastColumn{a.context_lens, a.shape.next_n}, a.out, sh);
}

// get_paged_mqa_logits_metadata on the device: one launch of one block on
// `stream`, writing s.words() words of `out` from the device context_lens.
inline void enqueue_metadata(const MetadataShape& s, const int32_t* context_lens, int32_t* out,
                             device::Stream stream) {
  constexpr const char* kFn = "get_paged_mqa_logits_metadata";
  if (context_lens == nullptr && s.batch > 0) {
    throw StepError(fmt::format("{}: context_lens is null, and the metadata reads {} sequences of it", kFn, s.batch));
  }
  if (out == nullptr) throw StepError(fmt::format("{}: the metadata's buffer is null ({} words)", kFn, s.words()));
  const MetadataLaunch a{s, context_lens, out};
  IDXPLAN_KERNEL_LAUNCH(metadata_kernel<>, 1u, kMetadataThreads, 0, stream)(a);
  device::check(device::rt::last_error(), "metadata_kernel launch");
}

}  // namespace idxplan::deepgemm_sm90

// The step's metadata: the same writer in the schedule part of the prepare
// launch (device/prepare_step.hpp), one block at its block size, over the
// step's decode sequences (deepgemm_sm90_step.hpp).
namespace idxplan::device {

// Blocks of the schedule part: one, in the launch that writes the metadata.
IDXPLAN_HD int32_t metadata_blocks(const StepArgs& a) { return deepgemm_sm90::step_writes_metadata(a) ? 1 : 0; }

namespace detail {

__device__ __forceinline__ void write_step_metadata(const StepArgs& a) {
  __shared__ deepgemm_sm90::MetadataShared<kPrepareThreads> sh;
  deepgemm_sm90::write_metadata(deepgemm_sm90::step_metadata_shape(a), deepgemm_sm90::StepSequences{&a},
                                a.out.decode_schedule.data, sh);
}

}  // namespace detail

}  // namespace idxplan::device
