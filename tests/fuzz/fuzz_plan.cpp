// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// libFuzzer harness for the planner: a config near the DeepSeek preset with
// fields swapped for edge values, then a step (valid, or broken in one of the
// ways an engine breaks it: wrong lengths, arrays shorter than the step, block
// tables of any rows, columns and stride) planned and filled by the CPU
// reference into buffers of exactly step_buffer_sizes, and every invariant of
// docs/design.md checked: a short input refused, every launch view inside the
// arrays it points into and within what the plan sized for it (9.1). A
// violated invariant aborts with a message; the sanitizers catch what the
// invariants do not (every engine array is a heap block of exactly its
// extent, so a read past it is an ASan report).
//
// Built with IDXPLAN_CPU_DEVICE as fuzz_prepare, it also runs each step's
// prepare launch (device::enqueue) on the tests' CPU stand-in for a GPU
// (tests/cpu_device), on device copies of the same arrays: the launch
// refuses exactly what the CPU fill refuses, and writes every word of every
// buffer as the CPU fill does, leaving the rest as it found them.
//
// The config picks each contract; a deepgemm_sm90 step's decode_schedule is
// checked against DeepGEMM's metadata of its own decode rows. Each filled
// step's decode rows, whatever the contract, also go through the standalone
// metadata (contracts/deepgemm_sm90.hpp) as vLLM's CUDA builder asks it, on
// a number of SMs from the input: the CPU fill's rows are in order, and on
// fuzz_prepare the device writer's words are the CPU fill's, or every row
// the end where the CPU fill refuses the lengths.

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include "idxplan/contracts/deepgemm_sm90.hpp"
#include "idxplan/idxplan.hpp"
#if defined(IDXPLAN_CPU_DEVICE)
#include "idxplan/contracts/deepgemm_sm90_device.hpp"
#include "idxplan/device/prepare_step.hpp"
#include "idxplan/device/step_buffers.hpp"
#endif

namespace {

using namespace idxplan;

constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
// Bigger configs are checked by make_geometry, then skipped: their buffers
// would not fit the fuzzer's memory.
constexpr int64_t kMaxWords = int64_t{1} << 24;

#define FUZZ_CHECK(cond)                                                                \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "fuzz_plan: invariant failed at line %d: %s\n", __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

// An int32 field: kept, an edge value, or anything.
int32_t field(FuzzedDataProvider& in, int32_t keep) {
  static constexpr int32_t kEdges[] = {0, 1, -1, 2, 3, 4, 7, 8, 16, 32, 64, 128, 256, 1000, 4096,
                                       65536, 1 << 20, (1 << 29) + 1, kMax, kMin};
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: return in.PickValueInArray(kEdges);
    case 1: return in.ConsumeIntegral<int32_t>();
    default: return keep;
  }
}

