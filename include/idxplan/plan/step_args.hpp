// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// What one launch of a step knows (StepArgs, passed to the kernel by value)
// and the step buffers' words as functions of one index, from it: the CPU
// reference (buffers.hpp) runs them over every index, and the device kernel
// (device/prepare_step.hpp) calls them unchanged, except that its decode
// parts walk requests with the same row formulas (rows.hpp). Each
// contract's words (contracts/) are functions of the same StepArgs.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <fmt/format.h>

#include "idxplan/config.hpp"
#include "idxplan/error.hpp"
#include "idxplan/host_device.hpp"
#include "idxplan/plan/decode.hpp"
#include "idxplan/plan/prefill.hpp"
#include "idxplan/plan/rows.hpp"
#include "idxplan/contracts/gluon_mxfp4.hpp"
#include "idxplan/plan/step_io.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan {

// Chunk groups one launch carries in its arguments (28 bytes each, within
// the 4 KiB of kernel arguments HIP allows). A step with more groups takes
// further launches, each writing its groups' packed words and the contexts
// and prefill rows of their requests.
inline constexpr int32_t kMaxLaunchGroups = 128;

// Everything one launch needs, passed to the kernel by value. The fields
// the decode schedule reads come first, beside the lengths' pointer: a
// kernel's arguments are read through a small constant cache, and each of
// its lines the schedule's dependent chain reaches first is a wait. On the
// H200 this order made every step 0.03-0.06 us faster than with the
// outputs second (100 steps in a graph).
struct StepArgs {
  StepInputs in{};
  int32_t compress_ratio = 1;
  Divisor by_compress_ratio{};       // compress_ratio and the schedule's block_kv and
  Divisor by_block_kv{};             // row_blocks, as multiplies (the host computes
  Divisor by_row_blocks{};           // them)
  int32_t max_decode_seq_len = 0;    // the plan's longest host upper bound of its decodes
  int32_t num_real_decode_rows = 0;  // qsl[num_decodes]: rows past it are graph padding
  ScheduleShape schedule{};
  SliceDivisors all_live{};          // slice_divisors(schedule)
  uint32_t whole_tiles = 0;          // Divisor(compress_ratio * block_kv)'s multiplier where
                                     // whole_sequence_tiles holds (set_whole_tiles), else 0;
                                     // in all_live's padding, so no field after it moves
  StepOutputs out{};
  int32_t candidate_block_size = 0;  // 0: no block ends
  Divisor by_candidate_block{};      // candidate_block_size, or 1 without block ends
  Divisor by_next_n{};               // native_next_n, or 1 when the step is not native
  int32_t num_reqs = 0;
  int32_t num_decodes = 0;
  int32_t num_decode_rows = 0;  // decode tokens when the step has decodes, else 0
  int32_t native_next_n = 0;    // rows per decode request when native, else 0
  int32_t num_block_cols = 0;   // decode_block_table columns a row copies; 0 when the
                                // step does not write the table
  int32_t num_decode_tokens = 0;
  int32_t max_seq_len = 0;      // the plan's longest host upper bound of the step
                                // (seq_len_bound says which bound a request's is)
  bool writes_decode = true;    // the step's first launch: the decode buffers and schedule
  int32_t request_begin = 0;    // context_lens [request_begin, request_end) and the
  int32_t request_end = 0;      // prefill rows of step tokens [token_begin, token_end):
  int32_t token_begin = 0;      // the requests and tokens of this launch's groups (the
  int32_t token_end = 0;        // first launch's from 0 and from the first prefill token)
  int32_t num_groups = 0;       // groups[0, num_groups) this launch packs ...
  int32_t word_begin = 0;       // ... into words [word_begin, word_end)
  int32_t word_end = 0;
  ChunkGroup groups[kMaxLaunchGroups];
  // flydsl_fp4 (zeros under gluon_mxfp4): the decode grid (DecodePlan::grid,
  // its batches the native sequences or the rows), which the step's first
  // launch writes, and the grids of the launch's groups' prefill chunks,
  // max(fp4_prefill_base, a chunk's rows) CTAs each, the first being the
  // step's chunk fp4_first_chunk, its words from fp4_first_word. Past the
  // groups, so that no field before them moves; 20 bytes, as the kernel's
  // arguments have 4 KiB (make_geometry keeps the words within int32).
  int32_t fp4_decode_ctas = 0;   // 0: no decode grid
  int32_t fp4_decode_s_max = 1;
  int32_t fp4_prefill_base = 0;  // 0: no prefill grids
  int32_t fp4_first_chunk = 0;
  int32_t fp4_first_word = 0;
  // deepgemm_sm90: the SMs of the decode rows' metadata (DecodePlan::metadata,
  // whose sequences are the launch's: native ones, else the rows), which the
  // step's first launch writes; 0: none. The last 4 bytes of the 4 KiB.
  int32_t metadata_sms = 0;
};
static_assert(std::is_trivially_copyable_v<StepArgs>, "kernel arguments are copied bytewise");
static_assert(sizeof(StepArgs) <= 4096, "HIP passes at most 4 KiB of kernel arguments");

