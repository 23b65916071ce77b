// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The contract an engine codes against (docs/design.md sections 6 and 9.1):
// what a step reads (StepInputs, with the extent of every engine array),
// what it writes (StepOutputs, the engine's buffers with their capacities),
// how big those buffers must be, and the checks that refuse, before any
// launch or CPU fill, an input shorter than the plan reads or an output
// smaller than it writes.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "idxplan/config.hpp"
#include "idxplan/error.hpp"
#include "idxplan/plan/divide.hpp"
#include "idxplan/contracts/gluon_mxfp4.hpp"
#include "idxplan/plan/span.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan {

// What a step reads: the engine's exact lengths and block table, all int32,
// each with how much of it exists. Device pointers for device::enqueue, host
// pointers for the CPU reference. make_step_inputs fills the extents from
// spans; an engine that fills the struct itself must set them too (a zero
// extent is an empty array, which a step with requests refuses).
struct StepInputs {
  const int32_t* seq_lens = nullptr;         // [num_seq_lens] exact tokens per request
  int64_t num_seq_lens = 0;                  // entries of seq_lens (at least num_reqs)
  const int32_t* query_start_loc = nullptr;  // [num_query_start_loc] token offsets; the
                                             // values the step was planned with
  int64_t num_query_start_loc = 0;           // entries (at least num_reqs + 1)
  const int32_t* block_table = nullptr;      // [block_table_rows, block_table_stride] page ids
  int64_t block_table_rows = 0;              // rows (at least num_reqs)
  int32_t block_table_cols = 0;              // page ids a row holds (at most the stride)
  int32_t block_table_stride = 0;            // words from one row to the next
};

// StepInputs over an engine's arrays: `block_table` holds rows of
// `block_table_stride` words, every word a page id (a trailing partial row is
// not a row). Throws StepError for a table with no valid stride.
inline StepInputs make_step_inputs(Span<const int32_t> seq_lens, Span<const int32_t> query_start_loc,
                                   Span<const int32_t> block_table, int32_t block_table_stride) {
  if (!block_table.empty() && block_table_stride <= 0) {
    throw StepError(fmt::format("make_step_inputs: block_table_stride={} for a block table of {} words",
                                block_table_stride, block_table.size()));
  }
  StepInputs in;
  in.seq_lens = seq_lens.data();
  in.num_seq_lens = static_cast<int64_t>(seq_lens.size());
  in.query_start_loc = query_start_loc.data();
  in.num_query_start_loc = static_cast<int64_t>(query_start_loc.size());
  in.block_table = block_table.data();
  in.block_table_rows =
      block_table_stride > 0 ? static_cast<int64_t>(block_table.size()) / block_table_stride : 0;
  in.block_table_cols = std::max(block_table_stride, 0);
  in.block_table_stride = std::max(block_table_stride, 0);
  return in;
}

// One step buffer, owned by the engine: where it is and how many int32 words
// it holds (step_buffer_sizes says how many each needs at most).
struct OutputBuffer {
  int32_t* data = nullptr;
  int64_t capacity = 0;  // int32 words
};

// What a step writes, into the engine's buffers.
struct StepOutputs {
  OutputBuffer context_lens;             // [num_reqs] L_r / C
  OutputBuffer decode_row_lens;          // [decode rows] compressed context of each row
  OutputBuffer decode_block_ends;        // [decode rows] candidate blocks each row sees
  OutputBuffer decode_block_table;       // [decode rows, decode_block_table_stride]
  OutputBuffer prefill_row_ends;         // [prefill tokens] exclusive key bound, token
                                         // t at t - num_decode_tokens
  OutputBuffer prefill_block_ends;       // [prefill tokens] candidate blocks
  OutputBuffer prefill_query_start_loc;  // [packed words] each chunk's local offsets
  OutputBuffer decode_schedule;          // [4 * num_ctas] descriptors (gluon_mxfp4), the
                                         // decode grid's cta_info (flydsl_fp4), or DeepGEMM's
                                         // [num_sms + 1, 2] metadata (deepgemm_sm90)
  // flydsl_fp4 only (null otherwise): each prefill chunk's cta_info, one
  // after the other (PrefillPlan::grid), and every grid's `safe`: word 0
  // the decode grid's, word 1 + k chunk k's.
  OutputBuffer prefill_schedule;         // [6 * the chunks' CTAs]
  OutputBuffer schedule_safe;            // [1 + prefill chunks]
  // Optional (null: not written): each prefill row's keys as vLLM's base
  // builder bounds them (its cu_seqlen_ks and cu_seqlen_ke), the row's
  // request's keys laid after those of its chunk's requests before it: the
  // start is their contexts' sum, the end that plus the row end. Token t at
  // t - num_decode_tokens, like prefill_row_ends.
  OutputBuffer prefill_key_starts;       // [prefill tokens]
  OutputBuffer prefill_key_ends;         // [prefill tokens]
  int32_t decode_block_table_stride = 0;  // words per decode block-table row
  // decode_block_table is written only on steps whose decode launches need
  // it (ragged ones, DecodePlan::ragged); an engine whose own consumers read
  // it on every step with decodes sets this.
  bool always_write_decode_block_table = false;
};

