// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Ready configs for known models, to start from and adjust.

#include <cstdint>

#include "idxplan/config.hpp"

namespace idxplan {

// DeepSeek-V4.1's indexer (64 heads of 128, 4x compression, 8-entry candidate
// blocks, a 2048-block pool) with MTP next_n 2, 1M-token contexts and sparse
// logits, on a GPU of `num_compute_units` CUs.
inline IndexerConfig deepseek_v41_config(int32_t num_compute_units) {
  IndexerConfig c;
  c.num_heads = 64;
  c.head_dim = 128;
  c.block_size = 128;
  c.compress_ratio = 4;
  c.num_speculative_tokens = 1;
  c.max_model_len = 1048576;
  c.candidate_block_size = 8;
  c.candidate_topk_blocks = 2048;
  c.sparse_logits = true;
  c.max_logits_mb = 512;
  c.num_compute_units = num_compute_units;
  c.max_num_seqs = 1024;
  c.max_num_batched_tokens = 65536;
  return c;
}

}  // namespace idxplan
