# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The invocation layer (runtime/invocation/) on the host backend in checked
# mode: import of results (async/sync, safety net, the assume_no_alias
# hazard), settings precedence (environment cases in child processes),
# chaining across queues, bad input, and concurrent invocations.
foreach(part import settings chain errors)
  hl_add_test(invocation_${part}_test
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/invocation_${part}_test.c
    LABELS invocation
    TIMEOUT 120)
endforeach()
hl_add_test(invocation_concurrency_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/invocation_concurrency_test.c
  LABELS invocation concurrency
  TIMEOUT 120)

# Conformance: the same executables on the hip test runtime and on a GPU.
foreach(part import settings chain errors concurrency)
  hl_add_cts(invocation_${part}_test GPU)
endforeach()
# See memory.cmake: blocking pool reuse, as ROCm may do it.
hl_add_cts_variant(invocation_chain_test blocking
  HL_HIP_TEST_RUNTIME_BLOCKING_REUSE=1)
