// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// GPU time per step of the fused prepare kernel beside its floors (an empty
// kernel, and "+load": one block that loads a length and stores it, the
// least any kernel that reads the step does) and the reference's way of
// writing the same buffers (one launch per buffer, one per chunk for the
// packed offsets), timed with device events in the same run, three ways:
// eager launches; "graph1", one step captured and its graph launched once a
// step, where the graph launch is most of a small step's time; and
// "graph100", kSteps steps captured in one graph launched once, which
// leaves the host out of the figure. Then the host's side: plan_step,
// enqueue and both together, beside an empty kernel's eager launch. Last,
// idxplan.aiter's standalone schedule kernels in graph100 (run_drop_ins).
// Prints medians and the ratios the design's targets are stated in.
//
//   idxplan_bench_prepare [substring]   only the steps whose name holds it

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "idxplan/device/prepare_step.hpp"
#include "idxplan/device/step_buffers.hpp"
#include "idxplan/idxplan.hpp"
#include "steps.hpp"

namespace {

using namespace idxplan;
namespace rt = idxplan::device::rt;
using device::check;

constexpr int kSteps = 100;     // steps a timing covers
constexpr int kRepeats = 15;    // timings a median is taken over
constexpr int kThreads = device::kPrepareThreads;

// A grid-stride loop's first index and stride.
__device__ int32_t first_index() { return static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x); }
__device__ int32_t grid_stride() { return static_cast<int32_t>(gridDim.x * blockDim.x); }

__global__ void empty_kernel() {}
// Empty too, but taking the fused kernel's arguments: what passing them costs.
__global__ void args_kernel(const StepArgs a) {
  if (a.num_reqs < 0) a.out.context_lens.data[0] = 0;
}
// Loads one length and stores it: the floor of any kernel that reads the step.
__global__ void load_store_kernel(const StepArgs a) {
  const auto t = static_cast<int32_t>(threadIdx.x);
  a.out.context_lens.data[t] = a.in.seq_lens[t % a.num_reqs] / a.compress_ratio;
}
// Keeps the SMs busy for about `ms` so the clocks are up when timing starts.
__global__ void spin_kernel(int64_t cycles, int32_t* sink) {
  const int64_t start = clock64();
  while (clock64() - start < cycles) {}
  if (threadIdx.x == 0 && blockIdx.x == 0) *sink = 1;
}

// The launch's chunk groups, staged in shared memory as the fused kernel
// stages them (the reference's kernels run kPrepareThreads a block too).
__device__ const ChunkGroup* stage_groups(const StepArgs& a) {
  __shared__ device::detail::GroupWords words;
  return device::detail::stage_groups(a, words);
}

// The reference's launches, one buffer each, from the same bodies.
__global__ void context_kernel(const StepArgs a) {
  const ChunkGroup* groups = stage_groups(a);
  for (int32_t r = first_index(); r < a.num_reqs; r += grid_stride()) {
    a.out.context_lens.data[r] = context_len_at(a, groups, r);
  }
}
__global__ void row_lens_kernel(const StepArgs a) {
  for (int32_t i = first_index(); i < a.num_decode_rows; i += grid_stride()) {
    a.out.decode_row_lens.data[i] = decode_row_len_at(a, i);
  }
}
__global__ void decode_block_ends_kernel(const StepArgs a) {
  for (int32_t i = first_index(); i < a.num_decode_rows; i += grid_stride()) {
    a.out.decode_block_ends.data[i] = block_end(a.out.decode_row_lens.data[i], a.candidate_block_size);
  }
}
// vLLM's base builder copies every decode row's table row, every step.
__global__ void block_table_kernel(const StepArgs a, int32_t cols) {
  for (auto row = static_cast<int32_t>(blockIdx.x); row < a.num_decode_rows; row += static_cast<int32_t>(gridDim.x)) {
    const int32_t r = decode_row_request(a, row);
    for (auto col = static_cast<int32_t>(threadIdx.x); col < cols; col += static_cast<int32_t>(blockDim.x)) {
      a.out.decode_block_table.data[int64_t{row} * a.out.decode_block_table_stride + col] =
          r < 0 ? 0 : a.in.block_table[int64_t{r} * a.in.block_table_stride + col];
    }
  }
}
__global__ void prefill_row_ends_kernel(const StepArgs a) {
  const ChunkGroup* groups = stage_groups(a);
  for (int32_t t = a.token_begin + first_index(); t < a.token_end; t += grid_stride()) {
    a.out.prefill_row_ends.data[t - a.num_decode_tokens] = prefill_row_end_at(a, groups, t);
  }
}
__global__ void prefill_block_ends_kernel(const StepArgs a) {
  for (int32_t t = first_index(); t < a.token_end - a.token_begin; t += grid_stride()) {
    a.out.prefill_block_ends.data[t] = block_end(a.out.prefill_row_ends.data[t], a.candidate_block_size);
  }
}
__global__ void chunk_qsl_kernel(const int32_t* qsl, int32_t* out, PrefillPlan c) {
  const int32_t i = first_index();
  if (i > c.num_reqs) return;
  const int32_t loc = qsl[c.first_request + i];
  out[c.query_start_loc_offset + i] = (loc < c.token_start ? c.token_start : (loc > c.token_end ? c.token_end : loc)) - c.token_start;
}

