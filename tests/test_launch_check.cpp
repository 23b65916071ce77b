// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/plan/launch_check.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "idxplan/plan/buffers.hpp"
#include "idxplan/plan/step.hpp"
#include "test_support.hpp"

namespace idxplan {
namespace {

using Words = std::vector<int32_t>;

TEST(LaunchBoundViolation, NamesTheFirstViewThatReadsPastItsPlan) {
  IndexerConfig c = test::deepseek_config();
  c.max_logits_mb = 1;
  const Geometry g = make_geometry(c);
  // Two native MTP decodes (bound 4,000 tokens: 1,000 keys), then a prefill
  // of 400 tokens alone in its chunk (width 100).
  const Words qsl{0, 2, 4, 14};
  const Words lens{4000, 3000, 400};
  const StepPlan plan = plan_step(g, qsl, lens);
  const int32_t stride = g.max_blocks_per_seq();
  const Words table(3 * static_cast<std::size_t>(stride), 1);
  test::HostBuffers host(g);
  const StepInputs in = make_step_inputs(lens, qsl, table, stride);
  fill_step_buffers(g, plan, in, host.outputs());
  EXPECT_EQ(launch_bound_violation(g, plan, in, host.outputs()), "");

  host.prefill_row_ends[3] = 101;
  EXPECT_EQ(launch_bound_violation(g, plan, in, host.outputs()),
            "prefill chunk 0 (width 100): row_ends[3]=101 is outside [0, 100]");
  fill_step_buffers(g, plan, in, host.outputs());
  host.prefill_block_ends[0] += 1;
  EXPECT_NE(launch_bound_violation(g, plan, in, host.outputs()).find("has a block end of"), std::string::npos);
  fill_step_buffers(g, plan, in, host.outputs());
  host.context_lens[1] = 1001;
  EXPECT_EQ(launch_bound_violation(g, plan, in, host.outputs()),
            "decode context_lens[1]=1001 is outside [0, 1000]");
}

}  // namespace
}  // namespace idxplan
