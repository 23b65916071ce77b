// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The engine boundary (docs/design.md section 9): from a plan and the step's
// buffers to each launch of aiter's kernels, with the pointers, counts and
// strides that launch takes. Host only: these functions do address
// arithmetic on the StepInputs and StepOutputs they are given and never
// dereference them, so the pointers are device pointers when the buffers
// live on the GPU and host pointers with the CPU reference. Each throws
// StepError for a plan of another geometry or an index past the plan's.

#include <cstdint>

#include <fmt/format.h>

#include "idxplan/config.hpp"
#include "idxplan/error.hpp"
#include "idxplan/plan/step_io.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan {

// The step's decode rows as the dense decode launch walks them: num_seqs
// sequences of next_n rows (native), or every row a sequence of one
// (flattened). The reference's decode_native, or its flattened rows, and
// decode_schedule. num_seqs == 0: the step has no decode launch.
struct DecodeLaunch {
  int32_t num_seqs = 0;                     // sequences: decode requests, or rows when flattened
  int32_t next_n = 1;                       // rows a sequence: native_next_n, or 1
  const int32_t* context_lens = nullptr;    // [num_seqs] compressed context of each sequence
  const int32_t* row_ends = nullptr;        // [num_seqs * next_n] keys each row sees
  const int32_t* block_ends = nullptr;      // [num_seqs * next_n] candidate blocks each row
                                            // sees; null without candidate blocks
  const int32_t* block_table = nullptr;     // [num_seqs, block_table_stride] each sequence's
                                            // pages: the engine's table in place, or
                                            // decode_block_table for ragged rows
  int32_t block_table_stride = 0;           // words per block_table row
  int32_t max_blocks = 0;                   // columns a row reads at most
  const int32_t* row_block_table = nullptr;  // [num_seqs * next_n, row_block_table_stride]
                                            // each row's pages, for consumers that walk
                                            // rows one at a time; null on a native step
                                            // unless always_write_decode_block_table
  int32_t row_block_table_stride = 0;
  const int32_t* schedule = nullptr;        // [4 * num_ctas] descriptors (gluon_mxfp4), the
                                            // grid's cta_info (flydsl_fp4), or DeepGEMM's
                                            // [num_ctas + 1, 2] metadata (deepgemm_sm90, its
                                            // schedule_meta); null without one
  int32_t num_ctas = 0;                     // workgroups of the scheduled launch (SMs under
                                            // deepgemm_sm90)
  int64_t schedule_words = 0;               // words of schedule
  const int32_t* safe = nullptr;            // flydsl_fp4: [1] the grid's `safe`; else null
  int32_t max_seq_len = 0;                  // flydsl_fp4: keys a logits row holds, the grid's
                                            // max_seq_len (the geometry's logits width)
  bool use_gather = false;                  // the candidate consumers score these rows too
  bool in_place = false;                    // block_table is the engine's own table
};

// One dense prefill chunk: the reference's prefill_plans[i] with its chunk.
struct PrefillLaunch {
  int32_t token_start = 0;                  // first step token of the chunk
  int32_t token_end = 0;                    // one past its last
  int32_t first_request = 0;                // step index of the chunk's first request
  int32_t num_reqs = 0;                     // requests the chunk covers
  int32_t width = 0;                        // logits columns
  const int32_t* context_lens = nullptr;    // [num_reqs] compressed context of each request
  const int32_t* row_ends = nullptr;        // [token_end - token_start] keys each row sees
  const int32_t* block_ends = nullptr;      // [token_end - token_start]; null without blocks
  const int32_t* query_start_loc = nullptr;  // [num_reqs + 1] rows of each request, from 0
  const int32_t* block_table = nullptr;     // [num_reqs, block_table_stride]: the engine's
                                            // row of first_request and those after it
  int32_t block_table_stride = 0;
  int32_t max_blocks = 0;                   // columns a row reads at most: ceil(width / P)
                                            // (under flydsl_fp4, with the chunk read ahead)
  const int32_t* schedule = nullptr;        // flydsl_fp4: [num_ctas, 6] the chunk's cta_info; else null
  int32_t num_ctas = 0;
  const int32_t* safe = nullptr;            // flydsl_fp4: [1] its `safe`
  bool use_gather = false;                  // the candidate consumers gather for this chunk
};

// One candidate-consumer prefill launch: the reference's gather_launches[i].
struct CandidateLaunch {
  int32_t token_start = 0;                  // first step token
  int32_t token_end = 0;                    // one past the last
  int32_t request = 0;                      // step index of the request
  const int32_t* context_len = nullptr;     // [1] compressed context of the request
  const int32_t* row_ends = nullptr;        // [token_end - token_start] keys each row sees
  const int32_t* block_ends = nullptr;      // [token_end - token_start]; null without blocks
  const int32_t* block_table = nullptr;     // [1, block_table_stride]: the request's engine row
  int32_t block_table_stride = 0;
};

namespace detail {

inline void require_launch_index(const char* what, std::size_t i, std::size_t count) {
  if (i >= count) {
    throw StepError(fmt::format("{} {} of a plan that has {}", what, i, count));
  }
}

// Prefill token t's word in prefill_row_ends and prefill_block_ends.
inline std::ptrdiff_t prefill_row(const StepPlan& plan, int32_t t) {
  return static_cast<std::ptrdiff_t>(t) - plan.num_decode_tokens;
}

// `b` + `offset` words, or null for an absent buffer.
inline const int32_t* at_word(const int32_t* b, std::ptrdiff_t offset) {
  return b == nullptr ? nullptr : b + offset;
}

// Request r's row of the engine's block table, or null without a table.
inline const int32_t* engine_row(const StepInputs& in, int32_t r) {
  return at_word(in.block_table, static_cast<std::ptrdiff_t>(r) * in.block_table_stride);
}

}  // namespace detail