// Blocks of 256 threads for n items, 1 to 1024.
uint32_t blocks_for(int64_t n) {
  return static_cast<uint32_t>(std::max<int64_t>(1, std::min<int64_t>((n + 255) / 256, 1024)));
}

// The arguments with every buffer but the decode schedule taken away.
StepArgs schedule_only(const StepArgs& a) {
  StepArgs only = a;
  only.num_reqs = only.num_decode_rows = only.num_groups = 0;
  only.request_begin = only.request_end = 0;
  only.word_begin = only.word_end = 0;
  only.token_begin = only.token_end = only.num_decode_tokens;
  return only;
}

// flydsl_fp4's launch grid cut after its grids' blocks (the schedule part).
device::LaunchGrid grids_only(device::LaunchGrid g) {
  for (int p = 1; p < device::kParts; ++p) g.end[p] = g.end[0];
  return g;
}

// flydsl_fp4's arguments without its grids: the rows, contexts and table alone.
StepArgs without_grids(const StepArgs& a) {
  StepArgs rest = a;
  rest.fp4_decode_ctas = 0;
  rest.fp4_prefill_base = 0;
  return rest;
}

void baseline_step(const StepPlan& plan, const StepArgs& a, device::Stream s) {
  context_kernel<<<blocks_for(a.num_reqs), 256, 0, s>>>(a);
  if (a.num_decode_rows > 0) {
    row_lens_kernel<<<blocks_for(a.num_decode_rows), 256, 0, s>>>(a);
    if (a.candidate_block_size > 0) decode_block_ends_kernel<<<blocks_for(a.num_decode_rows), 256, 0, s>>>(a);
    block_table_kernel<<<static_cast<uint32_t>(std::min(a.num_decode_rows, 1024)), 256, 0, s>>>(
        a, plan.decode.num_block_cols);
  }
  if (a.token_end > a.token_begin) {
    prefill_row_ends_kernel<<<blocks_for(a.token_end - a.token_begin), 256, 0, s>>>(a);
    if (a.candidate_block_size > 0)
      prefill_block_ends_kernel<<<blocks_for(a.token_end - a.token_begin), 256, 0, s>>>(a);
  }
  for (const PrefillPlan& c : plan.prefill) {
    chunk_qsl_kernel<<<blocks_for(c.num_reqs + 1), 256, 0, s>>>(a.in.query_start_loc,
                                                             a.out.prefill_query_start_loc.data, c);
  }
  if (a.schedule.present()) {
    // The scheduler alone, as its own launch.
    const StepArgs only = schedule_only(a);
    device::launch(only, device::launch_grid(only, 1), s);
  }
}

// Median of `samples`.
double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

