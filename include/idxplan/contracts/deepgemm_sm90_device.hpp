// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The deepgemm_sm90 contract's device writer: the metadata of
// deepgemm_sm90.hpp, word for word, in one block of one launch, with no
// device allocation and no sync. DeepGEMM's own kernel keeps every
// sequence's prefix sum in shared memory and runs a binary search a row.
// Here each thread owns a run of consecutive sequences (a chunk), sums
// their splits, and one 64-bit block scan gives each chunk's end, kept in
// shared memory; then each metadata row, a thread a row, finds the chunk
// that holds its first unit by a binary search of those ends and walks that
// chunk's sequences to the one that holds it. One pass over the lengths,
// one scan, three barriers, at every batch. Where the units pass uint32,
// every row is an end row (the CPU fill refuses those lengths).

#include <cstdint>

#include "idxplan/contracts/deepgemm_sm90.hpp"
#include "idxplan/contracts/deepgemm_sm90_step.hpp"
#include "idxplan/device/block.hpp"
#include "idxplan/device/runtime.hpp"
#include "idxplan/device/scan.hpp"

namespace idxplan::deepgemm_sm90 {

// Threads of the standalone launch (idxplan.deepgemm's).
inline constexpr int kMetadataThreads = 512;

template <int kThreads>
struct MetadataShared {
  using Primitives = device::BlockPrimitives<kThreads>;
  int64_t warps[Primitives::kWarps];  // the warps' partial sums
  uint32_t ends[kThreads];            // each chunk's inclusive split sum
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
  // Thread t's chunk: sequences [t * chunk, t * chunk + chunk) of the batch.
  const int32_t chunk = s.batch / kThreads + (s.batch % kThreads != 0 ? 1 : 0);
  const int32_t begin = t * chunk < s.batch ? t * chunk : s.batch;
  const int32_t end = begin + chunk < s.batch ? begin + chunk : s.batch;
  int64_t mine = 0;
  for (int32_t q = begin; q < end; ++q) mine += splits_of(source.keys(q));
  int64_t splits = 0;
  const int64_t before = detail::block_exclusive_sum(mine, splits, sh);
  const uint32_t atoms = s.atoms();
  if (!units_fit(static_cast<uint64_t>(splits), atoms)) {
    for (int32_t sm = t; sm <= s.num_sms; sm += kThreads) store_end_row(s, out + int64_t{sm} * kRowWords);
    return;
  }
  sh.ends[t] = static_cast<uint32_t>(before + mine);  // within splits: it fits
  __syncthreads();
  // Every sum of splits times atoms below is at most `total`: uint32 holds it.
  const auto total = static_cast<uint32_t>(static_cast<uint64_t>(splits) * atoms);
  // The chunks that hold sequences; the others end where the last does.
  const int32_t chunks = chunk > 0 ? s.batch / chunk + (s.batch % chunk != 0 ? 1 : 0) : 0;
  for (int32_t sm = t; sm <= s.num_sms; sm += kThreads) {
    int32_t* row = out + int64_t{sm} * kRowWords;
    const uint32_t unit = first_unit(s, total, sm);
    if (unit >= total) {
      store_end_row(s, row);
      continue;
    }
    // The first chunk whose units end past `unit` (one does: unit < total).
    int32_t lo = 0;
    int32_t hi = chunks - 1;
    while (lo < hi) {
      const int32_t mid = (lo + hi) / 2;
      if (sh.ends[mid] * atoms > unit) hi = mid; else lo = mid + 1;
    }
    // Its first sequence whose units end past `unit`: DeepGEMM's binary
    // search, as a walk of the chunk.
    uint32_t start = lo > 0 ? sh.ends[lo - 1] : 0u;  // splits before the sequence
    int32_t q = lo * chunk;
    uint32_t own = splits_of(source.keys(q));
    while ((start + own) * atoms <= unit) {
      start += own;
      own = splits_of(source.keys(++q));
    }
    const uint32_t offset = unit - start * atoms;
    row[0] = static_cast<int32_t>(static_cast<uint32_t>(q) * atoms + offset / own);
    row[1] = static_cast<int32_t>(offset % own);
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

// The step's metadata: the same writer in the prepare launch
// (device/prepare_step.hpp), over the step's decode sequences as
// DecodeLaunch hands them to DeepGEMM (deepgemm_sm90_step.hpp), by the first
// block of the launch's decode_rows part. A native step's sequence keys are
// its last row's, from seq_lens, so its rows keep their blocks. A flattened
// step's part is that one block (metadata_reads_rows): it writes the step's
// decode rows, then reads each sequence's keys back from decode_row_lens, so
// that no thread searches query_start_loc for a row's request.
namespace idxplan::device {

namespace detail {

// Sequence q's keys: a native step's from its seq_lens, as its last row's
// are written; a flattened step's from the decode_row_lens its block wrote.
// One source, so that the kernel inlines the writer once.
struct StepKeys {
  const StepArgs* a;
  __device__ int32_t keys(int32_t q) const {
    return a->native_next_n > 0 ? deepgemm_sm90::StepSequences{a}.keys(q)
                                : deepgemm_sm90::LastColumn{a->out.decode_row_lens.data, 1}.keys(q);
  }
};

// The step's metadata, by the decode rows' first block (after its writes of
// decode_row_lens, which the barrier makes visible to the block's threads).
__device__ __forceinline__ void write_step_metadata(const StepArgs& a) {
  if (!deepgemm_sm90::step_writes_metadata(a)) return;
  __shared__ deepgemm_sm90::MetadataShared<kPrepareThreads> sh;
  __syncthreads();
  deepgemm_sm90::write_metadata(deepgemm_sm90::step_metadata_shape(a), StepKeys{&a}, a.out.decode_schedule.data, sh);
}

}  // namespace detail

}  // namespace idxplan::device
