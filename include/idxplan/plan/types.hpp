// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The plan structs: plain data holding sizes, flags and offsets into the
// step buffers, never pointers, so a plan can be copied, compared, printed
// and replayed. Token and row numbers are int32 (a step's tokens fit).

#include <cstdint>
#include <ostream>
#include <tuple>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "idxplan/host_device.hpp"

namespace idxplan {

// One (request slice, query slice) of the prefill split, as the reference's
// split_prefill_chunks returns it.
struct ChunkSplit {
  int32_t request_begin = 0;  // step index of the group's first request
  int32_t request_end = 0;    // step index one past its last request
  int32_t query_begin = 0;    // first row of the slice, from the group's first token
  int32_t query_end = 0;      // one past the slice's last row

  constexpr auto tie() const { return std::tie(request_begin, request_end, query_begin, query_end); }
};

// Rows of one request inside a prefill chunk.
struct RequestRows {
  int32_t first_row = 0;  // first row, counted from the chunk's token_start
  int32_t end_row = 0;    // one past the last row, same origin
  int32_t request = 0;    // the request, counted from the chunk's first_request

  constexpr auto tie() const { return std::tie(first_row, end_row, request); }
};

// A FlyDSL persistent grid (contracts/flydsl_fp4.hpp, the flydsl_fp4
// contract): `ctas` CTAs over `batches` batches of `next_n` rows, chunks of
// `block_k` keys, at most `s_max` a CTA where they fit; its cta_info starts
// at word `words` of its buffer, its `safe` is word `safe` of
// schedule_safe. ctas == 0: none.
struct GridShape {
  int32_t batches = 0;
  int32_t next_n = 1;
  int32_t ctas = 0;
  int32_t block_k = 0;
  int32_t s_max = 1;        // ceil(max_seq_len / block_k), at least 1
  int32_t max_seq_len = 0;  // keys: the logits row the consumer is launched with
  int32_t safe = 0;
  int64_t words = 0;

  IDXPLAN_HD constexpr bool present() const { return ctas > 0; }
  constexpr auto tie() const { return std::tie(batches, next_n, ctas, block_k, s_max, max_seq_len, safe, words); }
};

// DeepGEMM's schedule metadata of the decode rows (contracts/deepgemm_sm90.hpp,
// the deepgemm_sm90 contract): `batch` sequences of `next_n` rows on
// `num_sms` SMs, [num_sms + 1, 2] words at the start of decode_schedule.
// num_sms == 0: none.
struct MetadataPlan {
  int32_t batch = 0;
  int32_t next_n = 1;
  int32_t num_sms = 0;

  IDXPLAN_HD constexpr bool present() const { return num_sms > 0; }
  constexpr int64_t words() const { return present() ? 2 * (int64_t{num_sms} + 1) : 0; }
  constexpr auto tie() const { return std::tie(batch, next_n, num_sms); }
};

// One dense prefill launch: a chunk and how the kernel runs it.
struct PrefillPlan {
  int32_t token_start = 0;    // first step token of the chunk
  int32_t token_end = 0;      // one past its last step token
  int32_t first_request = 0;  // step index of the chunk's first request
  int32_t num_reqs = 0;       // requests the chunk's block table rows cover
  int32_t width = 0;          // logits columns: max host seq len of the chunk / C
  int32_t first_piece = 0;    // the chunk's RequestRows in StepPlan::pieces ...
  int32_t num_pieces = 0;     // ... [first_piece, first_piece + num_pieces)
  int32_t query_start_loc_offset = 0;  // word of prefill_query_start_loc where the
                                       // chunk's [num_reqs + 1] packed offsets start
  bool use_gather = false;    // the candidate consumers gather for this chunk
  int32_t max_seq_len = 0;    // tokens: the longest host upper bound of the chunk's
                              // requests (width * C up to C - 1); the device clamps
                              // their lengths to it
  GridShape grid{};           // flydsl_fp4: the chunk's rows' schedule

