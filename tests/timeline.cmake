# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The timeline layer (runtime/timeline/) on the host backend: semaphores and
# host waits, queues (parking, elision, failure propagation, leaks) and a
# randomized multi-queue DAG under injected stream delays.
# _GNU_SOURCE: RUSAGE_THREAD for the CPU-use checks (tests/test_util.h).
foreach(part semaphore queue quiet stress)
  hl_add_test(timeline_${part}_test
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_${part}_test.c
    LABELS timeline concurrency
    TIMEOUT 120)
  target_compile_definitions(timeline_${part}_test PRIVATE _GNU_SOURCE)
endforeach()

# The same scenarios on the hip backend: labelled requires-gpu, skipped (77)
# without a device. Tests that need host-backend internals skip themselves.
foreach(part semaphore queue)
  add_test(NAME timeline_${part}_test_hip COMMAND timeline_${part}_test)
  set_tests_properties(timeline_${part}_test_hip PROPERTIES
    ENVIRONMENT HIPLINE_TEST_BACKEND=hip SKIP_RETURN_CODE 77 TIMEOUT 120
    LABELS "timeline;requires-gpu")
endforeach()

# Conformance: the same executables on the hip test runtime (the real-GPU
# copies are the requires-gpu registrations above).
foreach(part semaphore queue quiet stress)
  hl_add_cts(timeline_${part}_test)
endforeach()
# The stress test's delays come from the test runtime on hip.
set_property(TEST timeline_stress_test_hiprt APPEND PROPERTY
  ENVIRONMENT HL_HIP_TEST_RUNTIME_DELAY_US=200)

# Conformance: work whose wait chain failed is never issued (every kind of
# tail, chains over two and three queues, fences where one wait fails), and
# released queues give their streams back. On the hip test runtime with 16
# streams at most: the create/release loop runs 96 queues.
hl_add_test(timeline_cancel_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_cancel_test.c
  LABELS timeline concurrency
  TIMEOUT 120)
hl_add_cts(timeline_cancel_test)
set_property(TEST timeline_cancel_test_hiprt APPEND PROPERTY
  ENVIRONMENT HL_HIP_TEST_RUNTIME_MAX_STREAMS=16)
