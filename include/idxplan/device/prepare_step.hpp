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

#include <algorithm>
#include <cstdint>

#include "idxplan/config.hpp"
#include "idxplan/contracts/flydsl_fp4_device.hpp"
#include "idxplan/contracts/flydsl_fp4_step.hpp"
#include "idxplan/device/runtime.hpp"
#include "idxplan/device/scan.hpp"
#include "idxplan/plan/buffers.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan::device {

// Threads a block, and the schedule slots a block writes (two a thread).
inline constexpr int kPrepareThreads = 256;
inline constexpr int kMaxUnitsPerThread = kMaxScheduleUnits / kPrepareThreads;
inline constexpr int kSlotsPerBlock = 2 * kPrepareThreads;
// Units up to which the warps' schedule gathers every unit's slices in
// each lane (store_gathered_slots) rather than scanning them. On the H200,
// gathering 16 took decode_16's kernel from 1.79 to 1.70 us, and gathering
// 32 decode_32's from 1.84 to 2.00 (100 steps in a graph).
inline constexpr int kGatheredUnits = 16;
// Units a thread from which the blocks' schedule divides its units' tiles
// by a Reciprocal of tiles_per_slice, one division a thread, rather than
// a division a unit: on the H200 that took decode_4096's kernel (16 units
// a thread) from 3.84 to 3.77 us (100 steps in a graph); at 4 units a
// thread (decode_1024) it was level, and at 1 (decode_64, decode_256)
// 0.02-0.04 us slower. No benchmark step has 8.
inline constexpr int kReciprocalItems = 8;
// Units a lane, at most, of the warps' schedule (detail::small_schedule):
// schedules of up to kMaxLaneUnits * the warp size units take it, a warp's
// units or fewer at a unit a lane (prepare_step_kernel<0>), the others at
// kMaxLaneUnits (prepare_step_lanes_kernel). On the H200, two units a lane
// took decode_64's kernel from 1.99 to 1.77 us (100 steps in a graph);
// eight, for up to 256 sequences, took decode_256's from 2.08 to 2.40, and
// eight read from the tiles a block's threads staged in shared memory from
// 2.28 to 2.46-2.50 (in bench_aiter_sched.py's process; docs/performance.md).
inline constexpr int kMaxLaneUnits = 2;

// The parts of a launch, in grid order.
enum class Part : int32_t {
  schedule,         // decode_schedule, kSlotsPerBlock slots a block (the warps': kSmallSlotsPerBlock)
  packed_offsets,   // prefill_query_start_loc
  contexts,         // context_lens of the launch's requests
  decode_rows,      // decode_row_lens, decode_block_ends, a request a thread
  decode_table,     // decode_block_table, a request's four columns a thread
  prefill_rows,     // prefill_row_ends, prefill_block_ends of the launch's tokens
};
inline constexpr int kParts = 6;

namespace detail {

using Primitives = BlockPrimitives<kPrepareThreads>;

// Whether schedule `s` is the warps' (write_small_schedule_slots): native,
// and at most kMaxLaneUnits units a lane of one warp.
IDXPLAN_HD bool small_schedule(const ScheduleShape& s) {
  return s.native && s.work <= kMaxLaneUnits * Primitives::kWarpSize;
}

// The warps' schedule runs on the first kSmallWarps warps of each of its
// blocks, two slots a lane; the block's other warps leave at once (on
// NVIDIA once each has fetched an argument, fetch_late_arguments). Every
// warp computes the whole schedule, so eight of them on one SM wait on
// each other's issue: on the H200, two a block rather than eight took
// decode_4's kernel from 1.51 to 1.42 us, decode_16's from 1.70 to 1.52
// and decode_32's from 1.76 to 1.69 (100 steps in a graph); one a block
// read 0.01-0.03 us slower than two.
inline constexpr int kSmallWarps = 2;
inline constexpr int kSmallThreads = kSmallWarps * Primitives::kWarpSize;
inline constexpr int kSmallSlotsPerBlock = 2 * kSmallThreads;

}  // namespace detail

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

// flydsl_fp4's grids (contracts/flydsl_fp4_step.hpp) take the schedule's
// part under that contract: kFp4SlotsPerBlock CTAs of the decode grid a
// block (its first launch), then as many of each chunk's of the launch's.
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
      decode ? blocks(decode_row_items(a), kPrepareThreads) : 0,
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