// The int32 words each step buffer holds, from the geometry's maxima.
struct StepBufferSizes {
  int64_t context_lens = 0;
  int64_t decode_rows = 0;          // decode_row_lens and decode_block_ends
  int64_t decode_block_table = 0;   // decode_rows * max_blocks_per_seq
  int64_t prefill_rows = 0;         // prefill_row_ends and prefill_block_ends
  int64_t prefill_query_start_loc = 0;
  int64_t decode_schedule = 0;
  int64_t prefill_schedule = 0;     // flydsl_fp4 only
  int64_t schedule_safe = 0;        // flydsl_fp4 only
};

inline StepBufferSizes step_buffer_sizes(const Geometry& g) {
  StepBufferSizes s;
  s.context_lens = g.config().max_num_seqs;
  s.decode_rows = g.max_decode_rows();
  s.decode_block_table = int64_t{g.max_decode_rows()} * g.max_blocks_per_seq();
  s.prefill_rows = g.config().max_num_batched_tokens;
  // A chunk takes its requests' count + 1 words. Every chunk has a row; a
  // chunk of several requests is its group's only chunk, and a query slice
  // of a group is one request (docs/design.md 5.6), so the words are at most
  // requests + 2 * prefill tokens.
  s.prefill_query_start_loc = int64_t{g.config().max_num_seqs} + 2 * int64_t{s.prefill_rows};
  s.decode_schedule = g.schedule_words();
  if (g.contract() == Contract::flydsl_fp4) {
    s.prefill_schedule = g.fp4_prefill_words();
    s.schedule_safe = 1 + int64_t{g.fp4_max_chunks()};
  }
  return s;
}

// The step buffers in host memory, for the CPU reference: each of `sizes`
// words, every word `fill`, the decode table `decode_block_table_stride`
// words a row.
struct HostStepBuffers {
  std::vector<int32_t> context_lens, decode_row_lens, decode_block_ends, decode_block_table,
      prefill_row_ends, prefill_block_ends, prefill_query_start_loc, decode_schedule, prefill_key_starts,
      prefill_key_ends, prefill_schedule, schedule_safe;
  int32_t decode_block_table_stride = 0;

  HostStepBuffers(const StepBufferSizes& sizes, int32_t table_stride, int32_t fill = 0)
      : context_lens(words(sizes.context_lens, fill)),
        decode_row_lens(words(sizes.decode_rows, fill)),
        decode_block_ends(words(sizes.decode_rows, fill)),
        decode_block_table(words(sizes.decode_block_table, fill)),
        prefill_row_ends(words(sizes.prefill_rows, fill)),
        prefill_block_ends(words(sizes.prefill_rows, fill)),
        prefill_query_start_loc(words(sizes.prefill_query_start_loc, fill)),
        decode_schedule(words(sizes.decode_schedule, fill)),
        prefill_key_starts(words(sizes.prefill_rows, fill)),
        prefill_key_ends(words(sizes.prefill_rows, fill)),
        prefill_schedule(words(sizes.prefill_schedule, fill)),
        schedule_safe(words(sizes.schedule_safe, fill)),
        decode_block_table_stride(table_stride) {}
  // The geometry's buffers: enough for any of its steps.
  explicit HostStepBuffers(const Geometry& g, int32_t fill = 0)
      : HostStepBuffers(step_buffer_sizes(g), g.max_blocks_per_seq(), fill) {}

