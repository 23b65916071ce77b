// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// libFuzzer harness for the idxplan command's JSON: any text is parsed, read
// as a step, planned, filled by the CPU reference and written back out, as
// `idxplan plan --json` does. Bad input must end in one of the errors the
// command reports (json::exception, ConfigError, StepError), never a crash.

#include <cstddef>
#include <cstdint>
#include <string>

#include "idxplan/json.hpp"

namespace {

// Steps whose zero block table the command would allocate past the fuzzer's
// memory (a huge config's block table, many requests) are read and checked,
// then not planned.
constexpr int64_t kMaxTableWords = int64_t{1} << 24;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using nlohmann::json;
  try {
    const json input = json::parse(std::string(reinterpret_cast<const char*>(data), size));
    const idxplan::StepRequest request = idxplan::parse_step_request(input);
    const idxplan::Geometry g = idxplan::make_geometry(request.config);
    const int64_t reqs = static_cast<int64_t>(request.seq_lens.size());
    if (reqs * g.max_blocks_per_seq() > kMaxTableWords ||
        int64_t{g.max_decode_rows()} * g.max_blocks_per_seq() > kMaxTableWords) {
      return 0;
    }
    idxplan::PlannedStep planned = idxplan::plan_request(request);
    const std::string out = idxplan::plan_to_json(planned).dump();
    if (out.empty()) __builtin_trap();
  } catch (const json::exception&) {
  } catch (const idxplan::ConfigError&) {
  } catch (const idxplan::StepError&) {
  }
  return 0;
}
