// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// The idxplan command, run as a user runs it: its JSON checked value by value
// on a small step worked by hand, and the exit code of every error path.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `idxplan <args>` with `input` on stdin.
Result run(const std::string& args, const std::string& input = "") {
  // Named by the process: CTest runs each test as its own process, several
  // at a time, in the same TempDir.
  const std::string dir = ::testing::TempDir() + "idxplan_" + std::to_string(getpid());
  const std::string in = dir + "_in.json", out = dir + "_out.txt", err = dir + "_err.txt";
  std::ofstream(in) << input;
  const std::string cmd =
      std::string(IDXPLAN_BINARY) + " " + args + " < " + in + " > " + out + " 2> " + err;
  const int status = std::system(cmd.c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::string& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  r.out = slurp(out);
  r.err = slurp(err);
  for (const std::string& path : {in, out, err}) std::remove(path.c_str());
  return r;
}

// Four MTP decodes and a 3-row prefill on a one-CU GPU with 4096-token
// contexts and a 32-column candidate pool.
json small_step() {
  return json::parse(R"({
    "config": {"num_heads": 64, "head_dim": 128, "block_size": 128, "compress_ratio": 4,
               "num_speculative_tokens": 1, "max_model_len": 4096,
               "candidate_block_size": 8, "candidate_topk_blocks": 4, "sparse_logits": true,
               "max_logits_mb": 1, "num_compute_units": 1,
               "max_num_seqs": 16, "max_num_batched_tokens": 64},
    "step": {"query_start_loc": [0, 2, 4, 6, 8, 11],
             "seq_lens": [400, 130, 4, 2, 300],
             "seq_lens_upper_bound": [400, 130, 4, 2, 303]}})");
}

void expect_bad_input(const json& input, const std::string& message) {
  const Result r = run("plan -", input.dump());
  EXPECT_EQ(r.exit_code, 2) << input.dump();
  EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  // One line on stderr, nothing on stdout.
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(IdxplanPlan, PrintsTheSmallStepsJsonValueByValue) {
  const Result r = run("plan - --json", small_step().dump());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["num_decodes"], 4);
  EXPECT_EQ(j["num_decode_tokens"], 8);
  EXPECT_EQ(j["num_prefills"], 1);
  EXPECT_EQ(j["num_prefill_tokens"], 3);
  EXPECT_EQ(j["max_seq_len"], 400);
  EXPECT_EQ(j["context_lens"], json({100, 32, 1, 0, 75}));
  const json& d = j["decode"];
  EXPECT_EQ(d["row_lens"], json({99, 100, 32, 32, 0, 1, 0, 0}));
  EXPECT_EQ(d["block_ends"], json({13, 13, 4, 4, 0, 1, 0, 0}));
  EXPECT_EQ(d["native"], json({{"next_n", 2}, {"num_seqs", 4}}));
  EXPECT_EQ(d["use_gather"], true);  // 400 / 4 = 100 >= 3 x 32
  EXPECT_EQ(d["schedule"]["num_ctas"], 8);
  EXPECT_EQ(d["schedule"]["words"], json({0, 0, 0, 2, 0, 0, 1, 2, 1, 0, 0, 1, 2, 0, 0, 1,
                                          0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  ASSERT_EQ(j["prefill"].size(), 1u);
  const json& c = j["prefill"][0];
  EXPECT_EQ(c["token_start"], 8);
  EXPECT_EQ(c["token_end"], 11);
  EXPECT_EQ(c["first_request"], 4);
  EXPECT_EQ(c["num_reqs"], 1);
  EXPECT_EQ(c["requests"], json::parse("[[0, 3, 0]]"));
  EXPECT_EQ(c["width"], 75);  // the upper bound's 303 / 4
  EXPECT_EQ(c["use_gather"], true);
  EXPECT_EQ(c["query_start_loc"], json({0, 3}));
  EXPECT_EQ(c["context_lens"], json({75}));
  EXPECT_EQ(c["row_ends"], json({74, 74, 75}));
  EXPECT_EQ(c["block_ends"], json({10, 10, 10}));
  ASSERT_EQ(j["gather_launches"].size(), 1u);
  const json& g = j["gather_launches"][0];
  EXPECT_EQ(g["token_start"], 8);
  EXPECT_EQ(g["token_end"], 11);
  EXPECT_EQ(g["request"], 4);
  EXPECT_EQ(g["context_len"], 75);
  EXPECT_EQ(g["row_ends"], json({74, 74, 75}));
}

TEST(IdxplanPlan, ReadsAFileAndDefaultsTheUpperBounds) {
  json step = small_step();
  step["step"].erase("seq_lens_upper_bound");
  const std::string path = ::testing::TempDir() + "idxplan_step.json";
  std::ofstream(path) << step.dump();
  const Result r = run("plan --json " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["max_seq_len"], 400);
  EXPECT_EQ(j["prefill"][0]["width"], 75);  // 300 / 4
}

TEST(IdxplanPlan, KeysWithNothingToSayAreNull) {
  json step = small_step();
  step["config"]["sparse_logits"] = false;
  step["config"]["candidate_block_size"] = 0;
  step["step"] = {{"query_start_loc", {0, 3}}, {"seq_lens", {300}}};
  const Result r = run("plan - --json", step.dump());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["decode"].is_null());
  EXPECT_TRUE(j["prefill"][0]["block_ends"].is_null());
  EXPECT_TRUE(j["gather_launches"].empty());
}

TEST(IdxplanPlan, PlansTheBuiltInStepWithNoInput) {
  const Result text = run("plan");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("native: 64 sequences of 2 rows"), std::string::npos) << text.out;
  const Result as_json = run("plan --json");
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  const json j = json::parse(as_json.out);
  EXPECT_EQ(j["num_decodes"], 64);
  EXPECT_FALSE(j["decode"]["schedule"].is_null());
}

TEST(IdxplanPlan, AStepWithNoRequestsAndPaddedTokensIsAnEmptyPlan) {
  const Result r = run("plan - --json", R"({"config": {"num_compute_units": 4},
      "step": {"query_start_loc": [0], "seq_lens": [], "num_tokens": 5}})");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["num_decode_tokens"], 0);
  EXPECT_EQ(j["num_prefill_tokens"], 0);
  EXPECT_TRUE(j["decode"].is_null());
  EXPECT_TRUE(j["prefill"].empty());
  EXPECT_EQ(j["context_lens"], json::array());
}

