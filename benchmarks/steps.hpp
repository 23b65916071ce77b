// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The steps the benchmarks plan, on docs/design.md section 7's DeepSeek-V4.1-sized
// indexer on a 256-CU GPU.

#include <cstdint>
#include <vector>

#include "idxplan/presets.hpp"

namespace idxplan::bench {

struct BenchStep {
  std::vector<int32_t> query_start_loc;
  std::vector<int32_t> seq_lens;
};

inline IndexerConfig deepseek_config() { return deepseek_v41_config(256); }

// Contexts spread over 1K to 200K tokens, deterministically.
inline int32_t spread_context(int32_t r) { return 1024 + (r * 104729) % (200000 - 1024); }

// `n` decodes, request r with rows(r) query rows.
template <class Rows>
BenchStep decodes(int32_t n, Rows rows) {
  BenchStep s;
  s.query_start_loc.push_back(0);
  for (int32_t r = 0; r < n; ++r) {
    s.query_start_loc.push_back(s.query_start_loc.back() + rows(r));
    s.seq_lens.push_back(spread_context(r));
  }
  return s;
}

// `n` MTP decodes of next_n 2.
inline BenchStep mtp_decodes(int32_t n) {
  return decodes(n, [](int32_t) { return 2; });
}

// `n` decodes of one and two rows in turn: ragged flattened rows.
inline BenchStep flat_decodes(int32_t n) {
  return decodes(n, [](int32_t r) { return 1 + r % 2; });
}

// `n` decodes of one row each (no MTP): flattened rows that are their own
// requests', which read the engine's block table in place.
inline BenchStep one_row_decodes(int32_t n) {
  return decodes(n, [](int32_t) { return 1; });
}

// 1016 MTP decodes, the 8192-token piece of a 1M-token chunked prefill, and
// seven short prompts: 1024 requests.
inline BenchStep mixed_1024() {
  BenchStep s = mtp_decodes(1016);
  auto add = [&](int32_t query, int32_t len) {
    s.query_start_loc.push_back(s.query_start_loc.back() + query);
    s.seq_lens.push_back(len);
  };
  add(8192, 1048576);
  for (int32_t r = 0; r < 7; ++r) add(200 + 300 * r, 200 + 300 * r);
  return s;
}

// The robustness issue's step, on zero_rows_config(): a 600-token prefill,
// `num_reqs - 2` requests with no rows, then a 64,936-token prefill of a
// 1M-token request, which the split cuts into 1,015 slices of 64 rows.
// Before docs/design.md 5.6's trim every slice carried every empty request.
inline BenchStep zero_rows(int32_t num_reqs) {
  BenchStep s;
  s.query_start_loc = {0, 600};
  s.seq_lens = {1048576};
  for (int32_t r = 0; r < num_reqs - 2; ++r) {
    s.query_start_loc.push_back(600);
    s.seq_lens.push_back(1000 + r);
  }
  s.query_start_loc.push_back(65536);
  s.seq_lens.push_back(1048576);
  return s;
}

// The DeepSeek-V4.1 preset with a 64 MiB logits budget and room for 4096
// requests, which zero_rows() needs.
inline IndexerConfig zero_rows_config() {
  IndexerConfig c = deepseek_config();
  c.max_logits_mb = 64;
  c.max_num_seqs = 4096;
  return c;
}

}  // namespace idxplan::bench
