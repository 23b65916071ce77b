// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Engine start: an IndexerConfig, checked once, becomes the Geometry every
// step plans with (docs/design.md section 3). A Geometry that exists is valid.

#include <algorithm>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "idxplan/contracts/contract.hpp"
#include "idxplan/contracts/deepgemm_sm90.hpp"
#include "idxplan/contracts/flydsl_fp4.hpp"
#include "idxplan/error.hpp"
#include "idxplan/kernel_geometry.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan {

// What the engine knows at start: the model's indexer, the cache, the
// scheduler's limits and the GPU.
struct IndexerConfig {
  int32_t num_heads = 64;              // index_n_heads
  int32_t head_dim = 128;              // index_head_dim
  int32_t block_size = 128;            // tokens per KV-cache page
  int32_t compress_ratio = 4;          // tokens per compressed indexer key
  int32_t num_speculative_tokens = 0;  // MTP draft tokens per decode
  bool adaptive_verification = false;  // drafts reallocated across requests
  int32_t max_model_len = 131072;      // tokens
  int32_t candidate_block_size = 0;    // entries; 0: a model-neutral indexer
  int32_t candidate_topk_blocks = 0;   // blocks in the candidate pool
  bool sparse_logits = false;          // indexer_sparse_logits
  int64_t max_logits_mb = 512;         // MiB of fp32 logits one launch may hold
  int32_t num_compute_units = 0;       // the target GPU's CUs (SMs on NVIDIA)
  int32_t dcp_world_size = 1;
  int32_t pcp_world_size = 1;
  int32_t max_num_seqs = 1024;              // requests per step
  int32_t max_num_batched_tokens = 65536;   // tokens per step, padding included
  int32_t max_blocks_per_seq = 0;           // block-table columns; 0: max_model_len's pages
                                            // (the columns the contract reads at most)
  Contract contract = Contract::gluon_mxfp4;  // the consumer the step buffers feed
  int32_t decode_parallel_units = 0;   // flydsl_fp4: the decode grid's CTAs; 0: sglang's rule
  int32_t prefill_parallel_units = 0;  // flydsl_fp4: a prefill chunk's CTAs at least; 0: sglang's 1024
};

// Units a schedule can have at most: the device scans one shared-memory word
// per unit. A schedule has at most target_wgs units, so make_geometry rejects
// a GPU whose target_wgs passes this.
inline constexpr int32_t kMaxScheduleUnits = 8192;
// aiter's scheduler caps the slots of a schedule here.
inline constexpr int32_t kMaxScheduleSlots = 65536;
// Words of one decode schedule descriptor: (seq, row block, slice, slices).
inline constexpr int32_t kDescriptorWords = 4;
// The most int32 words one step buffer may hold: the device indexes them
// with int32. make_geometry refuses a config whose buffers pass it.
inline constexpr int64_t kMaxBufferWords = (int64_t{1} << 31) - 1;
// The most bytes reserve() may give a StepPlan's arrays (2 GiB), so that an
// accepted config never asks the allocator for an absurd plan.
inline constexpr int64_t kMaxReservedPlanBytes = int64_t{1} << 31;

class Geometry;
Geometry make_geometry(const IndexerConfig& c);

// The validated config and everything derived from it once. Only
// make_geometry makes one, and its fields are read-only, so a Geometry that
// exists is valid.
class Geometry {
 public:
  const IndexerConfig& config() const { return config_; }
  int32_t page_entries() const { return page_entries_; }    // compressed entries per page: block_size / C
  const CacheLayout& cache() const { return cache_; }
  int32_t native_next_n() const { return native_next_n_; }  // rows per native decode sequence
  int32_t decode_threshold() const { return decode_threshold_; }  // more query rows: a prefill
  int32_t logits_width() const { return logits_width_; }    // max_model_len / C
  int64_t max_logits_bytes() const { return max_logits_bytes_; }  // max_logits_mb * 2^20
  int32_t max_blocks_per_seq() const { return max_blocks_per_seq_; }  // resolved block-table width
  // min(max_num_batched_tokens, max_num_seqs * decode_threshold)
  int32_t max_decode_rows() const { return max_decode_rows_; }
  // candidate_topk_blocks * candidate_block_size; 0 without sparse logits
  int32_t num_candidate_cols() const { return num_candidate_cols_; }
  int32_t gather_rows() const { return gather_rows_; }  // rows a candidate launch takes at most
  int32_t schedule_words() const { return schedule_words_; }  // int32 words of the decode schedule
  // A digest of the config, never 0: a plan records the geometry it was made
  // with, and the buffers' checks refuse it with any other.
  uint64_t fingerprint() const { return fingerprint_; }
  Contract contract() const { return config_.contract; }
  // flydsl_fp4: the most CTAs a step's decode grid has, and the most words
  // of all its prefill chunks' cta_info (contracts/flydsl_fp4.hpp); 0 for
  // another contract.
  int32_t fp4_decode_ctas() const { return fp4_decode_ctas_; }
  int64_t fp4_prefill_words() const { return fp4_prefill_words_; }
  int32_t fp4_max_chunks() const { return fp4_max_chunks_; }  // prefill chunks a step has at most

