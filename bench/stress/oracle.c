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
  uint64_t verified;
};

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
    if (HL_STRESS_HAVE_DISPATCH) {
      st = hl_queue_alloca(queues[i], NULL, NULL, 4, 0, &oracle->counters[i]);
      if (!st) {
        st = hl_queue_fill(queues[i], NULL, NULL, oracle->counters[i], 0, 4, 0);
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
  }
  free(oracle);
}

#if HL_STRESS_HAVE_DISPATCH

hl_status_t stress_oracle_fill(stress_oracle_t* oracle, uint32_t queue_index,
                               const hl_fence_t* wait_fence,
                               const hl_fence_t* signal_fence,
                               hl_buffer_t* buffer, uint32_t seed) {
  return hl_queue_fill_pattern(oracle->queues[queue_index], wait_fence,
                               signal_fence, buffer, seed);
}

hl_status_t stress_oracle_verify(stress_oracle_t* oracle, uint32_t queue_index,
                                 const hl_fence_t* wait_fence,
                                 const hl_fence_t* signal_fence,
                                 hl_buffer_t* buffer, uint32_t seed) {
  ++oracle->verified;
  return hl_queue_verify_pattern(oracle->queues[queue_index], wait_fence,
                                 signal_fence, buffer, seed,
                                 oracle->counters[queue_index]);
}

hl_status_t stress_oracle_spin(stress_oracle_t* oracle, uint32_t queue_index,
                               uint64_t ns) {
  return hl_queue_spin(oracle->queues[queue_index], NULL, NULL, ns);
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
  hl_status_t st =
      hl_queue_write(queue, wait_fence, NULL, s->data, buffer, 0, s->words * 4);
  if (st) {
    free(s);
    return st;
  }
  return hl_queue_host_call(queue, NULL, signal_fence, stress_staging_free, s);
}

hl_status_t stress_oracle_verify(stress_oracle_t* oracle, uint32_t queue_index,
                                 const hl_fence_t* wait_fence,
                                 const hl_fence_t* signal_fence,
                                 hl_buffer_t* buffer, uint32_t seed) {
  stress_staging_t* s = NULL;
  HL_RETURN_IF_ERROR_PLAIN(stress_staging_create(oracle, buffer, seed, &s));
  hl_queue_t* queue = oracle->queues[queue_index];
  hl_status_t st =
      hl_queue_read(queue, wait_fence, NULL, buffer, 0, s->data, s->words * 4);
  if (st) {
    free(s);
    return st;
  }
  ++oracle->verified;
  return hl_queue_host_call(queue, NULL, signal_fence, stress_staging_check, s);
}

static void stress_host_spin(void* user) {
  hl_time_t until = hl_time_now() + (hl_time_t)(uintptr_t)user;
  while (hl_time_now() < until) {
  }
}

hl_status_t stress_oracle_spin(stress_oracle_t* oracle, uint32_t queue_index,
                               uint64_t ns) {
  return hl_queue_host_call(oracle->queues[queue_index], NULL, NULL,
                            stress_host_spin, (void*)(uintptr_t)ns);
}

#endif  // HL_STRESS_HAVE_DISPATCH

hl_status_t stress_oracle_collect(stress_oracle_t* oracle,
                                  uint64_t* out_failures,
                                  uint64_t* out_verified) {
  *out_failures = 0;
  *out_verified = oracle->verified;
  for (uint32_t i = 0; i < oracle->queue_count; ++i) {
    HL_RETURN_IF_ERROR(
        hl_queue_wait_idle(oracle->queues[i], HL_INFINITE_FUTURE),
        "waiting for queue %u", i);
    if (!oracle->counters[i]) continue;
    uint32_t count = 0;
    HL_RETURN_IF_ERROR(hl_queue_read(oracle->queues[i], NULL, NULL,
                                     oracle->counters[i], 0, &count, 4),
                       "reading the mismatch counter of queue %u", i);
    HL_RETURN_IF_ERROR(
        hl_queue_wait_idle(oracle->queues[i], HL_INFINITE_FUTURE),
        "waiting for queue %u", i);
    *out_failures += count;
  }
  *out_failures += atomic_load(&oracle->host_failures);
  return hl_ok_status();
}
