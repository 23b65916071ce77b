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
