// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Configs and helpers the tests share.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "idxplan/idxplan.hpp"

namespace idxplan::test {

// The DeepSeek-V4.1-sized indexer of docs/design.md section 7 on a 256-CU GPU.
inline IndexerConfig deepseek_config() { return deepseek_v41_config(256); }

// The same indexer on a one-CU GPU with 4096-token contexts (32-entry pages
// of 128 tokens): schedules small enough to work by hand.
inline IndexerConfig small_config() {
  IndexerConfig c = deepseek_config();
  c.max_model_len = 4096;   // 1024 columns: 32 tiles of 32
  c.num_compute_units = 1;  // 8 workgroups for 2-row sequences, 12 for 1-row
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 64;
  c.sparse_logits = false;
  return c;
}

// `c` with small budgets, so that random steps cut their prefills: 64
// requests, 4096 tokens, 64K-token contexts, 1 MB of logits.
inline IndexerConfig small_budgets(IndexerConfig c) {
  c.max_num_seqs = 64;
  c.max_num_batched_tokens = 4096;
  c.max_model_len = 65536;
  c.max_logits_mb = 1;
  return c;
}

// `c` over DeepSeek-V3.2's uncompressed cache: 64-token pages at compression
// 1, dense logits, no candidates.
inline IndexerConfig uncompressed_cache(IndexerConfig c) {
  c.compress_ratio = 1;
  c.block_size = 64;
  c.sparse_logits = false;
  c.candidate_block_size = 0;
  c.candidate_topk_blocks = 0;
  return c;
}

// deepgemm_sm90's geometry: the uncompressed cache (64-token pages are
// DeepGEMM's SM90 block_kv), on an H100's 132 SMs.
inline IndexerConfig deepgemm_config() {
  IndexerConfig c = uncompressed_cache(deepseek_config());
  c.contract = Contract::deepgemm_sm90;
  c.max_model_len = 163840;
  c.num_compute_units = 132;
  return c;
}

// Host buffers for the CPU reference, sized from a geometry; every word
// starts as `poison`, so a word the reference skips shows.
struct HostBuffers : HostStepBuffers {
  explicit HostBuffers(const Geometry& g, int32_t poison = -7) : HostStepBuffers(g, poison) {}
};

// Runs the CPU reference for a planned step with exact `seq_lens` and a
// block table of `table_stride` words a request.
inline void fill_reference(const Geometry& g, const StepPlan& plan, const std::vector<int32_t>& qsl,
                           const std::vector<int32_t>& seq_lens,
                           const std::vector<int32_t>& block_table, int32_t table_stride,
                           HostBuffers& out, bool always_write_decode_block_table = false,
                           bool key_bounds = false) {
  const StepInputs in = make_step_inputs(seq_lens, qsl, block_table, table_stride);
  fill_step_buffers(g, plan, in, out.outputs(always_write_decode_block_table, key_bounds));
}

// The first `n` words of `w`.
inline std::vector<int32_t> slice(const std::vector<int32_t>& w, std::size_t n) {
  return std::vector<int32_t>(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(n));
}

// The message of the E that `f()` throws, or "no error".
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace idxplan::test
