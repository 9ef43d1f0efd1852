// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hipline-bench-command-buffer: command-buffer costs on the host backend.
//
//   one-by-one  N small operations (a 64-byte fill, a 16-byte update and a
//               64-byte copy, repeated) issued as N queue operations. The
//               submitting thread's wall time for the N calls is one sample;
//               the queue drains between samples, untimed. Reported as the
//               median ns per operation.
//   recorded    The same N operations recorded in a command buffer and
//               executed with hl_queue_execute: the median ns per operation
//               of the execute call (the command buffer is recorded once and
//               executed per sample), and separately of recording plus
//               finalize.
//   padding     Tensors of random sizes padded to 256 bytes: each is splatted
//               with zeros over its padded size and then updated over its
//               size. Reports the fill bytes recorded and not filled, and the
//               median time of one execution with and without elision.
//
// On the hip backend (--backend hip) the mix is fills and copies: an update
// copies from host memory, which a command buffer replays on the stream
// instead of launching as a graph (docs/backends.md). --executions E runs
// the recorded command buffer E times per sample (the execute median is per
// execution), so counts of HIP calls taken at two values of E give the calls
// of one execution (HL_HIP_TEST_RUNTIME_CALL_COUNTS).
//
// Usage: hipline-bench-command-buffer [--json] [--backend host|hip]
//                                     [--ops N] [--samples S] [--tensors T]
//                                     [--executions E]
// Uses the public API only.

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipline/command_buffer.h"
#include "hipline/device.h"
#include "hipline/fence.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "hipline/time.h"

#define MS ((hl_duration_t)1000000)

