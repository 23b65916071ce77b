// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The flydsl_fp4 contract in a step: the grids' rows as a launch reads them
// (StepArgs), for the CPU fill (fill_launch_schedules, below) and for the
// prepare kernel (device/prepare_step.hpp, through flydsl_fp4_device.hpp's
// writer), the same functions on both.
//
// The decode grid's batches are the step's decode rows, each its own
// context (decode_row_lens), with next_n 1, or at compression 1 its native
// sequences, each its request's context. A prefill chunk's grid has a batch
// a row: its request, counted from the chunk's first (the launch view's
// block table starts there), a window from key 0 to its row end.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "idxplan/config.hpp"
#include "idxplan/contracts/flydsl_fp4.hpp"
#include "idxplan/host_device.hpp"
#include "idxplan/plan/prefill.hpp"
#include "idxplan/plan/span.hpp"
#include "idxplan/plan/step_args.hpp"
#include "idxplan/plan/step_io.hpp"

namespace idxplan::flydsl_fp4 {

// The decode grid's batches and rows a batch: the native sequences, or the rows.
IDXPLAN_HD int32_t decode_batches(const StepArgs& a) { return a.native_next_n > 0 ? a.num_decodes : a.num_decode_rows; }
IDXPLAN_HD int32_t decode_next_n(const StepArgs& a) { return a.native_next_n > 0 ? a.native_next_n : 1; }

// The rows of a grid, as the writers read them: keys(i), the keys of row i,
// and walk(i), which gives the keys of rows i, i + 1, ... one next() at a
// time. A walk finds its first row's request once and then steps from
// request to request, where keys(i) searches query_start_loc for each row:
// the device writer reads the rows a walk a thread.

// The request of a walk's row in query_start_loc and its rows [start,
// end): searched for the walk's first row, then stepped forward.
struct RowRequest {
  int32_t r = 0;
  int32_t start = 0;
  int32_t end = 0;

  // Row `row`'s request among [lo, hi).
  IDXPLAN_HD static RowRequest of(const int32_t* qsl, int32_t lo, int32_t hi, int32_t row) {
    RowRequest q;
    q.r = find_request(qsl, lo, hi, row);
    q.start = qsl[q.r];
    q.end = qsl[q.r + 1];
    return q;
  }
  // Steps to the request of `row`, at or past the current one's rows, and
  // before hi (empty requests are stepped over); true where it moved.
  IDXPLAN_HD bool step_to(const int32_t* qsl, int32_t row, int32_t hi) {
    bool moved = false;
    while (row >= end && r + 1 < hi) {
      start = end;
      end = qsl[++r + 1];
      moved = true;
    }
    return moved;
  }
};

// Keys of decode batch i.
struct DecodeRows {
  const StepArgs* a;
  IDXPLAN_HD int32_t keys(int32_t i) const {
    return a->native_next_n > 0 ? a->by_compress_ratio.divide(decode_seq_len_at(*a, i)) : decode_row_len_at(*a, i);
  }