// The first step of the slots' binary search among units [lo, hi]: the
// largest power of two at most hi - lo, or 1. A count of leading zeros, not
// a loop of doublings: on the H200 that took decode_32's kernel from 1.83
// to 1.76 us and the larger steps' 0.02-0.05 us down (100 steps in a graph).
__device__ __forceinline__ int32_t first_search_step(int32_t lo, int32_t hi) {
  return 1 << (31 - __clz(hi - lo > 1 ? hi - lo : 1));
}

// Stores slot `slot` of the schedule, if it is one (under num_ctas): slice
// slot - unit_first of `unit`, whose `slices` slices begin at slot
// unit_first, when the slot is in use (under `end`), else an idle slot's
// zeros. Every way of finding a slot's unit ends here.
__device__ __forceinline__ void store_slot(int4* schedule, int32_t num_ctas, const Divisor& by_row_blocks,
                                           int32_t slot, int32_t end, int32_t unit, int32_t unit_first,
                                           int32_t slices) {
  int4 words = make_int4(0, 0, 0, 0);
  if (slot < end) {
    const Descriptor d = unit_descriptor(by_row_blocks, unit, slot - unit_first, slices);
    words = make_int4(d.seq, d.blk, d.slice, d.slices);
  }
  if (slot < num_ctas) schedule[slot] = words;
}

// Where unit u's word lies in the schedule's shared array: with kItems units
// a thread, a word of padding after every 32, so that a warp's threads
// writing or reading their own runs of kItems consecutive units hit 32
// different banks (unpadded, kItems threads would share a bank). On the
// H200 this took decode_4096's kernel from 6.0 to 5.0 us.
template <int kItems>
__device__ int32_t padded(int32_t u) {
  return kItems > 1 ? u + (u >> 5) : u;
}

// Flattened units' tiles into first[] (at padded()): each decode request's
// thread writes its rows', so no thread searches query_start_loc for its
// row. A thread's kItems requests' offsets and lengths are all loaded first.
template <int kItems>
__device__ void store_flat_tiles(const StepArgs& a, int32_t* first) {
  const ScheduleShape& s = a.schedule;
  const int tid = static_cast<int>(threadIdx.x);
  int32_t start[kItems], stop[kItems], len[kItems];
  const auto load = [&](int32_t r0) {
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int32_t r = r0 + k * kPrepareThreads + tid;
      const bool real = r < a.num_decodes;
      start[k] = real ? a.in.query_start_loc[r] : 0;
      stop[k] = real ? a.in.query_start_loc[r + 1] : 0;
      len[k] = real ? decode_seq_len_at(a, r) : 0;
    }
  };
  load(0);
  for (int32_t u = tid; u < s.work; u += kPrepareThreads) first[padded<kItems>(u)] = 0;  // padding rows
  __syncthreads();
  // Requests with no rows can outnumber the rows, hence the outer loop; it
  // is one pass for every step with no more requests than units.
  for (int32_t r0 = 0;;) {
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      // The host's query_start_loc is the device's; the bounds keep a
      // mismatched one inside first[]. (decode_rows_of clamps the same way,
      // but holding its four words a request here made the flattened
      // schedule about 12% slower on the H200.)
      const int32_t lo = start[k] > 0 ? start[k] : 0;
      const int32_t hi = stop[k] < a.num_real_decode_rows ? stop[k] : a.num_real_decode_rows;
      for (int32_t row = lo; row < hi; ++row) {
        const int32_t ctx = decode_row_len(len[k], stop[k] - start[k], row - start[k], a.by_compress_ratio);
        for (int32_t blk = 0; blk < s.row_blocks; ++blk) {
          first[padded<kItems>(row * s.row_blocks + blk)] = flat_unit_tiles(a, blk, ctx);
        }
      }
    }
    r0 += kItems * kPrepareThreads;
    if (r0 >= a.num_decodes) break;
    load(r0);
  }
  __syncthreads();
}

