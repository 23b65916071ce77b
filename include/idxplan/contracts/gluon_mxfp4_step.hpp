// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// gluon_mxfp4's words over a step's launch (plan/step_args.hpp): the KV
// tiles of each schedule unit from the exact lengths, and the CPU fill of
// decode_schedule. The device writer (gluon_mxfp4_device.hpp) computes the
// same tiles, and tests/test_buffers.cpp holds the fast forms to the rule.

#include <cstdint>

#include "idxplan/contracts/gluon_mxfp4.hpp"
#include "idxplan/host_device.hpp"
#include "idxplan/plan/divide.hpp"
#include "idxplan/plan/step_args.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan {

// The tiles of a native unit of a sequence of (clamped) length seq_len
// whose last real row sees `tokens` tokens (0 for a unit without real
// rows): the rows end there, and the context is positive exactly when the
// length reaches the compression ratio. native_unit_tiles and
// sequence_unit_tiles find `tokens` each their own way.
IDXPLAN_HD int32_t last_row_tiles(const StepArgs& a, int32_t seq_len, int32_t tokens) {
  const int32_t tiles = a.by_block_kv.divide_up(a.by_compress_ratio.divide(tokens > 0 ? tokens : 0));
  return seq_len < a.by_compress_ratio.divisor() ? 0 : (tiles > 1 ? tiles : 1);
}

// KV tiles of native schedule unit (seq, blk), the sequence's exact length
// being `device_len` (as loaded); the kernel loads every unit's length before
// it computes any. A row's length grows with the row, so the largest row end
// of the unit's real rows is its last real row's. This is unit_tiles() of
// the context and that row's decode_row_len(), with two steps fewer, as it
// runs for every unit of every schedule block: the clamped length keeps the
// last row's tokens in int32 (they lie in [seq_len - rows_per_seq + 1,
// seq_len]), the row end never passes the context, and the context is
// positive exactly when the length reaches the compression ratio.
// tests/test_buffers.cpp holds it to the design's rule.
IDXPLAN_HD int32_t native_unit_tiles(const StepArgs& a, int32_t seq, int32_t blk, int32_t device_len) {
  const ScheduleShape& s = a.schedule;
  const int32_t seq_len = clamp_seq_len(device_len, a.max_decode_seq_len);
  const int32_t first_row = unit_first_row(s, blk);
  // Rows of the unit: up to block_m, within the sequence and within the
  // step's real rows (those past them are graph padding, with no context).
  int32_t rows = s.block_m < s.rows_per_seq - first_row ? s.block_m : s.rows_per_seq - first_row;
  const int32_t real = a.num_real_decode_rows - seq * s.rows_per_seq - first_row;
  rows = rows < real ? rows : real;
  // Computed for every unit and then selected, so the device's units do not
  // branch; a unit without rows takes its first row's tokens, unused.
  const int32_t last = first_row + (rows > 0 ? rows : 1) - 1;
  const int32_t tokens = seq_len - s.rows_per_seq + last + 1;
  return last_row_tiles(a, seq_len, rows > 0 ? tokens : 0);
}

// native_unit_tiles(a, seq, 0, device_len) of a schedule with one row block
// a sequence (block_m >= rows_per_seq), where the unit is the sequence and
// its rows are the sequence's real ones: its last real row's tokens are the
// length less the rows past the step's real rows. No row-block bookkeeping,
// so about half the steps a unit; the big steps' schedule blocks run it for
// every sequence. (seq + 1) * rows_per_seq is at most the step's decode
// rows, an int32. tests/test_buffers.cpp holds it to native_unit_tiles.
IDXPLAN_HD int32_t sequence_unit_tiles(const StepArgs& a, int32_t seq, int32_t device_len) {
  const ScheduleShape& s = a.schedule;
  const int32_t seq_len = clamp_seq_len(device_len, a.max_decode_seq_len);
  const int32_t past = (seq + 1) * s.rows_per_seq - a.num_real_decode_rows;  // padding rows
  const int32_t tokens = seq_len - (past > 0 ? past : 0);
  return last_row_tiles(a, seq_len, past < s.rows_per_seq ? tokens : 0);
}