  constexpr auto tie() const {
    return std::tie(token_start, token_end, first_request, num_reqs, width, first_piece, num_pieces,
                    query_start_loc_offset, use_gather, max_seq_len, grid);
  }
};

// Consecutive chunks that slice one group of the split, as the device reads
// them to pack each chunk's query_start_loc: chunk k covers tokens
// [token_start + k * slice_rows, min(that + slice_rows, token_end)) of the
// same requests, and its num_reqs + 1 packed words start at
// word_offset + k * (num_reqs + 1). A group of several requests has one chunk.
struct ChunkGroup {
  int32_t first_request = 0;  // step index of the chunks' first request
  int32_t num_reqs = 0;       // requests every chunk covers
  int32_t token_start = 0;    // first step token of the first chunk
  int32_t token_end = 0;      // one past the last step token of the last chunk
  int32_t slice_rows = 0;     // rows of every chunk but the last
  int32_t word_offset = 0;    // first word of prefill_query_start_loc
  int32_t max_seq_len = 0;    // the chunks' PrefillPlan::max_seq_len (their requests
                              // are the same)

  constexpr auto tie() const {
    return std::tie(first_request, num_reqs, token_start, token_end, slice_rows, word_offset,
                    max_seq_len);
  }
};

// Query rows [token_start, token_end) of one request that the candidate
// consumers score against the pool in one launch; its row ends are the
// step-wide prefill row ends of those tokens.
struct GatherLaunch {
  int32_t token_start = 0;  // first step token
  int32_t token_end = 0;    // one past the last step token
  int32_t request = 0;      // step index of the request

  constexpr auto tie() const { return std::tie(token_start, token_end, request); }
};

// The decode rows as next_n-row sequences; next_n == 0 means flattened.
struct NativeDecode {
  int32_t next_n = 0;    // rows per sequence
  int32_t num_seqs = 0;  // sequences: the step's decode requests

  IDXPLAN_HD constexpr bool present() const { return next_n > 0; }
  constexpr auto tie() const { return std::tie(next_n, num_seqs); }
};

// The decode schedule's shape, decided on the host; num_ctas == 0 means the
// step has no schedule. The descriptors themselves are built on the device.
struct ScheduleShape {
  int32_t num_seqs = 0;      // sequences B
  int32_t rows_per_seq = 0;  // rows n of each sequence
  int32_t block_m = 0;       // rows a workgroup scores together
  int32_t row_blocks = 0;    // ceil(n / block_m)
  int32_t work = 0;          // units: B * row_blocks
  int32_t block_kv = 0;      // compressed entries per KV tile
  int32_t num_ctas = 0;      // slots (descriptors) of the schedule
  int32_t max_tiles = 0;     // KV tiles one slice walks at most
  bool native = false;       // units are native sequences, not flattened rows

  IDXPLAN_HD constexpr bool present() const { return num_ctas > 0; }
  constexpr auto tie() const {
    return std::tie(num_seqs, rows_per_seq, block_m, row_blocks, work, block_kv, num_ctas,
                    max_tiles, native);
  }
};

// Everything about the step's decode rows.
struct DecodePlan {
  int32_t num_rows = 0;        // flattened rows: decode tokens, graph padding included
  int32_t num_real_rows = 0;   // rows of real tokens: qsl[num_decodes]; the rest are 0
  int32_t max_seq_len = 0;     // longest host upper bound over the decode requests
  int32_t num_block_cols = 0;  // block-table columns copied per row: the pages of
                               // max_seq_len (no row reads past them)
  bool use_gather = false;     // the candidate consumers gather for the decode rows
  bool rows_are_requests = false;  // flattened, and row i is request i's (one row each,
                                   // then requests with none): rows read the engine's
                                   // block table in place
  NativeDecode native{};
  ScheduleShape schedule{};  // gluon_mxfp4's decode schedule
  GridShape grid{};          // flydsl_fp4's
  MetadataPlan metadata{};   // deepgemm_sm90's