// The tiles of a native schedule's units [base, base + kItems), 0 past the
// work, when a unit is a sequence (row_blocks == 1): the units are
// sequences [base, base + kItems), whose lengths are all loaded first, in
// flight together, with no sequence/row-block bookkeeping before them and
// half the steps a unit after (sequence_unit_tiles). On the H200 this took
// decode_4096's kernel from 4.14 to 3.90 us and decode_1024's from 2.53 to
// 2.49 (100 steps in a graph), the smaller steps within 0.03. The blocks'
// schedule runs it for a thread's units, the warps' for a lane's.
template <int kItems>
__device__ __forceinline__ void load_sequence_tiles(const StepArgs& a, int32_t base, int32_t (&tiles)[kItems]) {
  const ScheduleShape& s = a.schedule;
  int32_t lens[kItems];
  // With the lengths 16-byte aligned, a thread's lengths are consecutive
  // words: four a load. On the H200 that took decode_4096's kernel (16
  // units a thread) from 4.46 to 4.24 us (100 steps in a graph); at 4
  // units a thread (decode_1024) it was 0.02 us slower, hence the bound.
  // Not on AMD yet (kFourLengthsALoad).
  bool quads = false;
  if constexpr (kItems >= 16 && kFourLengthsALoad) {
    quads = reinterpret_cast<uintptr_t>(a.in.seq_lens) % 16 == 0;
    if (quads) {
#pragma unroll
      for (int k = 0; k < kItems; k += 4) {
        if (base + k + 3 < s.work) {
          const int4 v = *reinterpret_cast<const int4*>(a.in.seq_lens + base + k);
          lens[k] = v.x;
          lens[k + 1] = v.y;
          lens[k + 2] = v.z;
          lens[k + 3] = v.w;
        } else {
#pragma unroll
          for (int j = k; j < k + 4; ++j) lens[j] = base + j < s.work ? a.in.seq_lens[base + j] : 0;
        }
      }
    }
  }
  if (!quads) {
#pragma unroll
    for (int k = 0; k < kItems; ++k) lens[k] = base + k < s.work ? a.in.seq_lens[base + k] : 0;
  }
  // A thread whose sequences' rows are all real (graph padding rows come
  // after them, so every thread of a step without padding) sees each whole
  // length in its last row: whole_sequence_tiles, a clamp, an add, a high
  // multiply and a shift a unit where sequence_unit_tiles adds the padding
  // rows' steps, two divisions, a remainder test for its ceiling and two
  // selects. On an H100, with the warps' schedule's lanes doing the same,
  // this took decode_4096's kernel from 3.82 to 3.58 us, decode_1024's from
  // 2.54 to 2.48 and decode_4's from 1.47 to 1.43 as two divisions; in a
  // later call the one multiply took them from 3.55, 2.51 and 1.42 to
  // 3.38, 2.45 and 1.40 (100 steps in a graph; docs/performance.md).
  if (whole_tiles_below(a, base + kItems)) {
#pragma unroll
    for (int k = 0; k < kItems; ++k) tiles[k] = whole_sequence_tiles(a, lens[k]);
    return;
  }
  // A unit past the work has length 0, so no tiles
  // (tests/test_buffers.cpp): no select. On the H200 decode_4096's
  // kernel took 3.77 -> 3.75 us without it.
#pragma unroll
  for (int k = 0; k < kItems; ++k) tiles[k] = sequence_unit_tiles(a, base + k, lens[k]);
}

// The same when a sequence is several units (row blocks): each unit's
// sequence and row block, then every length load, all in flight together,
// then the arithmetic.
template <int kItems>
__device__ __forceinline__ void load_row_block_tiles(const StepArgs& a, int32_t base, int32_t (&tiles)[kItems]) {
  const ScheduleShape& s = a.schedule;
  int32_t seq[kItems];
  int32_t blk[kItems];
  int32_t lens[kItems];
  seq[0] = a.by_row_blocks.divide(base);
  blk[0] = base - seq[0] * s.row_blocks;
#pragma unroll
  for (int k = 1; k < kItems; ++k) {
    const bool next = blk[k - 1] + 1 == s.row_blocks;
    seq[k] = next ? seq[k - 1] + 1 : seq[k - 1];
    blk[k] = next ? 0 : blk[k - 1] + 1;
  }
#pragma unroll
  for (int k = 0; k < kItems; ++k) lens[k] = base + k < s.work ? a.in.seq_lens[seq[k]] : 0;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int32_t t = native_unit_tiles(a, seq[k], blk[k], lens[k]);
    tiles[k] = base + k < s.work ? t : 0;
  }
}

