// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The deepgemm_sm90 contract's rule: the schedule metadata DeepGEMM's
// fp8_paged_mqa_logits (and fp8_fp4_paged_mqa_logits) walk on Hopper, as
// get_paged_mqa_logits_metadata(context_lens, block_kv, num_sms) writes it
// at DeepGEMM 891d57b4, the commit vLLM pins
// (cmake/external_projects/deepgemm.cmake; docs/deepgemm.md). int32
// [num_sms + 1, 2]: row i is SM i's first (query atom, KV split), row i + 1
// its end, the last row the end of all.
//
// context_lens is [B, next_n]; a sequence's KV is its last column's length,
// cut into splits of kSplitKv keys, ceil(len / 256) of them. A sequence
// of next_n rows is ceil(next_n / 2) query atoms of two rows (one atom of one
// row at next_n 1), and every atom walks all its sequence's splits: the
// work is T = (sum of the splits) * atoms, in units of (atom, split). SM i
// starts at unit i * (T / num_sms) + min(i, T % num_sms), so the first
// T % num_sms SMs take one unit more; a unit u of sequence q (whose units
// begin at S_q * atoms, S_q the splits before it) is atom (u - S_q * atoms) /
// splits_q and split (u - S_q * atoms) % splits_q of it, and the row says
// (q * atoms + atom, split). A start past every sequence's units is
// (B * atoms, 0).
//
// DeepGEMM computes in uint32: a length is read as uint32 (a negative one
// of -255 to -1 is 0 splits, one below is some 16 million), and the sums
// wrap. The rules here are its arithmetic, so its words, wherever T fits
// in uint32; past that its own prefix sums wrap (and it reads its shared
// array past the batches), and the CPU fill refuses the lengths rather than
// guess (the device writer, which cannot throw, writes every row as the end).

#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "idxplan/error.hpp"
#include "idxplan/host_device.hpp"
#include "idxplan/plan/span.hpp"

namespace idxplan::deepgemm_sm90 {

// Keys a KV split (DeepGEMM's split_kv, fixed at this commit).
inline constexpr int32_t kSplitKv = 256;
// The cache's keys a block that SM90's kernels take (block_kv).
inline constexpr int32_t kBlockKv = 64;
// Words of a row: [query atom, KV split].
inline constexpr int32_t kRowWords = 2;
// Sequences at most: DeepGEMM's metadata kernel holds 3 * align(B, 32) + 1
// words of shared memory, within SM90's 232,448 bytes.
inline constexpr int32_t kMaxBatch = 19360;

// KV splits of a sequence whose last row sees `context_len` keys: DeepGEMM's
// ceil_div in uint32.
IDXPLAN_HD uint32_t splits_of(int32_t context_len) {
  return (static_cast<uint32_t>(context_len) + static_cast<uint32_t>(kSplitKv - 1)) /
         static_cast<uint32_t>(kSplitKv);
}

// A metadata call's shape: get_paged_mqa_logits_metadata's arguments,
// checked.
struct MetadataShape {
  int32_t batch = 0;    // B, context_lens.size(0)
  int32_t next_n = 1;   // context_lens.size(1)
  int32_t num_sms = 1;

