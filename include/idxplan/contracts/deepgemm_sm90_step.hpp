// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The deepgemm_sm90 contract in the step: DeepGEMM's metadata of the step's
// decode rows as DecodeLaunch hands them to its kernel, context_lens
// [sequences, next_n] where the plan runs native sequences, else [rows, 1];
// its shape from the launch's StepArgs, each sequence's keys (its last
// row's, as the step's rows are written), and the CPU fill. The prepare
// kernel's writer is in deepgemm_sm90_device.hpp.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "idxplan/contracts/deepgemm_sm90.hpp"
#include "idxplan/config.hpp"
#include "idxplan/host_device.hpp"
#include "idxplan/plan/span.hpp"
#include "idxplan/plan/step_args.hpp"
#include "idxplan/plan/step_io.hpp"
#include "idxplan/plan/types.hpp"

namespace idxplan::deepgemm_sm90 {

// Whether launch `a` writes the metadata: the step's first, where the plan
// has one.
IDXPLAN_HD bool step_writes_metadata(const StepArgs& a) { return a.writes_decode && a.metadata_sms > 0; }

// Whether launch `a`'s metadata reads the keys back from the decode rows it
// writes, so that one block writes both: a flattened step's, whose rows
// would otherwise each search query_start_loc for their request. A native
// step's sequence keys come from its seq_lens (StepSequences), so its rows
// keep a block per kPrepareThreads.
IDXPLAN_HD bool metadata_reads_rows(const StepArgs& a) { return step_writes_metadata(a) && a.native_next_n == 0; }

// Rows of a sequence: the native ones', else 1.
IDXPLAN_HD int32_t step_next_n(const StepArgs& a) { return a.native_next_n > 0 ? a.native_next_n : 1; }

// The plan's MetadataPlan, from the launch's rows (make_step_args gives
// native steps whole sequences).
IDXPLAN_HD MetadataShape step_metadata_shape(const StepArgs& a) {
  MetadataShape s;
  s.next_n = step_next_n(a);
  s.batch = a.num_decode_rows / s.next_n;
  s.num_sms = a.metadata_sms;
  return s;
}

// The step's decode sequences: sequence q's keys are its last row's.
struct StepSequences {
  const StepArgs* a;
  IDXPLAN_HD int32_t keys(int32_t q) const {
    const int32_t n = step_next_n(*a);
    return decode_row_len_at(*a, q * n + n - 1);
  }
  int32_t operator()(int32_t q) const { return keys(q); }
};

// The CPU fill of launch `a`'s metadata into decode_schedule.
inline void fill_step_metadata(const StepArgs& a) {
  if (!step_writes_metadata(a)) return;
  fill_metadata_of(step_metadata_shape(a), StepSequences{&a}, a.out.decode_schedule.data);
}

// "" where a filled step's decode_schedule is DeepGEMM's metadata of its own
// decode rows, as its kernel takes them (the decode launch's: native
// sequences' rows, else a row a sequence), on the geometry's SMs; else what
// is not. `p`'s decode rows are in out.decode_row_lens, host memory. For
// checks (the idxplan command's replay, the tests, the fuzzers); allocates.
inline std::string metadata_violation(const Geometry& g, const StepPlan& p, const StepOutputs& out) {
  const MetadataPlan& m = p.decode.metadata;
  if (m.present() != (g.contract() == Contract::deepgemm_sm90 && p.num_decodes > 0)) {
    return "the plan's metadata is not there exactly where deepgemm_sm90 steps have decodes";
  }
  if (!m.present()) return "";
  const int32_t next_n = p.decode.native.present() ? p.decode.native.next_n : 1;
  if (m.next_n != next_n || int64_t{m.batch} * next_n != p.decode.num_rows || next_n > 2 ||
      m.num_sms != g.config().num_compute_units) {
    return "the plan's metadata is not of the decode launch's sequences on the geometry's SMs";
  }
  const MetadataShape shape = metadata_shape(m.batch, m.next_n, kBlockKv, m.num_sms);
  std::vector<int32_t> want(static_cast<std::size_t>(shape.words()));
  fill_metadata(shape, Span<const int32_t>(out.decode_row_lens.data, static_cast<std::size_t>(p.decode.num_rows)),
                Span<int32_t>(want.data(), want.size()));
  if (!std::equal(want.begin(), want.end(), out.decode_schedule.data)) {
    return "decode_schedule is not get_paged_mqa_logits_metadata's of the step's decode rows";
  }
  return "";
}

}  // namespace idxplan::deepgemm_sm90
