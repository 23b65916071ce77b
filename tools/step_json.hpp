// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The idxplan command's JSON (DESIGN.md section 7): a step in, its plan and
// the CPU reference's buffers out.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "idxplan/idxplan.hpp"

namespace idxplan::tool {

using nlohmann::json;

// A step as the command reads it.
struct StepRequest {
  IndexerConfig config;
  std::vector<int32_t> query_start_loc;
  std::vector<int32_t> seq_lens;
  std::vector<int32_t> seq_lens_upper_bound;
  int64_t num_tokens = kUnpaddedTokens;
};

// A planned step and the buffers the device would hold, sized to the step.
struct PlannedStep {
  Geometry geometry;
  StepPlan plan;
  std::vector<int32_t> context_lens, decode_row_lens, decode_block_ends, decode_block_table,
      prefill_row_ends, prefill_block_ends, prefill_query_start_loc, decode_schedule;
};

namespace detail {

template <class E = StepError>
int32_t to_int32(const json& value, const std::string& where) {
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

inline std::vector<int32_t> to_list(const json& step, const char* key) {
  if (!step.contains(key)) throw StepError(fmt::format("step.{} is missing", key));
  const json& list = step.at(key);
  if (!list.is_array()) throw StepError(fmt::format("step.{} must be a list of integers", key));
  std::vector<int32_t> out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    out.push_back(to_int32(list[i], fmt::format("step.{}[{}]", key, i)));
  }
  return out;
}

inline IndexerConfig to_config(const json& j) {
  if (!j.is_object()) throw ConfigError("config must be an object");
  IndexerConfig c;
  for (const auto& item : j.items()) {
    // Not a structured binding: C++17 lambdas cannot capture one.
    const std::string& key = item.key();
    const json& value = item.value();
    const std::string where = "config." + key;
    auto integer = [&](auto& field) {
      field = to_int32<ConfigError>(value, where);
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
    else throw ConfigError(fmt::format("config has an unknown key \"{}\"", key));
  }
  return c;
}

}  // namespace detail

// Reads {"config": {...}, "step": {...}}; throws ConfigError or StepError
// naming the field for anything the library would not see as wrong itself.
inline StepRequest parse_step_request(const json& j) {
  if (!j.is_object() || !j.contains("config") || !j.contains("step")) {
    throw StepError("the input must be an object with \"config\" and \"step\"");
  }
  StepRequest r;
  r.config = detail::to_config(j.at("config"));
  // The config first: a step is judged against it.
  (void)make_geometry(r.config);
  const json& step = j.at("step");
  if (!step.is_object()) throw StepError("step must be an object");
  for (const auto& item : step.items()) {
    const std::string& key = item.key();
    if (key != "query_start_loc" && key != "seq_lens" && key != "seq_lens_upper_bound" &&
        key != "num_tokens") {
      throw StepError(fmt::format("step has an unknown key \"{}\"", key));
    }
  }
  r.query_start_loc = detail::to_list(step, "query_start_loc");
  r.seq_lens = detail::to_list(step, "seq_lens");
  r.seq_lens_upper_bound =
      step.contains("seq_lens_upper_bound") ? detail::to_list(step, "seq_lens_upper_bound") : r.seq_lens;
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
    r.num_tokens = detail::to_int32(step.at("num_tokens"), "step.num_tokens");
    if (r.num_tokens < r.query_start_loc.back()) {
      throw StepError(fmt::format("step.num_tokens={} is below query_start_loc's last {}",
                                  r.num_tokens, r.query_start_loc.back()));
    }
  }
  return r;
}

// Plans the step and runs the CPU reference of every device buffer.
inline PlannedStep plan_request(const StepRequest& r) {
  PlannedStep s{make_geometry(r.config), {}, {}, {}, {}, {}, {}, {}, {}, {}};
  plan_step(s.geometry, r.query_start_loc, r.seq_lens_upper_bound, r.num_tokens, s.plan);
  // The library checked the bounds against query_start_loc; the exact
  // lengths, which only the device sees in an engine, are checked here.
  for (std::size_t i = 0; i + 1 < r.query_start_loc.size(); ++i) {
    const int32_t query_len = r.query_start_loc[i + 1] - r.query_start_loc[i];
    if (r.seq_lens[i] < query_len) {
      throw StepError(fmt::format("step.seq_lens[{}]={} is below its query length {}", i,
                                  r.seq_lens[i], query_len));
    }
  }
  const StepPlan& p = s.plan;
  const auto size = [](int64_t n) { return static_cast<std::size_t>(n); };
  const int32_t cols = p.decode.num_block_cols;
  s.context_lens.resize(size(p.num_reqs));
  s.decode_row_lens.resize(size(p.decode.num_rows));
  s.decode_block_ends.resize(size(p.decode.num_rows));
  s.decode_block_table.resize(size(int64_t{p.decode.num_rows} * cols));
  s.prefill_row_ends.resize(size(p.num_prefill_tokens));
  s.prefill_block_ends.resize(size(p.num_prefill_tokens));
  s.prefill_query_start_loc.resize(size(p.num_prefill_query_start_loc_words));
  s.decode_schedule.resize(size(int64_t{kDescriptorWords} * p.decode.schedule.num_ctas));
  // The command takes no block table: page ids are not part of its output.
  const std::vector<int32_t> block_table(size(int64_t{p.num_reqs} * cols), 0);
  const StepInputs in{r.seq_lens.data(), r.query_start_loc.data(), block_table.data(), cols};
  const StepOutputs out{s.context_lens.data(),       s.decode_row_lens.data(),
                        s.decode_block_ends.data(),  s.decode_block_table.data(),
                        s.prefill_row_ends.data(),   s.prefill_block_ends.data(),
                        s.prefill_query_start_loc.data(), s.decode_schedule.data(), cols};
  fill_step_buffers(s.geometry, p, in, out);
  return s;
}

// The plan as DESIGN.md section 7's JSON: every key present, null where the
// plan has none.
inline json to_json(const PlannedStep& s) {
  const StepPlan& p = s.plan;
  const bool blocks = s.geometry.config.candidate_block_size > 0;
  auto range = [](const std::vector<int32_t>& v, int64_t lo, int64_t hi) {
    return json(std::vector<int32_t>(v.begin() + lo, v.begin() + hi));
  };
  json out;
  out["num_decodes"] = p.num_decodes;
  out["num_decode_tokens"] = p.num_decode_tokens;
  out["num_prefills"] = p.num_prefills;
  out["num_prefill_tokens"] = p.num_prefill_tokens;
  out["max_seq_len"] = p.max_seq_len;
  out["context_lens"] = s.context_lens;
  json decode = nullptr;
  if (p.has_decode()) {
    decode["row_lens"] = s.decode_row_lens;
    decode["block_ends"] = blocks ? json(s.decode_block_ends) : json(nullptr);
    decode["native"] = p.decode.native.present()
                           ? json{{"next_n", p.decode.native.next_n},
                                  {"num_seqs", p.decode.native.num_seqs}}
                           : json(nullptr);
    decode["use_gather"] = p.decode.use_gather;
    decode["schedule"] = p.decode.schedule.present()
                             ? json{{"num_ctas", p.decode.schedule.num_ctas},
                                    {"words", s.decode_schedule}}
                             : json(nullptr);
  }
  out["decode"] = decode;
  json prefill = json::array();
  for (const PrefillPlan& c : p.prefill) {
    json requests = json::array();
    for (int32_t k = 0; k < c.num_pieces; ++k) {
      const RequestRows& r = p.pieces_of(c)[k];
      requests.push_back({r.first_row, r.end_row, r.request});
    }
    const int64_t lo = c.token_start - p.num_decode_tokens;
    const int64_t hi = c.token_end - p.num_decode_tokens;
    prefill.push_back({{"token_start", c.token_start},
                       {"token_end", c.token_end},
                       {"first_request", c.first_request},
                       {"num_reqs", c.num_reqs},
                       {"requests", requests},
                       {"width", c.width},
                       {"use_gather", c.use_gather},
                       {"query_start_loc", range(s.prefill_query_start_loc, c.query_start_loc_offset,
                                                 c.query_start_loc_offset + c.num_reqs + 1)},
                       {"context_lens", range(s.context_lens, c.first_request,
                                              c.first_request + c.num_reqs)},
                       {"row_ends", range(s.prefill_row_ends, lo, hi)},
                       {"block_ends", blocks ? range(s.prefill_block_ends, lo, hi) : json(nullptr)}});
  }
  out["prefill"] = prefill;
  json launches = json::array();
  for (const GatherLaunch& l : p.gather_launches) {
    launches.push_back({{"token_start", l.token_start},
                        {"token_end", l.token_end},
                        {"request", l.request},
                        {"context_len", s.context_lens[static_cast<std::size_t>(l.request)]},
                        {"row_ends", range(s.prefill_row_ends, l.token_start - p.num_decode_tokens,
                                           l.token_end - p.num_decode_tokens)}});
  }
  out["gather_launches"] = launches;
  return out;
}

}  // namespace idxplan::tool
