# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The hip backend. One source, three uses:
# - backend_hip_probe_test needs no device: availability reporting, creation
#   without a device, error translation and the size map;
# - backend_hip_gpu_test needs a HIP device and exits 77 (skipped) without
#   one;
# - backend_hip_rt{6_2,5_2}_test run the GPU tests, and tests of the ROCm
#   rules the hip backend must respect, on the hip test runtime
#   (tests/hip_test_runtime/, below); they fail rather than skip.
set(hl_backend_hip_test_source ${CMAKE_CURRENT_SOURCE_DIR}/backend_hip_test.c)

hl_add_test(backend_hip_probe_test
  SOURCES ${hl_backend_hip_test_source}
  LABELS backend hip)

hl_add_test(backend_hip_gpu_test
  SOURCES ${hl_backend_hip_test_source}
  LABELS backend hip
  GPU)
target_compile_definitions(backend_hip_gpu_test PRIVATE HL_HIP_TEST_GPU=1)

# The hip test runtime (tests/hip_test_runtime/, test code that never ships):
# an asynchronous libamdhip64.so, built for ROCm 6.2's symbol set and for
# ROCm 5.2's (no hipLaunchHostFunc). A test picks one through
# LD_LIBRARY_PATH; hl_hip_test_runtime_env holds the environment of the
# default (6.2) one for the conformance registrations in other *.cmake files.
set(hl_trt_dir ${PROJECT_BINARY_DIR}/hip_test_runtime)
# hl_trt_library(TARGET DIR MAJOR MINOR [DEFINITIONS...]): one build of the
# hip test runtime, written to ${hl_trt_dir}/DIR/libamdhip64.so.
function(hl_trt_library target dir major minor)
  add_library(${target} SHARED
    ${CMAKE_CURRENT_SOURCE_DIR}/hip_test_runtime/hip_test_runtime.c
    ${CMAKE_CURRENT_SOURCE_DIR}/hip_test_runtime/call_counts.c
    ${CMAKE_CURRENT_SOURCE_DIR}/hip_test_runtime/trt_twins.c
    ${PROJECT_SOURCE_DIR}/kernels/host/host_kernels.c
    ${PROJECT_SOURCE_DIR}/runtime/base/time.c
    # TSan builds: C11 threads on intercepted pthread calls (see the file).
    ${PROJECT_SOURCE_DIR}/runtime/base/tsan_threads.c)
  target_include_directories(${target} PRIVATE
    ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_compile_definitions(${target} PRIVATE
    _GNU_SOURCE HL_TRT_ROCM_MAJOR=${major} HL_TRT_ROCM_MINOR=${minor}
    HIPLINE_STATIC_DEFINE ${ARGN})
  target_compile_options(${target} PRIVATE -fvisibility=hidden)
  target_link_libraries(${target} PRIVATE hipline_warnings
    Threads::Threads ${CMAKE_DL_LIBS})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME amdhip64
    LIBRARY_OUTPUT_DIRECTORY ${hl_trt_dir}/${dir})
endfunction()
foreach(variant 6.2 5.2)
  string(REPLACE "." "_" v ${variant})
  string(REPLACE "." ";" parts ${variant})
  list(GET parts 0 major)
  list(GET parts 1 minor)
  hl_trt_library(hl_hip_test_runtime_${v} rocm-${variant} ${major} ${minor})
endforeach()
# One more: ROCm 6.2's symbol set without the optional graph entries, for
# the command buffer's fallback to stream replay.
hl_trt_library(hl_hip_test_runtime_nograph rocm-6.2-nograph 6 2
  HL_TRT_NO_GRAPH=1)
set(hl_hip_test_runtime_env
  "LD_LIBRARY_PATH=${hl_trt_dir}/rocm-6.2" "HIPLINE_TEST_BACKEND=hip")

# The device tests on the hip test runtime, once per symbol set; they fail
# rather than skip when the runtime does not load.
foreach(variant 6.2 5.2)
  string(REPLACE "." "_" v ${variant})
  set(name backend_hip_rt${v}_test)
  hl_add_test(${name}
    SOURCES ${hl_backend_hip_test_source}
    LABELS backend hip cts)
  target_compile_definitions(${name} PRIVATE
    HL_HIP_TEST_GPU=1 HL_HIP_TEST_EXPECT_DEVICE=1 HL_HIP_TEST_RUNTIME=1
    _GNU_SOURCE)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  add_dependencies(${name} hl_hip_test_runtime_${v})
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "LD_LIBRARY_PATH=${hl_trt_dir}/rocm-${variant};HL_HIP_TEST_RUNTIME_DEVICES=2")
endforeach()

