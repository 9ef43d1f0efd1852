// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hipline-bench-suballoc: the suballocator's own alloc + free pair on a warm
// pool (same queue, so every request is served from the block just freed),
// by size. This is the part of a queue_alloca + queue_dealloca pair that the
// pool costs under HIPLINE_ALLOCATOR=hipline; the rest is two submissions.

#include <stdio.h>
#include <stdlib.h>

#include "hipline/semaphore.h"
#include "hipline/time.h"
#include "runtime/memory/suballocator.h"

#define HL_BENCH_PAIRS 100000
#define HL_BENCH_BATCHES 15

static int hl_bench_fail(hl_status_t status, const char* what) {
  char text[512];
  hl_status_format(status, text, sizeof(text));
  fprintf(stderr, "hipline-bench-suballoc: %s: %s\n", what, text);
  hl_status_free(status);
  return 1;
}

static int hl_compare_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(void) {
  hl_backend_t* backend = NULL;
  hl_status_t st = hl_host_backend_create(0, hl_allocator_system(), &backend);
  if (st) return hl_bench_fail(st, "creating a host backend");
  hl_backend_stream_t* stream = NULL;
  hl_suballocator_t* sa = NULL;
  hl_semaphore_t* timeline = NULL;
  st = backend->vtable->stream_create(backend, &stream);
  if (!st) st = hl_suballocator_create(backend, UINT64_MAX, false, NULL, &sa);
  if (!st) st = hl_semaphore_create(0, hl_allocator_system(), &timeline);
  if (st) return hl_bench_fail(st, "setting up");
  static const uint64_t kSizes[] = {256, 4096, 65536, 1 << 20, 4 << 20};
  printf("%10s %18s\n", "size", "alloc+free");
  printf("%10s %18s\n", "(bytes)", "(ns/pair, median)");
  uint64_t value = 0;
  for (size_t s = 0; s < sizeof(kSizes) / sizeof(kSizes[0]); ++s) {
    double batches[HL_BENCH_BATCHES];
    for (int b = 0; b < HL_BENCH_BATCHES; ++b) {
      hl_time_t start = hl_time_now();
      for (int i = 0; i < HL_BENCH_PAIRS; ++i) {
        void* ptr = NULL;
        hl_suballocation_t* allocation = NULL;
        st = hl_suballocator_alloc(sa, kSizes[s], stream, 0, timeline, ++value,
                                   &ptr, &allocation);
        if (st) return hl_bench_fail(st, "allocating");
        hl_suballocator_free(sa, allocation, stream, 0, timeline, value);
      }
      batches[b] = (double)(hl_time_now() - start) / HL_BENCH_PAIRS;
    }
    qsort(batches, HL_BENCH_BATCHES, sizeof(double), hl_compare_double);
    printf("%10llu %18.1f\n", (unsigned long long)kSizes[s],
           batches[HL_BENCH_BATCHES / 2]);
  }
  hl_suballocator_stats_t stats;
  hl_suballocator_stats(sa, &stats);
  printf("slabs allocated %llu, pairs served from a free block %llu\n",
         (unsigned long long)stats.slab_allocs,
         (unsigned long long)stats.block_reuses);
  hl_suballocator_destroy(sa);
  backend->vtable->stream_destroy(backend, stream);
  backend->vtable->destroy(backend);
  hl_semaphore_release(timeline);
  return 0;
}
