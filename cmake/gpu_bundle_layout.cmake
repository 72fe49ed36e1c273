# SPDX-License-Identifier: Apache-2.0
# Lays out the GPU bundle (cmake/gpu_bundle.cmake) from already-built executables:
#   cmake -DAUDIOKV_GPU_BUNDLE_INPUTS=<build>/gpu_bundle_inputs.cmake -DAUDIOKV_GPU_BUNDLE_DIR=<dir>
#         -P cmake/gpu_bundle_layout.cmake
# Copies the executables to <dir>/bin, every shared library they load except the C library family
# and the NVIDIA driver to <dir>/lib (under the name the loader asks for), and writes
# <dir>/MANIFEST. Only bin/, lib/ and MANIFEST inside <dir> are replaced.
cmake_minimum_required(VERSION 3.25)

foreach(_var AUDIOKV_GPU_BUNDLE_INPUTS AUDIOKV_GPU_BUNDLE_DIR)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "gpu_bundle_layout: -D${_var}=... is required")
  endif()
endforeach()
include(${AUDIOKV_GPU_BUNDLE_INPUTS})
set(_dir ${AUDIOKV_GPU_BUNDLE_DIR})

set(_exes)
set(_lines)
foreach(_entry IN LISTS AUDIOKV_GPU_BUNDLE_ENTRIES)
  string(REPLACE "|" ";" _pair "${_entry}")
  list(GET _pair 0 _kind)
  list(GET _pair 1 _file)
  if(NOT EXISTS ${_file})
    message(FATAL_ERROR "gpu_bundle_layout: ${_file} is not built; build the target gpu_bundle "
                        "(cmake --build <build> --target gpu_bundle)")
  endif()
  get_filename_component(_name ${_file} NAME)
  list(APPEND _exes ${_file})
  string(APPEND _lines "${_kind} ${_name}\n")
endforeach()

# Not bundled: the C library family and the dynamic loader (every glibc host has them, and they
# must match the host's kernel interface) and the NVIDIA driver (libcuda, loaded by the static
# CUDA runtime at run time). Everything else (libstdc++, libgcc_s, Google Benchmark, ...) travels.
file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES ${_exes}
  RESOLVED_DEPENDENCIES_VAR _resolved
  UNRESOLVED_DEPENDENCIES_VAR _unresolved
  PRE_EXCLUDE_REGEXES
    "^ld-linux" "^linux-vdso" "^lib(c|m|dl|pthread|rt|resolv|util)\\.so" "^libcuda\\.so"
    "^libnvidia-"
  POST_EXCLUDE_REGEXES "^/lib(64)?/ld-linux")
if(_unresolved)
  message(FATAL_ERROR "gpu_bundle_layout: unresolved shared libraries: ${_unresolved}")
endif()

file(REMOVE_RECURSE ${_dir}/bin ${_dir}/lib ${_dir}/MANIFEST)
file(MAKE_DIRECTORY ${_dir}/bin ${_dir}/lib)
file(COPY ${_exes} DESTINATION ${_dir}/bin)
set(_libs "")
foreach(_lib IN LISTS _resolved)
  # The resolved path carries the name the loader looks for (the soname link); copy its target.
  get_filename_component(_soname ${_lib} NAME)
  file(REAL_PATH ${_lib} _real)
  file(COPY_FILE ${_real} ${_dir}/lib/${_soname})
  string(APPEND _libs "lib ${_soname}\n")
endforeach()

set(_commit "unknown")
find_program(_git git)
if(_git AND DEFINED AUDIOKV_GPU_BUNDLE_SOURCE_DIR)
  execute_process(COMMAND ${_git} -C ${AUDIOKV_GPU_BUNDLE_SOURCE_DIR} describe --always --dirty --abbrev=12
                  OUTPUT_VARIABLE _commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
string(TIMESTAMP _now "%Y-%m-%dT%H:%M:%SZ" UTC)
file(WRITE ${_dir}/MANIFEST
  "# audiokv GPU bundle: <kind> <file>; kinds test|example|benchmark|probe in bin/, lib in lib/\n"
  "# built ${_now} from commit ${_commit}; ${AUDIOKV_GPU_BUNDLE_INFO}\n"
  "${_lines}${_libs}")
list(LENGTH _exes _n_exes)
list(LENGTH _resolved _n_libs)
message(STATUS "gpu_bundle: ${_n_exes} executables, ${_n_libs} libraries in ${_dir}")
