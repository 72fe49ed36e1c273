# SPDX-License-Identifier: Apache-2.0
# audiokv_add_test(name SOURCES ... [LIBS ...] [LABELS ...]): one GoogleTest executable, its
# tests registered with ctest by gtest_discover_tests.
include(GoogleTest)

function(audiokv_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE audiokv::eigen GTest::gtest_main ${ARG_LIBS})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${AUDIOKV_WARNINGS}>)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests
                                             ${PROJECT_SOURCE_DIR}/examples/common)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${ARG_LABELS}")
endfunction()