  // The buffers as a step's outputs, each with its size as its capacity;
  // the key bounds' only when asked.
  StepOutputs outputs(bool always_write_decode_block_table = false, bool key_bounds = false) {
    StepOutputs out;
    out.context_lens = buffer(context_lens);
    out.decode_row_lens = buffer(decode_row_lens);
    out.decode_block_ends = buffer(decode_block_ends);
    out.decode_block_table = buffer(decode_block_table);
    out.prefill_row_ends = buffer(prefill_row_ends);
    out.prefill_block_ends = buffer(prefill_block_ends);
    out.prefill_query_start_loc = buffer(prefill_query_start_loc);
    out.decode_schedule = buffer(decode_schedule);
    if (!prefill_schedule.empty()) out.prefill_schedule = buffer(prefill_schedule);
    if (!schedule_safe.empty()) out.schedule_safe = buffer(schedule_safe);
    if (key_bounds) {
      out.prefill_key_starts = buffer(prefill_key_starts);
      out.prefill_key_ends = buffer(prefill_key_ends);
    }
    out.decode_block_table_stride = decode_block_table_stride;
    out.always_write_decode_block_table = always_write_decode_block_table;
    return out;
  }

 private:
  static std::vector<int32_t> words(int64_t n, int32_t fill) {
    return std::vector<int32_t>(static_cast<std::size_t>(n), fill);
  }
  static OutputBuffer buffer(std::vector<int32_t>& v) {
    return OutputBuffer{v.data(), static_cast<int64_t>(v.size())};
  }
};

// Whether the step writes decode_block_table: when its decode rows are
// ragged (DecodePlan::ragged), or on every step with decodes when the engine
// asks for it (StepOutputs::always_write_decode_block_table).
inline bool writes_decode_block_table(const StepPlan& plan, bool always_write_decode_block_table) {
  return plan.decode.ragged() || (always_write_decode_block_table && plan.decode.num_rows > 0);
}
inline bool writes_decode_block_table(const StepPlan& plan, const StepOutputs& out) {
  return writes_decode_block_table(plan, out.always_write_decode_block_table);
}

// The words each buffer of one planned step is written, and no more: what a
// step-sized CPU reference allocates (the idxplan command does), with the
// decode table's rows num_block_cols words apart. decode_block_table is 0
// on a step that does not write it; the block ends and key bounds, which
// the geometry and the engine choose, are each their rows' words.
inline StepBufferSizes step_buffer_sizes(const StepPlan& plan,
                                         bool always_write_decode_block_table = false) {
  StepBufferSizes s;
  s.context_lens = plan.num_reqs;
  s.decode_rows = plan.decode.num_rows;
  if (writes_decode_block_table(plan, always_write_decode_block_table)) {
    s.decode_block_table = int64_t{plan.decode.num_rows} * plan.decode.num_block_cols;
  }
  s.prefill_rows = plan.num_prefill_tokens;
  s.prefill_query_start_loc = plan.num_prefill_query_start_loc_words;
  if (plan.decode.grid.present()) {
    s.decode_schedule = int64_t{flydsl_fp4::kDecodeWords} * plan.decode.grid.ctas;
  } else if (plan.decode.metadata.present()) {
    s.decode_schedule = plan.decode.metadata.words();
  } else {
    s.decode_schedule = int64_t{kDescriptorWords} * plan.decode.schedule.num_ctas;
  }
  s.prefill_schedule = plan.num_prefill_schedule_words;
  s.schedule_safe = plan.num_schedule_safe_words;
  return s;
}

// Columns of the engine's block table the step's launches read: the pages
// of its longest upper bound (under flydsl_fp4, of its chunks and one
// more: block_cols_read). The engine's rows must hold them.
inline int32_t block_table_cols_read(const Geometry& g, const StepPlan& plan) {
  return block_cols_read(g, plan.max_seq_len);
}

// Throws StepError unless `plan` was made with `g` (or an equal geometry).
inline void require_plan_of(const Geometry& g, const StepPlan& plan) {
  if (plan.geometry != g.fingerprint()) {
    throw StepError(fmt::format(
        "the plan was made with another Geometry (fingerprint {:#x}, this one's {:#x}); plan the "
        "step with the geometry its buffers are filled with",
        plan.geometry, g.fingerprint()));
  }
}

