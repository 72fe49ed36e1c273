# SPDX-License-Identifier: Apache-2.0
# Checks that every #include between the library's headers points down or sideways in the layer
# order, never up, and that every header opens only its folder's namespace. Run as
# `cmake -DAUDIOKV_INCLUDE_DIR=<repo>/include/audiokv -P check_layers.cmake`; it prints every
# upward include and every namespace outside the header's own, and fails when there is one, or
# when a header matches no layer.
#
# The layers, bottom to top (a header may include its own layer and the layers below it):
#   0 base     config.hpp error.hpp span.hpp version.hpp detail/   (portability, errors, spans)
#   1 core     core/        per-cell math, AUDIOKV_HOST_DEVICE
#   2 types    types/       plans, frame metadata, tiers, configuration records
#   3 policy   policy/      AudioKV and the baselines: what to evict, in rooms (below)
#   4 pool     pool/        memory: slot tables, K/V stores, batches of caches
#   5 execute  cpu/ cuda/   carry plans out on host or device memory
#   6 top      registry.hpp and the umbrellas audiokv.hpp eigen.hpp cuda.cuh
#   7 engines  engines/     adapters into inference engines (need the engine's headers)
# Each entry is "<path prefix relative to include/audiokv>=<layer>"; the longest matching prefix
# wins, so a folder entry ends with "/" and a file entry names the whole file.
set(_layer_table
  "config.hpp=0" "error.hpp=0" "span.hpp=0" "version.hpp=0" "detail/=0"
  "core/=1"
  "types/=2"
  "policy/=3"
  "pool/=4"
  "cpu/=5" "cuda/=5"
  "registry.hpp=6" "audiokv.hpp=6" "eigen.hpp=6" "cuda.cuh=6"
  "engines/=7")

# The namespace of each folder, "<path prefix>=<namespace>" (longest prefix wins; a header outside
# every folder is in audiokv). A header opens only its namespace and the namespaces nested in it
# (its `detail` among them). A header under a folder other than detail/ may end with one block
# `namespace audiokv { ... }` of using-declarations and namespace aliases that re-export its public
# names into audiokv; no namespace may open after it.
# One exception to folder = namespace: policy/audiokv/ (the AudioKV policy: tiered_cache, its
# planner, pools, tracker and prefetch forecast) stays in audiokv::policy, since a nested
# audiokv::policy::audiokv would repeat the library's name; its parts live in audiokv::policy::detail.
set(_namespace_table
  "detail/=audiokv::detail"
  "core/=audiokv::core"
  "types/=audiokv::types"
  "policy/=audiokv::policy"
  "policy/audiokv/=audiokv::policy"
  "policy/baselines/=audiokv::policy::baselines"
  "policy/detail/=audiokv::policy::detail"
  "policy/scores/=audiokv::policy::scores"
  "policy/speech/=audiokv::policy::speech"
  "policy/stages/=audiokv::policy::stages"
  "pool/=audiokv::pool"
  "cpu/=audiokv::cpu" "cuda/=audiokv::cuda" "engines/=audiokv::engines")

# The rooms of policy/ depend one way: the smoothing stages and the speech rules are parts the
# AudioKV policy composes, the kvpress scorers are parts the baselines compose, and the AudioKV
# policy and the baselines are peers. Each entry "<from prefix>!<to prefix>" forbids a header
# under <from> to include one under <to>.
set(_room_rules
  "policy/stages/!policy/audiokv/" "policy/stages/!policy/baselines/"
  "policy/stages/!policy/scores/" "policy/stages/!policy/speech/"
  "policy/speech/!policy/audiokv/" "policy/speech/!policy/baselines/"
  "policy/speech/!policy/scores/" "policy/speech/!policy/stages/"
  "policy/scores/!policy/audiokv/" "policy/scores/!policy/baselines/"
  "policy/scores/!policy/speech/" "policy/scores/!policy/stages/"
  "policy/baselines/!policy/audiokv/" "policy/audiokv/!policy/baselines/"
  "policy/detail/!policy/audiokv/" "policy/detail/!policy/baselines/"
  "policy/detail/!policy/scores/" "policy/detail/!policy/speech/"
  "policy/detail/!policy/stages/")