struct Timer {
  device::Stream stream;
  rt::Event start{}, stop{};
  explicit Timer(device::Stream s) : stream(s) {
    check(rt::event_create(&start), "event");
    check(rt::event_create(&stop), "event");
  }
  // Keeps the SMs busy for about 20 ms so the clocks are up when timing starts.
  void warm_up() const {
    static device::DeviceArray<int32_t> sink(1);
    spin_kernel<<<264, 128, 0, stream>>>(int64_t{40} << 20, sink.data());
  }
  // Median GPU microseconds a step of `run`, which enqueues `steps` steps.
  double time(const std::function<void()>& run, int steps) const {
    warm_up();
    std::vector<double> us;
    for (int rep = 0; rep < kRepeats + 2; ++rep) {
      check(rt::event_record(start, stream), "record");
      run();
      check(rt::event_record(stop, stream), "record");
      check(rt::stream_synchronize(stream), "sync");
      float ms = 0;
      check(rt::event_elapsed_ms(&ms, start, stop), "elapsed");
      if (rep >= 2) us.push_back(1000.0 * ms / steps);  // two warm-ups
    }
    return median(us);
  }
  // `step` enqueued eagerly, kSteps times a timing.
  double eager(const std::function<void()>& step) const {
    return time([&] { for (int i = 0; i < kSteps; ++i) step(); }, kSteps);
  }
  // `captured` steps captured into one graph, the graph launched
  // kSteps / captured times a timing.
  double graph(const std::function<void()>& step, int captured) const {
    rt::Graph graph = nullptr;
    rt::GraphExec exec = nullptr;
    check(rt::begin_capture(stream), "capture");
    for (int i = 0; i < captured; ++i) step();
    check(rt::end_capture(stream, &graph), "capture");
    check(rt::graph_instantiate(&exec, graph), "instantiate");
    const double us = time([&] {
      for (int i = 0; i < kSteps / captured; ++i) check(rt::graph_launch(exec, stream), "graph launch");
    }, kSteps);
    (void)rt::graph_exec_destroy(exec);
    (void)rt::graph_destroy(graph);
    return us;
  }
  double graph1(const std::function<void()>& step) const { return graph(step, 1); }
  double graph100(const std::function<void()>& step) const { return graph(step, kSteps); }
  // Median host microseconds a call of `step`, kSteps calls a timing, the
  // stream drained between timings so no launch waits for room in its queue.
  double host(const std::function<void()>& step) const {
    using Clock = std::chrono::steady_clock;
    std::vector<double> us;
    for (int rep = 0; rep < kRepeats + 2; ++rep) {
      check(rt::stream_synchronize(stream), "sync");
      const auto t0 = Clock::now();
      for (int i = 0; i < kSteps; ++i) step();
      const auto t1 = Clock::now();
      if (rep >= 2) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / kSteps);
    }
    check(rt::stream_synchronize(stream), "sync");
    return median(us);
  }
};

template <class T>
device::DeviceArray<T> upload(const std::vector<T>& v) {
  device::DeviceArray<T> d(std::max<std::size_t>(v.size(), 1));
  check(rt::memcpy_to_device(d.data(), v.data(), v.size() * sizeof(T)), "upload");
  return d;
}

// One step's figures: GPU microseconds (e: eager, g1: graph1, g100:
// graph100) and host microseconds.
struct Figures {
  std::string name;
  int32_t rows = 0, slots = 0, cols = 0;
  const char* table = "-";
  double empty_e = 0, empty_g1 = 0, empty_g100 = 0, args_g1 = 0, load_g1 = 0, load_g100 = 0;
  double fused_e = 0, fused_g1 = 0, fused_g100 = 0, sched_g100 = 0, rest_g100 = 0;
  double ref_e = 0, ref_g1 = 0;
  double host_empty = 0, host_plan = 0, host_enqueue = 0, host_step = 0;
};

