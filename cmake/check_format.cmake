# SPDX-License-Identifier: Apache-2.0
# cmake -DCLANG_FORMAT=... -DROOT=... -P check_format.cmake: fails listing every tracked C++/CUDA
# file that clang-format would change.
file(GLOB_RECURSE _files
  ${ROOT}/include/*.hpp ${ROOT}/include/*.cuh ${ROOT}/tests/*.cpp ${ROOT}/tests/*.hpp
  ${ROOT}/tests/*.cu ${ROOT}/benchmarks/*.cpp ${ROOT}/benchmarks/*.cu ${ROOT}/examples/*.cpp
  ${ROOT}/examples/*.hpp ${ROOT}/examples/*.cu)
set(_bad "")
foreach(_f IN LISTS _files)
  execute_process(COMMAND ${CLANG_FORMAT} --dry-run --Werror ${_f}
                  RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT _rc EQUAL 0)
    list(APPEND _bad ${_f})
  endif()
endforeach()
list(LENGTH _files _n)
if(_bad)
  string(REPLACE ";" "\n  " _list "${_bad}")
  message(FATAL_ERROR "clang-format would change:\n  ${_list}\nrun: clang-format -i <files>")
endif()
message(STATUS "clang-format: ${_n} files clean")
