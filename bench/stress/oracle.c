// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The pattern oracle. With the dispatch API (the normal build) buffers are
// filled by the fill_pattern kernel and checked by verify_pattern into one
// uint32 counter per queue, all in queue order without host waits. A build
// whose runtime lacks dispatch (HL_STRESS_HAVE_DISPATCH=0) writes the same
// pattern from host memory and reads it back for checking, also in queue
// order (host calls free the staging memory and count mismatches).

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bench/stress/stress.h"

#ifndef HL_STRESS_HAVE_DISPATCH
#define HL_STRESS_HAVE_DISPATCH 1
#endif

struct stress_oracle_t {
  hl_queue_t* queues[STRESS_MAX_QUEUES];
  uint32_t queue_count;
  // Dispatch: one zeroed uint32 mismatch counter per queue.
  hl_buffer_t* counters[STRESS_MAX_QUEUES];
  atomic_uint_least64_t host_failures;
  uint64_t verified[STRESS_MAX_QUEUES];
  // Every submission of the run also signals its queue's watch semaphore, so
  // the first failure of any of them (a failed alloca, an injected fault)
  // stays on the semaphore (only the first failure is kept) and is reported.
  hl_semaphore_t* watch[STRESS_MAX_QUEUES];
  uint64_t watch_value[STRESS_MAX_QUEUES];
  hl_fence_t* signal[STRESS_MAX_QUEUES];
  // Set when a signal fence could not be built (reported by collect).
  hl_status_t signal_error;
};

const hl_fence_t* stress_oracle_signal(stress_oracle_t* oracle,
                                       uint32_t queue_index,
                                       const hl_fence_t* also) {
  hl_fence_t* fence = oracle->signal[queue_index];
  hl_fence_clear(fence);
  hl_status_t st = hl_fence_insert(fence, oracle->watch[queue_index],
                                   ++oracle->watch_value[queue_index]);
  if (!st && also) st = hl_fence_join(fence, also);
  if (st) {
    --oracle->watch_value[queue_index];
    if (!oracle->signal_error) {
      oracle->signal_error = st;
    } else {
      hl_status_free(st);
    }
    return also;
  }
  return fence;
}

const char* stress_oracle_kind(void) {
  return HL_STRESS_HAVE_DISPATCH ? "dispatch" : "host-readback";
}

hl_status_t stress_oracle_create(hl_queue_t* const* queues, uint32_t count,
                                 stress_oracle_t** out_oracle) {
  *out_oracle = NULL;
  stress_oracle_t* oracle = calloc(1, sizeof(*oracle));
  if (!oracle) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating the oracle (%zu bytes)", sizeof(*oracle));
  }
  atomic_init(&oracle->host_failures, 0);
  hl_status_t st = NULL;
  for (uint32_t i = 0; i < count && !st; ++i) {
    oracle->queues[i] = queues[i];
    hl_queue_retain(queues[i]);
    oracle->queue_count = i + 1;
    st = hl_semaphore_create(0, hl_allocator_system(), &oracle->watch[i]);
    if (!st) st = hl_fence_create(hl_allocator_system(), &oracle->signal[i]);
    if (!st && HL_STRESS_HAVE_DISPATCH) {
      st = hl_queue_alloca(queues[i], NULL,
                           stress_oracle_signal(oracle, i, NULL), 4, 0,
                           &oracle->counters[i]);
      if (!st) {
        st = hl_queue_fill(queues[i], NULL,
                           stress_oracle_signal(oracle, i, NULL),
                           oracle->counters[i], 0, 4, 0);
      }
    }
  }
  if (st) {
    stress_oracle_destroy(oracle);
    return hl_status_annotate(st, "creating the verification counters");
  }
  *out_oracle = oracle;
  return hl_ok_status();
}

void stress_oracle_destroy(stress_oracle_t* oracle) {
  if (!oracle) return;
  for (uint32_t i = 0; i < oracle->queue_count; ++i) {
    if (oracle->counters[i]) {
      hl_status_ignore(hl_queue_dealloca(oracle->queues[i], NULL, NULL,
                                         oracle->counters[i]));
      hl_buffer_release(oracle->counters[i]);
    }
    hl_queue_release(oracle->queues[i]);
    hl_fence_release(oracle->signal[i]);
    hl_semaphore_release(oracle->watch[i]);
  }
  hl_status_free(oracle->signal_error);
  free(oracle);
}

#if HL_STRESS_HAVE_DISPATCH

hl_status_t stress_oracle_fill(stress_oracle_t* oracle, uint32_t queue_index,
                               const hl_fence_t* wait_fence,
                               const hl_fence_t* signal_fence,
                               hl_buffer_t* buffer, uint32_t seed) {
  return hl_queue_fill_pattern(
      oracle->queues[queue_index], wait_fence,
      stress_oracle_signal(oracle, queue_index, signal_fence), buffer, seed);
}

hl_status_t stress_oracle_verify(stress_oracle_t* oracle, uint32_t queue_index,
                                 const hl_fence_t* wait_fence,
                                 const hl_fence_t* signal_fence,
                                 hl_buffer_t* buffer, uint32_t seed) {
  HL_RETURN_IF_ERROR_PLAIN(hl_queue_verify_pattern(
      oracle->queues[queue_index], wait_fence,
      stress_oracle_signal(oracle, queue_index, signal_fence), buffer, seed,
      oracle->counters[queue_index]));
  ++oracle->verified[queue_index];
  return hl_ok_status();
}

hl_status_t stress_oracle_spin(stress_oracle_t* oracle, uint32_t queue_index,
                               uint64_t ns) {
  return hl_queue_spin(oracle->queues[queue_index], NULL,
                       stress_oracle_signal(oracle, queue_index, NULL), ns);
}

