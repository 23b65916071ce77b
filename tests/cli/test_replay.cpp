// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// `idxplan replay`'s scheduler model, rule by rule on small made-up traces,
// and a replay of the shipped trace's first 500 requests with its report
// checked against counts taken from the trace and the scheduler here.

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "replay.hpp"

namespace idxplan::tool {
namespace {

TraceRequest request(int64_t at_ms, int32_t input, int32_t output, std::vector<int64_t> blocks = {}) {
  if (blocks.empty()) {
    static int64_t next_id = 1000000;
    for (int32_t t = 0; t < input; t += 512) blocks.push_back(next_id++);
  }
  return TraceRequest{at_ms, input, output, std::move(blocks)};
}

SchedulerConfig small_config() {
  SchedulerConfig c;
  c.max_num_batched_tokens = 1000;
  c.max_num_seqs = 4;
  c.num_speculative_tokens = 1;
  c.acceptance = 0.0;  // one token a decode step: counts by hand
  return c;
}

std::vector<Step> all_steps(Scheduler& s) {
  std::vector<Step> steps;
  Step step;
  while (s.next(step)) steps.push_back(step);
  return steps;
}

TEST(Scheduler, ChunksAPromptWithinTheTokenBudget) {
  const std::vector<TraceRequest> trace{request(0, 2500, 1)};
  Scheduler s(trace, small_config());
  const std::vector<Step> steps = all_steps(s);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].query_start_loc, (std::vector<int32_t>{0, 1000}));
  EXPECT_EQ(steps[0].seq_lens, (std::vector<int32_t>{1000}));
  EXPECT_EQ(steps[1].seq_lens, (std::vector<int32_t>{2000}));
  EXPECT_EQ(steps[2].query_start_loc, (std::vector<int32_t>{0, 500}));
  EXPECT_EQ(s.state(0).generated, 1);  // the last chunk samples the only output token
  EXPECT_EQ(s.finished(), 1u);
}

TEST(Scheduler, SeatsLimitTheRequestsAndTheRestWaitFirstComeFirstServed) {
  SchedulerConfig c = small_config();
  c.max_num_seqs = 2;
  const std::vector<TraceRequest> trace{request(0, 10, 3), request(0, 10, 3), request(0, 10, 3)};
  Scheduler s(trace, c);
  const std::vector<Step> steps = all_steps(s);
  // Requests 0 and 1 take both seats; 2 is admitted once one has finished.
  EXPECT_EQ(steps[0].batch.size(), 2u);
  EXPECT_EQ(steps[0].batch[0].request, 0);
  EXPECT_EQ(steps[0].batch[1].request, 1);
  std::size_t first_with_2 = 0;
  while (first_with_2 < steps.size() &&
         std::none_of(steps[first_with_2].batch.begin(), steps[first_with_2].batch.end(),
                      [](const ScheduledRequest& b) { return b.request == 2; })) {
    ++first_with_2;
  }
  ASSERT_LT(first_with_2, steps.size());
  for (std::size_t i = 0; i < first_with_2; ++i) EXPECT_LE(steps[i].batch.size(), 2u);
  EXPECT_EQ(s.state(0).phase, Scheduler::Phase::finished);
  EXPECT_EQ(s.finished(), 3u);
}

TEST(Scheduler, ListsDecodesFirstAndPadsOnlyDecodeOnlySteps) {
  const std::vector<TraceRequest> trace{request(0, 10, 5), request(0, 10, 5), request(0, 10, 5),
                                        request(1, 300, 2)};
  SchedulerConfig c = small_config();
  c.step_ms = 10;
  Scheduler s(trace, c);
  const std::vector<Step> steps = all_steps(s);
  // Step 0 prefills the three prompts that arrived at 0 (request 3 at 1 ms).
  EXPECT_EQ(steps[0].query_start_loc, (std::vector<int32_t>{0, 10, 20, 30}));
  EXPECT_EQ(steps[0].num_tokens, 30);
  // Step 1: three decodes of 2 tokens, then request 3's prompt after them.
  ASSERT_EQ(steps[1].batch.size(), 4u);
  EXPECT_EQ(steps[1].batch[3].request, 3);
  EXPECT_EQ(steps[1].query_start_loc, (std::vector<int32_t>{0, 2, 4, 6, 306}));
  EXPECT_EQ(steps[1].seq_lens, (std::vector<int32_t>{12, 12, 12, 300}));
  EXPECT_EQ(steps[1].num_tokens, 306);  // mixed: not padded
  // Step 2: four decodes, 8 tokens, a capture size; with three, 6 pads to 8.
  EXPECT_EQ(steps[2].num_tokens, 8);
  EXPECT_EQ(steps[2].seq_lens.size(), 4u);
  EXPECT_EQ(s.padded(6), 8);
  EXPECT_EQ(s.padded(513), 513);  // past the largest capture size: not padded
  // Decode seq_lens grow by the one accepted token a step.
  EXPECT_EQ(steps[2].seq_lens[0], 13);
}

