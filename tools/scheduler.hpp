// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The scheduler model of `idxplan replay` (docs/replay.md): Mooncake-format
// requests turned into the steps a vLLM-like scheduler runs, one at a time.
// Deterministic for a seed. What it leaves out is in docs/replay.md.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace idxplan::tool {

// One line of a Mooncake trace.
struct TraceRequest {
  int64_t timestamp_ms = 0;
  int32_t input_length = 0;
  int32_t output_length = 0;
  std::vector<int64_t> hash_ids;  // the prompt's 512-token blocks
};

// The knobs, each with vLLM's default where vLLM has one.
struct SchedulerConfig {
  int32_t max_num_batched_tokens = 8192;  // vLLM's online-serving default
  int32_t max_num_seqs = 256;
  int32_t num_speculative_tokens = 1;     // DeepSeek's MTP
  double acceptance = 0.8;                // chance each draft token is accepted
  bool prefix_cache = true;
  int64_t prefix_cache_blocks = 200000;   // 512-token blocks the cache holds
  int32_t block_tokens = 512;             // Mooncake's hash block
  std::vector<int32_t> capture_sizes = default_capture_sizes();  // decode-only padding
  double time_scale = 1.0;                // arrivals at timestamp / time_scale
  double step_ms = 20.0;                  // a step's time: step_ms + token_us a token
  double token_us = 30.0;
  uint64_t seed = 1;

  // vLLM's default CUDA-graph capture sizes: 1, 2, 4, then every 8 to 256,
  // then every 16 to 512.
  static std::vector<int32_t> default_capture_sizes() {
    std::vector<int32_t> sizes{1, 2, 4};
    for (int32_t s = 8; s < 256; s += 8) sizes.push_back(s);
    for (int32_t s = 256; s <= 512; s += 16) sizes.push_back(s);
    return sizes;
  }
};

// One scheduled request of a step, in batch order.
struct ScheduledRequest {
  int32_t request = 0;  // index in the trace
  int32_t query = 0;    // tokens this step
  int32_t seq_len = 0;  // context after this step's tokens
  bool decoding = false;
};

// A step as the engine hands it to plan_step.
struct Step {
  int64_t index = 0;
  double time_ms = 0;
  std::vector<ScheduledRequest> batch;  // decodes (query <= threshold) first
  std::vector<int32_t> query_start_loc;
  std::vector<int32_t> seq_lens;
  int64_t num_tokens = 0;               // padded for a decode-only step
};

// An LRU cache of prompt blocks by hash id.
class PrefixCache {
 public:
  explicit PrefixCache(int64_t capacity) : capacity_(capacity) {}

  // Blocks of `ids` from the first that are cached, touching each.
  int64_t match(const std::vector<int64_t>& ids) {
    int64_t n = 0;
    for (const int64_t id : ids) {
      const auto it = where_.find(id);
      if (it == where_.end()) break;
      order_.splice(order_.begin(), order_, it->second);
      ++n;
    }
    return n;
  }
  void insert(const std::vector<int64_t>& ids) {
    for (const int64_t id : ids) {
      const auto it = where_.find(id);
      if (it != where_.end()) {
        order_.splice(order_.begin(), order_, it->second);
        continue;
      }
      order_.push_front(id);
      where_[id] = order_.begin();
      if (static_cast<int64_t>(order_.size()) > capacity_) {
        where_.erase(order_.back());
        order_.pop_back();
      }
    }
  }
  int64_t size() const { return static_cast<int64_t>(order_.size()); }

 private:
  int64_t capacity_;
  std::list<int64_t> order_;  // most recent first
  std::unordered_map<int64_t, std::list<int64_t>::iterator> where_;
};

class Scheduler {
 public:
  enum class Phase { waiting, prefilling, decoding, finished };

  // A request's progress.
  struct State {
    Phase phase = Phase::waiting;
    int32_t cached = 0;     // prompt tokens the prefix cache held at admission
    int32_t computed = 0;   // tokens in the KV cache (the cached prefix included)
    int32_t generated = 0;  // output tokens sampled
    int32_t prefilled = 0;  // prompt tokens computed by prefill steps
  };

