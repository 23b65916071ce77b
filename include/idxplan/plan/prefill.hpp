// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Prefill chunks and their plans (docs/design.md 5.6 and 5.7).

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "idxplan/config.hpp"
#include "idxplan/host_device.hpp"
#include "idxplan/plan/span.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan {

// The request in [lo, hi) that owns step token t, for qsl[lo] <= t <
// qsl[hi]: the last r with qsl[r] <= t, so requests with no rows before it
// are skipped (the reference's bisect_right). A binary search, so a chunk
// costs log(requests), never the group's whole request range. Any indexable
// qsl: the planner's host ranges (Index int64) and the device's pointer
// (int32, in plan/buffers.hpp's bodies).
IDXPLAN_HOST_INSTANTIATED
template <class Qsl, class Index>
IDXPLAN_HD Index find_request(const Qsl& qsl, Index lo, Index hi, Index t) {
  while (hi - lo > 1) {
    const Index mid = lo + (hi - lo) / 2;
    if (static_cast<Index>(qsl[static_cast<std::size_t>(mid)]) <= t) lo = mid; else hi = mid;
  }
  return lo;
}

// Turns the split into the chunks the dense layers launch and plans each
// (docs/design.md 5.6 and 5.7): a split's query slice is the chunk's rows, and
// its requests run from the owner of its first row to the owner of its last,
// so requests with no rows at either end of the split's range are not part
// of it (those between two requests with rows stay). A chunk whose requests'
// host compressed contexts sum to 0 is dropped. Then the requests with rows
// in the chunk, the logits width and the gather gate. Appends to `plans` and
// `pieces`; returns the words of prefill_query_start_loc the chunks use,
// which the trim keeps within 2 * prefill tokens + requests.
template <class Splits, class Qsl, class SeqLens, class Plans, class Pieces>
int32_t plan_prefill_chunks(const Splits& splits, const Qsl& query_start_loc,
                            const SeqLens& seq_lens_upper_bound, const Geometry& geometry,
                            Plans& plans, Pieces& pieces) {
  const int64_t ratio = geometry.config().compress_ratio;
  int32_t qsl_words = 0;
  for (std::size_t s = 0; s < splits.size(); ++s) {
    const ChunkSplit& split = splits[s];
    const int64_t base = detail::at(query_start_loc, static_cast<std::size_t>(split.request_begin));
    const int64_t t0 = base + split.query_begin;
    const int64_t t1 = base + split.query_end;
    const int64_t end = split.request_end;
    const int64_t first = find_request(query_start_loc, int64_t{split.request_begin}, end, t0);
    const int64_t last = find_request(query_start_loc, first, end, t1 - 1);
    int64_t total_context = 0;
    int64_t longest = 0;
    for (int64_t r = first; r <= last; ++r) {
      const int64_t len = detail::at(seq_lens_upper_bound, static_cast<std::size_t>(r));
      total_context += len / ratio;
      longest = std::max(longest, len);
    }
    const int64_t widest = longest / ratio;
    if (total_context == 0) continue;

    PrefillPlan plan;
    plan.token_start = static_cast<int32_t>(t0);
    plan.token_end = static_cast<int32_t>(t1);
    plan.first_request = static_cast<int32_t>(first);
    plan.num_reqs = static_cast<int32_t>(last - first + 1);
    plan.width = static_cast<int32_t>(widest);
    plan.max_seq_len = static_cast<int32_t>(longest);
    plan.use_gather = geometry.prefill_gathers(widest);
    plan.first_piece = static_cast<int32_t>(pieces.size());
    plan.query_start_loc_offset = qsl_words;
    for (int64_t r = first; r <= last; ++r) {
      const int64_t lo = std::max(detail::at(query_start_loc, static_cast<std::size_t>(r)), t0) - t0;
      const int64_t hi = std::min(detail::at(query_start_loc, static_cast<std::size_t>(r) + 1), t1) - t0;
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
// Appends to `out`. Every chunk a request is in covers the same requests
// (docs/design.md 5.6: a split group of several requests is one chunk, a
// sliced one is one request), so a request's groups share its max_seq_len.
template <class Plans, class Groups>
void pack_chunk_groups(const Plans& plans, Groups& out) {
  bool open = false;
  ChunkGroup group{};
  int32_t chunks = 0;
  for (std::size_t c = 0; c < plans.size(); ++c) {
    const PrefillPlan& p = plans[c];
    const int32_t rows = p.token_end - p.token_start;
    const bool joins = open && p.first_request == group.first_request &&
                       p.num_reqs == group.num_reqs && p.max_seq_len == group.max_seq_len &&
                       p.token_start == group.token_end &&
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
                       p.query_start_loc_offset, p.max_seq_len};
    chunks = 1;
    open = true;
  }
  if (open) out.push_back(group);
}

}  // namespace idxplan