  // Native batches are their requests; flattened rows, past the real ones,
  // are padding of 0 keys (decode_row_len_at).
  struct Walk {
    const StepArgs* a;
    int32_t i;
    RowRequest q{};  // row i's, while i is a real flattened row
    int32_t seq = 0;  // its length, clamped
    IDXPLAN_HD int32_t next() {
      const int32_t row = i++;
      if (a->native_next_n > 0) return a->by_compress_ratio.divide(decode_seq_len_at(*a, row));
      if (row >= a->num_real_decode_rows) return 0;
      if (q.step_to(a->in.query_start_loc, row, a->num_decodes)) seq = decode_seq_len_at(*a, q.r);
      return decode_row_len(seq, q.end - q.start, row - q.start, a->by_compress_ratio);
    }
  };
  IDXPLAN_HD Walk walk(int32_t i) const {
    Walk w{a, i};
    if (a->native_next_n == 0 && i < a->num_real_decode_rows) {
      w.q = RowRequest::of(a->in.query_start_loc, 0, a->num_decodes, i);
      w.seq = decode_seq_len_at(*a, w.q.r);
    }
    return w;
  }
};

// The stores of a split, given its row's keys (the device writer's), or
// finding them (the CPU fill's).
struct DecodeStore {
  const StepArgs* a;
  IDXPLAN_HD void operator()(int32_t slot, Split split, int32_t keys) const {
    store_decode_slot(a->out.decode_schedule.data, slot, decode_next_n(*a), split, keys);
  }
  IDXPLAN_HD void operator()(int32_t slot, Split split) const {
    (*this)(slot, split, split.row >= 0 ? DecodeRows{a}.keys(split.row) : 0);
  }
};

// One prefill chunk of a launch: its group, its tokens and its grid.
struct LaunchChunk {
  int32_t group = -1;  // of the launch's groups; -1: none (past the last)
  int32_t token_start = 0;
  int32_t token_end = 0;
  int32_t index = 0;  // the step's chunk: its `safe` is word 1 + index
  int32_t ctas = 0;
  int32_t s_max = 1;
  int32_t words = 0;  // its cta_info's first word in prefill_schedule
};

// The chunk of group k from token t: a group is cut into chunks of
// slice_rows rows, the last the rest; the chunk's logits are the group's
// width, max_seq_len / C.
IDXPLAN_HD LaunchChunk launch_chunk(const StepArgs& a, const ChunkGroup* groups, int32_t k, int32_t t, int32_t index,
                                    int32_t words) {
  const ChunkGroup& g = groups[k];
  LaunchChunk c;
  c.group = k;
  c.token_start = t;
  c.token_end = g.token_end - t < g.slice_rows ? g.token_end : t + g.slice_rows;
  c.index = index;
  const int32_t rows = c.token_end - c.token_start;
  c.ctas = rows > a.fp4_prefill_base ? rows : a.fp4_prefill_base;
  const int32_t width = a.by_compress_ratio.divide(g.max_seq_len);
  c.s_max = width > 0 ? chunks_of(width, kBlockK) : 1;
  c.words = words;
  return c;
}

// The launch's chunks in order: for (c = first_chunk(..); c.group >= 0;
// c = next_chunk(.., c)). None without prefill grids.
IDXPLAN_HD LaunchChunk first_chunk(const StepArgs& a, const ChunkGroup* groups) {
  if (a.fp4_prefill_base <= 0 || a.num_groups == 0) return LaunchChunk{};
  return launch_chunk(a, groups, 0, groups[0].token_start, a.fp4_first_chunk, a.fp4_first_word);
}
IDXPLAN_HD LaunchChunk next_chunk(const StepArgs& a, const ChunkGroup* groups, const LaunchChunk& c) {
  const int32_t words = c.words + kPrefillWords * c.ctas;
  if (c.token_end < groups[c.group].token_end) return launch_chunk(a, groups, c.group, c.token_end, c.index + 1, words);
  if (c.group + 1 < a.num_groups) {
    return launch_chunk(a, groups, c.group + 1, groups[c.group + 1].token_start, c.index + 1, words);
  }
  return LaunchChunk{};
}

// Keys of row j of a chunk: the row end of its token (prefill_row_end_at).
struct ChunkRows {
  const StepArgs* a;
  const ChunkGroup* groups;
  int32_t first_token;
  IDXPLAN_HD int32_t keys(int32_t j) const { return prefill_row_end_at(*a, groups, first_token + j); }