# hl_add_cts(EXE [GPU]): makes EXE a conformance suite. The host copy (EXE
# itself) gets the label cts; a second copy, EXE_hiprt, runs the same
# executable on the hip backend over the hip test runtime (labels: EXE's,
# plus cts and hip; it fails, not skips, when the runtime does not load).
# With GPU, a third copy EXE_hip runs it on a real device (requires-gpu,
# skipped without one).
function(hl_add_cts exe)
  cmake_parse_arguments(C "GPU" "" "" ${ARGN})
  get_test_property(${exe} LABELS labels)
  get_test_property(${exe} TIMEOUT timeout)
  set_property(TEST ${exe} APPEND PROPERTY LABELS cts)
  add_dependencies(${exe} hl_hip_test_runtime_6_2 hl_hip_test_runtime_5_2)
  add_test(NAME ${exe}_hiprt COMMAND ${exe})
  set_tests_properties(${exe}_hiprt PROPERTIES
    ENVIRONMENT "${hl_hip_test_runtime_env}"
    LABELS "${labels};cts;hip" TIMEOUT ${timeout})
  if(C_GPU)
    add_test(NAME ${exe}_hip COMMAND ${exe})
    set_tests_properties(${exe}_hip PROPERTIES
      ENVIRONMENT HIPLINE_TEST_BACKEND=hip SKIP_RETURN_CODE 77
      LABELS "${labels};requires-gpu" TIMEOUT ${timeout})
  endif()
endfunction()

# hl_add_cts_variant(EXE SUFFIX ENV...): one more copy of EXE_hiprt, named
# EXE_hiprt_SUFFIX, with ENV added to the test runtime's environment.
function(hl_add_cts_variant exe suffix)
  get_test_property(${exe}_hiprt ENVIRONMENT env)
  get_test_property(${exe}_hiprt LABELS labels)
  get_test_property(${exe}_hiprt TIMEOUT timeout)
  add_test(NAME ${exe}_hiprt_${suffix} COMMAND ${exe})
  set_tests_properties(${exe}_hiprt_${suffix} PROPERTIES
    ENVIRONMENT "${env};${ARGN}" LABELS "${labels}" TIMEOUT ${timeout})
endfunction()

# The hip test runtime's own rules (callback thread, blocking pageable
# copies, pool reuse, limits, device checks, symbol sets).
hl_add_test(hip_test_runtime_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/hip_test_runtime/hip_test_runtime_test.c
  LABELS backend hip)
target_link_libraries(hip_test_runtime_test PRIVATE hl_hip_test_runtime_6_2
  ${CMAKE_DL_LIBS})
target_compile_definitions(hip_test_runtime_test PRIVATE
  HL_TRT_DIR="${hl_trt_dir}")
add_dependencies(hip_test_runtime_test hl_hip_test_runtime_5_2)
set_tests_properties(hip_test_runtime_test PROPERTIES ENVIRONMENT
  "HL_HIP_TEST_RUNTIME_DEVICES=2;HL_HIP_TEST_RUNTIME_MEMORY_BYTES=1048576")
add_test(NAME hip_test_runtime_test_blocking COMMAND hip_test_runtime_test)
set_tests_properties(hip_test_runtime_test_blocking PROPERTIES
  ENVIRONMENT "HL_HIP_TEST_RUNTIME_BLOCKING_REUSE=1" LABELS "backend;hip"
  TIMEOUT 60)

# The test runtime's call counter (HL_HIP_TEST_RUNTIME_CALL_COUNTS): lines,
# and calls split between the caller's threads and hipline's.
hl_add_test(hip_test_runtime_call_counts_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/hip_test_runtime/call_counts_test.c
  LABELS backend hip call-budget)
target_link_libraries(hip_test_runtime_call_counts_test PRIVATE
  hl_hip_test_runtime_6_2)
target_compile_definitions(hip_test_runtime_call_counts_test PRIVATE
  _GNU_SOURCE)
