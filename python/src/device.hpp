// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The module's device part, built by nvcc or hipcc into the extension when
// IDXPLAN_CUDA or IDXPLAN_HIP is on. Plain C++ on both sides, so the GPU
// compiler never sees pybind11.

#include <cstdint>

#include "idxplan/config.hpp"
#include "idxplan/plan/buffers.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan::python {

// "cuda" or "hip": the runtime the module's device part was built for.
const char* device_platform();
// GPUs the runtime sees; 0 without one.
int device_count();
// The current GPU's compute units, for IndexerConfig.num_compute_units.
int32_t compute_units();
// device::enqueue on the stream whose handle is `stream` (0: the default).
void enqueue(const Geometry& g, const StepPlan& plan, const StepInputs& in, const StepOutputs& out,
             std::uintptr_t stream);
// One launch of an empty kernel on `stream`: the floor of any call that
// launches once (the benchmarks time build() against it).
void launch_empty(std::uintptr_t stream);

}  // namespace idxplan::python
