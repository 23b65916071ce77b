// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

#include <cstdint>

namespace idxplan::bench {

// Heap allocations through operator new so far in this process
// (alloc_counter.cpp replaces the global operator new to count them).
int64_t allocation_count();

}  // namespace idxplan::bench