IndexerConfig fuzz_config(FuzzedDataProvider& in) {
  // The contract first, so that the seeds' configs meet each; deepgemm_sm90's
  // pages hold DeepGEMM's 64 keys (unless a field below changes them).
  static constexpr Contract kContracts[] = {Contract::gluon_mxfp4, Contract::flydsl_fp4, Contract::deepgemm_sm90};
  const Contract contract = in.PickValueInArray(kContracts);
  IndexerConfig c = deepseek_v41_config(in.ConsumeIntegralInRange<int32_t>(1, 64));
  c.contract = contract;
  if (contract == Contract::deepgemm_sm90) c.block_size = deepgemm_sm90::kBlockKv * c.compress_ratio;
  c.max_num_seqs = in.ConsumeIntegralInRange<int32_t>(1, 96);
  c.max_num_batched_tokens = in.ConsumeIntegralInRange<int32_t>(1, 3000);
  c.max_model_len = in.ConsumeIntegralInRange<int32_t>(1, 1 << 18);
  c.max_logits_mb = in.ConsumeIntegralInRange<int64_t>(1, 8);
  c.candidate_topk_blocks = 1 << in.ConsumeIntegralInRange<int>(0, 8);
  c.sparse_logits = in.ConsumeBool();
  c.adaptive_verification = in.ConsumeBool();
  c.num_speculative_tokens = in.ConsumeIntegralInRange<int32_t>(0, 4);
  c.num_heads = field(in, c.num_heads);
  c.head_dim = field(in, c.head_dim);
  c.block_size = field(in, c.block_size);
  c.compress_ratio = field(in, c.compress_ratio);
  c.num_speculative_tokens = field(in, c.num_speculative_tokens);
  c.max_model_len = field(in, c.max_model_len);
  c.candidate_block_size = field(in, c.candidate_block_size);
  c.candidate_topk_blocks = field(in, c.candidate_topk_blocks);
  c.max_logits_mb = field(in, static_cast<int32_t>(c.max_logits_mb));
  c.num_compute_units = field(in, c.num_compute_units);
  c.dcp_world_size = field(in, c.dcp_world_size);
  c.max_num_seqs = field(in, c.max_num_seqs);
  c.max_num_batched_tokens = field(in, c.max_num_batched_tokens);
  c.max_blocks_per_seq = field(in, c.max_blocks_per_seq);
  c.decode_parallel_units = field(in, c.decode_parallel_units);
  c.prefill_parallel_units = field(in, c.prefill_parallel_units);
  return c;
}

struct Step {
  std::vector<int32_t> qsl, upper, exact, table;
  int32_t stride = 0;
  int32_t cols = 0;  // page ids a row holds: the stride, or fewer (a column slice)
  int64_t num_tokens = kUnpaddedTokens;
};

// A step for `g`: query lengths that make decodes, prefills and requests with
// no rows; bounds near the query lengths or at max_model_len; exact lengths
// the bounds or, now and then, what a broken engine hands over.
Step fuzz_step(FuzzedDataProvider& in, const Geometry& g) {
  const IndexerConfig& c = g.config();
  Step s;
  const int32_t reqs = in.ConsumeIntegralInRange<int32_t>(0, std::min(c.max_num_seqs, 160));
  s.qsl.push_back(0);
  int64_t tokens = 0;
  for (int32_t r = 0; r < reqs; ++r) {
    int64_t q = 0;
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0: q = 0; break;
      case 1: q = in.ConsumeIntegralInRange<int64_t>(1, g.decode_threshold()); break;
      case 2: q = in.ConsumeIntegralInRange<int64_t>(0, 700); break;
      default: q = in.ConsumeIntegral<int32_t>(); break;  // often invalid
    }
    tokens += q;
    s.qsl.push_back(static_cast<int32_t>(std::clamp<int64_t>(tokens, kMin, kMax)));
    const int64_t lo = std::max<int64_t>(q, 0);
    int64_t ub = in.ConsumeBool() ? c.max_model_len : lo + in.ConsumeIntegralInRange<int64_t>(0, 5000);
    if (in.ConsumeIntegralInRange<int>(0, 15) == 0) ub = in.ConsumeIntegral<int32_t>();
    ub = std::clamp<int64_t>(ub, kMin, kMax);
    s.upper.push_back(static_cast<int32_t>(ub));
    static constexpr int32_t kWild[] = {kMin, -1, 0, 1, kMax};
    int64_t exact = ub;
    switch (in.ConsumeIntegralInRange<int>(0, 7)) {
      case 0: exact = in.PickValueInArray(kWild); break;
      case 1: exact = ub + in.ConsumeIntegralInRange<int64_t>(1, 8); break;  // just past its bound
      case 2: exact = ub * in.ConsumeIntegralInRange<int64_t>(2, 20); break;
      case 3: exact = in.ConsumeIntegralInRange<int64_t>(0, std::max<int64_t>(ub, 0)); break;
      default: break;
    }
    s.exact.push_back(static_cast<int32_t>(std::clamp<int64_t>(exact, kMin, kMax)));
  }
  if (in.ConsumeBool()) s.num_tokens = s.qsl.back() + in.ConsumeIntegralInRange<int64_t>(-2, 40);
  s.stride = std::max(0, g.max_blocks_per_seq() + in.ConsumeIntegralInRange<int32_t>(-3, 3));
  if (int64_t{reqs} * s.stride > kMaxWords) s.stride = 0;
  s.cols = s.stride - (in.ConsumeIntegralInRange<int>(0, 3) == 0 ? in.ConsumeIntegralInRange<int32_t>(0, 3) : 0);
  s.cols = std::max(s.cols, 0);
  s.table.assign(static_cast<std::size_t>(reqs) * static_cast<std::size_t>(s.stride), 0);
  for (std::size_t i = 0; i < s.table.size(); ++i) s.table[i] = static_cast<int32_t>(i);
  return s;
}

