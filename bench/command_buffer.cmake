# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# hipline-bench-command-buffer: per-operation host cost of N small operations
# issued one by one against the same N in a command buffer, and a padding
# workload reporting bytes not filled (host backend, public API only).
add_executable(hipline-bench-command-buffer ${CMAKE_CURRENT_SOURCE_DIR}/command_buffer_bench.c)
target_link_libraries(hipline-bench-command-buffer PRIVATE hipline::hipline hipline_warnings)