cmake_policy(VERSION 3.25)  # IN_LIST, as when run from the project

if(NOT AUDIOKV_INCLUDE_DIR OR NOT IS_DIRECTORY "${AUDIOKV_INCLUDE_DIR}")
  message(FATAL_ERROR "check_layers: set AUDIOKV_INCLUDE_DIR to include/audiokv")
endif()

# Sets `out` to the value of the longest prefix of `table` (a list of "<prefix>=<value>") that
# matches the header at `rel` (relative to include/audiokv), or to `fallback`.
function(audiokv_lookup table rel fallback out)
  set(_best "${fallback}")
  set(_best_len -1)
  foreach(_entry IN LISTS ${table})
    string(REGEX MATCH "^([^=]+)=(.+)$" _m "${_entry}")
    set(_prefix "${CMAKE_MATCH_1}")
    set(_value "${CMAKE_MATCH_2}")
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
      set(_best "${_value}")
      set(_best_len ${_len})
    endif()
  endforeach()
  set(${out} ${_best} PARENT_SCOPE)
endfunction()

# Sets `out` to the layer of the header at `rel`, or -1.
function(audiokv_layer_of rel out)
  audiokv_lookup(_layer_table "${rel}" -1 _layer)
  set(${out} ${_layer} PARENT_SCOPE)
endfunction()

# Reports (SEND_ERROR) every namespace the header at `rel` opens outside its folder's namespace,
# and a re-export block that is not the last namespace or holds anything but using-declarations,
# namespace aliases, preprocessor lines and comments. Sets `out` to the number of faults.
# Namespaces are followed by their opening lines and by the closing comments clang-format keeps
# (`}  // namespace x`).
function(audiokv_check_namespaces rel out)
  audiokv_lookup(_namespace_table "${rel}" audiokv _own)
  set(_faults 0)
  set(_stack "")
  set(_in_reexport FALSE)
  set(_reexport_closed FALSE)
  file(STRINGS "${AUDIOKV_INCLUDE_DIR}/${rel}" _lines
       REGEX "^[ \t]*(namespace[ \t]*[A-Za-z0-9_:]*[ \t]*{|}[ \t]*//[ \t]*namespace)")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "^[ \t]*namespace[ \t]*([A-Za-z0-9_:]*)[ \t]*{")
      set(_name "${CMAKE_MATCH_1}")
      if(_name STREQUAL "")
        set(_name "(anonymous)")
      endif()
      list(LENGTH _stack _depth)
      if(_depth EQUAL 0)
        set(_full "${_name}")
      else()
        list(GET _stack -1 _parent)
        set(_full "${_parent}::${_name}")
      endif()
      list(APPEND _stack "${_full}")
      if(_reexport_closed)
        message(SEND_ERROR "${rel}: opens namespace ${_full} after its re-export block into "
                           "audiokv, which must come last")
        math(EXPR _faults "${_faults} + 1")
      endif()
      if(_full STREQUAL "audiokv" AND NOT _own STREQUAL "audiokv"
         AND NOT _own STREQUAL "audiokv::detail")
        set(_in_reexport TRUE)
      elseif(NOT _full STREQUAL _own AND NOT _full MATCHES "^${_own}::")
        message(SEND_ERROR "${rel}: opens namespace ${_full}; a header of this folder opens "
                           "only ${_own} and the namespaces nested in it")
        math(EXPR _faults "${_faults} + 1")
      endif()
    else()
      list(LENGTH _stack _depth)
      if(_depth GREATER 0)
        list(GET _stack -1 _closed)
        list(REMOVE_AT _stack -1)
        if(_closed STREQUAL "audiokv" AND _in_reexport)
          set(_reexport_closed TRUE)
        endif()
      endif()
    endif()
  endforeach()
  if(_reexport_closed)
    # The block runs from its opening line to the end of the file; strip what it may hold.
    file(READ "${AUDIOKV_INCLUDE_DIR}/${rel}" _text)
    string(FIND "${_text}" "\nnamespace audiokv {" _at REVERSE)
    string(SUBSTRING "${_text}" ${_at} -1 _block)
    foreach(_allowed "\nnamespace audiokv {" "}  // namespace audiokv(\n|$)"
                     "using [A-Za-z0-9_:]+;" "namespace [A-Za-z0-9_]+ = [A-Za-z0-9_:]+;"
                     "\n[ \t]*#[^\n]*" "//[^\n]*")
      string(REGEX REPLACE "${_allowed}" "" _block "${_block}")
    endforeach()
    string(STRIP "${_block}" _block)
    if(NOT _block STREQUAL "")
      string(SUBSTRING "${_block}" 0 120 _block)
      message(SEND_ERROR "${rel}: its block in namespace audiokv holds more than the "
                         "using-declarations and namespace aliases of a re-export: ${_block}")
      math(EXPR _faults "${_faults} + 1")
    endif()
  endif()
  set(${out} ${_faults} PARENT_SCOPE)