// An engine array as a heap block of exactly `count` entries (fewer than
// `full` when the engine got it wrong): ASan reports any read past it.
std::vector<int32_t> shortened(FuzzedDataProvider& in, const std::vector<int32_t>& full, std::size_t unit) {
  std::size_t count = full.size();
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0 && count > 0) {
    count = unit * in.ConsumeIntegralInRange<std::size_t>(0, count / std::max<std::size_t>(unit, 1));
  }
  std::vector<int32_t> v(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(count));
  v.shrink_to_fit();
  return v;
}

// [p, p + count) lies inside buffer b, or p is null and count nothing.
bool inside(const int32_t* p, int64_t count, const std::vector<int32_t>& b) {
  if (count <= 0) return true;
  if (p == nullptr) return false;
  const auto first = reinterpret_cast<std::uintptr_t>(b.data());
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  return at >= first && at + sizeof(int32_t) * static_cast<std::uintptr_t>(count) <=
                            first + sizeof(int32_t) * b.size();
}

void check_plan(const Geometry& g, const Step& s, const StepPlan& p) {
  const IndexerConfig& c = g.config();
  // Every prefill row in exactly one split; chunks trimmed to their rows.
  std::vector<int> covered(static_cast<std::size_t>(p.num_prefill_tokens), 0);
  for (const ChunkSplit& sp : p.splits) {
    const int32_t base = s.qsl[static_cast<std::size_t>(sp.request_begin)];
    FUZZ_CHECK(sp.query_begin < sp.query_end);
    for (int32_t t = base + sp.query_begin; t < base + sp.query_end; ++t) {
      FUZZ_CHECK(t >= p.num_decode_tokens && t < s.qsl.back());
      ++covered[static_cast<std::size_t>(t - p.num_decode_tokens)];
    }
  }
  for (int32_t t = 0; t < s.qsl.back() - p.num_decode_tokens; ++t) {
    FUZZ_CHECK(covered[static_cast<std::size_t>(t)] == 1);
  }
  int64_t words = 0;
  for (const PrefillPlan& chunk : p.prefill) {
    FUZZ_CHECK(chunk.num_pieces > 0);
    FUZZ_CHECK(p.pieces_of(chunk)[0].request == 0);
    FUZZ_CHECK(p.pieces_of(chunk)[chunk.num_pieces - 1].request == chunk.num_reqs - 1);
    const int64_t rows = chunk.token_end - chunk.token_start;
    FUZZ_CHECK(rows == 1 || 4 * rows * std::max(chunk.width, 1) <= g.max_logits_bytes());
    words += chunk.num_reqs + 1;
  }
  FUZZ_CHECK(words == p.num_prefill_query_start_loc_words);
  FUZZ_CHECK(words <= 2 * int64_t{p.num_prefill_tokens} + p.num_reqs);
  for (const GatherLaunch& l : p.gather_launches) {
    FUZZ_CHECK(l.token_end > l.token_start && l.token_end - l.token_start <= g.gather_rows());
  }
  FUZZ_CHECK(p.decode.num_rows <= g.max_decode_rows());
  FUZZ_CHECK(p.num_tokens <= c.max_num_batched_tokens);
}