// Launches a step takes: one, plus one per further kMaxLaunchGroups groups.
inline int32_t num_step_launches(const StepPlan& plan) {
  const auto groups = static_cast<int64_t>(plan.chunk_groups.size());
  return static_cast<int32_t>(std::max<int64_t>(1, (groups + kMaxLaunchGroups - 1) / kMaxLaunchGroups));
}

// StepArgs::whole_tiles of the step: where it has a schedule, the keys of
// a tile, C * K (the compression ratio by the schedule's block_kv), are at
// least 2, and its longest decode bound, not negative, plus C * K - C
// stays in int32, the multiplier of Divisor(C * K); else 0, and the kernel
// takes sequence_unit_tiles for every sequence.
inline uint32_t whole_tiles_of(const StepArgs& a) {
  const int64_t keys = int64_t{a.by_compress_ratio.divisor()} * a.by_block_kv.divisor();
  const bool hold = a.schedule.present() && keys >= 2 && keys <= 0x7FFFFFFF && a.max_decode_seq_len >= 0 &&
                    a.max_decode_seq_len + keys - a.by_compress_ratio.divisor() <= 0x7FFFFFFF;
  return hold ? Divisor(static_cast<int32_t>(keys)).multiplier() : 0;
}
inline void set_whole_tiles(StepArgs& a) { a.whole_tiles = whole_tiles_of(a); }