namespace detail {

inline void require_output(const char* name, const OutputBuffer& b, int64_t words, const char* what) {
  if (words <= 0) return;
  if (b.data == nullptr) {
    throw StepError(fmt::format("StepOutputs.{} is null, and the step writes {} words of it ({})",
                                name, words, what));
  }
  if (b.capacity < words) {
    throw StepError(fmt::format("StepOutputs.{} holds {} words, and the step writes {} ({})", name,
                                b.capacity, words, what));
  }
}

// An engine array the step reads `needed` entries (or rows) of, `extent`
// being the field that says how many it has: there, and that long.
inline void require_input(const char* name, const int32_t* p, const char* extent, int64_t given,
                          int64_t needed, const char* what) {
  if (needed <= 0) return;
  if (p == nullptr) {
    throw StepError(fmt::format("StepInputs.{} is null, and the step reads {} of it ({})", name,
                                needed, what));
  }
  if (given < needed) {
    throw StepError(fmt::format("StepInputs.{}={} is short: the step reads {} ({})", extent, given,
                                needed, what));
  }
}

}  // namespace detail

// Everything the host can check before the step's buffers are filled, by the
// CPU reference or the device: the plan is this geometry's; every engine
// array the step reads is there and as long as the plan reads (requests'
// lengths and offsets, a block-table row a request with the columns of the
// step's longest upper bound); every buffer it writes is there and holds
// what the plan writes; the decode table's stride covers the columns copied.
// Throws StepError naming the field, what the plan needs and what was given.
inline void check_step_buffers(const Geometry& g, const StepPlan& plan, const StepInputs& in,
                               const StepOutputs& out) {
  require_plan_of(g, plan);
  const int64_t reqs = plan.num_reqs;
  const bool rows = plan.num_decode_tokens + plan.num_prefill_tokens > 0;
  detail::require_input("seq_lens", in.seq_lens, "num_seq_lens", in.num_seq_lens, reqs,
                        "a length a request");
  detail::require_input("query_start_loc", in.query_start_loc, "num_query_start_loc",
                        in.num_query_start_loc, reqs > 0 ? reqs + 1 : 0, "the requests' offsets");
  detail::require_input("block_table", in.block_table, "block_table_rows", in.block_table_rows,
                        rows ? reqs : 0, "a row a request");
  if (rows && reqs > 0) {
    const int32_t cols = block_table_cols_read(g, plan);
    if (in.block_table_stride < in.block_table_cols) {
      throw StepError(fmt::format(
          "StepInputs.block_table_stride={} is below its block_table_cols={}: the rows overlap",
          in.block_table_stride, in.block_table_cols));
    }
    if (in.block_table_cols < cols) {
      throw StepError(fmt::format(
          "StepInputs.block_table_cols={} is below the {} columns the step's launches read (the "
          "pages of its longest upper bound, {} tokens)",
          in.block_table_cols, cols, plan.max_seq_len));
    }
  }

  const bool blocks = g.config().candidate_block_size > 0;
  const int64_t decode_rows = plan.decode.num_rows;
  const int64_t prefill_rows = plan.num_prefill_tokens;
  detail::require_output("context_lens", out.context_lens, reqs, "a context a request");
  detail::require_output("decode_row_lens", out.decode_row_lens, decode_rows, "a length a decode row");
  if (blocks) {
    detail::require_output("decode_block_ends", out.decode_block_ends, decode_rows,
                           "candidate blocks a decode row");
  }
  if (writes_decode_block_table(plan, out)) {
    const int32_t copied = plan.decode.num_block_cols;
    if (out.decode_block_table_stride < copied) {
      throw StepError(fmt::format(
          "StepOutputs.decode_block_table_stride={} is below the {} columns a decode row copies",
          out.decode_block_table_stride, copied));
    }
    // The last row's copied columns end the table; a step that copies none
    // (its decodes' bounds are all 0) writes no word of it.
    detail::require_output("decode_block_table", out.decode_block_table,
                           copied > 0 ? (decode_rows - 1) * out.decode_block_table_stride + copied : 0,
                           "a block-table row a decode row");
  }
  detail::require_output("prefill_row_ends", out.prefill_row_ends, prefill_rows, "a row end a prefill row");
  if (blocks) {
    detail::require_output("prefill_block_ends", out.prefill_block_ends, prefill_rows,
                           "candidate blocks a prefill row");
  }
  detail::require_output("prefill_query_start_loc", out.prefill_query_start_loc,
                         plan.num_prefill_query_start_loc_words, "each chunk's packed offsets");
  const StepBufferSizes written = step_buffer_sizes(plan);
  detail::require_output("decode_schedule", out.decode_schedule, written.decode_schedule,
                         plan.decode.metadata.present() ? "DeepGEMM's [num_sms + 1, 2] metadata"
                                                        : "4 words a schedule slot");
  detail::require_output("prefill_schedule", out.prefill_schedule, written.prefill_schedule,
                         "6 words a CTA of each prefill chunk's grid");
  detail::require_output("schedule_safe", out.schedule_safe, written.schedule_safe,
                         "a word a grid: the decode grid's, then each prefill chunk's");
  if (out.prefill_key_starts.data != nullptr || out.prefill_key_ends.data != nullptr) {
    detail::require_output("prefill_key_starts", out.prefill_key_starts, prefill_rows,
                           "a key start a prefill row (prefill_key_ends is given)");
    detail::require_output("prefill_key_ends", out.prefill_key_ends, prefill_rows,
                           "a key end a prefill row (prefill_key_starts is given)");
    // A chunk's keys laid end to end: its requests' contexts, each within
    // its chunk's bound, must sum within int32.
    const int32_t ratio = g.config().compress_ratio;
    for (const ChunkGroup& group : plan.chunk_groups) {
      const int64_t keys = int64_t{group.num_reqs} * (group.max_seq_len / ratio);
      if (keys > 0x7FFFFFFF) {
        throw StepError(fmt::format(
            "prefill key bounds: the chunk at token {} holds {} requests of up to {} keys, whose "
            "key offsets can pass int32",
            group.token_start, group.num_reqs, group.max_seq_len / ratio));
      }
    }
  }
}