void check_buffers(const Geometry& g, const StepPlan& p, const std::vector<int32_t>& context_lens,
                   const std::vector<int32_t>& row_lens, const std::vector<int32_t>& row_ends,
                   const std::vector<int32_t>& schedule) {
  const int32_t ratio = g.config().compress_ratio;
  for (int32_t r = 0; r < p.num_reqs; ++r) {
    const int32_t v = context_lens[static_cast<std::size_t>(r)];
    FUZZ_CHECK(v >= 0 && v <= p.max_seq_len / ratio);
  }
  for (int32_t i = 0; i < p.decode.num_rows; ++i) {
    const int32_t v = row_lens[static_cast<std::size_t>(i)];
    FUZZ_CHECK(v >= 0 && v <= p.decode.max_seq_len / ratio);
  }
  for (int32_t t = 0; t < p.num_prefill_tokens; ++t) {
    const int32_t v = row_ends[static_cast<std::size_t>(t)];
    FUZZ_CHECK(v >= 0 && v <= p.max_seq_len / ratio);
  }
  // Each live unit's slices numbered 0..n-1 in consecutive slots, the rest empty.
  const ScheduleShape& sh = p.decode.schedule;
  int32_t slot = 0;
  while (slot < sh.num_ctas && schedule[static_cast<std::size_t>(4 * slot + 3)] > 0) {
    const int32_t* d = schedule.data() + 4 * slot;
    FUZZ_CHECK(d[0] >= 0 && d[0] < sh.num_seqs && d[1] >= 0 && d[1] < sh.row_blocks && d[2] == 0);
    FUZZ_CHECK(slot + d[3] <= sh.num_ctas);
    for (int32_t k = 0; k < d[3]; ++k) FUZZ_CHECK(d[4 * k + 2] == k && d[4 * k + 3] == d[3]);
    slot += d[3];
  }
  for (; slot < sh.num_ctas; ++slot) {
    for (int k = 0; k < 4; ++k) FUZZ_CHECK(schedule[static_cast<std::size_t>(4 * slot + k)] == 0);
  }
}

#if defined(IDXPLAN_CPU_DEVICE)
// An engine array on the device: a copy of exactly its entries.
device::DeviceArray<int32_t> on_device(const std::vector<int32_t>& host) {
  device::DeviceArray<int32_t> d(host.size());
  if (!host.empty()) {
    device::check(device::rt::memcpy_to_device(d.data(), host.data(), host.size() * sizeof(int32_t)), "upload");
  }
  return d;
}

