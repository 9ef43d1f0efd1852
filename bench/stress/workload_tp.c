// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// --workload tp: a tensor-parallel step over --devices N devices.
//
// Each step, every device allocates its shard (hl_queue_alloca) and
// computes it (fill_pattern with the step's and the device's seed), then
// every shard is gathered to every other device: the receiving device's
// queue allocates a buffer and copies the shard into it, waiting for the
// producer's signal (a cross-device semaphore wait); the copy is a peer
// copy where the devices reach each other and is staged through the host
// where they do not (HIPLINE_HOST_PEERS on the host backend). Each device
// then verifies every shard it holds against the pattern, and every
// buffer is freed with hl_queue_dealloca: a shard's dealloca on its own
// device waits for the copies other devices made of it. A step ends when
// every device has verified it, so the step time is a real latency.
//
// The report: per-step time (mean, p50, p99), verification failures, peer
// copies, staged copies, cross-device waits, and per device the peak
// reserved and peak live bytes; a digest of the gathered bytes (FNV-1a over
// what every device read back of the last step) makes a staged run
// comparable with a peer run.

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench/stress/stress.h"

#define TP_MAX_DEVICES 8

typedef struct tp_t {
  const stress_options_t* options;
  uint32_t n;
  uint64_t shard_bytes;
  hl_device_t* device[TP_MAX_DEVICES];
  hl_queue_t* queue[TP_MAX_DEVICES];
  hl_buffer_t* counter[TP_MAX_DEVICES];      // Mismatches, one per device.
  hl_semaphore_t* computed[TP_MAX_DEVICES];  // Step s+1: shard s is ready.
  hl_semaphore_t* verified[TP_MAX_DEVICES];  // Step s+1: device verified s.
  uint64_t digest;
} tp_t;

static uint32_t tp_seed(uint64_t step, uint32_t device) {
  return (uint32_t)(step * 131u + device * 7u + 1u);
}

static hl_status_t tp_fence(hl_semaphore_t* s, uint64_t v, hl_fence_t** out) {
  HL_RETURN_IF_ERROR_PLAIN(hl_fence_create(hl_allocator_system(), out));
  return hl_fence_insert(*out, s, v);
}

static hl_status_t tp_setup(tp_t* tp) {
  hl_backend_kind_t kind = tp->options->backend;
  HL_RETURN_IF_ERROR_PLAIN(hl_backend_resolve(kind, &kind));
  hl_backend_info_t info;
  HL_RETURN_IF_ERROR_PLAIN(hl_backend_query(kind, &info));
  if ((int)tp->n > info.device_count) {
    return HL_MAKE_STATUS(
        HL_STATUS_OUT_OF_RANGE,
        "--devices %u: the %s backend has %d device(s)%s", tp->n,
        hl_backend_kind_name(kind), info.device_count,
        kind == HL_BACKEND_HOST ? " (HIPLINE_HOST_DEVICES)" : "");
  }
  for (uint32_t i = 0; i < tp->n; ++i) {
    hl_device_options_t o;
    hl_device_options_initialize(&o);
    o.backend = kind;
    o.ordinal = (int)i;
    o.checked = tp->options->checked ? 1 : -1;
    HL_RETURN_IF_ERROR_PLAIN(
        hl_device_create(&o, hl_allocator_system(), &tp->device[i]));
    HL_RETURN_IF_ERROR_PLAIN(hl_queue_create(tp->device[i], &tp->queue[i]));
    HL_RETURN_IF_ERROR_PLAIN(
        hl_semaphore_create(0, hl_allocator_system(), &tp->computed[i]));
    HL_RETURN_IF_ERROR_PLAIN(
        hl_semaphore_create(0, hl_allocator_system(), &tp->verified[i]));
    // The counter first: its small slab is not sized after the shards'.
    HL_RETURN_IF_ERROR_PLAIN(
        hl_queue_alloca(tp->queue[i], NULL, NULL, 4, 0, &tp->counter[i]));
    HL_RETURN_IF_ERROR_PLAIN(
        hl_queue_fill(tp->queue[i], NULL, NULL, tp->counter[i], 0, 4, 0));
  }
  return hl_device_enable_peer_access(tp->device, tp->n);
}

