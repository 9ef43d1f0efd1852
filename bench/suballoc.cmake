# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# hipline-bench-suballoc: cost of one alloc + free pair in hipline's
# suballocator itself (runtime/memory/suballocator.h), without submissions
# (bench/suballoc_bench.c).
add_executable(hipline-bench-suballoc
  ${CMAKE_CURRENT_SOURCE_DIR}/suballoc_bench.c)
target_link_libraries(hipline-bench-suballoc PRIVATE hipline hipline_warnings)
target_include_directories(hipline-bench-suballoc PRIVATE ${PROJECT_SOURCE_DIR})
