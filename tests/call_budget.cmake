# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# HIP call budgets per operation (label call-budget): counted on the hip
# test runtime with HL_HIP_TEST_RUNTIME_CALL_COUNTS, as the difference of two
# run lengths (tests/call_budget_test.c). Deterministic counts, not timings.
hl_add_test(call_budget_test
  SOURCES call_budget_test.c
  LABELS call-budget hip
  TIMEOUT 240)
add_dependencies(call_budget_test hl_hip_test_runtime_6_2
  hl_hip_test_runtime_nograph)
target_compile_definitions(call_budget_test PRIVATE
  HL_TRT_NOGRAPH_DIR="${hl_trt_dir}/rocm-6.2-nograph")
set_tests_properties(call_budget_test PROPERTIES
  ENVIRONMENT "LD_LIBRARY_PATH=${hl_trt_dir}/rocm-6.2")

# Lazy device timepoints: an event recorded for a late waiter never marks a
# point before the producer's work (slow streams: the test runtime's delays).
hl_add_test(lazy_timepoint_test
  SOURCES lazy_timepoint_test.c
  LABELS hip timeline concurrency
  TIMEOUT 120)
add_dependencies(lazy_timepoint_test hl_hip_test_runtime_6_2)
set_tests_properties(lazy_timepoint_test PROPERTIES
  ENVIRONMENT "LD_LIBRARY_PATH=${hl_trt_dir}/rocm-6.2;HL_HIP_TEST_RUNTIME_DELAY_US=300")

# The hip backend's completion threads (runtime/timeline/device_completer.c):
# one completer per device, a step thread only for a queue with host calls,
# a host call blocking on another queue, cross-queue chains under random
# stream delays, and HIPLINE_COMPLETER's bad values.
hl_add_test(completer_test
  SOURCES completer_test.c
  LABELS hip timeline concurrency
  TIMEOUT 120)
add_dependencies(completer_test hl_hip_test_runtime_6_2)
set_tests_properties(completer_test PROPERTIES
  ENVIRONMENT "LD_LIBRARY_PATH=${hl_trt_dir}/rocm-6.2;HL_HIP_TEST_RUNTIME_DELAY_US=200")