  // width >= 1.5 * num_candidate_cols, in integers: prefill chunks gather.
  constexpr bool prefill_gathers(int64_t width) const {
    return num_candidate_cols_ > 0 && 2 * width >= 3 * int64_t{num_candidate_cols_};
  }
  // context >= 3.0 * num_candidate_cols: decode rows gather.
  constexpr bool decode_gathers(int64_t context) const {
    return num_candidate_cols_ > 0 && context >= 3 * int64_t{num_candidate_cols_};
  }
  constexpr LaunchConfig launch(int32_t rows) const {
    return launch_config(config_.num_heads, rows, config_.num_compute_units);
  }

 private:
  Geometry() = default;
  friend Geometry make_geometry(const IndexerConfig& c);

  IndexerConfig config_{};
  int32_t page_entries_ = 0;
  CacheLayout cache_{};
  int32_t native_next_n_ = 1;
  int32_t decode_threshold_ = 1;
  int32_t logits_width_ = 0;
  int64_t max_logits_bytes_ = 0;
  int32_t max_blocks_per_seq_ = 0;
  int32_t max_decode_rows_ = 0;
  int32_t num_candidate_cols_ = 0;
  int32_t gather_rows_ = 0;
  int32_t schedule_words_ = 0;
  int32_t fp4_decode_ctas_ = 0;
  int64_t fp4_prefill_words_ = 0;
  int32_t fp4_max_chunks_ = 0;
  uint64_t fingerprint_ = 0;
};

namespace detail {

inline void require_positive(const char* field, int64_t value) {
  if (value <= 0) throw ConfigError(fmt::format("{} must be positive, got {}", field, value));
}

constexpr bool is_power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// FNV-1a over every field of the config, never 0 (a default StepPlan's).
inline uint64_t fingerprint(const IndexerConfig& c) {
  const int64_t fields[] = {c.num_heads,           c.head_dim,
                            c.block_size,          c.compress_ratio,
                            c.num_speculative_tokens, c.adaptive_verification,
                            c.max_model_len,       c.candidate_block_size,
                            c.candidate_topk_blocks, c.sparse_logits,
                            c.max_logits_mb,       c.num_compute_units,
                            c.dcp_world_size,      c.pcp_world_size,
                            c.max_num_seqs,        c.max_num_batched_tokens,
                            c.max_blocks_per_seq,  static_cast<int64_t>(c.contract),
                            c.decode_parallel_units, c.prefill_parallel_units};
  uint64_t h = 0xcbf29ce484222325u;
  for (const int64_t field : fields) {
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (static_cast<uint64_t>(field) >> (8 * byte)) & 0xFFu;
      h *= 0x100000001b3u;
    }
  }
  return h == 0 ? 1 : h;
}

// flydsl_fp4's demands on the cache: FlyDSL's kernels tile a page in
// 16-token MFMA tiles and a chunk of kBlockK keys in whole pages.
inline void check_flydsl_fp4(const IndexerConfig& c, int32_t page_entries) {
  if (page_entries % 16 != 0 || flydsl_fp4::kBlockK % page_entries != 0) {
    throw ConfigError(fmt::format(
        "contract=flydsl_fp4 needs pages (block_size / compress_ratio = {} / {} = {} entries) of a multiple of 16 "
        "entries that divides FlyDSL's {}-key chunk",
        c.block_size, c.compress_ratio, page_entries, flydsl_fp4::kBlockK));
  }
}