static int check(hl_status_t st, const char* what) {
  if (!st) return 0;
  hl_status_fprint(stderr, what, st);
  hl_status_free(st);
  return 1;
}
#define CHECK(expr)                    \
  do {                                 \
    if (check((expr), #expr)) exit(1); \
  } while (0)

static int compare_i64(const void* a, const void* b) {
  int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

static int64_t median(int64_t* v, size_t n) {
  qsort(v, n, sizeof(*v), compare_i64);
  return v[n / 2];
}

typedef struct results_t {
  hl_backend_kind_t backend;
  int64_t executions;  // Per sample.
  int64_t ops;
  int samples;
  double one_by_one_ns;  // Per operation.
  double execute_ns;     // Per operation.
  double record_ns;      // Per operation (record + finalize).
  int64_t tensors;
  uint64_t fill_bytes;  // Recorded.
  uint64_t fill_bytes_elided;
  uint64_t fills_elided;
  uint64_t fills_shrunk;
  double padded_elided_us;  // One execution.
  double padded_unelided_us;
} results_t;

#define BUFFER_BYTES (64 * 1024)

// The operation mix: fill, update, copy; on hip fill, fill, copy (see the
// top of the file).
static int64_t op_kind(int64_t i, hl_backend_kind_t backend) {
  int64_t kind = i % 3;
  return backend == HL_BACKEND_HIP && kind == 1 ? 0 : kind;
}

static void issue_one(hl_queue_t* q, hl_buffer_t* a, hl_buffer_t* b,
                      const uint8_t* data, int64_t i,
                      hl_backend_kind_t backend) {
  uint64_t slot = (uint64_t)(i % 512) * 64;
  switch (op_kind(i, backend)) {
    case 0:
      CHECK(hl_queue_fill(q, NULL, NULL, a, slot, 64, (uint32_t)i));
      break;
    case 1:
      CHECK(hl_queue_write(q, NULL, NULL, data, a, slot, 16));
      break;
    default:
      CHECK(hl_queue_copy(q, NULL, NULL, a, slot, b, slot, 64));
      break;
  }
}

static void record_one(hl_command_buffer_t* cb, hl_buffer_t* a, hl_buffer_t* b,
                       const uint8_t* data, int64_t i,
                       hl_backend_kind_t backend) {
  uint64_t slot = (uint64_t)(i % 512) * 64;
  switch (op_kind(i, backend)) {
    case 0:
      CHECK(hl_command_buffer_fill(cb, a, slot, 64, (uint32_t)i));
      break;
    case 1:
      CHECK(hl_command_buffer_update(cb, data, a, slot, 16));
      break;
    default:
      CHECK(hl_command_buffer_copy(cb, a, slot, b, slot, 64));
      break;
  }
}

static void bench_ops(hl_device_t* device, results_t* r) {
  hl_queue_t* q = NULL;
  CHECK(hl_queue_create(device, &q));
  hl_buffer_t* a = NULL;
  hl_buffer_t* b = NULL;
  CHECK(hl_queue_alloca(q, NULL, NULL, BUFFER_BYTES, 0, &a));
  CHECK(hl_queue_alloca(q, NULL, NULL, BUFFER_BYTES, 0, &b));
  CHECK(hl_queue_wait_idle(q, hl_deadline_after(60000 * MS)));
  uint8_t data[16];
  memset(data, 0x5A, sizeof(data));
  int64_t* one = calloc((size_t)r->samples, sizeof(int64_t));
  int64_t* exec = calloc((size_t)r->samples, sizeof(int64_t));
  int64_t* rec = calloc((size_t)r->samples, sizeof(int64_t));
  if (!one || !exec || !rec) exit(1);
  // Executed: one command buffer, recorded once and executed every sample
  // (a backend that builds a graph does so at the first execution, here).
  hl_command_buffer_t* cb = NULL;
  CHECK(hl_command_buffer_create(device, 0, &cb));
  for (int64_t i = 0; i < r->ops; ++i)
    record_one(cb, a, b, data, i, r->backend);
  CHECK(hl_command_buffer_finalize(cb));
  CHECK(hl_queue_execute(q, NULL, NULL, cb));
  CHECK(hl_queue_wait_idle(q, hl_deadline_after(60000 * MS)));
  for (int s = 0; s < r->samples; ++s) {
    // One by one.
    hl_time_t t0 = hl_time_now();
    for (int64_t i = 0; i < r->ops; ++i) {
      issue_one(q, a, b, data, i, r->backend);
    }
    one[s] = hl_time_now() - t0;
    CHECK(hl_queue_wait_idle(q, hl_deadline_after(60000 * MS)));
    // Recorded: a fresh command buffer per sample for the record cost.
    t0 = hl_time_now();
    hl_command_buffer_t* fresh = NULL;
    CHECK(hl_command_buffer_create(device, 0, &fresh));
    for (int64_t i = 0; i < r->ops; ++i) {
      record_one(fresh, a, b, data, i, r->backend);
    }
    CHECK(hl_command_buffer_finalize(fresh));
    rec[s] = hl_time_now() - t0;
    hl_command_buffer_release(fresh);
    t0 = hl_time_now();
    for (int64_t e = 0; e < r->executions; ++e) {
      CHECK(hl_queue_execute(q, NULL, NULL, cb));
    }
    exec[s] = (hl_time_now() - t0) / r->executions;
    CHECK(hl_queue_wait_idle(q, hl_deadline_after(60000 * MS)));
  }
  r->one_by_one_ns = (double)median(one, (size_t)r->samples) / (double)r->ops;
  r->execute_ns = (double)median(exec, (size_t)r->samples) / (double)r->ops;
  r->record_ns = (double)median(rec, (size_t)r->samples) / (double)r->ops;
  free(one);
  free(exec);
  free(rec);
  hl_command_buffer_release(cb);
  CHECK(hl_queue_dealloca(q, NULL, NULL, a));
  CHECK(hl_queue_dealloca(q, NULL, NULL, b));
  CHECK(hl_queue_wait_idle(q, hl_deadline_after(60000 * MS)));
  hl_buffer_release(a);
  hl_buffer_release(b);
  hl_queue_release(q);
}

static void bench_padding(hl_device_t* device, results_t* r) {
  hl_queue_t* q = NULL;
  CHECK(hl_queue_create(device, &q));
  hl_buffer_t** tensors = calloc((size_t)r->tensors, sizeof(*tensors));
  uint64_t* sizes = calloc((size_t)r->tensors, sizeof(*sizes));
  uint8_t* data = calloc(1, 16 * 1024);
  if (!tensors || !sizes || !data) exit(1);
  for (size_t i = 0; i < 16 * 1024; ++i) data[i] = (uint8_t)i;
  uint64_t rng = 0x2545F4914F6CDD1Dull;
  for (int64_t t = 0; t < r->tensors; ++t) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    sizes[t] = 1 + rng % (16 * 1024 - 1);
    uint64_t padded = (sizes[t] + 255) & ~(uint64_t)255;
    CHECK(hl_queue_alloca(q, NULL, NULL, padded, 0, &tensors[t]));
  }
  hl_command_buffer_t* cbs[2] = {NULL, NULL};
  for (int k = 0; k < 2; ++k) {
    CHECK(hl_command_buffer_create(
        device, k ? HL_COMMAND_BUFFER_FLAG_NO_ELISION : 0, &cbs[k]));
    for (int64_t t = 0; t < r->tensors; ++t) {
      uint64_t padded = (sizes[t] + 255) & ~(uint64_t)255;
      CHECK(hl_command_buffer_fill(cbs[k], tensors[t], 0, padded, 0));
      CHECK(hl_command_buffer_update(cbs[k], data, tensors[t], 0, sizes[t]));
      if (k == 0) r->fill_bytes += padded;
    }
    CHECK(hl_command_buffer_finalize(cbs[k]));
  }
  hl_command_buffer_info_t info;
  CHECK(hl_command_buffer_query(cbs[0], &info));
  r->fill_bytes_elided = info.fill_bytes_elided;
  r->fills_elided = info.fills_elided;
  r->fills_shrunk = info.fills_shrunk;
  hl_semaphore_t* sem = NULL;
  CHECK(hl_semaphore_create(0, hl_allocator_system(), &sem));
  hl_fence_t* fence = NULL;
  CHECK(hl_fence_create(hl_allocator_system(), &fence));
  CHECK(hl_queue_wait_idle(q, hl_deadline_after(60000 * MS)));
  int64_t* times[2];
  uint64_t value = 0;
  for (int k = 0; k < 2; ++k) {
    times[k] = calloc((size_t)r->samples, sizeof(int64_t));
    if (!times[k]) exit(1);
    for (int s = 0; s < r->samples; ++s) {
      hl_fence_clear(fence);
      CHECK(hl_fence_insert(fence, sem, ++value));
      hl_time_t t0 = hl_time_now();
      CHECK(hl_queue_execute(q, NULL, fence, cbs[k]));
      CHECK(hl_semaphore_wait(sem, value, hl_deadline_after(60000 * MS)));
      times[k][s] = hl_time_now() - t0;
    }
  }
  r->padded_elided_us = (double)median(times[0], (size_t)r->samples) / 1e3;
  r->padded_unelided_us = (double)median(times[1], (size_t)r->samples) / 1e3;
  free(times[0]);
  free(times[1]);
  hl_fence_release(fence);
  hl_semaphore_release(sem);
  hl_command_buffer_release(cbs[0]);
  hl_command_buffer_release(cbs[1]);
  for (int64_t t = 0; t < r->tensors; ++t) {
    CHECK(hl_queue_dealloca(q, NULL, NULL, tensors[t]));
    hl_buffer_release(tensors[t]);
  }
  CHECK(hl_queue_wait_idle(q, hl_deadline_after(60000 * MS)));
  free(tensors);
  free(sizes);
  free(data);
  hl_queue_release(q);
}

static int64_t parse_count(const char* flag, const char* value, int64_t min) {
  char* end = NULL;
  long long v = value ? strtoll(value, &end, 10) : 0;
  if (!value || *end || v < min) {
    fprintf(stderr, "%s needs an integer >= %lld\n", flag, (long long)min);
    exit(2);
  }
  return v;
}

int main(int argc, char** argv) {
  results_t r;
  memset(&r, 0, sizeof(r));
  r.ops = 3000;
  r.samples = 21;
  r.tensors = 256;
  r.executions = 1;
  r.backend = HL_BACKEND_HOST;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const char* next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "--ops") == 0) {
      r.ops = parse_count(argv[i], next, 1);
      ++i;
    } else if (strcmp(argv[i], "--samples") == 0) {
      r.samples = (int)parse_count(argv[i], next, 1);
      ++i;
    } else if (strcmp(argv[i], "--tensors") == 0) {
      r.tensors = parse_count(argv[i], next, 1);
      ++i;
    } else if (strcmp(argv[i], "--executions") == 0) {
      r.executions = parse_count(argv[i], next, 1);
      ++i;
    } else if (strcmp(argv[i], "--backend") == 0) {
      if (next && strcmp(next, "host") == 0) {
        r.backend = HL_BACKEND_HOST;
      } else if (next && strcmp(next, "hip") == 0) {
        r.backend = HL_BACKEND_HIP;
      } else {
        fprintf(stderr, "--backend: expected host or hip, got '%s'\n",
                next ? next : "(nothing)");
        return 2;
      }
      ++i;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(
          "usage: %s [--json] [--backend host|hip] [--ops N] [--samples S] "
          "[--tensors T] [--executions E]\n",
          argv[0]);
      return 0;
    } else {
      fprintf(stderr, "unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  hl_device_options_t options;
  hl_device_options_initialize(&options);
  options.backend = r.backend;
  hl_device_t* device = NULL;
  CHECK(hl_device_create(&options, hl_allocator_system(), &device));
  bench_ops(device, &r);
  bench_padding(device, &r);
  hl_device_release(device);

  double ratio = r.execute_ns > 0 ? r.one_by_one_ns / r.execute_ns : 0;
  if (json) {
    printf(
        "{\"ops\": %lld, \"samples\": %d, \"one_by_one_ns_per_op\": %.1f, "
        "\"execute_ns_per_op\": %.1f, \"record_ns_per_op\": %.1f, "
        "\"one_by_one_over_execute\": %.1f, \"tensors\": %lld, "
        "\"fill_bytes\": %llu, \"fill_bytes_elided\": %llu, "
        "\"fills_elided\": %llu, \"fills_shrunk\": %llu, "
        "\"padded_elided_us\": %.1f, \"padded_unelided_us\": %.1f}\n",
        (long long)r.ops, r.samples, r.one_by_one_ns, r.execute_ns, r.record_ns,
        ratio, (long long)r.tensors, (unsigned long long)r.fill_bytes,
        (unsigned long long)r.fill_bytes_elided,
        (unsigned long long)r.fills_elided, (unsigned long long)r.fills_shrunk,
        r.padded_elided_us, r.padded_unelided_us);
  } else {
    printf("hipline-bench-command-buffer (%s backend, medians of %d)\n",
           r.backend == HL_BACKEND_HIP ? "hip" : "host", r.samples);
    printf("  %lld ops (%s):\n", (long long)r.ops,
           r.backend == HL_BACKEND_HIP ? "64 B fills, 64 B copy"
                                       : "64 B fill, 16 B update, 64 B copy");
    printf("    one by one          %10.1f ns/op\n", r.one_by_one_ns);
    printf("    command buffer      %10.1f ns/op (execute; %.1fx cheaper)\n",
           r.execute_ns, ratio);
    printf("    record + finalize   %10.1f ns/op\n", r.record_ns);
    printf("  padding: %lld tensors padded to 256 B, splat then update:\n",
           (long long)r.tensors);
    printf(
        "    fill bytes          %10llu recorded, %llu not filled "
        "(%.1f%%; %llu fills dropped, %llu shrunk)\n",
        (unsigned long long)r.fill_bytes,
        (unsigned long long)r.fill_bytes_elided,
        r.fill_bytes
            ? 100.0 * (double)r.fill_bytes_elided / (double)r.fill_bytes
            : 0.0,
        (unsigned long long)r.fills_elided, (unsigned long long)r.fills_shrunk);
    printf("    execution           %10.1f us elided, %.1f us unelided\n",
           r.padded_elided_us, r.padded_unelided_us);
  }
  return 0;
}
