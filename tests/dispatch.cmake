# Kernel dispatch (runtime/executable/dispatch.c) and the kernel-backed
# functions. One source, two uses:
# - dispatch_test, on the host backend: every kernel against the host oracle,
#   argument validation, use-after-free in checked mode, the invocation
#   functions, and the per-device module cache;
# - dispatch_gpu_test (requires-gpu): fill/verify/copy/axpy on the hip
#   backend; exits 77 (skipped) without a HIP device.
set(hl_dispatch_test_source ${CMAKE_CURRENT_SOURCE_DIR}/dispatch_test.c)
hl_add_test(dispatch_test
  SOURCES ${hl_dispatch_test_source}
  LABELS dispatch kernels
  TIMEOUT 120)
hl_add_test(dispatch_gpu_test
  SOURCES ${hl_dispatch_test_source}
  LABELS dispatch kernels
  TIMEOUT 120
  GPU)
target_compile_definitions(dispatch_gpu_test PRIVATE HL_DISPATCH_TEST_GPU=1)

# Conformance: dispatch_test is the host copy; dispatch_gpu_test's kernels
# run again on the hip test runtime, which runs the host reference kernels
# named in the embedded code object.
set_property(TEST dispatch_test APPEND PROPERTY LABELS cts)
add_dependencies(dispatch_gpu_test hl_hip_test_runtime_6_2)
add_test(NAME dispatch_gpu_test_hiprt COMMAND dispatch_gpu_test)
set_tests_properties(dispatch_gpu_test_hiprt PROPERTIES
  ENVIRONMENT "${hl_hip_test_runtime_env}"
  LABELS "dispatch;kernels;cts;hip" TIMEOUT 120)
