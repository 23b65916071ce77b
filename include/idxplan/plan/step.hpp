// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// plan_step(): one engine step on the host, every rule of docs/design.md section 5
// in order, from the engine's host copies of query_start_loc and the seq
// length upper bounds.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "idxplan/config.hpp"
#include "idxplan/error.hpp"
#include "idxplan/plan/decode.hpp"
#include "idxplan/plan/gather.hpp"
#include "idxplan/plan/prefill.hpp"
#include "idxplan/contracts/gluon_mxfp4.hpp"
#include "idxplan/plan/span.hpp"
#include "idxplan/plan/split.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan {

// The num_tokens that means "query_start_loc's last entry": no graph padding.
inline constexpr int64_t kUnpaddedTokens = -1;

namespace detail {

// Grows the plan's arrays to `capacity` (a no-op where they are that big):
// the plan's values stay as they were, even if an allocation throws.
inline void reserve(StepPlan& plan, const PlanCapacity& capacity) {
  const auto chunks = static_cast<std::size_t>(capacity.chunks);
  plan.splits.reserve(chunks);
  plan.prefill.reserve(chunks);
  plan.pieces.reserve(static_cast<std::size_t>(capacity.pieces));
  plan.chunk_groups.reserve(chunks);
  plan.gather_launches.reserve(chunks);
}

}  // namespace detail

// Grows a plan's arrays to the most any step of this geometry needs, so that
// planning into it never allocates.
inline void reserve(StepPlan& plan, const Geometry& g) {
  // make_geometry bounds these bytes by kMaxReservedPlanBytes.
  detail::reserve(plan, PlanCapacity::of(g.config().max_num_batched_tokens, g.config().max_num_seqs));
}

// What check_step learns of a valid step on its way.
struct StepCheck {
  int32_t num_tokens = 0;   // num_tokens, or the last query_start_loc for kUnpaddedTokens
  int32_t max_seq_len = 0;  // max upper bound over the requests
  BatchSplit split{};       // the decodes and prefills (docs/design.md 5.1)
  int32_t first_other = 0;  // the first request with other than next_n rows, or num_reqs
};

namespace detail {

// Throws a StepError naming the first malformed request of a step that
// check_step's pass found one in.
template <class Qsl, class SeqLens>
[[noreturn]] void throw_malformed_request(const Geometry& g, const Qsl& query_start_loc,
                                          const SeqLens& seq_lens_upper_bound) {
  const std::size_t num_reqs = seq_lens_upper_bound.size();
  for (std::size_t r = 0; r < num_reqs; ++r) {
    const int64_t lo = detail::at(query_start_loc, r);
    const int64_t hi = detail::at(query_start_loc, r + 1);
    const int64_t len = detail::at(seq_lens_upper_bound, r);
    if (hi < lo) {
      throw StepError(fmt::format(
          "query_start_loc decreases at request {}: query_start_loc[{}]={} > query_start_loc[{}]={}",
          r, r, lo, r + 1, hi));
    }
    if (len < 0) {
      throw StepError(fmt::format("seq_lens_upper_bound[{}]={} is negative", r, len));
    }
    if (len < hi - lo) {
      throw StepError(fmt::format(
          "seq_lens_upper_bound[{}]={} is below request {}'s query length {} "
          "(query_start_loc[{}] - query_start_loc[{}])",
          r, len, r, hi - lo, r + 1, r));
    }
    if (len > g.config().max_model_len) {
      throw StepError(fmt::format("seq_lens_upper_bound[{}]={} is past max_model_len={}", r, len,
                                  g.config().max_model_len));
    }
  }
  throw StepError("check_step: a request is malformed, but none was found on a second look");
}

}  // namespace detail