// The engine-start check of its buffers: every buffer some step of `g` can
// write is there and holds step_buffer_sizes(g) words (the block-end buffers
// only with candidate blocks), and the decode table's rows hold
// max_blocks_per_seq columns. Throws StepError naming the buffer and the
// sizes, so an undersized buffer fails at start, not at the first step that
// needs the space.
inline void check_step_outputs(const Geometry& g, const StepOutputs& out) {
  const StepBufferSizes s = step_buffer_sizes(g);
  const bool blocks = g.config().candidate_block_size > 0;
  const auto require = [](const char* name, const OutputBuffer& b, int64_t words, const char* what) {
    if (b.data == nullptr) {
      throw StepError(fmt::format("StepOutputs.{} is null; the geometry's steps write up to {} words of it ({})",
                                  name, words, what));
    }
    if (b.capacity < words) {
      throw StepError(fmt::format(
          "StepOutputs.{} holds {} words; the geometry's steps write up to {} ({}): size it by "
          "step_buffer_sizes",
          name, b.capacity, words, what));
    }
  };
  require("context_lens", out.context_lens, s.context_lens, "max_num_seqs");
  require("decode_row_lens", out.decode_row_lens, s.decode_rows, "the most decode rows");
  if (blocks) require("decode_block_ends", out.decode_block_ends, s.decode_rows, "the most decode rows");
  const int32_t cols = g.max_blocks_per_seq();
  if (out.decode_block_table_stride < cols) {
    throw StepError(fmt::format(
        "StepOutputs.decode_block_table_stride={} is below max_blocks_per_seq={}, the columns a "
        "decode row may copy",
        out.decode_block_table_stride, cols));
  }
  require("decode_block_table", out.decode_block_table,
          (s.decode_rows - 1) * int64_t{out.decode_block_table_stride} + cols,
          "a row of max_blocks_per_seq columns a decode row");
  require("prefill_row_ends", out.prefill_row_ends, s.prefill_rows, "max_num_batched_tokens");
  if (blocks) require("prefill_block_ends", out.prefill_block_ends, s.prefill_rows, "max_num_batched_tokens");
  require("prefill_query_start_loc", out.prefill_query_start_loc, s.prefill_query_start_loc,
          "max_num_seqs + 2 * max_num_batched_tokens");
  require("decode_schedule", out.decode_schedule, s.decode_schedule,
          g.contract() == Contract::deepgemm_sm90 ? "DeepGEMM's [num_compute_units + 1, 2] metadata"
                                                  : "the schedule's most slots");
  if (g.contract() == Contract::flydsl_fp4) {
    require("prefill_schedule", out.prefill_schedule, s.prefill_schedule,
            "every prefill chunk's CTAs, at most, 6 words each");
    require("schedule_safe", out.schedule_safe, s.schedule_safe, "1 + the most prefill chunks");
  }
}

}  // namespace idxplan
