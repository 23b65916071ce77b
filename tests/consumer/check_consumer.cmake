# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
# cmake -DHOW=find_package|add_subdirectory -DSOURCE=<idxplan> -DWORK=<dir>
#       -DGENERATOR=<g> -DMAKE_PROGRAM=<p> -DCXX_COMPILER=<c> -P check_consumer.cmake
# Builds the consumer project against idxplan the way HOW says, then runs it.
file(REMOVE_RECURSE ${WORK})
set(common_args -G ${GENERATOR} -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}
                -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
set(consumer_args ${common_args} -DIDXPLAN_HOW=${HOW})
if(HOW STREQUAL "find_package")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/idxplan ${common_args}
                    -DIDXPLAN_BUILD_TESTS=OFF -DIDXPLAN_BUILD_TOOLS=OFF
                    -DIDXPLAN_BUILD_BENCHMARKS=OFF -DIDXPLAN_INSTALL=ON
                    -DCMAKE_INSTALL_PREFIX=${WORK}/prefix
                  COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${WORK}/idxplan COMMAND_ERROR_IS_FATAL ANY)
  list(APPEND consumer_args -DCMAKE_PREFIX_PATH=${WORK}/prefix)
else()
  list(APPEND consumer_args -DIDXPLAN_SOURCE_DIR=${SOURCE})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE}/tests/consumer/project -B ${WORK}/consumer
                  ${consumer_args}
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/consumer COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${WORK}/consumer/consumer COMMAND_ERROR_IS_FATAL ANY)
