// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The flydsl_fp4 contract's device writer: the schedules of flydsl_fp4.hpp,
// word for word, in one launch with no device allocation and no sync. Each
// block writes its own run of CTAs, so it computes `safe` and the split
// counts before its run itself, from the rows staged in shared memory as
// units: each row its own, its keys, where the rows fit, else the runs of
// rows with equal chunk counts (a prefill's causal rows change count once
// every block_k * C rows), else, for rows of too many runs, none, each pass
// reading the rows again. A sum over the units, a binary search of
// safe_range's few candidates, an exclusive sum of the units' splits, then
// each of the block's CTAs finds its unit. aiter's Triton kernel does the
// same in every program, with a 32-step search over [1, s_max]. Rows are
// read a walk a thread (flydsl_fp4_step.hpp), never a search a row, and at
// most a warp's rows take write_warp_schedule, with no barrier.
//
// Lengths are read as they are: a negative one is 0 chunks (flydsl_fp4.hpp).

#include <cstdint>

#include "idxplan/contracts/flydsl_fp4.hpp"
#include "idxplan/contracts/flydsl_fp4_step.hpp"
#include "idxplan/device/block.hpp"
#include "idxplan/device/runtime.hpp"
#include "idxplan/device/scan.hpp"
#include "idxplan/plan/step_args.hpp"

namespace idxplan::flydsl_fp4 {

// Threads of the standalone launches (idxplan.aiter's); the step's prepare
// launch runs the same writer at its own block size.
inline constexpr int kScheduleThreads = 512;
inline constexpr int kUnitsPerThread = 8;  // a thread's units in a scan
// CTAs a block writes, at least; past kMaxScheduleBlocks blocks' worth, each
// block writes more, so that fewer blocks read the rows.
inline constexpr int32_t kSlotsPerBlock = 512;
inline constexpr int32_t kMaxScheduleBlocks = 32;

// Shared memory of one block of kThreads threads: plain arrays (a
// __shared__ object has no constructor). Rows past kMaxUnits are staged as
// runs, up to kMaxRuns of them.
template <int kThreads>
struct ScheduleShared {
  using Primitives = device::BlockPrimitives<kThreads>;
  static constexpr int kMaxUnits = kThreads * kUnitsPerThread;
  static constexpr int kMaxRuns = kMaxUnits / 2;  // a first row more each
  typename Primitives::TempStorage scan;
  int64_t wide[2][Primitives::kWarps];  // the warps' partial sums
  int32_t narrow[2][Primitives::kWarps];
  int32_t last[kThreads];               // each thread's last chunk count, for the runs
  int32_t ends[kMaxUnits];              // inclusive split sums, unit by unit
  int32_t unit_values[kMaxUnits];       // each row's keys (Units::rows), or each run's chunk count
  int32_t first[kMaxRuns];              // each run's first row
};
inline constexpr int kMaxRuns = ScheduleShared<kScheduleThreads>::kMaxRuns;

// Where the rows are staged.
enum class Units { rows, runs, none };

namespace detail {

using device::lane_value;

// The warp's stats and sums, in every lane: shuffles, no barrier.
template <int kWarp>
__device__ __forceinline__ ChunkStats warp_stats(ChunkStats v) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  for (int m = kWarp / 2; m > 0; m /= 2) {
    v = v + ChunkStats{lane_value(v.chunks, lane ^ m), lane_value(v.nonzero, lane ^ m),
                       lane_value(v.max_chunks, lane ^ m), lane_value(v.splits_at_cap, lane ^ m)};
  }
  return v;
}
template <int kWarp>
__device__ __forceinline__ int64_t warp_sum(int64_t v) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  for (int m = kWarp / 2; m > 0; m /= 2) v += lane_value(v, lane ^ m);
  return v;
}

// The block's stats, in every thread: the warps' by shuffles, then theirs
// through shared memory. Two barriers.
template <int kThreads>
__device__ __forceinline__ ChunkStats block_stats(ChunkStats v, ScheduleShared<kThreads>& sh) {
  using Primitives = typename ScheduleShared<kThreads>::Primitives;
  const int lane = static_cast<int>(threadIdx.x) % Primitives::kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / Primitives::kWarpSize;
  v = warp_stats<Primitives::kWarpSize>(v);
  if (lane == 0) {
    sh.wide[0][warp] = v.chunks;
    sh.wide[1][warp] = v.splits_at_cap;
    sh.narrow[0][warp] = v.nonzero;
    sh.narrow[1][warp] = v.max_chunks;
  }
  __syncthreads();
  ChunkStats all{};
  for (int w = 0; w < Primitives::kWarps; ++w) {
    all = all + ChunkStats{sh.wide[0][w], sh.narrow[0][w], sh.narrow[1][w], sh.wide[1][w]};
  }
  __syncthreads();
  return all;
}

