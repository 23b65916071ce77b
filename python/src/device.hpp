// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The module's device part, built by nvcc or hipcc into the extension when
// IDXPLAN_CUDA or IDXPLAN_HIP is on. Plain C++ on both sides, so the GPU
// compiler never sees pybind11.

#include <cstdint>

#include "idxplan/config.hpp"
#include "idxplan/contracts/deepgemm_sm90.hpp"
#include "idxplan/contracts/flydsl_fp4.hpp"
#include "idxplan/plan/buffers.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan::python {

// "cuda" or "hip": the runtime the module's device part was built for.
const char* device_platform();
// GPUs the runtime sees; 0 without one.
int device_count();
// The current GPU's compute units, for IndexerConfig.num_compute_units.
int32_t compute_units();
// The current GPU's index.
int current_device();
// device::enqueue on the stream whose handle is `stream` (0: the default).
void enqueue(const Geometry& g, const StepPlan& plan, const StepInputs& in, const StepOutputs& out,
             std::uintptr_t stream);
// One launch of an empty kernel on `stream`: the floor of any call that
// launches once (the benchmarks time build() against it).
void launch_empty(std::uintptr_t stream);
// The flydsl_fp4 schedules' one launch each on `stream` (idxplan.aiter).
void enqueue_varctx_schedule(const flydsl_fp4::VarctxShape& s, const int32_t* context_lens, int32_t* cta_info,
                             int32_t* safe, std::uintptr_t stream);
void enqueue_prefill_schedule(const flydsl_fp4::PrefillShape& s, const int32_t* row_to_batch,
                              const int32_t* local_starts, const int32_t* local_ends, int32_t* cta_info,
                              int32_t* safe, std::uintptr_t stream);
// The deepgemm_sm90 metadata's one launch on `stream` (idxplan.deepgemm).
void enqueue_deepgemm_metadata(const deepgemm_sm90::MetadataShape& s, const int32_t* context_lens, int32_t* out,
                               std::uintptr_t stream);

}  // namespace idxplan::python
