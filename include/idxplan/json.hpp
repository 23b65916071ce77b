// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The step and plan JSON of docs/cli.md (docs/design.md section 7), for any
// front end: a step in, its plan and the CPU reference's buffers out. The
// idxplan command and the Python module both read and write it through this
// header. Optional: it needs nlohmann-json where it is included (CMake:
// idxplan::json, the package's json component), and idxplan.hpp does not
// include it.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "idxplan/idxplan.hpp"

namespace idxplan {

// A step as docs/cli.md's input holds it: the config and the step's arrays.
struct StepRequest {
  IndexerConfig config;
  std::vector<int32_t> query_start_loc;
  std::vector<int32_t> seq_lens;
  std::vector<int32_t> seq_lens_upper_bound;
  int64_t num_tokens = kUnpaddedTokens;
};

// A planned step, its inputs and the buffers the device would hold, sized
// to the step and filled by the CPU reference.
struct PlannedStep {
  Geometry geometry;
  StepPlan plan;
  std::vector<int32_t> query_start_loc, seq_lens;
  // The command takes no block table: page ids are not part of its output,
  // so the step reads a table of zeros.
  std::vector<int32_t> block_table;
  int32_t block_table_stride = 0;
  HostStepBuffers buffers;

  StepInputs inputs() const {
    return make_step_inputs(seq_lens, query_start_loc, block_table, block_table_stride);
  }
};

namespace detail {

template <class E = StepError>
int32_t json_int32(const nlohmann::json& value, const std::string& where) {
  if (!value.is_number_integer()) {
    throw E(fmt::format("{} must be an integer, got {}", where, value.dump()));
  }
  // A number past int64 is unsigned in nlohmann-json; say it as given.
  const bool fits = value.is_number_unsigned()
                        ? value.get<uint64_t>() <= uint64_t{std::numeric_limits<int32_t>::max()}
                        : value.get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
                              value.get<int64_t>() <= std::numeric_limits<int32_t>::max();
  if (!fits) throw E(fmt::format("{}={} does not fit int32", where, value.dump()));
  return static_cast<int32_t>(value.get<int64_t>());
}

inline std::vector<int32_t> json_list(const nlohmann::json& step, const char* key) {
  if (!step.contains(key)) throw StepError(fmt::format("step.{} is missing", key));
  const nlohmann::json& list = step.at(key);
  if (!list.is_array()) throw StepError(fmt::format("step.{} must be a list of integers", key));
  std::vector<int32_t> out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    out.push_back(json_int32(list[i], fmt::format("step.{}[{}]", key, i)));
  }
  return out;
}

}  // namespace detail

// An IndexerConfig from docs/cli.md's `config` object, IndexerConfig's
// defaults for the keys it lacks; throws ConfigError naming the key for an
// unknown one or a value of the wrong type or past int32. make_geometry
// judges the values (and needs num_compute_units).
inline IndexerConfig config_from_json(const nlohmann::json& j) {
  using detail::json_int32;
  if (!j.is_object()) throw ConfigError("config must be an object");
  IndexerConfig c;
  for (const auto& item : j.items()) {
    // Not a structured binding: C++17 lambdas cannot capture one.
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    const std::string where = "config." + key;
    auto integer = [&](auto& field) {
      field = json_int32<ConfigError>(value, where);
    };
    auto boolean = [&](bool& field) {
      if (!value.is_boolean()) throw ConfigError(fmt::format("{} must be true or false", where));
      field = value.get<bool>();
    };
    if (key == "num_heads") integer(c.num_heads);
    else if (key == "head_dim") integer(c.head_dim);
    else if (key == "block_size") integer(c.block_size);
    else if (key == "compress_ratio") integer(c.compress_ratio);
    else if (key == "num_speculative_tokens") integer(c.num_speculative_tokens);
    else if (key == "adaptive_verification") boolean(c.adaptive_verification);
    else if (key == "max_model_len") integer(c.max_model_len);
    else if (key == "candidate_block_size") integer(c.candidate_block_size);
    else if (key == "candidate_topk_blocks") integer(c.candidate_topk_blocks);
    else if (key == "sparse_logits") boolean(c.sparse_logits);
    else if (key == "max_logits_mb") integer(c.max_logits_mb);
    else if (key == "num_compute_units") integer(c.num_compute_units);
    else if (key == "dcp_world_size") integer(c.dcp_world_size);
    else if (key == "pcp_world_size") integer(c.pcp_world_size);
    else if (key == "max_num_seqs") integer(c.max_num_seqs);
    else if (key == "max_num_batched_tokens") integer(c.max_num_batched_tokens);
    else if (key == "max_blocks_per_seq") integer(c.max_blocks_per_seq);
    else if (key == "decode_parallel_units") integer(c.decode_parallel_units);
    else if (key == "prefill_parallel_units") integer(c.prefill_parallel_units);
    else if (key == "contract") {
      if (!value.is_string() || !contract_from_name(value.get<std::string>(), c.contract)) {
        throw ConfigError(fmt::format(
            "{} must be \"gluon_mxfp4\", \"flydsl_fp4\" or \"deepgemm_sm90\", got {}", where, value.dump()));
      }
    }
    else throw ConfigError(fmt::format("config has an unknown key \"{}\"", key));
  }
  return c;
}

