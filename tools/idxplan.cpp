// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// idxplan plan [FILE|-] [--json]: plans one step and prints the plan, as a
// summary or as JSON. With no input it plans a built-in realistic step.
// idxplan replay TRACE|- [flags]: replays a serving trace (docs/replay.md).

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "replay_cli.hpp"
#include "idxplan/json.hpp"

namespace {

using nlohmann::json;

constexpr int kUsageExit = 2;
constexpr int kBadInputExit = 2;

constexpr const char* kUsage =
    "usage: idxplan plan [FILE|-] [--json]\n"
    "  Plans one indexer step read as JSON from FILE or stdin (-), or a built-in\n"
    "  DeepSeek-V4.1-sized step when no input is given, and prints the plan.\n"
    "  --json  print the plan and the CPU reference's buffers as JSON\n"
    "usage: idxplan replay TRACE|- [flags]  (idxplan replay --help)\n";

// A DeepSeek-V4.1-sized indexer on a 256-CU GPU: 64 long-context MTP decodes
// and a 1M-token request prefilling 8192 tokens, beside two short prompts.
json builtin_step() {
  json config = {{"num_heads", 64},           {"head_dim", 128},
                 {"block_size", 128},         {"compress_ratio", 4},
                 {"num_speculative_tokens", 1}, {"adaptive_verification", false},
                 {"max_model_len", 1048576},  {"candidate_block_size", 8},
                 {"candidate_topk_blocks", 2048}, {"sparse_logits", true},
                 {"max_logits_mb", 512},      {"num_compute_units", 256},
                 {"dcp_world_size", 1},       {"pcp_world_size", 1}};
  std::vector<int32_t> qsl{0};
  std::vector<int32_t> lens;
  for (int32_t r = 0; r < 64; ++r) {
    qsl.push_back(qsl.back() + 2);
    lens.push_back(4096 + (r * 7919) % 200000);  // 4K to 204K tokens
  }
  for (const auto& [query, len] : {std::pair{8192, 1000000}, std::pair{1200, 1200},
                                   std::pair{300, 300}}) {
    qsl.push_back(qsl.back() + query);
    lens.push_back(len);
  }
  return {{"config", config}, {"step", {{"query_start_loc", qsl}, {"seq_lens", lens}}}};
}

void print_summary(const idxplan::PlannedStep& s) {
  const idxplan::StepPlan& p = s.plan;
  fmt::print("step: {} requests, {} tokens, longest {} tokens\n", p.num_reqs, p.num_tokens,
             p.max_seq_len);
  fmt::print("  {} decodes ({} tokens), {} prefills ({} tokens)\n", p.num_decodes,
             p.num_decode_tokens, p.num_prefills, p.num_prefill_tokens);
  if (p.has_decode()) {
    const idxplan::DecodePlan& d = p.decode;
    fmt::print("decode: {} rows ({} real), ", d.num_rows, d.num_real_rows);
    if (d.native.present()) {
      fmt::print("native: {} sequences of {} rows", d.native.num_seqs, d.native.next_n);
    } else {
      fmt::print("flattened");
    }
    fmt::print(", candidate gather: {}\n", d.use_gather ? "yes" : "no");
    fmt::print("  block table: {}\n", d.ragged() ? "ragged rows: copied to decode_block_table"
                                                : "the engine's, read in place");
    if (d.schedule.present()) {
      const idxplan::ScheduleShape& sh = d.schedule;
      int32_t busy = 0;
      for (int32_t slot = 0; slot < sh.num_ctas; ++slot) {
        busy += s.buffers.decode_schedule[static_cast<std::size_t>(4 * slot + 3)] > 0;
      }
      fmt::print("  schedule: {} slots ({} busy) over {} units of {} rows, <= {} KV tiles a slice\n",
                 sh.num_ctas, busy, sh.work, sh.block_m, sh.max_tiles);
    } else {
      fmt::print("  schedule: none\n");
    }
  }
  if (p.has_prefill()) {
    fmt::print("prefill: {} chunks from {} splits\n", p.prefill.size(), p.splits.size());
    for (std::size_t i = 0; i < p.prefill.size(); ++i) {
      const idxplan::PrefillPlan& c = p.prefill[i];
      const int64_t mib = int64_t{4} * (c.token_end - c.token_start) * c.width >> 20;
      fmt::print("  chunk {}: tokens [{}, {}), requests {}..{}, width {} ({} MiB of logits){}\n",
                 i, c.token_start, c.token_end, c.first_request, c.first_request + c.num_reqs - 1,
                 c.width, mib, c.use_gather ? ", gathers" : "");
    }
  }
  if (!p.gather_launches.empty()) {
    fmt::print("candidate consumers: {} launches\n", p.gather_launches.size());
    for (const idxplan::GatherLaunch& l : p.gather_launches) {
      fmt::print("  tokens [{}, {}) of request {}\n", l.token_start, l.token_end, l.request);
    }
  }
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? kUsageExit : 0;
  }
  if (args[0] == "replay") return idxplan::tool::replay_main(args, nullptr);
  if (args[0] != "plan") {
    std::fprintf(stderr, "idxplan: unknown command \"%s\"\n%s", args[0].c_str(), kUsage);
    return kUsageExit;
  }
  bool as_json = false;
  std::string input;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--json") {
      as_json = true;
    } else if (!input.empty() || (args[i].size() > 1 && args[i][0] == '-')) {
      std::fprintf(stderr, "idxplan: unexpected argument \"%s\"\n%s", args[i].c_str(), kUsage);
      return kUsageExit;
    } else {
      input = args[i];
    }
  }

  try {
    json request;
    if (input.empty()) {
      request = builtin_step();
    } else if (input == "-") {
      request = json::parse(std::cin);
    } else {
      std::ifstream file(input);
      if (!file) {
        std::fprintf(stderr, "idxplan: cannot read %s\n", input.c_str());
        return kBadInputExit;
      }
      request = json::parse(file);
    }
    idxplan::PlannedStep planned = idxplan::plan_request(idxplan::parse_step_request(request));
    if (as_json) {
      std::cout << idxplan::plan_to_json(planned).dump() << '\n';
    } else {
      print_summary(planned);
    }
  } catch (const json::exception& e) {
    std::fprintf(stderr, "idxplan: bad JSON: %s\n", e.what());
    return kBadInputExit;
  } catch (const idxplan::ConfigError& e) {
    std::fprintf(stderr, "idxplan: bad config: %s\n", e.what());
    return kBadInputExit;
  } catch (const idxplan::StepError& e) {
    std::fprintf(stderr, "idxplan: bad step: %s\n", e.what());
    return kBadInputExit;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
