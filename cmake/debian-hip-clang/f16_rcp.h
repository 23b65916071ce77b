// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Pre-included (-include) into HIP sources that Debian's clang 22 builds
// against Debian's HIP 5.2 headers (cmake/idxplan-hip-debian-clang.cmake).
// Those headers call two f16 reciprocal helpers that clang's own HIP wrapper
// declared until clang 22, which no longer does; idxplan does not call them,
// but hip_runtime.h does not compile without them. Both map to the f16
// reciprocal builtin, as the older wrapper did.

#if defined(__HIP__) && defined(__clang_major__) && __clang_major__ >= 22
extern "C" {
__device__ inline __attribute__((const)) _Float16 __llvm_amdgcn_rcp_f16(_Float16 x) {
  return static_cast<_Float16>(__builtin_amdgcn_rcph(x));
}
typedef _Float16 __idxplan_2f16 __attribute__((ext_vector_type(2)));
__device__ inline __idxplan_2f16 __llvm_amdgcn_rcp_2f16(__idxplan_2f16 x) {
  return __idxplan_2f16{__llvm_amdgcn_rcp_f16(x.x), __llvm_amdgcn_rcp_f16(x.y)};
}
}
#endif
