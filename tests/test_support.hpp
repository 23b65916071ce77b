// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Configs and helpers the tests share.

#include <cstdint>
#include <vector>

#include "idxplan/idxplan.hpp"

namespace idxplan::test {

// The DeepSeek-V4.1-sized indexer of DESIGN.md section 7 on a 256-CU GPU.
inline IndexerConfig deepseek_config() { return deepseek_v41_config(256); }

// Host buffers for the CPU reference, sized from a geometry.
struct HostBuffers {
  std::vector<int32_t> context_lens, decode_row_lens, decode_block_ends, decode_block_table,
      prefill_row_ends, prefill_block_ends, prefill_query_start_loc, decode_schedule;
  int32_t stride = 0;

  // Every word starts as `poison`, so a word the reference skips shows.
  explicit HostBuffers(const Geometry& g, int32_t poison = -7) {
    const StepBufferSizes s = step_buffer_sizes(g);
    auto make = [&](int64_t n) { return std::vector<int32_t>(static_cast<std::size_t>(n), poison); };
    context_lens = make(s.context_lens);
    decode_row_lens = make(s.decode_rows);
    decode_block_ends = make(s.decode_rows);
    decode_block_table = make(s.decode_block_table);
    prefill_row_ends = make(s.prefill_rows);
    prefill_block_ends = make(s.prefill_rows);
    prefill_query_start_loc = make(s.prefill_query_start_loc);
    decode_schedule = make(s.decode_schedule);
    stride = g.max_blocks_per_seq;
  }

  StepOutputs outputs() {
    return StepOutputs{context_lens.data(),       decode_row_lens.data(),
                       decode_block_ends.data(),  decode_block_table.data(),
                       prefill_row_ends.data(),   prefill_block_ends.data(),
                       prefill_query_start_loc.data(), decode_schedule.data(), stride};
  }
};

// Runs the CPU reference for a planned step with exact `seq_lens` and a
// block table of `table_stride` words a request.
inline void fill_reference(const Geometry& g, const StepPlan& plan, const std::vector<int32_t>& qsl,
                           const std::vector<int32_t>& seq_lens,
                           const std::vector<int32_t>& block_table, int32_t table_stride,
                           HostBuffers& out) {
  const StepInputs in{seq_lens.data(), qsl.data(), block_table.data(), table_stride};
  fill_step_buffers(g, plan, in, out.outputs());
}

}  // namespace idxplan::test