// Checks a step's host inputs. Throws StepError naming the request and values.
template <class Qsl, class SeqLens>
StepCheck check_step(const Geometry& g, const Qsl& query_start_loc,
                   const SeqLens& seq_lens_upper_bound, int64_t num_tokens) {
  const std::size_t num_reqs = seq_lens_upper_bound.size();
  if (query_start_loc.size() != num_reqs + 1) {
    throw StepError(fmt::format("query_start_loc has {} entries for {} requests; it needs {}",
                                query_start_loc.size(), num_reqs, num_reqs + 1));
  }
  if (num_reqs > static_cast<std::size_t>(g.config().max_num_seqs)) {
    throw StepError(fmt::format("the step has {} requests, past max_num_seqs={}", num_reqs,
                                g.config().max_num_seqs));
  }
  if (detail::at(query_start_loc, 0) != 0) {
    throw StepError(fmt::format("query_start_loc[0] is {}, not 0", detail::at(query_start_loc, 0)));
  }
  // One pass with no branch finds whether any request is malformed, the
  // longest bound, the first prefill and the first request with other than
  // next_n rows (5.1, 5.3); only a malformed step walks it again, to name
  // its first fault. (Three walks, with a branch a check and early exits,
  // took 1.2-1.3x as long on decode steps of 256 to 4,096 requests.)
  const int64_t max_model_len = g.config().max_model_len;
  const int64_t threshold = g.decode_threshold();
  const int64_t next_n = g.native_next_n();
  int64_t malformed = 0;
  int64_t max_seq_len = 0;
  int64_t first_prefill = static_cast<int64_t>(num_reqs);
  int64_t first_other = static_cast<int64_t>(num_reqs);
  for (std::size_t r = 0; r < num_reqs; ++r) {
    const int64_t query = detail::at(query_start_loc, r + 1) - detail::at(query_start_loc, r);
    const int64_t len = detail::at(seq_lens_upper_bound, r);
    malformed |= static_cast<int64_t>((query < 0) | (len < 0) | (len < query) | (len > max_model_len));
    max_seq_len = std::max(max_seq_len, len);
    const auto at = static_cast<int64_t>(r);
    first_prefill = std::min(first_prefill, query > threshold ? at : first_prefill);
    first_other = std::min(first_other, query != next_n ? at : first_other);
  }
  if (malformed != 0) detail::throw_malformed_request(g, query_start_loc, seq_lens_upper_bound);
  const int64_t last = detail::at(query_start_loc, num_reqs);
  const int64_t tokens = num_tokens == kUnpaddedTokens ? last : num_tokens;
  if (tokens < last) {
    throw StepError(fmt::format("num_tokens={} is below query_start_loc[{}]={}", tokens,
                                num_reqs, last));
  }
  if (tokens > g.config().max_num_batched_tokens) {
    throw StepError(fmt::format("the step has {} tokens, past max_num_batched_tokens={}", tokens,
                                g.config().max_num_batched_tokens));
  }
  const BatchSplit split = split_at(query_start_loc, tokens, static_cast<std::size_t>(first_prefill));
  if (split.num_decodes > 0 && split.num_decode_tokens > g.max_decode_rows()) {
    throw StepError(fmt::format(
        "the step's {} decodes have {} rows, past the {} the decode buffers hold "
        "(max_num_seqs x (num_speculative_tokens + 1), at most max_num_batched_tokens)",
        split.num_decodes, split.num_decode_tokens, g.max_decode_rows()));
  }
  return StepCheck{static_cast<int32_t>(tokens), static_cast<int32_t>(max_seq_len), split,
                   static_cast<int32_t>(first_other)};
}

