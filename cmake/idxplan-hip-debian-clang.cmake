# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
# Building for AMD's production GPUs (gfx942, gfx950) with Debian's clang 19
# or 22 against Debian 12's HIP 5.2 headers and device libraries (docs/amd.md).
# Debian's hipcc (ROCm 5.2, clang 15) knows neither target; a newer clang
# does, once it is given what the 5.2 packages lack. Every workaround is
# here, on the idxplan::hip target, and only where it applies: a Clang of 19
# or later with HIP headers older than 6.0. hipcc, and a real ROCm install,
# get none of it.
#
#  - Device libraries by name: the 5.2 libraries stop at
#    oclc_isa_version_940.bc, and clang looks for one named after each target.
#    The 5.2 libraries branch only on ISA numbers that put 940, 942 and 950 on
#    the same side, so all three take 940's. Naming one library replaces
#    clang's whole list, so every library a HIP compile links is named, hip.bc
#    included (clang 19 and later no longer link it; HIP 5.2's fences need it).
#  - -mcode-object-version=5: clang 19 and later default to 6, whose ABI
#    library (oclc_abi_version_600.bc) the 5.2 libraries do not have.
#  - clang 22 only: __AMDGCN_WAVEFRONT_SIZE, which clang 22 no longer
#    defines and the 5.2 headers read (64 on these GPUs), and f16_rcp.h,
#    pre-included, for two f16 helpers clang 22's HIP wrapper no longer
#    declares.

set(IDXPLAN_HIP_DEBIAN_CLANG_DIR ${CMAKE_CURRENT_LIST_DIR}/debian-hip-clang)

# The GPU targets the 5.2 libraries serve through 940's ISA library.
set(IDXPLAN_HIP_DEBIAN_CLANG_TARGETS gfx940 gfx941 gfx942 gfx950)

# Adds the workarounds to `target` (an INTERFACE target that links
# hip::device) where the compiler and HIP need them.
function(idxplan_hip_debian_clang target)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR CMAKE_CXX_COMPILER_VERSION VERSION_LESS 19
     OR NOT hip_VERSION VERSION_LESS 6.0)
    return()
  endif()
  foreach(gpu IN LISTS GPU_TARGETS)
    if(NOT gpu IN_LIST IDXPLAN_HIP_DEBIAN_CLANG_TARGETS)
      message(FATAL_ERROR
        "idxplan: clang ${CMAKE_CXX_COMPILER_VERSION} with HIP ${hip_VERSION} builds only "
        "${IDXPLAN_HIP_DEBIAN_CLANG_TARGETS} (GPU_TARGETS has ${gpu}); build ${gpu} with hipcc")
    endif()
  endforeach()
  find_path(IDXPLAN_HIP_BITCODE_DIR oclc_isa_version_940.bc
            PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/amdgcn/bitcode /usr/lib/amdgcn/bitcode
            NO_DEFAULT_PATH)
  if(NOT IDXPLAN_HIP_BITCODE_DIR)
    message(FATAL_ERROR "idxplan: no oclc_isa_version_940.bc (Debian's rocm-device-libs) for clang "
                        "${CMAKE_CXX_COMPILER_VERSION}; set IDXPLAN_HIP_BITCODE_DIR")
  endif()
  set(libs hip ocml ockl oclc_daz_opt_off oclc_unsafe_math_off oclc_finite_only_off
           oclc_correctly_rounded_sqrt_on oclc_wavefrontsize64_on oclc_isa_version_940
           oclc_abi_version_500)
  list(TRANSFORM libs PREPEND "--hip-device-lib=")
  list(TRANSFORM libs APPEND ".bc")
  set(options --hip-device-lib-path=${IDXPLAN_HIP_BITCODE_DIR} ${libs} -mcode-object-version=5)
  if(NOT CMAKE_CXX_COMPILER_VERSION VERSION_LESS 22)
    list(APPEND options -D__AMDGCN_WAVEFRONT_SIZE=64
         "SHELL:-include ${IDXPLAN_HIP_DEBIAN_CLANG_DIR}/f16_rcp.h")
  endif()
  target_compile_options(${target} INTERFACE ${options})
endfunction()
