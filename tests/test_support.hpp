// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Configs and helpers the tests share.

#include <cstdint>
#include <vector>

#include "idxplan/idxplan.hpp"

namespace idxplan::test {

// The DeepSeek-V4.1-sized indexer of docs/design.md section 7 on a 256-CU GPU.
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
    stride = g.max_blocks_per_seq();
  }

  // The buffers as a step's outputs, each with its size as its capacity.
  StepOutputs outputs(bool always_write_decode_block_table = false) {
    auto buffer = [](std::vector<int32_t>& v) {
      return OutputBuffer{v.data(), static_cast<int64_t>(v.size())};
    };
    StepOutputs out;
    out.context_lens = buffer(context_lens);
    out.decode_row_lens = buffer(decode_row_lens);
    out.decode_block_ends = buffer(decode_block_ends);
    out.decode_block_table = buffer(decode_block_table);
    out.prefill_row_ends = buffer(prefill_row_ends);
    out.prefill_block_ends = buffer(prefill_block_ends);
    out.prefill_query_start_loc = buffer(prefill_query_start_loc);
    out.decode_schedule = buffer(decode_schedule);
    out.decode_block_table_stride = stride;
    out.always_write_decode_block_table = always_write_decode_block_table;
    return out;
  }
};

// Runs the CPU reference for a planned step with exact `seq_lens` and a
// block table of `table_stride` words a request.
inline void fill_reference(const Geometry& g, const StepPlan& plan, const std::vector<int32_t>& qsl,
                           const std::vector<int32_t>& seq_lens,
                           const std::vector<int32_t>& block_table, int32_t table_stride,
                           HostBuffers& out, bool always_write_decode_block_table = false) {
  const StepInputs in{seq_lens.data(), qsl.data(), block_table.data(), table_stride};
  fill_step_buffers(g, plan, in, out.outputs(always_write_decode_block_table));
}

}  // namespace idxplan::test