#else  // !HL_STRESS_HAVE_DISPATCH

// The pattern of hl_pattern_value (SplitMix64 finalizer, high half), kept
// here only for runtimes built without dispatch.
static uint32_t stress_pattern_word(uint32_t seed, uint64_t index) {
  uint64_t z = (((uint64_t)seed << 32) ^ index) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (uint32_t)(z >> 32);
}

typedef struct stress_staging_t {
  stress_oracle_t* oracle;
  uint32_t seed;
  uint64_t words;
  uint32_t data[];
} stress_staging_t;

static void stress_staging_free(void* user) { free(user); }

static void stress_staging_check(void* user) {
  stress_staging_t* s = user;
  uint64_t bad = 0;
  for (uint64_t i = 0; i < s->words; ++i) {
    bad += s->data[i] != stress_pattern_word(s->seed, i);
  }
  atomic_fetch_add(&s->oracle->host_failures, bad);
  free(s);
}

static hl_status_t stress_staging_create(stress_oracle_t* oracle,
                                         hl_buffer_t* buffer, uint32_t seed,
                                         stress_staging_t** out) {
  uint64_t words = hl_buffer_length(buffer) / 4;
  stress_staging_t* s = malloc(sizeof(*s) + words * 4);
  if (!s) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating %llu bytes of staging memory",
                          (unsigned long long)(words * 4));
  }
  s->oracle = oracle;
  s->seed = seed;
  s->words = words;
  *out = s;
  return hl_ok_status();
}

hl_status_t stress_oracle_fill(stress_oracle_t* oracle, uint32_t queue_index,
                               const hl_fence_t* wait_fence,
                               const hl_fence_t* signal_fence,
                               hl_buffer_t* buffer, uint32_t seed) {
  stress_staging_t* s = NULL;
  HL_RETURN_IF_ERROR_PLAIN(stress_staging_create(oracle, buffer, seed, &s));
  for (uint64_t i = 0; i < s->words; ++i) {
    s->data[i] = stress_pattern_word(seed, i);
  }
  hl_queue_t* queue = oracle->queues[queue_index];
  hl_status_t st = hl_queue_write(
      queue, wait_fence, stress_oracle_signal(oracle, queue_index, NULL),
      s->data, buffer, 0, s->words * 4);
  if (st) {
    free(s);
    return st;
  }
  return hl_queue_host_call(
      queue, NULL, stress_oracle_signal(oracle, queue_index, signal_fence),
      stress_staging_free, s);
}

hl_status_t stress_oracle_verify(stress_oracle_t* oracle, uint32_t queue_index,
                                 const hl_fence_t* wait_fence,
                                 const hl_fence_t* signal_fence,
                                 hl_buffer_t* buffer, uint32_t seed) {
  stress_staging_t* s = NULL;
  HL_RETURN_IF_ERROR_PLAIN(stress_staging_create(oracle, buffer, seed, &s));
  hl_queue_t* queue = oracle->queues[queue_index];
  hl_status_t st = hl_queue_read(
      queue, wait_fence, stress_oracle_signal(oracle, queue_index, NULL),
      buffer, 0, s->data, s->words * 4);
  if (st) {
    free(s);
    return st;
  }
  HL_RETURN_IF_ERROR_PLAIN(hl_queue_host_call(
      queue, NULL, stress_oracle_signal(oracle, queue_index, signal_fence),
      stress_staging_check, s));
  ++oracle->verified[queue_index];
  return hl_ok_status();
}

static void stress_host_spin(void* user) {
  hl_time_t until = hl_time_now() + (hl_time_t)(uintptr_t)user;
  while (hl_time_now() < until) {
  }
}

hl_status_t stress_oracle_spin(stress_oracle_t* oracle, uint32_t queue_index,
                               uint64_t ns) {
  return hl_queue_host_call(oracle->queues[queue_index], NULL,
                            stress_oracle_signal(oracle, queue_index, NULL),
                            stress_host_spin, (void*)(uintptr_t)ns);
}

#endif  // HL_STRESS_HAVE_DISPATCH

hl_status_t stress_oracle_collect(stress_oracle_t* oracle,
                                  uint64_t* out_failures,
                                  uint64_t* out_verified,
                                  uint64_t* out_unverified) {
  *out_failures = 0;
  *out_verified = 0;
  *out_unverified = 0;
  hl_status_t first = NULL;
  if (oracle->signal_error) {
    first = hl_status_annotate(hl_status_clone(oracle->signal_error),
                               "building a signal fence");
  }
  for (uint32_t i = 0; i < oracle->queue_count; ++i) {
    hl_status_t st = hl_queue_wait_idle(oracle->queues[i], HL_INFINITE_FUTURE);
    uint32_t count = 0;
    if (!st && oracle->counters[i]) {
      st = hl_queue_read(oracle->queues[i], NULL,
                         stress_oracle_signal(oracle, i, NULL),
                         oracle->counters[i], 0, &count, 4);
      if (!st) st = hl_queue_wait_idle(oracle->queues[i], HL_INFINITE_FUTURE);
    }
    // The watch semaphore holds the first failure of any submission of the
    // run on this queue, the counter's own zeroing and read included.
    uint64_t value = 0;
    if (!st) st = hl_semaphore_query(oracle->watch[i], &value);
    if (st) {
      // After a failure the counter is not trustworthy (its zeroing may not
      // have run, a fill may have failed): nothing on this queue counts as
      // verified.
      *out_unverified += oracle->verified[i];
      if (!first) {
        first = hl_status_annotate(st, "queue %u", i);
      } else {
        hl_status_free(st);
      }
      continue;
    }
    *out_failures += count;
    *out_verified += oracle->verified[i];
  }
  if (!first) *out_failures += atomic_load(&oracle->host_failures);
  return first;
}