// Writes the block's slots of `schedule` (num_ctas of them), kSlots a
// thread, for a schedule whose units' slots begin at `at(u)` (at(work) =
// end, the slots in use): the warps' schedule's. Slot j's unit is the last
// one whose first slot is at most j (a unit without slices shares its
// first slot with the next), among the units [lo, hi] the block's slots
// lie in. Every thread of the block takes the same steps, and both of a
// thread's slots search at once. write_schedule_slots has the same search
// inline: calling this instead made decode_1024 0.05 us slower on the H200.
template <class At>
__device__ __forceinline__ void store_slots(int4* schedule, int32_t num_ctas, Divisor by_row_blocks,
                                            int32_t block_first, int32_t end, int32_t lo, int32_t hi, const At& at) {
  constexpr int kSlots = kSmallSlotsPerBlock / kSmallThreads;
  const int tid = static_cast<int>(threadIdx.x);
  int32_t slot[kSlots], unit[kSlots], unit_first[kSlots];
  const bool busy = block_first < end;
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    slot[k] = block_first + k * kSmallThreads + tid;
    unit[k] = lo;
    unit_first[k] = at(lo);
  }
  int32_t step = first_search_step(lo, hi);
  for (; busy && step > 0; step /= 2) {
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int32_t probe = unit[k] + step;
      // An unconditional load, which keeps the loop free of predicated
      // address arithmetic.
      const int32_t f = at(probe < hi ? probe : hi);
      const bool right = probe <= hi && f <= slot[k];
      unit[k] = right ? probe : unit[k];
      unit_first[k] = right ? f : unit_first[k];
    }
  }
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    store_slot(schedule, num_ctas, by_row_blocks, slot[k], end, unit[k], unit_first[k],
               at(unit[k] + 1) - unit_first[k]);
  }
}

// The warps' schedule's slots for at most kUnits units, unit u's slices
// `slices` in lane u (0 past the work): every lane reads each unit's from
// its lane and adds them up in order, finding its slots' units as it goes,
// in place of the warp scan, the first slots in shared memory and the
// search. On the H200 this took decode_4's kernel from 1.69 to 1.50 us and
// decode_8's from 1.73 to 1.56 (100 steps in a graph); gathering 8 units
// for decode_4's 4 took 1.55.
template <int kUnits>
__device__ __forceinline__ void store_gathered_slots(const StepArgs& a, int32_t block, int32_t slices) {
  static_assert(kUnits <= Primitives::kWarpSize, "a unit a lane");
  constexpr int kSlots = kSmallSlotsPerBlock / kSmallThreads;
  int32_t counts[kUnits];
#pragma unroll
  for (int u = 0; u < kUnits; ++u) counts[u] = Primitives::warp_broadcast(slices, u);
  // Slot k's unit is the last one whose first slot is at most the slot (a
  // unit without slices shares its first slot with the next).
  int32_t slot[kSlots], unit[kSlots], unit_first[kSlots], unit_count[kSlots];
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    slot[k] = block * kSmallSlotsPerBlock + k * kSmallThreads + static_cast<int>(threadIdx.x);
    unit[k] = 0;
    unit_first[k] = 0;
    unit_count[k] = counts[0];
  }
  int32_t end = counts[0];  // unit u's first slot, then the slots in use
#pragma unroll
  for (int u = 1; u < kUnits; ++u) {
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const bool past = end <= slot[k];
      unit[k] = past ? u : unit[k];
      unit_first[k] = past ? end : unit_first[k];
      unit_count[k] = past ? counts[u] : unit_count[k];
    }
    end += counts[u];
  }
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    store_slot(reinterpret_cast<int4*>(a.out.decode_schedule.data), a.schedule.num_ctas, a.by_row_blocks, slot[k],
               end, unit[k], unit_first[k], unit_count[k]);
  }
}

// The units that hold the warps' block's first and last slot in use, in
// every lane: each lane's units are [base, base + kUnits), with their first
// slots and slices. A slot's unit is the one whose slices cover it, so one
// lane holds each; where the block has no slot in use none does, and its
// search stops at once.
struct SlotBounds {
  int32_t lo = 0;
  int32_t hi = 0;
};
template <int kUnits>
__device__ __forceinline__ SlotBounds block_slot_bounds(int32_t block_first, int32_t end, int32_t base,
                                                        const int32_t (&firsts)[kUnits],
                                                        const int32_t (&slices)[kUnits]) {
  const int32_t block_end = block_first + kSmallSlotsPerBlock < end ? block_first + kSmallSlotsPerBlock : end;
  const int32_t block_last = block_end - 1;
  bool has_lo = false, has_hi = false;
  int32_t lo = 0, hi = 0;
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    const int32_t next = firsts[k] + slices[k];
    if (firsts[k] <= block_first && block_first < next) {
      has_lo = true;
      lo = base + k;
    }
    if (firsts[k] <= block_last && block_last < next) {
      has_hi = true;
      hi = base + k;
    }
  }
  return SlotBounds{Primitives::warp_first_where(has_lo, lo, 0), Primitives::warp_first_where(has_hi, hi, 0)};
}

