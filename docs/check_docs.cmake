# SPDX-License-Identifier: Apache-2.0
# Fails when Doxygen reports an undocumented public symbol (or a malformed comment) in the
# headers, unless docs/undocumented.txt lists it. Run as
#   cmake -DDOXYGEN=<doxygen> -DDOXYFILE=<Doxyfile> -DWARN_LOG=<log> -DALLOWED=<list>
#         -DSOURCE_DIR=<repo> -P check_docs.cmake
# Warnings are compared as "<path under include/>: <text>" (no line numbers), so the list
# survives edits elsewhere in a file. Entries that no longer warn are reported, to be removed.
foreach(_v DOXYGEN DOXYFILE WARN_LOG ALLOWED SOURCE_DIR)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "check_docs: -D${_v}=... is required")
  endif()
endforeach()

file(REMOVE "${WARN_LOG}")
execute_process(COMMAND "${DOXYGEN}" "${DOXYFILE}" RESULT_VARIABLE _rc OUTPUT_QUIET
                ERROR_VARIABLE _stderr)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "check_docs: doxygen failed (${_rc}):\n${_stderr}")
endif()
if(NOT EXISTS "${WARN_LOG}")
  message(FATAL_ERROR "check_docs: doxygen wrote no warning log at ${WARN_LOG}")
endif()

set(_allowed "")
if(EXISTS "${ALLOWED}")
  file(STRINGS "${ALLOWED}" _allowed REGEX "^[^#]")
endif()

file(STRINGS "${WARN_LOG}" _lines REGEX ": warning: ")
set(_new "")
set(_seen "")
foreach(_line IN LISTS _lines)
  if(NOT _line MATCHES "^(.*):[0-9]+: warning: (.*)$")
    continue()
  endif()
  set(_path "${CMAKE_MATCH_1}")
  set(_text "${CMAKE_MATCH_2}")
  string(REPLACE "${SOURCE_DIR}/include/" "" _path "${_path}")
  set(_key "${_path}: ${_text}")
  list(APPEND _seen "${_key}")
  list(FIND _allowed "${_key}" _at)
  if(_at EQUAL -1)
    list(APPEND _new "${_key}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _new)

foreach(_entry IN LISTS _allowed)
  list(FIND _seen "${_entry}" _at)
  if(_at EQUAL -1)
    message(STATUS "check_docs: now documented, remove from docs/undocumented.txt: ${_entry}")
  endif()
endforeach()

list(LENGTH _new _count)
if(_count GREATER 0)
  list(JOIN _new "\n  " _text)
  message(FATAL_ERROR "check_docs: ${_count} public symbol(s) undocumented or badly "
                      "documented (document them; detail namespaces are exempt):\n  ${_text}")
endif()
list(LENGTH _seen _listed)
message(STATUS "check_docs: no new documentation warning (${_listed} listed in undocumented.txt)")
