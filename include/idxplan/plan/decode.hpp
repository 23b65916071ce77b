// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Whether the decode rows run as next_n-row sequences (docs/design.md 5.3). A
// decode row's length is in rows.hpp.

#include <cstddef>
#include <cstdint>

#include "idxplan/plan/span.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan {

// native_decode (below) when the first request with other than next_n rows
// is known: `first_other` is it, or any index from num_decodes on when no
// decode has other than next_n rows (plan_step finds it in its one pass over
// the step).
template <class Qsl>
constexpr NativeDecode native_decode_from(const Qsl& query_start_loc, int32_t num_decodes, int32_t num_rows,
                                          int32_t next_n, int32_t first_other) {
  if (next_n <= 1 || int64_t{num_rows} != int64_t{num_decodes} * next_n) return {};
  const int32_t full = first_other < num_decodes ? first_other : num_decodes;
  // Everything after the full requests must be empty padding.
  if (detail::at(query_start_loc, static_cast<std::size_t>(num_decodes)) !=
      detail::at(query_start_loc, static_cast<std::size_t>(full))) {
    return {};
  }
  return NativeDecode{next_n, num_decodes};
}

// The decode rows as next_n-row sequences, or flattened (next_n == 0) when a
// request has other than next_n rows. `query_start_loc` covers at least the
// num_decodes + 1 decode offsets; `num_rows` is the decode tokens, graph
// padding included. Trailing requests with no rows are cudagraph padding and
// keep their next_n rows with no context. Only the step's shape decides, so a
// graph captured on a uniform batch replays the same launch on a padded one.
template <class Qsl>
constexpr NativeDecode native_decode(const Qsl& query_start_loc, int32_t num_decodes,
                                     int32_t num_rows, int32_t next_n) {
  int32_t r = 0;
  while (r < num_decodes && detail::at(query_start_loc, static_cast<std::size_t>(r) + 1) -
                                    detail::at(query_start_loc, static_cast<std::size_t>(r)) ==
                                next_n) {
    ++r;
  }
  return native_decode_from(query_start_loc, num_decodes, num_rows, next_n, r);
}

// Whether flattened decode row i is request i's for every row: the first
// num_real_rows requests have one row each, the rest none, and the padded
// rows do not outnumber the requests. Then a row reads its request's row of
// the engine's block table, as a native sequence does, and nothing is copied.
template <class Qsl>
constexpr bool rows_are_requests(const Qsl& query_start_loc, int32_t num_decodes, int32_t num_rows) {
  if (num_rows > num_decodes) return false;
  // qsl[num_decodes] is the real rows; each request before them has one.
  const int64_t real = detail::at(query_start_loc, static_cast<std::size_t>(num_decodes));
  for (int64_t r = 1; r <= real; ++r) {
    if (detail::at(query_start_loc, static_cast<std::size_t>(r)) != r) return false;
  }
  return true;
}

}  // namespace idxplan
