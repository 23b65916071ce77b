// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// Builds the prepare kernel through idxplan::hip or idxplan::cuda, and runs
// one step where a GPU is present.
#include <cstdio>
#include <vector>

#include <idxplan/device/prepare_step.hpp>
#include <idxplan/device/step_buffers.hpp>
#include <idxplan/idxplan.hpp>

int main() {
  namespace dev = idxplan::device;
  const idxplan::Geometry geometry = idxplan::make_geometry(idxplan::deepseek_v41_config(256));
  const std::vector<int> qsl{0, 2, 4, 8196};
  const std::vector<int> seq_lens{9000, 120000, 300000};
  const idxplan::StepPlan plan = idxplan::plan_step(geometry, qsl, seq_lens);
  if (dev::device_count() == 0) {
    std::printf("consumer: built the prepare kernel; no GPU here to run it\n");
    return 0;
  }
  const dev::StepBuffers buffers(geometry);
  dev::DeviceArray<int32_t> d_qsl(qsl.size()), d_lens(seq_lens.size()),
      d_table(3 * static_cast<std::size_t>(geometry.max_blocks_per_seq()));
  dev::check(dev::rt::memcpy_to_device(d_qsl.data(), qsl.data(), qsl.size() * 4), "qsl");
  dev::check(dev::rt::memcpy_to_device(d_lens.data(), seq_lens.data(), seq_lens.size() * 4), "lens");
  const idxplan::StepInputs in = idxplan::make_step_inputs(d_lens, d_qsl, d_table, geometry.max_blocks_per_seq());
  dev::enqueue(geometry, plan, in, buffers.outputs(), nullptr);
  dev::check(dev::rt::synchronize(), "synchronize");
  std::printf("consumer: ran one step on the GPU\n");
  return 0;
}