// The arguments of launch `launch` of a planned step.
inline StepArgs make_step_args(const Geometry& g, const StepPlan& plan, const StepInputs& in,
                               const StepOutputs& out, int32_t launch = 0) {
  StepArgs a;
  a.in = in;
  a.out = out;
  a.compress_ratio = g.config().compress_ratio;
  a.by_compress_ratio = Divisor(g.config().compress_ratio);
  a.by_block_kv = Divisor(plan.decode.schedule.present() ? plan.decode.schedule.block_kv : 1);
  a.by_row_blocks = Divisor(plan.decode.schedule.present() ? plan.decode.schedule.row_blocks : 1);
  a.all_live = slice_divisors(plan.decode.schedule);
  a.candidate_block_size = g.config().candidate_block_size;
  a.by_candidate_block = Divisor(a.candidate_block_size > 0 ? a.candidate_block_size : 1);
  a.by_next_n = Divisor(plan.decode.native.next_n > 0 ? plan.decode.native.next_n : 1);
  a.num_reqs = plan.num_reqs;
  a.num_decodes = plan.num_decodes;
  a.num_decode_rows = plan.decode.num_rows;
  a.num_real_decode_rows = plan.decode.num_real_rows;
  a.native_next_n = plan.decode.native.next_n;
  a.num_block_cols = writes_decode_block_table(plan, out) ? plan.decode.num_block_cols : 0;
  a.num_decode_tokens = plan.num_decode_tokens;
  a.max_seq_len = plan.max_seq_len;
  a.max_decode_seq_len = plan.decode.max_seq_len;
  a.writes_decode = launch == 0;
  a.schedule = plan.decode.schedule;
  set_whole_tiles(a);
  const std::size_t first = static_cast<std::size_t>(launch) * kMaxLaunchGroups;
  const std::size_t last = std::min(plan.chunk_groups.size(), first + kMaxLaunchGroups);
  a.num_groups = static_cast<int32_t>(last > first ? last - first : 0);
  for (std::size_t i = first; i < last; ++i) a.groups[i - first] = plan.chunk_groups[i];
  a.word_begin = a.num_groups > 0 ? a.groups[0].word_offset : 0;
  const bool more = last < plan.chunk_groups.size();
  a.word_end = more ? plan.chunk_groups[last].word_offset : plan.num_prefill_query_start_loc_words;
  if (launch == 0) a.metadata_sms = plan.decode.metadata.num_sms;
  if (g.contract() == Contract::flydsl_fp4) {
    if (launch == 0) {
      a.fp4_decode_ctas = plan.decode.grid.ctas;
      a.fp4_decode_s_max = plan.decode.grid.s_max;
    }
    // The launch's first chunk: the step's first whose tokens begin its first group's.
    std::size_t chunk = 0;
    if (a.num_groups > 0) {
      while (chunk < plan.prefill.size() && plan.prefill[chunk].token_start < a.groups[0].token_start) ++chunk;
      a.fp4_prefill_base = g.config().prefill_parallel_units > 0 ? g.config().prefill_parallel_units
                                                                  : flydsl_fp4::kPrefillBaseCtas;
      a.fp4_first_chunk = static_cast<int32_t>(chunk);
      a.fp4_first_word = chunk < plan.prefill.size() ? static_cast<int32_t>(plan.prefill[chunk].grid.words) : 0;
    }
  }
  // A group's first token is its first request's first row, so the tokens
  // of a launch's range belong to the requests of its range. The step's
  // rows are the ones its requests own: a step with no request owns none of
  // its padding tokens.
  a.request_begin = launch == 0 ? 0 : a.groups[0].first_request;
  a.request_end = more ? plan.chunk_groups[last].first_request : plan.num_reqs;
  a.token_begin = launch == 0 ? plan.num_decode_tokens : a.groups[0].token_start;
  a.token_end = more ? plan.chunk_groups[last].token_start : plan.num_decode_tokens + plan.num_prefill_tokens;
  return a;
}

// Throws unless the divisors of `a` are those of its fields, as
// make_step_args sets them, and its schedule's slices walk at least one tile:
// a hand-built StepArgs would otherwise divide by the wrong numbers without
// a word, or by 0.
inline void check_step_args(const StepArgs& a) {
  const bool schedule = a.schedule.present();
  if (a.by_compress_ratio.divisor() != a.compress_ratio ||
      (schedule && (a.by_block_kv.divisor() != a.schedule.block_kv ||
                    a.by_row_blocks.divisor() != a.schedule.row_blocks)) ||
      (a.candidate_block_size > 0 && a.by_candidate_block.divisor() != a.candidate_block_size) ||
      (a.native_next_n > 0 && a.by_next_n.divisor() != a.native_next_n)) {
    throw StepError(fmt::format(
        "StepArgs: the divisors ({}, {}, {}, {}, {}) are not compress_ratio={}, schedule block_kv={}, "
        "row_blocks={}, candidate_block_size={} and native_next_n={}; build StepArgs with make_step_args",
        a.by_compress_ratio.divisor(), a.by_block_kv.divisor(), a.by_row_blocks.divisor(),
        a.by_candidate_block.divisor(), a.by_next_n.divisor(), a.compress_ratio, a.schedule.block_kv,
        a.schedule.row_blocks, a.candidate_block_size, a.native_next_n));
  }
  // tiles_per_slice caps its spread at max_tiles, then raises it to a floor
  // from the largest unit, 0 where no unit has tiles: with max_tiles under 1
  // it returns 0 there, and unit_slices divides by it.
  if (schedule && a.schedule.max_tiles < 1) {
    throw StepError(fmt::format(
        "StepArgs: the schedule's max_tiles={} (num_ctas={}, work={}) is under 1, but a slice walks at least "
        "one tile; build StepArgs with make_step_args",
        a.schedule.max_tiles, a.schedule.num_ctas, a.schedule.work));
  }
  // whole_tiles is 0 or what set_whole_tiles sets (0 always holds).
  if (schedule && a.whole_tiles != 0 && a.whole_tiles != whole_tiles_of(a)) {
    throw StepError(fmt::format(
        "StepArgs: whole_tiles={} is not {}, the multiplier of compress_ratio={} by block_kv={} where "
        "max_decode_seq_len={} plus their product less compress_ratio stays in int32, else 0; build StepArgs "
        "with make_step_args",
        a.whole_tiles, whole_tiles_of(a), a.compress_ratio, a.schedule.block_kv, a.max_decode_seq_len));
  }
  if (a.metadata_sms < 0) {
    throw StepError(fmt::format("StepArgs: metadata_sms={} is negative; build StepArgs with make_step_args",
                                a.metadata_sms));
  }
  if (schedule) {
    const SliceDivisors want = slice_divisors(a.schedule);
    if (a.all_live.spare.divisor() != want.spare.divisor() || a.all_live.share.divisor() != want.share.divisor()) {
      throw StepError(fmt::format(
          "StepArgs: all_live divides by spare={} and share={}, but the schedule (num_ctas={}, work={}) "
          "has spare={} and share={}; build StepArgs with make_step_args",
          a.all_live.spare.divisor(), a.all_live.share.divisor(), a.schedule.num_ctas, a.schedule.work,
          want.spare.divisor(), want.share.divisor()));
    }
  }
}

