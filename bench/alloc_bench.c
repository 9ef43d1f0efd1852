// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hipline-bench-alloc: the host-side cost of a queue_alloca + queue_dealloca
// pair on the host backend, next to glibc malloc + free of the same sizes.
//
// What is timed is what the submitting thread pays: the two calls (and the
// buffer release) with empty wait fences on one queue, pool warm. Between
// batches the queue is drained (not timed) so it never grows without bound.
// Each size runs several batches; the median ns per pair is reported.
//
//   hipline-bench-alloc [--batches N] [--pairs N] [--json FILE]
//                       [--cpus free|same|split]
//
// --cpus places the threads (bench/cpu_placement.h): on 2 cores the pair
// costs several times more when the submitter and the stream's worker run
// on different cores, and without placement the scheduler picks per run.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/cpu_placement.h"
#include "hipline/buffer.h"
#include "hipline/device.h"
#include "hipline/queue.h"
#include "hipline/status.h"
#include "hipline/time.h"

static const uint64_t kSizes[] = {256, 4096, 65536, 1048576, 4194304};
#define SIZE_COUNT (sizeof(kSizes) / sizeof(kSizes[0]))

typedef struct result_t {
  uint64_t size;
  double hipline_ns;
  double malloc_ns;
  double hipline_min_ns;
  double malloc_min_ns;
} result_t;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int compare_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(double), compare_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int check(hl_status_t st, const char* what) {
  if (!st) return 0;
  hl_status_fprint(stderr, what, st);
  hl_status_free(st);
  return 1;
}

// One batch of |pairs| alloca+dealloca pairs; returns ns per pair, or < 0.
static double hipline_batch(hl_queue_t* queue, uint64_t size, int pairs) {
  int64_t start = now_ns();
  for (int i = 0; i < pairs; ++i) {
    hl_buffer_t* buffer = NULL;
    if (check(hl_queue_alloca(queue, NULL, NULL, size, 0, &buffer),
              "hl_queue_alloca") ||
        check(hl_queue_dealloca(queue, NULL, NULL, buffer),
              "hl_queue_dealloca")) {
      hl_buffer_release(buffer);
      return -1;
    }
    hl_buffer_release(buffer);
  }
  int64_t elapsed = now_ns() - start;
  // Drain, untimed, so the next batch starts from an idle queue.
  if (check(hl_queue_wait_idle(queue, HL_INFINITE_FUTURE), "wait idle")) {
    return -1;
  }
  return (double)elapsed / pairs;
}

static double malloc_batch(uint64_t size, int pairs) {
  int64_t start = now_ns();
  for (int i = 0; i < pairs; ++i) {
    volatile char* p = malloc((size_t)size);
    if (!p) return -1;
    p[0] = (char)i;  // Touch it so the pair is not optimized away.
    free((void*)p);
  }
  return (double)(now_ns() - start) / pairs;
}

static void usage(void) {
  fprintf(stderr,
          "usage: hipline-bench-alloc [--batches N] [--pairs N] [--json FILE]\n"
          "                           [--cpus free|same|split]\n");
}

