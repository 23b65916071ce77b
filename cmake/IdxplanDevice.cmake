# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
# The device targets in this build: idxplan::hip (hipcc, rocPRIM) and
# idxplan::cuda (nvcc, CUB), as cmake/idxplan-device.cmake defines them.
include(${CMAKE_CURRENT_LIST_DIR}/idxplan-device.cmake)

if(IDXPLAN_HIP)
  idxplan_find_hip_deps(REQUIRED)
  add_library(idxplan_hip INTERFACE)
  add_library(idxplan::hip ALIAS idxplan_hip)
  idxplan_link_hip(idxplan_hip)
endif()

if(IDXPLAN_CUDA)
  enable_language(CUDA)
  idxplan_find_cuda_deps(REQUIRED)
  add_library(idxplan_cuda INTERFACE)
  add_library(idxplan::cuda ALIAS idxplan_cuda)
  idxplan_link_cuda(idxplan_cuda)
endif()

# Marks device sources for the build's platform: HIP sources build as C++ with
# hipcc (CMake 3.25's HIP language looks for Debian's hip-lang in the wrong
# folder), CUDA sources with nvcc.
function(idxplan_device_sources)
  if(IDXPLAN_HIP)
    set_source_files_properties(${ARGN} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTIES LANGUAGE CXX)
  elseif(IDXPLAN_CUDA)
    set_source_files_properties(${ARGN} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTIES LANGUAGE CUDA)
  endif()
endfunction()

# What idxplan's own device tests and benchmarks link: the platform target.
if(IDXPLAN_HIP OR IDXPLAN_CUDA)
  add_library(idxplan_device_for_tests INTERFACE)
  if(IDXPLAN_HIP)
    target_link_libraries(idxplan_device_for_tests INTERFACE idxplan::hip)
  else()
    target_link_libraries(idxplan_device_for_tests INTERFACE idxplan::cuda)
  endif()
endif()
