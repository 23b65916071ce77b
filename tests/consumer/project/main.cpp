// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// Plans the design's example step and checks what an engine would read.
#include <cstdio>
#include <vector>

#include <fmt/format.h>
#include <idxplan/idxplan.hpp>

// idxplan::idxplan leaves the choice of fmt to its consumer.
#ifdef FMT_HEADER_ONLY
#error "idxplan forced FMT_HEADER_ONLY on a consumer of the fmt library"
#endif

int main() {
  const idxplan::IndexerConfig config = idxplan::deepseek_v41_config(256);
  const idxplan::Geometry geometry = idxplan::make_geometry(config);
  const std::vector<int> qsl{0, 2, 4, 8196};
  const std::vector<int> seq_lens{9000, 120000, 300000};
  const idxplan::StepPlan plan = idxplan::plan_step(geometry, qsl, seq_lens);
  const bool ok = plan.num_decodes == 2 && plan.decode.native.next_n == 2 &&
                  plan.prefill.size() == 5 && plan.gather_launches.size() == 1;
  fmt::print("consumer: {}\n", ok ? "plan as expected" : "unexpected plan");
  return ok ? 0 : 1;
}
