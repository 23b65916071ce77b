// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The fused prepare kernel: one launch a step fills every step buffer from the
// device lengths and the host plan (docs/design.md section 6). Its formulas
// are the CPU reference's (plan/buffers.hpp, plan/rows.hpp), called
// unchanged; where the reference walks a flattened step's decode rows, the
// kernel walks its decode requests, each writing its own rows, and the GPU
// tests check that the two agree word for word. enqueue() neither
// allocates nor synchronises nor reads device memory.
//
// Graphs: the step's sizes travel in the kernel's arguments, so a captured
// enqueue() would replay the captured step's sizes on every later step. The
// supported pattern is the prepare launch enqueued eagerly every step, on
// the engine's stream, before the engine replays its graphs of consumer
// launches: those read the engine's fixed buffers, and their grids depend on
// the step's shape alone (docs/integration.md).
//
// The launch is short and latency-bound: a dependent load from device memory
// costs about as much as the launch itself. So the grid is cut into parts,
// each a run of blocks that writes one kind of buffer, and every thread has
// one chain of loads then stores; the schedule's blocks issue all their
// loads before they compute anything.
//
// The schedule part is the contract's (contracts/): gluon_mxfp4's writer
// (gluon_mxfp4_device.hpp) in prepare_step_kernel and its variants,
// flydsl_fp4's (flydsl_fp4_device.hpp) in prepare_step_fp4_kernel; the
// other parts are every contract's. In prepare_step_metadata_kernel the
// decode rows' part's first block then writes deepgemm_sm90's metadata
// (deepgemm_sm90_device.hpp); on a flattened step that part is one block,
// and the metadata reads the rows it wrote.

#include <algorithm>
#include <cstdint>

#include "idxplan/config.hpp"
#include "idxplan/contracts/deepgemm_sm90_device.hpp"
#include "idxplan/contracts/flydsl_fp4_device.hpp"
#include "idxplan/contracts/flydsl_fp4_step.hpp"
#include "idxplan/contracts/gluon_mxfp4_device.hpp"
#include "idxplan/device/block.hpp"
#include "idxplan/device/runtime.hpp"
#include "idxplan/device/scan.hpp"
#include "idxplan/plan/buffers.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan::device {

// The parts of a launch, in grid order.
enum class Part : int32_t {
  schedule,         // the contract's: gluon_mxfp4's decode_schedule or flydsl_fp4's grids
  packed_offsets,   // prefill_query_start_loc
  contexts,         // context_lens of the launch's requests
  decode_rows,      // decode_row_lens, decode_block_ends, a request a thread; then, in its
                    // first block, deepgemm_sm90's metadata
  decode_table,     // decode_block_table, a request's four columns a thread
  prefill_rows,     // prefill_row_ends, prefill_block_ends of the launch's tokens
};
inline constexpr int kParts = 6;

// How one launch's blocks divide into parts: part p is the blocks
// [end[p - 1], end[p]). `units_per_thread` is the schedule's (a power of
// two), or 0 where the warps compute it (detail::small_schedule), then at
// `lane_units` units a lane (1, or kMaxLaneUnits past a warp's units): the
// kernel built for each.
struct LaunchGrid {
  int32_t end[kParts] = {};
  int32_t units_per_thread = 1;
  int32_t lane_units = 0;

  IDXPLAN_HD int32_t blocks() const { return end[kParts - 1] > 0 ? end[kParts - 1] : 1; }
  IDXPLAN_HD int32_t first(int p) const { return p == 0 ? 0 : end[p - 1]; }
};

// Each decode request, then each graph padding row past the real ones: the
// items of decode_table (each request's quads go to each of its rows), and
// of decode_rows on a flattened step.
IDXPLAN_HD int64_t decode_table_rows(const StepArgs& a) {
  return int64_t{a.num_decodes} + a.num_decode_rows - a.num_real_decode_rows;
}

// The items of decode_rows: a native step's rows, else decode_table_rows.
IDXPLAN_HD int64_t decode_row_items(const StepArgs& a) {
  return a.native_next_n > 0 ? int64_t{a.num_decode_rows} : decode_table_rows(a);
}

// Four consecutive block-table columns (a quad) a thread of decode_table,
// whose items are each decode request's quads, then each padding row's.
IDXPLAN_HD int32_t decode_table_quads(const StepArgs& a) {
  return (a.num_block_cols + 3) / 4;
}
IDXPLAN_HD int64_t decode_table_items(const StepArgs& a) {
  return decode_table_rows(a) * decode_table_quads(a);
}

