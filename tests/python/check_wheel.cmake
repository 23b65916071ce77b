# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
# cmake -DSOURCE=<repo> -DWORK=<dir> -DPYTHON=<python> [-DCLI=<idxplan>] -P check_wheel.cmake
# Builds the wheel as the README says (pip, no build isolation, offline), installs
# it into WORK/site, checks that the package imports from there, and runs
# tests/python against that install (the entry point's test among them).
file(REMOVE_RECURSE ${WORK})
set(pip ${PYTHON} -m pip --disable-pip-version-check)
execute_process(COMMAND ${pip} wheel --no-build-isolation --no-index --no-deps -w ${WORK}/dist ${SOURCE}
                COMMAND_ERROR_IS_FATAL ANY)
file(GLOB wheels ${WORK}/dist/idxplan-*.whl)
list(LENGTH wheels count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "pip wheel made ${count} idxplan wheels in ${WORK}/dist: ${wheels}")
endif()
execute_process(COMMAND ${pip} install --no-index --no-deps --target ${WORK}/site ${wheels}
                COMMAND_ERROR_IS_FATAL ANY)
set(env PYTHONPATH=${WORK}/site)
if(DEFINED CLI)
  list(APPEND env IDXPLAN_CLI=${CLI})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env ${env}
                        ${PYTHON} -c "import idxplan, sys; assert idxplan.__file__.startswith(sys.argv[1]), idxplan.__file__; print('testing the wheel installed at', idxplan.__file__)" ${WORK}/site
                WORKING_DIRECTORY ${WORK} COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} -E env ${env}
                        ${PYTHON} -m pytest -q -rs -p no:cacheprovider ${SOURCE}/tests/python
                WORKING_DIRECTORY ${WORK} COMMAND_ERROR_IS_FATAL ANY)