// flydsl_fp4's grids at their largest: a decode of up to `rows` rows (or
// rows / next_n native sequences, at compression 1), and a step's prefill
// chunks, each of max(base, its rows) CTAs. A chunk has a row, and the
// split cuts a group of requests into chunks of at least the rows of the
// widest logits' budget, so chunks are at most requests + tokens / those.
inline void size_flydsl_fp4(const IndexerConfig& c, int32_t rows, int32_t native_next_n, int32_t logits_width,
                            int64_t max_logits_bytes, int32_t& decode_ctas, int64_t& prefill_words,
                            int32_t& max_chunks) {
  const int32_t s_max = flydsl_fp4::chunks_cap(logits_width, flydsl_fp4::kBlockK);
  int64_t ctas = flydsl_fp4::decode_ctas(rows, 1, s_max, c.decode_parallel_units);
  if (c.compress_ratio == 1 && native_next_n > 1) {
    ctas = std::max(ctas, flydsl_fp4::decode_ctas(rows / native_next_n, native_next_n, s_max, c.decode_parallel_units));
  }
  if (c.decode_parallel_units > 0) {
    if (c.decode_parallel_units < rows) {
      throw ConfigError(fmt::format(
          "decode_parallel_units={} is below the {} decode rows a step may have (max_num_seqs x decode rows, "
          "within max_num_batched_tokens): a grid needs a CTA a row",
          c.decode_parallel_units, rows));
    }
    if (c.compress_ratio == 1 && c.decode_parallel_units % native_next_n != 0) {
      throw ConfigError(fmt::format(
          "decode_parallel_units={} is not a multiple of next_n={}, which native decodes run at",
          c.decode_parallel_units, native_next_n));
    }
  }
  const int64_t tokens = c.max_num_batched_tokens;
  const int64_t rows_a_chunk = std::max<int64_t>(1, max_logits_bytes / (4 * int64_t{std::max(logits_width, 1)}));
  const int64_t chunks = std::min<int64_t>(tokens, int64_t{c.max_num_seqs} + tokens / rows_a_chunk);
  const int64_t base = c.prefill_parallel_units > 0 ? c.prefill_parallel_units : flydsl_fp4::kPrefillBaseCtas;
  const int64_t words = flydsl_fp4::kPrefillWords * (chunks * base + tokens);
  if (words > kMaxBufferWords || int64_t{flydsl_fp4::kDecodeWords} * ctas > kMaxBufferWords) {
    throw ConfigError(fmt::format(
        "flydsl_fp4's schedules would need {} decode CTAs and {} prefill words ({} chunks of at least "
        "prefill_parallel_units={} CTAs), past the {} words a step buffer may hold",
        ctas, words, chunks, base, kMaxBufferWords));
  }
  decode_ctas = static_cast<int32_t>(ctas);
  prefill_words = words;
  max_chunks = static_cast<int32_t>(chunks);
}

// deepgemm_sm90's demands: DeepGEMM's SM90 kernels read pages of 64 keys
// (its block_kv, which vLLM passes as the cache's entries a page), and its
// metadata kernel holds at most kMaxBatch sequences, a decode row each at
// most. Its uint32 count of (atom, split) units needs no check of its own:
// a row's keys are at most its pages' (max_blocks_per_seq of 64 keys), the
// decode block table's rows x pages are within 2^31 words (checked before),
// and a split is 4 pages, so the units are under 2^29.
inline void check_deepgemm_sm90(const IndexerConfig& c, int32_t page_entries, int32_t max_decode_rows) {
  if (page_entries != deepgemm_sm90::kBlockKv) {
    throw ConfigError(fmt::format(
        "contract=deepgemm_sm90 needs pages of {} entries (DeepGEMM's SM90 block_kv), got block_size / "
        "compress_ratio = {} / {} = {}",
        deepgemm_sm90::kBlockKv, c.block_size, c.compress_ratio, page_entries));
  }
  if (max_decode_rows > deepgemm_sm90::kMaxBatch) {
    throw ConfigError(fmt::format(
        "contract=deepgemm_sm90: a step may have {} decode rows (max_num_seqs={} x {} rows, within "
        "max_num_batched_tokens={}), past the {} sequences DeepGEMM's metadata kernel holds",
        max_decode_rows, c.max_num_seqs, c.num_speculative_tokens + 1, c.max_num_batched_tokens,
        deepgemm_sm90::kMaxBatch));
  }
  if (int64_t{c.num_compute_units} + 1 > kMaxBufferWords / deepgemm_sm90::kRowWords) {
    throw ConfigError(fmt::format(
        "contract=deepgemm_sm90: num_compute_units={} SMs make a metadata of {} rows, past the {} words a step "
        "buffer may hold",
        c.num_compute_units, int64_t{c.num_compute_units} + 1, kMaxBufferWords));
  }
}

}  // namespace detail