// The decode launch of a planned step. Which table its rows read (docs/design.md section 6):
// a native step's sequence s is request s, and rows that are their own
// requests' (DecodePlan::rows_are_requests) are too, so both read the
// engine's table in place; only ragged rows read decode_block_table, which
// the prepare launch then writes.
inline DecodeLaunch decode_launch(const Geometry& g, const StepPlan& plan, const StepInputs& in,
                                  const StepOutputs& out) {
  require_plan_of(g, plan);
  const DecodePlan& d = plan.decode;
  DecodeLaunch l;
  if (d.num_rows == 0) return l;
  const bool native = d.native.present();
  l.num_seqs = native ? d.native.num_seqs : d.num_rows;
  l.next_n = native ? d.native.next_n : 1;
  l.context_lens = native ? out.context_lens.data : out.decode_row_lens.data;
  l.row_ends = out.decode_row_lens.data;
  l.block_ends = g.config().candidate_block_size > 0 ? out.decode_block_ends.data : nullptr;
  l.in_place = !d.ragged();
  l.block_table = l.in_place ? in.block_table : out.decode_block_table.data;
  l.block_table_stride = l.in_place ? in.block_table_stride : out.decode_block_table_stride;
  l.max_blocks = d.num_block_cols;
  if (d.rows_are_requests) {
    l.row_block_table = in.block_table;
    l.row_block_table_stride = in.block_table_stride;
  } else if (writes_decode_block_table(plan, out)) {
    l.row_block_table = out.decode_block_table.data;
    l.row_block_table_stride = out.decode_block_table_stride;
  }
  if (d.schedule.present()) {
    l.schedule = out.decode_schedule.data;
    l.num_ctas = d.schedule.num_ctas;
    l.schedule_words = int64_t{kDescriptorWords} * d.schedule.num_ctas;
  }
  if (d.metadata.present()) {
    l.schedule = out.decode_schedule.data;
    l.num_ctas = d.metadata.num_sms;
    l.schedule_words = d.metadata.words();
  }
  if (d.grid.present()) {
    l.schedule = out.decode_schedule.data;
    l.num_ctas = d.grid.ctas;
    l.schedule_words = int64_t{flydsl_fp4::kDecodeWords} * d.grid.ctas;
    l.safe = out.schedule_safe.data;
    l.max_seq_len = d.grid.max_seq_len;
  }
  l.use_gather = d.use_gather;
  return l;
}

// Dense prefill chunk `i` (of plan.prefill) of a planned step.
inline PrefillLaunch prefill_launch(const Geometry& g, const StepPlan& plan, std::size_t i,
                                    const StepInputs& in, const StepOutputs& out) {
  require_plan_of(g, plan);
  detail::require_launch_index("prefill_launch: chunk", i, plan.prefill.size());
  const PrefillPlan& c = plan.prefill[i];
  PrefillLaunch l;
  l.token_start = c.token_start;
  l.token_end = c.token_end;
  l.first_request = c.first_request;
  l.num_reqs = c.num_reqs;
  l.width = c.width;
  l.context_lens = detail::at_word(out.context_lens.data, c.first_request);
  l.row_ends = detail::at_word(out.prefill_row_ends.data, detail::prefill_row(plan, c.token_start));
  if (g.config().candidate_block_size > 0) {
    l.block_ends = detail::at_word(out.prefill_block_ends.data, detail::prefill_row(plan, c.token_start));
  }
  l.query_start_loc = detail::at_word(out.prefill_query_start_loc.data, c.query_start_loc_offset);
  l.block_table = detail::engine_row(in, c.first_request);
  l.block_table_stride = in.block_table_stride;
  l.max_blocks = g.contract() == Contract::flydsl_fp4
                     ? block_cols_read(g, c.max_seq_len)
                     : static_cast<int32_t>(idxplan::detail::ceil_div(c.width, g.page_entries()));
  if (c.grid.present()) {
    l.schedule = detail::at_word(out.prefill_schedule.data, static_cast<std::ptrdiff_t>(c.grid.words));
    l.num_ctas = c.grid.ctas;
    l.safe = detail::at_word(out.schedule_safe.data, c.grid.safe);
  }
  l.use_gather = c.use_gather;
  return l;
}

// Candidate-consumer launch `i` (of plan.gather_launches) of a planned step.
inline CandidateLaunch candidate_launch(const Geometry& g, const StepPlan& plan, std::size_t i,
                                        const StepInputs& in, const StepOutputs& out) {
  require_plan_of(g, plan);
  detail::require_launch_index("candidate_launch: launch", i, plan.gather_launches.size());
  const GatherLaunch& gl = plan.gather_launches[i];
  CandidateLaunch l;
  l.token_start = gl.token_start;
  l.token_end = gl.token_end;
  l.request = gl.request;
  l.context_len = detail::at_word(out.context_lens.data, gl.request);
  l.row_ends = detail::at_word(out.prefill_row_ends.data, detail::prefill_row(plan, gl.token_start));
  if (g.config().candidate_block_size > 0) {
    l.block_ends = detail::at_word(out.prefill_block_ends.data, detail::prefill_row(plan, gl.token_start));
  }
  l.block_table = detail::engine_row(in, gl.request);
  l.block_table_stride = in.block_table_stride;
  return l;
}

}  // namespace idxplan
