// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// idxplan_replay_device TRACE|- [flags]: `idxplan replay` with the prepare
// launch on the GPU (docs/replay.md): each step enqueued on the engine's
// inputs and buffers, the kernel's GPU time a step taken from events around
// it, and on every checked step (--check-every N) each buffer the step
// writes compared with the CPU reference's, word for word.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "idxplan/device/prepare_step.hpp"
#include "idxplan/device/step_buffers.hpp"
#include "replay_cli.hpp"

namespace {

using namespace idxplan;
using idxplan::tool::json;

// Holds the stream for about `cycles` GPU cycles, so that the events and the
// launch enqueued after it are all queued when the GPU reaches them: the
// events then time the kernel on the GPU, not the host's launch latency.
__global__ void hold(int64_t cycles) {
  const int64_t start = clock64();
  while (clock64() - start < cycles) {
  }
}

// The floor the same timing gives any launch.
__global__ void empty_kernel() {}

class DeviceHook : public tool::StepHook {
 public:
  explicit DeviceHook(const Geometry& g)
      : g_(g), buffers_(g), outputs_(buffers_.outputs()), stride_(g.max_blocks_per_seq()),
        seq_lens_(static_cast<std::size_t>(g.config().max_num_seqs)),
        query_start_loc_(static_cast<std::size_t>(g.config().max_num_seqs) + 1),
        block_table_(static_cast<std::size_t>(g.config().max_num_seqs) * static_cast<std::size_t>(stride_)) {
    check_step_outputs(g, outputs_);
    // The same page ids as the host replay's table.
    std::vector<int32_t> table(block_table_.size());
    for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i % 1000003);
    device::check(device::rt::memcpy_to_device(block_table_.data(), table.data(), table.size() * 4), "table");
    device::check(device::rt::stream_create(&stream_), "stream_create");
    device::check(device::rt::event_create(&start_), "event_create");
    device::check(device::rt::event_create(&stop_), "event_create");
    std::vector<double> floor;
    for (int i = 0; i < 200; ++i) {
      floor.push_back(timed([&] { IDXPLAN_KERNEL_LAUNCH(empty_kernel, 1, 1, 0, stream_)(); }));
    }
    empty_us_ = tool::Spread::of(floor).p50;
  }
  ~DeviceHook() override {
    (void)device::rt::event_destroy(start_);
    (void)device::rt::event_destroy(stop_);
    (void)device::rt::stream_destroy(stream_);
  }

  void run(const StepPlan& plan, const tool::Step& step, const HostStepBuffers* host) override {
    const std::size_t reqs = step.seq_lens.size();
    device::check(device::rt::memcpy_to_device(query_start_loc_.data(), step.query_start_loc.data(),
                                               (reqs + 1) * 4), "query_start_loc");
    if (reqs > 0) {
      device::check(device::rt::memcpy_to_device(seq_lens_.data(), step.seq_lens.data(), reqs * 4), "seq_lens");
    }
    StepInputs in;
    in.seq_lens = seq_lens_.data();
    in.num_seq_lens = static_cast<int64_t>(reqs);
    in.query_start_loc = query_start_loc_.data();
    in.num_query_start_loc = static_cast<int64_t>(reqs) + 1;
    in.block_table = block_table_.data();
    in.block_table_rows = static_cast<int64_t>(reqs);
    in.block_table_cols = in.block_table_stride = stride_;
    kernel_us_.push_back(timed([&] { device::enqueue(g_, plan, in, outputs_, stream_); }));
    if (host != nullptr) {
      compare(plan, *host);
      ++compared_;
    }
  }

  json summary() const override {
    const tool::Spread t = tool::Spread::of(kernel_us_);
    return {{"steps", kernel_us_.size()}, {"compared", compared_}, {"prepare_us", t.to_json()},
            {"empty_kernel_us", empty_us_}};
  }
  std::string summary_text() const override {
    const tool::Spread t = tool::Spread::of(kernel_us_);
    return fmt::format("device: {} steps enqueued, {} compared word for word with the CPU reference\n"
                       "prepare kernel a step (GPU time, events around its launch queued behind a hold): "
                       "p50 {:.2f} us, p99 {:.2f} us, p99.9 {:.2f} us, max {:.2f} us (an empty kernel "
                       "timed so: {:.2f} us)\n",
                       kernel_us_.size(), compared_, t.p50, t.p99, t.p999, t.max, empty_us_);
  }