// The block's sum of `v`, in every thread. Two barriers.
template <int kThreads>
__device__ __forceinline__ int64_t block_sum(int64_t v, ScheduleShared<kThreads>& sh) {
  using Primitives = typename ScheduleShared<kThreads>::Primitives;
  const int lane = static_cast<int>(threadIdx.x) % Primitives::kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / Primitives::kWarpSize;
  v = warp_sum<Primitives::kWarpSize>(v);
  if (lane == 0) sh.wide[0][warp] = v;
  __syncthreads();
  int64_t all = 0;
  for (int w = 0; w < Primitives::kWarps; ++w) all += sh.wide[0][w];
  __syncthreads();
  return all;
}

// The first of units [0, n) whose inclusive split sum passes `within`.
template <int kThreads>
__device__ __forceinline__ int32_t unit_of(const ScheduleShared<kThreads>& sh, int32_t n, int32_t within) {
  int32_t a = 0;
  int32_t b = n - 1;
  while (a < b) {
    const int32_t mid = (a + b) / 2;
    if (sh.ends[mid] > within) b = mid; else a = mid + 1;
  }
  return a;
}

// Calls f(i, keys of row i) for the thread's share of rows [0, rows): as
// few consecutive rows as cover them, one walk, so that up to kThreads
// rows are read a row a thread, each with its own reads.
template <int kThreads, class Source, class F>
__device__ __forceinline__ void for_thread_rows(const Source& source, int32_t rows, const F& f) {
  const int32_t per_thread = (rows + kThreads - 1) / kThreads;
  const int32_t first = static_cast<int32_t>(threadIdx.x) * per_thread;
  if (first >= rows) return;
  auto walk = source.walk(first);
  const int32_t end = rows - first < per_thread ? rows : first + per_thread;
  for (int32_t i = first; i < end; ++i) f(i, walk.next());
}

// Stages the rows as units, each row its own (its keys) where they fit,
// else as runs of equal chunk counts, and returns their stats; *units gets how they were staged
// and *count their number.
template <int kThreads, class Source>
__device__ __forceinline__ ChunkStats stage_units(const Source& source, int32_t rows, int32_t block_k, int32_t s_max,
                                                  ScheduleShared<kThreads>& sh, Units* units, int32_t* count) {
  using Shared = ScheduleShared<kThreads>;
  constexpr int kMaxUnits = Shared::kMaxUnits;
  const int t = static_cast<int>(threadIdx.x);
  ChunkStats mine{};
  if (rows <= kMaxUnits) {
    for_thread_rows<kThreads>(source, rows, [&](int32_t i, int32_t keys) {
      sh.unit_values[i] = keys;  // kept for the stores
      mine = mine + ChunkStats::of(chunks_of(keys, block_k), s_max);
    });
    *units = Units::rows;
    *count = rows;
    return block_stats(mine, sh);  // its barriers publish the staged counts
  }
  // Runs: each thread's kUnitsPerThread consecutive rows a tile; a row
  // starts a run where its count differs from the row before's.
  int32_t runs = 0;
  int32_t before = -1;  // the count of the row before the tile's first
  for (int32_t tile = 0; tile < rows; tile += kMaxUnits) {
    // The thread's rows' counts, a walk (not unrolled: its body is large),
    // through its slice of `ends`, which the tile pass alone uses.
    int32_t* const counts = sh.ends + t * kUnitsPerThread;
    const int32_t first = tile + t * kUnitsPerThread;
    auto walk = source.walk(first < rows ? first : rows);  // past the rows: never read
#pragma unroll 1
    for (int k = 0; k < kUnitsPerThread; ++k) {
      counts[k] = first + k < rows ? chunks_of(walk.next(), block_k) : -1;  // -1: past the rows
    }
    int32_t c[kUnitsPerThread];
#pragma unroll
    for (int k = 0; k < kUnitsPerThread; ++k) {
      c[k] = counts[k];
      if (c[k] >= 0) mine = mine + ChunkStats::of(c[k], s_max);
    }
    sh.last[t] = c[kUnitsPerThread - 1];
    __syncthreads();
    int32_t prev = t > 0 ? sh.last[t - 1] : before;
    int32_t flags[kUnitsPerThread];
#pragma unroll
    for (int k = 0; k < kUnitsPerThread; ++k) {
      flags[k] = c[k] >= 0 && c[k] != prev ? 1 : 0;
      prev = c[k];
    }
    int32_t at[kUnitsPerThread];
    int32_t total = 0;
    Shared::Primitives::exclusive_sum(flags, at, total, sh.scan);
#pragma unroll
    for (int k = 0; k < kUnitsPerThread; ++k) {
      const int32_t slot = runs + at[k];
      if (flags[k] != 0 && slot < Shared::kMaxRuns) {
        sh.first[slot] = tile + t * kUnitsPerThread + k;
        sh.unit_values[slot] = c[k];
      }
    }
    before = sh.last[kThreads - 1];
    runs += total;
    __syncthreads();  // before the next tile rewrites last
  }
  *units = runs <= Shared::kMaxRuns ? Units::runs : Units::none;
  *count = runs <= Shared::kMaxRuns ? runs : 0;
  return block_stats(mine, sh);
}