// The grid of launch `a`: each part gets a block per kPrepareThreads items
// (per kSlotsPerBlock slots for the schedule, kSmallSlotsPerBlock for the
// warps'), up to `max_blocks`, a few a CU of the GPU it runs on.
inline LaunchGrid launch_grid(const StepArgs& a, int32_t max_blocks) {
  using idxplan::detail::ceil_div;
  const auto blocks = [max_blocks](int64_t items, int64_t per_block) {
    return static_cast<int32_t>(std::min<int64_t>(ceil_div(std::max<int64_t>(items, 0), per_block), max_blocks));
  };
  const bool decode = a.writes_decode;
  const bool schedule = decode && a.schedule.present();
  const bool small = schedule && detail::small_schedule(a.schedule);
  int32_t count[kParts] = {
      schedule ? static_cast<int32_t>(ceil_div(a.schedule.num_ctas, small ? detail::kSmallSlotsPerBlock
                                                                           : kSlotsPerBlock))
               : fp4_grid_blocks(a),
      blocks(int64_t{a.word_end} - a.word_begin, kPrepareThreads),
      blocks(int64_t{a.request_end} - a.request_begin, kPrepareThreads),
      // One block where deepgemm_sm90's metadata reads back the rows it writes;
      // at least one where the metadata is written.
      decode ? (deepgemm_sm90::metadata_reads_rows(a)
                    ? 1
                    : std::max(deepgemm_sm90::step_writes_metadata(a) ? 1 : 0,
                               blocks(decode_row_items(a), kPrepareThreads)))
             : 0,
      decode ? blocks(decode_table_items(a), kPrepareThreads) : 0,
      blocks(int64_t{a.token_end} - a.token_begin, kPrepareThreads),
  };
  LaunchGrid g;
  int32_t total = 0;
  for (int p = 0; p < kParts; ++p) g.end[p] = total += count[p];
  if (small) {
    g.units_per_thread = 0;
    g.lane_units = a.schedule.work <= detail::Primitives::kWarpSize ? 1 : kMaxLaneUnits;
  } else if (schedule) {
    const int64_t per_thread = ceil_div(a.schedule.work, kPrepareThreads);
    while (g.units_per_thread < per_thread) g.units_per_thread *= 2;
  }
  return g;
}

