# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Packaging tests (label `package`):
#   package.install_and_consume  installs this build tree into a scratch
#     prefix, then builds tests/package/main.c against it with
#     find_package(hipline CONFIG), pkg-config hipline (shared) and
#     pkg-config hipline-static, and runs each program (no LD_LIBRARY_PATH);
#     the installed libhipline.a must hold no LTO bytecode.
#   package.add_subdirectory  builds tests/package/subdirectory (hipline
#     through add_subdirectory) as a Release build with LTO and -Werror,
#     fails on any warning in the build's output, and runs the program.
#
# This file has two modes. Included from tests/CMakeLists.txt it registers the
# test; run with `cmake -P` (as the test does) it performs the check.

if(NOT CMAKE_SCRIPT_MODE_FILE)
  if(NOT HIPLINE_INSTALL)
    return()
  endif()
  # The installed static library was built with the sanitizer; the consumer
  # has to link its runtime too.
  set(hl_package_flags "")
  if(HIPLINE_SANITIZER STREQUAL "address")
    set(hl_package_flags "-fsanitize=address,undefined")
  elseif(HIPLINE_SANITIZER STREQUAL "thread")
    set(hl_package_flags "-fsanitize=thread")
  endif()
  add_test(NAME package.install_and_consume
    COMMAND ${CMAKE_COMMAND}
      -DHL_BUILD_DIR=${PROJECT_BINARY_DIR}
      -DHL_CONFIG=$<CONFIG>
      -DHL_CONSUMER_DIR=${CMAKE_CURRENT_LIST_DIR}/package
      -DHL_WORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/package-test
      -DHL_C_COMPILER=${CMAKE_C_COMPILER}
      -DHL_FLAGS=${hl_package_flags}
      -DHL_VERSION_MAJOR=${PROJECT_VERSION_MAJOR}
      -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(package.install_and_consume PROPERTIES
    LABELS package TIMEOUT 300 RUN_SERIAL ON)
  # Optimized, unsanitized builds only: the check is the Release build's
  # warnings, and the sanitizer builds do not run LTO.
  if(HIPLINE_SANITIZER STREQUAL "")
    add_test(NAME package.add_subdirectory
      COMMAND ${CMAKE_COMMAND}
        -DHL_MODE=subdirectory
        -DHL_SOURCE_DIR=${PROJECT_SOURCE_DIR}
        -DHL_BUILD_DIR=${PROJECT_BINARY_DIR}
        -DHL_CONSUMER_DIR=${CMAKE_CURRENT_LIST_DIR}/package
        -DHL_WORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/package-subdirectory
        -DHL_C_COMPILER=${CMAKE_C_COMPILER}
        -DHL_VERSION_MAJOR=${PROJECT_VERSION_MAJOR}
        -P ${CMAKE_CURRENT_LIST_FILE})
    set_tests_properties(package.add_subdirectory PROPERTIES
      LABELS package TIMEOUT 900 RUN_SERIAL ON)
  endif()
  return()
endif()

# Script mode.
cmake_minimum_required(VERSION 3.20)
foreach(var HL_CONSUMER_DIR HL_WORK_DIR HL_C_COMPILER HL_VERSION_MAJOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "package.cmake: -D${var}=... is required")
  endif()
endforeach()

# Runs a command and stops the test with its output when it fails.
function(hl_package_run what)
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package: ${what} failed (exit ${rc}):\n"
                        "  command: ${ARGN}\n${out}${err}")
  endif()
  message(STATUS "package: ${what}: ok")
  set(hl_package_out "${out}" PARENT_SCOPE)
  set(hl_package_err "${err}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${HL_WORK_DIR})
file(MAKE_DIRECTORY ${HL_WORK_DIR})

if(HL_MODE STREQUAL "subdirectory")
  # Release, LTO, hipline's warnings as errors; GPU code objects off (they
  # are no C and would only add minutes). The link-time warnings of LTO are
  # not errors under -Werror, so the output is searched for any warning.
  set(ENV{CFLAGS} "")
  hl_package_run("configure add_subdirectory consumer (Release)"
    ${CMAKE_COMMAND} -S ${HL_CONSUMER_DIR}/subdirectory -B ${HL_WORK_DIR}/build
    -DHL_SOURCE_DIR=${HL_SOURCE_DIR} -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_C_COMPILER=${HL_C_COMPILER} -DHIPLINE_WERROR=ON
    -DHIPLINE_KERNEL_CLANG=OFF -DHIPLINE_HIPCC=OFF)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${HL_WORK_DIR}/build -j 2
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package: Release build failed (exit ${rc}):\n${out}${err}")
  endif()
  if("${out}${err}" MATCHES "[Ww]arning")
    message(FATAL_ERROR "package: the Release build printed warnings:\n${out}${err}")
  endif()
  message(STATUS "package: Release build (LTO, -Werror) without warnings: ok")
  hl_package_run("run consumer (add_subdirectory)"
    ${HL_WORK_DIR}/build/hipline-consumer)
  if(NOT hl_package_out MATCHES "host backend available")
    message(FATAL_ERROR "package: unexpected consumer output: ${hl_package_out}")
  endif()
  return()
endif()

set(prefix ${HL_WORK_DIR}/prefix)

set(config_args "")
if(HL_CONFIG)
  set(config_args --config ${HL_CONFIG})
endif()
hl_package_run("install into ${prefix}"
  ${CMAKE_COMMAND} --install ${HL_BUILD_DIR} --prefix ${prefix} ${config_args})

foreach(file include/hipline/status.h include/hipline/device.h)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "package: ${file} was not installed")
  endif()
