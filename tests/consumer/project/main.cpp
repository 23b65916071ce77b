// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// Plans the design's example step and checks what an engine would read;
// with CONSUMER_JSON (idxplan::json), also the plan's JSON.
#include <cstdio>
#include <vector>

#include <fmt/format.h>
#include <idxplan/idxplan.hpp>
#ifdef CONSUMER_JSON
#include <idxplan/json.hpp>
#endif

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
  bool ok = plan.num_decodes == 2 && plan.decode.native.next_n == 2 &&
            plan.prefill.size() == 5 && plan.gather_launches.size() == 1;
#ifdef CONSUMER_JSON
  const nlohmann::json request = {{"config", idxplan::config_to_json(config)},
                                  {"step", {{"query_start_loc", qsl}, {"seq_lens", seq_lens}}}};
  idxplan::PlannedStep planned = idxplan::plan_request(idxplan::parse_step_request(request));
  const nlohmann::json out = idxplan::plan_to_json(planned);
  ok = ok && planned.plan == plan && out.at("num_decodes") == 2 && out.at("prefill").size() == 5 &&
       out.at("gather_launches").size() == 1;
#endif
  fmt::print("consumer: {}\n", ok ? "plan as expected" : "unexpected plan");
  return ok ? 0 : 1;
}
