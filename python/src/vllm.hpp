// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The core of idxplan.vllm (python/idxplan/vllm.py, docs/vllm.md): vLLM's
// ROCm MXFP4 indexer metadata from one call a step.

#include <pybind11/pybind11.h>

namespace idxplan::python {

// Adds the class _VllmBuilder to the extension.
void register_vllm(pybind11::module_& m);

}  // namespace idxplan::python