// The step's launch on the CPU stand-in against the CPU fill's buffers
// (`host`, filled with -7 before, as the device's are here), or its refusal
// (`refused`) against the fill's.
void check_kernel(const Geometry& g, const StepPlan& plan, const std::vector<int32_t>& exact,
                  const std::vector<int32_t>& qsl, const std::vector<int32_t>& table, const Step& s,
                  bool always_write_table, bool key_bounds, const HostStepBuffers& host, bool refused) {
  const device::DeviceArray<int32_t> d_exact = on_device(exact), d_qsl = on_device(qsl), d_table = on_device(table);
  StepInputs inputs = make_step_inputs(d_exact, d_qsl, d_table, s.stride);
  inputs.block_table_cols = s.cols;
  const device::StepBuffers buffers(g);
  const StepOutputs out = buffers.outputs(always_write_table, key_bounds);
  const struct {
    const char* name;
    OutputBuffer device;
    const std::vector<int32_t>& host;
  } pairs[] = {
      {"context_lens", out.context_lens, host.context_lens},
      {"decode_row_lens", out.decode_row_lens, host.decode_row_lens},
      {"decode_block_ends", out.decode_block_ends, host.decode_block_ends},
      {"decode_block_table", out.decode_block_table, host.decode_block_table},
      {"prefill_row_ends", out.prefill_row_ends, host.prefill_row_ends},
      {"prefill_block_ends", out.prefill_block_ends, host.prefill_block_ends},
      {"prefill_query_start_loc", out.prefill_query_start_loc, host.prefill_query_start_loc},
      {"decode_schedule", out.decode_schedule, host.decode_schedule},
      {"prefill_key_starts", out.prefill_key_starts, host.prefill_key_starts},
      {"prefill_key_ends", out.prefill_key_ends, host.prefill_key_ends},
      {"prefill_schedule", out.prefill_schedule, host.prefill_schedule},
      {"schedule_safe", out.schedule_safe, host.schedule_safe},
  };
  std::vector<int32_t> words;
  for (const auto& p : pairs) {
    if (p.device.data == nullptr) continue;
    words.assign(static_cast<std::size_t>(p.device.capacity), -7);
    device::check(device::rt::memcpy_to_device(p.device.data, words.data(), words.size() * sizeof(int32_t)), "poison");
  }
  try {
    device::enqueue(g, plan, inputs, out, nullptr);
  } catch (const StepError&) {
    FUZZ_CHECK(refused);
    return;
  }
  FUZZ_CHECK(!refused);
  for (const auto& p : pairs) {
    if (p.device.data == nullptr) continue;
    FUZZ_CHECK(static_cast<std::size_t>(p.device.capacity) == p.host.size());
    words.resize(p.host.size());
    device::check(device::rt::memcpy_to_host(words.data(), p.device.data, words.size() * sizeof(int32_t)), "read");
    for (std::size_t i = 0; i < words.size(); ++i) {
      if (words[i] != p.host[i]) {
        std::fprintf(stderr, "fuzz_prepare: device %s[%zu] = %d, the CPU fill's %d\n", p.name, i, words[i],
                     p.host[i]);
        std::abort();
      }
    }
  }
}
#endif

