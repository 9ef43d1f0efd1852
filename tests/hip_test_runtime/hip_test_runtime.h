// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The hip test runtime: a libamdhip64.so for tests, never shipped.
//
// tests/hip_test_runtime/hip_test_runtime.c is an asynchronous model of the
// part of HIP that hipline uses (runtime/backend/hip/dynamic_symbol_table.h),
// built twice by tests/backend_hip.cmake:
// - build/hip_test_runtime/rocm-6.2/libamdhip64.so: the ROCm >= 5.4 symbol
//   set (hipLaunchHostFunc exported), pool reuse within 12.5% of the size;
// - build/hip_test_runtime/rocm-5.2/libamdhip64.so: ROCm 5.2's set (no
//   hipLaunchHostFunc; hipStreamAddCallback only), reuse of any block at
//   least as large as asked.
// A test selects one by putting its directory first in LD_LIBRARY_PATH (a
// symbol cannot be hidden from dlsym by an environment variable).
//
// Environment variables read once, at the first call (an unknown value
// prints what was wrong and aborts):
//   HL_HIP_TEST_RUNTIME_DEVICES       devices, 1..4 (default 1)
//   HL_HIP_TEST_RUNTIME_MEMORY_BYTES  device memory per device (default 1 GiB):
//                                     allocations past it fail with
//                                     hipErrorOutOfMemory
//   HL_HIP_TEST_RUNTIME_DELAY_US      each stream operation sleeps a random
//                                     0..N microseconds before it runs
//                                     (default 0)
//   HL_HIP_TEST_RUNTIME_VERSION       the version hipRuntimeGetVersion reports,
//                                     "MAJOR.MINOR" (default: the build's)
//   HL_HIP_TEST_RUNTIME_BLOCKING_REUSE  1: reusing a freed block waits for its
//                                     free to execute, as clr's
//                                     Heap::RemoveMemory does (ts->Wait())
//                                     from ROCm 6.2 (default 0)
//   HL_HIP_TEST_RUNTIME_PEERS         which devices can access each other:
//                                     all (default), none, or pairs
//                                     "0-1,2-3" (both ways)
//   HL_HIP_TEST_RUNTIME_MAX_STREAMS   live streams, 1..256 (default 256): a
//                                     hipStreamCreateWithFlags past it fails
//                                     with hipErrorOutOfMemory; a stream
//                                     counts until hipStreamDestroy returns
//
// Graphs: hipStreamBeginCapture (any mode) makes the stream add each kernel,
// copy and memset to a graph instead of running it; what a graph of hipline's
// cannot hold (events, host functions, allocation, synchronization, a
// pageable copy) is refused with hipErrorStreamCaptureUnsupported. An
// executable graph's launch enqueues a copy of the nodes, in order, on the
// stream, where they run as any operation.
//
// Besides the HIP entry points it exports hlTestRuntimeGetCounters, which
// tests use to see what the backend asked of the runtime.
#ifndef HIPLINE_TESTS_HIP_TEST_RUNTIME_HIP_TEST_RUNTIME_H_
#define HIPLINE_TESTS_HIP_TEST_RUNTIME_HIP_TEST_RUNTIME_H_

#include <stdint.h>

typedef struct hl_trt_counters_t {
  int64_t timed_events_created;  // Events created without DisableTiming.
  int64_t events_created;
  int64_t blocking_copies;  // hipMemcpyAsync calls that waited (pageable).
  int64_t async_copies;
  int64_t host_callbacks;  // Host functions and stream callbacks run.
  int64_t pool_reuses;     // Allocations served from a freed block.
  int64_t unsafe_reuses;   // Reuses of a block whose free had not executed.
  int64_t live_streams;
  int64_t live_events;
  int64_t live_pinned;         // hipHostMalloc blocks not yet freed.
  int64_t event_synchronizes;  // hipEventSynchronize calls.
  int64_t live_graphs;         // Graphs and executable graphs not destroyed.
  int64_t graph_launches;
  int64_t peer_copies;         // hipMemcpyPeerAsync calls enqueued.
  int64_t peer_faults;         // Accesses refused: memory not reachable.
  int64_t cross_device_waits;  // hipStreamWaitEvent on another device's event.
} hl_trt_counters_t;

typedef void (*hl_trt_get_counters_fn_t)(hl_trt_counters_t* out);
#define HL_TRT_GET_COUNTERS_SYMBOL "hlTestRuntimeGetCounters"

#endif  // HIPLINE_TESTS_HIP_TEST_RUNTIME_HIP_TEST_RUNTIME_H_