// Rows of unit u: one, or up to the next run's first row.
template <int kThreads>
__device__ __forceinline__ int32_t unit_rows(const ScheduleShared<kThreads>& sh, Units units, int32_t u, int32_t count,
                                             int32_t rows) {
  if (units == Units::rows) return 1;
  return (u + 1 < count ? sh.first[u + 1] : rows) - sh.first[u];
}

// Chunks of each row of unit u.
template <int kThreads>
__device__ __forceinline__ int32_t unit_chunks(const ScheduleShared<kThreads>& sh, Units units, int32_t u,
                                               int32_t block_k) {
  return units == Units::rows ? chunks_of(sh.unit_values[u], block_k) : sh.unit_values[u];
}

// The block's sum of the rows' splits at `s` chunks a CTA, in every thread:
// over the staged units, or over the rows read again, a thread's share of
// them one walk.
template <int kThreads, class Source>
__device__ __forceinline__ int64_t block_splits(const Source& source, Units units, int32_t count, int32_t rows,
                                                int32_t block_k, int32_t s, ScheduleShared<kThreads>& sh) {
  const int t = static_cast<int>(threadIdx.x);
  int64_t n = 0;
  if (units != Units::none) {
    for (int32_t u = t; u < count; u += kThreads) {
      n += int64_t{unit_rows(sh, units, u, count, rows)} * splits_of(unit_chunks(sh, units, u, block_k), s);
    }
  } else {
    for_thread_rows<kThreads>(source, rows, [&](int32_t, int32_t keys) { n += splits_of(chunks_of(keys, block_k), s); });
  }
  return block_sum(n, sh);
}

// The schedule of at most a warp's rows, a row a lane: every warp computes
// it whole with shuffles, with no barrier and no shared memory, and writes
// its share of the block's slots. The rows' keys are read once, and the
// stores take them from their row's lane. A decode step of sglang's few
// rows is one read and the stores, where the block's path waits on about
// ten barriers.
template <int kThreads, class Source, class Store>
__device__ __forceinline__ void write_warp_schedule(const Source& source, int32_t rows, int32_t block_k,
                                                    int32_t slots, int32_t s_max, int32_t slot_begin,
                                                    int32_t slot_end, const Store& store, int32_t* safe) {
  constexpr int kWarp = ScheduleShared<kThreads>::Primitives::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int32_t keys = lane < rows ? source.keys(lane) : 0;
  const int32_t chunks = lane < rows ? chunks_of(keys, block_k) : 0;  // a lane past the rows has none
  SafeRange range = safe_range(warp_stats<kWarp>(ChunkStats::of(chunks, s_max)), slots, s_max);
  while (range.lo < range.hi) {  // the same in every lane
    const int32_t mid = range.lo + (range.hi - range.lo) / 2;
    if (warp_sum<kWarp>(splits_of(chunks, mid)) <= slots) range.hi = mid; else range.lo = mid + 1;
  }
  const int32_t chunks_a_cta = range.lo;
  if (safe != nullptr && threadIdx.x == 0) *safe = chunks_a_cta;

  // The rows' inclusive split sums, lane by lane; the lanes past the rows
  // hold the total.
  int32_t ends = splits_of(chunks, chunks_a_cta);
  for (int d = 1; d < kWarp; d *= 2) {
    const int32_t before = lane_value(ends, lane >= d ? lane - d : lane);
    if (lane >= d) ends += before;
  }
  const int32_t total = lane_value(ends, kWarp - 1);
  // The warp's slots, a lane each: the loop's bounds are the warp's, so
  // that every lane takes part in each shuffle.
  for (int32_t base = slot_begin + warp * kWarp; base < slot_end; base += kThreads) {
    const int32_t slot = base + lane;
    // The lanes whose rows' splits end at or before the slot, up to
    // kWarp - 1: the slot's row, where slot < total (ends[kWarp - 1]).
    int row = 0;
    for (int step = kWarp / 2; step > 0; step /= 2) {
      if (lane_value(ends, row + step - 1) <= slot) row += step;
    }
    const int32_t start = lane_value(ends, row > 0 ? row - 1 : 0);
    const int32_t row_chunks = lane_value(chunks, row);
    const int32_t row_keys = lane_value(keys, row);
    if (slot < slot_end) {
      if (slot < total) {
        store(slot, split_of(row, slot - (row > 0 ? start : 0), row_chunks, chunks_a_cta), row_keys);
      } else {
        store(slot, Split{}, 0);
      }
    }
  }
}

}  // namespace detail

