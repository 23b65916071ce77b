# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
# Installs the headers and a CMake package, so that find_package(idxplan CONFIG)
# gives the same idxplan::idxplan as add_subdirectory and FetchContent do,
# and idxplan::hip, idxplan::cuda and idxplan::json as the components hip,
# cuda and json.
include(CMakePackageConfigHelpers)

install(DIRECTORY include/idxplan DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS idxplan EXPORT idxplan-targets)
set(idxplan_cmake_dir ${CMAKE_INSTALL_DATADIR}/cmake/idxplan)
install(EXPORT idxplan-targets NAMESPACE idxplan:: DESTINATION ${idxplan_cmake_dir})
configure_package_config_file(cmake/idxplan-config.cmake.in
  ${PROJECT_BINARY_DIR}/idxplan-config.cmake INSTALL_DESTINATION ${idxplan_cmake_dir})
# Header-only: any architecture may use it.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/idxplan-config-version.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/idxplan-config.cmake
  ${PROJECT_BINARY_DIR}/idxplan-config-version.cmake cmake/idxplan-device.cmake
  cmake/idxplan-hip-debian-clang.cmake DESTINATION ${idxplan_cmake_dir})
install(FILES cmake/debian-hip-clang/f16_rcp.h DESTINATION ${idxplan_cmake_dir}/debian-hip-clang)
