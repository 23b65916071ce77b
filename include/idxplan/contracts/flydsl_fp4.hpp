// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The flydsl_fp4 contract (docs/aiter.md): the persistent-grid schedules
// that aiter main's FlyDSL FP4 paged MQA-logits kernels read, cta_info and
// `safe`, as aiter's compute_varctx_schedule (decode) and
// compute_prefill_schedule (ragged prefill) write them. This header holds
// the rules, the host checks and the CPU fill; flydsl_fp4_device.hpp holds
// the device writer, which calls the same rules.
//
// Both schedules split rows into chunks of block_k keys, ceil(keys /
// block_k) of them a row, and give each CTA of a P-CTA grid at most `safe`
// consecutive chunks of one row: `safe` is the smallest count in [1, s_max]
// (s_max = ceil(max_seq_len / block_k), at least 1) whose splits,
// sum over rows of ceil(chunks / safe), fit the grid's slots, or, where even
// s_max's do not (a context past max_seq_len), the longest row's chunks,
// one split a row. Slots are handed out row after row, split after split;
// the slots past the last split are idle.

#include <algorithm>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "idxplan/error.hpp"
#include "idxplan/host_device.hpp"
#include "idxplan/plan/divide.hpp"
#include "idxplan/plan/span.hpp"

namespace idxplan::flydsl_fp4 {

// Words of a decode CTA: [batch * next_n + n, chunk start, chunk count,
// context]. An idle CTA's are [0, 0, 1, 0].
inline constexpr int32_t kDecodeWords = 4;
// Words of a prefill CTA: [row, batch, chunk start, chunk count, local
// start, local end]. An idle CTA's are [0, 0, 0, 1, 0, 0].
inline constexpr int32_t kPrefillWords = 6;
// Keys a chunk in every launch sglang and aiter's wrappers make.
inline constexpr int32_t kBlockK = 256;
// sglang's grids (fp4_indexer_hip.py): a decode of T rows gets
// min(T * ceil(max_seq_len / 256), max(1024, 4 * T)) CTAs, four a CU of
// gfx950's 256 and four a row past that, and a prefill of T rows
// max(1024, T).
inline constexpr int32_t kDecodeBaseCtas = 1024;
inline constexpr int32_t kDecodeCtasPerRow = 4;
inline constexpr int32_t kPrefillBaseCtas = 1024;

// Chunks of a row that sees `keys` keys: ceil(keys / block_k), 0 for keys
// <= 0, one unsigned 32-bit division (keys + block_k - 1 < 2^32 for int32
// keys and block_k > 0). aiter's prefill rule is this; its decode rule, in int32
// with truncating division, agrees for every context from -2 * block_k + 2
// to 2^31 - block_k, and past those counts negative or wrapped chunks that
// no kernel can walk (docs/aiter.md).
IDXPLAN_HD int32_t chunks_of(int32_t keys, int32_t block_k) {
  return keys <= 0 ? 0 : detail::ceil_div32(keys, block_k);
}

// The CTAs a row of `chunks` chunks takes at `safe` chunks a CTA.
IDXPLAN_HD int32_t splits_of(int32_t chunks, int32_t safe) {
  return static_cast<int32_t>(detail::ceil_div_u32(static_cast<uint32_t>(chunks), static_cast<uint32_t>(safe)));
}

// What the search for `safe` needs of the rows' chunk counts, combined
// over any grouping of the rows.
struct ChunkStats {
  int64_t chunks = 0;        // their sum
  int32_t nonzero = 0;       // rows with a chunk
  int32_t max_chunks = 0;    // the longest row's
  int64_t splits_at_cap = 0;  // sum of ceil(chunks / s_max)

