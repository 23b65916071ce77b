// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// What docs/design.md 9.1 guarantees a consumer of a filled step, whatever
// the device lengths: no launch view tells its launch to read past what the
// plan sized for it. A check on host buffers (the CPU reference's), for the
// tests, the fuzzer, `idxplan replay` and an engine's debug builds.

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "idxplan/config.hpp"
#include "idxplan/plan/launches.hpp"
#include "idxplan/plan/rows.hpp"
#include "idxplan/plan/step_io.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan {

namespace detail {

inline int64_t pages_of(int64_t keys, int32_t page_entries) {
  return keys <= 0 ? 0 : (keys + page_entries - 1) / page_entries;
}

// Keys [0, count) of `values` lie in [0, bound], their pages within
// max_blocks, and `blocks` (if any) hold their candidate-block ends.
inline std::string keys_within(const char* what, const int32_t* values, int64_t count, int64_t bound,
                               int32_t max_blocks, const int32_t* blocks, int32_t block_size,
                               int32_t page_entries) {
  for (int64_t i = 0; i < count; ++i) {
    const int32_t v = values[i];
    if (v < 0 || v > bound) return fmt::format("{}[{}]={} is outside [0, {}]", what, i, v, bound);
    if (max_blocks >= 0 && pages_of(v, page_entries) > max_blocks) {
      return fmt::format("{}[{}]={} keys need {} pages, past max_blocks={}", what, i, v,
                         pages_of(v, page_entries), max_blocks);
    }
    if (blocks != nullptr && blocks[i] != block_end(v, block_size)) {
      return fmt::format("{}[{}]={} has a block end of {}, not {}", what, i, v, blocks[i],
                         block_end(v, block_size));
    }
  }
  return {};
}

}  // namespace detail

// The first place a launch view of a step filled on the host reads past its
// plan, as a message; empty if none. Decode rows and contexts stay within the
// decode bound and the decode launch's max_blocks; a chunk's rows and
// contexts within its width and max_blocks; a candidate launch's within its
// chunk's width.
inline std::string launch_bound_violation(const Geometry& g, const StepPlan& plan, const StepInputs& in,
                                          const StepOutputs& out) {
  const int32_t c = g.config().compress_ratio;
  const int32_t p = g.page_entries();
  const int32_t cbs = g.config().candidate_block_size;
  const DecodeLaunch d = decode_launch(g, plan, in, out);
  if (d.num_seqs > 0) {
    const int64_t bound = plan.decode.max_seq_len / c;
    const int64_t rows = int64_t{d.num_seqs} * d.next_n;
    std::string e = detail::keys_within("decode context_lens", d.context_lens, d.num_seqs, bound,
                                        d.max_blocks, nullptr, cbs, p);
    if (e.empty()) {
      e = detail::keys_within("decode row_ends", d.row_ends, rows, bound, d.max_blocks, d.block_ends, cbs, p);
    }
    if (!e.empty()) return e;
  }
  for (std::size_t i = 0; i < plan.prefill.size(); ++i) {
    const PrefillLaunch l = prefill_launch(g, plan, i, in, out);
    std::string e = detail::keys_within("context_lens", l.context_lens, l.num_reqs, l.width,
                                        l.max_blocks, nullptr, cbs, p);
    if (e.empty()) {
      e = detail::keys_within("row_ends", l.row_ends, l.token_end - l.token_start, l.width, l.max_blocks,
                              l.block_ends, cbs, p);
    }
    if (!e.empty()) return fmt::format("prefill chunk {} (width {}): {}", i, l.width, e);
  }
  for (std::size_t i = 0; i < plan.gather_launches.size(); ++i) {
    const CandidateLaunch l = candidate_launch(g, plan, i, in, out);
    // The chunk its first row is in.
    int32_t width = -1;
    for (const PrefillPlan& chunk : plan.prefill) {
      if (chunk.token_start <= l.token_start && l.token_start < chunk.token_end) width = chunk.width;
    }
    std::string e = detail::keys_within("context_len", l.context_len, 1, width, -1, nullptr, cbs, p);
    if (e.empty()) {
      e = detail::keys_within("row_ends", l.row_ends, l.token_end - l.token_start, width, -1,
                              l.block_ends, cbs, p);
    }
    if (!e.empty()) return fmt::format("candidate launch {} (width {}): {}", i, width, e);
  }
  return {};
}

}  // namespace idxplan
