# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
# cmake -DBUILD=<build> -DWORK=<dir> -DPYTHON=<python> -P check_install.cmake
# Installs the Python package from BUILD with CMake (the python component, for an
# engine whose build is CMake; scripts/install-python and the wheel use pip),
# into WORK, and imports it from there.
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} -E env DESTDIR=${WORK}
                        ${CMAKE_COMMAND} --install ${BUILD} --component python
                COMMAND_ERROR_IS_FATAL ANY)
file(GLOB_RECURSE installed ${WORK}/__init__.py)
list(LENGTH installed count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "the install put ${count} idxplan packages under ${WORK}")
endif()
get_filename_component(package ${installed} DIRECTORY)
get_filename_component(site ${package} DIRECTORY)
execute_process(COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${site}
                        ${PYTHON} -c "import idxplan, sys; assert idxplan.__file__.startswith(sys.argv[1]), idxplan.__file__; print('imported', idxplan.__file__); idxplan.make_geometry(num_compute_units=4)" ${site}
                COMMAND_ERROR_IS_FATAL ANY)
