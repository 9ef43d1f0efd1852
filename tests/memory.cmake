# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The memory layer (runtime/memory/) on the host backend through the public
# API: queue_alloca/queue_dealloca, misuse and failure paths, cross-queue pool
# reuse, fallback release, pool limits/threshold/trim, statistics, and a
# multi-threaded stress run under injected stream delays.
foreach(part alloca misuse pool peak)
  hl_add_test(memory_${part}_test
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/memory_${part}_test.c
    LABELS memory
    TIMEOUT 120)
endforeach()
hl_add_test(memory_stress_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/memory_stress_test.c
  LABELS memory concurrency
  TIMEOUT 120)
# The fallback release: escape, ordered (never early), device-sync's drain.
hl_add_test(memory_fallback_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/memory_fallback_test.c
  LABELS memory concurrency
  TIMEOUT 120)
# hipline's suballocator (runtime/memory/suballocator.h): unit tests against
# a host backend, a randomized run against a reference model, and
# queue_alloca with HIPLINE_ALLOCATOR=hipline across queues (checked mode
# where the backend has it).
hl_add_test(memory_suballoc_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/memory_suballoc_test.c
  LABELS memory concurrency
  TIMEOUT 120)
# The suballocator's per-queue caches, alone and through queue_alloca on the
# host backend.
hl_add_test(memory_cache_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/memory_cache_test.c
  LABELS memory concurrency
  TIMEOUT 120)

# Conformance: the same executables on the hip test runtime and on a GPU
# (the suballocator's unit tests run against a host backend in every copy).
foreach(part alloca misuse pool stress fallback suballoc)
  hl_add_cts(memory_${part}_test GPU)
endforeach()
# ROCm's pool may block hipMallocAsync until a freed block's last use has
# run (HL_HIP_TEST_RUNTIME_BLOCKING_REUSE models it). While backend calls
# were made under the scheduler lock, that deadlocked: the completion that
# unblocks it needed the lock.
foreach(part alloca stress)
  hl_add_cts_variant(memory_${part}_test blocking
    HL_HIP_TEST_RUNTIME_BLOCKING_REUSE=1)
endforeach()

# The fast path's allocation-free steady state: malloc, calloc and realloc
# are wrapped at link time and counted (host backend; skips under ASan).
hl_add_test(memory_steady_state_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/memory_steady_state_test.c
  LABELS memory
  TIMEOUT 120)
target_link_options(memory_steady_state_test PRIVATE
  -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc)

# The memory history's PyTorch snapshot (hl_memory_history_begin/end); its
# content is checked by memory_history_check.py.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  hl_add_test(memory_history_test
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/memory_history_test.c
    LABELS memory
    TIMEOUT 120)
  target_compile_definitions(memory_history_test PRIVATE
    HL_TEST_PYTHON="${Python3_EXECUTABLE}"
    HL_TEST_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    HL_TEST_WORK_DIR="${CMAKE_CURRENT_BINARY_DIR}")
endif()

# Cross-queue reuse behind the wait frontier (both allocators), as a
# conformance suite.
hl_add_test(memory_reuse_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/memory_reuse_test.c
  LABELS memory concurrency
  TIMEOUT 120)
hl_add_cts(memory_reuse_test GPU)
