// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The core of idxplan.aiter (python/idxplan/aiter.py, docs/aiter.md): aiter
// main's FlyDSL FP4 schedule functions over the flydsl_fp4 contract.

#include <pybind11/pybind11.h>

namespace idxplan::python {

// Adds the class _AiterSchedules to the extension.
void register_aiter(pybind11::module_& m);

}  // namespace idxplan::python