#if IDXPLAN_WARP_REDUX
// The warps' block's slots at a unit a lane, lane u holding unit u's first
// slot `first` and its slices (0 past the work), where the warp's or is one
// instruction (IDXPLAN_WARP_REDUX). A warp's slots are two windows of a
// warp's consecutive slots; the unit that owns a lane's slot in a window
// comes a bit at a time, bit i the or over the warp of the window's slots
// that the units with bit i in their index cover, and then the unit's first
// slot and slices come from its lane. Five reductions a window, none
// waiting on another, where store_slots' search waits on each of its
// steps' loads from shared memory: on the H200 this took decode_32's kernel
// from 1.63 to 1.54 us (100 steps in a graph). At two units a lane
// (decode_64: six bits, and a unit's words from one of two registers) it
// was 0.02 us slower than the search, which write_lanes_schedule_slots
// keeps; so does AMD, where a wave's or is a reduction of six steps.
__device__ __forceinline__ void store_owned_slots(const StepArgs& a, int32_t block, int32_t first, int32_t slices,
                                                  int32_t end) {
  constexpr int kWarpSize = Primitives::kWarpSize;
  constexpr int kSlots = kSmallSlotsPerBlock / kSmallThreads;
  constexpr int kIndexBits = 5;
  static_assert(kWarpSize == 1 << kIndexBits, "a bit of the window a lane, a unit a lane");
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int32_t warp_first = block * kSmallSlotsPerBlock + static_cast<int>(threadIdx.x) / kWarpSize * kWarpSize;
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    // The window's slots this lane's unit covers, [lo, hi) of its bits.
    const int32_t window = warp_first + k * kSmallThreads;
    const int32_t from = first - window;
    const int32_t lo = from > 0 ? from : 0;
    const int32_t hi = from + slices < kWarpSize ? from + slices : kWarpSize;
    const uint32_t covered = hi > lo ? (~0u >> (kWarpSize - hi)) & (~0u << lo) : 0u;
    int32_t unit = 0;
#pragma unroll
    for (int i = 0; i < kIndexBits; ++i) {
      const uint32_t owned = Primitives::warp_or((lane >> i & 1) != 0 ? covered : 0u);
      unit |= static_cast<int32_t>(owned >> lane & 1u) << i;
    }
    // A slot past the end has no owner (unit 0), and store_slot leaves it idle.
    store_slot(reinterpret_cast<int4*>(a.out.decode_schedule.data), a.schedule.num_ctas, a.by_row_blocks,
               window + lane, end, unit, Primitives::warp_broadcast(first, unit),
               Primitives::warp_broadcast(slices, unit));
  }
}
#endif