  IDXPLAN_HD static ChunkStats of(int32_t chunks, int32_t s_max) {
    return ChunkStats{chunks, chunks > 0 ? 1 : 0, chunks, splits_of(chunks, s_max)};
  }
  IDXPLAN_HD ChunkStats operator+(const ChunkStats& o) const {
    return ChunkStats{chunks + o.chunks, nonzero + o.nonzero, max_chunks > o.max_chunks ? max_chunks : o.max_chunks,
                      splits_at_cap + o.splits_at_cap};
  }
};

// Where `safe` lies once the stats are known: in [lo, hi], hi feasible. A
// feasible count fits the splits in `slots`; none under ceil(chunks / slots)
// does, and max(max_chunks, 1), one split a row, does where the rows with
// chunks fit the slots (the callers refuse a grid with fewer slots than
// rows). As sum ceil(c / s) < chunks / s + nonzero, so does
// ceil(chunks / (slots - nonzero)). Where s_max is infeasible, `safe` is
// max(max_chunks, 1) whatever is feasible: lo == hi then.
struct SafeRange {
  int32_t lo = 1;
  int32_t hi = 1;
};
IDXPLAN_HD SafeRange safe_range(const ChunkStats& s, int64_t slots, int32_t s_max) {
  const int32_t longest = s.max_chunks > 1 ? s.max_chunks : 1;
  if (s.splits_at_cap > slots) return SafeRange{longest, longest};
  int64_t hi = s_max < longest ? s_max : longest;
  if (slots > s.nonzero) {
    const int64_t spread = (s.chunks + (slots - s.nonzero) - 1) / (slots - s.nonzero);
    hi = spread > 0 && spread < hi ? spread : hi;
  }
  int64_t lo = slots > 0 ? (s.chunks + slots - 1) / slots : 1;
  lo = lo < 1 ? 1 : (lo > hi ? hi : lo);
  return SafeRange{static_cast<int32_t>(lo), static_cast<int32_t>(hi)};
}

// One CTA's share: `count` chunks of row `row` from chunk `start`; row < 0
// for an idle CTA.
struct Split {
  int32_t row = -1;
  int32_t start = 0;
  int32_t count = 0;
};

// Split `k` of a row of `chunks` chunks.
IDXPLAN_HD Split split_of(int32_t row, int32_t k, int32_t chunks, int32_t safe) {
  const int32_t start = k * safe;
  const int32_t left = chunks - start;
  return Split{row, start, left < safe ? left : safe};
}

// The decode words of slot `slot`, next_n rows of them: split.row is the
// batch, `context` its length.
IDXPLAN_HD void store_decode_slot(int32_t* cta_info, int32_t slot, int32_t next_n, Split split,
                                  int32_t context) {
  int32_t* w = cta_info + int64_t{slot} * next_n * kDecodeWords;
  const bool live = split.row >= 0;
  for (int32_t n = 0; n < next_n; ++n, w += kDecodeWords) {
    w[0] = live ? split.row * next_n + n : 0;
    w[1] = live ? split.start : 0;
    w[2] = live ? split.count : 1;
    w[3] = live ? context : 0;
  }
}

// The prefill words of slot `slot`: split.row is the row, `batch`,
// `local_start` and `local_end` its.
IDXPLAN_HD void store_prefill_slot(int32_t* cta_info, int32_t slot, Split split, int32_t batch,
                                   int32_t local_start, int32_t local_end) {
  int32_t* w = cta_info + int64_t{slot} * kPrefillWords;
  const bool live = split.row >= 0;
  w[0] = live ? split.row : 0;
  w[1] = live ? batch : 0;
  w[2] = live ? split.start : 0;
  w[3] = live ? split.count : 1;
  w[4] = live ? local_start : 0;
  w[5] = live ? local_end : 0;
}

// ceil(max_seq_len / block_k), at least 1, with Python's floor division (a
// negative max_seq_len gives 1).
inline int32_t chunks_cap(int64_t max_seq_len, int64_t block_k) {
  const int64_t n = max_seq_len + block_k - 1;
  const int64_t q = n >= 0 ? n / block_k : -((-n + block_k - 1) / block_k);
  return static_cast<int32_t>(std::clamp<int64_t>(q, 1, std::numeric_limits<int32_t>::max()));
}

// The CTAs of a step's decode grid of `batches` batches of next_n rows:
// `fixed` where the engine sets it (decode_parallel_units), else sglang's
// rule for the batches, times next_n (a multiple of it, as aiter requires).
inline int64_t decode_ctas(int64_t batches, int32_t next_n, int32_t s_max, int32_t fixed) {
  if (fixed > 0) return fixed;
  return int64_t{next_n} * std::min<int64_t>(batches * s_max, std::max<int64_t>(kDecodeBaseCtas, kDecodeCtasPerRow * batches));
}

// The CTAs of a prefill chunk of `rows` rows: max(base, rows), base the
// engine's (prefill_parallel_units) or sglang's 1024.
inline int64_t prefill_ctas(int64_t rows, int32_t base) {
  return std::max<int64_t>(base > 0 ? base : kPrefillBaseCtas, rows);
}

// Block-table columns FlyDSL's kernels read for a row of up to `keys` keys,
// in pages of `page_entries`: a CTA loads the page ids of the chunk after
// the one it scores, so a row's last CTA reads the pages of one chunk past
// its keys, and an idle CTA ([.., 0, 1, ..]) those of chunks 0 and 1 of
// batch 0. The engine's table holds them (valid page ids: the kernels load
// keys from them, then mask), and so do decode_block_table's rows.
inline int64_t table_cols(int64_t keys, int32_t page_entries) {
  const int64_t chunks = keys <= 0 ? 0 : (keys + kBlockK - 1) / kBlockK;
  return (std::max<int64_t>(chunks, 1) + 1) * (kBlockK / page_entries);
}

// A decode schedule's shape: aiter's compute_varctx_schedule arguments,
// checked. `slots` = P / next_n splits, each next_n CTAs.
struct VarctxShape {
  int32_t batches = 0;
  int32_t next_n = 1;
  int32_t ctas = 0;      // P
  int32_t block_k = kBlockK;
  int32_t s_max = 1;     // ceil(max_seq_len / block_k), at least 1
  int32_t slots = 0;     // P / next_n

