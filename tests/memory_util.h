// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Helpers shared by the memory-layer tests (tests/memory_*_test.c): host
// devices with memory options, semaphores and one-pair fences, statistics,
// polling with a deadline, and a host call that blocks a queue until the test
// lets it go.
#ifndef HIPLINE_TESTS_MEMORY_UTIL_H_
#define HIPLINE_TESTS_MEMORY_UTIL_H_

#include <stdatomic.h>

#include "hipline/buffer.h"
#include "hipline/fence.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "hipline/time.h"
#include "runtime/timeline/timeline_internal.h"
#include "tests/test_util.h"

#define MEM_MS ((hl_duration_t)1000000)
#define MEM_DEADLINE() hl_deadline_after(20000 * MEM_MS)

// Device options the memory tests vary; zero means "default".
typedef struct mem_device_config_t {
  hl_fallback_mode_t fallback;
  int checked;  // 0 or 1.
  uint64_t limit_bytes;
  bool threshold_set;
  uint64_t release_threshold;
} mem_device_config_t;

static inline hl_device_t* mem_device_create(const mem_device_config_t* cfg) {
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = hl_test_backend_kind();
  o.checked = 0;
  o.fallback = HL_FALLBACK_FRONTIER;
  if (cfg) {
    if (cfg->fallback != HL_FALLBACK_DEFAULT) o.fallback = cfg->fallback;
    o.checked = cfg->checked;
    o.pool.limit_bytes = cfg->limit_bytes;
    if (cfg->threshold_set) {
      o.pool.release_threshold = cfg->release_threshold;
      o.pool_release_threshold_set = true;
    }
  }
  hl_device_t* d = NULL;
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  return d;
}

static inline void mem_wait(hl_semaphore_t* s, uint64_t v) {
  HL_ASSERT_OK(hl_semaphore_wait(s, v, MEM_DEADLINE()));
}

// Alloca on |q| after |wait_s|@|wait_v| (NULL: no wait), signalling
// |signal_s|@|signal_v| (NULL: none).
static inline hl_buffer_t* mem_alloca(hl_queue_t* q, hl_semaphore_t* wait_s,
                                      uint64_t wait_v, hl_semaphore_t* signal_s,
                                      uint64_t signal_v, uint64_t size) {
  hl_fence_t* w = wait_s ? hl_test_fence(wait_s, wait_v) : NULL;
  hl_fence_t* s = signal_s ? hl_test_fence(signal_s, signal_v) : NULL;
  hl_buffer_t* b = NULL;
  HL_ASSERT_OK(hl_queue_alloca(q, w, s, size, 0, &b));
  hl_fence_release(w);
  hl_fence_release(s);
  assert_non_null(b);
  return b;
}

static inline void mem_dealloca(hl_queue_t* q, hl_semaphore_t* wait_s,
                                uint64_t wait_v, hl_semaphore_t* signal_s,
                                uint64_t signal_v, hl_buffer_t* b) {
  hl_fence_t* w = wait_s ? hl_test_fence(wait_s, wait_v) : NULL;
  hl_fence_t* s = signal_s ? hl_test_fence(signal_s, signal_v) : NULL;
  HL_ASSERT_OK(hl_queue_dealloca(q, w, s, b));
  hl_fence_release(w);
  hl_fence_release(s);
}

// The granule in which the device's pool reserves memory: ROCm's pool (and
// the host pool, and the test runtime's model of ROCm) reserves what each
// allocation asks for, so 0; CUDA's pool, reached through the HIP-on-CUDA
// bridge (tests/hip_cuda_bridge/), reserved 33,554,432 bytes for a 4 KiB
// allocation on an H200. Probed once, on a device of its own: the reserved
// bytes a 4 KiB alloca leaves, counted as a granule when above 64 KiB.
static inline uint64_t mem_pool_granule(void) {
  static int probed = 0;
  static uint64_t granule = 0;
  if (probed) return granule;
  probed = 1;
  if (hl_test_backend_kind() == HL_BACKEND_HOST) return granule;
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = hl_test_backend_kind();
  o.checked = 0;
  hl_device_t* d = NULL;
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  hl_queue_t* q = hl_test_queue_create(d);
  hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, 4096);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  uint64_t reserved = hl_test_memory_stats(d).bytes_reserved;
  mem_dealloca(q, NULL, 0, NULL, 0, b);
  hl_buffer_release(b);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  hl_queue_release(q);
  hl_device_release(d);
  if (reserved > 64 * 1024) granule = reserved;
  if (granule)
    print_message("the device pool reserves %llu-byte granules\n",
                  (unsigned long long)granule);
  return granule;
}

// The bytes the pool reserves for one block of |bytes|: |bytes| on a pool
// that reserves exactly, else rounded up to the granule.
static inline uint64_t mem_reserved_for(uint64_t bytes) {
  uint64_t g = mem_pool_granule();
  return g ? (bytes + g - 1) / g * g : bytes;
}

static inline hl_memory_stats_t mem_queue_stats(hl_queue_t* q) {
  hl_memory_stats_t s;
  HL_ASSERT_OK(hl_queue_memory_stats(q, &s));
  return s;
}

// Polls until *|counter| reaches |value| or |timeout_ms| passes.
static inline bool mem_poll_atomic(atomic_int* counter, int value,
                                   int timeout_ms) {
  hl_time_t deadline = hl_deadline_after(timeout_ms * MEM_MS);
  while (atomic_load(counter) < value) {
    if (hl_time_now() > deadline) return false;
    hl_test_sleep_ms(1);
  }
  return true;
}

// A host call that holds its queue until mem_gate_open (or 10 s pass, so a
// test that never opens fails instead of hanging), optionally sleeping first.
typedef struct mem_gate_t {
  atomic_int started;
  atomic_int open;
  atomic_int done;
  atomic_int timed_out;
  int sleep_ms;  // Sleep this long instead of waiting for open (if > 0).
} mem_gate_t;

static inline void mem_gate_init(mem_gate_t* g, int sleep_ms) {
  atomic_init(&g->started, 0);
  atomic_init(&g->open, 0);
  atomic_init(&g->done, 0);
  atomic_init(&g->timed_out, 0);
  g->sleep_ms = sleep_ms;
}

static inline void mem_gate_fn(void* user) {
  mem_gate_t* g = (mem_gate_t*)user;
  atomic_store(&g->started, 1);
  if (g->sleep_ms > 0) {
    hl_test_sleep_ms(g->sleep_ms);
  } else {
    hl_time_t deadline = hl_deadline_after(10000 * MEM_MS);
    while (!atomic_load(&g->open)) {
      if (hl_time_now() > deadline) {
        atomic_store(&g->timed_out, 1);
        break;
      }
      hl_test_sleep_ms(1);
    }
  }
  atomic_store(&g->done, 1);
}

// Submits the gate on |q| and waits until it runs.
static inline void mem_gate_submit(hl_queue_t* q, mem_gate_t* g) {
  HL_ASSERT_OK(hl_queue_host_call(q, NULL, NULL, mem_gate_fn, g));
  assert_true(mem_poll_atomic(&g->started, 1, 10000));
}

static inline void mem_gate_open(mem_gate_t* g) { atomic_store(&g->open, 1); }

#endif  // HIPLINE_TESTS_MEMORY_UTIL_H_
