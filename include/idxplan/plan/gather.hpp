// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The candidate consumers' prefill launches (docs/design.md 5.8). A consumer's
// logits are [rows, pool] however long the context, so the dense split,
// sized for the context, would launch it far more often than its memory
// needs: each request's rows go back together across the chunks that cut
// them, then out again at most gather_rows a launch.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "idxplan/plan/types.hpp"

namespace idxplan {

namespace detail {

template <class Out>
void cut_gather_run(const GatherLaunch& run, int32_t gather_rows, Out& out) {
  for (int64_t lo = run.token_start; lo < run.token_end; lo += gather_rows) {
    const int64_t hi = std::min<int64_t>(lo + gather_rows, run.token_end);
    out.push_back(GatherLaunch{static_cast<int32_t>(lo), static_cast<int32_t>(hi), run.request});
  }
}

}  // namespace detail

// Over the chunks that gather, a request's pieces join while each starts on
// the token the last one ended on; a chunk that does not gather ends every
// run. Each run is cut into launches of at most `gather_rows` rows, appended
// to `out`. Their row ends are the step's prefill row ends of
// [token_start, token_end): nothing is copied.
template <class Plans, class Pieces, class Out>
void plan_gather_launches(const Plans& plans, const Pieces& pieces, int32_t gather_rows,
                          Out& out) {
  GatherLaunch run{};
  bool open = false;
  for (std::size_t c = 0; c < plans.size(); ++c) {
    const PrefillPlan& plan = plans[c];
    if (!plan.use_gather) {
      if (open) detail::cut_gather_run(run, gather_rows, out);
      open = false;
      continue;
    }
    for (int32_t p = 0; p < plan.num_pieces; ++p) {
      const RequestRows& piece = pieces[static_cast<std::size_t>(plan.first_piece + p)];
      const int32_t request = plan.first_request + piece.request;
      const int32_t lo = plan.token_start + piece.first_row;
      const int32_t hi = plan.token_start + piece.end_row;
      if (open && run.request == request && run.token_end == lo) {
        run.token_end = hi;
        continue;
      }
      if (open) detail::cut_gather_run(run, gather_rows, out);
      run = GatherLaunch{lo, hi, request};
      open = true;
    }
  }
  if (open) detail::cut_gather_run(run, gather_rows, out);
}

}  // namespace idxplan
