# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# User executables (hipline/executable.h "User executables",
# hl_queue_dispatch_executable): the user kernel set in tests/user_kernels/
# built by a plain clang for every GPU target in HIPLINE_GPU_TARGETS that it
# can build (code object v4, as the built-in kernels; plus one v5 object for
# the metadata reader), by hipcc as an offload bundle when hipcc builds
# gfx90a, and as a host shared object (its host twin). executable_test runs
# on the host backend and on the hip test runtime, which runs the twin for
# the GPU objects (HL_HIP_TEST_RUNTIME_TWINS).
set(hl_uk_dir ${PROJECT_BINARY_DIR}/user_kernels)
set(hl_uk_source ${CMAKE_CURRENT_SOURCE_DIR}/user_kernels/user_kernels.hip)
file(MAKE_DIRECTORY ${hl_uk_dir})

add_library(hl_user_kernels_host MODULE
  ${CMAKE_CURRENT_SOURCE_DIR}/user_kernels/user_kernels_host.c)
target_include_directories(hl_user_kernels_host PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(hl_user_kernels_host PRIVATE hipline_warnings m)
set_target_properties(hl_user_kernels_host PROPERTIES
  PREFIX "" OUTPUT_NAME user_kernels_host
  LIBRARY_OUTPUT_DIRECTORY ${hl_uk_dir})

# hl_uk_probe(<out> <command...>): TRUE when the command builds the user
# kernels (cached per command line).
function(hl_uk_probe out)
  string(MD5 key "${ARGN}")
  set(var HIPLINE_UK_PROBE_${key})
  if(NOT DEFINED ${var})
    execute_process(COMMAND ${ARGN} -o ${hl_uk_dir}/probe.co
                    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(rc EQUAL 0)
      set(${var} TRUE CACHE INTERNAL "")
    else()
      set(${var} FALSE CACHE INTERNAL "")
    endif()
  endif()
  set(${out} ${${var}} PARENT_SCOPE)
endfunction()

set(hl_uk_outputs "")
set(hl_uk_targets "")
set(hl_uk_v5 "")
set(hl_uk_bundle "")
if(HIPLINE_KERNEL_CLANG AND HIPLINE_KERNEL_CLANG_EXECUTABLE)
  set(hl_uk_clang ${HIPLINE_KERNEL_CLANG_EXECUTABLE} -x hip --cuda-device-only
      -nogpulib -nogpuinc --no-gpu-bundle-output -DHL_KERNELS_FREESTANDING -O3
      -I${PROJECT_SOURCE_DIR})
  hl_distinct_targets(hl_uk_wanted ${HIPLINE_GPU_TARGETS})
  foreach(target ${hl_uk_wanted})
    hl_target_file_stem(stem "${target}")
    set(command ${hl_uk_clang} -mcode-object-version=4 --offload-arch=${target}
        ${hl_uk_source})
    hl_uk_probe(ok ${command})
    if(NOT ok)
      continue()
    endif()
    set(co ${hl_uk_dir}/user_kernels_${stem}.co)
    add_custom_command(OUTPUT ${co} COMMAND ${command} -o ${co}
      DEPENDS ${hl_uk_source} ${PROJECT_SOURCE_DIR}/kernels/device_api.h
      COMMENT "Building user kernels for ${target}" VERBATIM)
    list(APPEND hl_uk_outputs ${co})
    list(APPEND hl_uk_targets ${target})
    if(NOT hl_uk_v5)
      set(hl_uk_v5 ${hl_uk_dir}/user_kernels_${stem}_v5.co)
      add_custom_command(OUTPUT ${hl_uk_v5}
        COMMAND ${hl_uk_clang} -mcode-object-version=5 --offload-arch=${target}
                ${hl_uk_source} -o ${hl_uk_v5}
        DEPENDS ${hl_uk_source} ${PROJECT_SOURCE_DIR}/kernels/device_api.h
        COMMENT "Building user kernels for ${target} (code object v5)" VERBATIM)
      list(APPEND hl_uk_outputs ${hl_uk_v5})
    endif()
  endforeach()
endif()
if(HIPLINE_HIPCC AND HIPLINE_HIPCC_EXECUTABLE)
  set(command ${HIPLINE_HIPCC_EXECUTABLE} --genco -O3 --offload-arch=gfx90a
      -I${PROJECT_SOURCE_DIR} ${hl_uk_source})
  hl_uk_probe(ok ${command})
  if(ok)
    set(hl_uk_bundle ${hl_uk_dir}/user_kernels_hipcc_gfx90a.hipfb)
    add_custom_command(OUTPUT ${hl_uk_bundle} COMMAND ${command} -o ${hl_uk_bundle}
      DEPENDS ${hl_uk_source} ${PROJECT_SOURCE_DIR}/kernels/device_api.h
      COMMENT "Building user kernels with hipcc (offload bundle)" VERBATIM)
    list(APPEND hl_uk_outputs ${hl_uk_bundle})
  endif()
endif()
add_custom_target(hl_user_kernels ALL DEPENDS ${hl_uk_outputs} hl_user_kernels_host)
string(REPLACE ";" "," hl_uk_target_list "${hl_uk_targets}")
set(HIPLINE_USER_KERNEL_TARGETS "${hl_uk_target_list}" CACHE INTERNAL
    "GPU targets the user kernel set is built for (examples/user_kernels.c)")

hl_add_test(executable_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/executable_test.c
  LABELS executable dispatch concurrency
  TIMEOUT 120)
target_include_directories(executable_test SYSTEM PRIVATE ${HIPLINE_MSGPACK_INCLUDE_DIR})
target_link_libraries(executable_test PRIVATE m ${CMAKE_DL_LIBS})
add_dependencies(executable_test hl_user_kernels)
target_compile_definitions(executable_test PRIVATE
  HL_USER_KERNELS_DIR="${hl_uk_dir}"
  HL_USER_KERNELS_HOST="${hl_uk_dir}/user_kernels_host.so"
  HL_USER_KERNEL_TARGETS="${hl_uk_target_list}"
  HL_USER_KERNELS_V5="${hl_uk_v5}"
  HL_USER_KERNELS_BUNDLE="${hl_uk_bundle}")
hl_add_cts(executable_test)
set_property(TEST executable_test_hiprt APPEND PROPERTY ENVIRONMENT
  HL_HIP_TEST_RUNTIME_DEVICES=2
  HL_HIP_TEST_RUNTIME_TWINS=${hl_uk_dir}/user_kernels_host.so)
# Two devices of different targets: each gets its own object, and a device
# whose target no object serves fails with NOT_FOUND.
hl_add_cts_variant(executable_test targets
  HL_HIP_TEST_RUNTIME_TARGETS=gfx90a:sramecc+:xnack-,gfx1100,gfx803
  HL_HIP_TEST_RUNTIME_DEVICES=3)

# Native-stream interop (hl_queue_native_call) on both backends.
hl_add_test(native_call_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/native_call_test.c
  LABELS dispatch executable concurrency
  TIMEOUT 120)
target_link_libraries(native_call_test PRIVATE ${CMAKE_DL_LIBS})
hl_add_cts(native_call_test)

# Command buffers that record user dispatches
# (hl_command_buffer_dispatch_executable) on both backends; on the hip test
# runtime the command buffer is captured into a HIP graph and the twins run.
hl_add_test(command_buffer_executable_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/command_buffer_executable_test.c
  LABELS command_buffer executable dispatch concurrency
  TIMEOUT 120)
target_link_libraries(command_buffer_executable_test PRIVATE m ${CMAKE_DL_LIBS})
add_dependencies(command_buffer_executable_test hl_user_kernels)
target_compile_definitions(command_buffer_executable_test PRIVATE
  HL_USER_KERNELS_DIR="${hl_uk_dir}"
  HL_USER_KERNELS_HOST="${hl_uk_dir}/user_kernels_host.so"
  HL_USER_KERNEL_TARGETS="${hl_uk_target_list}")
hl_add_cts(command_buffer_executable_test)
set_property(TEST command_buffer_executable_test_hiprt APPEND PROPERTY
  ENVIRONMENT HL_HIP_TEST_RUNTIME_TWINS=${hl_uk_dir}/user_kernels_host.so)