namespace detail {

// Decode request r's rows [begin, end) and its query length. The device
// query_start_loc is the step's (docs/design.md 6), and the bounds keep a
// broken one's rows within the step's real rows, so within the buffers.
struct DecodeRows {
  int32_t first = 0;      // the request's first row, as query_start_loc says
  int32_t query_len = 0;
  int32_t begin = 0;
  int32_t end = 0;
};
__device__ inline DecodeRows decode_rows_of(const StepArgs& a, int32_t r) {
  DecodeRows rows;
  rows.first = a.native_next_n > 0 ? r * a.native_next_n : a.in.query_start_loc[r];
  rows.query_len = a.native_next_n > 0 ? a.native_next_n : a.in.query_start_loc[r + 1] - rows.first;
  const int32_t last = rows.first + rows.query_len;
  rows.begin = rows.first > 0 ? rows.first : 0;
  rows.end = last < a.num_real_decode_rows ? last : a.num_real_decode_rows;
  return rows;
}

// decode_row_lens and decode_block_ends. A native step's items are its
// rows, whose request is the row over next_n (graph padding rows past the
// real ones are zeros): on the H200 a row a thread rather than a request a
// thread took the launch without its schedule from 1.43 to 1.35 us at four
// MTP sequences (100 steps in a graph). Otherwise items [0, num_decodes)
// are the requests, each writing its own rows, so no thread searches
// query_start_loc for a row's request; the items after them are the graph
// padding rows.
__device__ inline void write_decode_rows(const StepArgs& a, int64_t start, int64_t stride) {
  const int64_t count = decode_row_items(a);
  if (a.native_next_n > 0) {
    for (int64_t i = start; i < count; i += stride) {
      const auto row = static_cast<int32_t>(i);
      const int32_t len = decode_row_len_at(a, row);
      a.out.decode_row_lens.data[row] = len;
      if (a.candidate_block_size > 0) a.out.decode_block_ends.data[row] = block_end(len, a.by_candidate_block);
    }
    return;
  }
  for (int64_t i = start; i < count; i += stride) {
    const auto item = static_cast<int32_t>(i);
    const bool request = item < a.num_decodes;
    DecodeRows rows;
    int32_t seq_len = 0;
    if (request) {
      rows = decode_rows_of(a, item);
      seq_len = decode_seq_len_at(a, item);
    } else {
      rows.begin = a.num_real_decode_rows + item - a.num_decodes;
      rows.end = rows.begin + 1;
    }
    for (int32_t row = rows.begin; row < rows.end; ++row) {
      const int32_t len =
          request ? decode_row_len(seq_len, rows.query_len, row - rows.first, a.by_compress_ratio) : 0;
      a.out.decode_row_lens.data[row] = len;
      if (a.candidate_block_size > 0) a.out.decode_block_ends.data[row] = block_end(len, a.by_candidate_block);
    }
  }
}

// The decode block table, four consecutive columns (a quad) a thread, as
// one 16-byte load and store when both tables' rows are 16-byte aligned.
// Items [0, requests) are request r's quads: a thread loads the quad of the
// engine's row r once and stores it to each of the request's rows, so no
// thread searches for a row's request. The items after them zero the graph
// padding rows' quads. The table is most of a big step's bytes, so each
// thread has kInFlight items' loads in flight before it stores any.
__device__ inline void copy_decode_table(const StepArgs& a, int64_t start, int64_t stride) {
  constexpr int kInFlight = 4;
  const int32_t quads = decode_table_quads(a);
  const bool vector_rows = a.in.block_table_stride % 4 == 0 && a.out.decode_block_table_stride % 4 == 0 &&
                           reinterpret_cast<uintptr_t>(a.in.block_table) % 16 == 0 &&
                           reinterpret_cast<uintptr_t>(a.out.decode_block_table.data) % 16 == 0;
  const int64_t requests = int64_t{a.num_decodes} * quads;
  const int64_t count = decode_table_items(a);
  for (int64_t q0 = start; q0 < count; q0 += kInFlight * stride) {
    int32_t first_row[kInFlight], end_row[kInFlight], col[kInFlight];
    int4 v[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      const int64_t q = q0 + k * stride;
      const bool request = q < requests;
      // r: the request, or the padding row past the real rows. 64-bit only
      // when the step's requests hold 2^31 quads (many without rows).
      const int64_t item = request ? q : q - requests;
      const int32_t r = item < 0x7FFFFFFF ? idxplan::detail::div32(static_cast<int32_t>(item), quads)
                                          : static_cast<int32_t>(item / quads);
      col[k] = static_cast<int32_t>(item - int64_t{r} * quads) * 4;
      if (!request) {
        first_row[k] = q < count ? a.num_real_decode_rows + r : 0;
        end_row[k] = q < count ? first_row[k] + 1 : 0;
        v[k] = make_int4(0, 0, 0, 0);
        continue;
      }
      const DecodeRows rows = decode_rows_of(a, r);
      first_row[k] = rows.begin;
      end_row[k] = rows.end;
      const int32_t* src = a.in.block_table + int64_t{r} * a.in.block_table_stride + col[k];
      if (vector_rows && col[k] + 4 <= a.num_block_cols) {
        v[k] = *reinterpret_cast<const int4*>(src);
      } else {
        const int32_t n = a.num_block_cols - col[k];
        v[k] = make_int4(src[0], n > 1 ? src[1] : 0, n > 2 ? src[2] : 0, n > 3 ? src[3] : 0);
      }
    }
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      const int32_t n = a.num_block_cols - col[k];
      for (int32_t row = first_row[k]; row < end_row[k]; ++row) {
        int32_t* dst = a.out.decode_block_table.data + int64_t{row} * a.out.decode_block_table_stride + col[k];
        if (vector_rows && n >= 4) {
          *reinterpret_cast<int4*>(dst) = v[k];
          continue;
        }
        dst[0] = v[k].x;
        if (n > 1) dst[1] = v[k].y;
        if (n > 2) dst[2] = v[k].z;
        if (n > 3) dst[3] = v[k].w;
      }
    }
  }
}

