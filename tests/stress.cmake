# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# hipline-stress checks (tests/stress_check.py): the assume_no_alias
# precedence on the serving workload, the JSON of a policy matrix, checked
# mode, replay of the shared traces (skipped, 77, where they are absent) and
# of a small CSV, malformed logs, bad flag values, and tools/hipline-plot.
if(TARGET hipline-stress)
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_Interpreter_FOUND)
    foreach(case env-no-alias-0 no-alias-1 matrix-json checked escape replay-traces
                 replay-csv malformed-log bad-flags plot
                 silent-failures interrupt interrupt-convert outputs parsing
                 plot-input terminal memory-counters memory-snapshot
                 plot-memory table-width tp)
      add_test(NAME stress_${case}
        COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/stress_check.py
                --stress $<TARGET_FILE:hipline-stress>
                --work ${CMAKE_CURRENT_BINARY_DIR}/stress
                --traces ${PROJECT_SOURCE_DIR}/../shared/data/traces
                --plot ${PROJECT_SOURCE_DIR}/tools/hipline-plot
                ${case})
      set_tests_properties(stress_${case} PROPERTIES
        LABELS stress TIMEOUT 240 SKIP_RETURN_CODE 77)
    endforeach()
  else()
    message(STATUS "hipline: no Python 3; hipline-stress checks are not registered")
  endif()
endif()

# Trace capture: growth, counted drops, concurrent recording, a second end
# that writes nothing, a failed write (runtime/base/trace.c).
hl_add_test(stress_trace_capture_test
  SOURCES stress_trace_capture_test.c
  LABELS stress concurrency)

if(TEST stress_tp)
  set_property(TEST stress_tp APPEND PROPERTY LABELS multi-device)
endif()