static void tp_teardown(tp_t* tp) {
  for (uint32_t i = 0; i < tp->n; ++i) {
    if (tp->queue[i]) {
      hl_status_ignore(hl_queue_wait_idle(tp->queue[i], HL_INFINITE_FUTURE));
    }
  }
  for (uint32_t i = 0; i < tp->n; ++i) {
    hl_buffer_release(tp->counter[i]);
    hl_semaphore_release(tp->computed[i]);
    hl_semaphore_release(tp->verified[i]);
    hl_queue_release(tp->queue[i]);
    hl_device_release(tp->device[i]);
  }
}

// Folds |bytes| into the digest (FNV-1a).
static void tp_digest(tp_t* tp, const unsigned char* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    tp->digest = (tp->digest ^ bytes[i]) * UINT64_C(1099511628211);
  }
}

// Device |j| holds |held[i]|, shard i of step |step| (its own or a copy).
static hl_status_t tp_verify(tp_t* tp, uint32_t j, uint64_t step,
                             hl_buffer_t** held, bool last) {
  hl_queue_t* q = tp->queue[j];
  for (uint32_t i = 0; i < tp->n; ++i) {
    HL_RETURN_IF_ERROR_PLAIN(hl_queue_verify_pattern(
        q, NULL, NULL, held[i], tp_seed(step, i), tp->counter[j]));
  }
  if (last) {
    unsigned char* bytes = malloc((size_t)tp->shard_bytes * tp->n);
    if (!bytes) {
      return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "tp: digest buffer");
    }
    hl_status_t st = NULL;
    for (uint32_t i = 0; i < tp->n && !st; ++i) {
      st = hl_queue_read(q, NULL, NULL, held[i], 0,
                         bytes + (size_t)i * tp->shard_bytes, tp->shard_bytes);
    }
    if (!st) st = hl_queue_wait_idle(q, HL_INFINITE_FUTURE);
    if (!st) tp_digest(tp, bytes, (size_t)tp->shard_bytes * tp->n);
    free(bytes);
    HL_RETURN_IF_ERROR_PLAIN(st);
  }
  hl_fence_t* done = NULL;
  hl_status_t st = tp_fence(tp->verified[j], step + 1, &done);
  if (!st) st = hl_queue_barrier(q, NULL, done);
  hl_fence_release(done);
  return st;
}

// One step: compute, gather, verify, free.
static hl_status_t tp_step(tp_t* tp, uint64_t step, bool last) {
  hl_buffer_t* shard[TP_MAX_DEVICES] = {NULL};
  hl_buffer_t* held[TP_MAX_DEVICES][TP_MAX_DEVICES] = {{NULL}};
  hl_status_t st = NULL;
  for (uint32_t i = 0; i < tp->n && !st; ++i) {
    hl_fence_t* ready = NULL;
    st = hl_queue_alloca(tp->queue[i], NULL, NULL, tp->shard_bytes, 0,
                         &shard[i]);
    if (!st) st = tp_fence(tp->computed[i], step + 1, &ready);
    if (!st) {
      st = hl_queue_fill_pattern(tp->queue[i], NULL, ready, shard[i],
                                 tp_seed(step, i));
    }
    hl_fence_release(ready);
  }
  for (uint32_t j = 0; j < tp->n && !st; ++j) {
    for (uint32_t i = 0; i < tp->n && !st; ++i) {
      if (i == j) {
        held[j][i] = shard[i];
        hl_buffer_retain(shard[i]);
        continue;
      }
      hl_fence_t* ready = NULL;
      st = hl_queue_alloca(tp->queue[j], NULL, NULL, tp->shard_bytes, 0,
                           &held[j][i]);
      if (!st) st = tp_fence(tp->computed[i], step + 1, &ready);
      if (!st) {
        st = hl_queue_copy(tp->queue[j], ready, NULL, shard[i], 0, held[j][i],
                           0, tp->shard_bytes);
      }
      hl_fence_release(ready);
    }
  }
  for (uint32_t j = 0; j < tp->n && !st; ++j) {
    st = tp_verify(tp, j, step, held[j], last);
  }
  // Every buffer goes in queue order: a copy on device j after its verify;
  // a shard on its own device after every copy other devices made of it.
  for (uint32_t j = 0; j < tp->n; ++j) {
    for (uint32_t i = 0; i < tp->n; ++i) {
      if (held[j][i] && i != j && !st) {
        st = hl_queue_dealloca(tp->queue[j], NULL, NULL, held[j][i]);
      }
      hl_buffer_release(held[j][i]);
    }
  }
  for (uint32_t i = 0; i < tp->n; ++i) {
    if (shard[i] && !st)
      st = hl_queue_dealloca(tp->queue[i], NULL, NULL, shard[i]);
    hl_buffer_release(shard[i]);
  }
  for (uint32_t j = 0; j < tp->n && !st; ++j) {
    st = hl_semaphore_wait(tp->verified[j], step + 1, HL_INFINITE_FUTURE);
  }
  return st;
}