// sequence_unit_tiles of a sequence whose rows are all real, so that its
// last row sees the whole (clamped) length L: ceil(floor(L / C) / K) with
// C the compression ratio and K the schedule's block_kv, at least 1 where
// L >= C, and 0 below. floor(L / C) is 0 exactly below C, and past it the
// ceiling is at least 1, so the rule is (floor(L / C) + K - 1) / K, which
// is (L + C * K - C) / (C * K): an add, a high multiply and a shift
// (divide_biased), where sequence_unit_tiles adds the padding rows' steps,
// two divisions, a remainder test for its ceiling and two selects. Only
// where whole_tiles (set_whole_tiles), which keeps the sum in int32.
// tests/test_buffers.cpp holds it to sequence_unit_tiles.
IDXPLAN_HD int32_t whole_sequence_tiles(const StepArgs& a, int32_t device_len) {
  const int32_t ratio = a.by_compress_ratio.divisor();
  const int32_t keys = ratio * a.by_block_kv.divisor();
  // clamp_seq_len as two steps, not three: the bound is not negative.
  const int32_t shorter = device_len < a.max_decode_seq_len ? device_len : a.max_decode_seq_len;
  return divide_biased(shorter > 0 ? shorter : 0, keys - ratio, keys, a.whole_tiles);
}

// Whether sequences [0, end) take whole_sequence_tiles: the step allows it
// and their rows are all real (graph padding rows come after the real ones).
IDXPLAN_HD bool whole_tiles_below(const StepArgs& a, int32_t end) {
  return a.whole_tiles != 0 && int64_t{end} * a.schedule.rows_per_seq <= a.num_real_decode_rows;
}

// KV tiles of flattened schedule unit (row, blk) whose row's compressed
// context is ctx.
IDXPLAN_HD int32_t flat_unit_tiles(const StepArgs& a, int32_t blk, int32_t ctx) {
  const ScheduleShape& s = a.schedule;
  return unit_tiles(a.by_block_kv, ctx, ctx - s.rows_per_seq + unit_first_row(s, blk) + s.block_m);
}

// KV tiles of schedule unit u, from the exact lengths.
IDXPLAN_HD int32_t unit_tiles_at(const StepArgs& a, int32_t u) {
  const ScheduleShape& s = a.schedule;
  const int32_t seq = a.by_row_blocks.divide(u);
  const int32_t blk = u - seq * s.row_blocks;
  if (s.native) return native_unit_tiles(a, seq, blk, a.in.seq_lens[seq]);
  return flat_unit_tiles(a, blk, decode_row_len_at(a, seq));
}

namespace detail {

IDXPLAN_HD void store_descriptor(int32_t* schedule, int32_t slot, const Descriptor& d) {
  int32_t* w = schedule + int64_t{slot} * kDescriptorWords;
  w[0] = d.seq;
  w[1] = d.blk;
  w[2] = d.slice;
  w[3] = d.slices;
}

}  // namespace detail

// The CPU reference of launch `a`'s decode_schedule: each unit's slices in
// unit order, then idle slots to num_ctas (nothing where the launch writes
// no decode buffers or the step has no schedule).
inline void fill_decode_schedule(const StepArgs& a) {
  const ScheduleShape& s = a.schedule;
  if (!a.writes_decode || !s.present()) return;
  TileStats stats{};
  for (int32_t u = 0; u < s.work; ++u) stats = TileStats{}(stats, TileStats::of(unit_tiles_at(a, u)));
  const int32_t per_slice = tiles_per_slice(s, a.all_live, stats.total, stats.live, stats.max_tiles);
  int32_t slot = 0;
  for (int32_t u = 0; u < s.work && slot < s.num_ctas; ++u) {
    const int32_t slices = unit_slices(unit_tiles_at(a, u), per_slice);
    for (int32_t i = 0; i < slices && slot < s.num_ctas; ++i, ++slot) {
      detail::store_descriptor(a.out.decode_schedule.data, slot, unit_descriptor(a.by_row_blocks, u, i, slices));
    }
  }
  for (; slot < s.num_ctas; ++slot) detail::store_descriptor(a.out.decode_schedule.data, slot, Descriptor{});
}

}  // namespace idxplan
