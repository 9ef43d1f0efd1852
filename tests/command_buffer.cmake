# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Command buffers (runtime/command/): recording, execution, fill elision and
# its exact IREE #6972 cases, bad input, timeline-resource uses; the
# randomized property test (elided == unelided memory); and fork/join
# lifetimes (events and streams come back after fan-out and fan-in).
hl_add_test(command_buffer_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/command_buffer_test.c
  LABELS command_buffer concurrency
  TIMEOUT 120)
hl_add_test(command_buffer_property_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/command_buffer_property_test.c
  LABELS command_buffer
  TIMEOUT 600)
hl_add_test(command_buffer_fork_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/command_buffer_fork_test.c
  LABELS command_buffer concurrency
  TIMEOUT 600)

# Conformance: the same executables on the hip test runtime and on a GPU.
foreach(part "" _property _fork)
  hl_add_cts(command_buffer${part}_test GPU)
endforeach()

# The same on a HIP library without the graph entries: every command buffer
# replays on the stream (runtime/backend/hip/hip_graph.c).
foreach(part "" _property _fork)
  add_test(NAME command_buffer${part}_test_hiprt_nograph
    COMMAND command_buffer${part}_test)
  get_test_property(command_buffer${part}_test_hiprt LABELS labels)
  get_test_property(command_buffer${part}_test_hiprt TIMEOUT timeout)
  add_dependencies(command_buffer${part}_test hl_hip_test_runtime_nograph)
  set_tests_properties(command_buffer${part}_test_hiprt_nograph PROPERTIES
    ENVIRONMENT "LD_LIBRARY_PATH=${hl_trt_dir}/rocm-6.2-nograph;HIPLINE_TEST_BACKEND=hip"
    LABELS "${labels}" TIMEOUT ${timeout})
endforeach()
