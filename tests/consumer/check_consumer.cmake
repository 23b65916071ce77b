# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
# cmake -DHOW=<how> -DSOURCE=<idxplan> -DWORK=<dir> -DGENERATOR=<g> -DMAKE_PROGRAM=<p>
#       -DCXX_COMPILER=<c> [-DHIPCC=<hipcc>] [-DHIP_CLANG=<clang++ 22>] [-DNVCC=<nvcc>]
#       -P check_consumer.cmake
# Builds the consumer project against idxplan the way HOW says, then runs
# it. HOW: find_package, find_package_json (the json component, which
# needs nlohmann-json), add_subdirectory (with idxplan::json, so also
# nlohmann-json), find_package_hip (needs HIPCC),
# find_package_hip_clang22 (needs HIP_CLANG and Debian's HIP: gfx950),
# find_package_cuda (needs NVCC); tests/consumer/CMakeLists.txt skips those
# where their compiler is not found.
function(run)
  execute_process(COMMAND ${ARGN} COMMAND_ERROR_IS_FATAL ANY)
endfunction()

set(cxx ${CXX_COMPILER})
set(consumer_args)
if(HOW STREQUAL "find_package_json" OR HOW STREQUAL "add_subdirectory")
  list(APPEND consumer_args -DIDXPLAN_JSON=ON)
elseif(HOW STREQUAL "find_package_hip")
  set(cxx ${HIPCC})
  list(APPEND consumer_args -DIDXPLAN_DEVICE=hip -DGPU_TARGETS=gfx90a)
elseif(HOW STREQUAL "find_package_hip_clang22")
  set(cxx ${HIP_CLANG})
  list(APPEND consumer_args -DIDXPLAN_DEVICE=hip -DGPU_TARGETS=gfx950)
elseif(HOW STREQUAL "find_package_cuda")
  list(APPEND consumer_args -DIDXPLAN_DEVICE=cuda -DCMAKE_CUDA_COMPILER=${NVCC}
       -DCMAKE_CUDA_ARCHITECTURES=90)
endif()

file(REMOVE_RECURSE ${WORK})
set(common_args -G ${GENERATOR} -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM} -DCMAKE_CXX_COMPILER=${cxx})
if(HOW STREQUAL "add_subdirectory")
  list(APPEND consumer_args -DIDXPLAN_HOW=add_subdirectory -DIDXPLAN_SOURCE_DIR=${SOURCE})
else()
  # An install-only configure: none of the test, tool and benchmark
  # dependencies may be looked for, so each is made unfindable.
  run(${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/idxplan ${common_args}
      -DIDXPLAN_BUILD_TESTS=OFF -DIDXPLAN_BUILD_TOOLS=OFF -DIDXPLAN_BUILD_BENCHMARKS=OFF
      -DIDXPLAN_INSTALL=ON -DCMAKE_INSTALL_PREFIX=${WORK}/prefix
      -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON
      -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON -DCMAKE_DISABLE_FIND_PACKAGE_pybind11=ON
      -DCMAKE_DISABLE_FIND_PACKAGE_Python3=ON)
  run(${CMAKE_COMMAND} --install ${WORK}/idxplan)
  list(APPEND consumer_args -DIDXPLAN_HOW=find_package -DCMAKE_PREFIX_PATH=${WORK}/prefix)
endif()
run(${CMAKE_COMMAND} -S ${SOURCE}/tests/consumer/project -B ${WORK}/consumer ${common_args}
    ${consumer_args})
run(${CMAKE_COMMAND} --build ${WORK}/consumer)
run(${WORK}/consumer/consumer)