// One step, every way: the floors, the fused kernel eager and in graph
// replay, its two halves, the reference's launches, and the host's side.
// `always_table` asks for decode_block_table on every step, as every step
// wrote it before the table was read in place.
Figures run_case(const std::string& name, int32_t compute_units, const bench::BenchStep& step,
                 bool always_table, device::Stream s, Contract contract = Contract::gluon_mxfp4) {
  IndexerConfig c = bench::deepseek_config();
  c.contract = contract;
  c.num_compute_units = compute_units;
  // DeepGEMM's SM90 kernels read pages of 64 keys.
  if (contract == Contract::deepgemm_sm90) c.block_size = deepgemm_sm90::kBlockKv * c.compress_ratio;
  c.max_num_seqs = 4096;
  c.max_num_batched_tokens = 32768;
  const Geometry g = make_geometry(c);
  const device::StepBuffers buffers(g);
  const StepOutputs out = buffers.outputs(always_table);
  StepPlan plan;
  reserve(plan, g);
  plan_step(g, step.query_start_loc, step.seq_lens, kUnpaddedTokens, plan);
  std::vector<int32_t> block_table(step.seq_lens.size() * static_cast<std::size_t>(g.max_blocks_per_seq()), 7);
  const auto qsl = upload(step.query_start_loc);
  const auto lens = upload(step.seq_lens);
  const auto bt = upload(block_table);
  const StepInputs in = make_step_inputs(lens, qsl, bt, g.max_blocks_per_seq());
  const StepArgs args = make_step_args(g, plan, in, out);
  const int32_t max_blocks = device::max_prepare_blocks();
  const Timer timer(s);
  const auto fused = [&] { device::enqueue(g, plan, in, out, s); };
  const auto reference = [&] { baseline_step(plan, args, s); };
  const auto empty = [&] { empty_kernel<<<1, 1, 0, s>>>(); };
  const auto with_args = [&] {
    args_kernel<<<static_cast<uint32_t>(device::launch_grid(args, max_blocks).blocks()), kThreads, 0, s>>>(args);
  };
  // The least a step can do: one load of a length and one store, one block.
  const auto load_store = [&] { load_store_kernel<<<1, kThreads, 0, s>>>(args); };
  // The fused kernel's two halves apart: the schedule alone, and the rest alone.
  StepArgs rest = args;
  rest.schedule = ScheduleShape{};
  const auto launch = [&](const StepArgs& x) {
    return [&, x] { device::launch(x, device::launch_grid(x, max_blocks), s); };
  };

  Figures f;
  f.name = name;
  f.rows = plan.decode.num_rows;
  f.slots = contract == Contract::gluon_mxfp4   ? plan.decode.schedule.num_ctas
            : contract == Contract::flydsl_fp4 ? plan.decode.grid.ctas
                                               : plan.decode.metadata.num_sms;
  f.cols = plan.decode.num_block_cols;
  f.table = !plan.has_decode() ? "-" : writes_decode_block_table(plan, out) ? "copied" : "engine";
  f.empty_e = timer.eager(empty);
  f.empty_g1 = timer.graph1(empty);
  f.empty_g100 = timer.graph100(empty);
  f.args_g1 = timer.graph1(with_args);
  f.load_g1 = timer.graph1(load_store);
  f.load_g100 = timer.graph100(load_store);
  f.fused_e = timer.eager(fused);
  f.fused_g1 = timer.graph1(fused);
  f.fused_g100 = timer.graph100(fused);
  if (contract == Contract::flydsl_fp4) {
    // Its grids read the decode rows schedule_only takes away, so its
    // schedule half is the launch cut after the grids' blocks, and its rest
    // the launch without grids.
    f.sched_g100 = timer.graph100([&] { device::launch(args, grids_only(device::launch_grid(args, max_blocks)), s); });
    f.rest_g100 = timer.graph100(launch(without_grids(args)));
  } else if (contract == Contract::gluon_mxfp4) {
    f.sched_g100 = timer.graph100(launch(schedule_only(args)));
    f.rest_g100 = timer.graph100(launch(rest));
  }
  f.ref_e = timer.eager(reference);
  f.ref_g1 = timer.graph1(reference);
  f.host_empty = timer.host(empty);
  f.host_plan = timer.host([&] { plan_step(g, step.query_start_loc, step.seq_lens, kUnpaddedTokens, plan); });
  f.host_enqueue = timer.host(fused);
  f.host_step = timer.host([&] {
    plan_step(g, step.query_start_loc, step.seq_lens, kUnpaddedTokens, plan);
    device::enqueue(g, plan, in, out, s);
  });
  check(rt::last_error(), "launches");
  return f;
}

