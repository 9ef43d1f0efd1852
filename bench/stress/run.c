// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// One run of a workload: its device and queues, the alloc/free helpers of
// the two allocation modes, latencies, progress and the final statistics.

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/stress/stress.h"

//===----------------------------------------------------------------------===//
// Random numbers
//===----------------------------------------------------------------------===//

uint64_t stress_rng_next(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t stress_rng_range(uint64_t* state, uint64_t lo, uint64_t hi) {
  uint64_t span = hi - lo + 1;
  if (span == 0) return stress_rng_next(state);
  return lo + stress_rng_next(state) % span;
}

double stress_rng_unit(uint64_t* state) {
  return (double)(stress_rng_next(state) >> 11) * 0x1.0p-53;
}

//===----------------------------------------------------------------------===//
// Latencies
//===----------------------------------------------------------------------===//

// Enough for every op of the default runs; beyond it every other sample is
// kept (the distribution, not the count, matters).
#define STRESS_LATENCY_MAX_SAMPLES (1u << 22)

void stress_latency_record(stress_latency_t* latency, hl_time_t start,
                           hl_time_t end) {
  ++latency->seen;
  if (latency->count == latency->capacity) {
    if (latency->capacity >= STRESS_LATENCY_MAX_SAMPLES) {
      if (latency->seen & 1) return;
      latency->samples_ns[latency->seen % latency->capacity] =
          (uint32_t)(end - start > UINT32_MAX ? UINT32_MAX : end - start);
      return;
    }
    size_t capacity = latency->capacity ? latency->capacity * 2 : 4096;
    uint32_t* grown = realloc(latency->samples_ns, capacity * sizeof(*grown));
    if (!grown) return;  // Keep what we have; latencies are best effort.
    latency->samples_ns = grown;
    latency->capacity = capacity;
  }
  int64_t ns = end - start;
  if (ns < 0) ns = 0;
  latency->samples_ns[latency->count++] =
      (uint32_t)(ns > (int64_t)UINT32_MAX ? UINT32_MAX : ns);
}

static int compare_u32(const void* a, const void* b) {
  uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;
  return (x > y) - (x < y);
}

double stress_latency_quantile_us(stress_latency_t* latency, double q) {
  if (latency->count == 0) return 0;
  qsort(latency->samples_ns, latency->count, sizeof(uint32_t), compare_u32);
  size_t i = (size_t)(q * (double)(latency->count - 1) + 0.5);
  if (i >= latency->count) i = latency->count - 1;
  return latency->samples_ns[i] / 1000.0;
}

void stress_latency_deinitialize(stress_latency_t* latency) {
  free(latency->samples_ns);
  memset(latency, 0, sizeof(*latency));
}

//===----------------------------------------------------------------------===//
// assume_no_alias
//===----------------------------------------------------------------------===//

hl_status_t stress_effective_assume_no_alias(bool value, bool* out_value,
                                             const char** out_source) {
  hl_tristate_t process = HL_TRISTATE_UNSET;
  hl_setting_source_t source = HL_SETTING_SOURCE_INVOCATION;
  HL_RETURN_IF_ERROR(hl_get_assume_no_alias(&process, &source),
                     "reading the process-wide assume_no_alias");
  if (process == HL_TRISTATE_UNSET) {
    *out_value = value;
    *out_source = hl_setting_source_name(HL_SETTING_SOURCE_INVOCATION);
  } else {
    *out_value = process == HL_TRISTATE_TRUE;
    *out_source = hl_setting_source_name(source);
  }
  return hl_ok_status();
}

//===----------------------------------------------------------------------===//
// Progress
//===----------------------------------------------------------------------===//

void stress_progress(stress_run_t* run, double fraction) {
  if (!stress_terminal_is_tty()) return;
  hl_time_t now = hl_time_now();
  if (now - run->progress_last < 100 * 1000000ll) return;
  run->progress_last = now;
  if (fraction < 0) fraction = 0;
  if (fraction > 1) fraction = 1;
  int filled = (int)(fraction * 30);
  char bar[31];
  for (int i = 0; i < 30; ++i) bar[i] = i < filled ? '#' : '.';
  bar[30] = '\0';
  char text[128];
  snprintf(text, sizeof(text), "%-12s %-18s [%s] %3d%%",
           stress_workload_name(run->result->workload), run->policy.label, bar,
           (int)(fraction * 100));
  stress_terminal_bar(text);
}

void stress_progress_done(stress_run_t* run) {
  (void)run;
  if (!stress_terminal_is_tty()) return;
  stress_terminal_bar(NULL);
}

volatile sig_atomic_t stress_interrupted = 0;

// Submissions a run may have outstanding on one queue before it waits for
// the queue to catch up (to half of it), so that the drain after the
// deadline or a signal is short. The wait is outside the latency samples and
// the run's time includes the final drain anyway, so the throughput is that
// of the device either way.
#define STRESS_BACKLOG 4096

static void stress_run_pace(stress_run_t* run) {
  for (uint32_t i = 0; i < run->queue_count; ++i) {
    hl_queue_stats_t stats;
    hl_queue_stats(run->queues[i], &stats);
    hl_semaphore_t* timeline = hl_queue_timeline(run->queues[i]);
    uint64_t completed = 0;
    hl_status_t st = hl_semaphore_query(timeline, &completed);
    if (!st && stats.submitted_value > completed + STRESS_BACKLOG) {
      // A failure or the deadline ends the wait; the run's end reports the
      // failure (the queue status and the watch semaphores).
      st = hl_semaphore_wait(
          timeline, stats.submitted_value - STRESS_BACKLOG / 2, run->deadline);
    }
    hl_status_ignore(st);
  }
}

bool stress_run_done(stress_run_t* run, uint64_t step, uint64_t steps) {
  if (stress_interrupted) {
    run->result->partial = true;
    return true;
  }
  if ((run->checks++ & 15) == 0) stress_run_pace(run);
  if (run->deadline == HL_INFINITE_FUTURE) return step >= steps;
  // --iterations given with --duration caps the run too: whichever ends
  // first.
  if (run->options->iterations && step >= steps) return true;
  return hl_time_now() >= run->deadline;
}

double stress_run_fraction(const stress_run_t* run, uint64_t step,
                           uint64_t steps) {
  if (run->deadline == HL_INFINITE_FUTURE) {
    return steps ? (double)step / (double)steps : 0;
  }
  if (run->duration <= 0) return 1;
  return 1.0 - (double)(run->deadline - hl_time_now()) / (double)run->duration;
}

void stress_run_set_duration(stress_run_t* run, hl_duration_t duration) {
  run->duration = duration;
  run->deadline = hl_deadline_after(duration);
}

//===----------------------------------------------------------------------===//
// Runs
//===----------------------------------------------------------------------===//

hl_status_t stress_run_initialize(const stress_options_t* options,
                                  const stress_policy_t* policy,
                                  uint32_t queue_count, stress_result_t* result,
                                  stress_run_t* out_run) {
  memset(out_run, 0, sizeof(*out_run));
  out_run->options = options;
  out_run->policy = *policy;
  out_run->result = result;
  out_run->rng = options->seed * 0x2545f4914f6cdd1dull + 1;
  out_run->deadline = HL_INFINITE_FUTURE;
  snprintf(result->policy, sizeof(result->policy), "%s", policy->label);
  result->alloc = policy->alloc;
  result->checked = options->checked;
  result->queues = queue_count;

  const char* source = NULL;
  HL_RETURN_IF_ERROR_PLAIN(stress_effective_assume_no_alias(
      policy->assume_no_alias, &result->assume_no_alias, &source));
  snprintf(result->assume_no_alias_source,
           sizeof(result->assume_no_alias_source), "%s", source);

  hl_device_options_t device_options;
  hl_device_options_initialize(&device_options);
  device_options.backend = options->backend;
  device_options.fallback = policy->fallback;
  if (options->checked) device_options.checked = 1;
  HL_RETURN_IF_ERROR(hl_device_create(&device_options, hl_allocator_system(),
                                      &out_run->device),
                     "creating the %s device",
                     hl_backend_kind_name(options->backend));
  hl_device_properties_t props;
  HL_RETURN_IF_ERROR_PLAIN(hl_device_properties(out_run->device, &props));
  result->backend = props.backend;
  result->fallback = hl_device_fallback_mode(out_run->device);
  result->checked = hl_device_checked(out_run->device);

  for (uint32_t i = 0; i < queue_count; ++i) {
    HL_RETURN_IF_ERROR(hl_queue_create(out_run->device, &out_run->queues[i]),
                       "creating queue %u", i);
    out_run->queue_count = i + 1;
  }
  HL_RETURN_IF_ERROR_PLAIN(
      stress_oracle_create(out_run->queues, queue_count, &out_run->oracle));
  HL_RETURN_IF_ERROR_PLAIN(
      hl_semaphore_create(0, hl_allocator_system(), &out_run->sync_semaphore));
  HL_RETURN_IF_ERROR_PLAIN(
      hl_fence_create(hl_allocator_system(), &out_run->sync_fence));
  if (options->duration_s > 0) {
    stress_run_set_duration(out_run,
                            (hl_duration_t)(options->duration_s * 1e9));
  }
  return hl_ok_status();
}

const hl_fence_t* stress_run_sync_fence(stress_run_t* run) {
  if (run->policy.alloc != STRESS_ALLOC_SYNC) return NULL;
  hl_fence_clear(run->sync_fence);
  hl_status_t st =
      hl_fence_insert(run->sync_fence, run->sync_semaphore, ++run->sync_value);
  if (st) {
    // Cannot happen for a fresh fence with one entry; keep going unsynced.
    hl_status_ignore(st);
    --run->sync_value;
    return NULL;
  }
  return run->sync_fence;
}

hl_status_t stress_run_sync_wait(stress_run_t* run) {
  if (run->policy.alloc != STRESS_ALLOC_SYNC || run->sync_value == 0) {
    return hl_ok_status();
  }
  return hl_semaphore_wait(run->sync_semaphore, run->sync_value,
                           HL_INFINITE_FUTURE);
}

hl_status_t stress_run_alloc(stress_run_t* run, uint32_t queue_index,
                             uint64_t size, hl_buffer_t** out_buffer) {
  hl_queue_t* queue = run->queues[queue_index];
  if (run->policy.alloc == STRESS_ALLOC_ASYNC) {
    return hl_queue_alloca(queue, NULL,
                           stress_oracle_signal(run->oracle, queue_index, NULL),
                           size, 0, out_buffer);
  }
  HL_RETURN_IF_ERROR_PLAIN(
      hl_queue_alloca(queue, NULL,
                      stress_oracle_signal(run->oracle, queue_index,
                                           stress_run_sync_fence(run)),
                      size, 0, out_buffer));
  return stress_run_sync_wait(run);
}

hl_status_t stress_run_free(stress_run_t* run, uint32_t queue_index,
                            hl_buffer_t* buffer) {
  hl_queue_t* queue = run->queues[queue_index];
  hl_status_t st = NULL;
  if (run->policy.alloc == STRESS_ALLOC_ASYNC) {
    st = hl_queue_dealloca(queue, NULL,
                           stress_oracle_signal(run->oracle, queue_index, NULL),
                           buffer);
  } else {
    // The naive baseline: nothing knows when the memory was last used, so
    // the whole device drains before the free.
    st = hl_device_wait_idle(run->device, HL_INFINITE_FUTURE);
    if (!st) {
      st = hl_queue_dealloca(queue, NULL,
                             stress_oracle_signal(run->oracle, queue_index,
                                                  stress_run_sync_fence(run)),
                             buffer);
    }
    if (!st) st = stress_run_sync_wait(run);
  }
  hl_buffer_release(buffer);
  return st;
}

hl_status_t stress_run_finish(stress_run_t* run, hl_time_t start, hl_time_t end,
                              uint64_t ops) {
  stress_result_t* r = run->result;
  r->ops = ops;
  r->seconds = (double)(end - start) / 1e9;
  r->ops_per_s = r->seconds > 0 ? (double)ops / r->seconds : 0;
  r->p50_us = stress_latency_quantile_us(&run->latency, 0.50);
  r->p99_us = stress_latency_quantile_us(&run->latency, 0.99);

  // The first failure the run saw is its error: the device, a failed queue,
  // then the first failed submission (the watch semaphores), then failures
  // only the counters show.
  hl_status_t st = hl_device_wait_idle(run->device, HL_INFINITE_FUTURE);
  for (uint32_t i = 0; i < run->queue_count; ++i) {
    st = hl_status_join(st, hl_queue_status(run->queues[i]));
  }
  if (run->oracle) {
    uint64_t failures = 0, verified = 0, unverified = 0;
    st = hl_status_join(st, stress_oracle_collect(run->oracle, &failures,
                                                  &verified, &unverified));
    r->verify_failures += failures;
    r->verified += verified;
    r->unverified += unverified;
  }
  uint64_t failed = 0;
  for (uint32_t i = 0; i < run->queue_count; ++i) {
    hl_queue_stats_t qs;
    hl_queue_stats(run->queues[i], &qs);
    failed += qs.failed;
  }
  r->failed_submissions += failed;

  hl_memory_stats_t mem;
  hl_status_t mst = hl_device_memory_stats(run->device, &mem);
  if (!mst) {
    r->peak_used_bytes = mem.bytes_in_use_peak;
    r->peak_reserved_bytes = mem.bytes_reserved_peak;
    r->pool_peak_slab_bytes = mem.pool_peak_slab_bytes;
    r->pool_peak_requested_bytes = mem.pool_peak_requested_bytes;
    r->pool_peak_rounding_bytes = mem.pool_peak_rounding_bytes;
    r->pool_peak_tail_bytes = mem.pool_peak_tail_bytes;
    r->pool_peak_fragment_bytes = mem.pool_peak_fragment_bytes;
    r->pool_peak_free_slab_bytes = mem.pool_peak_free_slab_bytes;
    r->fallback_releases = mem.fallback_releases_frontier +
                           mem.fallback_releases_device_sync +
                           mem.fallback_releases_ordered;
    r->escaped_roots = mem.escaped_roots;
    r->use_after_free = mem.use_after_free;
    r->ooms += mem.ooms;
  }
  st = hl_status_join(st, mst);
  if (!st && failed) {
    st = HL_MAKE_STATUS(HL_STATUS_INTERNAL, "%llu queue submissions failed",
                        (unsigned long long)failed);
  }
  if (!st && !mst && mem.ooms) {
    st = HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                        "the pool failed %llu allocations",
                        (unsigned long long)mem.ooms);
  }
  if (st && (failed || (!mst && mem.ooms))) {
    st = hl_status_annotate(st,
                            "%llu failed submissions, %llu failed "
                            "allocations; first failure",
                            (unsigned long long)failed,
                            (unsigned long long)(mst ? 0 : mem.ooms));
  }
  hl_invocation_stats_t inv;
  hl_status_t ist = hl_device_invocation_stats(run->device, &inv);
  if (!ist) {
    r->async_imports = inv.async_imports;
    r->sync_imports = inv.sync_imports;
    r->alias_detected = inv.alias_detected;
  }
  return hl_status_join(st, ist);
}