// One block of the step's launch: the schedule's blocks first, the
// blocks' schedule at kItems units a thread or, with kItems = 0, the
// warps' at kLaneUnits units a lane; then the other parts'.
template <int kItems, int kLaneUnits, Contract kContract = Contract::gluon_mxfp4>
__device__ __forceinline__ void prepare_step(const LaunchGrid& grid, const StepArgs& a) {
  __shared__ GroupWords group_words;
  int32_t* const first = dynamic_shared_words();  // shared_bytes(): the schedule's scan
  const int tid = static_cast<int>(threadIdx.x);
  const auto b = static_cast<int32_t>(blockIdx.x);

  // The schedule's blocks, which hold the launch's longest chain, come first
  // in the grid and start on it at once, with no search for their part: on
  // the H200 that took decode_4's kernel from 1.77 to 1.70 us (100 steps in
  // a graph), and the larger steps' by 0.03-0.12 us.
  if (b < grid.end[0]) {
    if constexpr (kContract == Contract::flydsl_fp4) {
      write_fp4_grids(a, b, group_words);
    } else if constexpr (kItems == 0) {
      if (tid < detail::kSmallThreads) {
        write_small_schedule_slots<kLaneUnits>(a, b);
      } else if constexpr (kIdleWarpsFetchArguments) {
        fetch_late_arguments(a);
      }
    } else {
      write_schedule_slots<kItems>(a, b, first);
    }
    return;
  }

  // The first of the other parts whose blocks end past b. Constant indices
  // only, so the grid stays in kernel arguments rather than a copy in local
  // memory.
  int part = kParts;
  int32_t part_first = 0;
  int32_t part_end = 0;
#pragma unroll
  for (int p = kParts - 1; p >= 1; --p) {
    if (b < grid.end[p]) {
      part = p;
      part_first = grid.first(p);
      part_end = grid.end[p];
    }
  }
  if (part == kParts) return;  // the one block of a launch with nothing to write
  const int32_t block = b - part_first;
  const int64_t start = int64_t{block} * kPrepareThreads + tid;
  const int64_t stride = int64_t{part_end - part_first} * kPrepareThreads;

  // The parts that search the launch's chunk groups (kernel arguments) read
  // them staged in shared memory.
  const ChunkGroup* groups = reinterpret_cast<const ChunkGroup*>(group_words);
  const auto p = static_cast<Part>(part);
  if (p == Part::packed_offsets || p == Part::contexts || p == Part::prefill_rows) stage_groups(a, group_words);

  switch (p) {
    case Part::schedule:  // its blocks returned above
      break;
    case Part::packed_offsets:
      for (int64_t w = a.word_begin + start; w < a.word_end; w += stride) {
        const auto word = static_cast<int32_t>(w);
        a.out.prefill_query_start_loc.data[word] = prefill_query_start_loc_at(a, groups, word);
      }
      break;
    case Part::contexts:
      for (int64_t r = a.request_begin + start; r < a.request_end; r += stride) {
        a.out.context_lens.data[r] = context_len_at(a, groups, static_cast<int32_t>(r));
      }
      break;
    case Part::decode_rows:
      write_decode_rows(a, start, stride);
      // deepgemm_sm90's metadata, by the part's first block (the only one
      // where it reads the rows back).
      if constexpr (kContract == Contract::deepgemm_sm90) {
        if (block == 0) write_step_metadata(a);
      }
      break;
    case Part::decode_table:
      copy_decode_table(a, start, stride);
      break;
    case Part::prefill_rows:
      for (int64_t t = a.token_begin + start; t < a.token_end; t += stride) {
        const int32_t end = prefill_row_end_at(a, groups, static_cast<int32_t>(t));
        a.out.prefill_row_ends.data[t - a.num_decode_tokens] = end;
        if (a.candidate_block_size > 0) {
          a.out.prefill_block_ends.data[t - a.num_decode_tokens] = block_end(end, a.by_candidate_block);
        }
      }
      break;
  }
}

