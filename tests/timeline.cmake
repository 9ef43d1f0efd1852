# The timeline layer (runtime/timeline/) on the host backend: semaphores and
# host waits, queues (parking, elision, failure propagation, leaks) and a
# randomized multi-queue DAG under injected stream delays.
# _GNU_SOURCE: RUSAGE_THREAD for the CPU-use checks (tests/test_util.h).
foreach(part semaphore queue stress)
  hl_add_test(timeline_${part}_test
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_${part}_test.c
    LABELS timeline concurrency
    TIMEOUT 120)
  target_compile_definitions(timeline_${part}_test PRIVATE _GNU_SOURCE)
endforeach()