namespace detail {

// flydsl_fp4's decode grid for `batches` batches of next_n rows: the
// consumer's logits rows are the geometry's width, so the grid's size
// depends on the step's rows alone (a graph replays it).
inline GridShape fp4_decode_grid(const Geometry& g, int32_t batches, int32_t next_n) {
  GridShape s;
  s.batches = batches;
  s.next_n = next_n;
  s.block_k = flydsl_fp4::kBlockK;
  s.max_seq_len = g.logits_width();
  s.s_max = flydsl_fp4::chunks_cap(s.max_seq_len, s.block_k);
  s.ctas = static_cast<int32_t>(flydsl_fp4::decode_ctas(batches, next_n, s.s_max, g.config().decode_parallel_units));
  s.safe = 0;
  return s;
}

// flydsl_fp4's grid of each prefill chunk, max(base, its rows) CTAs over
// its rows, their logits its width; their cta_info one after the other, and
// chunk k's `safe` word 1 + k. Returns the words.
inline int64_t plan_fp4_prefill_grids(const Geometry& g, std::vector<PrefillPlan>& chunks) {
  int64_t words = 0;
  int32_t k = 0;
  for (PrefillPlan& c : chunks) {
    GridShape& s = c.grid;
    s.batches = c.token_end - c.token_start;
    s.block_k = flydsl_fp4::kBlockK;
    s.max_seq_len = c.width;
    s.s_max = flydsl_fp4::chunks_cap(c.width, s.block_k);
    s.ctas = static_cast<int32_t>(flydsl_fp4::prefill_ctas(s.batches, g.config().prefill_parallel_units));
    s.safe = 1 + k++;
    s.words = words;
    words += int64_t{flydsl_fp4::kPrefillWords} * s.ctas;
  }
  return words;
}

}  // namespace detail