// The bodies: each a function of one index.

// The longest length request r's launches were sized for (docs/design.md
// 9.1): a decode's, the decode launch's bound; a prefill's, the longest host
// upper bound of its chunk, whose width is that over C; a request in no
// chunk (no rows, or a dropped chunk's), which no launch reads, the step's.
// `groups` are the launch's, which hold every prefill request of its range.
IDXPLAN_HD int32_t seq_len_bound(const StepArgs& a, const ChunkGroup* groups, int32_t r) {
  // The last group whose first request is at most r, if any.
  int32_t lo = 0;
  int32_t hi = a.num_groups;
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (groups[mid].first_request <= r) lo = mid; else hi = mid;
  }
  int32_t group_first = 0;
  int32_t group_end = 0;
  int32_t group_bound = 0;
  if (a.num_groups > 0) {
    group_first = groups[lo].first_request;
    group_end = group_first + groups[lo].num_reqs;
    group_bound = groups[lo].max_seq_len;
  }
  // Selects between values, not between a group's field and the kernel
  // argument's: a select of their addresses made clang 15 (hipcc 5.2) copy
  // the whole StepArgs to scratch, 3,936 bytes a thread
  // (scripts/device-resources).
  const bool in_group = group_first <= r && r < group_end;
  return r < a.num_decodes ? a.max_decode_seq_len : (in_group ? group_bound : a.max_seq_len);
}

// The exact lengths the device reads, each within its request's bound
// (rows.hpp): a broken engine's lengths cannot make a row reach past its
// launch's width and block-table columns, whatever the step's other
// requests hold.
IDXPLAN_HD int32_t seq_len_at(const StepArgs& a, const ChunkGroup* groups, int32_t r) {
  return clamp_seq_len(a.in.seq_lens[r], seq_len_bound(a, groups, r));
}
IDXPLAN_HD int32_t decode_seq_len_at(const StepArgs& a, int32_t r) {
  return clamp_seq_len(a.in.seq_lens[r], a.max_decode_seq_len);
}

IDXPLAN_HD int32_t context_len_at(const StepArgs& a, const ChunkGroup* groups, int32_t r) {
  return a.by_compress_ratio.divide(seq_len_at(a, groups, r));
}

// The request decode row i belongs to, or -1 for a graph padding row.
// The host's query_start_loc is the device's, so the plan's row counts and
// native shape stand for device reads: a native request r holds rows
// [r * next_n, (r + 1) * next_n).
IDXPLAN_HD int32_t decode_row_request(const StepArgs& a, int32_t i) {
  if (i >= a.num_real_decode_rows) return -1;
  // Native: every real request has next_n rows, so no search.
  if (a.native_next_n > 0) return a.by_next_n.divide(i);
  return find_request(a.in.query_start_loc, 0, a.num_decodes, i);
}

