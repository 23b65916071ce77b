// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The flydsl_fp4 contract's device writer: the schedules of flydsl_fp4.hpp,
// word for word, in one launch with no device allocation and no sync. Each
// block writes its own run of CTAs, so it computes `safe` and the split
// counts before its run itself: a sum over the rows, a binary search of
// safe_range's few candidates (chunk counts staged in shared memory where
// they fit), then the rows' splits tile by tile, an exclusive sum a tile,
// until the tile that holds its last CTA. aiter's Triton kernel does the
// same in every program, with a 32-step search over [1, s_max].
//
// Lengths are read as they are: a negative one is 0 chunks (flydsl_fp4.hpp).

#include <cstdint>

#include "idxplan/contracts/flydsl_fp4.hpp"
#include "idxplan/device/runtime.hpp"

namespace idxplan::flydsl_fp4 {

inline constexpr int kScheduleThreads = 256;
inline constexpr int kRowsPerThread = 8;                                // a thread's rows in a scan tile
inline constexpr int kTileRows = kScheduleThreads * kRowsPerThread;    // 2,048
inline constexpr int kCachedRows = 4096;                                // chunk counts staged for the search
// CTAs a block writes, at least; a grid of more than kMaxScheduleBlocks
// blocks' worth gives each block more.
inline constexpr int32_t kSlotsPerBlock = 1024;
inline constexpr int32_t kMaxScheduleBlocks = 256;

// Shared memory of one block: plain arrays (a __shared__ object has no
// constructor).
struct ScheduleShared {
  int64_t wide[2][kScheduleThreads];    // sums: chunks and splits at the cap, or a pass's splits
  int32_t narrow[2][kScheduleThreads];  // rows with chunks and the longest, or a scan's sums
  int32_t ends[kTileRows];              // a tile's inclusive split sums, row by row
  int32_t chunks[kCachedRows];          // every row's chunks, where the rows fit
};

namespace detail {

// The block's stats, in every thread.
__device__ inline ChunkStats block_stats(const ChunkStats& mine, ScheduleShared& sh) {
  const int t = static_cast<int>(threadIdx.x);
  sh.wide[0][t] = mine.chunks;
  sh.wide[1][t] = mine.splits_at_cap;
  sh.narrow[0][t] = mine.nonzero;
  sh.narrow[1][t] = mine.max_chunks;
  __syncthreads();
  for (int half = kScheduleThreads / 2; half > 0; half /= 2) {
    if (t < half) {
      sh.wide[0][t] += sh.wide[0][t + half];
      sh.wide[1][t] += sh.wide[1][t + half];
      sh.narrow[0][t] += sh.narrow[0][t + half];
      sh.narrow[1][t] = sh.narrow[1][t] > sh.narrow[1][t + half] ? sh.narrow[1][t] : sh.narrow[1][t + half];
    }
    __syncthreads();
  }
  const ChunkStats all{sh.wide[0][0], sh.narrow[0][0], sh.narrow[1][0], sh.wide[1][0]};
  __syncthreads();
  return all;
}

// The block's sum of `mine`, in every thread.
__device__ inline int64_t block_sum(int64_t mine, ScheduleShared& sh) {
  const int t = static_cast<int>(threadIdx.x);
  sh.wide[0][t] = mine;
  __syncthreads();
  for (int half = kScheduleThreads / 2; half > 0; half /= 2) {
    if (t < half) sh.wide[0][t] += sh.wide[0][t + half];
    __syncthreads();
  }
  const int64_t all = sh.wide[0][0];
  __syncthreads();
  return all;
}

// The sum of `mine` over the threads before this one; *total gets the
// block's.
__device__ inline int32_t block_exclusive_sum(int32_t mine, int32_t* total, ScheduleShared& sh) {
  const int t = static_cast<int>(threadIdx.x);
  int from = 0;
  sh.narrow[0][t] = mine;
  __syncthreads();
  for (int step = 1; step < kScheduleThreads; step *= 2) {
    const int32_t before = t >= step ? sh.narrow[from][t - step] : 0;
    sh.narrow[1 - from][t] = sh.narrow[from][t] + before;
    from = 1 - from;
    __syncthreads();
  }
  const int32_t inclusive = sh.narrow[from][t];
  *total = sh.narrow[from][kScheduleThreads - 1];
  __syncthreads();
  return inclusive - mine;
}

}  // namespace detail

// Writes CTAs [slot_begin, slot_end) of the schedule of `rows` rows whose
// keys `source.keys(i)` gives, for a grid of `slots` splits (flydsl_fp4.hpp):
// store(slot, split) for each, idle ones with Split{}. `*safe`, where safe
// is not null, gets `safe`. Every thread of the block calls it.
template <class Source, class Store>
__device__ void write_schedule(const Source& source, int32_t rows, int32_t block_k, int32_t slots, int32_t s_max,
                               int32_t slot_begin, int32_t slot_end, const Store& store, int32_t* safe,
                               ScheduleShared& sh) {
  const int t = static_cast<int>(threadIdx.x);
  const bool cached = rows <= kCachedRows;
  ChunkStats mine{};
  for (int32_t i = t; i < rows; i += kScheduleThreads) {
    const int32_t c = chunks_of(source.keys(i), block_k);
    if (cached) sh.chunks[i] = c;
    mine = mine + ChunkStats::of(c, s_max);
  }
  const ChunkStats stats = detail::block_stats(mine, sh);  // its barriers publish the staged chunks
  const auto chunks = [&](int32_t i) { return cached ? sh.chunks[i] : chunks_of(source.keys(i), block_k); };

  SafeRange range = safe_range(stats, slots, s_max);
  while (range.lo < range.hi) {  // the same in every thread
    const int32_t mid = range.lo + (range.hi - range.lo) / 2;
    int64_t splits = 0;
    for (int32_t i = t; i < rows; i += kScheduleThreads) splits += splits_of(chunks(i), mid);
    if (detail::block_sum(splits, sh) <= slots) {
      range.hi = mid;
    } else {
      range.lo = mid + 1;
    }
  }
  const int32_t chunks_a_cta = range.lo;
  if (safe != nullptr && t == 0) *safe = chunks_a_cta;

  // The splits before the current tile; once the rows are done, all of them.
  int32_t before = 0;
  for (int32_t first = 0; first < rows && before < slot_end; first += kTileRows) {
    int32_t running[kRowsPerThread];
    int32_t sum = 0;
#pragma unroll
    for (int k = 0; k < kRowsPerThread; ++k) {
      const int32_t i = first + t * kRowsPerThread + k;
      sum += i < rows ? splits_of(chunks(i), chunks_a_cta) : 0;
      running[k] = sum;
    }
    int32_t tile = 0;
    const int32_t offset = detail::block_exclusive_sum(sum, &tile, sh);
#pragma unroll
    for (int k = 0; k < kRowsPerThread; ++k) sh.ends[t * kRowsPerThread + k] = offset + running[k];
    __syncthreads();
    const int32_t lo = before > slot_begin ? before : slot_begin;
    const int32_t hi = before + tile < slot_end ? before + tile : slot_end;
    for (int32_t slot = lo + t; slot < hi; slot += kScheduleThreads) {
      // The tile's first row whose splits end past the slot.
      const int32_t within = slot - before;
      int32_t a = 0;
      int32_t b = kTileRows - 1;
      while (a < b) {
        const int32_t mid = (a + b) / 2;
        if (sh.ends[mid] > within) b = mid; else a = mid + 1;
      }
      const int32_t split = within - (a > 0 ? sh.ends[a - 1] : 0);
      store(slot, split_of(first + a, split, chunks(first + a), chunks_a_cta));
    }
    before += tile;
    __syncthreads();  // the next tile rewrites ends
  }
  for (int32_t slot = (before > slot_begin ? before : slot_begin) + t; slot < slot_end; slot += kScheduleThreads) {
    store(slot, Split{});
  }
}

// The rows of an engine's array: their keys as given.
struct ArrayRows {
  const int32_t* keys_;
  __device__ int32_t keys(int32_t i) const { return keys_[i]; }
};

struct DecodeStore {
  int32_t* cta_info;
  const int32_t* context_lens;
  int32_t next_n;
  __device__ void operator()(int32_t slot, const Split& split) const {
    store_decode_slot(cta_info, slot, next_n, split, split.row >= 0 ? context_lens[split.row] : 0);
  }
};

struct PrefillStore {
  int32_t* cta_info;
  const int32_t* row_to_batch;
  const int32_t* local_starts;
  const int32_t* local_ends;
  __device__ void operator()(int32_t slot, const Split& split) const {
    const int32_t r = split.row >= 0 ? split.row : 0;
    const bool live = split.row >= 0;
    store_prefill_slot(cta_info, slot, split, live ? row_to_batch[r] : 0, live ? local_starts[r] : 0,
                       live ? local_ends[r] : 0);
  }
};

// One launch of a standalone schedule (idxplan.aiter's drop-ins).
struct VarctxLaunch {
  VarctxShape shape;
  const int32_t* context_lens;  // [batches]
  int32_t* cta_info;            // [ctas, 4]
  int32_t* safe;                // [1]
  int32_t slots_per_block;
};

struct PrefillLaunch {
  PrefillShape shape;
  const int32_t* row_to_batch;  // [rows]
  const int32_t* local_starts;  // [rows]
  const int32_t* local_ends;    // [rows]
  int32_t* cta_info;            // [ctas, 6]
  int32_t* safe;                // [1]
  int32_t slots_per_block;
};

// Templates, so that every file that includes this header may define them.
template <int = 0>
__global__ void IDXPLAN_LAUNCH_BOUNDS(kScheduleThreads, 0) varctx_schedule_kernel(VarctxLaunch a) {
  __shared__ ScheduleShared sh;
  const int32_t begin = static_cast<int32_t>(blockIdx.x) * a.slots_per_block;
  const int32_t end = a.shape.slots - begin < a.slots_per_block ? a.shape.slots : begin + a.slots_per_block;
  write_schedule(ArrayRows{a.context_lens}, a.shape.batches, a.shape.block_k, a.shape.slots, a.shape.s_max, begin,
                 end, DecodeStore{a.cta_info, a.context_lens, a.shape.next_n}, blockIdx.x == 0 ? a.safe : nullptr, sh);
}

template <int = 0>
__global__ void IDXPLAN_LAUNCH_BOUNDS(kScheduleThreads, 0) prefill_schedule_kernel(PrefillLaunch a) {
  __shared__ ScheduleShared sh;
  const int32_t begin = static_cast<int32_t>(blockIdx.x) * a.slots_per_block;
  const int32_t end = a.shape.ctas - begin < a.slots_per_block ? a.shape.ctas : begin + a.slots_per_block;
  write_schedule(ArrayRows{a.local_ends}, a.shape.rows, a.shape.block_k, a.shape.ctas, a.shape.s_max, begin, end,
                 PrefillStore{a.cta_info, a.row_to_batch, a.local_starts, a.local_ends},
                 blockIdx.x == 0 ? a.safe : nullptr, sh);
}

namespace detail {

// Blocks of a schedule of `slots` splits, and the splits each writes: at
// least one block, which writes `safe`.
struct ScheduleGrid {
  int32_t blocks = 1;
  int32_t slots_per_block = kSlotsPerBlock;
};
inline ScheduleGrid schedule_grid(int32_t slots) {
  ScheduleGrid g;
  g.slots_per_block = std::max<int32_t>(kSlotsPerBlock, static_cast<int32_t>((int64_t{slots} + kMaxScheduleBlocks - 1) /
                                                                               kMaxScheduleBlocks));
  g.blocks = std::max<int32_t>(1, static_cast<int32_t>((int64_t{slots} + g.slots_per_block - 1) / g.slots_per_block));
  return g;
}

inline void require_device_pointer(const char* function, const char* name, const void* p, int64_t words) {
  if (p == nullptr && words > 0) {
    throw StepError(fmt::format("{}: {} is null, and the schedule reads or writes {} words of it", function, name, words));
  }
}

}  // namespace detail

// compute_varctx_schedule on the device: one launch on `stream`, writing
// cta_info (s.words() words) and *safe from the device context_lens.
inline void enqueue_varctx_schedule(const VarctxShape& s, const int32_t* context_lens, int32_t* cta_info,
                                    int32_t* safe, device::Stream stream) {
  constexpr const char* kFn = "compute_varctx_schedule";
  detail::require_device_pointer(kFn, "context_lens", context_lens, s.batches);
  detail::require_device_pointer(kFn, "cta_info", cta_info, s.words());
  detail::require_device_pointer(kFn, "safe", safe, 1);
  const detail::ScheduleGrid grid = detail::schedule_grid(s.slots);
  const VarctxLaunch a{s, context_lens, cta_info, safe, grid.slots_per_block};
  IDXPLAN_KERNEL_LAUNCH(varctx_schedule_kernel<>, grid.blocks, kScheduleThreads, 0, stream)(a);
  device::check(device::rt::last_error(), "varctx_schedule_kernel launch");
}

// compute_prefill_schedule on the device: one launch on `stream`.
inline void enqueue_prefill_schedule(const PrefillShape& s, const int32_t* row_to_batch, const int32_t* local_starts,
                                     const int32_t* local_ends, int32_t* cta_info, int32_t* safe,
                                     device::Stream stream) {
  constexpr const char* kFn = "compute_prefill_schedule";
  detail::require_device_pointer(kFn, "row_to_batch", row_to_batch, s.rows);
  detail::require_device_pointer(kFn, "local_starts", local_starts, s.rows);
  detail::require_device_pointer(kFn, "local_ends", local_ends, s.rows);
  detail::require_device_pointer(kFn, "cta_info", cta_info, s.words());
  detail::require_device_pointer(kFn, "safe", safe, 1);
  const detail::ScheduleGrid grid = detail::schedule_grid(s.ctas);
  const PrefillLaunch a{s, row_to_batch, local_starts, local_ends, cta_info, safe, grid.slots_per_block};
  IDXPLAN_KERNEL_LAUNCH(prefill_schedule_kernel<>, grid.blocks, kScheduleThreads, 0, stream)(a);
  device::check(device::rt::last_error(), "prefill_schedule_kernel launch");
}

}  // namespace idxplan::flydsl_fp4
