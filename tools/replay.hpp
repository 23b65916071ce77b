// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// `idxplan replay` (docs/replay.md): a serving trace through the scheduler
// model, every step planned as an engine would plan it, filled by the CPU
// reference and checked, and what an engine team wants to know reported.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <istream>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "idxplan/idxplan.hpp"
#include "scheduler.hpp"
#include "idxplan/json.hpp"

namespace idxplan::tool {

using nlohmann::json;

// Reads a Mooncake trace: one JSON object a line with timestamp (ms),
// input_length, output_length and hash_ids; at most `limit` requests (0:
// all). Throws std::invalid_argument naming the line.
inline std::vector<TraceRequest> read_trace(std::istream& in, std::size_t limit = 0) {
  std::vector<TraceRequest> trace;
  std::string line;
  std::size_t number = 0;
  while ((limit == 0 || trace.size() < limit) && std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      const json j = json::parse(line);
      TraceRequest r;
      r.timestamp_ms = j.at("timestamp").get<int64_t>();
      r.input_length = j.at("input_length").get<int32_t>();
      r.output_length = j.at("output_length").get<int32_t>();
      r.hash_ids = j.at("hash_ids").get<std::vector<int64_t>>();
      if (!trace.empty() && r.timestamp_ms < trace.back().timestamp_ms) {
        throw std::invalid_argument("its timestamp is before the line before's");
      }
      trace.push_back(std::move(r));
    } catch (const std::exception& e) {
      throw std::invalid_argument(fmt::format("trace line {}: {}", number, e.what()));
    }
  }
  return trace;
}

// p50, p99, p99.9 and max of a sample (nearest rank), 0 for none.
struct Spread {
  double p50 = 0, p99 = 0, p999 = 0, max = 0;

  static Spread of(std::vector<double> v) {
    Spread s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    const auto rank = [&](double q) {
      const auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
      return v[std::min(i, v.size() - 1)];
    };
    s.p50 = rank(0.50);
    s.p99 = rank(0.99);
    s.p999 = rank(0.999);
    s.max = v.back();
    return s;
  }
  json to_json() const { return {{"p50", p50}, {"p99", p99}, {"p99.9", p999}, {"max", max}}; }
};

// What a replay does with each step beside planning and checking it: the
// device replay (tools/replay_device.hip) enqueues it, times it and compares
// the device's buffers with the CPU reference's.
struct StepHook {
  virtual ~StepHook() = default;
  // After the step is planned; `host` holds the CPU reference's buffers on
  // a checked step, else it is null. Throws std::runtime_error on a mismatch.
  virtual void run(const StepPlan& plan, const Step& step, const HostStepBuffers* host) = 0;
  virtual json summary() const = 0;
  virtual std::string summary_text() const = 0;
};

struct ReplayOptions {
  bool check = true;             // CPU fill and every invariant ...
  int64_t check_every = 1;       // ... on every Nth step
  std::ostream* dump = nullptr;  // every step as a line of `idxplan plan` input
  StepHook* hook = nullptr;
};

// Buffer words a step used at most, against what the geometry reserves.
struct BufferUse {
  const char* name;
  int64_t used = 0;
  int64_t reserved = 0;
};

struct ReplayReport {
  std::size_t requests = 0, finished = 0;
  int64_t steps = 0, decode_only = 0, mixed = 0, prefill_only = 0, empty = 0;
  int64_t with_decodes = 0, native = 0, ragged = 0, rows_in_place = 0, scheduled = 0, padded = 0;
  int64_t prompt_tokens = 0, cached_tokens = 0, prefilled_tokens = 0, generated_tokens = 0;
  Spread chunks, gathers, requests_a_step, tokens_a_step, plan_us;
  std::vector<BufferUse> buffers;
  double simulated_s = 0;  // the trace's time through the step model
  double wall_s = 0;       // the whole replay
  double plan_s = 0;       // plan_step alone, summed
  double check_s = 0;      // CPU fill and checks, summed
  double hook_s = 0;       // the step hook (the device replay's launch and compare), summed
  json series;             // per-step series for plots: time, kind, plan time

  json to_json() const;
};

// A step that failed its checks, and the step as `idxplan plan` reads it.
struct ReplayFailure : std::runtime_error {
  json step;
  ReplayFailure(const std::string& what, json s) : std::runtime_error(what), step(std::move(s)) {}
};

inline json step_request_json(const IndexerConfig& c, const Step& s) {
  return {{"config", config_to_json(c)},
          {"step", {{"query_start_loc", s.query_start_loc}, {"seq_lens", s.seq_lens},
                    {"num_tokens", s.num_tokens}}}};
}

