// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// A step on the device: its inputs uploaded, its buffers poisoned, the kernel
// run, and every word the CPU reference writes compared with the device's.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "idxplan/device/prepare_step.hpp"
#include "idxplan/device/step_buffers.hpp"
#include "test_support.hpp"

namespace idxplan::test {

// Poison for both sides: a word either side skips shows as a mismatch.
inline constexpr int32_t kPoisonByte = 0xA5;
inline constexpr int32_t kPoison = static_cast<int32_t>(0xA5A5A5A5u);

template <class T>
device::DeviceArray<T> upload(const std::vector<T>& host) {
  device::DeviceArray<T> d(std::max<std::size_t>(host.size(), 1));
  if (!host.empty()) {
    device::check(device::rt::memcpy_to_device(d.data(), host.data(), host.size() * sizeof(T)), "upload");
  }
  return d;
}

struct DeviceInputs {
  device::DeviceArray<int32_t> query_start_loc, seq_lens, block_table;
  int32_t stride = 0;

  DeviceInputs(const std::vector<int32_t>& qsl, const std::vector<int32_t>& lens,
               const std::vector<int32_t>& table, int32_t table_stride)
      : query_start_loc(upload(qsl)), seq_lens(upload(lens)), block_table(upload(table)),
        stride(table_stride) {}
  StepInputs inputs() const {
    return make_step_inputs(seq_lens, query_start_loc, block_table, stride);
  }
};

// The words of each buffer a step writes, and one past where it may not.
struct Extent {
  int32_t* host;
  int32_t* device;
  int64_t words;     // compared
  int64_t capacity;  // the buffer's size
};

inline std::vector<Extent> step_extents(const StepPlan& p, HostBuffers& h, const StepOutputs& d,
                                        const StepBufferSizes& s) {
  auto extent = [](int32_t* host, const OutputBuffer& dev, int64_t used, int64_t capacity) {
    return Extent{host, dev.data, std::min(used + 4, capacity), capacity};
  };
  return {extent(h.context_lens.data(), d.context_lens, p.num_reqs, s.context_lens),
          extent(h.decode_row_lens.data(), d.decode_row_lens, p.decode.num_rows, s.decode_rows),
          extent(h.decode_block_ends.data(), d.decode_block_ends, p.decode.num_rows, s.decode_rows),
          extent(h.decode_block_table.data(), d.decode_block_table,
                 int64_t{p.decode.num_rows} * d.decode_block_table_stride, s.decode_block_table),
          extent(h.prefill_row_ends.data(), d.prefill_row_ends, p.num_prefill_tokens, s.prefill_rows),
          extent(h.prefill_block_ends.data(), d.prefill_block_ends, p.num_prefill_tokens, s.prefill_rows),
          extent(h.prefill_query_start_loc.data(), d.prefill_query_start_loc,
                 p.num_prefill_query_start_loc_words, s.prefill_query_start_loc),
          extent(h.decode_schedule.data(), d.decode_schedule, step_buffer_sizes(p).decode_schedule,
                 s.decode_schedule),
          // Empty unless the step asked for its key bounds.
          extent(h.prefill_key_starts.data(), d.prefill_key_starts,
                 d.prefill_key_starts.data != nullptr ? p.num_prefill_tokens : -4, s.prefill_rows),
          extent(h.prefill_key_ends.data(), d.prefill_key_ends,
                 d.prefill_key_ends.data != nullptr ? p.num_prefill_tokens : -4, s.prefill_rows),
          // flydsl_fp4's grids; empty under gluon_mxfp4.
          extent(h.prefill_schedule.data(), d.prefill_schedule, p.num_prefill_schedule_words, s.prefill_schedule),
          extent(h.schedule_safe.data(), d.schedule_safe, p.num_schedule_safe_words, s.schedule_safe)};
}

inline const char* kBufferNames[] = {"context_lens",       "decode_row_lens",  "decode_block_ends",
                                     "decode_block_table", "prefill_row_ends", "prefill_block_ends",
                                     "prefill_query_start_loc", "decode_schedule", "prefill_key_starts",
                                     "prefill_key_ends", "prefill_schedule", "schedule_safe"};

// Poisons what the step may write, on both sides.
inline void poison(const std::vector<Extent>& extents, device::Stream stream) {
  for (const Extent& e : extents) {
    if (e.words == 0) continue;
    std::fill(e.host, e.host + e.words, kPoison);
    device::check(device::rt::memset_async(e.device, kPoisonByte,
                                           static_cast<std::size_t>(e.words) * sizeof(int32_t), stream),
                  "poison");
  }
}

// The first word where device and host differ, as a message; empty if none.
inline std::string compare(const std::vector<Extent>& extents) {
  std::vector<int32_t> got;
  for (std::size_t b = 0; b < extents.size(); ++b) {
    const Extent& e = extents[b];
    if (e.words == 0) continue;
    got.resize(static_cast<std::size_t>(e.words));
    device::check(device::rt::memcpy_to_host(got.data(), e.device, got.size() * sizeof(int32_t)),
                  "download");
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (got[i] != e.host[i]) {
        return fmt::format("{}[{}]: device {} != reference {}", kBufferNames[b], i, got[i], e.host[i]);
      }
    }
  }
  return {};
}

}  // namespace idxplan::test