  // Query atoms of a sequence: ceil(next_n / 2) two-row atoms, or one.
  IDXPLAN_HD uint32_t atoms() const {
    return next_n >= 2 ? (static_cast<uint32_t>(next_n) + 1u) / 2u : 1u;
  }
  IDXPLAN_HD int32_t rows() const { return num_sms + 1; }
  int64_t words() const { return int64_t{rows()} * kRowWords; }
};

// The shape of get_paged_mqa_logits_metadata over context_lens [batch,
// next_n], refused as DeepGEMM refuses it on SM90 (block_kv 64 only; the
// batches its kernel's shared memory holds), and where it has no meaning
// (no SM, no row a sequence).
inline MetadataShape metadata_shape(int64_t batch, int64_t next_n, int64_t block_kv, int64_t num_sms) {
  constexpr const char* kFn = "get_paged_mqa_logits_metadata";
  if (block_kv != kBlockKv) {
    throw StepError(fmt::format("{}: block_kv={}; DeepGEMM's SM90 kernels take block_kv={} only", kFn, block_kv,
                                kBlockKv));
  }
  if (batch < 0 || batch > kMaxBatch) {
    throw StepError(fmt::format(
        "{}: context_lens has {} rows (sequences); DeepGEMM's metadata kernel holds 0 to {} in shared memory", kFn,
        batch, kMaxBatch));
  }
  if (next_n < 1 || next_n > std::numeric_limits<int32_t>::max()) {
    throw StepError(fmt::format("{}: context_lens has {} columns (next_n); it needs at least 1", kFn, next_n));
  }
  if (num_sms < 1 || num_sms > std::numeric_limits<int32_t>::max() - 1) {
    throw StepError(fmt::format("{}: num_sms={} is not a positive int32", kFn, num_sms));
  }
  MetadataShape s;
  s.batch = static_cast<int32_t>(batch);
  s.next_n = static_cast<int32_t>(next_n);
  s.num_sms = static_cast<int32_t>(num_sms);
  return s;
}

// The unit SM `sm` starts at (sm == num_sms: the end) of `total` units.
IDXPLAN_HD uint32_t first_unit(const MetadataShape& s, uint32_t total, int32_t sm) {
  const auto sms = static_cast<uint32_t>(s.num_sms);
  const auto i = static_cast<uint32_t>(sm);
  const uint32_t rest = total % sms;
  return i * (total / sms) + (i < rest ? i : rest);
}

// Row `sm` of the metadata, into row[0..1]: the unit it starts at found
// among the sequences by DeepGEMM's binary search over `prefix[q]`, the
// splits of sequences [0, q] (q < batch), `splits_total` being all of
// theirs.
inline void store_row(const MetadataShape& s, const uint32_t* prefix, uint32_t splits_total, int32_t sm,
                      int32_t* row) {
  const uint32_t atoms = s.atoms();
  const uint32_t start = first_unit(s, splits_total * atoms, sm);
  uint32_t lo = 0;
  uint32_t hi = static_cast<uint32_t>(s.batch);
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    const bool right = prefix[mid] * atoms <= start;
    lo = right ? mid + 1 : lo;
    hi = right ? hi : mid;
  }
  // Sequence lo's splits; past the last, DeepGEMM reads its array's next
  // word, which a start past every unit never needs (its offset is 0).
  const uint32_t before = lo == 0 ? 0u : prefix[lo - 1];
  const uint32_t upto = lo < static_cast<uint32_t>(s.batch) ? prefix[lo] : splits_total;
  const uint32_t offset = start - before * atoms;
  const uint32_t splits = upto - before;
  const uint32_t atom = splits > 0 ? offset / splits : 0u;
  row[0] = static_cast<int32_t>(lo * atoms + atom);
  row[1] = static_cast<int32_t>(splits > 0 ? offset % splits : 0u);
}

// Whether `splits` splits of `atoms` atoms each are units uint32 counts.
IDXPLAN_HD bool units_fit(uint64_t splits, uint32_t atoms) { return splits <= 0xFFFFFFFFull / atoms; }

// The end row (num_sms + 1 of them at once where the units overflow uint32).
IDXPLAN_HD void store_end_row(const MetadataShape& s, int32_t* row) {
  row[0] = static_cast<int32_t>(static_cast<uint32_t>(s.batch) * s.atoms());
  row[1] = 0;
}

namespace detail {

inline void require_metadata_words(const MetadataShape& s, std::size_t lens, std::size_t out) {
  constexpr const char* kFn = "get_paged_mqa_logits_metadata";
  const auto want = static_cast<std::size_t>(int64_t{s.batch} * s.next_n);
  if (lens != want) {
    throw StepError(fmt::format("{}: context_lens holds {} words, and [{}, {}] is {}", kFn, lens, s.batch,
                                s.next_n, want));
  }
  if (out < static_cast<std::size_t>(s.words())) {
    throw StepError(fmt::format("{}: the metadata holds {} words, and [num_sms + 1, 2] with num_sms={} is {}", kFn,
                                out, s.num_sms, s.words()));
  }
}

}  // namespace detail

// The metadata of s.batch sequences whose keys `keys(q)` gives (each its
// last row's) into `out` (s.words() words), by DeepGEMM's binary search.
// Refuses lengths whose units pass uint32, where DeepGEMM's sums wrap.
template <class Keys>
void fill_metadata_of(const MetadataShape& s, const Keys& keys, int32_t* out) {
  std::vector<uint32_t> prefix(static_cast<std::size_t>(s.batch));
  uint64_t sum = 0;
  for (int32_t q = 0; q < s.batch; ++q) {
    sum += splits_of(keys(q));
    prefix[static_cast<std::size_t>(q)] = static_cast<uint32_t>(sum);
  }
  if (!units_fit(sum, s.atoms())) {
    throw StepError(fmt::format(
        "get_paged_mqa_logits_metadata: context_lens come to {} splits of {} keys, {} atoms a sequence: more "
        "(atom, KV split) units than uint32 counts, where DeepGEMM's sums wrap",
        sum, kSplitKv, s.atoms()));
  }
  for (int32_t sm = 0; sm <= s.num_sms; ++sm) {
    store_row(s, prefix.data(), static_cast<uint32_t>(sum), sm, out + int64_t{sm} * kRowWords);
  }
}

// The CPU fill: the metadata of `context_lens` ([batch, next_n], row-major)
// into `out` (at least s.words()).
inline void fill_metadata(const MetadataShape& s, Span<const int32_t> context_lens, Span<int32_t> out) {
  detail::require_metadata_words(s, context_lens.size(), out.size());
  const auto last_column = [&](int32_t q) {
    return context_lens[static_cast<std::size_t>(int64_t{q} * s.next_n + s.next_n - 1)];
  };
  fill_metadata_of(s, last_column, out.data());
}

}  // namespace idxplan::deepgemm_sm90
