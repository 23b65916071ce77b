// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// The Python module's device part: device::enqueue and the runtime queries,
// built by nvcc (CUDA) or hipcc (HIP).

#include "device.hpp"

#include "idxplan/contracts/deepgemm_sm90_device.hpp"
#include "idxplan/contracts/flydsl_fp4_device.hpp"
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

int current_device() {
  int device = 0;
  device::check(device::rt::get_device(&device), "get_device");
  return device;
}

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

void enqueue_varctx_schedule(const flydsl_fp4::VarctxShape& s, const int32_t* context_lens, int32_t* cta_info,
                             int32_t* safe, std::uintptr_t stream) {
  flydsl_fp4::enqueue_varctx_schedule(s, context_lens, cta_info, safe, reinterpret_cast<device::Stream>(stream));
}

void enqueue_prefill_schedule(const flydsl_fp4::PrefillShape& s, const int32_t* row_to_batch,
                              const int32_t* local_starts, const int32_t* local_ends, int32_t* cta_info,
                              int32_t* safe, std::uintptr_t stream) {
  flydsl_fp4::enqueue_prefill_schedule(s, row_to_batch, local_starts, local_ends, cta_info, safe,
                                       reinterpret_cast<device::Stream>(stream));
}

void enqueue_deepgemm_metadata(const deepgemm_sm90::MetadataShape& s, const int32_t* context_lens, int32_t* out,
                               std::uintptr_t stream) {
  deepgemm_sm90::enqueue_metadata(s, context_lens, out, reinterpret_cast<device::Stream>(stream));
}

}  // namespace idxplan::python
