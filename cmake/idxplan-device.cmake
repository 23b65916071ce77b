# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
# What each device target adds to idxplan::idxplan: idxplan::hip (the HIP
# runtime and rocPRIM) and idxplan::cuda (the CUDA runtime; CUB ships on the
# toolkit's include path). The build includes this for IDXPLAN_HIP and
# IDXPLAN_CUDA, and the installed package for its hip and cuda components,
# so a target looks the same however idxplan is found.

include(${CMAKE_CURRENT_LIST_DIR}/idxplan-hip-debian-clang.cmake)

# Finds HIP and rocPRIM (`mode`: REQUIRED or QUIET); sets IDXPLAN_HIP_DEPS_FOUND.
macro(idxplan_find_hip_deps mode)
  find_package(hip ${mode})
  find_package(rocprim ${mode})
  if(hip_FOUND AND rocprim_FOUND)
    set(IDXPLAN_HIP_DEPS_FOUND TRUE)
  else()
    set(IDXPLAN_HIP_DEPS_FOUND FALSE)
  endif()
endmacro()

# Finds the CUDA toolkit (`mode`: REQUIRED or QUIET); sets IDXPLAN_CUDA_DEPS_FOUND.
macro(idxplan_find_cuda_deps mode)
  find_package(CUDAToolkit ${mode})
  set(IDXPLAN_CUDA_DEPS_FOUND ${CUDAToolkit_FOUND})
endmacro()

function(idxplan_link_hip target)
  target_link_libraries(${target} INTERFACE idxplan::idxplan hip::device roc::rocprim)
  idxplan_hip_debian_clang(${target})  # gfx942 and gfx950 with Debian's clang 19 or 22
endfunction()

function(idxplan_link_cuda target)
  target_link_libraries(${target} INTERFACE idxplan::idxplan CUDA::cudart_static)
  # C++17 device code, where the consumer compiles CUDA (nvcc 12 and later
  # default to it anyway).
  if(CMAKE_CUDA_COMPILER_LOADED)
    target_compile_features(${target} INTERFACE cuda_std_17)
  endif()
endfunction()
