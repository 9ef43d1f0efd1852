# Conformance of the host backend (runtime/backend/host/) through the backend
# vtable: pool reuse rules, threshold and trim, limits, events, host
# functions, copies, kernels, live counts, HIPLINE_HOST_DEVICES and faults.
hl_add_test(backend_host_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/backend_host_test.c
  LABELS backend concurrency
  TIMEOUT 60)