// The step's kernel, built for the blocks' schedule at kItems units a
// thread, or with kItems = 0 for the warps' schedule at a unit a lane;
// prepare_step_lanes_kernel runs the warps' at kLaneUnits units a lane. Each
// a kernel of its own: on the H200, the blocks' path slowed by 0.05 us with
// the warps' in the same kernel, and the warps' at a unit a lane by as
// much with two units a lane beside it (100 steps in a graph).
// On NVIDIA, ptxas once held the 32-units variant to 128 registers and
// spilled 12 bytes (scripts/device-resources), so it asked for one block an
// SM, and took 128 with no spill once native_unit_tiles lost two steps.
// With block ends as a multiply it took 130, which halved the warps an SM
// holds; two blocks an SM hold it to 125-126, with no spill. The others ask for
// nothing (0: nvcc then emits no minimum), which leaves their registers as
// they were.
//
// The grid comes first among the arguments, in the constant-cache line of
// the lengths' pointer and the schedule's fields (StepArgs) rather than
// 4 KB past them: every block reads it first. On the H200 that took the
// launch without its schedule from 1.35 to 1.25 us at four MTP sequences.
template <int kItems>
__global__ void IDXPLAN_LAUNCH_BOUNDS(kPrepareThreads, kItems >= 32 ? 2 : 0)
    prepare_step_kernel(const LaunchGrid grid, const StepArgs a) {
  prepare_step<kItems, 1>(grid, a);
}
template <int kLaneUnits>
__global__ void IDXPLAN_LAUNCH_BOUNDS(kPrepareThreads, 0)
    prepare_step_lanes_kernel(const LaunchGrid grid, const StepArgs a) {
  static_assert(kLaneUnits > 1, "a unit a lane is prepare_step_kernel<0>'s");
  prepare_step<0, kLaneUnits>(grid, a);
}
// flydsl_fp4's: its grids in the schedule's part, the Gluon kernels untouched.
template <int = 0>
__global__ void IDXPLAN_LAUNCH_BOUNDS(kPrepareThreads, 0)
    prepare_step_fp4_kernel(const LaunchGrid grid, const StepArgs a) {
  prepare_step<1, 1, Contract::flydsl_fp4>(grid, a);
}
// deepgemm_sm90's: its metadata in the schedule's part (one block).
template <int = 0>
__global__ void IDXPLAN_LAUNCH_BOUNDS(kPrepareThreads, 0)
    prepare_step_metadata_kernel(const LaunchGrid grid, const StepArgs a) {
  prepare_step<1, 1, Contract::deepgemm_sm90>(grid, a);
}

// The launch's key bounds, when asked for (StepOutputs::prefill_key_starts),
// a block a chunk group: the group's requests a tile of kPrepareThreads at a
// time, each tile's contexts scanned into shared memory after the tiles
// before it, then the tile's rows written, each finding its request among
// the tile's. A kernel of its own, launched after the step's, so that the
// step's kernel keeps its registers (in it, ptxas spilled the schedule's
// variants). A template with no parameter a caller sets, for its linkage,
// as rocPRIM's and CUB's kernels are templates: a kernel in a header that is
// neither a template nor static is defined again in every translation unit
// that includes it, and an engine with two such sources would not link
// (tests/device's test_prepare_step links four).
template <int = 0>
__global__ void IDXPLAN_LAUNCH_BOUNDS(kPrepareThreads, 0) key_bounds_kernel(const StepArgs a) {
  __shared__ GroupWords group_words;
  __shared__ typename Primitives::TempStorage temp;
  __shared__ int32_t starts[kPrepareThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const ChunkGroup* groups = stage_groups(a, group_words);
  const ChunkGroup& g = groups[blockIdx.x];
  const int32_t last = g.first_request + g.num_reqs;
  int32_t carry = 0;  // the contexts of the tiles before
  for (int32_t r0 = g.first_request; r0 < last; r0 += kPrepareThreads) {
    const int32_t r = r0 + tid;
    int32_t before = 0;
    int32_t total = 0;
    Primitives::exclusive_sum(r < last ? context_len_at(a, groups, r) : 0, before, total, temp);
    starts[tid] = carry + before;
    __syncthreads();
    const int32_t tile_end = r0 + kPrepareThreads < last ? r0 + kPrepareThreads : last;
    const int32_t lo = group_rows_of(a, g, r0).begin;
    const int32_t hi = group_rows_of(a, g, tile_end - 1).end;
    for (int32_t t = lo + tid; t < hi; t += kPrepareThreads) {
      const int32_t owner = find_request(a.in.query_start_loc, r0, tile_end, t);
      store_key_bounds(a, groups, t, starts[owner - r0]);
    }
    carry += total;
    __syncthreads();  // before the next tile's scan and starts[]
  }
}

}  // namespace detail

