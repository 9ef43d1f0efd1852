# The base layer's building blocks that the public API does not show on
# their own: the recyclers behind the allocation-free steady state.
hl_add_test(base_recycler_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/base_recycler_test.c
  LABELS base concurrency
  TIMEOUT 120)
