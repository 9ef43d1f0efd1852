# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# hipline-bench-alloc: host-side cost of a queue_alloca + queue_dealloca pair
# on the host backend, against glibc malloc + free (bench/alloc_bench.c).
add_executable(hipline-bench-alloc ${CMAKE_CURRENT_SOURCE_DIR}/alloc_bench.c
  ${CMAKE_CURRENT_SOURCE_DIR}/cpu_placement.c)
target_include_directories(hipline-bench-alloc PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(hipline-bench-alloc PRIVATE hipline hipline_warnings)
