// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// A block of the prepare launch (prepare_step.hpp): its threads, their
// primitives, and the launch's chunk groups staged in shared memory, which
// the kernel and each contract's device writer (contracts/*_device.hpp)
// share.

#include <cstdint>

#include "idxplan/device/runtime.hpp"
#include "idxplan/device/scan.hpp"
#include "idxplan/plan/step_args.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan::device {

// Threads a block of the prepare launch.
inline constexpr int kPrepareThreads = 256;

namespace detail {

using Primitives = BlockPrimitives<kPrepareThreads>;

// Words of one chunk group, and the shared memory that holds a launch's.
inline constexpr int kGroupWords = sizeof(ChunkGroup) / sizeof(int32_t);
using GroupWords = int32_t[kMaxLaunchGroups * kGroupWords];

// The launch's chunk groups copied from the kernel arguments into `words`
// (shared memory) by the block, for code that searches them: indexing the
// arguments themselves would copy the whole StepArgs to local memory.
__device__ inline const ChunkGroup* stage_groups(const StepArgs& a, GroupWords& words) {
  for (int i = static_cast<int>(threadIdx.x); i < a.num_groups * kGroupWords; i += kPrepareThreads) {
    words[i] = reinterpret_cast<const int32_t*>(a.groups)[i];
  }
  __syncthreads();
  return reinterpret_cast<const ChunkGroup*>(words);
}

}  // namespace detail

}  // namespace idxplan::device