namespace detail {

// The invariants a replayed step keeps: every request's tokens in the plan,
// buffers within the geometry's sizes, every launch within what the plan
// sized (launch_check.hpp). An empty string when all hold.
inline std::string step_violation(const Geometry& g, const StepPlan& p, const Step& s,
                                  const StepInputs& in, const StepOutputs& out) {
  const auto tokens = static_cast<int32_t>(s.query_start_loc.back());
  if (p.num_reqs != static_cast<int32_t>(s.seq_lens.size())) return "num_reqs differs from the step's";
  if (p.num_decode_tokens + p.num_prefill_tokens != (p.num_reqs > 0 ? s.num_tokens : 0)) {
    return fmt::format("decode + prefill tokens {} + {} are not the step's {}", p.num_decode_tokens,
                       p.num_prefill_tokens, s.num_tokens);
  }
  for (const PrefillPlan& c : p.prefill) {
    if (c.token_start < p.num_decode_tokens || c.token_end > tokens || c.token_end <= c.token_start) {
      return fmt::format("chunk [{}, {}) outside the prefill tokens", c.token_start, c.token_end);
    }
    if (c.token_end - c.token_start > 1 &&
        int64_t{4} * (c.token_end - c.token_start) * std::max(c.width, 1) > g.max_logits_bytes()) {
      return fmt::format("chunk [{}, {}) of width {} passes the logits budget", c.token_start,
                         c.token_end, c.width);
    }
  }
  for (const GatherLaunch& l : p.gather_launches) {
    if (l.token_end - l.token_start > g.gather_rows()) return "a gather launch passes gather_rows";
  }
  const StepBufferSizes used = step_buffer_sizes(p);
  const StepBufferSizes reserved = step_buffer_sizes(g);
  if (used.prefill_query_start_loc > reserved.prefill_query_start_loc ||
      used.decode_rows > reserved.decode_rows || used.prefill_rows > reserved.prefill_rows ||
      used.decode_schedule > reserved.decode_schedule || used.prefill_schedule > reserved.prefill_schedule ||
      used.schedule_safe > reserved.schedule_safe) {
    return "a buffer's words pass step_buffer_sizes";
  }
  if (g.contract() == Contract::flydsl_fp4) {
    const std::string grids = flydsl_fp4::grid_violation(g, p, s.query_start_loc, out);
    if (!grids.empty()) return grids;
  }
  const std::string metadata = deepgemm_sm90::metadata_violation(g, p, out);
  if (!metadata.empty()) return metadata;
  return launch_bound_violation(g, p, in, out);
}

}  // namespace detail