// Checks every rule of docs/design.md sections 3 and 4 and derives the geometry.
// Throws ConfigError naming the field and its value.
inline Geometry make_geometry(const IndexerConfig& c) {
  using detail::require_positive;
  if (c.dcp_world_size > 1 || c.pcp_world_size > 1) {
    throw ConfigError(fmt::format(
        "the ROCm MXFP4 indexer does not support decode/prefill context parallel "
        "(dcp_world_size={}, pcp_world_size={})",
        c.dcp_world_size, c.pcp_world_size));
  }
  require_positive("dcp_world_size", c.dcp_world_size);
  require_positive("pcp_world_size", c.pcp_world_size);
  require_positive("num_heads", c.num_heads);
  require_positive("head_dim", c.head_dim);
  require_positive("block_size", c.block_size);
  require_positive("compress_ratio", c.compress_ratio);
  require_positive("max_model_len", c.max_model_len);
  require_positive("max_logits_mb", c.max_logits_mb);
  require_positive("num_compute_units", c.num_compute_units);
  require_positive("max_num_seqs", c.max_num_seqs);
  require_positive("max_num_batched_tokens", c.max_num_batched_tokens);
  if (c.num_speculative_tokens < 0) {
    throw ConfigError(
        fmt::format("num_speculative_tokens must be >= 0, got {}", c.num_speculative_tokens));
  }
  if (c.candidate_block_size < 0 || c.candidate_topk_blocks < 0 || c.max_blocks_per_seq < 0) {
    throw ConfigError(fmt::format(
        "candidate_block_size, candidate_topk_blocks and max_blocks_per_seq must be >= 0, got "
        "{}, {} and {}",
        c.candidate_block_size, c.candidate_topk_blocks, c.max_blocks_per_seq));
  }
  if (c.decode_parallel_units < 0 || c.prefill_parallel_units < 0) {
    throw ConfigError(fmt::format("decode_parallel_units and prefill_parallel_units must be >= 0, got {} and {}",
                                  c.decode_parallel_units, c.prefill_parallel_units));
  }
  if (c.contract != Contract::flydsl_fp4 && (c.decode_parallel_units > 0 || c.prefill_parallel_units > 0)) {
    throw ConfigError(fmt::format(
        "decode_parallel_units={} and prefill_parallel_units={} size flydsl_fp4's grids; contract={} has none",
        c.decode_parallel_units, c.prefill_parallel_units, contract_name(c.contract)));
  }
  if (c.contract != Contract::gluon_mxfp4 && c.contract != Contract::flydsl_fp4 &&
      c.contract != Contract::deepgemm_sm90) {
    throw ConfigError(fmt::format("contract={} names no contract", static_cast<int32_t>(c.contract)));
  }
  if (c.block_size % c.compress_ratio != 0) {
    throw ConfigError(fmt::format("block_size={} is not a multiple of compress_ratio={}",
                                  c.block_size, c.compress_ratio));
  }
  if (c.head_dim % 32 != 0) {
    throw ConfigError(fmt::format("head_dim={} is not a multiple of 32 (one MXFP4 scale block)",
                                  c.head_dim));
  }
  // Bytes past int32 are rejected here so every product below stays in range.
  constexpr int64_t kMaxLogitsMb = int64_t{1} << 20;
  if (c.max_logits_mb > kMaxLogitsMb) {
    throw ConfigError(
        fmt::format("max_logits_mb={} is past the {} MiB idxplan plans for", c.max_logits_mb,
                    kMaxLogitsMb));
  }
  // A decode has up to num_speculative_tokens + 1 tokens, and must fit a step.
  if (int64_t{c.num_speculative_tokens} + 1 > c.max_num_batched_tokens) {
    throw ConfigError(fmt::format(
        "num_speculative_tokens={} makes decodes of {} tokens, past max_num_batched_tokens={}",
        c.num_speculative_tokens, int64_t{c.num_speculative_tokens} + 1,
        c.max_num_batched_tokens));
  }
  // The packed query_start_loc words are the widest step buffer but the
  // decode block table (checked below): at most requests + 2 * tokens.
  const int64_t packed_words = int64_t{c.max_num_seqs} + 2 * int64_t{c.max_num_batched_tokens};
  if (packed_words > kMaxBufferWords) {
    throw ConfigError(fmt::format(
        "prefill_query_start_loc would need max_num_seqs={} + 2 x max_num_batched_tokens={} = {} "
        "words, past the {} a step buffer may hold",
        c.max_num_seqs, c.max_num_batched_tokens, packed_words, kMaxBufferWords));
  }
  const PlanCapacity plan = PlanCapacity::of(c.max_num_batched_tokens, c.max_num_seqs);
  if (plan.bytes() > kMaxReservedPlanBytes) {
    throw ConfigError(fmt::format(
        "reserve() would give a plan for max_num_batched_tokens={} one-row chunks and "
        "max_num_seqs={} requests {} bytes, past the {} bytes a reserved plan may take",
        c.max_num_batched_tokens, c.max_num_seqs, plan.bytes(), kMaxReservedPlanBytes));
  }

  Geometry g;
  g.config_ = c;
  g.page_entries_ = c.block_size / c.compress_ratio;
  g.cache_ = cache_layout(c.num_heads, c.head_dim, g.page_entries_);
  g.native_next_n_ = c.adaptive_verification ? 1 : c.num_speculative_tokens + 1;
  // DeepGEMM's SM90 kernels take sequences of one or two rows: longer
  // decodes run flattened.
  if (c.contract == Contract::deepgemm_sm90 && g.native_next_n_ > 2) g.native_next_n_ = 1;
  g.decode_threshold_ = c.num_speculative_tokens + 1;
  g.logits_width_ = c.max_model_len / c.compress_ratio;
  if (4 * int64_t{g.logits_width_} >= (int64_t{1} << 31)) {
    throw ConfigError(fmt::format(
        "a logits row of max_model_len / compress_ratio = {} fp32 columns is past 2 GiB",
        g.logits_width_));
  }
  g.max_logits_bytes_ = c.max_logits_mb << 20;
  if (c.contract == Contract::flydsl_fp4) detail::check_flydsl_fp4(c, g.page_entries_);
  // The columns a row reads at most: its pages, or under flydsl_fp4 those
  // of its last chunk of kBlockK keys and the next (flydsl_fp4.hpp).
  const int64_t pages = c.contract == Contract::flydsl_fp4
                            ? flydsl_fp4::table_cols(g.logits_width_, g.page_entries_)
                            : (int64_t{c.max_model_len} + c.block_size - 1) / c.block_size;
  g.max_blocks_per_seq_ = c.max_blocks_per_seq > 0 ? c.max_blocks_per_seq
                                                  : static_cast<int32_t>(pages);
  if (c.max_blocks_per_seq > 0 && c.max_blocks_per_seq < pages) {
    throw ConfigError(fmt::format(
        "max_blocks_per_seq={} cannot hold max_model_len={} in {}-token blocks ({} needed{})",
        c.max_blocks_per_seq, c.max_model_len, c.block_size, pages,
        c.contract == Contract::flydsl_fp4 ? ", with the chunk FlyDSL reads ahead" : ""));
  }
  // Every decode has at most decode_threshold rows, padding requests included.
  g.max_decode_rows_ = static_cast<int32_t>(std::min<int64_t>(
      c.max_num_batched_tokens, int64_t{c.max_num_seqs} * g.decode_threshold_));
  if (int64_t{g.max_blocks_per_seq_} * g.max_decode_rows_ > kMaxBufferWords) {
    throw ConfigError(fmt::format(
        "the decode block table of {} rows (max_num_seqs={} x {} rows) x max_blocks_per_seq={} "
        "is past 2^31 words",
        g.max_decode_rows_, c.max_num_seqs, g.decode_threshold_, g.max_blocks_per_seq_));
  }

  if (c.sparse_logits) {
    constexpr const char* kPrefix = "sparse_logits (indexer_sparse_logits)";
    if (c.candidate_block_size <= 0 || c.candidate_topk_blocks <= 0) {
      throw ConfigError(fmt::format(
          "{} requires a two-level (candidate block) indexer such as DeepSeek-V4.1, got "
          "candidate_block_size={} candidate_topk_blocks={}",
          kPrefix, c.candidate_block_size, c.candidate_topk_blocks));
    }
    if (!detail::is_power_of_two(c.candidate_topk_blocks)) {
      throw ConfigError(fmt::format(
          "{} resolves the candidate pool with a sort that needs a power-of-two block count, "
          "not candidate_topk_blocks={}",
          kPrefix, c.candidate_topk_blocks));
    }
    if (g.page_entries_ % c.candidate_block_size != 0 ||
        c.candidate_block_size > g.cache_.n_per_tile) {
      throw ConfigError(fmt::format(
          "{} needs candidate_block_size={} entries to tile a {}-entry indexer page and fit "
          "in one {}-entry shuffle group",
          kPrefix, c.candidate_block_size, g.page_entries_, g.cache_.n_per_tile));
    }
    const int64_t cols = int64_t{c.candidate_topk_blocks} * c.candidate_block_size;
    if (cols > std::numeric_limits<int32_t>::max() / 4) {
      throw ConfigError(fmt::format(
          "{}: candidate_topk_blocks={} x candidate_block_size={} columns is past a 2 GiB row",
          kPrefix, c.candidate_topk_blocks, c.candidate_block_size));
    }
    g.num_candidate_cols_ = static_cast<int32_t>(cols);
    const int64_t budget =
        std::min<int64_t>(g.max_logits_bytes_, std::numeric_limits<int32_t>::max());
    g.gather_rows_ = static_cast<int32_t>(std::max<int64_t>(1, budget / (4 * cols)));
  }

  if (c.contract == Contract::deepgemm_sm90) {
    detail::check_deepgemm_sm90(c, g.page_entries_, g.max_decode_rows_);
    // [num_sms + 1, 2], num_sms the GPU's SMs.
    g.schedule_words_ = deepgemm_sm90::kRowWords * (c.num_compute_units + 1);
    g.fingerprint_ = detail::fingerprint(c);
    return g;
  }
  // In 64 bits: a huge CU count must be refused, not overflowed.
  const int64_t waves = std::max(g.launch(1).waves_per_eu, g.launch(g.native_next_n_).waves_per_eu);
  const int64_t wgs = 4 * int64_t{c.num_compute_units} * waves;
  if (wgs > kMaxScheduleUnits) {
    throw ConfigError(fmt::format(
        "num_compute_units={} asks for {} decode workgroups, past the {} units the device "
        "schedule holds",
        c.num_compute_units, wgs, kMaxScheduleUnits));
  }
  g.schedule_words_ = kDescriptorWords * std::max(kMaxScheduleSlots, static_cast<int32_t>(wgs));
  if (c.contract == Contract::flydsl_fp4) {
    detail::size_flydsl_fp4(g.config_, g.max_decode_rows_, g.native_next_n_, g.logits_width_, g.max_logits_bytes_,
                            g.fp4_decode_ctas_, g.fp4_prefill_words_, g.fp4_max_chunks_);
    g.schedule_words_ = flydsl_fp4::kDecodeWords * g.fp4_decode_ctas_;
  }
  g.fingerprint_ = detail::fingerprint(c);
  return g;
}

// Block-table columns the contract's launches read in the row of a request
// of up to `seq_len` tokens, at most max_blocks_per_seq: the pages of its
// length, or under flydsl_fp4 those of its chunks and the chunk after
// (flydsl_fp4::table_cols).
inline int32_t block_cols_read(const Geometry& g, int64_t seq_len) {
  const int64_t len = seq_len > 0 ? seq_len : 0;
  const int64_t cols = g.contract() == Contract::flydsl_fp4
                           ? flydsl_fp4::table_cols(len / g.config().compress_ratio, g.page_entries())
                           : (len + g.config().block_size - 1) / g.config().block_size;
  return static_cast<int32_t>(std::min<int64_t>(cols, g.max_blocks_per_seq()));
}

}  // namespace idxplan