TEST(Scheduler, PadsAUniformDecodeBatchWithWholeEmptyRequests) {
  // Three uniform MTP decodes (6 tokens) pad to 8: a fourth request with no
  // tokens and no context, as a FULL graph of four sequences replays them.
  const std::vector<TraceRequest> trace{request(0, 10, 5), request(0, 10, 5), request(0, 10, 5)};
  Scheduler s(trace, small_config());
  const std::vector<Step> steps = all_steps(s);
  EXPECT_EQ(steps[1].query_start_loc, (std::vector<int32_t>{0, 2, 4, 6, 6}));
  EXPECT_EQ(steps[1].seq_lens, (std::vector<int32_t>{12, 12, 12, 0}));
  EXPECT_EQ(steps[1].num_tokens, 8);
  EXPECT_EQ(steps[1].batch.size(), 3u);
  // One decode and a one-token prompt (the cache holds the rest of it): not
  // uniform, so its tokens are padded (3 to 4) and it runs flattened.
  const std::vector<TraceRequest> mixed{request(0, 10, 3, {1}), request(1, 10, 1, {1})};
  Scheduler t(mixed, small_config());
  const std::vector<Step> mixed_steps = all_steps(t);
  ASSERT_GE(mixed_steps.size(), 2u);
  EXPECT_EQ(t.state(1).cached, 9);
  EXPECT_EQ(mixed_steps[1].query_start_loc, (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(mixed_steps[1].num_tokens, 4);
}

TEST(Scheduler, ReusesACachedPrefixAndRecomputesTheLastToken) {
  SchedulerConfig c = small_config();
  c.max_num_batched_tokens = 4096;
  const std::vector<TraceRequest> trace{request(0, 1500, 1, {1, 2, 3}),
                                        request(100000, 1600, 1, {1, 2, 4, 5}),
                                        request(200000, 1500, 1, {1, 2, 3})};
  Scheduler s(trace, c);
  all_steps(s);
  EXPECT_EQ(s.state(0).cached, 0);
  EXPECT_EQ(s.state(1).cached, 1024);  // blocks 1 and 2
  EXPECT_EQ(s.state(1).prefilled, 1600 - 1024);
  EXPECT_EQ(s.state(2).cached, 1499);  // all of it but the last token
  EXPECT_EQ(s.state(2).prefilled, 1);
  c.prefix_cache = false;
  Scheduler uncached(trace, c);
  all_steps(uncached);
  EXPECT_EQ(uncached.state(2).cached, 0);
}

TEST(Scheduler, AcceptedDraftsAdvanceSeveralTokensAStep) {
  SchedulerConfig c = small_config();
  c.acceptance = 1.0;
  c.num_speculative_tokens = 3;
  const std::vector<TraceRequest> trace{request(0, 10, 9)};
  Scheduler s(trace, c);
  const std::vector<Step> steps = all_steps(s);
  // The prompt's step samples 1; each decode step then gains 4: 1 + 4 + 4.
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[1].seq_lens, (std::vector<int32_t>{14}));
  EXPECT_EQ(steps[2].seq_lens, (std::vector<int32_t>{18}));
  EXPECT_EQ(s.state(0).generated, 9);
}

TEST(Scheduler, RefusesWhatItCannotModel) {
  EXPECT_THROW(Scheduler({request(0, 0, 1)}, small_config()), std::invalid_argument);
  SchedulerConfig c = small_config();
  c.max_num_batched_tokens = 1;  // a 2-token decode never fits
  EXPECT_THROW(Scheduler({request(0, 10, 2)}, c), std::invalid_argument);
  std::istringstream unordered("{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n"
                               "{\"timestamp\": 4, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [2]}\n");
  EXPECT_THROW(read_trace(unordered), std::invalid_argument);
}

std::vector<TraceRequest> shipped_first_500() {
  std::ifstream file(std::string(IDXPLAN_TRACES) + "/mooncake_conversation_first500.jsonl");
  return read_trace(file);
}

Geometry deepseek_geometry(const SchedulerConfig& sc) {
  IndexerConfig c = deepseek_v41_config(256);
  c.max_num_seqs = sc.max_num_seqs;
  c.max_num_batched_tokens = sc.max_num_batched_tokens;
  c.num_speculative_tokens = sc.num_speculative_tokens;
  return make_geometry(c);
}

TEST(Replay, TheShippedTracesFirst500RequestsPlanAndCheckEveryStep) {
  const std::vector<TraceRequest> trace = shipped_first_500();
  ASSERT_EQ(trace.size(), 500u);
  SchedulerConfig sc;
  sc.seed = 7;
  const Geometry g = deepseek_geometry(sc);
  std::ostringstream dump;
  ReplayOptions options;
  options.dump = &dump;
  const ReplayReport r = replay(g, trace, sc, options);  // throws on a failed check

  // Counts from the trace itself and from the scheduler run here alone.
  int64_t prompt = 0, output = 0;
  for (const TraceRequest& t : trace) {
    prompt += t.input_length;
    output += t.output_length;
  }
  Scheduler alone(trace, sc);
  int64_t steps = 0, decode_only = 0;
  Step step;
  while (alone.next(step)) {
    ++steps;
    decode_only += std::all_of(step.batch.begin(), step.batch.end(), [](const ScheduledRequest& b) {
      return b.query <= 2;
    });
  }
  int64_t cached = 0;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const Scheduler::State& s = alone.state(i);
    EXPECT_EQ(s.phase, Scheduler::Phase::finished) << "request " << i;
    EXPECT_EQ(s.generated, trace[i].output_length) << "request " << i;
    EXPECT_EQ(s.prefilled, trace[i].input_length - s.cached) << "request " << i;
    cached += s.cached;
  }
  EXPECT_EQ(r.finished, 500u);
  EXPECT_EQ(r.steps, steps);
  EXPECT_EQ(r.prompt_tokens, prompt);
  EXPECT_EQ(r.generated_tokens, output);
  EXPECT_EQ(r.cached_tokens, cached);
  EXPECT_EQ(r.prefilled_tokens + r.cached_tokens, prompt);
  EXPECT_GT(r.cached_tokens, 0);  // conversations share prefixes
  EXPECT_EQ(r.decode_only + r.mixed + r.prefill_only + r.empty, r.steps);
  EXPECT_EQ(r.decode_only, decode_only);
  EXPECT_GT(r.mixed, 0);
  EXPECT_GT(r.native, 0);
  EXPECT_LE(r.requests_a_step.max, sc.max_num_seqs);
  EXPECT_LE(r.tokens_a_step.max, sc.max_num_batched_tokens);
  for (const BufferUse& b : r.buffers) EXPECT_LE(b.used, b.reserved) << b.name;
  // Every step was dumped, and a dumped step plans alone as `idxplan plan` does.
  std::istringstream lines(dump.str());
  std::string line;
  int64_t dumped = 0;
  while (std::getline(lines, line)) {
    if (dumped++ % 97 == 0) {
      EXPECT_NO_THROW(plan_request(parse_step_request(json::parse(line))));
    }
  }
  EXPECT_EQ(dumped, r.steps);
}

