// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The core of idxplan.deepgemm (python/idxplan/deepgemm.py,
// docs/deepgemm.md): DeepGEMM's get_paged_mqa_logits_metadata over the
// deepgemm_sm90 contract.

#include <pybind11/pybind11.h>

namespace idxplan::python {

// Adds the class _DeepGemmMetadata to the extension.
void register_deepgemm(pybind11::module_& m);

}  // namespace idxplan::python