// The warps' schedule (detail::small_schedule) at a unit a lane, for at
// most a warp's units (the few sequences of a small decode step): every
// warp computes the whole schedule itself, with warp reductions and a warp
// scan (or, for at most kGatheredUnits units, store_gathered_slots), and
// then writes its own threads' slots, so the block never waits at a
// barrier. `first` is the warp's own shared array. On the H200 this took
// decode_4's kernel from 2.17 to 1.96 us (100 steps in a graph). Past
// kGatheredUnits each lane's slots find their units by the warp's or
// (store_owned_slots) where it is an instruction; elsewhere each block's
// slots search only among the units that hold them (block_slot_bounds)
// rather than all of them, which took decode_32 from 1.69 to 1.63.
__device__ __forceinline__ void write_lane_schedule_slots(const StepArgs& a, int32_t block, int32_t* first,
                                                          typename Primitives::TempStorage& temp) {
  constexpr int kWarpSize = Primitives::kWarpSize;
  const ScheduleShape& s = a.schedule;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;

  const int32_t seq = a.by_row_blocks.divide(lane);
  const int32_t blk = lane - seq * s.row_blocks;
  const bool real = lane < s.work;
  const int32_t len = real ? a.in.seq_lens[seq] : 0;
  // Where no sequence of the step has padding rows, each lane's whole
  // tiles (load_sequence_tiles); a lane past the work has length 0, so no
  // whole tiles either.
  const bool whole = s.row_blocks == 1 && whole_tiles_below(a, s.work);
  const int32_t tiles =
      whole ? whole_sequence_tiles(a, len)
            : !real ? 0 : (s.row_blocks == 1 ? sequence_unit_tiles(a, lane, len) : native_unit_tiles(a, seq, blk, len));
  const TileStats all = Primitives::warp_all_reduce(TileStats::of(tiles), temp);
  const int32_t slices = unit_slices(tiles, tiles_per_slice(s, a.all_live, all.total, all.live, all.max_tiles));
  // Few units: gathered, in as few steps as the work needs, not scanned.
  if (s.work <= 4) {
    store_gathered_slots<4>(a, block, slices);
    return;
  }
  if (s.work <= 8) {
    store_gathered_slots<8>(a, block, slices);
    return;
  }
  if (s.work <= kGatheredUnits) {
    store_gathered_slots<kGatheredUnits>(a, block, slices);
    return;
  }
  int32_t unit_first = 0;
  int32_t end = 0;
  Primitives::warp_exclusive_sum(slices, unit_first, end, temp);
#if IDXPLAN_WARP_REDUX
  (void)first;
  store_owned_slots(a, block, unit_first, slices, end);
#else
  // Lanes past the units have no slices: first[work] = end, as store_slots
  // reads it, and first[kWarpSize] too.
  first[lane] = unit_first;
  if (lane == 0) first[kWarpSize] = end;
  const int32_t block_first = block * kSmallSlotsPerBlock;
  const int32_t lane_firsts[1] = {unit_first};
  const int32_t lane_slices[1] = {slices};
  const SlotBounds bounds = block_slot_bounds<1>(block_first, end, lane, lane_firsts, lane_slices);
  Primitives::warp_sync();
  store_slots(reinterpret_cast<int4*>(a.out.decode_schedule.data), s.num_ctas, a.by_row_blocks, block_first, end,
              bounds.lo, bounds.hi, [first](int32_t u) { return first[u]; });
#endif
}

// The warps' schedule at kUnits units a lane (more than one), for more than
// a warp's units: as write_lane_schedule_slots, with a warp scan of each
// lane's slices. Lane l holds units [l * kUnits, (l + 1) * kUnits), the
// scan's order, as a thread does in write_schedule_slots; `first` holds
// each unit's first slot at padded(), then the slots in use. The block's
// slots search only among the units that hold them (block_slot_bounds).
template <int kUnits>
__device__ __forceinline__ void write_lanes_schedule_slots(const StepArgs& a, int32_t block, int32_t* first,
                                                           typename Primitives::TempStorage& temp) {
  static_assert(kUnits > 1, "a unit a lane is write_lane_schedule_slots'");
  constexpr int kWarpSize = Primitives::kWarpSize;
  const ScheduleShape& s = a.schedule;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int32_t base = lane * kUnits;
  int32_t tiles[kUnits];
  if (s.row_blocks == 1) {
    load_sequence_tiles<kUnits>(a, base, tiles);
  } else {
    load_row_block_tiles<kUnits>(a, base, tiles);
  }
  TileStats mine = TileStats::of(tiles[0]);
#pragma unroll
  for (int k = 1; k < kUnits; ++k) mine = TileStats{}(mine, TileStats::of(tiles[k]));  // an absent unit adds nothing
  const TileStats all = Primitives::warp_all_reduce(mine, temp);
  const int32_t per_slice = tiles_per_slice(s, a.all_live, all.total, all.live, all.max_tiles);
  int32_t slices[kUnits];
  int32_t lane_slices = 0;
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    slices[k] = unit_slices(tiles[k], per_slice);
    lane_slices += slices[k];
  }
  int32_t lane_first = 0;
  int32_t end = 0;
  Primitives::warp_exclusive_sum(lane_slices, lane_first, end, temp);
  int32_t firsts[kUnits];
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    firsts[k] = lane_first;
    lane_first += slices[k];
    if (base + k < s.work) first[padded<kUnits>(base + k)] = firsts[k];
  }
  if (lane == 0) first[padded<kUnits>(s.work)] = end;
  const int32_t block_first = block * kSmallSlotsPerBlock;
  const SlotBounds bounds = block_slot_bounds<kUnits>(block_first, end, base, firsts, slices);
  Primitives::warp_sync();
  store_slots(reinterpret_cast<int4*>(a.out.decode_schedule.data), s.num_ctas, a.by_row_blocks, block_first, end,
              bounds.lo, bounds.hi, [first](int32_t u) { return first[padded<kUnits>(u)]; });
}