void print(const std::vector<Figures>& all) {
  std::printf("GPU: median microseconds a step over %d steps, %d timings; graph1 = a step a graph, "
              "graph100 = %d steps in one graph\n", kSteps, kRepeats, kSteps);
  std::printf("%-20s %5s %6s %6s %4s | %6s %6s %6s %6s | %6s %6s | %6s %6s %6s %6s | %6s %6s | %6s %6s %6s\n",
              "step", "rows", "slots", "table", "cols", "empty", "graph1", "g100", "+args", "+load", "g100",
              "fused", "graph1", "g100", "/+load", "sched", "rest", "ref", "graph1", "/fused");
  for (const Figures& f : all) {
    std::printf("%-20s %5d %6d %6s %4d | %6.2f %6.2f %6.2f %6.2f | %6.2f %6.2f | %6.2f %6.2f %6.2f %5.2fx | "
                "%6.2f %6.2f | %6.2f %6.2f %5.2fx\n",
                f.name.c_str(), f.rows, f.slots, f.table, f.cols, f.empty_e, f.empty_g1, f.empty_g100, f.args_g1,
                f.load_g1, f.load_g100, f.fused_e, f.fused_g1, f.fused_g100, f.fused_g100 / f.load_g100,
                f.sched_g100, f.rest_g100, f.ref_e, f.ref_g1, f.ref_g1 / f.fused_g1);
  }
  std::printf("\nhost: median microseconds a call over %d calls, %d timings; floor = an empty kernel's "
              "eager launch + plan_step\n", kSteps, kRepeats);
  std::printf("%-20s | %6s %8s %8s %8s | %8s %7s\n", "step", "empty", "plan", "enqueue", "both", "floor",
              "/floor");
  for (const Figures& f : all) {
    const double floor = f.host_empty + f.host_plan;
    std::printf("%-20s | %6.2f %8.2f %8.2f %8.2f | %8.2f %6.2fx\n", f.name.c_str(), f.host_empty, f.host_plan,
                f.host_enqueue, f.host_step, floor, f.host_step / floor);
  }
}

