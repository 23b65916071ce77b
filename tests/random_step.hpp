// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Seeded random steps for the property tests (CPU) and the device tests
// (GPU): native, flattened, padded and ragged decodes, chunked prefills with
// and without gathers, on a handful of geometries.

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "idxplan/config.hpp"
#include "test_support.hpp"

namespace idxplan::test {

struct RandomStep {
  std::vector<int32_t> query_start_loc;  // [num_reqs + 1]
  std::vector<int32_t> seq_lens;         // [num_reqs] exact
  std::vector<int32_t> seq_lens_upper_bound;
  std::vector<int32_t> block_table;      // [num_reqs, table_stride]
  int32_t table_stride = 0;
  int64_t num_tokens = 0;
};

// The geometries random steps run on: small budgets so prefills cut, a few
// CUs so schedules exist on small steps, and the DeepSeek sizes.
inline std::vector<Geometry> random_geometries() {
  std::vector<Geometry> out;
  IndexerConfig c = small_budgets(deepseek_config());
  c.candidate_topk_blocks = 64;  // 512 candidate columns: gathers from 768 columns
  c.num_compute_units = 4;
  out.push_back(make_geometry(c));
  c.num_speculative_tokens = 3;  // next_n 4, pairs of rows
  c.num_heads = 32;              // few heads: wider row blocks
  c.num_compute_units = 2;
  out.push_back(make_geometry(c));
  c.adaptive_verification = true;  // always flattened
  c.sparse_logits = false;
  c.candidate_block_size = 0;
  out.push_back(make_geometry(c));
  IndexerConfig big = deepseek_config();
  big.max_num_seqs = 256;
  big.max_num_batched_tokens = 16384;
  big.max_logits_mb = 64;
  out.push_back(make_geometry(big));
  // Many heads and next_n 5: two row blocks of 3 rows a sequence, the
  // second pulled back to rows 2-4, on enough CUs that a schedule passes a
  // warp's units.
  IndexerConfig pulled = small_budgets(deepseek_config());
  pulled.num_speculative_tokens = 4;
  pulled.num_compute_units = 16;
  out.push_back(make_geometry(pulled));
  return out;
}

// flydsl_fp4 geometries: MTP decodes flattened (compression 4), adaptive
// ones, native sequences at compression 1, and grids the engine sizes.
inline std::vector<Geometry> flydsl_geometries() {
  std::vector<Geometry> out;
  IndexerConfig c = small_budgets(deepseek_config());
  c.contract = Contract::flydsl_fp4;
  c.num_speculative_tokens = 1;
  out.push_back(make_geometry(c));
  c.num_speculative_tokens = 3;
  c.adaptive_verification = true;
  c.prefill_parallel_units = 64;
  out.push_back(make_geometry(c));
  IndexerConfig native = uncompressed_cache(c);  // compression 1: native sequences of 2 rows
  native.adaptive_verification = false;
  native.num_speculative_tokens = 1;
  native.max_model_len = 16384;
  native.decode_parallel_units = 256;
  out.push_back(make_geometry(native));
  return out;
}

// deepgemm_sm90 geometries, pages of DeepGEMM's 64 keys: DeepSeek-V3.2's
// uncompressed cache with MTP decodes native in sequences of 2 on an H100's
// 132 SMs; next_n 4 at compression 4, which DeepGEMM's SM90 kernels take
// flattened, on 5 SMs; adaptive drafts on one SM.
inline std::vector<Geometry> deepgemm_geometries() {
  std::vector<Geometry> out;
  IndexerConfig c = small_budgets(deepgemm_config());
  c.num_speculative_tokens = 1;
  out.push_back(make_geometry(c));
  c.compress_ratio = 4;
  c.block_size = 256;
  c.candidate_block_size = 8;  // block ends beside the metadata
  c.num_speculative_tokens = 3;
  c.num_compute_units = 5;
  out.push_back(make_geometry(c));
  c.num_speculative_tokens = 1;
  c.adaptive_verification = true;
  c.num_compute_units = 1;
  out.push_back(make_geometry(c));
  return out;
}

// Distinct page ids, cheaply: a scrambled index, so a wrong row or column shows.
inline void scramble_table(std::vector<int32_t>& table, uint32_t salt) {
  for (std::size_t i = 0; i < table.size(); ++i) {
    table[i] = static_cast<int32_t>((static_cast<uint32_t>(i) * 2654435761u ^ salt) >> 1);
  }
}

// A random step that is valid for `g`. One in sixteen has every length under
// C tokens where its queries allow, so its compressed lengths are 0, as in
// graph capture.
inline RandomStep random_step(const Geometry& g, std::mt19937_64& rng) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const IndexerConfig& c = g.config();
  const int32_t t = g.decode_threshold();
  const int64_t max_len = c.max_model_len;
  RandomStep s;
  const int kind = static_cast<int>(uniform(0, 5));  // 0-1 decode only, 2-4 mixed, 5 prefill only
  const bool uniform_decode = uniform(0, 1) == 1;
  const bool zero_lengths = uniform(0, 15) == 0;
  const int64_t max_reqs = std::min<int64_t>(c.max_num_seqs, kind <= 1 ? c.max_num_seqs : 24);
  const int64_t num_reqs = uniform(0, max_reqs);
  const int64_t num_decodes = kind == 5 ? 0 : (kind <= 1 ? num_reqs : uniform(0, num_reqs));
  const int64_t padding_reqs = kind <= 1 && uniform(0, 2) == 0 ? uniform(0, num_decodes) : 0;
  int64_t tokens = 0;
  s.query_start_loc.push_back(0);
  for (int64_t r = 0; r < num_reqs; ++r) {
    int64_t q;
    if (r < num_decodes - padding_reqs) {
      q = uniform_decode ? g.native_next_n() : uniform(0, t);
      q = std::min<int64_t>(q, t);
    } else if (r < num_decodes) {
      q = 0;  // cudagraph padding requests
    } else if (r == num_decodes) {
      q = uniform(t + 1, t + 1 + uniform(0, 1) * 600);  // the first prefill
    } else {
      q = uniform(0, 3) == 0 ? 0 : uniform(1, uniform(0, 1) ? 8 : 300);
    }
    const int64_t budget = c.max_num_batched_tokens - tokens - 64;
    q = std::max<int64_t>(0, std::min(q, budget));
    if (r == num_decodes && q <= t) q = 0;  // no room for a prefill: stop here
    if (r == num_decodes && q == 0) {
      s.query_start_loc.resize(static_cast<std::size_t>(r) + 1);
      break;
    }
    tokens += q;
    s.query_start_loc.push_back(static_cast<int32_t>(tokens));
    const int64_t ub_lo = q;
    int64_t ub = zero_lengths ? uniform(0, c.compress_ratio - 1)
                              : uniform(ub_lo, uniform(0, 3) == 0 ? max_len
                                                                  : std::min<int64_t>(max_len, ub_lo + 5000));
    ub = std::min(std::max(ub, ub_lo), max_len);
    // The exact length is the bound, or less (an async scheduler's bound).
    const int64_t exact = uniform(0, 3) == 0 ? uniform(q, ub) : ub;
    s.seq_lens_upper_bound.push_back(static_cast<int32_t>(ub));
    s.seq_lens.push_back(static_cast<int32_t>(exact));
  }
  const int64_t reqs = static_cast<int64_t>(s.seq_lens.size());
  const int64_t last = s.query_start_loc.back();
  s.num_tokens = last;
  if (uniform(0, 3) == 0) {
    // Graph padding, bounded by what the buffers hold.
    const bool all_decode = reqs == 0 || reqs <= num_decodes;
    const int64_t room = all_decode ? g.max_decode_rows() : c.max_num_batched_tokens;
    s.num_tokens = std::min<int64_t>(room, last + uniform(0, 16));
    s.num_tokens = std::max(s.num_tokens, last);
  }
  // An engine's table may be wider than the geometry's, and unaligned.
  s.table_stride = g.max_blocks_per_seq() + static_cast<int32_t>(uniform(0, 1) * uniform(1, 5));
  s.block_table.resize(static_cast<std::size_t>(reqs * s.table_stride));
  scramble_table(s.block_table, static_cast<uint32_t>(rng()));
  return s;
}

