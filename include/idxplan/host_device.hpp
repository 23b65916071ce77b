// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Marks a function that runs both on the CPU (the reference the tests and the
// idxplan command use) and inside the device kernel, unchanged. A plain C++
// compiler sees nothing; hipcc and nvcc see __host__ __device__. This asks
// which compiler runs, not which platform (device/runtime.hpp does that).
#if defined(__NVCC__) || defined(__HIP__)
#define IDXPLAN_HD __host__ __device__ inline
#else
#define IDXPLAN_HD inline
#endif