IDXPLAN_HD int32_t decode_row_len_at(const StepArgs& a, int32_t i) {
  const int32_t r = decode_row_request(a, i);
  if (r < 0) return 0;
  if (a.native_next_n > 0) {
    return decode_row_len(decode_seq_len_at(a, r), a.native_next_n, i - r * a.native_next_n,
                          a.by_compress_ratio);
  }
  const int32_t start = a.in.query_start_loc[r];
  return decode_row_len(decode_seq_len_at(a, r), a.in.query_start_loc[r + 1] - start, i - start,
                        a.by_compress_ratio);
}

// Row end of step token t, a prefill token of the launch's range; 0 for
// padding past the last request. `groups` are the launch's.
IDXPLAN_HD int32_t prefill_row_end_at(const StepArgs& a, const ChunkGroup* groups, int32_t t) {
  if (t >= a.in.query_start_loc[a.num_reqs]) return 0;
  const int32_t r = find_request(a.in.query_start_loc, a.num_decodes, a.num_reqs, t);
  const int32_t start = a.in.query_start_loc[r];
  return prefill_row_end(seq_len_at(a, groups, r), a.in.query_start_loc[r + 1] - start, t - start,
                         a.compress_ratio);
}

// Word w of prefill_query_start_loc, w in [word_begin, word_end): of the
// chunk whose packed offsets hold it, clamp(qsl[first + i], t0, t1) - t0.
// `groups` are the launch's groups (the kernel stages them in shared memory).
IDXPLAN_HD int32_t prefill_query_start_loc_at(const StepArgs& a, const ChunkGroup* groups,
                                              int32_t w) {
  int32_t lo = 0;
  int32_t hi = a.num_groups;
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (groups[mid].word_offset <= w) lo = mid; else hi = mid;
  }
  const ChunkGroup& g = groups[lo];
  const int32_t words = g.num_reqs + 1;
  const int32_t chunk = (w - g.word_offset) / words;
  const int32_t t0 = g.token_start + chunk * g.slice_rows;
  const int32_t t1 = t0 + g.slice_rows < g.token_end ? t0 + g.slice_rows : g.token_end;
  const int32_t loc = a.in.query_start_loc[g.first_request + (w - g.word_offset) % words];
  const int32_t clamped = loc < t0 ? t0 : (loc > t1 ? t1 : loc);
  return clamped - t0;
}

// Whether the launch writes the prefill rows' key bounds (an engine that
// asked for them gave both buffers; check_step_buffers says so).
IDXPLAN_HD bool writes_key_bounds(const StepArgs& a) { return a.out.prefill_key_starts.data != nullptr; }

// The rows of request r that chunk group g holds: [begin, end) step tokens.
struct GroupRows {
  int32_t begin = 0;
  int32_t end = 0;
};
IDXPLAN_HD GroupRows group_rows_of(const StepArgs& a, const ChunkGroup& g, int32_t r) {
  const int32_t lo = a.in.query_start_loc[r];
  const int32_t hi = a.in.query_start_loc[r + 1];
  return GroupRows{lo > g.token_start ? lo : g.token_start, hi < g.token_end ? hi : g.token_end};
}

// Step token t's key bounds, the contexts of its chunk's requests before its
// own summing to `key_start`. Every chunk of a group begins at the group's
// first request (a group of several requests is one chunk; a sliced group's
// chunks hold its one request with rows), so the sum runs from there.
IDXPLAN_HD void store_key_bounds(const StepArgs& a, const ChunkGroup* groups, int32_t t, int32_t key_start) {
  const int32_t row = t - a.num_decode_tokens;
  a.out.prefill_key_starts.data[row] = key_start;
  a.out.prefill_key_ends.data[row] = key_start + prefill_row_end_at(a, groups, t);
}

}  // namespace idxplan
