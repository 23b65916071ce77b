// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The step buffers of docs/design.md section 6 on the CPU: fill_step_buffers()
// runs the index functions of step_args.hpp and each contract's
// (contracts/) over every index, which is the reference the tests and the
// idxplan command use. What a step reads and writes, and the checks on
// both, are in step_io.hpp.

#include <cstdint>

#include "idxplan/config.hpp"
#include "idxplan/contracts/deepgemm_sm90_step.hpp"
#include "idxplan/contracts/flydsl_fp4_step.hpp"
#include "idxplan/contracts/gluon_mxfp4_step.hpp"
#include "idxplan/plan/step_args.hpp"
#include "idxplan/plan/step_io.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan {

// The CPU reference of one launch: what the kernel writes, in order, on the
// host. `a`'s pointers are host memory. Unchecked: fill_step_buffers checks
// the buffers first.
inline void fill_step_launch(const StepArgs& a) {
  check_step_args(a);
  for (int32_t w = a.word_begin; w < a.word_end; ++w) {
    a.out.prefill_query_start_loc.data[w] = prefill_query_start_loc_at(a, a.groups, w);
  }
  for (int32_t r = a.request_begin; r < a.request_end; ++r) {
    a.out.context_lens.data[r] = context_len_at(a, a.groups, r);
  }
  for (int32_t t = a.token_begin; t < a.token_end; ++t) {
    const int32_t end = prefill_row_end_at(a, a.groups, t);
    a.out.prefill_row_ends.data[t - a.num_decode_tokens] = end;
    if (a.candidate_block_size > 0) {
      a.out.prefill_block_ends.data[t - a.num_decode_tokens] = block_end(end, a.by_candidate_block);
    }
  }
  if (writes_key_bounds(a)) {
    for (int32_t k = 0; k < a.num_groups; ++k) {
      const ChunkGroup& g = a.groups[k];
      int32_t key_start = 0;
      for (int32_t r = g.first_request; r < g.first_request + g.num_reqs; ++r) {
        const GroupRows rows = group_rows_of(a, g, r);
        for (int32_t t = rows.begin; t < rows.end; ++t) store_key_bounds(a, a.groups, t, key_start);
        key_start += context_len_at(a, a.groups, r);
      }
    }
  }
  flydsl_fp4::fill_launch_schedules(a);
  if (!a.writes_decode) return;

  for (int32_t i = 0; i < a.num_decode_rows; ++i) {
    const int32_t len = decode_row_len_at(a, i);
    a.out.decode_row_lens.data[i] = len;
    if (a.candidate_block_size > 0) a.out.decode_block_ends.data[i] = block_end(len, a.by_candidate_block);
    if (a.num_block_cols == 0) continue;  // the table is not written this step
    const int32_t r = decode_row_request(a, i);
    int32_t* row = a.out.decode_block_table.data + int64_t{i} * a.out.decode_block_table_stride;
    for (int32_t col = 0; col < a.num_block_cols; ++col) {
      row[col] = r < 0 ? 0 : a.in.block_table[int64_t{r} * a.in.block_table_stride + col];
    }
  }

  fill_decode_schedule(a);
  deepgemm_sm90::fill_step_metadata(a);
}

// The CPU reference of a whole step: every launch the device would make,
// after check_step_buffers.
inline void fill_step_buffers(const Geometry& g, const StepPlan& plan, const StepInputs& in,
                              const StepOutputs& out) {
  check_step_buffers(g, plan, in, out);
  const int32_t launches = num_step_launches(plan);
  for (int32_t k = 0; k < launches; ++k) fill_step_launch(make_step_args(g, plan, in, out, k));
}

}  // namespace idxplan