// DeepGEMM's metadata of `lens` ([batch, next_n], the step's decode rows)
// on `num_sms` SMs: each row's (atom, split) at or after the one before, the
// last the end; on fuzz_prepare, the device writer's words.
void check_deepgemm(const std::vector<int32_t>& lens, int32_t batch, int32_t next_n, int32_t num_sms) {
  if (batch > deepgemm_sm90::kMaxBatch) return;
  const deepgemm_sm90::MetadataShape m = deepgemm_sm90::metadata_shape(batch, next_n, deepgemm_sm90::kBlockKv, num_sms);
  const Span<const int32_t> rows(lens.data(), static_cast<std::size_t>(int64_t{batch} * next_n));
  std::vector<int32_t> want(static_cast<std::size_t>(m.words()));
  try {
    deepgemm_sm90::fill_metadata(m, rows, want);
    for (int32_t sm = 1; sm <= num_sms; ++sm) {
      const auto at = static_cast<std::size_t>(2 * sm);
      FUZZ_CHECK(want[at] > want[at - 2] || (want[at] == want[at - 2] && want[at + 1] >= want[at - 1]));
    }
    FUZZ_CHECK(want[want.size() - 2] == static_cast<int32_t>(static_cast<uint32_t>(batch) * m.atoms()));
  } catch (const StepError&) {
    for (int32_t sm = 0; sm <= num_sms; ++sm) deepgemm_sm90::store_end_row(m, want.data() + 2 * sm);
  }
#if defined(IDXPLAN_CPU_DEVICE)
  const device::DeviceArray<int32_t> d_lens = on_device(std::vector<int32_t>(rows.data(), rows.data() + rows.size()));
  device::DeviceArray<int32_t> d_out(want.size());
  deepgemm_sm90::enqueue_metadata(m, d_lens.data(), d_out.data(), nullptr);
  std::vector<int32_t> got(want.size());
  device::check(device::rt::memcpy_to_host(got.data(), d_out.data(), got.size() * sizeof(int32_t)), "read");
  FUZZ_CHECK(got == want);
#endif
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const IndexerConfig config = fuzz_config(in);
  try {
    const Geometry g = make_geometry(config);
    const StepBufferSizes sizes = step_buffer_sizes(g);
    if (sizes.decode_block_table + sizes.prefill_query_start_loc + 2 * sizes.prefill_rows + sizes.decode_schedule +
            sizes.prefill_schedule > kMaxWords) {
      return 0;
    }
    const Step s = fuzz_step(in, g);
    StepPlan plan;
    try {
      plan_step(g, s.qsl, s.upper, s.num_tokens, plan);
    } catch (const StepError&) {
      return 0;  // a malformed step, refused with a message
    }
    check_plan(g, s, plan);

    // Buffers of exactly the sizes the geometry promises, which
    // check_step_outputs takes.
    HostStepBuffers buffers(g, -7);
    const bool always_write_table = in.ConsumeBool();
    const bool key_bounds = in.ConsumeBool();
    const StepOutputs out = buffers.outputs(always_write_table, key_bounds);
    check_step_outputs(g, out);
    // The engine's arrays, each of exactly its extent, now and then short.
    const std::vector<int32_t> exact = shortened(in, s.exact, 1);
    const std::vector<int32_t> qsl = shortened(in, s.qsl, 1);
    const std::vector<int32_t> table = shortened(in, s.table, static_cast<std::size_t>(std::max(s.stride, 1)));
    StepInputs inputs = make_step_inputs(exact, qsl, table, s.stride);
    inputs.block_table_cols = s.cols;
    const bool rows = plan.num_decode_tokens + plan.num_prefill_tokens > 0;
    const bool short_inputs =
        inputs.num_seq_lens < plan.num_reqs || (plan.num_reqs > 0 && inputs.num_query_start_loc < plan.num_reqs + 1) ||
        (rows && plan.num_reqs > 0 &&
         (inputs.block_table_rows < plan.num_reqs || s.cols < block_table_cols_read(g, plan)));
    // Key bounds whose offsets could pass int32 are refused too.
    bool wide_keys = false;
    for (const ChunkGroup& group : plan.chunk_groups) {
      wide_keys |= key_bounds && int64_t{group.num_reqs} * (group.max_seq_len / config.compress_ratio) > 0x7FFFFFFF;
    }
    bool refused = false;
    try {
      fill_step_buffers(g, plan, inputs, out);
    } catch (const StepError&) {
      refused = true;
    }
#if defined(IDXPLAN_CPU_DEVICE)
    check_kernel(g, plan, exact, qsl, table, s, always_write_table, key_bounds, buffers, refused);
#endif
    if (refused) {
      FUZZ_CHECK(short_inputs || wide_keys);  // the only inputs left to refuse
      return 0;
    }
    FUZZ_CHECK(!short_inputs && !wide_keys);
    // A row's keys start at or after 0 and end its row end later.
    for (int32_t row = 0; key_bounds && row < plan.num_prefill_tokens; ++row) {
      const auto i = static_cast<std::size_t>(row);
      if (buffers.prefill_key_starts[i] == -7) continue;  // a dropped chunk's rows
      FUZZ_CHECK(buffers.prefill_key_starts[i] >= 0);
      FUZZ_CHECK(buffers.prefill_key_ends[i] - buffers.prefill_key_starts[i] == buffers.prefill_row_ends[i]);
    }
    check_buffers(g, plan, buffers.context_lens, buffers.decode_row_lens, buffers.prefill_row_ends,
                  buffers.decode_schedule);
    if (g.contract() == Contract::flydsl_fp4) {
      // The grids are the drop-ins' (aiter's) of the lengths the step wrote.
      const std::string grids = flydsl_fp4::grid_violation(g, plan, qsl, out);
      if (!grids.empty()) {
        std::fprintf(stderr, "fuzz_plan: %s\n", grids.c_str());
        std::abort();
      }
    }
    // The metadata is DeepGEMM's of the decode rows the step wrote.
    const std::string metadata = deepgemm_sm90::metadata_violation(g, plan, out);
    if (!metadata.empty()) {
      std::fprintf(stderr, "fuzz_plan: %s\n", metadata.c_str());
      std::abort();
    }
    // No launch is told to read past what the plan sized for it.
    const std::string violation = launch_bound_violation(g, plan, inputs, out);
    if (!violation.empty()) {
      std::fprintf(stderr, "fuzz_plan: %s\n", violation.c_str());
      std::abort();
    }

    // Every launch view lies inside the arrays it points into: its counts
    // of rows and columns within the engine's table or the step buffers.
    const DecodeLaunch d = decode_launch(g, plan, inputs, out);
    if (d.num_seqs > 0) {
      check_deepgemm(buffers.decode_row_lens, d.num_seqs, d.next_n, in.ConsumeIntegralInRange<int32_t>(1, 300));
    }
    const int64_t decode_rows = int64_t{d.num_seqs} * d.next_n;
    FUZZ_CHECK(inside(d.row_ends, decode_rows, buffers.decode_row_lens));
    FUZZ_CHECK(d.num_seqs == 0 || inside(d.context_lens, d.num_seqs, d.next_n > 1 ? buffers.context_lens
                                                                                   : buffers.decode_row_lens));
    FUZZ_CHECK(d.block_ends == nullptr || inside(d.block_ends, decode_rows, buffers.decode_block_ends));
    FUZZ_CHECK(d.schedule == nullptr || inside(d.schedule, d.schedule_words, buffers.decode_schedule));
    if (d.num_seqs > 0) {
      const int64_t words = int64_t{d.num_seqs - 1} * d.block_table_stride + d.max_blocks;
      FUZZ_CHECK(d.max_blocks <= (d.in_place ? s.cols : d.block_table_stride));
      FUZZ_CHECK(inside(d.block_table, words, d.in_place ? table : buffers.decode_block_table));
    }
    if (d.row_block_table != nullptr) {
      const int64_t words = (decode_rows - 1) * d.row_block_table_stride + d.max_blocks;
      FUZZ_CHECK(inside(d.row_block_table, words, plan.decode.rows_are_requests ? table : buffers.decode_block_table));
    }
    for (std::size_t i = 0; i < plan.prefill.size(); ++i) {
      const PrefillLaunch l = prefill_launch(g, plan, i, inputs, out);
      FUZZ_CHECK(inside(l.row_ends, l.token_end - l.token_start, buffers.prefill_row_ends));
      FUZZ_CHECK(l.block_ends == nullptr || inside(l.block_ends, l.token_end - l.token_start, buffers.prefill_block_ends));
      FUZZ_CHECK(inside(l.context_lens, l.num_reqs, buffers.context_lens));
      FUZZ_CHECK(inside(l.query_start_loc, l.num_reqs + 1, buffers.prefill_query_start_loc));
      FUZZ_CHECK(l.max_blocks <= s.cols);
      FUZZ_CHECK(inside(l.block_table, int64_t{l.num_reqs - 1} * s.stride + l.max_blocks, table));
      FUZZ_CHECK(l.schedule == nullptr || inside(l.schedule, 6 * int64_t{l.num_ctas}, buffers.prefill_schedule));
      FUZZ_CHECK(l.safe == nullptr || inside(l.safe, 1, buffers.schedule_safe));
    }
    FUZZ_CHECK(d.safe == nullptr || inside(d.safe, 1, buffers.schedule_safe));
    for (std::size_t i = 0; i < plan.gather_launches.size(); ++i) {
      const CandidateLaunch l = candidate_launch(g, plan, i, inputs, out);
      FUZZ_CHECK(inside(l.row_ends, l.token_end - l.token_start, buffers.prefill_row_ends));
      FUZZ_CHECK(l.block_ends == nullptr || inside(l.block_ends, l.token_end - l.token_start, buffers.prefill_block_ends));
      FUZZ_CHECK(inside(l.context_len, 1, buffers.context_lens));
      FUZZ_CHECK(inside(l.block_table, 1, table));
    }
  } catch (const ConfigError&) {
    return 0;  // refused at engine start, with a message
  }
  return 0;
}