// Replays `trace` through the scheduler model, planning every step for `g`.
// Throws ReplayFailure on the first step that fails its checks.
inline ReplayReport replay(const Geometry& g, const std::vector<TraceRequest>& trace,
                           const SchedulerConfig& config, const ReplayOptions& options) {
  using clock = std::chrono::steady_clock;
  const auto started = clock::now();
  Scheduler scheduler(trace, config);
  StepPlan plan;
  reserve(plan, g);
  // The engine's buffers, sized once; its block table, one row a seat.
  HostStepBuffers buffers(g, -7);
  const StepOutputs outputs = buffers.outputs();
  check_step_outputs(g, outputs);
  const int32_t stride = g.max_blocks_per_seq();
  std::vector<int32_t> block_table;
  if (options.check) {
    block_table.resize(static_cast<std::size_t>(g.config().max_num_seqs) * static_cast<std::size_t>(stride));
    for (std::size_t i = 0; i < block_table.size(); ++i) block_table[i] = static_cast<int32_t>(i % 1000003);
  }

  ReplayReport report;
  report.requests = trace.size();
  std::vector<double> chunks, gathers, requests, tokens, plan_us;
  StepBufferSizes most{};
  json time_s = json::array(), kind = json::array(), step_plan_us = json::array();
  Step step;
  while (scheduler.next(step)) {
    const auto t0 = clock::now();
    try {
      plan_step(g, step.query_start_loc, step.seq_lens, step.num_tokens, plan);
    } catch (const StepError& e) {
      throw ReplayFailure(fmt::format("step {}: plan_step refused it: {}", step.index, e.what()),
                          step_request_json(g.config(), step));
    }
    const auto t1 = clock::now();
    const double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    report.plan_s += us * 1e-6;
    const bool checked = options.check && step.index % options.check_every == 0;
    if (checked) {
      // The block table is the engine's, a row a request: exactly num_reqs rows.
      const Span<const int32_t> table(block_table.data(), step.seq_lens.size() * static_cast<std::size_t>(stride));
      const StepInputs in = make_step_inputs(step.seq_lens, step.query_start_loc, table, stride);
      std::string violation;
      try {
        fill_step_buffers(g, plan, in, outputs);
        violation = detail::step_violation(g, plan, step, in, outputs);
      } catch (const StepError& e) {
        violation = e.what();
      }
      if (!violation.empty()) {
        throw ReplayFailure(fmt::format("step {}: {}", step.index, violation),
                            step_request_json(g.config(), step));
      }
      report.check_s += std::chrono::duration<double>(clock::now() - t1).count();
    }
    if (options.hook != nullptr) {
      const auto h0 = clock::now();
      try {
        options.hook->run(plan, step, checked ? &buffers : nullptr);
      } catch (const std::runtime_error& e) {
        throw ReplayFailure(fmt::format("step {}: {}", step.index, e.what()), step_request_json(g.config(), step));
      }
      report.hook_s += std::chrono::duration<double>(clock::now() - h0).count();
    }
    if (options.dump != nullptr) *options.dump << step_request_json(g.config(), step).dump() << '\n';

    ++report.steps;
    const bool decodes = plan.num_decodes > 0;
    const bool prefills = plan.num_prefills > 0;
    report.empty += !decodes && !prefills;
    report.decode_only += decodes && !prefills;
    report.mixed += decodes && prefills;
    report.prefill_only += prefills && !decodes;
    report.with_decodes += decodes;
    report.native += plan.decode.native.present();
    report.ragged += plan.decode.ragged();
    report.rows_in_place += plan.decode.rows_are_requests;
    report.scheduled += plan.decode.schedule.present();
    report.padded += step.num_tokens > step.query_start_loc.back();
    chunks.push_back(static_cast<double>(plan.prefill.size()));
    gathers.push_back(static_cast<double>(plan.gather_launches.size()));
    requests.push_back(static_cast<double>(plan.num_reqs));
    tokens.push_back(static_cast<double>(step.num_tokens));
    plan_us.push_back(us);
    const StepBufferSizes used = step_buffer_sizes(plan);
    most.context_lens = std::max(most.context_lens, used.context_lens);
    most.decode_rows = std::max(most.decode_rows, used.decode_rows);
    most.decode_block_table = std::max(most.decode_block_table,
                                       plan.decode.ragged() ? int64_t{used.decode_rows} * stride : 0);
    most.prefill_rows = std::max(most.prefill_rows, used.prefill_rows);
    most.prefill_query_start_loc = std::max(most.prefill_query_start_loc, used.prefill_query_start_loc);
    most.decode_schedule = std::max(most.decode_schedule, used.decode_schedule);
    most.prefill_schedule = std::max(most.prefill_schedule, used.prefill_schedule);
    most.schedule_safe = std::max(most.schedule_safe, used.schedule_safe);
    time_s.push_back(step.time_ms / 1000.0);
    kind.push_back(decodes && prefills ? "mixed" : (decodes ? "decode" : (prefills ? "prefill" : "empty")));
    step_plan_us.push_back(us);
  }
  for (std::size_t r = 0; r < trace.size(); ++r) {
    const Scheduler::State& s = scheduler.state(r);
    report.prompt_tokens += trace[r].input_length;
    report.cached_tokens += s.cached;
    report.prefilled_tokens += s.prefilled;
    report.generated_tokens += s.generated;
  }
  report.finished = scheduler.finished();
  report.chunks = Spread::of(chunks);
  report.gathers = Spread::of(gathers);
  report.requests_a_step = Spread::of(requests);
  report.tokens_a_step = Spread::of(tokens);
  report.plan_us = Spread::of(plan_us);
  const StepBufferSizes reserved = step_buffer_sizes(g);
  report.buffers = {{"context_lens", most.context_lens, reserved.context_lens},
                    {"decode_row_lens", most.decode_rows, reserved.decode_rows},
                    {"decode_block_table", most.decode_block_table, reserved.decode_block_table},
                    {"prefill_row_ends", most.prefill_rows, reserved.prefill_rows},
                    {"prefill_query_start_loc", most.prefill_query_start_loc, reserved.prefill_query_start_loc},
                    {"decode_schedule", most.decode_schedule, reserved.decode_schedule}};
  if (g.contract() == Contract::flydsl_fp4) {
    report.buffers.push_back({"prefill_schedule", most.prefill_schedule, reserved.prefill_schedule});
    report.buffers.push_back({"schedule_safe", most.schedule_safe, reserved.schedule_safe});
  }
  report.simulated_s = scheduler.now_ms() / 1000.0;
  report.series = {{"time_s", time_s}, {"kind", kind}, {"plan_us", step_plan_us}};
  report.wall_s = std::chrono::duration<double>(clock::now() - started).count();
  return report;
}

