# SPDX-License-Identifier: Apache-2.0
# The GPU bundle: every GPU test (tests/cuda), GPU example (examples/gpu_*) and GPU benchmark
# (benchmarks/cuda) executable of this build, laid out by the target `gpu_bundle` as
#   <AUDIOKV_GPU_BUNDLE_DIR>/bin/      the executables, RUNPATH $ORIGIN/../lib
#   <AUDIOKV_GPU_BUNDLE_DIR>/lib/      the shared libraries they load that a CUDA host may lack
#   <AUDIOKV_GPU_BUNDLE_DIR>/MANIFEST  "<kind> <file in bin/>" lines, kind = test|example|benchmark|probe
# The executables link the static CUDA runtime, so the folder runs from any path on a machine that
# has only the NVIDIA driver (benchmarks/cuda/run_gpu_checks.sh). A target's kind is its
# AUDIOKV_GPU_BUNDLE_KIND property, else the one of its source folder.
# Included from the top-level CMakeLists.txt after every subdirectory, when CUDA is on.

set(AUDIOKV_GPU_BUNDLE_DIR "${PROJECT_BINARY_DIR}/gpu-bundle" CACHE PATH
    "Folder the gpu_bundle target lays the GPU executables out in")

# Appends to `out` every directory below `dir` that was added with add_subdirectory.
function(_audiokv_gpu_bundle_dirs dir out)
  set(_all ${${out}})
  get_property(_subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(_sub IN LISTS _subdirs)
    list(APPEND _all ${_sub})
    _audiokv_gpu_bundle_dirs(${_sub} _all)
  endforeach()
  set(${out} ${_all} PARENT_SCOPE)
endfunction()

function(audiokv_gpu_bundle)
  set(_dirs)
  _audiokv_gpu_bundle_dirs(${PROJECT_SOURCE_DIR} _dirs)
  set(_entries)
  set(_targets)
  foreach(_dir IN LISTS _dirs)
    file(RELATIVE_PATH _rel ${PROJECT_SOURCE_DIR} ${_dir})
    set(_default "")
    if(_rel STREQUAL "tests/cuda")
      set(_default test)
    elseif(_rel STREQUAL "benchmarks/cuda")
      set(_default benchmark)
    elseif(_rel MATCHES "^examples/gpu_")
      set(_default example)
    endif()
    get_property(_dir_targets DIRECTORY ${_dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(_t IN LISTS _dir_targets)
      get_target_property(_type ${_t} TYPE)
      get_target_property(_kind ${_t} AUDIOKV_GPU_BUNDLE_KIND)
      if(NOT _kind)
        set(_kind "${_default}")
      endif()
      if(NOT _type STREQUAL "EXECUTABLE" OR _kind STREQUAL "")
        continue()
      endif()
      # Found at run time in the bundle's lib/; the linker's default new dtags make it a RUNPATH.
      set_property(TARGET ${_t} APPEND PROPERTY BUILD_RPATH "\$ORIGIN/../lib")
      list(APPEND _targets ${_t})
      string(APPEND _entries "  \"${_kind}|$<TARGET_FILE:${_t}>\"\n")
    endforeach()
  endforeach()
  if(NOT _targets)
    message(STATUS "audiokv: no GPU executables configured; no gpu_bundle target")
    return()
  endif()

  # Inputs of the layout script, one file per configuration (generator expressions resolved).
  set(_inputs ${PROJECT_BINARY_DIR}/gpu_bundle_inputs.cmake)
  file(GENERATE OUTPUT ${_inputs} CONTENT
"set(AUDIOKV_GPU_BUNDLE_ENTRIES\n${_entries})
set(AUDIOKV_GPU_BUNDLE_INFO \"CUDA architectures ${CMAKE_CUDA_ARCHITECTURES}, nvcc ${CMAKE_CUDA_COMPILER_VERSION}, ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}, $<CONFIG>\")
set(AUDIOKV_GPU_BUNDLE_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
")
  set(_layout ${PROJECT_SOURCE_DIR}/cmake/gpu_bundle_layout.cmake)
  add_custom_target(gpu_bundle
    COMMAND ${CMAKE_COMMAND} -DAUDIOKV_GPU_BUNDLE_INPUTS=${_inputs}
            -DAUDIOKV_GPU_BUNDLE_DIR=${AUDIOKV_GPU_BUNDLE_DIR} -P ${_layout}
    DEPENDS ${_targets} ${_layout}
    COMMENT "GPU bundle in ${AUDIOKV_GPU_BUNDLE_DIR}"
    VERBATIM)

  # The path run on the GPU host, proven here: lay the already-built executables out, copy the
  # folder to another path, delete the original, run run_gpu_checks.sh on the copy. Without a
  # device every test binary must run and skip, the benchmarks must load, the script exit 0.
  if(AUDIOKV_BUILD_TESTS)
    add_test(NAME gpu_bundle.relocated_run
      COMMAND bash ${PROJECT_SOURCE_DIR}/benchmarks/cuda/check_gpu_bundle.sh
              ${CMAKE_COMMAND} ${_layout} ${_inputs})
    set_tests_properties(gpu_bundle.relocated_run PROPERTIES LABELS ci TIMEOUT 300)
  endif()
endfunction()

audiokv_gpu_bundle()
