# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Kernel dispatch (runtime/executable/dispatch.c) and the kernel-backed
# functions: every kernel against the host oracle, argument validation,
# use after free (checked and not), the invocation functions, and the
# per-device module cache. One executable for every backend:
# - dispatch_test on the host backend (cts);
# - dispatch_test_hiprt on the hip test runtime, which runs the host
#   reference kernels named in the embedded code object (two devices, for the
#   cross-device and cache tests);
# - dispatch_gpu_test (requires-gpu) on a real HIP device; exits 77
#   (skipped) without one.
hl_add_test(dispatch_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/dispatch_test.c
  LABELS dispatch kernels
  TIMEOUT 120)
hl_add_cts(dispatch_test)
set_property(TEST dispatch_test_hiprt APPEND PROPERTY ENVIRONMENT
  HL_HIP_TEST_RUNTIME_DEVICES=2)
add_test(NAME dispatch_gpu_test COMMAND dispatch_test)
set_tests_properties(dispatch_gpu_test PROPERTIES
  ENVIRONMENT HIPLINE_TEST_BACKEND=hip SKIP_RETURN_CODE 77
  LABELS "dispatch;kernels;requires-gpu" TIMEOUT 120)
