// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The consumer contracts (docs/design.md 14, docs/aiter.md): what one
// consumer kernel reads a step besides the cache. The geometry names one;
// each is a room of its own under contracts/ (its host sizes, its CPU fill,
// its device writer), and the planner, the buffers and the prepare launch
// ask the geometry which.

#include <cstdint>
#include <string_view>

namespace idxplan {

enum class Contract : int32_t {
  // aiter's Gluon gfx950 MXFP4 kernel (aiter branch), fed by vLLM's ROCm
  // MXFP4 indexer: decode_schedule holds [num_ctas, 4] descriptors
  // (contracts/gluon_mxfp4*.hpp). The default.
  gluon_mxfp4 = 0,
  // aiter main's FlyDSL pa_mqa_logits_fp4 and _prefill, called by sglang:
  // cta_info and `safe` for the decode rows and each prefill chunk
  // (contracts/flydsl_fp4*.hpp).
  flydsl_fp4 = 1,
  // DeepGEMM's fp8_paged_mqa_logits and fp8_fp4_paged_mqa_logits on Hopper
  // (DeepGEMM 891d57b4, as vLLM pins it), fed by vLLM's CUDA indexer:
  // decode_schedule holds the [num_sms + 1, 2] schedule metadata of the
  // decode rows (contracts/deepgemm_sm90*.hpp), num_sms the geometry's
  // num_compute_units.
  deepgemm_sm90 = 2,
};

constexpr std::string_view contract_name(Contract c) {
  switch (c) {
    case Contract::flydsl_fp4: return "flydsl_fp4";
    case Contract::deepgemm_sm90: return "deepgemm_sm90";
    default: return "gluon_mxfp4";
  }
}

// The contract named `name`; false where none is.
constexpr bool contract_from_name(std::string_view name, Contract& out) {
  if (name == "gluon_mxfp4") {
    out = Contract::gluon_mxfp4;
    return true;
  }
  if (name == "flydsl_fp4") {
    out = Contract::flydsl_fp4;
    return true;
  }
  if (name == "deepgemm_sm90") {
    out = Contract::deepgemm_sm90;
    return true;
  }
  return false;
}

}  // namespace idxplan