// Writes CTAs [slot_begin, slot_end) of the schedule of `rows` rows whose
// keys `source.keys(i)` gives, for a grid of `slots` splits (flydsl_fp4.hpp):
// store(slot, split, keys of the split's row) for each, idle ones with
// Split{} and 0. `*safe`, where safe
// is not null, gets `safe`. Every thread of the block calls it.
template <int kThreads, class Source, class Store>
__device__ __forceinline__ void write_schedule(const Source& source, int32_t rows, int32_t block_k, int32_t slots,
                                               int32_t s_max, int32_t slot_begin, int32_t slot_end, const Store& store,
                                               int32_t* safe, ScheduleShared<kThreads>& sh) {
  using Primitives = typename ScheduleShared<kThreads>::Primitives;
  constexpr int kMaxUnits = ScheduleShared<kThreads>::kMaxUnits;
  if (rows <= Primitives::kWarpSize) {
    detail::write_warp_schedule<kThreads>(source, rows, block_k, slots, s_max, slot_begin, slot_end, store, safe);
    return;
  }
  const int t = static_cast<int>(threadIdx.x);
  Units units = Units::none;
  int32_t count = 0;
  const ChunkStats stats = detail::stage_units(source, rows, block_k, s_max, sh, &units, &count);
  const bool staged = units != Units::none;

  SafeRange range = safe_range(stats, slots, s_max);
  while (range.lo < range.hi) {  // the same in every thread
    const int32_t mid = range.lo + (range.hi - range.lo) / 2;
    if (detail::block_splits(source, units, count, rows, block_k, mid, sh) <= slots) {
      range.hi = mid;
    } else {
      range.lo = mid + 1;
    }
  }
  const int32_t chunks_a_cta = range.lo;
  if (safe != nullptr && t == 0) *safe = chunks_a_cta;

  // The units' (or a tile of rows') splits, summed; then each CTA finds its
  // unit. `before`: the splits before the current tile; once the rows are
  // done, all of them.
  int32_t before = 0;
  const int32_t tiles = staged ? 1 : rows;  // staged units are one tile
  for (int32_t first = 0; first < tiles && before < slot_end; first += kMaxUnits) {
    // Each unit's inclusive sum within the thread's, then, past the scan,
    // within the tile.
    int32_t sum = 0;
    const int32_t mine = first + t * kUnitsPerThread;  // the thread's first unit
    int32_t* const ends = sh.ends + t * kUnitsPerThread;
    if (staged) {
#pragma unroll
      for (int k = 0; k < kUnitsPerThread; ++k) {
        const int32_t u = mine + k;
        sum += u < count ? detail::unit_rows(sh, units, u, count, rows) *
                               splits_of(detail::unit_chunks(sh, units, u, block_k), chunks_a_cta)
                         : 0;
        ends[k] = sum;
      }
    } else {
      auto walk = source.walk(mine < rows ? mine : rows);
#pragma unroll 1
      for (int k = 0; k < kUnitsPerThread; ++k) {
        sum += mine + k < rows ? splits_of(chunks_of(walk.next(), block_k), chunks_a_cta) : 0;
        ends[k] = sum;
      }
    }
    int32_t tile = 0;
    int32_t offset[1];
    int32_t sums[1] = {sum};
    Primitives::exclusive_sum(sums, offset, tile, sh.scan);
#pragma unroll
    for (int k = 0; k < kUnitsPerThread; ++k) ends[k] += offset[0];
    __syncthreads();
    const int32_t in_tile = staged ? count : (rows - first < kMaxUnits ? rows - first : kMaxUnits);
    const int32_t lo = before > slot_begin ? before : slot_begin;
    const int32_t hi = before + tile < slot_end ? before + tile : slot_end;
    for (int32_t slot = lo + t; slot < hi; slot += kThreads) {
      const int32_t u = detail::unit_of(sh, in_tile, slot - before);
      const int32_t within = slot - before - (u > 0 ? sh.ends[u - 1] : 0);
      if (staged) {
        const int32_t c = detail::unit_chunks(sh, units, u, block_k);
        const int32_t per_row = splits_of(c, chunks_a_cta);
        const int32_t row = units == Units::rows ? u : sh.first[u] + within / per_row;
        const int32_t keys = units == Units::rows ? sh.unit_values[u] : source.keys(row);
        store(slot, split_of(row, within % per_row, c, chunks_a_cta), keys);
      } else {
        const int32_t row = first + u;
        const int32_t keys = source.keys(row);
        store(slot, split_of(row, within, chunks_of(keys, block_k), chunks_a_cta), keys);
      }
    }
    before += tile;
    __syncthreads();  // the next tile rewrites ends
  }
  for (int32_t slot = (before > slot_begin ? before : slot_begin) + t; slot < slot_end; slot += kThreads) {
    store(slot, Split{}, 0);
  }
}