// What the warps' schedule's idle warps do (all but kSmallWarps of its
// block, where kIdleWarpsFetchArguments): each reads one of the kernel
// arguments that the working warps first read late (the divisors and the
// whole tiles' multiplier after the lengths, the schedule's pointer at the
// stores), so that its line's constant-cache miss comes while the working
// warps wait for their lengths rather than on their chain. The store is
// never made (no plan has a negative sequence count), and would touch only
// a word of its own; testing the word keeps the compiler from dropping its
// load. On an H100 this took decode_8's kernel from 1.39-1.40 to 1.37-1.38
// us and decode_64's from 1.81 to 1.79, the blocks' steps level (100 steps
// in a graph).
__device__ __forceinline__ void fetch_late_arguments(const StepArgs& a) {
  uint32_t word = 0;
  switch (static_cast<int>(threadIdx.x) / Primitives::kWarpSize - kSmallWarps) {
    case 0:
      word = a.by_compress_ratio.multiplier();
      break;
    case 1:
      word = static_cast<uint32_t>(a.schedule.max_tiles);
      break;
    case 2:
      word = a.whole_tiles;
      break;
    default:
      word = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(a.out.decode_schedule.data));
      break;
  }
  [[maybe_unused]] __shared__ volatile uint32_t sink;
  if (word == 0x9E3779B9u && a.schedule.num_seqs < 0) sink = word;
}

// The warps' schedule at kLaneUnits units a lane (LaunchGrid::lane_units):
// prepare_step_kernel<0> runs it at one, prepare_step_lanes_kernel at more.
template <int kLaneUnits>
__device__ __forceinline__ void write_small_schedule_slots(const StepArgs& a, int32_t block) {
  constexpr int kWarpSize = Primitives::kWarpSize;
  __shared__ typename Primitives::TempStorage temp;
  if constexpr (kLaneUnits == 1) {
    __shared__ int32_t firsts[kSmallWarps][kWarpSize + 1];  // each warp's own
    write_lane_schedule_slots(a, block, firsts[threadIdx.x / kWarpSize], temp);
  } else {
    constexpr int kWords = kLaneUnits * kWarpSize + 1;  // padded() past the last unit
    __shared__ int32_t firsts[kSmallWarps][kWords + kWords / 32];
    write_lanes_schedule_slots<kLaneUnits>(a, block, firsts[threadIdx.x / kWarpSize], temp);
  }
}