  int64_t words() const { return int64_t{ctas} * kDecodeWords; }
};

// A prefill schedule's shape: aiter's compute_prefill_schedule arguments,
// checked.
struct PrefillShape {
  int32_t rows = 0;
  int32_t ctas = 0;      // P
  int32_t block_k = kBlockK;
  int32_t s_max = 1;

  int64_t words() const { return int64_t{ctas} * kPrefillWords; }
};

namespace detail {

inline void require_block_k(const char* function, int64_t block_k) {
  if (block_k <= 0 || block_k > std::numeric_limits<int32_t>::max()) {
    throw StepError(fmt::format("{}: block_k={} is not a positive int32", function, block_k));
  }
}

inline int32_t require_ctas(const char* function, int64_t ctas) {
  if (ctas < 0 || ctas > std::numeric_limits<int32_t>::max()) {
    throw StepError(fmt::format("{}: parallel_unit_num={} is not an int32 CTA count", function, ctas));
  }
  return static_cast<int32_t>(ctas);
}

}  // namespace detail

// aiter's P when parallel_unit_num is None: batches * next_n * s_max, a
// CTA for every chunk a row can have.
inline int64_t varctx_default_ctas(int64_t batches, int64_t block_k, int64_t max_seq_len, int64_t next_n) {
  return batches * next_n * chunks_cap(max_seq_len, block_k);
}

// The shape of compute_varctx_schedule(context_lens of `batches`, block_k,
// ctas, max_seq_len, next_n), refused as aiter refuses it (P not a multiple
// of next_n, P / next_n under the batches) and where aiter's Triton kernel
// would fail or overflow (block_k, next_n or P not a positive int32).
inline VarctxShape varctx_shape(int64_t batches, int64_t block_k, int64_t ctas, int64_t max_seq_len,
                                int64_t next_n) {
  constexpr const char* kFn = "compute_varctx_schedule";
  detail::require_block_k(kFn, block_k);
  if (next_n < 1 || next_n > std::numeric_limits<int32_t>::max()) {
    throw StepError(fmt::format("{}: next_n={} is not a positive int32", kFn, next_n));
  }
  if (batches < 0 || batches > std::numeric_limits<int32_t>::max()) {
    throw StepError(fmt::format("{}: {} batches is not an int32 count", kFn, batches));
  }
  VarctxShape s;
  s.ctas = detail::require_ctas(kFn, ctas);
  if (ctas % next_n != 0) {
    throw StepError(fmt::format("{}: parallel_unit_num={} must be a multiple of next_n={}", kFn, ctas, next_n));
  }
  if (ctas / next_n < batches) {
    throw StepError(fmt::format(
        "{}: parallel_unit_num // next_n = {} < batches={} would drop batches; pass parallel_unit_num >= "
        "batches * next_n = {}",
        kFn, ctas / next_n, batches, batches * next_n));
  }
  s.batches = static_cast<int32_t>(batches);
  s.next_n = static_cast<int32_t>(next_n);
  s.block_k = static_cast<int32_t>(block_k);
  s.s_max = chunks_cap(max_seq_len, block_k);
  s.slots = static_cast<int32_t>(ctas / next_n);
  return s;
}

// The shape of compute_prefill_schedule(rows of `rows`, block_k, ctas,
// max_seq_len), refused as aiter refuses it (P under the rows).
inline PrefillShape prefill_shape(int64_t rows, int64_t block_k, int64_t ctas, int64_t max_seq_len) {
  constexpr const char* kFn = "compute_prefill_schedule";
  detail::require_block_k(kFn, block_k);
  PrefillShape s;
  s.ctas = detail::require_ctas(kFn, ctas);
  if (ctas < rows) {
    throw StepError(fmt::format(
        "{}: parallel_unit_num={} < rows={} would drop rows past slot {}; pass parallel_unit_num >= the rows",
        kFn, ctas, rows, ctas));
  }
  s.rows = static_cast<int32_t>(rows);
  s.block_k = static_cast<int32_t>(block_k);
  s.s_max = chunks_cap(max_seq_len, block_k);
  return s;
}

// `safe` of rows whose chunk counts `chunks(i)` gives, i in [0, rows), for a
// grid of `slots` splits: a binary search in safe_range's bounds.
template <class Chunks>
int32_t safe_chunks(int32_t rows, const Chunks& chunks, int64_t slots, int32_t s_max) {
  ChunkStats stats;
  for (int32_t i = 0; i < rows; ++i) stats = stats + ChunkStats::of(chunks(i), s_max);
  SafeRange range = safe_range(stats, slots, s_max);
  while (range.lo < range.hi) {
    const int32_t mid = range.lo + (range.hi - range.lo) / 2;
    int64_t splits = 0;
    for (int32_t i = 0; i < rows; ++i) splits += splits_of(chunks(i), mid);
    if (splits <= slots) {
      range.hi = mid;
    } else {
      range.lo = mid + 1;
    }
  }
  return range.lo;
}

// Hands out the slots row after row: calls store(slot, split) for every
// slot in [0, slots), idle ones with Split{}.
template <class Chunks, class Store>
void assign_slots(int32_t rows, const Chunks& chunks, int32_t safe, int32_t slots, const Store& store) {
  int32_t slot = 0;
  for (int32_t i = 0; i < rows && slot < slots; ++i) {
    const int32_t c = chunks(i);
    const int32_t n = splits_of(c, safe);
    for (int32_t k = 0; k < n && slot < slots; ++k) store(slot++, split_of(i, k, c, safe));
  }
  for (; slot < slots; ++slot) store(slot, Split{});
}

namespace detail {

inline void require_words(const char* function, const char* name, int64_t given, int64_t needed) {
  if (given < needed) {
    throw StepError(fmt::format("{}: {} holds {} words, and the schedule writes {}", function, name, given, needed));
  }
}

inline void require_lengths(const char* function, const char* name, Span<const int32_t> v, int64_t needed) {
  if (static_cast<int64_t>(v.size()) != needed) {
    throw StepError(fmt::format("{}: {} has {} entries, not {}", function, name, v.size(), needed));
  }
}

}  // namespace detail

// The CPU fill of compute_varctx_schedule: cta_info (s.words() words) and
// *safe. Throws StepError for arrays of another length than the batches or
// a short buffer.
inline void fill_varctx_schedule(const VarctxShape& s, Span<const int32_t> context_lens, Span<int32_t> cta_info,
                                 int32_t* safe) {
  constexpr const char* kFn = "compute_varctx_schedule";
  detail::require_lengths(kFn, "context_lens", context_lens, s.batches);
  detail::require_words(kFn, "cta_info", static_cast<int64_t>(cta_info.size()), s.words());
  const auto chunks = [&](int32_t b) { return chunks_of(context_lens[static_cast<std::size_t>(b)], s.block_k); };
  *safe = safe_chunks(s.batches, chunks, s.slots, s.s_max);
  assign_slots(s.batches, chunks, *safe, s.slots, [&](int32_t slot, Split split) {
    const int32_t context = split.row >= 0 ? context_lens[static_cast<std::size_t>(split.row)] : 0;
    store_decode_slot(cta_info.data(), slot, s.next_n, split, context);
  });
}

// The CPU fill of compute_prefill_schedule: cta_info (s.words() words) and
// *safe. A row's chunks count its keys up to local_end; its batch and window
// are copied as given. Throws StepError for arrays of another length than
// the rows or a short buffer.
inline void fill_prefill_schedule(const PrefillShape& s, Span<const int32_t> row_to_batch,
                                  Span<const int32_t> local_starts, Span<const int32_t> local_ends,
                                  Span<int32_t> cta_info, int32_t* safe) {
  constexpr const char* kFn = "compute_prefill_schedule";
  detail::require_lengths(kFn, "row_to_batch", row_to_batch, s.rows);
  detail::require_lengths(kFn, "local_starts", local_starts, s.rows);
  detail::require_lengths(kFn, "local_ends", local_ends, s.rows);
  detail::require_words(kFn, "cta_info", static_cast<int64_t>(cta_info.size()), s.words());
  const auto chunks = [&](int32_t r) { return chunks_of(local_ends[static_cast<std::size_t>(r)], s.block_k); };
  *safe = safe_chunks(s.rows, chunks, s.ctas, s.s_max);
  assign_slots(s.rows, chunks, *safe, s.ctas, [&](int32_t slot, Split split) {
    const auto r = static_cast<std::size_t>(split.row >= 0 ? split.row : 0);
    const bool live = split.row >= 0;
    store_prefill_slot(cta_info.data(), slot, split, live ? row_to_batch[r] : 0, live ? local_starts[r] : 0,
                       live ? local_ends[r] : 0);
  });
}

}  // namespace idxplan::flydsl_fp4