static int tp_compare_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

typedef struct tp_report_t {
  uint64_t steps;
  double mean_us, p50_us, p99_us;
  uint64_t verify_failures;
  uint64_t use_after_free;
  hl_device_peer_stats_t peers;  // Summed over the devices.
  uint64_t peak_reserved[TP_MAX_DEVICES];
  uint64_t peak_live[TP_MAX_DEVICES];
  double worst_reserved_over_live;
} tp_report_t;

static hl_status_t tp_collect(tp_t* tp, tp_report_t* r) {
  for (uint32_t j = 0; j < tp->n; ++j) {
    uint32_t mismatches = 0;
    HL_RETURN_IF_ERROR_PLAIN(hl_queue_read(tp->queue[j], NULL, NULL,
                                           tp->counter[j], 0, &mismatches, 4));
    HL_RETURN_IF_ERROR_PLAIN(
        hl_queue_wait_idle(tp->queue[j], HL_INFINITE_FUTURE));
    HL_RETURN_IF_ERROR_PLAIN(hl_queue_status(tp->queue[j]));
    r->verify_failures += mismatches;
    hl_device_peer_stats_t p;
    hl_device_peer_stats(tp->device[j], &p);
    r->peers.peer_copies += p.peer_copies;
    r->peers.staged_copies += p.staged_copies;
    r->peers.cross_device_waits += p.cross_device_waits;
    hl_memory_stats_t m;
    HL_RETURN_IF_ERROR_PLAIN(hl_device_memory_stats(tp->device[j], &m));
    r->use_after_free += m.use_after_free;
    r->peak_reserved[j] = m.bytes_reserved_peak;
    r->peak_live[j] = m.bytes_in_use_peak;
    double ratio = m.bytes_in_use_peak
                       ? (double)m.bytes_reserved_peak / m.bytes_in_use_peak
                       : 0.0;
    if (ratio > r->worst_reserved_over_live) {
      r->worst_reserved_over_live = ratio;
    }
  }
  return NULL;
}

static void tp_print(const tp_t* tp, const tp_report_t* r) {
  printf("workload tp: %u devices, %" PRIu64 " steps, shard %" PRIu64
         " bytes\n",
         tp->n, r->steps, tp->shard_bytes);
  printf("step time: mean %.1f us, p50 %.1f us, p99 %.1f us\n", r->mean_us,
         r->p50_us, r->p99_us);
  printf("verification failures %" PRIu64 ", use-after-free %" PRIu64 "\n",
         r->verify_failures, r->use_after_free);
  printf("peer copies %" PRIu64 ", staged copies %" PRIu64
         ", cross-device waits %" PRIu64 "\n",
         r->peers.peer_copies, r->peers.staged_copies,
         r->peers.cross_device_waits);
  printf("%-8s %16s %16s %10s\n", "device", "peak reserved", "peak live",
         "ratio");
  for (uint32_t j = 0; j < tp->n; ++j) {
    printf(
        "%-8u %16" PRIu64 " %16" PRIu64 " %10.4f\n", j, r->peak_reserved[j],
        r->peak_live[j],
        r->peak_live[j] ? (double)r->peak_reserved[j] / r->peak_live[j] : 0.0);
  }
  printf("digest %016" PRIx64 "\n", tp->digest);
}

