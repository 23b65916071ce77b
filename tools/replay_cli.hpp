// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// `idxplan replay`'s command line (docs/replay.md), shared by the idxplan
// command and the device replay (tools/replay_device.hip), which adds its
// step hook.

#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "replay.hpp"

namespace idxplan::tool {

inline constexpr int kReplayUsageExit = 2;
inline constexpr int kReplayInputExit = 2;

inline constexpr const char* kReplayUsage =
    "usage: idxplan replay TRACE|- [flags]\n"
    "  Replays a Mooncake-format trace through a vLLM-like scheduler, plans every\n"
    "  step for a DeepSeek-V4.1 indexer, checks it and reports (docs/replay.md).\n"
    "  --requests N                the first N requests (default: all)\n"
    "  --max-num-batched-tokens N  token budget a step (8192)\n"
    "  --max-num-seqs N            requests a step (256)\n"
    "  --num-speculative-tokens N  MTP draft tokens (1)\n"
    "  --acceptance P              chance a draft token is accepted (0.8)\n"
    "  --prefix-cache-blocks N     512-token blocks the prefix cache holds (200000)\n"
    "  --no-prefix-cache           prefill every prompt whole\n"
    "  --capture-sizes A,B,...     decode-only steps pad to these (vLLM: 1,2,4, 8-248 by 8, 256-512 by 16)\n"
    "  --time-scale X              arrivals at timestamp / X (1)\n"
    "  --step-ms X --token-us Y    a step takes X ms + Y us a token (20, 30)\n"
    "  --seed N                    draft acceptance (1)\n"
    "  --num-compute-units N       the GPU's CUs (SMs) the geometry plans for (256; 132 under\n"
    "                              deepgemm_sm90, an H100's)\n"
    "  --no-check                  plan only: no CPU fill, no invariants\n"
    "  --check-every N             CPU fill and check every Nth step (1)\n"
    "  --json                      the report as JSON\n"
    "  --series FILE               per-step time, kind and plan_step time as JSON\n"
    "  --dump-steps FILE           every step as a line of `idxplan plan` input\n"
    "  --contract NAME             gluon_mxfp4 (default), flydsl_fp4 or deepgemm_sm90: the consumer\n"
    "                              whose words the steps write, and are checked for (deepgemm_sm90\n"
    "                              pages hold DeepGEMM's 64 keys: block_size 256 at compression 4)\n"
    "  --failed-step FILE          where a failed step goes (default: stderr)\n";

using HookFactory = std::function<std::unique_ptr<StepHook>(const Geometry&)>;

// A flag's number, or a usage error naming it: a whole number within T's
// range where T is an integer.
template <class T>
T number(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  T value{};
  bool fits = true;
  try {
    if constexpr (std::is_floating_point_v<T>) {
      value = static_cast<T>(std::stod(text, &used));
    } else {
      const long long n = std::stoll(text, &used);
      fits = n >= static_cast<long long>(std::numeric_limits<T>::min()) &&
             (n < 0 || static_cast<unsigned long long>(n) <=
                           static_cast<unsigned long long>(std::numeric_limits<T>::max()));
      value = static_cast<T>(n);
    }
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty()) {
    throw std::invalid_argument(fmt::format("{} takes a number, got \"{}\"", flag, text));
  }
  if (!fits) throw std::invalid_argument(fmt::format("{}={} is out of range", flag, text));
  return value;
}

// `idxplan replay ARGS`: parses the flags, replays, reports. `make_hook`,
// where given, makes the step hook for the replay's geometry (the device
// replay's enqueue); its summary follows the report.
inline int replay_main(const std::vector<std::string>& args, const HookFactory& make_hook) {
  SchedulerConfig sc;
  ReplayOptions options;
  std::string input, series_path, dump_path, failed_path;
  idxplan::Contract contract = idxplan::Contract::gluon_mxfp4;
  std::size_t limit = 0;
  std::optional<int32_t> compute_units;  // none: the contract's GPU's
  bool as_json = false;
  try {
    for (std::size_t i = 1; i < args.size(); ++i) {
      const std::string& a = args[i];
      const auto value = [&]() -> const std::string& {
        if (i + 1 >= args.size()) throw std::invalid_argument(a + " needs a value");
        return args[++i];
      };
      if (a == "--help" || a == "-h") {
        std::fputs(kReplayUsage, stdout);
        return 0;
      }
      if (a == "--json") as_json = true;
      else if (a == "--no-check") options.check = false;
      else if (a == "--no-prefix-cache") sc.prefix_cache = false;
      else if (a == "--check-every") options.check_every = number<int64_t>(a, value());
      else if (a == "--requests") limit = number<std::size_t>(a, value());
      else if (a == "--max-num-batched-tokens") sc.max_num_batched_tokens = number<int32_t>(a, value());
      else if (a == "--max-num-seqs") sc.max_num_seqs = number<int32_t>(a, value());
      else if (a == "--num-speculative-tokens") sc.num_speculative_tokens = number<int32_t>(a, value());
      else if (a == "--acceptance") sc.acceptance = number<double>(a, value());
      else if (a == "--prefix-cache-blocks") sc.prefix_cache_blocks = number<int64_t>(a, value());
      else if (a == "--time-scale") sc.time_scale = number<double>(a, value());
      else if (a == "--step-ms") sc.step_ms = number<double>(a, value());
      else if (a == "--token-us") sc.token_us = number<double>(a, value());
      else if (a == "--seed") sc.seed = number<uint64_t>(a, value());
      else if (a == "--num-compute-units") compute_units = number<int32_t>(a, value());
      else if (a == "--series") series_path = value();
      else if (a == "--dump-steps") dump_path = value();
      else if (a == "--contract") {
        const std::string name = value();
        if (!idxplan::contract_from_name(name, contract)) {
          throw std::invalid_argument("--contract takes gluon_mxfp4, flydsl_fp4 or deepgemm_sm90, not " + name);
        }
      }
      else if (a == "--failed-step") failed_path = value();
      else if (a == "--capture-sizes") {
        sc.capture_sizes.clear();
        std::stringstream list(value());
        for (std::string item; std::getline(list, item, ',');) {
          sc.capture_sizes.push_back(number<int32_t>(a, item));
        }
      } else if (input.empty() && (a == "-" || a.empty() || a[0] != '-')) {
        input = a;
      } else {
        throw std::invalid_argument(fmt::format("unexpected argument \"{}\"", a));
      }
    }
    if (input.empty()) throw std::invalid_argument("replay needs a trace (a file, or - for stdin)");
    if (options.check_every < 1) throw std::invalid_argument("--check-every takes 1 or more");
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "idxplan replay: %s\n%s", e.what(), kReplayUsage);
    return kReplayUsageExit;
  }

