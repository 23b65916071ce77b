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

// Put before an IDXPLAN_HD template that host code also instantiates with
// host-only types (find_request over a std::vector): nvcc would warn that a
// __host__ __device__ function calls a __host__ one, though that
// instantiation never runs on the device; this tells it so.
#if defined(__NVCC__)
#define IDXPLAN_HOST_INSTANTIATED _Pragma("nv_exec_check_disable")
#else
#define IDXPLAN_HOST_INSTANTIATED
#endif
