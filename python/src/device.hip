// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// The Python module's device part: device::enqueue and the runtime queries,
// built by nvcc (CUDA) or hipcc (HIP).

#include "device.hpp"

#include "idxplan/device/prepare_step.hpp"
#include "idxplan/device/runtime.hpp"

namespace idxplan::python {

const char* device_platform() {
#if defined(__HIP_PLATFORM_AMD__)
  return "hip";
#else
  return "cuda";
#endif
}

int device_count() { return device::device_count(); }

int32_t compute_units() { return device::query_compute_units(); }

void enqueue(const Geometry& g, const StepPlan& plan, const StepInputs& in, const StepOutputs& out,
             std::uintptr_t stream) {
  device::enqueue(g, plan, in, out, reinterpret_cast<device::Stream>(stream));
}

}  // namespace idxplan::python