int main(int argc, char** argv) {
  int batches = 15;
  int pairs = 1000;
  const char* json_path = NULL;
  bench_cpus_t cpus = BENCH_CPUS_FREE;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--batches") && i + 1 < argc) {
      batches = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--pairs") && i + 1 < argc) {
      pairs = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
      json_path = argv[++i];
    } else if (!strcmp(argv[i], "--cpus") && i + 1 < argc &&
               bench_cpus_parse(argv[i + 1], &cpus)) {
      ++i;
    } else {
      usage();
      return 2;
    }
  }
  if (batches < 1 || pairs < 1) {
    usage();
    return 2;
  }

  // Before any placement: it pins its own two threads.
  double core_round_trip_ns = bench_cpus_core_round_trip_ns(100000);
  if (!bench_cpus_begin(cpus)) return 1;
  hl_device_options_t options;
  hl_device_options_initialize(&options);
  options.backend = HL_BACKEND_HOST;
  hl_device_t* device = NULL;
  if (check(hl_device_create(&options, hl_allocator_system(), &device),
            "creating the host device")) {
    return 1;
  }
  hl_queue_t* queue = NULL;
  if (check(hl_queue_create(device, &queue), "creating a queue")) {
    hl_device_release(device);
    return 1;
  }
  if (!bench_cpus_place_runtime_threads(cpus)) {
    hl_queue_release(queue);
    hl_device_release(device);
    return 1;
  }

  result_t results[SIZE_COUNT];
  double* samples = calloc((size_t)batches, sizeof(double));
  int rc = 0;
  for (size_t s = 0; s < SIZE_COUNT && !rc; ++s) {
    uint64_t size = kSizes[s];
    results[s].size = size;
    // Warm the pool and the allocator (untimed).
    if (hipline_batch(queue, size, pairs) < 0 ||
        malloc_batch(size, pairs) < 0) {
      rc = 1;
      break;
    }
    for (int b = 0; b < batches; ++b) {
      samples[b] = hipline_batch(queue, size, pairs);
      if (samples[b] < 0) rc = 1;
    }
    results[s].hipline_ns = median(samples, batches);
    results[s].hipline_min_ns = samples[0];
    for (int b = 0; b < batches; ++b) samples[b] = malloc_batch(size, pairs);
    results[s].malloc_ns = median(samples, batches);
    results[s].malloc_min_ns = samples[0];
  }
  free(samples);

  hl_memory_stats_t stats;
  memset(&stats, 0, sizeof(stats));
  if (!rc) rc = check(hl_device_memory_stats(device, &stats), "memory stats");
  hl_queue_release(queue);
  hl_device_release(device);
  if (rc) return rc;

  printf(
      "hipline-bench-alloc: host backend, one queue, empty wait fences, "
      "warm pool; %d batches x %d pairs per size; medians; --cpus %s\n",
      batches, pairs, bench_cpus_name(cpus));
  printf("%10s  %16s  %16s  %8s\n", "size", "alloca+dealloca", "malloc+free",
         "ratio");
  printf("%10s  %16s  %16s  %8s\n", "(bytes)", "(ns/pair)", "(ns/pair)", "");
  for (size_t s = 0; s < SIZE_COUNT; ++s) {
    printf("%10llu  %16.1f  %16.1f  %8.1f\n",
           (unsigned long long)results[s].size, results[s].hipline_ns,
           results[s].malloc_ns, results[s].hipline_ns / results[s].malloc_ns);
  }
  bench_cpus_print_round_trip(core_round_trip_ns);
  printf("pool: reserved peak %llu bytes, in use peak %llu bytes\n",
         (unsigned long long)stats.bytes_reserved_peak,
         (unsigned long long)stats.bytes_in_use_peak);

  if (json_path) {
    FILE* f = fopen(json_path, "w");
    if (!f) {
      perror(json_path);
      return 1;
    }
    fprintf(f,
            "{\n  \"benchmark\": \"alloc\",\n  \"backend\": \"host\",\n"
            "  \"cpus\": \"%s\",\n  \"core_round_trip_ns\": %.1f,\n"
            "  \"batches\": %d,\n  \"pairs_per_batch\": %d,\n"
            "  \"reserved_peak_bytes\": %llu,\n  \"results\": [\n",
            bench_cpus_name(cpus), core_round_trip_ns, batches, pairs,
            (unsigned long long)stats.bytes_reserved_peak);
    for (size_t s = 0; s < SIZE_COUNT; ++s) {
      fprintf(f,
              "    {\"size\": %llu, \"alloca_dealloca_ns\": %.1f, "
              "\"malloc_free_ns\": %.1f, \"ratio\": %.2f, "
              "\"alloca_dealloca_min_ns\": %.1f, \"malloc_free_min_ns\": "
              "%.1f}%s\n",
              (unsigned long long)results[s].size, results[s].hipline_ns,
              results[s].malloc_ns,
              results[s].hipline_ns / results[s].malloc_ns,
              results[s].hipline_min_ns, results[s].malloc_min_ns,
              s + 1 < SIZE_COUNT ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    if (fclose(f) != 0) {
      perror(json_path);
      return 1;
    }
  }
  return 0;
}