void stress_run_deinitialize(stress_run_t* run) {
  stress_progress_done(run);
  if (run->oracle) stress_oracle_destroy(run->oracle);
  run->oracle = NULL;
  for (uint32_t i = 0; i < run->queue_count; ++i) {
    hl_queue_release(run->queues[i]);
    run->queues[i] = NULL;
  }
  run->queue_count = 0;
  hl_fence_release(run->sync_fence);
  hl_semaphore_release(run->sync_semaphore);
  run->sync_fence = NULL;
  run->sync_semaphore = NULL;
  if (run->device) {
    // Statistics after the last release (fallback releases of buffers freed
    // at teardown, checked-mode findings) still count: read them again.
    hl_status_ignore(hl_device_wait_idle(run->device, HL_INFINITE_FUTURE));
    hl_memory_stats_t mem;
    hl_status_t st = hl_device_memory_stats(run->device, &mem);
    if (!st && run->result) {
      run->result->fallback_releases = mem.fallback_releases_frontier +
                                       mem.fallback_releases_device_sync +
                                       mem.fallback_releases_ordered;
      run->result->escaped_roots = mem.escaped_roots;
      if (mem.use_after_free > run->result->use_after_free) {
        run->result->use_after_free = mem.use_after_free;
      }
    }
    hl_status_ignore(st);
    hl_device_release(run->device);
  }
  run->device = NULL;
  stress_latency_deinitialize(&run->latency);
}
