// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The fused prepare kernel: one launch a step fills every step buffer from the
// device lengths and the host plan (DESIGN.md section 6). Its bodies are the
// CPU reference's, from plan/buffers.hpp, called unchanged. enqueue() neither
// allocates nor synchronises nor reads device memory, so it can be captured
// in a graph.

#include <algorithm>
#include <cstdint>

#include "idxplan/config.hpp"
#include "idxplan/device/runtime.hpp"
#include "idxplan/device/scan.hpp"
#include "idxplan/device/step_buffers.hpp"
#include "idxplan/plan/buffers.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan::device {

// Threads a block, and the schedule slots a block writes (four a thread).
inline constexpr int kPrepareThreads = 256;
inline constexpr int kSlotsPerBlock = 4 * kPrepareThreads;

namespace detail {

// The decode schedule, by one block: every block computes the step-wide
// stats and the scan of the units' slices itself (a few thousand units at
// most), then writes its own kSlotsPerBlock slots, so the blocks need no
// sync between them. `first` is work + 1 words of dynamic shared memory.
__device__ inline void write_schedule_slots(const StepArgs& a, int32_t* first) {
  using Primitives = BlockPrimitives<kPrepareThreads>;
  __shared__ typename Primitives::TempStorage temp;
  // Shared memory takes no initialised types: the stats as plain words.
  __shared__ int64_t stats_total;
  __shared__ int32_t stats_live, stats_max;
  const ScheduleShape& s = a.schedule;
  const int tid = static_cast<int>(threadIdx.x);

  // Tiles into shared memory, the units striped over the threads so the
  // loads of a warp are adjacent and all in flight together.
  constexpr int kItems = 4;
  constexpr int32_t kUnitsPerPass = kItems * kPrepareThreads;
  TileStats mine{};
  for (int32_t base = 0; base < s.work; base += kUnitsPerPass) {
    int32_t tiles[kItems];
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int32_t u = base + k * kPrepareThreads + tid;
      tiles[k] = u < s.work ? unit_tiles_at(a, u) : 0;
    }
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int32_t u = base + k * kPrepareThreads + tid;
      if (u < s.work) first[u] = tiles[k];
      mine = TileStats{}(mine, TileStats::of(tiles[k]));  // an absent unit adds nothing
    }
  }
  const TileStats all = Primitives::reduce(mine, temp);
  if (tid == 0) {
    stats_total = all.total;
    stats_live = all.live;
    stats_max = all.max_tiles;
  }
  __syncthreads();
  const int32_t per_slice = tiles_per_slice(s, stats_total, stats_live, stats_max);  // first[] is published too

  // Then each thread scans kItems consecutive units, one block scan a pass.
  int32_t carry = 0;
  for (int32_t base = 0; base < s.work; base += kUnitsPerPass) {
    int32_t slices[kItems];
    int32_t own = 0;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int32_t u = base + tid * kItems + k;
      slices[k] = u < s.work ? unit_slices(first[u], per_slice) : 0;
      own += slices[k];
    }
    int32_t sum = 0;
    int32_t running = carry + Primitives::exclusive_sum(own, sum, temp);
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int32_t u = base + tid * kItems + k;
      if (u < s.work) first[u] = running;
      running += slices[k];
    }
    carry += sum;
    __syncthreads();  // temp is reused
  }
  if (tid == 0) first[s.work] = carry;
  __syncthreads();

  const int32_t end = first[s.work];
  for (int32_t k = 0; k < kSlotsPerBlock / kPrepareThreads; ++k) {
    const int32_t slot = static_cast<int32_t>(blockIdx.x) * kSlotsPerBlock + k * kPrepareThreads + tid;
    if (slot >= s.num_ctas) break;
    int4 words = make_int4(0, 0, 0, 0);
    if (slot < end) {
      // The unit whose slices hold the slot: the last u with first[u] <= slot.
      const int32_t u = find_request(first, 0, s.work, slot);
      const Descriptor d = unit_descriptor(s, u, slot - first[u], first[u + 1] - first[u]);
      words = make_int4(d.seq, d.blk, d.slice, d.slices);
    }
    reinterpret_cast<int4*>(a.out.decode_schedule)[slot] = words;
  }
}

// Blocks that write the schedule's slots; the rest of the grid (or all of it,
// when it has no other blocks) writes the per-index buffers.
IDXPLAN_HD int32_t schedule_blocks(const StepArgs& a) {
  return a.schedule.present() && !a.packing_only
             ? (a.schedule.num_ctas + kSlotsPerBlock - 1) / kSlotsPerBlock
             : 0;
}