// Plans one step into `plan`, reusing its arrays. `query_start_loc` has
// num_reqs + 1 entries and `seq_lens_upper_bound` num_reqs (any ranges of
// integers); `num_tokens` counts graph padding past query_start_loc's end.
// Strong guarantee: every check, and every allocation the step needs, comes
// before the first write, so a plan_step that throws leaves `plan` as it was.
// Reentrant: it touches nothing but its arguments.
template <class Qsl, class SeqLens>
void plan_step(const Geometry& g, const Qsl& query_start_loc, const SeqLens& seq_lens_upper_bound,
               int64_t num_tokens, StepPlan& plan) {
  const StepCheck checked = check_step(g, query_start_loc, seq_lens_upper_bound, num_tokens);
  const BatchSplit& split = checked.split;
  const int32_t num_reqs = static_cast<int32_t>(seq_lens_upper_bound.size());
  const int32_t ratio = g.config().compress_ratio;
  const bool fp4 = g.contract() == Contract::flydsl_fp4;
  // A no-op once the plan is warm (reserve() makes it warm for every step).
  detail::reserve(plan, PlanCapacity::of(split.num_prefill_tokens, num_reqs));

  // Nothing below throws or allocates.
  plan.geometry = g.fingerprint();
  plan.num_reqs = num_reqs;
  plan.num_tokens = checked.num_tokens;
  plan.max_seq_len = checked.max_seq_len;
  plan.decode = DecodePlan{};
  plan.num_prefill_query_start_loc_words = 0;
  plan.num_prefill_schedule_words = 0;
  plan.num_schedule_safe_words = 0;
  plan.splits.clear();
  plan.prefill.clear();
  plan.pieces.clear();
  plan.chunk_groups.clear();
  plan.gather_launches.clear();
  // 5.1: decodes and prefills.
  plan.num_decodes = split.num_decodes;
  plan.num_decode_tokens = split.num_decode_tokens;
  plan.num_prefills = split.num_prefills;
  plan.num_prefill_tokens = split.num_prefill_tokens;

  if (split.num_decodes > 0) {
    // 5.2: one row per decode token.
    DecodePlan& d = plan.decode;
    d.num_rows = split.num_decode_tokens;  // within max_decode_rows: check_step saw to it
    d.num_real_rows =
        static_cast<int32_t>(detail::at(query_start_loc, static_cast<std::size_t>(split.num_decodes)));
    int64_t longest = plan.max_seq_len;
    if (split.num_prefills > 0) {
      longest = 0;
      for (int32_t r = 0; r < split.num_decodes; ++r) {
        longest = std::max(longest, detail::at(seq_lens_upper_bound, static_cast<std::size_t>(r)));
      }
    }
    d.max_seq_len = static_cast<int32_t>(longest);
    d.num_block_cols = static_cast<int32_t>(std::min<int64_t>(g.max_blocks_per_seq(), block_cols_read(g, longest)));
    d.use_gather = g.decode_gathers(plan.max_seq_len / ratio);
    // 5.3 and 5.4: native sequences, and the schedule's shape. FlyDSL's
    // decode kernel masks a native sequence's rows one key apart, which
    // its rows are only at compression 1: elsewhere they run flattened.
    if (!fp4 || ratio == 1) {
      d.native = native_decode_from(query_start_loc, split.num_decodes, d.num_rows, g.native_next_n(),
                                    checked.first_other);
    }
    d.rows_are_requests =
        !d.native.present() && rows_are_requests(query_start_loc, split.num_decodes, d.num_rows);
    if (fp4 && d.num_rows > 0) {  // decodes of no rows (before a prefill) launch nothing
      d.grid = d.native.present() ? detail::fp4_decode_grid(g, d.native.num_seqs, d.native.next_n)
                                  : detail::fp4_decode_grid(g, d.num_rows, 1);
      plan.num_schedule_safe_words = 1;
    } else if (g.contract() == Contract::deepgemm_sm90) {
      // DeepGEMM's metadata over the rows as its kernel takes them:
      // [sequences, next_n] native, else [rows, 1]. Its size is the GPU's.
      d.metadata.batch = d.native.present() ? d.native.num_seqs : d.num_rows;
      d.metadata.next_n = d.native.present() ? d.native.next_n : 1;
      d.metadata.num_sms = g.config().num_compute_units;
    } else if (!fp4) {
      d.schedule = d.native.present()
                       ? schedule_shape(g, d.native.num_seqs, d.native.next_n, true)
                       : schedule_shape(g, d.num_rows, 1, false);
    }
  }

  if (split.num_prefills > 0) {
    // 5.5 to 5.7: the split, its chunks and their plans.
    const auto first = static_cast<std::size_t>(split.num_decodes);
    const auto contexts = detail::index_view(
        static_cast<std::size_t>(split.num_prefills),
        [&](std::size_t i) { return detail::at(seq_lens_upper_bound, first + i) / ratio; });
    const auto query_lens = detail::index_view(
        static_cast<std::size_t>(split.num_prefills), [&](std::size_t i) {
          return detail::at(query_start_loc, first + i + 1) - detail::at(query_start_loc, first + i);
        });
    split_prefill_chunks(contexts, query_lens, g.max_logits_bytes(), split.num_decodes, plan.splits);
    plan.num_prefill_query_start_loc_words = plan_prefill_chunks(
        plan.splits, query_start_loc, seq_lens_upper_bound, g, plan.prefill, plan.pieces);
    pack_chunk_groups(plan.prefill, plan.chunk_groups);
    if (fp4) plan.num_prefill_schedule_words = detail::plan_fp4_prefill_grids(g, plan.prefill);
    if (fp4 && !plan.prefill.empty()) {
      plan.num_schedule_safe_words = 1 + static_cast<int32_t>(plan.prefill.size());
    }
    // 5.8: the candidate consumers' launches.
    if (g.num_candidate_cols() > 0) {
      plan_gather_launches(plan.prefill, plan.pieces, g.gather_rows(), plan.gather_launches);
    }
  }
}

// The same, returning a fresh plan (allocates; engines reuse one plan).
template <class Qsl, class SeqLens>
StepPlan plan_step(const Geometry& g, const Qsl& query_start_loc,
                   const SeqLens& seq_lens_upper_bound, int64_t num_tokens = kUnpaddedTokens) {
  StepPlan plan;
  plan_step(g, query_start_loc, seq_lens_upper_bound, num_tokens, plan);
  return plan;
}

}  // namespace idxplan
