# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Smoke runs of the micro-benchmarks: each case still runs and reports a
# positive figure (the figures themselves are not checked; targets live in
# the benchmarks, not in tests).
if(TARGET hipline-bench-timeline)
  add_test(NAME bench_timeline_smoke
           COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:hipline-bench-timeline>
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/bench_timeline_smoke.cmake)
  set_tests_properties(bench_timeline_smoke PROPERTIES LABELS "tools" TIMEOUT 120)
endif()
if(TARGET hipline-bench-timeline)
  add_test(NAME trace_env_check
           COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:hipline-bench-timeline>
                   -DWORK=${CMAKE_CURRENT_BINARY_DIR}/trace_env_check
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/trace_env_check.cmake)
  set_tests_properties(trace_env_check PROPERTIES LABELS "tools" TIMEOUT 120)
endif()
