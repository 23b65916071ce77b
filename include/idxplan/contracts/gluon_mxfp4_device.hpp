// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// gluon_mxfp4's device writer: decode_schedule's slots, written by the
// schedule part of the prepare launch (device/prepare_step.hpp) from the
// step's device lengths, word for word what fill_decode_schedule
// (gluon_mxfp4_step.hpp) writes on the CPU. Two ways: the blocks'
// (write_schedule_slots, kItems units a thread), each block computing the
// step-wide stats and the scan of every unit's slices itself, and for
// small native schedules the warps' (write_small_schedule_slots), each
// warp computing the whole schedule. Each slot finds its unit by a binary
// search among the few units its block's slots lie in.

#include <cstdint>

#include "idxplan/contracts/gluon_mxfp4.hpp"
#include "idxplan/contracts/gluon_mxfp4_step.hpp"
#include "idxplan/device/block.hpp"
#include "idxplan/device/runtime.hpp"
#include "idxplan/device/scan.hpp"
#include "idxplan/plan/divide.hpp"
#include "idxplan/plan/step_args.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan::device {

// Schedule units a thread, at most, and the slots a block writes (two a
// thread).
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

namespace detail {

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

namespace detail {

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

}  // namespace detail

}  // namespace idxplan::device