// The decode schedule's slots [block * kSlotsPerBlock, + kSlotsPerBlock).
// Every schedule block computes the step-wide stats and the scan of all the
// units' slices itself (kMaxScheduleUnits at most), so the blocks need no
// sync between them. Thread t holds units [t * kItems, (t + 1) * kItems), the
// scan's order. `first` is the shared array of shared_bytes(), a word a unit
// and one for the slots in use, at padded(): first the units' tiles, then
// each unit's first slot. Each slot finds its unit by a binary search among
// the few units the block's slots lie in.
template <int kItems>
__device__ void write_schedule_slots(const StepArgs& a, int32_t block, int32_t* first) {
  const ScheduleShape& s = a.schedule;
  constexpr int kSlots = kSlotsPerBlock / kPrepareThreads;
  __shared__ typename Primitives::TempStorage temp;
  const int tid = static_cast<int>(threadIdx.x);
  const int32_t base = tid * kItems;
  // Where the thread's own units' words start; they are consecutive, as its
  // kItems units (a power of two up to 32) never straddle a padding word.
  static_assert(kItems <= 32 && 32 % kItems == 0, "a thread's units within 32");
  const int32_t own = padded<kItems>(base);

  int32_t tiles[kItems];
  if (s.native && s.row_blocks == 1) {
    load_sequence_tiles<kItems>(a, base, tiles);
  } else if (s.native) {
    load_row_block_tiles<kItems>(a, base, tiles);
  } else {
    store_flat_tiles<kItems>(a, first);
#pragma unroll
    for (int k = 0; k < kItems; ++k) tiles[k] = base + k < s.work ? first[own + k] : 0;
  }

  TileStats mine{};
#pragma unroll
  for (int k = 0; k < kItems; ++k) mine = TileStats{}(mine, TileStats::of(tiles[k]));  // an absent unit adds nothing
  const TileStats all = Primitives::all_reduce(mine, temp);
  const int32_t per_slice = tiles_per_slice(s, a.all_live, all.total, all.live, all.max_tiles);

  int32_t slices[kItems];
  if constexpr (kItems >= kReciprocalItems) {
    const Reciprocal by_per_slice(per_slice);
#pragma unroll
    for (int k = 0; k < kItems; ++k) slices[k] = unit_slices(tiles[k], by_per_slice);
  } else {
#pragma unroll
    for (int k = 0; k < kItems; ++k) slices[k] = unit_slices(tiles[k], per_slice);
  }
  int32_t firsts[kItems];
  int32_t end = 0;
  Primitives::exclusive_sum(slices, firsts, end, temp);
  // first[] held only this thread's own units' tiles (flattened), so no
  // other thread still reads what this overwrites. The units holding the
  // block's first and last slot in use bound its slots' searches.
  __shared__ int32_t bounds[2];
  const int32_t block_first = block * kSlotsPerBlock;
  const int32_t block_last = (block_first + kSlotsPerBlock < end ? block_first + kSlotsPerBlock : end) - 1;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if (base + k < s.work) first[own + k] = firsts[k];
    const int32_t next = firsts[k] + slices[k];
    if (firsts[k] <= block_first && block_first < next) bounds[0] = base + k;
    if (firsts[k] <= block_last && block_last < next) bounds[1] = base + k;
  }
  if (tid == 0) first[padded<kItems>(s.work)] = end;
  __syncthreads();

  // Slot j's unit is the last one whose first slot is at most j (a unit
  // without slices shares its first slot with the next), among the units
  // [lo, hi] the block's slots lie in. Every thread of the block takes the
  // same steps, and both of a thread's slots search at once.
  int32_t slot[kSlots], unit[kSlots], unit_first[kSlots];
  const bool busy = block_first < end;  // else none of the block's slots is in use
  const int32_t lo = busy ? bounds[0] : 0;
  const int32_t hi = busy ? bounds[1] : 0;
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    slot[k] = block_first + k * kPrepareThreads + tid;
    unit[k] = lo;
    unit_first[k] = first[padded<kItems>(lo)];
  }
  int32_t step = first_search_step(lo, hi);
  for (; busy && step > 0; step /= 2) {
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int32_t probe = unit[k] + step;
      // An unconditional load, which keeps the loop free of predicated
      // address arithmetic.
      const int32_t f = first[padded<kItems>(probe < hi ? probe : hi)];
      const bool right = probe <= hi && f <= slot[k];
      unit[k] = right ? probe : unit[k];
      unit_first[k] = right ? f : unit_first[k];
    }
  }
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    store_slot(reinterpret_cast<int4*>(a.out.decode_schedule.data), s.num_ctas, a.by_row_blocks, slot[k], end,
               unit[k], unit_first[k], first[padded<kItems>(unit[k] + 1)] - unit_first[k]);
  }
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

// Words of one chunk group, and the shared memory that holds a launch's.
inline constexpr int kGroupWords = sizeof(ChunkGroup) / sizeof(int32_t);
using GroupWords = int32_t[kMaxLaunchGroups * kGroupWords];

// The launch's chunk groups copied from the kernel arguments into `words`
// (shared memory) by the block, for code that searches them: indexing the
// arguments themselves would copy the whole StepArgs to local memory.
__device__ inline const ChunkGroup* stage_groups(const StepArgs& a, GroupWords& words) {
  for (int i = static_cast<int>(threadIdx.x); i < a.num_groups * kGroupWords; i += kPrepareThreads) {
    words[i] = reinterpret_cast<const int32_t*>(a.groups)[i];
  }
  __syncthreads();
  return reinterpret_cast<const ChunkGroup*>(words);
}

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

// One block of the step's launch: the schedule's blocks first, the
// blocks' schedule at kItems units a thread or, with kItems = 0, the
// warps' at kLaneUnits units a lane; then the other parts'.
template <int kItems, int kLaneUnits, bool kFp4 = false>
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
    if constexpr (kFp4) {
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
  prepare_step<1, 1, true>(grid, a);
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
  switch (fp4 ? -1 : grid.units_per_thread) {
    case -1: go(detail::prepare_step_fp4_kernel<>); break;
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