TEST(IdxplanPlan, BadJsonExitsTwo) {
  const Result r = run("plan -", "{\"config\": ");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad JSON"), std::string::npos);
}

TEST(IdxplanPlan, BadConfigsExitTwo) {
  json step = small_step();
  step["config"]["dcp_world_size"] = 2;
  expect_bad_input(step, "dcp_world_size=2");
  step = small_step();
  step["config"]["num_heds"] = 64;
  expect_bad_input(step, "unknown key \"num_heds\"");
  step = small_step();
  step["config"]["head_dim"] = 1.5;
  expect_bad_input(step, "config.head_dim must be an integer");
  step = small_step();
  step["config"]["sparse_logits"] = 1;
  expect_bad_input(step, "config.sparse_logits must be true or false");
  step = small_step();
  step.erase("config");
  expect_bad_input(step, "\"config\" and \"step\"");
  // The config is checked before the step it would judge.
  step = small_step();
  step["config"]["max_model_len"] = -1;
  expect_bad_input(step, "bad config: max_model_len must be positive, got -1");
  step = small_step();
  step["config"]["max_num_seqs"] = 18446744073709551615ULL;
  expect_bad_input(step, "config.max_num_seqs=18446744073709551615 does not fit int32");
}

TEST(IdxplanPlan, BadStepsExitTwo) {
  json step = small_step();
  step["step"]["seq_lens"] = {400, 130};
  expect_bad_input(step, "step.seq_lens has 2 entries");
  step = small_step();
  step["step"]["seq_lens_upper_bound"] = {400, 130, 4, 2};
  expect_bad_input(step, "step.seq_lens_upper_bound has 4 entries");
  step = small_step();
  step["step"]["seq_lens_upper_bound"][4] = 299;
  expect_bad_input(step, "step.seq_lens_upper_bound[4]=299 is below step.seq_lens[4]=300");
  step = small_step();
  step["step"]["seq_lens"][0] = 5000;
  step["step"]["seq_lens_upper_bound"][0] = 5000;
  expect_bad_input(step, "step.seq_lens[0]=5000 is past max_model_len=4096");
  step = small_step();
  step["step"]["num_tokens"] = 10;
  expect_bad_input(step, "step.num_tokens=10 is below");
  step = small_step();
  step["step"]["query_start_loc"] = {0, 2, 1, 6, 8, 11};
  expect_bad_input(step, "decreases at request 1");
  step = small_step();
  step["step"]["query_start_loc"][5] = 1LL << 40;
  expect_bad_input(step, "does not fit int32");
  step = small_step();
  step["step"]["num_tokens"] = 18446744073709551615ULL;
  expect_bad_input(step, "step.num_tokens=18446744073709551615 does not fit int32");
  step = small_step();
  step["step"]["seq_lens"][1] = -5;
  step["step"].erase("seq_lens_upper_bound");
  expect_bad_input(step, "bad step: step.seq_lens[1]=-5 is negative");
  step = small_step();
  step["step"]["seq_lens"][2] = 1;  // its bound, 4, is fine
  expect_bad_input(step, "step.seq_lens[2]=1 is below its query length 2");
  step["step"]["seq_lens_upper_bound"][2] = 1;
  expect_bad_input(step, "seq_lens_upper_bound[2]=1 is below request 2's query length 2");
}

