// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The step buffers of DESIGN.md section 6, allocated once from a Geometry at
// engine start. Their pointers never change, so the engine's graphs can
// capture them.

#include <cstddef>
#include <cstdint>

#include "idxplan/config.hpp"
#include "idxplan/device/runtime.hpp"
#include "idxplan/plan/buffers.hpp"

namespace idxplan::device {

class StepBuffers {
 public:
  explicit StepBuffers(const Geometry& g)
      : sizes_(step_buffer_sizes(g)),
        stride_(g.max_blocks_per_seq),
        context_lens_(words(sizes_.context_lens)),
        decode_row_lens_(words(sizes_.decode_rows)),
        decode_block_ends_(words(sizes_.decode_rows)),
        decode_block_table_(words(sizes_.decode_block_table)),
        prefill_row_ends_(words(sizes_.prefill_rows)),
        prefill_block_ends_(words(sizes_.prefill_rows)),
        prefill_query_start_loc_(words(sizes_.prefill_query_start_loc)),
        decode_schedule_(words(sizes_.decode_schedule)),
        max_blocks_(4 * query_compute_units()) {}

  // The pointers the kernel writes through and the consumers read.
  StepOutputs outputs() const {
    return StepOutputs{context_lens_.data(),           decode_row_lens_.data(),
                       decode_block_ends_.data(),      decode_block_table_.data(),
                       prefill_row_ends_.data(),       prefill_block_ends_.data(),
                       prefill_query_start_loc_.data(), decode_schedule_.data(), stride_};
  }
  const StepBufferSizes& sizes() const { return sizes_; }
  // Blocks a launch spreads its per-index work over: four a CU of the GPU
  // the buffers live on (not the planned target's CU count).
  int32_t max_blocks() const { return max_blocks_; }

 private:
  static std::size_t words(int64_t n) { return static_cast<std::size_t>(n); }

  StepBufferSizes sizes_;
  int32_t stride_;
  DeviceArray<int32_t> context_lens_;
  DeviceArray<int32_t> decode_row_lens_;
  DeviceArray<int32_t> decode_block_ends_;
  DeviceArray<int32_t> decode_block_table_;
  DeviceArray<int32_t> prefill_row_ends_;
  DeviceArray<int32_t> prefill_block_ends_;
  DeviceArray<int32_t> prefill_query_start_loc_;
  DeviceArray<int32_t> decode_schedule_;
  int32_t max_blocks_;
};

}  // namespace idxplan::device
