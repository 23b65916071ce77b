// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// idxplan/json.hpp as a C++ front end calls it: the config both ways, the
// step read with its defaults and its typed errors, and the plan planned,
// filled and written as docs/cli.md says. tests/cli runs the same code
// through the idxplan command, message by message.

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "idxplan/json.hpp"
#include "test_support.hpp"

namespace idxplan {
namespace {

using nlohmann::json;

// Every field away from IndexerConfig's default, so a key the reader skips
// shows in the round trip.
IndexerConfig every_field_set() {
  IndexerConfig c;
  c.num_heads = 32;
  c.head_dim = 64;
  c.block_size = 64;
  c.compress_ratio = 8;
  c.num_speculative_tokens = 3;
  c.adaptive_verification = !c.adaptive_verification;
  c.max_model_len = 8192;
  c.candidate_block_size = 16;
  c.candidate_topk_blocks = 8;
  c.sparse_logits = !c.sparse_logits;
  c.max_logits_mb = 7;
  c.num_compute_units = 3;
  c.dcp_world_size = 2;
  c.pcp_world_size = 2;
  c.max_num_seqs = 48;
  c.max_num_batched_tokens = 640;
  c.max_blocks_per_seq = 99;
  c.contract = Contract::flydsl_fp4;
  c.decode_parallel_units = 2048;
  c.prefill_parallel_units = 512;
  return c;
}

TEST(ConfigJson, RoundTripsEveryField) {
  const IndexerConfig c = every_field_set();
  const json written = config_to_json(c);
  const json defaults = config_to_json(IndexerConfig{});
  ASSERT_EQ(written.size(), defaults.size());
  for (const auto& item : written.items()) {
    EXPECT_NE(item.value(), defaults.at(item.key())) << item.key() << " is at its default";
  }
  EXPECT_EQ(config_to_json(config_from_json(written)), written);
}

TEST(ConfigJson, MissingKeysTakeTheDefaults) {
  const IndexerConfig c = config_from_json(json{{"num_compute_units", 4}});
  IndexerConfig want;
  want.num_compute_units = 4;
  EXPECT_EQ(config_to_json(c), config_to_json(want));
}

TEST(ConfigJson, RefusesWhatNoFieldHoldsNamingTheKey) {
  EXPECT_NE(test::error_of<ConfigError>([] { (void)config_from_json(json::array()); }).find("config must be an object"),
            std::string::npos);
  EXPECT_NE(test::error_of<ConfigError>([] { (void)config_from_json(json{{"num_heds", 64}}); })
                .find("unknown key \"num_heds\""),
            std::string::npos);
  EXPECT_NE(test::error_of<ConfigError>([] { (void)config_from_json(json{{"head_dim", "128"}}); })
                .find("config.head_dim must be an integer, got \"128\""),
            std::string::npos);
  EXPECT_EQ(test::error_of<ConfigError>([] { (void)config_from_json(json{{"contract", "flydsl"}}); }),
            "config.contract must be \"gluon_mxfp4\", \"flydsl_fp4\" or \"deepgemm_sm90\", got \"flydsl\"");
  EXPECT_NE(test::error_of<ConfigError>([] { (void)config_from_json(json{{"sparse_logits", 0}}); })
                .find("config.sparse_logits must be true or false"),
            std::string::npos);
  EXPECT_NE(test::error_of<ConfigError>([] { (void)config_from_json(json{{"max_num_seqs", int64_t{1} << 31}}); })
                .find("config.max_num_seqs=2147483648 does not fit int32"),
            std::string::npos);
}

json small_request() {
  return json{{"config", config_to_json(test::small_config())},
              {"step", {{"query_start_loc", {0, 2, 4, 6, 8, 11}}, {"seq_lens", {400, 130, 4, 2, 300}}}}};
}

TEST(StepRequestJson, DefaultsTheUpperBoundsAndTheTokens) {
  const StepRequest r = parse_step_request(small_request());
  EXPECT_EQ(r.query_start_loc, (std::vector<int32_t>{0, 2, 4, 6, 8, 11}));
  EXPECT_EQ(r.seq_lens, (std::vector<int32_t>{400, 130, 4, 2, 300}));
  EXPECT_EQ(r.seq_lens_upper_bound, r.seq_lens);
  EXPECT_EQ(r.num_tokens, kUnpaddedTokens);
  EXPECT_EQ(config_to_json(r.config), config_to_json(test::small_config()));
}

TEST(StepRequestJson, ThrowsConfigErrorForTheConfigAndStepErrorForTheStep) {
  json bad_config = small_request();
  bad_config["config"]["max_model_len"] = -1;  // refused by make_geometry, before the step
  bad_config["step"]["seq_lens"] = {1};
  EXPECT_NE(test::error_of<ConfigError>([&] { (void)parse_step_request(bad_config); }).find("max_model_len"),
            std::string::npos);
  json bad_step = small_request();
  bad_step["step"]["seq_lens"][3] = -2;
  EXPECT_NE(test::error_of<StepError>([&] { (void)parse_step_request(bad_step); })
                .find("step.seq_lens[3]=-2 is negative"),
            std::string::npos);
  bad_step = small_request();
  bad_step["step"]["sequence_lengths"] = {1};
  EXPECT_NE(test::error_of<StepError>([&] { (void)parse_step_request(bad_step); })
                .find("unknown key \"sequence_lengths\""),
            std::string::npos);
  EXPECT_NE(test::error_of<StepError>([] { (void)parse_step_request(json{{"step", json::object()}}); })
                .find("\"config\" and \"step\""),
            std::string::npos);
}

TEST(PlanRequestJson, PlansAsPlanStepAndWritesTheReferenceBuffers) {
  json request = small_request();
  request["step"]["seq_lens_upper_bound"] = {400, 130, 4, 2, 303};
  request["step"]["num_tokens"] = 12;
  PlannedStep planned = plan_request(parse_step_request(request));
  const Geometry g = make_geometry(test::small_config());
  StepPlan want;
  const std::vector<int32_t> qsl{0, 2, 4, 6, 8, 11}, upper{400, 130, 4, 2, 303};
  plan_step(g, qsl, upper, 12, want);
  EXPECT_EQ(planned.plan, want);

  const json out = plan_to_json(planned);
  EXPECT_EQ(out.at("num_decodes"), want.num_decodes);
  EXPECT_EQ(out.at("num_prefill_tokens"), want.num_prefill_tokens);
  EXPECT_EQ(out.at("context_lens"), planned.buffers.context_lens);
  // The decode rows' lengths as the CPU reference wrote them: each row's
  // keys, its request's length less the rows after it in the request.
  const json& decode = out.at("decode");
  ASSERT_TRUE(decode.is_object());
  const int64_t rows = want.num_decode_tokens;
  ASSERT_EQ(decode.at("row_lens").size(), static_cast<std::size_t>(rows));
  const std::vector<int32_t> row_lens = decode.at("row_lens").get<std::vector<int32_t>>();
  EXPECT_EQ(row_lens, std::vector<int32_t>(planned.buffers.decode_row_lens.begin(),
                                           planned.buffers.decode_row_lens.begin() + rows));
  EXPECT_EQ(out.at("prefill").size(), want.prefill.size());
  EXPECT_EQ(out.at("gather_launches").size(), want.gather_launches.size());
}

TEST(PlanRequestJson, AStepWithoutDecodesHasANullDecode) {
  json request = small_request();
  request["step"] = {{"query_start_loc", {0, 3}}, {"seq_lens", {300}}};
  PlannedStep planned = plan_request(parse_step_request(request));
  const json out = plan_to_json(planned);
  EXPECT_EQ(out.at("num_decodes"), 0);
  EXPECT_TRUE(out.at("decode").is_null());
}

TEST(PlanRequestJson, RefusesAnExactLengthBelowItsQueryLength) {
  json request = small_request();
  request["step"]["seq_lens"][4] = 2;  // its query is 3 rows
  request["step"]["seq_lens_upper_bound"] = {400, 130, 4, 2, 300};
  EXPECT_NE(test::error_of<StepError>([&] { (void)plan_request(parse_step_request(request)); })
                .find("step.seq_lens[4]=2 is below its query length 3"),
            std::string::npos);
}

}  // namespace
}  // namespace idxplan
