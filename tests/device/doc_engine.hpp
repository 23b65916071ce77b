// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The engine's own names that the pages' C++ uses (the README's,
// docs/integration.md's, docs/cli.md's: its `my_*` functions, its configs,
// the step's arrays), as stand-ins, so that their code compiles as written
// (tests/device/doc_code.cmake). Nothing here runs: the stand-in consumers
// take any arguments, so it is the calls into idxplan and the views'
// members that the compiler checks.

#include <cstdint>
#include <string>
#include <vector>

#include "idxplan/device/runtime.hpp"
#include "idxplan/idxplan.hpp"

namespace doc_engine {

struct ModelConfig {
  int32_t max_model_len = 65536;
};
struct SchedulerConfig {
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 8192;
};
struct KvCache {
  int32_t max_blocks_per_seq = 512;
};
inline ModelConfig model_config;
inline SchedulerConfig scheduler_config;
inline KvCache kv_cache;

// The step's arrays, host and device (integration.md's table).
inline std::vector<int32_t> qsl_cpu, seq_lens_cpu, seq_lens_upper_bound_cpu, block_table_cpu;
inline int64_t num_tokens = idxplan::kUnpaddedTokens;
inline idxplan::Span<const int32_t> seq_lens_gpu, qsl_gpu, block_table_gpu;
inline int32_t block_table_stride = 0;
inline idxplan::device::Stream stream = nullptr;
inline const void* q_decode = nullptr;
inline const char* q = nullptr;
inline int64_t q_row_bytes = 0;
inline std::string step_text;  // docs/cli.md's input, as text

inline int32_t* my_alloc_int32(int64_t) { return nullptr; }
inline idxplan::StepOutputs my_step_buffers(const idxplan::StepBufferSizes&) { return {}; }
template <class... Args>
void my_paged_mxfp4_mqa_logits_decode(const Args&...) {}
template <class... Args>
void my_paged_mxfp4_mqa_logits_prefill(const Args&...) {}
template <class... Args>
void my_candidate_decode(const Args&...) {}
template <class... Args>
void my_candidate_prefill(const Args&...) {}

}  // namespace doc_engine