// The config as config_from_json reads it: every field, so it round-trips.
inline nlohmann::json config_to_json(const IndexerConfig& c) {
  return {{"num_heads", c.num_heads},
          {"head_dim", c.head_dim},
          {"block_size", c.block_size},
          {"compress_ratio", c.compress_ratio},
          {"num_speculative_tokens", c.num_speculative_tokens},
          {"adaptive_verification", c.adaptive_verification},
          {"max_model_len", c.max_model_len},
          {"candidate_block_size", c.candidate_block_size},
          {"candidate_topk_blocks", c.candidate_topk_blocks},
          {"sparse_logits", c.sparse_logits},
          {"max_logits_mb", c.max_logits_mb},
          {"num_compute_units", c.num_compute_units},
          {"dcp_world_size", c.dcp_world_size},
          {"pcp_world_size", c.pcp_world_size},
          {"max_num_seqs", c.max_num_seqs},
          {"max_num_batched_tokens", c.max_num_batched_tokens},
          {"max_blocks_per_seq", c.max_blocks_per_seq},
          {"contract", std::string(contract_name(c.contract))},
          {"decode_parallel_units", c.decode_parallel_units},
          {"prefill_parallel_units", c.prefill_parallel_units}};
}

// Reads docs/cli.md's input, {"config": {...}, "step": {...}}; throws
// ConfigError or StepError naming the field for anything the library would
// not see as wrong itself.
inline StepRequest parse_step_request(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("config") || !j.contains("step")) {
    throw StepError("the input must be an object with \"config\" and \"step\"");
  }
  StepRequest r;
  r.config = config_from_json(j.at("config"));
  // The config first: a step is judged against it.
  (void)make_geometry(r.config);
  const nlohmann::json& step = j.at("step");
  if (!step.is_object()) throw StepError("step must be an object");
  for (const auto& item : step.items()) {
    const std::string& key = item.key();
    if (key != "query_start_loc" && key != "seq_lens" && key != "seq_lens_upper_bound" &&
        key != "num_tokens") {
      throw StepError(fmt::format("step has an unknown key \"{}\"", key));
    }
  }
  r.query_start_loc = detail::json_list(step, "query_start_loc");
  r.seq_lens = detail::json_list(step, "seq_lens");
  r.seq_lens_upper_bound =
      step.contains("seq_lens_upper_bound") ? detail::json_list(step, "seq_lens_upper_bound") : r.seq_lens;
  if (r.query_start_loc.empty()) throw StepError("step.query_start_loc needs at least one entry");
  const std::size_t num_reqs = r.query_start_loc.size() - 1;
  if (r.seq_lens.size() != num_reqs) {
    throw StepError(fmt::format("step.seq_lens has {} entries; query_start_loc's {} need {}",
                                r.seq_lens.size(), r.query_start_loc.size(), num_reqs));
  }
  if (r.seq_lens_upper_bound.size() != num_reqs) {
    throw StepError(fmt::format("step.seq_lens_upper_bound has {} entries; it needs {}",
                                r.seq_lens_upper_bound.size(), num_reqs));
  }
  for (std::size_t i = 0; i < num_reqs; ++i) {
    if (r.seq_lens[i] < 0) {
      throw StepError(fmt::format("step.seq_lens[{}]={} is negative", i, r.seq_lens[i]));
    }
    if (r.seq_lens_upper_bound[i] < r.seq_lens[i]) {
      throw StepError(fmt::format("step.seq_lens_upper_bound[{}]={} is below step.seq_lens[{}]={}",
                                  i, r.seq_lens_upper_bound[i], i, r.seq_lens[i]));
    }
    if (r.seq_lens[i] > r.config.max_model_len) {
      throw StepError(fmt::format("step.seq_lens[{}]={} is past max_model_len={}", i,
                                  r.seq_lens[i], r.config.max_model_len));
    }
  }
  if (step.contains("num_tokens")) {
    r.num_tokens = detail::json_int32(step.at("num_tokens"), "step.num_tokens");
    if (r.num_tokens < r.query_start_loc.back()) {
      throw StepError(fmt::format("step.num_tokens={} is below query_start_loc's last {}",
                                  r.num_tokens, r.query_start_loc.back()));
    }
  }
  return r;
}