__global__ void __launch_bounds__(kPrepareThreads) prepare_step_kernel(const StepArgs a) {
  constexpr int kGroupWords = sizeof(ChunkGroup) / sizeof(int32_t);
  __shared__ int32_t group_words[kMaxLaunchGroups * kGroupWords];
  extern __shared__ int32_t first[];  // schedule_shared_bytes()
  const ChunkGroup* groups = reinterpret_cast<const ChunkGroup*>(group_words);
  const int tid = static_cast<int>(threadIdx.x);

  const int32_t slot_blocks = schedule_blocks(a);
  if (static_cast<int32_t>(blockIdx.x) < slot_blocks) {
    write_schedule_slots(a, first);
    if (static_cast<int32_t>(gridDim.x) > slot_blocks) return;  // others do the rest
  }
  const int32_t offset = static_cast<int32_t>(gridDim.x) > slot_blocks ? slot_blocks : 0;
  const int64_t start = int64_t{static_cast<int32_t>(blockIdx.x) - offset} * kPrepareThreads + tid;
  const int64_t stride = int64_t{static_cast<int32_t>(gridDim.x) - offset} * kPrepareThreads;

  // Stage the launch's chunk groups (kernel arguments) in shared memory.
  for (int i = tid; i < a.num_groups * kGroupWords; i += kPrepareThreads) {
    group_words[i] = reinterpret_cast<const int32_t*>(a.groups)[i];
  }
  __syncthreads();
  for (int64_t w = a.word_begin + start; w < a.word_end; w += stride) {
    const auto word = static_cast<int32_t>(w);
    a.out.prefill_query_start_loc[word] = prefill_query_start_loc_at(a, groups, word);
  }
  if (a.packing_only) return;

  for (int64_t r = start; r < a.num_reqs; r += stride) {
    a.out.context_lens[r] = context_len_at(a, static_cast<int32_t>(r));
  }
  for (int64_t i = start; i < a.num_decode_rows; i += stride) {
    const int32_t len = decode_row_len_at(a, static_cast<int32_t>(i));
    a.out.decode_row_lens[i] = len;
    if (a.candidate_block_size > 0) a.out.decode_block_ends[i] = block_end(len, a.candidate_block_size);
  }
  // The decode block table, four consecutive columns a thread, as one
  // 16-byte load and store when both tables' rows are 16-byte aligned.
  const int32_t quads = (a.num_block_cols + 3) / 4;
  const bool vector_rows = a.in.block_table_stride % 4 == 0 && a.out.decode_block_table_stride % 4 == 0 &&
                           reinterpret_cast<uintptr_t>(a.in.block_table) % 16 == 0 &&
                           reinterpret_cast<uintptr_t>(a.out.decode_block_table) % 16 == 0;
  for (int64_t q = start; q < int64_t{a.num_decode_rows} * quads; q += stride) {
    // rows x quads is under 2^31 (make_geometry bounds the table), so this
    // takes the 32-bit division.
    const auto row = static_cast<int32_t>(idxplan::detail::div_nonnegative(q, quads));
    const int32_t col = (static_cast<int32_t>(q) - row * quads) * 4;
    const int32_t r = decode_row_request(a, row);
    int32_t* dst = a.out.decode_block_table + int64_t{row} * a.out.decode_block_table_stride;
    const int32_t* src = a.in.block_table + int64_t{r < 0 ? 0 : r} * a.in.block_table_stride;
    if (vector_rows && col + 4 <= a.num_block_cols) {
      const int4 v = r < 0 ? make_int4(0, 0, 0, 0) : *reinterpret_cast<const int4*>(src + col);
      *reinterpret_cast<int4*>(dst + col) = v;
      continue;
    }
    for (int32_t c = col; c < col + 4 && c < a.num_block_cols; ++c) dst[c] = r < 0 ? 0 : src[c];
  }
  for (int64_t t = a.num_decode_tokens + start; t < a.num_tokens; t += stride) {
    const int32_t end = prefill_row_end_at(a, static_cast<int32_t>(t));
    a.out.prefill_row_ends[t - a.num_decode_tokens] = end;
    if (a.candidate_block_size > 0) {
      a.out.prefill_block_ends[t - a.num_decode_tokens] = block_end(end, a.candidate_block_size);
    }
  }
}

}  // namespace detail

// Dynamic shared memory of a launch: the schedule's scan, work + 1 words.
inline std::size_t schedule_shared_bytes(const StepArgs& a) {
  return a.schedule.present() ? sizeof(int32_t) * (static_cast<std::size_t>(a.schedule.work) + 1) : 0;
}

// Blocks one launch takes: the schedule's, then enough for the per-index
// buffers, up to `max_blocks` (a few a CU of the GPU it runs on).
inline int32_t prepare_grid(const StepArgs& a, int32_t max_blocks) {
  const int64_t t = kPrepareThreads;
  int64_t items = std::max<int64_t>(a.word_end - a.word_begin, 0);
  if (!a.packing_only) {
    const int64_t quads = (a.num_block_cols + 3) / 4;
    items = std::max<int64_t>({items, a.num_reqs, a.num_decode_rows * quads,
                               int64_t{a.num_tokens} - a.num_decode_tokens});
  }
  const int64_t blocks = std::min<int64_t>((items + t - 1) / t, max_blocks);
  return static_cast<int32_t>(std::max<int64_t>(detail::schedule_blocks(a) + blocks, 1));
}

// Enqueues the step's launch on `stream` (a step past kMaxLaunchGroups chunk
// groups adds a packing-only launch per further 128). `inputs` are device
// pointers: the exact seq_lens, query_start_loc and block table.
inline void enqueue(const Geometry& g, const StepPlan& plan, const StepInputs& inputs,
                    const StepBuffers& buffers, Stream stream) {
  const int32_t launches = num_step_launches(plan);
  for (int32_t k = 0; k < launches; ++k) {
    const StepArgs args = make_step_args(g, plan, inputs, buffers.outputs(), k);
    detail::prepare_step_kernel<<<prepare_grid(args, buffers.max_blocks()), kPrepareThreads,
                                  schedule_shared_bytes(args), stream>>>(args);
    check(rt::last_error(), "prepare_step_kernel launch");
  }
}

}  // namespace idxplan::device