// A decode step of 1 to max_num_seqs requests of decode_threshold rows
// each (native where the geometry has native decodes, else ragged, which
// copies the table), their exact lengths under their bounds one time in
// four: the big schedules random_step seldom draws.
inline RandomStep full_decode_step(const Geometry& g, std::mt19937_64& rng) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int32_t rows = g.decode_threshold();
  const int64_t reqs = uniform(1, g.config().max_num_seqs);
  RandomStep s;
  s.query_start_loc.push_back(0);
  for (int64_t r = 0; r < reqs; ++r) {
    s.query_start_loc.push_back(s.query_start_loc.back() + rows);
    const auto bound = static_cast<int32_t>(uniform(rows, g.config().max_model_len));
    s.seq_lens_upper_bound.push_back(bound);
    s.seq_lens.push_back(uniform(0, 3) == 0 ? static_cast<int32_t>(uniform(rows, bound)) : bound);
  }
  s.num_tokens = s.query_start_loc.back();
  s.table_stride = g.max_blocks_per_seq();
  s.block_table.resize(static_cast<std::size_t>(reqs * s.table_stride));
  scramble_table(s.block_table, 0);
  return s;
}

// A prefill step full of requests with no rows: before, between and after
// requests with rows, and opening groups that a wide request then fills and
// the split cuts into query slices (docs/design.md 5.6). Exact lengths are the bounds.
inline RandomStep zero_row_step(const Geometry& g, std::mt19937_64& rng) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const IndexerConfig& c = g.config();
  const int64_t max_len = c.max_model_len;
  RandomStep s;
  s.query_start_loc.push_back(0);
  const int64_t num_reqs = uniform(1, c.max_num_seqs);
  int64_t tokens = 0;
  for (int64_t r = 0; r < num_reqs; ++r) {
    const int64_t budget = c.max_num_batched_tokens - tokens;
    // The first request must be a prefill, so the whole step is one.
    int64_t q = r == 0 ? g.decode_threshold() + 1 : (uniform(0, 2) == 0 ? uniform(1, 40) : 0);
    if (r == 0 && q > budget) break;
    q = std::min(q, budget);
    tokens += q;
    s.query_start_loc.push_back(static_cast<int32_t>(tokens));
    const int64_t len = uniform(0, 2) == 0 ? max_len : std::min(max_len, q + uniform(0, 3000));
    s.seq_lens_upper_bound.push_back(static_cast<int32_t>(std::max(len, q)));
  }
  s.seq_lens = s.seq_lens_upper_bound;
  s.num_tokens = s.query_start_loc.back();
  s.table_stride = g.max_blocks_per_seq();
  s.block_table.assign(s.seq_lens.size() * static_cast<std::size_t>(s.table_stride), 1);
  return s;
}

}  // namespace idxplan::test