  struct Walk {
    const StepArgs* a;
    const ChunkGroup* groups;
    int32_t t;        // the next row's token
    int32_t tokens;   // the step's, query_start_loc[num_reqs]; past them, padding
    RowRequest q{};   // token t's, while t < tokens
    int32_t seq = 0;  // its length, within its bound
    IDXPLAN_HD int32_t next() {
      const int32_t token = t++;
      if (token >= tokens) return 0;
      if (q.step_to(a->in.query_start_loc, token, a->num_reqs)) seq = seq_len_at(*a, groups, q.r);
      return prefill_row_end(seq, q.end - q.start, token - q.start, a->compress_ratio);
    }
  };
  IDXPLAN_HD Walk walk(int32_t j) const {
    Walk w{a, groups, first_token + j, a->in.query_start_loc[a->num_reqs]};
    if (w.t < w.tokens) {
      w.q = RowRequest::of(a->in.query_start_loc, a->num_decodes, a->num_reqs, w.t);
      w.seq = seq_len_at(*a, groups, w.q.r);
    }
    return w;
  }
};

struct ChunkStore {
  const StepArgs* a;
  const ChunkGroup* groups;
  const ChunkGroup* group;
  int32_t first_token;
  int32_t* cta_info;
  IDXPLAN_HD void operator()(int32_t slot, Split split, int32_t keys) const {
    int32_t batch = 0;
    if (split.row >= 0) {
      const int32_t first = group->first_request;
      batch = find_request(a->in.query_start_loc, first, first + group->num_reqs, first_token + split.row) - first;
    }
    store_prefill_slot(cta_info, slot, split, batch, 0, keys);
  }
  IDXPLAN_HD void operator()(int32_t slot, Split split) const {
    (*this)(slot, split, split.row >= 0 ? prefill_row_end_at(*a, groups, first_token + split.row) : 0);
  }
};

// The CPU fill of launch `a`'s grids: the decode grid's (its first launch)
// and its chunks'. `a`'s pointers are host memory; check_step_buffers ran.
inline void fill_launch_schedules(const StepArgs& a) {
  if (a.writes_decode && a.fp4_decode_ctas > 0) {
    const DecodeRows rows{&a};
    const auto chunks = [&](int32_t i) { return chunks_of(rows.keys(i), kBlockK); };
    const int32_t slots = a.fp4_decode_ctas / decode_next_n(a);
    const int32_t safe = safe_chunks(decode_batches(a), chunks, slots, a.fp4_decode_s_max);
    a.out.schedule_safe.data[0] = safe;
    assign_slots(decode_batches(a), chunks, safe, slots, DecodeStore{&a});
  }
  for (LaunchChunk c = first_chunk(a, a.groups); c.group >= 0; c = next_chunk(a, a.groups, c)) {
    const ChunkRows rows{&a, a.groups, c.token_start};
    const auto chunks = [&](int32_t j) { return chunks_of(rows.keys(j), kBlockK); };
    const int32_t n = c.token_end - c.token_start;
    const int32_t safe = safe_chunks(n, chunks, c.ctas, c.s_max);
    a.out.schedule_safe.data[1 + c.index] = safe;
    assign_slots(n, chunks, safe, c.ctas,
                 ChunkStore{&a, a.groups, a.groups + c.group, c.token_start, a.out.prefill_schedule.data + c.words});
  }
}

// Where a filled step's grids are not aiter's schedules (the drop-ins'
// rules above) of the lengths the step wrote (its decode batches' contexts,
// each chunk's rows' ends with their requests): a description, or empty.
// `query_start_loc` is the step's, on the host; `out` host memory. For
// checks (the idxplan command's replay, the tests, an engine in doubt);
// allocates.
inline std::string grid_violation(const Geometry& g, const StepPlan& p, Span<const int32_t> query_start_loc,
                                  const StepOutputs& out) {
  const auto differs = [](const int32_t* got, const std::vector<int32_t>& want) {
    return !std::equal(want.begin(), want.end(), got);
  };
  const GridShape& d = p.decode.grid;
  if (p.decode.num_rows > 0) {
    const int32_t* lengths = p.decode.native.present() ? out.context_lens.data : out.decode_row_lens.data;
    const std::vector<int32_t> contexts(lengths, lengths + d.batches);
    const VarctxShape shape = varctx_shape(d.batches, kBlockK, d.ctas, g.logits_width(), d.next_n);
    std::vector<int32_t> want(static_cast<std::size_t>(shape.words()));
    int32_t safe = 0;
    fill_varctx_schedule(shape, contexts, want, &safe);
    if (safe != out.schedule_safe.data[0] || differs(out.decode_schedule.data, want)) {
      return "the decode grid is not compute_varctx_schedule's of the step's decode contexts";
    }
  }
  for (std::size_t k = 0; k < p.prefill.size(); ++k) {
    const PrefillPlan& c = p.prefill[k];
    std::vector<int32_t> batches, ends;
    int32_t r = c.first_request;
    for (int32_t t = c.token_start; t < c.token_end; ++t) {
      while (query_start_loc[static_cast<std::size_t>(r) + 1] <= t) ++r;
      batches.push_back(r - c.first_request);
      ends.push_back(out.prefill_row_ends.data[t - p.num_decode_tokens]);
    }
    const std::vector<int32_t> starts(ends.size(), 0);
    const PrefillShape shape = prefill_shape(c.token_end - c.token_start, kBlockK, c.grid.ctas, c.width);
    std::vector<int32_t> want(static_cast<std::size_t>(shape.words()));
    int32_t safe = 0;
    fill_prefill_schedule(shape, batches, starts, ends, want, &safe);
    if (safe != out.schedule_safe.data[1 + k] || differs(out.prefill_schedule.data + c.grid.words, want)) {
      return fmt::format("prefill chunk {}'s grid is not compute_prefill_schedule's of its rows' ends", k);
    }
  }
  return "";
}

}  // namespace idxplan::flydsl_fp4
