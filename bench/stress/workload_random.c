// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// random: allocation churn on one queue.
//
// 2N steps. A step allocates with probability 0.73 while fewer than N
// allocations are live and live bytes are under the cap; otherwise it frees
// a uniformly random live allocation. Sizes are uniform in [1, max-size];
// the buffer is the size rounded up to a multiple of 4 so the whole of it
// holds the pattern. Every allocation is filled with its own seed and one in
// four is verified just before its free. With --duration the steps go on
// until the time is up.

#include <stdlib.h>
#include <string.h>

#include "bench/stress/stress.h"

#define RANDOM_DEFAULT_N 16000
#define RANDOM_DEFAULT_MAX_SIZE (64 * 1024)
#define RANDOM_ALLOC_PROBABILITY 0.73
#define RANDOM_VERIFY_PROBABILITY 0.25

typedef struct random_live_t {
  hl_buffer_t* buffer;
  uint32_t seed;
  uint64_t bytes;
} random_live_t;

static hl_status_t random_free_one(stress_run_t* run, random_live_t* live,
                                   uint64_t* live_bytes, bool verify) {
  hl_status_t st = NULL;
  if (verify) {
    st = stress_oracle_verify(run->oracle, 0, NULL, NULL, live->buffer,
                              live->seed);
  }
  *live_bytes -= live->bytes;
  hl_buffer_t* buffer = live->buffer;
  live->buffer = NULL;
  return hl_status_join(st, stress_run_free(run, 0, buffer));
}

hl_status_t stress_workload_random(const stress_options_t* options,
                                   const stress_policy_t* policy,
                                   stress_result_t* result) {
  result->workload = STRESS_WORKLOAD_RANDOM;
  uint64_t n = options->iterations ? options->iterations : RANDOM_DEFAULT_N;
  uint64_t max_size =
      options->max_size ? options->max_size : RANDOM_DEFAULT_MAX_SIZE;
  uint64_t cap = options->live_cap;

  stress_run_t run;
  hl_status_t st = stress_run_initialize(options, policy, 1, result, &run);
  random_live_t* live = NULL;
  uint64_t live_count = 0, live_bytes = 0, ops = 0;
  if (!st) {
    live = calloc(n, sizeof(*live));
    if (!live) {
      st = HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating %llu live slots", (unsigned long long)n);
    }
  }
  hl_time_t start = hl_time_now();
  for (uint64_t step = 0; !st && !stress_run_done(&run, step, 2 * n); ++step) {
    hl_time_t t0 = hl_time_now();
    bool room = live_count < n && live_bytes < cap;
    if (live_count == 0 ||
        (room && stress_rng_unit(&run.rng) < RANDOM_ALLOC_PROBABILITY)) {
      if (live_count == n) break;  // Cannot happen: n >= 1 and live < n.
      uint64_t size = stress_rng_range(&run.rng, 1, max_size);
      uint64_t bytes = (size + 3) & ~(uint64_t)3;
      random_live_t* slot = &live[live_count];
      slot->seed = (uint32_t)stress_rng_next(&run.rng);
      slot->bytes = bytes;
      st = stress_run_alloc(&run, 0, bytes, &slot->buffer);
      if (!st) {
        st = stress_oracle_fill(run.oracle, 0, NULL, NULL, slot->buffer,
                                slot->seed);
        ++live_count;
        live_bytes += bytes;
      }
    } else {
      uint64_t index = stress_rng_range(&run.rng, 0, live_count - 1);
      bool verify = stress_rng_unit(&run.rng) < RANDOM_VERIFY_PROBABILITY;
      st = random_free_one(&run, &live[index], &live_bytes, verify);
      live[index] = live[--live_count];
    }
    stress_latency_record(&run.latency, t0, hl_time_now());
    ++ops;
    if ((step & 255) == 0) {
      stress_progress(&run, stress_run_fraction(&run, step, 2 * n));
    }
  }
  // What is still live is verified and freed (not timed as steps).
  while (live_count > 0) {
    hl_status_t fst =
        random_free_one(&run, &live[live_count - 1], &live_bytes, true);
    --live_count;
    st = hl_status_join(st, fst);
  }
  hl_status_t wst =
      run.device ? hl_device_wait_idle(run.device, HL_INFINITE_FUTURE) : NULL;
  hl_time_t end = hl_time_now();
  st = hl_status_join(st, wst);
  if (run.device)
    st = hl_status_join(st, stress_run_finish(&run, start, end, ops));
  free(live);
  stress_run_deinitialize(&run);
  return st;
}