 private:
  // GPU microseconds of what `launch` enqueues, timed by events with the
  // launch queued behind a hold.
  template <class F>
  double timed(F&& launch) {
    IDXPLAN_KERNEL_LAUNCH(hold, 1, 1, 0, stream_)(kHoldCycles);
    device::check(device::rt::event_record(start_, stream_), "event_record");
    launch();
    device::check(device::rt::event_record(stop_, stream_), "event_record");
    device::check(device::rt::stream_synchronize(stream_), "stream_synchronize");
    float ms = 0;
    device::check(device::rt::event_elapsed_ms(&ms, start_, stop_), "event_elapsed");
    return 1000.0 * ms;
  }

  // Every word the step wrote, on both sides.
  void compare(const StepPlan& plan, const HostStepBuffers& host) {
    const StepBufferSizes used = step_buffer_sizes(plan);
    const bool table = writes_decode_block_table(plan, outputs_);
    const struct {
      const char* name;
      const int32_t* device;
      const std::vector<int32_t>& host;
      int64_t words;
    } buffers[] = {
        {"context_lens", outputs_.context_lens.data, host.context_lens, used.context_lens},
        {"decode_row_lens", outputs_.decode_row_lens.data, host.decode_row_lens, used.decode_rows},
        {"decode_block_ends", outputs_.decode_block_ends.data, host.decode_block_ends, used.decode_rows},
        {"decode_block_table", outputs_.decode_block_table.data, host.decode_block_table,
         table ? int64_t{used.decode_rows} * stride_ : 0},  // a row's first num_block_cols words
        {"prefill_row_ends", outputs_.prefill_row_ends.data, host.prefill_row_ends, used.prefill_rows},
        {"prefill_block_ends", outputs_.prefill_block_ends.data, host.prefill_block_ends, used.prefill_rows},
        {"prefill_query_start_loc", outputs_.prefill_query_start_loc.data, host.prefill_query_start_loc,
         used.prefill_query_start_loc},
        {"decode_schedule", outputs_.decode_schedule.data, host.decode_schedule, used.decode_schedule},
        {"prefill_schedule", outputs_.prefill_schedule.data, host.prefill_schedule, used.prefill_schedule},
        {"schedule_safe", outputs_.schedule_safe.data, host.schedule_safe, used.schedule_safe},
    };
    for (const auto& b : buffers) {
      got_.resize(static_cast<std::size_t>(b.words));
      if (b.words == 0) continue;
      device::check(device::rt::memcpy_to_host(got_.data(), b.device, got_.size() * 4), "download");
      const bool rows = b.device == outputs_.decode_block_table.data;
      for (std::size_t i = 0; i < got_.size(); ++i) {
        if (rows && static_cast<int32_t>(i % static_cast<std::size_t>(stride_)) >= plan.decode.num_block_cols) continue;
        // A prefill-only step writes no decode grid's `safe`.
        if (b.device == outputs_.schedule_safe.data && i == 0 && !plan.decode.grid.present()) continue;
        if (got_[i] != b.host[i]) {
          throw std::runtime_error(fmt::format("device {}[{}]={} but the CPU reference wrote {}", b.name, i,
                                               got_[i], b.host[i]));
        }
      }
    }
  }

  static constexpr int64_t kHoldCycles = 100000;  // about 50 us: longer than a launch takes
  Geometry g_;
  device::StepBuffers buffers_;
  StepOutputs outputs_;
  int32_t stride_;
  device::DeviceArray<int32_t> seq_lens_, query_start_loc_, block_table_;
  device::Stream stream_ = nullptr;
  device::rt::Event start_ = nullptr, stop_ = nullptr;
  std::vector<double> kernel_us_;
  double empty_us_ = 0;
  std::vector<int32_t> got_;
  int64_t compared_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  args[0] = "replay";
  if (device::device_count() == 0) {
    std::fprintf(stderr, "idxplan_replay_device: no GPU here\n");
    return 1;
  }
  try {
    return tool::replay_main(args, [](const Geometry& g) { return std::make_unique<DeviceHook>(g); });
  } catch (const DeviceError& e) {
    std::fprintf(stderr, "idxplan_replay_device: %s\n", e.what());
    return 1;
  }
}