// The rows of an engine's array: their keys as given.
struct ArrayRows {
  const int32_t* keys_;
  __device__ int32_t keys(int32_t i) const { return keys_[i]; }
  struct Walk {
    const int32_t* at;
    __device__ int32_t next() { return *at++; }
  };
  __device__ Walk walk(int32_t i) const { return Walk{keys_ + i}; }
};

// The stores take the split's row's keys, as the source gave them (its
// context, its local end).
struct ArrayDecodeStore {
  int32_t* cta_info;
  int32_t next_n;
  __device__ void operator()(int32_t slot, Split split, int32_t keys) const {
    store_decode_slot(cta_info, slot, next_n, split, keys);
  }
};

struct ArrayPrefillStore {
  int32_t* cta_info;
  const int32_t* row_to_batch;
  const int32_t* local_starts;
  __device__ void operator()(int32_t slot, Split split, int32_t keys) const {
    const int32_t r = split.row >= 0 ? split.row : 0;
    const bool live = split.row >= 0;
    store_prefill_slot(cta_info, slot, split, live ? row_to_batch[r] : 0, live ? local_starts[r] : 0, keys);
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
__global__ void IDXPLAN_LAUNCH_BOUNDS(kScheduleThreads, 1) varctx_schedule_kernel(VarctxLaunch a) {
  __shared__ ScheduleShared<kScheduleThreads> sh;
  const int32_t begin = static_cast<int32_t>(blockIdx.x) * a.slots_per_block;
  const int32_t end = a.shape.slots - begin < a.slots_per_block ? a.shape.slots : begin + a.slots_per_block;
  write_schedule(ArrayRows{a.context_lens}, a.shape.batches, a.shape.block_k, a.shape.slots, a.shape.s_max, begin,
                 end, ArrayDecodeStore{a.cta_info, a.shape.next_n}, blockIdx.x == 0 ? a.safe : nullptr, sh);
}

template <int = 0>
__global__ void IDXPLAN_LAUNCH_BOUNDS(kScheduleThreads, 1) prefill_schedule_kernel(PrefillLaunch a) {
  __shared__ ScheduleShared<kScheduleThreads> sh;
  const int32_t begin = static_cast<int32_t>(blockIdx.x) * a.slots_per_block;
  const int32_t end = a.shape.ctas - begin < a.slots_per_block ? a.shape.ctas : begin + a.slots_per_block;
  write_schedule(ArrayRows{a.local_ends}, a.shape.rows, a.shape.block_k, a.shape.ctas, a.shape.s_max, begin, end,
                 ArrayPrefillStore{a.cta_info, a.row_to_batch, a.local_starts},
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
  IDXPLAN_KERNEL_LAUNCH(varctx_schedule_kernel<>, static_cast<uint32_t>(grid.blocks), kScheduleThreads, 0, stream)(a);
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
  IDXPLAN_KERNEL_LAUNCH(prefill_schedule_kernel<>, static_cast<uint32_t>(grid.blocks), kScheduleThreads, 0,
                        stream)(a);
  device::check(device::rt::last_error(), "prefill_schedule_kernel launch");
}

}  // namespace idxplan::flydsl_fp4

// The step's grids: the same writer in the schedule part of the prepare
// launch (device/prepare_step.hpp), at its block size, over the launch's
// decode rows and prefill chunks (flydsl_fp4_step.hpp).
namespace idxplan::device {

// The grids take the launch's schedule part: kFp4SlotsPerBlock CTAs of the
// decode grid a block (in the step's first launch), then as many of each
// of the launch's chunks'.
inline constexpr int32_t kFp4SlotsPerBlock = 2 * kPrepareThreads;

IDXPLAN_HD int32_t fp4_decode_blocks(const StepArgs& a) {
  if (!a.writes_decode || a.fp4_decode_ctas <= 0) return 0;
  const int32_t slots = a.fp4_decode_ctas / flydsl_fp4::decode_next_n(a);
  return (slots + kFp4SlotsPerBlock - 1) / kFp4SlotsPerBlock;
}
IDXPLAN_HD int32_t fp4_chunk_blocks(int32_t ctas) { return (ctas + kFp4SlotsPerBlock - 1) / kFp4SlotsPerBlock; }

inline int32_t fp4_grid_blocks(const StepArgs& a) {
  int32_t blocks = fp4_decode_blocks(a);
  for (auto c = flydsl_fp4::first_chunk(a, a.groups); c.group >= 0; c = flydsl_fp4::next_chunk(a, a.groups, c)) {
    blocks += fp4_chunk_blocks(c.ctas);
  }
  return blocks;
}

namespace detail {

// Block `b` of flydsl_fp4's grids (fp4_grid_blocks): the decode grid's
// CTAs [b * kFp4SlotsPerBlock, +kFp4SlotsPerBlock), or past them, the one
// chunk's whose blocks hold it. The chunk groups are staged first, as the
// chunks' rows search them.
__device__ __forceinline__ void write_fp4_grids(const StepArgs& a, int32_t b, GroupWords& group_words) {
  __shared__ flydsl_fp4::ScheduleShared<kPrepareThreads> sh;
  const int32_t decode = fp4_decode_blocks(a);
  if (b < decode) {
    const int32_t slots = a.fp4_decode_ctas / flydsl_fp4::decode_next_n(a);
    const int32_t begin = b * kFp4SlotsPerBlock;
    const int32_t end = slots - begin < kFp4SlotsPerBlock ? slots : begin + kFp4SlotsPerBlock;
    flydsl_fp4::write_schedule(flydsl_fp4::DecodeRows{&a}, flydsl_fp4::decode_batches(a), flydsl_fp4::kBlockK, slots,
                               a.fp4_decode_s_max, begin, end, flydsl_fp4::DecodeStore{&a},
                               b == 0 ? a.out.schedule_safe.data : nullptr, sh);
    return;
  }
  const ChunkGroup* groups = stage_groups(a, group_words);
  int32_t block = b - decode;  // within the chunks' blocks, then within its chunk's
  flydsl_fp4::LaunchChunk chunk = flydsl_fp4::first_chunk(a, groups);
  while (block >= fp4_chunk_blocks(chunk.ctas)) {  // the grid's blocks end with the last chunk's
    block -= fp4_chunk_blocks(chunk.ctas);
    chunk = flydsl_fp4::next_chunk(a, groups, chunk);
  }
  const int32_t begin = block * kFp4SlotsPerBlock;
  const int32_t end = chunk.ctas - begin < kFp4SlotsPerBlock ? chunk.ctas : begin + kFp4SlotsPerBlock;
  flydsl_fp4::write_schedule(
      flydsl_fp4::ChunkRows{&a, groups, chunk.token_start}, chunk.token_end - chunk.token_start, flydsl_fp4::kBlockK,
      chunk.ctas, chunk.s_max, begin, end,
      flydsl_fp4::ChunkStore{&a, groups, groups + chunk.group, chunk.token_start, a.out.prefill_schedule.data + chunk.words},
      block == 0 ? a.out.schedule_safe.data + 1 + chunk.index : nullptr, sh);
}

}  // namespace detail

}  // namespace idxplan::device