// idxplan.aiter's drop-ins' kernels alone (contracts/flydsl_fp4_device.hpp)
// on benchmarks/python/bench_aiter_fp4.py's steps, graph100 GPU
// microseconds a call: decode_N, N flattened rows of N / 2 two-row requests
// or N sequences of next_n 2, contexts over 1K-200K tokens at compression 4,
// sglang's P; prefill_R, R causal rows of eight requests, P = max(1024, R).
void run_drop_ins(const std::string& only, device::Stream s) {
  constexpr int32_t kMsl = 262144;  // keys: a 1M-token model at compression 4
  const Timer timer(s);
  std::printf("\nidxplan.aiter's kernels: median GPU microseconds a call, %d calls in one graph\n", kSteps);
  std::printf("%-22s %6s %8s\n", "step", "CTAs", "g100");
  for (const int32_t next_n : {1, 2}) {
    for (const int32_t n : {4, 16, 64, 256, 1024, 4096}) {
      const std::string name = "aiter decode_" + std::to_string(n) + (next_n == 1 ? "" : "_next_n2");
      if (name.find(only) == std::string::npos) continue;
      std::vector<int32_t> lens(static_cast<std::size_t>(n));
      for (int32_t r = 0; r < n; ++r) {
        lens[static_cast<std::size_t>(r)] =
            next_n == 1 ? (bench::spread_context(r / 2) - 1 + r % 2) / 4 : bench::spread_context(r) / 4;
      }
      const int64_t ctas = flydsl_fp4::decode_ctas(n, next_n, flydsl_fp4::chunks_cap(kMsl, flydsl_fp4::kBlockK), 0);
      const auto shape = flydsl_fp4::varctx_shape(n, flydsl_fp4::kBlockK, ctas, kMsl, next_n);
      const auto context_lens = upload(lens);
      device::DeviceArray<int32_t> cta_info(static_cast<std::size_t>(shape.words()));
      device::DeviceArray<int32_t> safe(1);
      const double us = timer.graph100(
          [&] { flydsl_fp4::enqueue_varctx_schedule(shape, context_lens.data(), cta_info.data(), safe.data(), s); });
      std::printf("%-22s %6lld %8.2f\n", name.c_str(), static_cast<long long>(ctas), us);
    }
  }
  for (const int32_t rows : {1024, 4096, 8192, 16384, 32768, 65536}) {
    const std::string name = "aiter prefill_" + std::to_string(rows);
    if (name.find(only) == std::string::npos) continue;
    std::vector<int32_t> batch, starts(static_cast<std::size_t>(rows), 0), ends;
    for (int32_t k = 0; k < 8; ++k) {
      for (int32_t j = 0; j < rows / 8; ++j) {
        batch.push_back(k);
        ends.push_back((bench::spread_context(k) + j + 1) / 4);
      }
    }
    const int32_t longest = *std::max_element(ends.begin(), ends.end());
    const int64_t msl = (int64_t{longest} + 255) / 256 * 256;
    const auto shape = flydsl_fp4::prefill_shape(rows, flydsl_fp4::kBlockK, std::max(1024, rows), msl);
    const auto b = upload(batch);
    const auto st = upload(starts);
    const auto e = upload(ends);
    device::DeviceArray<int32_t> cta_info(static_cast<std::size_t>(shape.words()));
    device::DeviceArray<int32_t> safe(1);
    const double us = timer.graph100([&] {
      flydsl_fp4::enqueue_prefill_schedule(shape, b.data(), st.data(), e.data(), cta_info.data(), safe.data(), s);
    });
    std::printf("%-22s %6d %8.2f\n", name.c_str(), shape.ctas, us);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (device::device_count() == 0) {
    std::printf("idxplan_bench_prepare: no GPU on this machine, nothing to time\n");
    return 0;
  }
  const char* only = argc > 1 ? argv[1] : "";
  device::Stream s = nullptr;
  check(rt::stream_create(&s), "stream");
  std::vector<Figures> all;
  const auto run = [&](const std::string& name, int32_t compute_units, const bench::BenchStep& step,
                       bool always_table, Contract contract = Contract::gluon_mxfp4) {
    if (name.find(only) != std::string::npos) {
      all.push_back(run_case(name, compute_units, step, always_table, s, contract));
    }
  };
  // num_compute_units as planned: 256, and 512 for 4096 sequences.
  for (const int32_t n : {4, 8, 16, 32, 64, 256, 1024, 4096}) {
    run("decode_" + std::to_string(n), n == 4096 ? 512 : 256, bench::mtp_decodes(n), false);
  }
  // The native steps as before the table was read in place: copied every step.
  for (const int32_t n : {1024, 4096}) {
    run("decode_" + std::to_string(n) + " +table", n == 4096 ? 512 : 256, bench::mtp_decodes(n), true);
  }
  run("one_row_1024", 256, bench::one_row_decodes(1024), false);
  run("flat_1024", 256, bench::flat_decodes(1024), false);
  run("mixed_1024", 256, bench::mixed_1024(), false);
  // flydsl_fp4 (aiter main's FlyDSL kernels): the same MTP decodes, flattened
  // (compression 4), so the rows' table is copied as on a ragged step; and
  // the mixed step, its chunk's grid beside the decode grid.
  for (const int32_t n : {4, 16, 64, 256, 1024, 4096}) {
    run("fp4 decode_" + std::to_string(n), n == 4096 ? 512 : 256, bench::mtp_decodes(n), false, Contract::flydsl_fp4);
  }
  run("fp4 mixed_1024", 256, bench::mixed_1024(), false, Contract::flydsl_fp4);
  // deepgemm_sm90 (DeepGEMM on an H100's 132 SMs): the MTP decodes native
  // at next_n 2, and decodes of one and two rows flattened.
  for (const int32_t n : {4, 64, 256, 1024, 4096}) {
    run("dg decode_" + std::to_string(n), 132, bench::mtp_decodes(n), false, Contract::deepgemm_sm90);
  }
  run("dg flat_1024", 132, bench::flat_decodes(1024), false, Contract::deepgemm_sm90);
  print(all);
  run_drop_ins(only, s);
  (void)rt::stream_destroy(s);
  return 0;
}