endfunction()

# Sets `out` to TRUE when the header at `rel` only forwards to another one (a header left at the
# old path of a moved header for one release): besides comments and `#pragma once` it holds a
# single #include.
function(audiokv_is_forwarding rel out)
  file(READ "${AUDIOKV_INCLUDE_DIR}/${rel}" _text)
  string(REGEX REPLACE "//[^\n]*" "" _text "${_text}")
  string(REGEX REPLACE "#[ \t]*pragma[ \t]+once" "" _text "${_text}")
  string(STRIP "${_text}" _text)
  set(_forwarding FALSE)
  if(_text MATCHES "^#[ \t]*include[ \t]*\"[^\"\n]+\"$")
    set(_forwarding TRUE)
  endif()
  set(${out} ${_forwarding} PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE _headers RELATIVE "${AUDIOKV_INCLUDE_DIR}" "${AUDIOKV_INCLUDE_DIR}/*.hpp"
     "${AUDIOKV_INCLUDE_DIR}/*.cuh")
list(SORT _headers)
set(_forwarding "")
foreach(_h IN LISTS _headers)
  audiokv_is_forwarding("${_h}" _is)
  if(_is)
    list(APPEND _forwarding "${_h}")
  endif()
endforeach()
set(_errors 0)
set(_edges 0)
foreach(_h IN LISTS _headers)
  audiokv_layer_of("${_h}" _from)
  if(_from EQUAL -1)
    message(SEND_ERROR "${_h}: in no layer of tests/headers/check_layers.cmake; add it there")
    math(EXPR _errors "${_errors} + 1")
    continue()
  endif()
  audiokv_check_namespaces("${_h}" _faults)
  math(EXPR _errors "${_errors} + ${_faults}")
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
    if(NOT _h IN_LIST _forwarding AND _target IN_LIST _forwarding)
      message(SEND_ERROR "${_h} includes ${_target}, a forwarding header kept for users only; "
                         "include the header it forwards to")
      math(EXPR _errors "${_errors} + 1")
    endif()
    foreach(_rule IN LISTS _room_rules)
      string(REGEX MATCH "^([^!]+)!(.+)$" _m "${_rule}")
      string(FIND "${_h}" "${CMAKE_MATCH_1}" _at_from)
      string(FIND "${_target}" "${CMAKE_MATCH_2}" _at_to)
      if(_at_from EQUAL 0 AND _at_to EQUAL 0)
        message(SEND_ERROR "${_h} includes ${_target}: ${CMAKE_MATCH_1} may not include "
                           "${CMAKE_MATCH_2} (rooms of policy/ depend one way)")
        math(EXPR _errors "${_errors} + 1")
      endif()
    endforeach()
  endforeach()
endforeach()
list(LENGTH _headers _count)
if(_errors GREATER 0)
  message(FATAL_ERROR "check_layers: ${_errors} include(s) or namespace(s) break the layer order")
endif()
if(_edges EQUAL 0)
  message(FATAL_ERROR "check_layers: found no library include in ${_count} headers")
endif()
list(LENGTH _forwarding _forwarders)
message(STATUS "check_layers: ${_count} headers (${_forwarders} forwarding), ${_edges} library "
               "includes, none upward, none across the rooms of policy/ against their order, "
               "none through a forwarding header; each header in its folder's namespace")