  try {
    std::vector<TraceRequest> trace;
    if (input == "-") {
      trace = read_trace(std::cin, limit);
    } else {
      std::ifstream file(input);
      if (!file) throw std::invalid_argument("cannot read " + input);
      trace = read_trace(file, limit);
    }
    const bool deepgemm = contract == idxplan::Contract::deepgemm_sm90;
    idxplan::IndexerConfig config =
        idxplan::deepseek_v41_config(compute_units.value_or(deepgemm ? 132 : 256));
    config.max_num_seqs = sc.max_num_seqs;
    config.max_num_batched_tokens = sc.max_num_batched_tokens;
    config.num_speculative_tokens = sc.num_speculative_tokens;
    config.contract = contract;
    if (deepgemm) config.block_size = idxplan::deepgemm_sm90::kBlockKv * config.compress_ratio;
    const idxplan::Geometry geometry = idxplan::make_geometry(config);
    std::ofstream dump;
    if (!dump_path.empty()) {
      dump.open(dump_path);
      if (!dump) throw std::invalid_argument("cannot write " + dump_path);
      options.dump = &dump;
    }
    std::unique_ptr<StepHook> hook = make_hook ? make_hook(geometry) : nullptr;
    options.hook = hook.get();
    const ReplayReport report = replay(geometry, trace, sc, options);
    json out = report.to_json();
    if (hook) out["device"] = hook->summary();
    if (as_json) {
      std::cout << out.dump(1) << '\n';
    } else {
      std::fputs(report_text(report).c_str(), stdout);
      if (hook) std::fputs(hook->summary_text().c_str(), stdout);
    }
    if (!series_path.empty()) {
      std::ofstream series(series_path);
      series << report.series.dump() << '\n';
      if (!series) throw std::invalid_argument("cannot write " + series_path);
    }
  } catch (const ReplayFailure& e) {
    std::fprintf(stderr, "idxplan replay: %s\n", e.what());
    if (failed_path.empty()) {
      std::fprintf(stderr, "the step, as `idxplan plan` reads it:\n%s\n", e.step.dump().c_str());
    } else {
      std::ofstream(failed_path) << e.step.dump() << '\n';
      std::fprintf(stderr, "the step is in %s: idxplan plan %s replays it\n", failed_path.c_str(),
                   failed_path.c_str());
    }
    return 1;
  } catch (const idxplan::ConfigError& e) {
    std::fprintf(stderr, "idxplan replay: bad config: %s\n", e.what());
    return kReplayInputExit;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "idxplan replay: %s\n", e.what());
    return kReplayInputExit;
  }
  return 0;
}

}  // namespace idxplan::tool