static hl_status_t tp_json(const char* path, const tp_t* tp,
                           const tp_report_t* r) {
  FILE* f = fopen(path, "w");
  if (!f) {
    return HL_MAKE_STATUS(HL_STATUS_UNAVAILABLE, "--json %s: cannot open",
                          path);
  }
  fprintf(f,
          "{\"workload\": \"tp\", \"devices\": %u, \"steps\": %" PRIu64
          ", \"shard_bytes\": %" PRIu64
          ", \"step_us_mean\": %.3f, \"step_us_p50\": %.3f, "
          "\"step_us_p99\": %.3f, \"verify_failures\": %" PRIu64
          ", \"use_after_free\": %" PRIu64 ", \"peer_copies\": %" PRIu64
          ", \"staged_copies\": %" PRIu64 ", \"cross_device_waits\": %" PRIu64
          ", \"worst_reserved_over_live\": %.6f, \"digest\": \"%016" PRIx64
          "\", \"per_device\": [",
          tp->n, r->steps, tp->shard_bytes, r->mean_us, r->p50_us, r->p99_us,
          r->verify_failures, r->use_after_free, r->peers.peer_copies,
          r->peers.staged_copies, r->peers.cross_device_waits,
          r->worst_reserved_over_live, tp->digest);
  for (uint32_t j = 0; j < tp->n; ++j) {
    fprintf(f,
            "%s{\"device\": %u, \"peak_reserved_bytes\": %" PRIu64
            ", \"peak_live_bytes\": %" PRIu64 "}",
            j ? ", " : "", j, r->peak_reserved[j], r->peak_live[j]);
  }
  fprintf(f, "]}\n");
  bool bad = ferror(f) != 0;
  bad |= fclose(f) != 0;
  return bad ? HL_MAKE_STATUS(HL_STATUS_UNAVAILABLE, "--json %s: write failed",
                              path)
             : NULL;
}

// Runs the steps, timing each; fills |r| from |times|.
static hl_status_t tp_run(tp_t* tp, tp_report_t* r) {
  uint64_t steps = tp->options->iterations ? tp->options->iterations : 50;
  uint64_t* times = calloc(steps, sizeof(*times));
  if (!times) return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "tp: times");
  hl_status_t st = NULL;
  uint64_t done = 0;
  for (; done < steps && !st && !stress_interrupted; ++done) {
    hl_time_t start = hl_time_now();
    st = tp_step(tp, done, done + 1 == steps);
    times[done] = (uint64_t)(hl_time_now() - start);
  }
  r->steps = done;
  if (done) {
    double sum = 0;
    for (uint64_t i = 0; i < done; ++i) sum += (double)times[i];
    r->mean_us = sum / (double)done / 1e3;
    qsort(times, done, sizeof(*times), tp_compare_u64);
    r->p50_us = (double)times[done / 2] / 1e3;
    r->p99_us = (double)times[(done * 99) / 100] / 1e3;
  }
  free(times);
  return st;
}

int stress_tp_main(const stress_options_t* options) {
  tp_t tp;
  memset(&tp, 0, sizeof(tp));
  tp.options = options;
  tp.n = options->devices ? options->devices : 2;
  tp.shard_bytes = options->max_size ? (options->max_size + 3) & ~UINT64_C(3)
                                     : UINT64_C(64) << 10;
  tp.digest = UINT64_C(14695981039346656037);
  tp_report_t report;
  memset(&report, 0, sizeof(report));
  hl_status_t st = tp_setup(&tp);
  if (!st) st = tp_run(&tp, &report);
  if (!st) st = tp_collect(&tp, &report);
  int rc = 0;
  if (st) {
    hl_status_fprint(stderr, STRESS_PROG ": tp: ", st);
    hl_status_free(st);
    rc = 1;
  } else {
    if (!options->quiet) tp_print(&tp, &report);
    if (options->json_path) {
      st = tp_json(options->json_path, &tp, &report);
      if (st) {
        hl_status_fprint(stderr, STRESS_PROG ": ", st);
        hl_status_free(st);
        rc = 1;
      }
    }
    if (report.verify_failures || report.use_after_free) {
      fprintf(stderr,
              STRESS_PROG ": tp: %" PRIu64 " verification failures, %" PRIu64
                          " use-after-free\n",
              report.verify_failures, report.use_after_free);
      rc = 1;
    }
  }
  tp_teardown(&tp);
  if (stress_interrupted) return 128 + stress_interrupted;
  return rc;
}
