// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// plan_step on the host: the two steps of docs/design.md section 8, planned into a
// reused StepPlan, beside two baselines in the same run: the allocating
// plan_step that returns a fresh plan, and one pass that only reads the
// step's inputs (the floor any planner pays).

#include <cstdint>

#include <benchmark/benchmark.h>

#include "idxplan/idxplan.hpp"
#include "alloc_counter.hpp"
#include "steps.hpp"

namespace {

using idxplan::bench::BenchStep;

const idxplan::Geometry& geometry() {
  static const idxplan::Geometry g = idxplan::make_geometry(idxplan::bench::deepseek_config());
  return g;
}

const idxplan::Geometry& zero_rows_geometry() {
  static const idxplan::Geometry g = idxplan::make_geometry(idxplan::bench::zero_rows_config());
  return g;
}

void report_allocations(benchmark::State& state, int64_t before) {
  const int64_t allocations = idxplan::bench::allocation_count() - before;
  state.counters["allocs_per_step"] =
      benchmark::Counter(static_cast<double>(allocations) / static_cast<double>(state.iterations()));
}

// Planned into one warm plan, as an engine does each step.
void plan_into(benchmark::State& state, const idxplan::Geometry& g, const BenchStep& step) {
  idxplan::StepPlan plan;
  idxplan::reserve(plan, g);
  idxplan::plan_step(g, step.query_start_loc, step.seq_lens, idxplan::kUnpaddedTokens, plan);
  const int64_t before = idxplan::bench::allocation_count();
  for (auto _ : state) {
    idxplan::plan_step(g, step.query_start_loc, step.seq_lens, idxplan::kUnpaddedTokens, plan);
    benchmark::DoNotOptimize(plan.decode);
    benchmark::ClobberMemory();
  }
  report_allocations(state, before);
}

void plan_step(benchmark::State& state, BenchStep (*make)()) { plan_into(state, geometry(), make()); }

// Planning time stays linear in requests + chunks: 1,015 chunks beside
// N - 2 requests with no rows, for N = 1024 and 4096.
void plan_step_zero_rows(benchmark::State& state) {
  plan_into(state, zero_rows_geometry(), idxplan::bench::zero_rows(static_cast<int32_t>(state.range(0))));
}

// Baseline: a fresh plan every step.
void plan_step_fresh(benchmark::State& state, BenchStep (*make)()) {
  const BenchStep step = make();
  const int64_t before = idxplan::bench::allocation_count();
  for (auto _ : state) {
    idxplan::StepPlan plan = idxplan::plan_step(geometry(), step.query_start_loc, step.seq_lens);
    benchmark::DoNotOptimize(plan.decode);
  }
  report_allocations(state, before);
}

// Floor: one pass over the inputs.
void read_inputs(benchmark::State& state, BenchStep (*make)()) {
  const BenchStep step = make();
  for (auto _ : state) {
    int64_t sum = 0;
    for (int32_t q : step.query_start_loc) sum += q;
    for (int32_t l : step.seq_lens) sum ^= l;
    benchmark::DoNotOptimize(sum);
  }
}

BenchStep decode_256() { return idxplan::bench::mtp_decodes(256); }
BenchStep mixed_1024() { return idxplan::bench::mixed_1024(); }

BENCHMARK_CAPTURE(plan_step, decode_256, decode_256);
BENCHMARK_CAPTURE(plan_step, mixed_1024, mixed_1024);
BENCHMARK(plan_step_zero_rows)->Arg(1024)->Arg(4096);
BENCHMARK_CAPTURE(plan_step_fresh, decode_256, decode_256);
BENCHMARK_CAPTURE(plan_step_fresh, mixed_1024, mixed_1024);
BENCHMARK_CAPTURE(read_inputs, decode_256, decode_256);
BENCHMARK_CAPTURE(read_inputs, mixed_1024, mixed_1024);

}  // namespace

BENCHMARK_MAIN();