// Dynamic shared memory of a launch: the block schedule's scan, work + 1
// words and their padding (padded()); none for the warps' schedule.
inline std::size_t shared_bytes(const StepArgs& a) {
  if (!a.schedule.present() || !a.writes_decode || detail::small_schedule(a.schedule)) return 0;
  const auto words = static_cast<std::size_t>(a.schedule.work) + 1;
  return sizeof(int32_t) * (words + words / 32);
}

// Launches `a` on `stream` over `grid` (launch_grid's), the kernel built for
// the schedule's units a thread or a lane.
inline void launch(const StepArgs& a, const LaunchGrid& grid, Stream stream) {
  static_assert(kMaxScheduleUnits % kPrepareThreads == 0, "whole units a thread");
  static_assert(sizeof(LaunchGrid) + sizeof(StepArgs) <= 4096, "HIP passes at most 4 KiB of kernel arguments");
  if (grid.units_per_thread > kMaxUnitsPerThread) {
    // make_geometry keeps a planned step within kMaxScheduleUnits.
    throw StepError(fmt::format(
        "prepare_step: a schedule of work={} units needs {} a thread; the kernel takes at most {} "
        "({} units)",
        a.schedule.work, grid.units_per_thread, kMaxUnitsPerThread, kMaxScheduleUnits));
  }
  check_step_args(a);
  const std::size_t shared = shared_bytes(a);
  const auto blocks = static_cast<uint32_t>(grid.blocks());
  const auto go = [&](auto kernel) { IDXPLAN_KERNEL_LAUNCH(kernel, blocks, kPrepareThreads, shared, stream)(grid, a); };
  const bool fp4 = a.fp4_decode_ctas > 0 || a.fp4_prefill_base > 0;
  const bool metadata = deepgemm_sm90::step_writes_metadata(a);
  switch (fp4 ? -1 : metadata ? -2 : grid.units_per_thread) {
    case -1: go(detail::prepare_step_fp4_kernel<>); break;
    case -2: go(detail::prepare_step_metadata_kernel<>); break;
    case 0:
      if (grid.lane_units == 1) {
        go(detail::prepare_step_kernel<0>);
      } else {
        go(detail::prepare_step_lanes_kernel<kMaxLaneUnits>);
      }
      break;
    case 1: go(detail::prepare_step_kernel<1>); break;
    case 2: go(detail::prepare_step_kernel<2>); break;
    case 4: go(detail::prepare_step_kernel<4>); break;
    case 8: go(detail::prepare_step_kernel<8>); break;
    case 16: go(detail::prepare_step_kernel<16>); break;
    default: go(detail::prepare_step_kernel<32>); break;  // 32, checked above
  }
  check(rt::last_error(), "prepare_step_kernel launch");
  if (writes_key_bounds(a) && a.num_groups > 0) {
    IDXPLAN_KERNEL_LAUNCH(detail::key_bounds_kernel<>, static_cast<uint32_t>(a.num_groups), kPrepareThreads, 0,
                          stream)(a);
    check(rt::last_error(), "key_bounds_kernel launch");
  }
}

// Blocks a launch spreads each buffer's per-index work over: four a CU of
// the current GPU, asked once a thread and device.
inline int32_t max_prepare_blocks() {
  thread_local int cached_device = -1;
  thread_local int32_t cached_blocks = 0;
  int current = 0;
  check(rt::get_device(&current), "get_device");
  if (current != cached_device) {
    cached_blocks = 4 * query_compute_units();
    cached_device = current;
  }
  return cached_blocks;
}

// Enqueues the step's launch on `stream` (a step past kMaxLaunchGroups chunk
// groups adds a launch per further 128, for their requests and tokens; a
// step with prefill chunks whose outputs ask for the key bounds, a launch
// of key_bounds_kernel after each).
// `inputs` are device pointers: the exact seq_lens, query_start_loc and
// block table, with their extents; `outputs` the engine's buffers.
// check_step_buffers runs first: a StepError names what is missing, too
// short or too small, and nothing is launched.
inline void enqueue(const Geometry& g, const StepPlan& plan, const StepInputs& inputs,
                    const StepOutputs& outputs, Stream stream) {
  check_step_buffers(g, plan, inputs, outputs);
  const int32_t max_blocks = max_prepare_blocks();
  const int32_t launches = num_step_launches(plan);
  for (int32_t k = 0; k < launches; ++k) {
    const StepArgs args = make_step_args(g, plan, inputs, outputs, k);
    launch(args, launch_grid(args, max_blocks), stream);
  }
}

}  // namespace idxplan::device
