# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
# A page's C++ (its ```cpp blocks) as a source file: their #include lines
# first, then one function, `function`, holding the page's first block and
# each later block in a scope of its own, with the engine's names from
# doc_engine.hpp. test_prepare_step compiles these sources (and never calls
# them), with the project's warnings where the device compiler is a C++ one
# (hipcc, clang), so a page whose code no longer compiles fails every
# device build; and as each includes
# device/prepare_step.hpp, the test also links the header from several
# translation units, as an engine does. Re-made when the page changes.
function(idxplan_doc_code page out function)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${page})
  file(READ ${page} text)
  set(open "```cpp\n")
  string(LENGTH "${open}" open_length)
  set(includes "")
  set(body "")
  set(blocks 0)
  while(TRUE)
    string(FIND "${text}" "${open}" start)
    if(start EQUAL -1)
      break()
    endif()
    math(EXPR start "${start} + ${open_length}")
    string(SUBSTRING "${text}" ${start} -1 text)
    string(FIND "${text}" "```" stop)
    if(stop EQUAL -1)
      message(FATAL_ERROR "${page}: a cpp block is not closed")
    endif()
    string(SUBSTRING "${text}" 0 ${stop} block)
    math(EXPR stop "${stop} + 3")
    string(SUBSTRING "${text}" ${stop} -1 text)
    string(REGEX MATCHALL "#include [^\n]*" found "${block}")
    foreach(line IN LISTS found)
      string(APPEND includes "${line}\n")
    endforeach()
    string(REGEX REPLACE "#include [^\n]*" "" block "${block}")
    if(blocks EQUAL 0)
      string(APPEND body "${block}")
    else()
      string(APPEND body "{\n${block}}\n")
    endif()
    math(EXPR blocks "${blocks} + 1")
  endwhile()
  if(blocks EQUAL 0)
    message(FATAL_ERROR "${page}: no cpp block")
  endif()
  file(RELATIVE_PATH name ${PROJECT_SOURCE_DIR} ${page})
  set(source "// Made by tests/device/doc_code.cmake from ${name}.\n")
  string(APPEND source "${includes}\n#include \"device/doc_engine.hpp\"\n\n")
  string(APPEND source "void ${function}() {\n  using namespace doc_engine;\n${body}}\n")
  file(CONFIGURE OUTPUT ${out} CONTENT "${source}" @ONLY)
endfunction()
