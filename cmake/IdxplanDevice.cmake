# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
# The device targets: idxplan::hip (hipcc, rocPRIM) and idxplan::cuda (nvcc,
# CUB). Each adds the GPU runtime to idxplan::idxplan.
if(IDXPLAN_HIP)
  find_package(hip REQUIRED)
  find_package(rocprim REQUIRED)
  add_library(idxplan_hip INTERFACE)
  add_library(idxplan::hip ALIAS idxplan_hip)
  set_target_properties(idxplan_hip PROPERTIES EXPORT_NAME hip)
  target_link_libraries(idxplan_hip INTERFACE idxplan::idxplan hip::device roc::rocprim)
endif()

if(IDXPLAN_CUDA)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  add_library(idxplan_cuda INTERFACE)
  add_library(idxplan::cuda ALIAS idxplan_cuda)
  set_target_properties(idxplan_cuda PROPERTIES EXPORT_NAME cuda)
  # CUB ships with the toolkit, on its include path.
  target_link_libraries(idxplan_cuda INTERFACE idxplan::idxplan CUDA::cudart_static)
  target_compile_features(idxplan_cuda INTERFACE cuda_std_17)
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
