# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# hipline-bench-timeline: empty-submission cost and cross-queue ping-pong
# latency, and submitting threads contending on one device or several
# (public API only). Prints a table, or --json.
add_executable(hipline-bench-timeline ${CMAKE_CURRENT_SOURCE_DIR}/timeline_bench.c
  ${CMAKE_CURRENT_SOURCE_DIR}/cpu_placement.c)
target_include_directories(hipline-bench-timeline PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(hipline-bench-timeline PRIVATE hipline::hipline hipline_warnings)

