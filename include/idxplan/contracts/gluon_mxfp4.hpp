// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// gluon_mxfp4, the default contract (contract.hpp): the decode schedule
// aiter's Gluon MXFP4 kernel reads, [num_ctas, 4] descriptors. Here its
// shape, which the host decides from the step's shape alone (docs/design.md
// 5.4), and the per-unit rules the device applies to the step's lengths to
// write the descriptors (section 6); gluon_mxfp4_step.hpp applies them over a
// launch (the CPU fill) and gluon_mxfp4_device.hpp on the GPU. Its names
// were the library's before contracts had rooms, so they stay in namespace
// idxplan, where engines call them.

#include <algorithm>
#include <cstdint>

#include "idxplan/config.hpp"
#include "idxplan/host_device.hpp"
#include "idxplan/plan/divide.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan {

// The schedule for `num_seqs` sequences of `rows_per_seq` rows, or none
// (num_ctas == 0) when there are too few sequences to pay for one or more
// units than workgroups.
inline ScheduleShape schedule_shape(const Geometry& geometry, int32_t num_seqs,
                                    int32_t rows_per_seq, bool native) {
  const LaunchConfig launch = geometry.launch(rows_per_seq);
  const int64_t work = int64_t{num_seqs} * launch.row_blocks;
  if (num_seqs < 4 || work > launch.target_wgs) return {};

  const int64_t target = launch.target_wgs;
  const int64_t block_kv = geometry.cache().block_kv;
  const int64_t n_tiles = std::max<int64_t>(1, detail::ceil_div(geometry.logits_width(), block_kv));
  int64_t cap = launch.max_tiles_per_split;
  // Tiles a slice walks when every slot beyond one per unit shares the work.
  const int64_t plain =
      std::max<int64_t>(1, detail::ceil_div(n_tiles * work, std::max<int64_t>(target - work, 1)));
  if (plain < 4 * cap) cap = plain;
  const int64_t per_unit = detail::ceil_div(n_tiles, cap);
  const int64_t num_ctas =
      std::max(target, std::min<int64_t>(work * per_unit, kMaxScheduleSlots));
  const int64_t max_tiles = std::max(
      cap, detail::ceil_div(n_tiles * work, std::max<int64_t>(num_ctas - work, 1)));

  ScheduleShape shape;
  shape.num_seqs = num_seqs;
  shape.rows_per_seq = rows_per_seq;
  shape.block_m = launch.block_m;
  shape.row_blocks = launch.row_blocks;
  shape.work = static_cast<int32_t>(work);
  shape.block_kv = static_cast<int32_t>(block_kv);
  shape.num_ctas = static_cast<int32_t>(num_ctas);
  shape.max_tiles = static_cast<int32_t>(max_tiles);
  shape.native = native;
  return shape;
}

// First row of row block `blk` of a sequence: the last block is pulled back
// so it holds block_m real rows.
IDXPLAN_HD int32_t unit_first_row(const ScheduleShape& s, int32_t blk) {
  if (s.block_m == 1) return blk;
  const int32_t first = blk * s.block_m;
  const int32_t pulled = first < s.rows_per_seq - s.block_m ? first : s.rows_per_seq - s.block_m;
  return pulled > 0 ? pulled : 0;
}

// KV tiles (of `block_kv` keys) a unit walks for a context `ctx` whose rows
// end by `end`: none for an empty context, else at least one. Written as
// selects rather than early returns, so a GPU thread's units interleave.
IDXPLAN_HD int32_t unit_tiles(const Divisor& block_kv, int32_t ctx, int32_t end) {
  const int32_t keys = ctx < end ? ctx : end;
  const int32_t tiles = block_kv.divide_up(keys > 0 ? keys : 0);
  return ctx <= 0 ? 0 : (tiles > 1 ? tiles : 1);
}

// The two divisors of tiles_per_slice for a step whose units all have
// tiles (live == work, every step whose decodes hold at least
// compress_ratio tokens): the spare slots and each unit's share of them.
// The host makes them with the launch's arguments, so the device divides by
// multiplies there; a step with a unit without tiles takes the divisions.
struct SliceDivisors {
  Divisor spare{};  // num_ctas - work, at least 1
  Divisor share{};  // spare / work, within [1, 2^29]
};

namespace detail {

// tiles_per_slice's spare slots and share for `live` units with tiles.
IDXPLAN_HD int32_t spare_slots(const ScheduleShape& s, int32_t live) {
  const int32_t spare = s.num_ctas - live;
  return spare > 1 ? spare : 1;
}
// With no spare slot the share is 0 or 1 (1 / live), which the floor of 1
// makes 1, as for a spare of 0. Every share from 2^29 up gives the same
// floor (0 or 1) in tiles_per_slice.
IDXPLAN_HD int32_t spare_share(int32_t spare_slots, int32_t live) {
  const int32_t share = div32(spare_slots, live > 1 ? live : 1);
  return share > 1 ? (share < (1 << 29) ? share : (1 << 29)) : 1;
}

}  // namespace detail

// The divisors of schedule `s` with every unit live (host only: Divisor's
// constructor checks its divisor).
inline SliceDivisors slice_divisors(const ScheduleShape& s) {
  const int32_t spare = detail::spare_slots(s, s.work);
  return SliceDivisors{Divisor(spare), Divisor(detail::spare_share(spare, s.work))};
}

