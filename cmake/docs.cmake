# SPDX-License-Identifier: Apache-2.0
# API pages from the headers' Doxygen comments: `cmake --build <dir> --target docs` writes
# <dir>/docs/html/index.html. AUDIOKV_DOXYGEN_CHECK is the Doxyfile of the documentation test
# (same settings, no output, its own warning log), or empty when Doxygen is missing.
find_package(Doxygen QUIET)
set(AUDIOKV_DOXYGEN_CHECK "")
if(NOT DOXYGEN_FOUND)
  message(STATUS "audiokv: Doxygen not found; no `docs` target (apt-get install doxygen)")
  return()
endif()

set(AUDIOKV_DOCS_OUTPUT ${PROJECT_BINARY_DIR}/docs)
set(AUDIOKV_DOCS_HTML YES)
set(AUDIOKV_DOCS_WARN_LOG ${PROJECT_BINARY_DIR}/docs/doxygen-warnings.log)
configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${PROJECT_BINARY_DIR}/docs/Doxyfile @ONLY)
add_custom_target(docs
  COMMAND Doxygen::doxygen ${PROJECT_BINARY_DIR}/docs/Doxyfile
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
  COMMENT "API pages: ${PROJECT_BINARY_DIR}/docs/html/index.html"
  VERBATIM)

set(AUDIOKV_DOCS_OUTPUT ${PROJECT_BINARY_DIR}/docs-check)
set(AUDIOKV_DOCS_HTML NO)
set(AUDIOKV_DOCS_WARN_LOG ${PROJECT_BINARY_DIR}/docs-check/doxygen-warnings.log)
file(MAKE_DIRECTORY ${AUDIOKV_DOCS_OUTPUT})
set(AUDIOKV_DOXYGEN_CHECK ${PROJECT_BINARY_DIR}/docs-check/Doxyfile)
configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${AUDIOKV_DOXYGEN_CHECK} @ONLY)
