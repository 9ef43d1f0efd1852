# Packaging test (label `package`): installs this build tree into a scratch
# prefix, then builds tests/package/ against it twice, once with
# find_package(hipline CONFIG) and once with pkg-config, and runs both.
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
  return()
endif()

# Script mode.
cmake_minimum_required(VERSION 3.20)
foreach(var HL_BUILD_DIR HL_CONSUMER_DIR HL_WORK_DIR HL_C_COMPILER HL_VERSION_MAJOR)
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
endfunction()

set(prefix ${HL_WORK_DIR}/prefix)
file(REMOVE_RECURSE ${HL_WORK_DIR})
file(MAKE_DIRECTORY ${HL_WORK_DIR})

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
if(NOT hl_config_files OR NOT hl_version_files OR NOT hl_pc_files)
  message(FATAL_ERROR "package: missing hiplineConfig.cmake, "
                      "hiplineConfigVersion.cmake or hipline.pc under ${prefix}")
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

# pkg-config.
find_program(HL_PKG_CONFIG NAMES pkg-config pkgconf)
if(NOT HL_PKG_CONFIG)
  message(FATAL_ERROR "package: pkg-config not found "
                      "(apt-get install pkgconf, or run tools/test.sh)")
endif()
list(GET hl_pc_files 0 hl_pc_file)
get_filename_component(hl_pc_dir ${hl_pc_file} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${hl_pc_dir})
hl_package_run("pkg-config --cflags --libs hipline"
  ${HL_PKG_CONFIG} --cflags --libs hipline)
string(STRIP "${hl_package_out}" hl_pc_flags)
separate_arguments(hl_pc_flags UNIX_COMMAND "${hl_pc_flags}")
separate_arguments(hl_flags UNIX_COMMAND "${HL_FLAGS}")
hl_package_run("compile consumer with pkg-config flags"
  ${HL_C_COMPILER} -std=c11 ${hl_flags} ${HL_CONSUMER_DIR}/main.c
  ${hl_pc_flags} -o ${HL_WORK_DIR}/hipline-consumer-pc)
# pkg-config gives no rpath; a shared libhipline is found through the path.
get_filename_component(hl_libdir ${hl_pc_dir} DIRECTORY)
set(ENV{LD_LIBRARY_PATH} "${hl_libdir}:$ENV{LD_LIBRARY_PATH}")
hl_package_run("run consumer (pkg-config)" ${HL_WORK_DIR}/hipline-consumer-pc)

# The installed tools run from the prefix (without the path set above).
set(ENV{LD_LIBRARY_PATH} "")
if(EXISTS ${prefix}/bin/hipline-info)
  hl_package_run("installed hipline-info --help" ${prefix}/bin/hipline-info --help)
endif()