TEST(Replay, TheShippedTracesFirst500RequestsCheckEveryFlydslGrid) {
  // Every step's FlyDSL grids against the drop-ins' rules on the step's
  // own lengths (replay.hpp's fp4_grid_violation), and their buffers.
  SchedulerConfig sc;
  IndexerConfig c = deepseek_v41_config(256);
  c.max_num_seqs = sc.max_num_seqs;
  c.max_num_batched_tokens = sc.max_num_batched_tokens;
  c.contract = Contract::flydsl_fp4;
  const ReplayReport r = replay(make_geometry(c), shipped_first_500(), sc, ReplayOptions{});
  EXPECT_EQ(r.finished, 500u);
  EXPECT_EQ(r.native, 0);  // compression 4: the decode rows run flattened
  bool grids = false;
  for (const BufferUse& b : r.buffers) {
    EXPECT_LE(b.used, b.reserved) << b.name;
    grids = grids || (b.name == std::string("prefill_schedule") && b.used > 0);
  }
  EXPECT_TRUE(grids);
}

TEST(Replay, TheShippedTracesFirst500RequestsCheckEveryDeepgemmMetadata) {
  // Every step's decode_schedule against get_paged_mqa_logits_metadata of
  // its own decode rows (deepgemm_sm90::metadata_violation), as the idxplan
  // command's --contract deepgemm_sm90 plans them: pages of 64 keys, an
  // H100's 132 SMs, MTP decodes native in sequences of 2.
  SchedulerConfig sc;
  IndexerConfig c = deepseek_v41_config(132);
  c.max_num_seqs = sc.max_num_seqs;
  c.max_num_batched_tokens = sc.max_num_batched_tokens;
  c.contract = Contract::deepgemm_sm90;
  c.block_size = deepgemm_sm90::kBlockKv * c.compress_ratio;
  const ReplayReport r = replay(make_geometry(c), shipped_first_500(), sc, ReplayOptions{});
  EXPECT_EQ(r.finished, 500u);
  EXPECT_GT(r.native, 1000);
  for (const BufferUse& b : r.buffers) {
    EXPECT_LE(b.used, b.reserved) << b.name;
    if (b.name == std::string("decode_schedule")) {
      EXPECT_EQ(b.used, 2 * 133);
    }
  }
}

TEST(Replay, AStepThePlannerRefusesStopsTheReplayWithTheStep) {
  const std::vector<TraceRequest> trace{request(0, 5000, 1)};
  SchedulerConfig sc;
  SchedulerConfig smaller = sc;
  smaller.max_num_batched_tokens = 4096;  // the engine was sized for less than the scheduler's budget
  const Geometry g = deepseek_geometry(smaller);
  try {
    replay(g, trace, sc, ReplayOptions{});
    FAIL() << "a 5000-token step planned against a 4096-token geometry";
  } catch (const ReplayFailure& e) {
    EXPECT_NE(std::string(e.what()).find("step 0: plan_step refused it"), std::string::npos) << e.what();
    EXPECT_EQ(e.step.at("step").at("query_start_loc"), json({0, 5000}));
    EXPECT_EQ(e.step.at("config").at("max_num_batched_tokens"), 4096);
  }
}

}  // namespace
}  // namespace idxplan::tool
