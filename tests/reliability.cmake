# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Reliability (tests/reliability_*_test.c, tests/bad_input_test.c): fault
# injection through HIPLINE_FAULTS, shutdown with work in flight, a bounded
# soak with flat-memory checks, and the bad-input table of every public
# function. The libFuzzer harnesses live in fuzz/ (see docs/reliability.md).
hl_add_test(reliability_faults_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/reliability_faults_test.c
  LABELS reliability TIMEOUT 120)

# The bad-input table also covers dispatch.h once the runtime implements it.
file(GLOB_RECURSE hl_rel_runtime_sources CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/runtime/*.c)
set(hl_rel_have_dispatch 0)
foreach(src ${hl_rel_runtime_sources})
  file(STRINGS ${src} hl_rel_hits REGEX "^hl_status_t hl_queue_fill_pattern\\(")
  if(hl_rel_hits)
    set(hl_rel_have_dispatch 1)
  endif()
endforeach()
hl_add_test(bad_input_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/bad_input_test.c
  LABELS reliability TIMEOUT 120)
target_compile_definitions(bad_input_test PRIVATE
  HL_TEST_HAVE_DISPATCH=${hl_rel_have_dispatch})

# The bounded soak (15 s; HL_SOAK_SECONDS or --seconds for a long run).
hl_add_test(reliability_soak_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/reliability_soak_test.c
  LABELS reliability soak TIMEOUT 120)

# Shutdown with work in flight (each scenario in a child under alarm()).
hl_add_test(reliability_shutdown_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/reliability_shutdown_test.c
  LABELS reliability TIMEOUT 120)

# Conformance: fault handling and shutdown on the hip test runtime and on a
# GPU too (what counts HIPLINE_FAULTS injections skips where the backend
# does not inject: hl_test_require_fault_injection). The soak stays host-only.
foreach(part faults shutdown)
  hl_add_cts(reliability_${part}_test GPU)
endforeach()
