// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// A convenience for engines that let idxplan own the step buffers: each
// allocated once, at engine start, at step_buffer_sizes' words, with the
// runtime's own allocator. Engines that own their memory (a torch tensor, a
// pool) make StepOutputs themselves instead. Pointers never change, so the
// engine's graphs can capture them.

#include <cstddef>
#include <cstdint>

#include "idxplan/config.hpp"
#include "idxplan/device/runtime.hpp"
#include "idxplan/plan/step_io.hpp"

namespace idxplan::device {

class StepBuffers {
 public:
  explicit StepBuffers(const Geometry& g)
      : sizes_(step_buffer_sizes(g)),
        stride_(g.max_blocks_per_seq()),
        context_lens_(words(sizes_.context_lens)),
        decode_row_lens_(words(sizes_.decode_rows)),
        decode_block_ends_(words(sizes_.decode_rows)),
        decode_block_table_(words(sizes_.decode_block_table)),
        prefill_row_ends_(words(sizes_.prefill_rows)),
        prefill_block_ends_(words(sizes_.prefill_rows)),
        prefill_query_start_loc_(words(sizes_.prefill_query_start_loc)),
        decode_schedule_(words(sizes_.decode_schedule)),
        prefill_key_starts_(words(sizes_.prefill_rows)),
        prefill_key_ends_(words(sizes_.prefill_rows)),
        prefill_schedule_(words(sizes_.prefill_schedule)),
        schedule_safe_(words(sizes_.schedule_safe)) {}

  // The buffers as a step's outputs, for enqueue() and the launch views; the
  // key bounds' only when asked.
  StepOutputs outputs(bool always_write_decode_block_table = false, bool key_bounds = false) const {
    StepOutputs out;
    out.context_lens = buffer(context_lens_);
    out.decode_row_lens = buffer(decode_row_lens_);
    out.decode_block_ends = buffer(decode_block_ends_);
    out.decode_block_table = buffer(decode_block_table_);
    out.prefill_row_ends = buffer(prefill_row_ends_);
    out.prefill_block_ends = buffer(prefill_block_ends_);
    out.prefill_query_start_loc = buffer(prefill_query_start_loc_);
    out.decode_schedule = buffer(decode_schedule_);
    if (prefill_schedule_.size() > 0) out.prefill_schedule = buffer(prefill_schedule_);
    if (schedule_safe_.size() > 0) out.schedule_safe = buffer(schedule_safe_);
    if (key_bounds) {
      out.prefill_key_starts = buffer(prefill_key_starts_);
      out.prefill_key_ends = buffer(prefill_key_ends_);
    }
    out.decode_block_table_stride = stride_;
    out.always_write_decode_block_table = always_write_decode_block_table;
    return out;
  }
  const StepBufferSizes& sizes() const { return sizes_; }

 private:
  static std::size_t words(int64_t n) { return static_cast<std::size_t>(n); }
  static OutputBuffer buffer(const DeviceArray<int32_t>& a) {
    return OutputBuffer{a.data(), static_cast<int64_t>(a.size())};
  }

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
  DeviceArray<int32_t> prefill_key_starts_;
  DeviceArray<int32_t> prefill_key_ends_;
  DeviceArray<int32_t> prefill_schedule_;  // flydsl_fp4 only
  DeviceArray<int32_t> schedule_safe_;
};

}  // namespace idxplan::device