  Scheduler(const std::vector<TraceRequest>& trace, SchedulerConfig config)
      : trace_(trace), config_(std::move(config)), cache_(config_.prefix_cache_blocks),
        state_(trace.size()), rng_(config_.seed) {
    if (config_.max_num_seqs <= 0 || config_.num_speculative_tokens < 0 || config_.time_scale <= 0 ||
        config_.block_tokens <= 0) {
      throw std::invalid_argument("replay: the scheduler's sizes and time scale must be positive");
    }
    if (config_.max_num_batched_tokens < 1 + config_.num_speculative_tokens) {
      throw std::invalid_argument(
          "replay: max_num_batched_tokens=" + std::to_string(config_.max_num_batched_tokens) +
          " cannot hold a decode's " + std::to_string(1 + config_.num_speculative_tokens) + " tokens");
    }
    std::sort(config_.capture_sizes.begin(), config_.capture_sizes.end());
    for (std::size_t i = 0; i < trace.size(); ++i) {
      if (i > 0 && trace[i].timestamp_ms < trace[i - 1].timestamp_ms) {
        throw std::invalid_argument("replay: request " + std::to_string(i) + " arrives before the one before it");
      }
      if (trace[i].input_length <= 0 || trace[i].output_length <= 0) {
        throw std::invalid_argument("replay: request " + std::to_string(i) +
                                    " has no prompt or no output tokens");
      }
    }
  }

  // The next step, or false once every request has finished.
  bool next(Step& step) {
    if (finished_ == trace_.size()) return false;
    // Nothing running and nothing arrived: the engine idles to the next arrival.
    if (running_.empty() && next_arrival_ < trace_.size() && arrival_ms(next_arrival_) > now_ms_) {
      now_ms_ = arrival_ms(next_arrival_);
    }
    step.index = steps_++;
    step.time_ms = now_ms_;
    step.batch.clear();
    int64_t budget = config_.max_num_batched_tokens;
    const int32_t decode_tokens = 1 + config_.num_speculative_tokens;
    // Running requests first, in admission order.
    for (const int32_t r : running_) {
      if (budget == 0) break;
      State& s = state_[static_cast<std::size_t>(r)];
      if (s.phase == Phase::decoding) {
        if (budget < decode_tokens) continue;
        step.batch.push_back({r, decode_tokens, s.computed + decode_tokens, true});
        budget -= decode_tokens;
      } else {
        const int32_t q = static_cast<int32_t>(std::min<int64_t>(input(r) - s.computed, budget));
        step.batch.push_back({r, q, s.computed + q, false});
        budget -= q;
      }
    }
    // Then waiting requests, first come first served, while budget and seats last.
    while (budget > 0 && next_arrival_ < trace_.size() && arrival_ms(next_arrival_) <= now_ms_ &&
           static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
      const auto r = static_cast<int32_t>(next_arrival_++);
      State& s = state_[static_cast<std::size_t>(r)];
      if (config_.prefix_cache) {
        const int64_t blocks = cache_.match(trace_[static_cast<std::size_t>(r)].hash_ids);
        // At least the prompt's last token is computed: it yields the first output.
        s.cached = static_cast<int32_t>(std::min<int64_t>(blocks * config_.block_tokens, input(r) - 1));
      }
      s.computed = s.cached;
      s.phase = Phase::prefilling;
      running_.push_back(r);
      const int32_t q = static_cast<int32_t>(std::min<int64_t>(input(r) - s.computed, budget));
      step.batch.push_back({r, q, s.computed + q, false});
      budget -= q;
    }
    // The model runner's order: requests of at most 1 + num_speculative_tokens
    // tokens (the decodes) first, the rest after, each in scheduling order.
    // (Two passes, not std::stable_partition, whose temporary buffer clang 22
    // flags as deprecated in libstdc++ 12.)
    ordered_.clear();
    for (const ScheduledRequest& b : step.batch) {
      if (b.query <= decode_tokens) ordered_.push_back(b);
    }
    for (const ScheduledRequest& b : step.batch) {
      if (b.query > decode_tokens) ordered_.push_back(b);
    }
    step.batch.swap(ordered_);
    step.query_start_loc.assign(1, 0);
    step.seq_lens.clear();
    bool all_decode = !step.batch.empty();
    bool uniform = all_decode;
    for (const ScheduledRequest& b : step.batch) {
      step.query_start_loc.push_back(step.query_start_loc.back() + b.query);
      step.seq_lens.push_back(b.seq_len);
      all_decode = all_decode && b.query <= decode_tokens;
      uniform = uniform && b.query == decode_tokens;
    }
    const int32_t tokens = step.query_start_loc.back();
    step.num_tokens = tokens;
    if (all_decode) {
      step.num_tokens = padded(tokens);
      // A uniform decode batch is padded with whole requests, as a FULL
      // graph captured for that many sequences replays it: trailing
      // requests with no tokens and no context, so the step stays next_n
      // rows a request (design.md 5.3).
      const int64_t seqs = (step.num_tokens + decode_tokens - 1) / decode_tokens;
      if (uniform && seqs <= config_.max_num_seqs) {
        step.num_tokens = seqs * decode_tokens;
        while (static_cast<int64_t>(step.seq_lens.size()) < seqs) {
          step.query_start_loc.push_back(tokens);
          step.seq_lens.push_back(0);
        }
      }
    }
    advance(step);
    now_ms_ += config_.step_ms + config_.token_us * static_cast<double>(tokens) / 1000.0;
    return true;
  }

