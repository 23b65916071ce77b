// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Which requests are decodes (docs/design.md 5.1), and how the prefills split into
// launches whose logits stay within the budget (5.5).

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "idxplan/plan/span.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan {

struct BatchSplit {
  int32_t num_decodes = 0;
  int32_t num_decode_tokens = 0;
  int32_t num_prefills = 0;
  int32_t num_prefill_tokens = 0;

  constexpr auto tie() const {
    return std::tie(num_decodes, num_decode_tokens, num_prefills, num_prefill_tokens);
  }
};

// The split of split_decodes_and_prefills (below) when the first prefill is
// known (plan_step finds it in its one pass over the step): requests
// [0, first_prefill) decode.
template <class Qsl>
constexpr BatchSplit split_at(const Qsl& query_start_loc, int64_t num_tokens, std::size_t first_prefill) {
  BatchSplit split;
  const std::size_t num_reqs = query_start_loc.size() == 0 ? 0 : query_start_loc.size() - 1;
  if (num_reqs == 0 || num_tokens == 0) return split;
  split.num_decodes = static_cast<int32_t>(first_prefill);
  split.num_prefills = static_cast<int32_t>(num_reqs - first_prefill);
  split.num_decode_tokens =
      first_prefill == num_reqs
          ? static_cast<int32_t>(num_tokens)
          : static_cast<int32_t>(detail::at(query_start_loc, first_prefill));
  split.num_prefill_tokens = static_cast<int32_t>(num_tokens) - split.num_decode_tokens;
  return split;
}

// Decodes are the leading requests with at most `threshold` query rows; every
// request from the first longer one on is a prefill. `query_start_loc` has
// num_reqs + 1 entries; `num_tokens` counts graph padding past its end. When
// every request decodes, the padding belongs to the decodes; otherwise to the
// prefills.
template <class Qsl>
constexpr BatchSplit split_decodes_and_prefills(const Qsl& query_start_loc, int64_t num_tokens,
                                                int32_t threshold) {
  const std::size_t num_reqs = query_start_loc.size() == 0 ? 0 : query_start_loc.size() - 1;
  std::size_t first_prefill = 0;
  while (first_prefill < num_reqs &&
         detail::at(query_start_loc, first_prefill + 1) - detail::at(query_start_loc, first_prefill) <=
             threshold) {
    ++first_prefill;
  }
  return split_at(query_start_loc, num_tokens, first_prefill);
}

// Rows of fp32 logits `width` columns wide that fit the budget; at least one.
constexpr int64_t max_logits_rows(int64_t max_logits_bytes, int64_t width) {
  return std::max<int64_t>(1, max_logits_bytes / (4 * std::max<int64_t>(width, 1)));
}

// The reference's split_prefill_chunks. `context_lens[i]` and `query_lens[i]`
// describe prefill request i (any ranges of integers); chunks are appended
// to `out` (anything with push_back) with requests offset by
// `request_offset`. A group of requests grows while its rows fit
// max_logits_rows of its widest context, its first request always fitting;
// a group past that (one wide request) is cut on its query rows.
template <class Contexts, class QueryLens, class Out>
void split_prefill_chunks(const Contexts& context_lens, const QueryLens& query_lens,
                          int64_t max_logits_bytes, int32_t request_offset, Out& out) {
  const std::size_t n = context_lens.size();
  std::size_t end = 0;
  while (end < n) {
    const std::size_t start = end;
    int64_t rows = 0;
    int64_t width = 0;
    while (end < n) {
      const int64_t q = detail::at(query_lens, end);
      const int64_t w = std::max(width, detail::at(context_lens, end));
      if (rows > 0 && rows + q > max_logits_rows(max_logits_bytes, w)) break;
      rows += q;
      width = w;
      ++end;
    }
    const int64_t step = max_logits_rows(max_logits_bytes, width);
    for (int64_t lo = 0; lo < rows; lo += step) {
      out.push_back(ChunkSplit{static_cast<int32_t>(start) + request_offset,
                               static_cast<int32_t>(end) + request_offset,
                               static_cast<int32_t>(lo),
                               static_cast<int32_t>(std::min(lo + step, rows))});
    }
  }
}

}  // namespace idxplan

template <>
struct fmt::formatter<idxplan::BatchSplit> : idxplan::detail::PlanFormatterBase {
  template <class Ctx>
  auto format(const idxplan::BatchSplit& s, Ctx& ctx) const {
    return fmt::format_to(ctx.out(),
                          "BatchSplit{{num_decodes={}, num_decode_tokens={}, num_prefills={}, "
                          "num_prefill_tokens={}}}",
                          s.num_decodes, s.num_decode_tokens, s.num_prefills, s.num_prefill_tokens);
  }
};