inline json ReplayReport::to_json() const {
  json buffer_use = json::object();
  for (const BufferUse& b : buffers) buffer_use[b.name] = {{"used_max", b.used}, {"reserved", b.reserved}};
  return {{"requests", requests},
          {"finished", finished},
          {"steps", steps},
          {"step_kinds", {{"decode_only", decode_only}, {"mixed", mixed}, {"prefill_only", prefill_only},
                          {"empty", empty}}},
          {"decode_steps", {{"with_decodes", with_decodes}, {"native", native}, {"ragged", ragged},
                            {"rows_in_place", rows_in_place}, {"scheduled", scheduled},
                            {"padded", padded}}},
          {"tokens", {{"prompt", prompt_tokens}, {"cached", cached_tokens},
                      {"prefilled", prefilled_tokens}, {"generated", generated_tokens}}},
          {"requests_a_step", requests_a_step.to_json()},
          {"tokens_a_step", tokens_a_step.to_json()},
          {"chunks_a_step", chunks.to_json()},
          {"gather_launches_a_step", gathers.to_json()},
          {"buffers", buffer_use},
          {"plan_step_us", plan_us.to_json()},
          {"seconds", {{"simulated", simulated_s}, {"wall", wall_s}, {"plan_step", plan_s},
                       {"check", check_s}, {"device", hook_s},
                       {"replay_rest", wall_s - plan_s - check_s - hook_s}}}};
}

// The report as text.
inline std::string report_text(const ReplayReport& r) {
  const auto share = [](int64_t n, int64_t of) { return of > 0 ? 100.0 * static_cast<double>(n) / static_cast<double>(of) : 0.0; };
  std::string s;
  s += fmt::format("replayed {} requests ({} finished) in {} steps, {:.0f} s of simulated serving\n",
                   r.requests, r.finished, r.steps, r.simulated_s);
  s += fmt::format("steps: {:.1f}% decode-only, {:.1f}% mixed, {:.1f}% prefill-only\n",
                   share(r.decode_only, r.steps), share(r.mixed, r.steps), share(r.prefill_only, r.steps));
  s += fmt::format("steps with decodes: {:.1f}% native, {:.1f}% ragged, {:.1f}% one row a request; "
                   "{:.1f}% with a schedule, {:.1f}% of all steps padded\n",
                   share(r.native, r.with_decodes), share(r.ragged, r.with_decodes),
                   share(r.rows_in_place, r.with_decodes), share(r.scheduled, r.with_decodes),
                   share(r.padded, r.steps));
  s += fmt::format("tokens: {} prompt, {} from the prefix cache ({:.1f}%), {} prefilled, {} generated\n",
                   r.prompt_tokens, r.cached_tokens, share(r.cached_tokens, r.prompt_tokens),
                   r.prefilled_tokens, r.generated_tokens);
  const auto spread = [](const char* what, const Spread& x, const char* unit) {
    return fmt::format("{}: p50 {:g}{}, p99 {:g}{}, max {:g}{}\n", what, x.p50, unit, x.p99, unit, x.max, unit);
  };
  s += spread("requests a step", r.requests_a_step, "");
  s += spread("tokens a step", r.tokens_a_step, "");
  s += spread("prefill chunks a step", r.chunks, "");
  s += spread("candidate gather launches a step", r.gathers, "");
  s += fmt::format("buffer words, most a step used / reserved at engine start:\n");
  for (const BufferUse& b : r.buffers) {
    s += fmt::format("  {:<24} {:>10} / {:<10} ({:.1f}%)\n", b.name, b.used, b.reserved,
                     b.reserved > 0 ? 100.0 * static_cast<double>(b.used) / static_cast<double>(b.reserved) : 0.0);
  }
  s += fmt::format("plan_step a step: p50 {:.2f} us, p99 {:.2f} us, p99.9 {:.2f} us, max {:.2f} us\n",
                   r.plan_us.p50, r.plan_us.p99, r.plan_us.p999, r.plan_us.max);
  s += fmt::format("host time: {:.2f} s in all, {:.2f} s plan_step, {:.2f} s CPU fill and checks, ",
                   r.wall_s, r.plan_s, r.check_s);
  if (r.hook_s > 0) s += fmt::format("{:.2f} s on the device (launch, wait, compare), ", r.hook_s);
  s += fmt::format("{:.2f} s the replay's own (scheduler, statistics)\n",
                   r.wall_s - r.plan_s - r.check_s - r.hook_s);
  return s;
}

}  // namespace idxplan::tool