  // The padded token count of a decode-only step of `tokens` tokens: the
  // smallest capture size that holds them, or none past the largest.
  int64_t padded(int32_t tokens) const {
    const auto it = std::lower_bound(config_.capture_sizes.begin(), config_.capture_sizes.end(), tokens);
    return it == config_.capture_sizes.end() ? tokens : *it;
  }

  const State& state(std::size_t r) const { return state_[r]; }
  std::size_t finished() const { return finished_; }
  int64_t steps() const { return steps_; }
  double now_ms() const { return now_ms_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  double arrival_ms(std::size_t r) const {
    return static_cast<double>(trace_[r].timestamp_ms) / config_.time_scale;
  }
  int32_t input(int32_t r) const { return trace_[static_cast<std::size_t>(r)].input_length; }
  int32_t output(int32_t r) const { return trace_[static_cast<std::size_t>(r)].output_length; }

  // Each scheduled request's progress once the step ran.
  void advance(const Step& step) {
    for (const ScheduledRequest& b : step.batch) {
      State& s = state_[static_cast<std::size_t>(b.request)];
      if (!b.decoding) {
        s.computed += b.query;
        s.prefilled += b.query;
        if (s.computed == input(b.request)) {
          // The last prompt chunk samples the first output token.
          s.generated = 1;
          s.phase = Phase::decoding;
          if (config_.prefix_cache) cache_.insert(trace_[static_cast<std::size_t>(b.request)].hash_ids);
        }
      } else {
        // The sampled token and the drafts accepted before the first rejection.
        int32_t accepted = 0;
        while (accepted < config_.num_speculative_tokens && uniform() < config_.acceptance) ++accepted;
        const int32_t gained = std::min(1 + accepted, output(b.request) - s.generated);
        s.generated += gained;
        s.computed += gained;
      }
      if (s.phase == Phase::decoding && s.generated >= output(b.request)) s.phase = Phase::finished;
    }
    const auto done = std::remove_if(running_.begin(), running_.end(), [&](int32_t r) {
      return state_[static_cast<std::size_t>(r)].phase == Phase::finished;
    });
    finished_ += static_cast<std::size_t>(running_.end() - done);
    running_.erase(done, running_.end());
  }

  // A uniform double in [0, 1) from 53 bits, the same on every platform.
  double uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

  const std::vector<TraceRequest>& trace_;
  SchedulerConfig config_;
  PrefixCache cache_;
  std::vector<State> state_;
  std::vector<int32_t> running_;  // admitted and not finished, in admission order
  std::vector<ScheduledRequest> ordered_;
  std::size_t next_arrival_ = 0;
  std::size_t finished_ = 0;
  int64_t steps_ = 0;
  double now_ms_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace idxplan::tool