endforeach()
file(GLOB_RECURSE hl_config_files ${prefix}/*/hiplineConfig.cmake)
file(GLOB_RECURSE hl_version_files ${prefix}/*/hiplineConfigVersion.cmake)
file(GLOB_RECURSE hl_pc_files ${prefix}/*/hipline.pc)
file(GLOB_RECURSE hl_pc_static_files ${prefix}/*/hipline-static.pc)
if(NOT hl_config_files OR NOT hl_version_files OR NOT hl_pc_files OR
   NOT hl_pc_static_files)
  message(FATAL_ERROR "package: missing hiplineConfig.cmake, "
                      "hiplineConfigVersion.cmake, hipline.pc or "
                      "hipline-static.pc under ${prefix}")
endif()

# find_package(hipline CONFIG) with a compatible version.
set(consumer_args
  -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_C_COMPILER=${HL_C_COMPILER}
  "-DCMAKE_C_FLAGS=${HL_FLAGS}"
  -DCMAKE_BUILD_TYPE=RelWithDebInfo)
hl_package_run("configure consumer (find_package ${HL_VERSION_MAJOR}.0)"
  ${CMAKE_COMMAND} -S ${HL_CONSUMER_DIR} -B ${HL_WORK_DIR}/cmake-build
  ${consumer_args} -DHL_CONSUMER_VERSION=${HL_VERSION_MAJOR}.0)
hl_package_run("build consumer" ${CMAKE_COMMAND} --build ${HL_WORK_DIR}/cmake-build)
hl_package_run("run consumer (CMake)" ${HL_WORK_DIR}/cmake-build/hipline-consumer)
message(STATUS "package: ${hl_package_out}")
if(NOT hl_package_out MATCHES "host backend available")
  message(FATAL_ERROR "package: unexpected consumer output: ${hl_package_out}")
endif()

# SameMajorVersion: the next major version must not be accepted.
math(EXPR next_major "${HL_VERSION_MAJOR} + 1")
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${HL_CONSUMER_DIR} -B ${HL_WORK_DIR}/cmake-badversion
    ${consumer_args} -DHL_CONSUMER_VERSION=${next_major}.0
  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(rc EQUAL 0)
  message(FATAL_ERROR "package: find_package(hipline ${next_major}.0) "
                      "succeeded; hiplineConfigVersion.cmake must reject it")
endif()
message(STATUS "package: find_package(hipline ${next_major}.0) rejected: ok")

# pkg-config: hipline (shared) and hipline-static. No LD_LIBRARY_PATH: the
# shared one carries an rpath, the static one needs nothing at run time.
find_program(HL_PKG_CONFIG NAMES pkg-config pkgconf)
if(NOT HL_PKG_CONFIG)
  message(FATAL_ERROR "package: pkg-config not found "
                      "(apt-get install pkgconf, or run tools/test.sh)")
endif()
list(GET hl_pc_files 0 hl_pc_file)
get_filename_component(hl_pc_dir ${hl_pc_file} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${hl_pc_dir})
set(ENV{LD_LIBRARY_PATH} "")
separate_arguments(hl_flags UNIX_COMMAND "${HL_FLAGS}")
foreach(pc hipline hipline-static)
  set(static_arg "")
  if(pc STREQUAL "hipline-static")
    set(static_arg --static)
  endif()
  hl_package_run("pkg-config --cflags --libs ${static_arg} ${pc}"
    ${HL_PKG_CONFIG} --cflags --libs ${static_arg} ${pc})
  string(STRIP "${hl_package_out}" hl_pc_flags)
  separate_arguments(hl_pc_flags UNIX_COMMAND "${hl_pc_flags}")
  set(exe ${HL_WORK_DIR}/consumer-${pc})
  hl_package_run("compile and link consumer with ${pc}.pc"
    ${HL_C_COMPILER} -std=c11 ${hl_flags} ${HL_CONSUMER_DIR}/main.c
    ${hl_pc_flags} -o ${exe})
  # hipline's own diagnostics (an LTO link over its bytecode) must not
  # reach a consumer's build.
  if(NOT "${hl_package_out}${hl_package_err}" STREQUAL "")
    message(FATAL_ERROR "package: building against ${pc}.pc printed:\n"
                        "${hl_package_out}${hl_package_err}")
  endif()
  hl_package_run("run consumer (${pc}.pc)" ${exe})
  if(NOT hl_package_out MATCHES "host backend available")
    message(FATAL_ERROR "package: unexpected consumer output: ${hl_package_out}")
  endif()
endforeach()

# The installed static library holds machine code only (no GCC LTO
# sections), unless the build asked for HIPLINE_INSTALL_LTO_BYTECODE.
find_program(HL_READELF NAMES readelf)
file(GLOB_RECURSE hl_archives ${prefix}/*/libhipline.a)
if(HL_READELF AND hl_archives)
  list(GET hl_archives 0 hl_archive)
  hl_package_run("readelf -S libhipline.a" ${HL_READELF} -S -W ${hl_archive})
  if(hl_package_out MATCHES "\\.gnu\\.(debug)?lto_")
    message(FATAL_ERROR "package: ${hl_archive} holds LTO bytecode sections")
  endif()
endif()

# The installed tools run from the prefix (without the path set above).
set(ENV{LD_LIBRARY_PATH} "")
if(EXISTS ${prefix}/bin/hipline-info)
  hl_package_run("installed hipline-info --help" ${prefix}/bin/hipline-info --help)
endif()
