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

namespace {
__global__ void empty_kernel() {}
}  // namespace

void launch_empty(std::uintptr_t stream) {
  IDXPLAN_KERNEL_LAUNCH(empty_kernel, 1, 1, 0, reinterpret_cast<device::Stream>(stream))();
  device::check(device::rt::last_error(), "empty_kernel launch");
}

}  // namespace idxplan::python