  // Flattened rows that are not each their own request's. Only such a step's
  // decode launches need decode_block_table: a native step's sequences and
  // rows_are_requests rows are the engine's requests (docs/design.md section 6).
  constexpr bool ragged() const { return num_rows > 0 && !native.present() && !rows_are_requests; }

  constexpr auto tie() const {
    return std::tie(num_rows, num_real_rows, max_seq_len, num_block_cols, use_gather,
                    rows_are_requests, native, schedule, grid, metadata);
  }
};

namespace detail {

template <class T, class = void>
struct is_plan_struct : std::false_type {};
template <class T>
struct is_plan_struct<T, std::void_t<decltype(std::declval<const T&>().tie())>>
    : std::true_type {};

}  // namespace detail

// Field-wise equality for every plan struct (C++17 has no defaulted ==).
template <class T, std::enable_if_t<detail::is_plan_struct<T>::value, int> = 0>
constexpr bool operator==(const T& a, const T& b) {
  return a.tie() == b.tie();
}
template <class T, std::enable_if_t<detail::is_plan_struct<T>::value, int> = 0>
constexpr bool operator!=(const T& a, const T& b) {
  return !(a == b);
}

#define IDXPLAN_CHECK_POD(T)                                                 \
  static_assert(std::is_trivially_copyable_v<T> && std::is_standard_layout_v<T> && \
                    std::is_aggregate_v<T>,                                  \
                #T " must stay plain data")
IDXPLAN_CHECK_POD(ChunkSplit);
IDXPLAN_CHECK_POD(RequestRows);
IDXPLAN_CHECK_POD(PrefillPlan);
IDXPLAN_CHECK_POD(ChunkGroup);
IDXPLAN_CHECK_POD(GatherLaunch);
IDXPLAN_CHECK_POD(NativeDecode);
IDXPLAN_CHECK_POD(MetadataPlan);
IDXPLAN_CHECK_POD(ScheduleShape);
IDXPLAN_CHECK_POD(GridShape);
IDXPLAN_CHECK_POD(DecodePlan);
#undef IDXPLAN_CHECK_POD

// Entries of StepPlan's arrays that a step of at most `tokens` prefill
// tokens and `reqs` requests can need: a chunk (and its split, its group and
// a gather launch) has at least one row, and a chunk's pieces are its
// requests with rows, so pieces are at most chunks + requests.
struct PlanCapacity {
  int64_t chunks = 0;  // splits, prefill, chunk_groups, gather_launches
  int64_t pieces = 0;

  static constexpr PlanCapacity of(int64_t tokens, int64_t reqs) {
    return PlanCapacity{tokens, tokens + reqs};
  }
  constexpr int64_t bytes() const {
    return chunks * int64_t{sizeof(ChunkSplit) + sizeof(PrefillPlan) + sizeof(ChunkGroup) +
                            sizeof(GatherLaunch)} +
           pieces * int64_t{sizeof(RequestRows)};
  }
};

// A whole step's plan. The scalars say what the step is; the arrays are of
// plain structs whose offsets point into each other and into the step
// buffers. Planning into a StepPlan that is reused does not allocate once its
// arrays have grown to the step's size (reserve() grows them to the maxima).
struct StepPlan {
  uint64_t geometry = 0;   // fingerprint() of the Geometry the plan was made with
  int32_t num_reqs = 0;
  int32_t num_tokens = 0;  // step tokens, graph padding included; padding belongs to the
                           // decodes when every request decodes, else to the prefills,
                           // and to nothing in a step with no requests
  int32_t num_decodes = 0;
  int32_t num_decode_tokens = 0;
  int32_t num_prefills = 0;
  int32_t num_prefill_tokens = 0;
  int32_t max_seq_len = 0;  // max host upper bound over the step's requests
  int32_t num_prefill_query_start_loc_words = 0;  // words of prefill_query_start_loc used
  int64_t num_prefill_schedule_words = 0;  // flydsl_fp4: words of prefill_schedule used
  int32_t num_schedule_safe_words = 0;     // flydsl_fp4: words of schedule_safe used
  DecodePlan decode{};
  std::vector<ChunkSplit> splits;            // the prefill split, zero-context chunks included
  std::vector<PrefillPlan> prefill;          // the chunks launched, in token order
  std::vector<RequestRows> pieces;           // every chunk's requests, chunk after chunk
  std::vector<ChunkGroup> chunk_groups;      // the chunks as the device packs them
  std::vector<GatherLaunch> gather_launches; // the candidate consumers' prefill launches

  bool has_decode() const { return num_decodes > 0; }
  bool has_prefill() const { return num_prefills > 0; }
  // The chunk's requests with rows, as the reference's plan.requests.
  const RequestRows* pieces_of(const PrefillPlan& p) const { return pieces.data() + p.first_piece; }

  auto tie() const {
    return std::tie(geometry, num_reqs, num_tokens, num_decodes, num_decode_tokens, num_prefills,
                    num_prefill_tokens, max_seq_len, num_prefill_query_start_loc_words,
                    num_prefill_schedule_words, num_schedule_safe_words, decode, splits, prefill, pieces,
                    chunk_groups, gather_launches);
  }
};

}  // namespace idxplan

// fmt formatters, so a failing test or a log line shows the fields by name.
namespace idxplan::detail {

struct PlanFormatterBase {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
};

}  // namespace idxplan::detail

template <>
struct fmt::formatter<idxplan::ChunkSplit> : idxplan::detail::PlanFormatterBase {
  template <class Ctx>
  auto format(const idxplan::ChunkSplit& s, Ctx& ctx) const {
    return fmt::format_to(ctx.out(), "ChunkSplit{{requests=[{}, {}), rows=[{}, {})}}",
                          s.request_begin, s.request_end, s.query_begin, s.query_end);
  }
};

template <>
struct fmt::formatter<idxplan::RequestRows> : idxplan::detail::PlanFormatterBase {
  template <class Ctx>
  auto format(const idxplan::RequestRows& r, Ctx& ctx) const {
    return fmt::format_to(ctx.out(), "({}, {}, {})", r.first_row, r.end_row, r.request);
  }
};

template <>
struct fmt::formatter<idxplan::PrefillPlan> : idxplan::detail::PlanFormatterBase {
  template <class Ctx>
  auto format(const idxplan::PrefillPlan& p, Ctx& ctx) const {
    return fmt::format_to(ctx.out(),
                          "PrefillPlan{{tokens=[{}, {}), first_request={}, num_reqs={}, width={}, "
                          "pieces=[{}, +{}), qsl_offset={}, use_gather={}, max_seq_len={}, grid={}}}",
                          p.token_start, p.token_end, p.first_request, p.num_reqs, p.width,
                          p.first_piece, p.num_pieces, p.query_start_loc_offset, p.use_gather,
                          p.max_seq_len, p.grid);
  }
};

template <>
struct fmt::formatter<idxplan::GridShape> : idxplan::detail::PlanFormatterBase {
  template <class Ctx>
  auto format(const idxplan::GridShape& s, Ctx& ctx) const {
    return fmt::format_to(ctx.out(),
                          "GridShape{{batches={}, next_n={}, ctas={}, block_k={}, s_max={}, max_seq_len={}, "
                          "safe={}, words={}}}",
                          s.batches, s.next_n, s.ctas, s.block_k, s.s_max, s.max_seq_len, s.safe, s.words);
  }
};

template <>
struct fmt::formatter<idxplan::MetadataPlan> : idxplan::detail::PlanFormatterBase {
  template <class Ctx>
  auto format(const idxplan::MetadataPlan& m, Ctx& ctx) const {
    return fmt::format_to(ctx.out(), "MetadataPlan{{batch={}, next_n={}, num_sms={}}}", m.batch, m.next_n,
                          m.num_sms);
  }
};

template <>
struct fmt::formatter<idxplan::ChunkGroup> : idxplan::detail::PlanFormatterBase {
  template <class Ctx>
  auto format(const idxplan::ChunkGroup& g, Ctx& ctx) const {
    return fmt::format_to(ctx.out(),
                          "ChunkGroup{{first_request={}, num_reqs={}, tokens=[{}, {}), "
                          "slice_rows={}, word_offset={}, max_seq_len={}}}",
                          g.first_request, g.num_reqs, g.token_start, g.token_end, g.slice_rows,
                          g.word_offset, g.max_seq_len);
  }
};

template <>
struct fmt::formatter<idxplan::GatherLaunch> : idxplan::detail::PlanFormatterBase {
  template <class Ctx>
  auto format(const idxplan::GatherLaunch& g, Ctx& ctx) const {
    return fmt::format_to(ctx.out(), "GatherLaunch{{tokens=[{}, {}), request={}}}", g.token_start,
                          g.token_end, g.request);
  }
};

template <>
struct fmt::formatter<idxplan::NativeDecode> : idxplan::detail::PlanFormatterBase {
  template <class Ctx>
  auto format(const idxplan::NativeDecode& n, Ctx& ctx) const {
    return fmt::format_to(ctx.out(), "NativeDecode{{next_n={}, num_seqs={}}}", n.next_n,
                          n.num_seqs);
  }
};

template <>
struct fmt::formatter<idxplan::ScheduleShape> : idxplan::detail::PlanFormatterBase {
  template <class Ctx>
  auto format(const idxplan::ScheduleShape& s, Ctx& ctx) const {
    return fmt::format_to(ctx.out(),
                          "ScheduleShape{{num_seqs={}, rows_per_seq={}, block_m={}, row_blocks={}, "
                          "work={}, block_kv={}, num_ctas={}, max_tiles={}, native={}}}",
                          s.num_seqs, s.rows_per_seq, s.block_m, s.row_blocks, s.work, s.block_kv,
                          s.num_ctas, s.max_tiles, s.native);
  }
};

template <>
struct fmt::formatter<idxplan::DecodePlan> : idxplan::detail::PlanFormatterBase {
  template <class Ctx>
  auto format(const idxplan::DecodePlan& d, Ctx& ctx) const {
    return fmt::format_to(ctx.out(),
                          "DecodePlan{{num_rows={}, num_real_rows={}, max_seq_len={}, "
                          "num_block_cols={}, use_gather={}, rows_are_requests={}, native={}, "
                          "schedule={}, grid={}, metadata={}}}",
                          d.num_rows, d.num_real_rows, d.max_seq_len, d.num_block_cols,
                          d.use_gather, d.rows_are_requests, d.native, d.schedule, d.grid, d.metadata);
  }
};

template <>
struct fmt::formatter<idxplan::StepPlan> : idxplan::detail::PlanFormatterBase {
  template <class Ctx>
  auto format(const idxplan::StepPlan& p, Ctx& ctx) const {
    return fmt::format_to(ctx.out(),
                          "StepPlan{{geometry={:#x}, num_reqs={}, num_tokens={}, decodes={} ({} tokens), "
                          "prefills={} ({} tokens), max_seq_len={}, qsl_words={}, fp4_words={}, "
                          "safe_words={}, decode={}, "
                          "splits=[{}], prefill=[{}], pieces=[{}], chunk_groups=[{}], "
                          "gather_launches=[{}]}}",
                          p.geometry, p.num_reqs, p.num_tokens, p.num_decodes, p.num_decode_tokens,
                          p.num_prefills, p.num_prefill_tokens, p.max_seq_len,
                          p.num_prefill_query_start_loc_words, p.num_prefill_schedule_words,
                          p.num_schedule_safe_words, p.decode, fmt::join(p.splits, ", "),
                          fmt::join(p.prefill, ", "), fmt::join(p.pieces, ", "),
                          fmt::join(p.chunk_groups, ", "), fmt::join(p.gather_launches, ", "));
  }
};

namespace idxplan {

// GoogleTest and iostreams print plan structs through their formatters.
template <class T, std::enable_if_t<detail::is_plan_struct<T>::value, int> = 0>
std::ostream& operator<<(std::ostream& os, const T& value) {
  return os << fmt::format("{}", value);
}

}  // namespace idxplan
