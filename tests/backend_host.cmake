# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Conformance of the host backend (runtime/backend/host/) through the backend
# vtable: pool reuse rules, threshold and trim, limits, events, host
# functions, copies, kernels, live counts, HIPLINE_HOST_DEVICES and faults.
hl_add_test(backend_host_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/backend_host_test.c
  LABELS backend concurrency
  TIMEOUT 60)

# Peers of the host backend: HIPLINE_HOST_PEERS, peer_enable, peer copies
# and cross-device event waits against the pool's dependencies.
hl_add_test(backend_host_peer_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/backend_host_peer_test.c
  LABELS backend concurrency multi-device
  TIMEOUT 60)