TEST(IdxplanPlan, UsageErrorsExitTwo) {
  EXPECT_EQ(run("").exit_code, 2);
  EXPECT_EQ(run("frobnicate").exit_code, 2);
  EXPECT_EQ(run("plan --yaml").exit_code, 2);
  EXPECT_EQ(run("plan a.json b.json").exit_code, 2);
  EXPECT_EQ(run("plan /nonexistent/step.json").exit_code, 2);
  EXPECT_EQ(run("--help").exit_code, 0);
}

// The first `n` requests of the shipped trace, as the lines a user pipes in.
std::string trace_lines(int n) {
  std::ifstream file(std::string(IDXPLAN_TRACES) + "/mooncake_conversation_first500.jsonl");
  std::string out, line;
  for (int i = 0; i < n && std::getline(file, line); ++i) out += line + "\n";
  return out;
}

TEST(IdxplanReplay, ReportsAsTextAndAsJson) {
  const Result text = run("replay -", trace_lines(40));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("replayed 40 requests (40 finished)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("plan_step a step: p50"), std::string::npos) << text.out;
  const Result j = run("replay - --json --no-check --no-prefix-cache", trace_lines(40));
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const json report = json::parse(j.out);
  EXPECT_EQ(report["finished"], 40);
  EXPECT_EQ(report["tokens"]["cached"], 0);
  EXPECT_EQ(report["seconds"]["check"], 0.0);
}

TEST(IdxplanReplay, UsageAndInputErrorsExitTwo) {
  EXPECT_EQ(run("replay").exit_code, 2);
  const Result bad_number = run("replay - --max-num-seqs many", trace_lines(2));
  EXPECT_EQ(bad_number.exit_code, 2);
  EXPECT_NE(bad_number.err.find("--max-num-seqs takes a number, got \"many\""), std::string::npos);
  EXPECT_EQ(run("replay - --frobnicate", trace_lines(2)).exit_code, 2);
  const Result negative = run("replay - --requests -5", trace_lines(2));
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_NE(negative.err.find("--requests=-5 is out of range"), std::string::npos) << negative.err;
  EXPECT_EQ(run("replay - --max-num-seqs 4294967296", trace_lines(2)).exit_code, 2);
  EXPECT_EQ(run("replay /nonexistent/trace.jsonl").exit_code, 2);
  const Result bad_line = run("replay -", trace_lines(2) + "{\"timestamp\": 9}\n");
  EXPECT_EQ(bad_line.exit_code, 2);
  EXPECT_NE(bad_line.err.find("trace line 3"), std::string::npos) << bad_line.err;
  const Result small_engine = run("replay - --max-num-batched-tokens 1", trace_lines(2));
  EXPECT_EQ(small_engine.exit_code, 2) << small_engine.err;
}

}  // namespace