// Plans the step and runs the CPU reference of every device buffer; throws
// StepError for an exact length below its query length, which only the
// device would see in an engine.
inline PlannedStep plan_request(const StepRequest& r) {
  const Geometry geometry = make_geometry(r.config);
  StepPlan plan;
  plan_step(geometry, r.query_start_loc, r.seq_lens_upper_bound, r.num_tokens, plan);
  // The library checked the bounds against query_start_loc; the exact
  // lengths, which only the device sees in an engine, are checked here.
  for (std::size_t i = 0; i + 1 < r.query_start_loc.size(); ++i) {
    const int32_t query_len = r.query_start_loc[i + 1] - r.query_start_loc[i];
    if (r.seq_lens[i] < query_len) {
      throw StepError(fmt::format("step.seq_lens[{}]={} is below its query length {}", i,
                                  r.seq_lens[i], query_len));
    }
  }
  const int32_t table_cols = block_table_cols_read(geometry, plan);
  std::vector<int32_t> block_table(static_cast<std::size_t>(int64_t{plan.num_reqs} * table_cols), 0);
  HostStepBuffers buffers(step_buffer_sizes(plan), plan.decode.num_block_cols);
  PlannedStep s{geometry, std::move(plan), r.query_start_loc, r.seq_lens, std::move(block_table),
                table_cols, std::move(buffers)};
  fill_step_buffers(s.geometry, s.plan, s.inputs(), s.buffers.outputs());
  return s;
}

namespace detail {

// `count` words of a view's array, or null for an absent one.
inline nlohmann::json json_words(const int32_t* data, int64_t count) {
  if (data == nullptr) return nullptr;
  return nlohmann::json(std::vector<int32_t>(data, data + count));
}

}  // namespace detail

// The plan as docs/cli.md's output: every key present, null where the plan
// has none. Every per-launch array comes through the launch views of
// plan/launches.hpp, as an engine reads them; `s` is not changed (its
// buffers give the views their addresses).
inline nlohmann::json plan_to_json(PlannedStep& s) {
  using nlohmann::json;
  const StepPlan& p = s.plan;
  const Geometry& g = s.geometry;
  const StepInputs in = s.inputs();
  const StepOutputs out = s.buffers.outputs();  // read only: the views do address arithmetic
  json j;
  j["num_decodes"] = p.num_decodes;
  j["num_decode_tokens"] = p.num_decode_tokens;
  j["num_prefills"] = p.num_prefills;
  j["num_prefill_tokens"] = p.num_prefill_tokens;
  j["max_seq_len"] = p.max_seq_len;
  j["context_lens"] = s.buffers.context_lens;
  json decode = nullptr;
  if (p.has_decode()) {
    const DecodeLaunch d = decode_launch(g, p, in, out);
    const int64_t rows = int64_t{d.num_seqs} * d.next_n;
    decode["row_lens"] = detail::json_words(d.row_ends, rows);
    decode["block_ends"] = detail::json_words(d.block_ends, rows);
    decode["native"] = p.decode.native.present()
                           ? json{{"next_n", d.next_n}, {"num_seqs", d.num_seqs}}
                           : json(nullptr);
    decode["use_gather"] = d.use_gather;
    decode["block_table"] = d.in_place ? "engine" : "decode_block_table";
    decode["schedule"] = d.schedule != nullptr
                             ? json{{"num_ctas", d.num_ctas}, {"words", detail::json_words(d.schedule, d.schedule_words)}}
                             : json(nullptr);
  }
  j["decode"] = decode;
  json prefill = json::array();
  for (std::size_t i = 0; i < p.prefill.size(); ++i) {
    const PrefillPlan& c = p.prefill[i];
    const PrefillLaunch l = prefill_launch(g, p, i, in, out);
    json requests = json::array();
    for (int32_t k = 0; k < c.num_pieces; ++k) {
      const RequestRows& r = p.pieces_of(c)[k];
      requests.push_back({r.first_row, r.end_row, r.request});
    }
    const int64_t rows = l.token_end - l.token_start;
    prefill.push_back({{"token_start", l.token_start},
                       {"token_end", l.token_end},
                       {"first_request", l.first_request},
                       {"num_reqs", l.num_reqs},
                       {"requests", requests},
                       {"width", l.width},
                       {"use_gather", l.use_gather},
                       {"query_start_loc", detail::json_words(l.query_start_loc, l.num_reqs + 1)},
                       {"context_lens", detail::json_words(l.context_lens, l.num_reqs)},
                       {"row_ends", detail::json_words(l.row_ends, rows)},
                       {"block_ends", detail::json_words(l.block_ends, rows)}});
  }
  j["prefill"] = prefill;
  json launches = json::array();
  for (std::size_t i = 0; i < p.gather_launches.size(); ++i) {
    const CandidateLaunch l = candidate_launch(g, p, i, in, out);
    launches.push_back({{"token_start", l.token_start},
                        {"token_end", l.token_end},
                        {"request", l.request},
                        {"context_len", *l.context_len},
                        {"row_ends", detail::json_words(l.row_ends, l.token_end - l.token_start)}});
  }
  j["gather_launches"] = launches;
  return j;
}

}  // namespace idxplan
