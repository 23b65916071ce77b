// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The keys one query row sees, for decode rows (their row length, docs/design.md
// 5.2) and prefill rows (their row end, section 6) alike, and the candidate
// blocks that cover them. The device computes these from the engine's exact
// lengths, which the host cannot check, so every body is defined for any
// int32 input: a broken engine gets clamped values, never an overflow.

#include <cstdint>

#include "idxplan/host_device.hpp"
#include "idxplan/plan/divide.hpp"

namespace idxplan {

// A device length read within [0, bound], `bound` being the longest host
// upper bound the plan was made with: what the plan's widths and block-table
// columns cover.
IDXPLAN_HD int32_t clamp_seq_len(int32_t seq_len, int32_t bound) {
  return seq_len < 0 ? 0 : (seq_len > bound ? bound : seq_len);
}

// Tokens row `row` of a request with seq length L and query length q sees:
// L - q + row + 1, the tokens before the request's new ones and up to this
// row's own. In 64 bits and clamped to [0, 2^31), so any inputs give a
// dividend the 32-bit divisions take.
IDXPLAN_HD int32_t row_tokens(int32_t seq_len, int32_t query_len, int32_t row) {
  const int64_t tokens = int64_t{seq_len} - query_len + row + 1;
  return tokens < 0 ? 0 : (tokens > 0x7FFFFFFF ? 0x7FFFFFFF : static_cast<int32_t>(tokens));
}

// Compressed context of decode row j (docs/design.md 5.2): keys [0, row_tokens / C).
// `compress_ratio` divides by C.
IDXPLAN_HD int32_t decode_row_len(int32_t seq_len, int32_t query_len, int32_t row,
                                  const Divisor& compress_ratio) {
  return compress_ratio.divide(row_tokens(seq_len, query_len, row));
}

// Exclusive compressed key bound of prefill row j: keys [0, (L - q + 1 + j) / C).
IDXPLAN_HD int32_t prefill_row_end(int32_t seq_len, int32_t query_len, int32_t row,
                                   int32_t compress_ratio) {
  return row_tokens(seq_len, query_len, row) / compress_ratio;
}

// ceil(row_end / candidate_block_size): the candidate blocks a row sees.
// Written without row_end + size - 1, which overflows for a size near 2^31
// (make_geometry checks the size only with sparse logits).
IDXPLAN_HD int32_t block_end(int32_t row_end, int32_t candidate_block_size) {
  if (row_end <= 0) return 0;
  const int32_t whole = row_end / candidate_block_size;
  return row_end - whole * candidate_block_size > 0 ? whole + 1 : whole;
}

// The same, the size as a Divisor: a multiply where the device writes a
// block end a row (the division cost the launch without its schedule 0.13
// us on the H200, 1.58 -> 1.45 at 4 sequences).
IDXPLAN_HD int32_t block_end(int32_t row_end, const Divisor& candidate_block_size) {
  return candidate_block_size.divide_up(row_end > 0 ? row_end : 0);
}

}  // namespace idxplan
