# SPDX-License-Identifier: Apache-2.0
# Checks that every #include between the library's headers points down or sideways in the layer
# order, never up. Run as `cmake -DAUDIOKV_INCLUDE_DIR=<repo>/include/audiokv -P check_layers.cmake`;
# it prints every upward include and fails when there is one, or when a header matches no layer.
#
# The layers, bottom to top (a header may include its own layer and the layers below it):
#   0 base     config.hpp error.hpp span.hpp version.hpp detail/   (portability, errors, spans)
#   1 core     core/        per-cell math, AUDIOKV_HOST_DEVICE
#   2 types    types/       plans, frame metadata, tiers, configuration records
#   3 policy   policy/      AudioKV and the baselines: what to evict
#   4 pool     pool/        memory: slot tables, K/V stores, batches of caches
#   5 execute  cpu/ cuda/   carry plans out on host or device memory
#   6 top      registry.hpp and the umbrellas audiokv.hpp eigen.hpp cuda.cuh
# Each entry is "<path prefix relative to include/audiokv>=<layer>"; the longest matching prefix
# wins, so a folder entry ends with "/" and a file entry names the whole file.
set(_layer_table
  "config.hpp=0" "error.hpp=0" "span.hpp=0" "version.hpp=0" "detail/=0"
  "core/=1"
  "types/=2"
  "policy/=3"
  "pool/=4"
  "cpu/=5" "cuda/=5"
  "registry.hpp=6" "audiokv.hpp=6" "eigen.hpp=6" "cuda.cuh=6")

if(NOT AUDIOKV_INCLUDE_DIR OR NOT IS_DIRECTORY "${AUDIOKV_INCLUDE_DIR}")
  message(FATAL_ERROR "check_layers: set AUDIOKV_INCLUDE_DIR to include/audiokv")
endif()

# Sets `out` to the layer of the header at `rel` (relative to include/audiokv), or -1.
function(audiokv_layer_of rel out)
  set(_best -1)
  set(_best_len -1)
  foreach(_entry IN LISTS _layer_table)
    string(REGEX MATCH "^([^=]+)=([0-9]+)$" _m "${_entry}")
    set(_prefix "${CMAKE_MATCH_1}")
    set(_layer "${CMAKE_MATCH_2}")
    string(LENGTH "${_prefix}" _len)
    string(SUBSTRING "${rel}" 0 ${_len} _head)
    if(_prefix MATCHES "/$")
      set(_hit FALSE)
      if(_head STREQUAL _prefix)
        set(_hit TRUE)
      endif()
    else()
      set(_hit FALSE)
      if(rel STREQUAL _prefix)
        set(_hit TRUE)
      endif()
    endif()
    if(_hit AND _len GREATER _best_len)
      set(_best ${_layer})
      set(_best_len ${_len})
    endif()
  endforeach()
  set(${out} ${_best} PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE _headers RELATIVE "${AUDIOKV_INCLUDE_DIR}" "${AUDIOKV_INCLUDE_DIR}/*.hpp"
     "${AUDIOKV_INCLUDE_DIR}/*.cuh")
list(SORT _headers)
set(_errors 0)
set(_edges 0)
foreach(_h IN LISTS _headers)
  audiokv_layer_of("${_h}" _from)
  if(_from EQUAL -1)
    message(SEND_ERROR "${_h}: in no layer of tests/headers/check_layers.cmake; add it there")
    math(EXPR _errors "${_errors} + 1")
    continue()
  endif()
  get_filename_component(_dir "${_h}" DIRECTORY)
  file(STRINGS "${AUDIOKV_INCLUDE_DIR}/${_h}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "#[ \t]*include[ \t]*\"([^\"]+)\"")
      # Quoted includes resolve against the including header's folder.
      if(_dir STREQUAL "")
        set(_target "${CMAKE_MATCH_1}")
      else()
        set(_target "${_dir}/${CMAKE_MATCH_1}")
      endif()
      get_filename_component(_abs "${AUDIOKV_INCLUDE_DIR}/${_target}" ABSOLUTE)
      file(RELATIVE_PATH _target "${AUDIOKV_INCLUDE_DIR}" "${_abs}")
      if(_target MATCHES "^\\.\\./")
        continue()  # outside the library
      endif()
    elseif(_line MATCHES "#[ \t]*include[ \t]*<audiokv/([^>]+)>")
      set(_target "${CMAKE_MATCH_1}")
    else()
      continue()  # a system or third-party header
    endif()
    audiokv_layer_of("${_target}" _to)
    math(EXPR _edges "${_edges} + 1")
    if(_to EQUAL -1)
      message(SEND_ERROR "${_h} includes ${_target}, which is in no layer")
      math(EXPR _errors "${_errors} + 1")
    elseif(_to GREATER _from)
      message(SEND_ERROR "${_h} (layer ${_from}) includes ${_target} (layer ${_to}): upward")
      math(EXPR _errors "${_errors} + 1")
    endif()
  endforeach()
endforeach()
list(LENGTH _headers _count)
if(_errors GREATER 0)
  message(FATAL_ERROR "check_layers: ${_errors} include(s) break the layer order")
endif()
if(_edges EQUAL 0)
  message(FATAL_ERROR "check_layers: found no library include in ${_count} headers")
endif()
message(STATUS "check_layers: ${_count} headers, ${_edges} library includes, none upward")
