// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Prefill chunks and their plans (DESIGN.md 5.6 and 5.7), and the row end of
// a prefill row, which the device fills for every prefill token.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "idxplan/config.hpp"
#include "idxplan/host_device.hpp"
#include "idxplan/plan/span.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan {

// Exclusive compressed key bound of row j of a request with (exact) seq
// length L and query length q: keys [0, (L - q + 1 + j) / C). Clamped at 0 so
// a device length below its query length reads nothing rather than going
// negative (valid steps never reach the clamp).
IDXPLAN_HD int32_t prefill_row_end(int32_t seq_len, int32_t query_len, int32_t row,
                                   int32_t compress_ratio) {
  const int32_t end = seq_len - query_len + 1 + row;
  return end > 0 ? end / compress_ratio : 0;
}

// ceil(row_end / candidate_block_size): the candidate blocks a row sees.
IDXPLAN_HD int32_t block_end(int32_t row_end, int32_t candidate_block_size) {
  return (row_end + candidate_block_size - 1) / candidate_block_size;
}

// Turns the split into the chunks the dense layers launch and plans each, as
// the base builder and the reference's plan_prefill_chunks do together:
// token range from the split, a chunk whose requests' host compressed
// contexts sum to 0 dropped, then the requests with rows in the chunk, the
// logits width and the gather gate. The chunk's first request comes from the
// split itself (the reference's bisect skips zero-length requests at a
// chunk's start). Appends to `plans` and `pieces`; returns the words of
// prefill_query_start_loc the chunks use.
template <class Splits, class Qsl, class SeqLens, class Plans, class Pieces>
int32_t plan_prefill_chunks(const Splits& splits, const Qsl& query_start_loc,
                            const SeqLens& seq_lens_upper_bound, const Geometry& geometry,
                            Plans& plans, Pieces& pieces) {
  const int64_t ratio = geometry.config.compress_ratio;
  int32_t qsl_words = 0;
  for (std::size_t s = 0; s < splits.size(); ++s) {
    const ChunkSplit& split = splits[s];
    const std::size_t first = static_cast<std::size_t>(split.request_begin);
    const std::size_t last = static_cast<std::size_t>(split.request_end);
    int64_t total_context = 0;
    int64_t widest = 0;
    for (std::size_t r = first; r < last; ++r) {
      const int64_t context = detail::at(seq_lens_upper_bound, r) / ratio;
      total_context += context;
      widest = std::max(widest, context);
    }
    if (total_context == 0) continue;

    const int64_t base = detail::at(query_start_loc, first);
    const int64_t t0 = base + split.query_begin;
    const int64_t t1 = base + split.query_end;
    PrefillPlan plan;
    plan.token_start = static_cast<int32_t>(t0);
    plan.token_end = static_cast<int32_t>(t1);
    plan.first_request = split.request_begin;
    plan.num_reqs = split.request_end - split.request_begin;
    plan.width = static_cast<int32_t>(widest);
    plan.use_gather = geometry.prefill_gathers(widest);
    plan.first_piece = static_cast<int32_t>(pieces.size());
    plan.query_start_loc_offset = qsl_words;
    for (std::size_t r = first; r < last; ++r) {
      const int64_t lo = std::max(detail::at(query_start_loc, r), t0) - t0;
      const int64_t hi = std::min(detail::at(query_start_loc, r + 1), t1) - t0;
      if (hi > lo) {
        pieces.push_back(RequestRows{static_cast<int32_t>(lo), static_cast<int32_t>(hi),
                                     static_cast<int32_t>(r - first)});
      }
    }
    plan.num_pieces = static_cast<int32_t>(pieces.size()) - plan.first_piece;
    qsl_words += plan.num_reqs + 1;
    plans.push_back(plan);
  }
  return qsl_words;
}

// Folds planned chunks into the groups the device packs them by: a chunk
// joins the group before it when it slices the same requests, starts where
// the group ends and the group's chunks so far are all slice_rows long.
// Appends to `out`.
template <class Plans, class Groups>
void pack_chunk_groups(const Plans& plans, Groups& out) {
  bool open = false;
  ChunkGroup group{};
  int32_t chunks = 0;
  for (std::size_t c = 0; c < plans.size(); ++c) {
    const PrefillPlan& p = plans[c];
    const int32_t rows = p.token_end - p.token_start;
    const bool joins = open && p.first_request == group.first_request &&
                       p.num_reqs == group.num_reqs && p.token_start == group.token_end &&
                       group.token_end - group.token_start == chunks * group.slice_rows &&
                       rows <= group.slice_rows &&
                       p.query_start_loc_offset == group.word_offset + chunks * (group.num_reqs + 1);
    if (joins) {
      group.token_end = p.token_end;
      ++chunks;
      continue;
    }
    if (open) out.push_back(group);
    group = ChunkGroup{p.first_request, p.num_reqs, p.token_start, p.token_end, rows,
                       p.query_start_loc_offset};
    chunks = 1;
    open = true;
  }
  if (open) out.push_back(group);
}

}  // namespace idxplan