// Tiles per slice, from the step's unit tiles: `total` of them over `live`
// units with any, the largest unit holding `max_unit_tiles`. Spreads the
// tiles over the slots a unit does not already own, within max_tiles, unless
// the largest unit would then need more than four slots per spare share.
// `all_live` are slice_divisors(s), used when every unit has tiles; other
// steps take the two divisions of the share (beside the total's), so the
// schedule is one division deep where it was three. A total past 2^31
// (lengths far past max_model_len) takes a 64-bit division after the rest.
// On the H200 the divisors took decode_4's kernel from 1.88 to 1.77 us (100
// steps in a graph), and the larger steps' by 0.03-0.06 us.
IDXPLAN_HD int32_t tiles_per_slice(const ScheduleShape& s, const SliceDivisors& all_live, int64_t total,
                                   int32_t live, int32_t max_unit_tiles) {
  constexpr int64_t kInt32Max = 0x7FFFFFFF;
  const bool narrow = total < kInt32Max;
  const int32_t narrow_total = narrow ? static_cast<int32_t>(total) : 0;
  // ceil(max_unit_tiles / (share * 4)), as ceil(ceil(max_unit_tiles / 4) / share).
  const int32_t quarter = (max_unit_tiles >> 2) + ((max_unit_tiles & 3) != 0 ? 1 : 0);
  int32_t spare_slots = 0;
  int32_t per_slice = 0;
  int32_t floor = 0;
  if (live == s.work) {
    spare_slots = all_live.spare.divisor();
    per_slice = all_live.spare.divide_up(narrow_total);
    floor = all_live.share.divide_up(quarter);
  } else {
    spare_slots = detail::spare_slots(s, live);
    per_slice = detail::ceil_div32(narrow_total, spare_slots);
    floor = detail::ceil_div32(quarter, detail::spare_share(spare_slots, live));
  }
  if (!narrow) {
    // Past int32, any quotient is cut to max_tiles below anyway.
    const int64_t wide = detail::ceil_div(total, spare_slots);
    per_slice = static_cast<int32_t>(wide < kInt32Max ? wide : kInt32Max);
  }
  per_slice = per_slice > 1 ? per_slice : 1;
  per_slice = per_slice < s.max_tiles ? per_slice : s.max_tiles;
  return per_slice > floor ? per_slice : floor;
}

// Slices of a unit with `tiles` tiles. Capped at the most slots a schedule
// has, which only lengths past max_model_len reach, so the device's int32
// scan of slices cannot overflow.
IDXPLAN_HD int32_t unit_slices(int32_t tiles, int32_t per_slice) {
  const int32_t slices = detail::ceil_div32(tiles, per_slice);
  return slices < kMaxScheduleSlots ? slices : kMaxScheduleSlots;
}
// The same for a thread's many units, by the reciprocal of tiles_per_slice.
IDXPLAN_HD int32_t unit_slices(int32_t tiles, const Reciprocal& per_slice) {
  const int32_t slices = per_slice.divide_up(tiles);
  return slices < kMaxScheduleSlots ? slices : kMaxScheduleSlots;
}

// The step-wide facts tiles_per_slice needs, combined unit by unit (a block
// reduction on the device, a loop on the CPU).
struct TileStats {
  int64_t total = 0;       // tiles over all units
  int32_t live = 0;        // units with tiles
  int32_t max_tiles = 0;   // tiles of the largest unit

  IDXPLAN_HD static TileStats of(int32_t tiles) { return TileStats{tiles, tiles > 0 ? 1 : 0, tiles}; }
  IDXPLAN_HD TileStats operator()(const TileStats& a, const TileStats& b) const {
    return TileStats{a.total + b.total, a.live + b.live,
                     a.max_tiles > b.max_tiles ? a.max_tiles : b.max_tiles};
  }
};

// One descriptor: the slice of a unit a slot walks. All-zero words are an
// idle slot (a walk that reads slices <= index does nothing).
struct Descriptor {
  int32_t seq = 0;     // sequence of the unit
  int32_t blk = 0;     // row block of the unit
  int32_t slice = 0;   // this slot's slice of the unit
  int32_t slices = 0;  // slices of the unit

  constexpr auto tie() const { return std::tie(seq, blk, slice, slices); }
};
static_assert(sizeof(Descriptor) == kDescriptorWords * sizeof(int32_t), "4 int32 words");

// `row_blocks` divides by the schedule's row blocks a sequence.
IDXPLAN_HD Descriptor unit_descriptor(const Divisor& row_blocks, int32_t unit, int32_t slice,
                                      int32_t slices) {
  const int32_t seq = row_blocks.divide(unit);
  return Descriptor{seq, unit - seq * row_blocks.divisor(), slice, slices};
}

}  // namespace idxplan

template <>
struct fmt::formatter<idxplan::Descriptor> : idxplan::detail::PlanFormatterBase {
  template <class Ctx>
  auto format(const idxplan::Descriptor& d, Ctx& ctx) const {
    return fmt::format_to(ctx.out(), "Descriptor{{seq={}, blk={}, slice={}/{}}}", d.seq, d.blk,
                          d.slice, d.slices);
  }
};
