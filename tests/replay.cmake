# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Allocation-log replay input: the RMM CSV parser (bench/replay_log.c, built
# straight into the test until the benchmark links it) and the trace converter
# tools/hipline-trace-convert.
hl_add_test(replay_log_test
  SOURCES replay_log_test.c ${PROJECT_SOURCE_DIR}/bench/replay_log.c
  LABELS replay TIMEOUT 60)

find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  # Converter unit tests: formats, ordering, refused pickles, bad input.
  add_test(NAME replay_trace_convert_test
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tools/trace_convert_test.py
            ${PROJECT_SOURCE_DIR}/tools/hipline-trace-convert
            $<TARGET_FILE:replay_log_test>
            ${PROJECT_SOURCE_DIR}/bench/testdata)
  # Each case starts the converter; on a loaded machine that adds up.
  set_tests_properties(replay_trace_convert_test PROPERTIES
    LABELS replay TIMEOUT 300)

  # The shared real traces, converted and parsed end to end; skipped (77)
  # where the traces are absent.
  add_test(NAME replay_real_traces
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tools/real_traces_test.py
            --converter ${PROJECT_SOURCE_DIR}/tools/hipline-trace-convert
            --checker $<TARGET_FILE:replay_log_test>
            --traces ${PROJECT_SOURCE_DIR}/../shared/data/traces
            --out ${CMAKE_CURRENT_BINARY_DIR}/replay_traces)
  set_tests_properties(replay_real_traces PROPERTIES
    LABELS replay TIMEOUT 120 SKIP_RETURN_CODE 77)
else()
  message(STATUS "hipline: no Python 3; trace converter tests are not registered")
endif()
