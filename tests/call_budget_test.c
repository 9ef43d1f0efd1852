// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// HIP call budgets per operation on the hip test runtime
// (tests/hip_test_runtime/call_counts.h). Each case runs this executable
// twice as a child doing the same operation SHORT and LONG times with
// HL_HIP_TEST_RUNTIME_CALL_COUNTS set, and divides the difference of the
// two counts by LONG - SHORT, so that set-up and tear-down cancel. Event
// creates and destroys are left out: the pool of events grows with how far
// the test runtime's slow device falls behind, not with the operation.
// The counts are deterministic upper bounds, not timings.
//
// The child: call_budget_test --child CASE N.

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hipline/buffer.h"
#include "hipline/command_buffer.h"
#include "hipline/device.h"
#include "hipline/dispatch.h"
#include "hipline/fence.h"
#include "hipline/invocation.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "tests/hip_test_runtime/call_counts.h"
#include "tests/test_util.h"

enum { kShort = 8, kLong = 136, kMaxEntries = 128 };

// A host copy of this size goes through three pinned staging pieces on the
// hip backend (HL_HIP_STAGING_MAX_BYTES is 4 MiB).
#define kStagedBytes ((uint64_t)9 << 20)

// Set-up and tear-down cancel in the difference except where they run:
// the last release of a device may run on hipline's destroy thread in one
// run and on the caller in the other. A few such calls, spread over the
// operations, stay under this.
static const double kSlack = 0.05;

// A cross-queue operation makes a device-side wait (an event recorded on
// the producer's stream, a stream wait, and the current device for a new
// event) only when the producer has not been published yet; when the
// completer keeps up, some of the SHORT run's operations make none, and the
// difference of the two runs then counts up to those three calls per SHORT
// operation on top of the LONG run's.
#define kShortRunElided (3.0 * kShort / (kLong - kShort))

//===----------------------------------------------------------------------===//
// The child: one operation, N times
//===----------------------------------------------------------------------===//

typedef struct child_t {
  hl_device_t* device;
  hl_queue_t* queues[4];
  hl_buffer_t* buffers[8];
  hl_semaphore_t* semaphore;
  hl_fence_t* fence;
  hl_buffer_t* large;  // kStagedBytes, for the staged copies.
  void* host;
} child_t;

static void child_fence(child_t* c, uint64_t value) {
  hl_fence_clear(c->fence);
  HL_ASSERT_OK(hl_fence_insert(c->fence, c->semaphore, value));
}

static void child_op(child_t* c, const char* op, uint64_t i) {
  hl_queue_t* q0 = c->queues[0];
  hl_queue_t* q1 = c->queues[1];
  if (strcmp(op, "fill") == 0) {
    HL_ASSERT_OK(
        hl_queue_fill(q0, NULL, NULL, c->buffers[0], 0, 4096, (uint32_t)i));
  } else if (strcmp(op, "dispatch") == 0) {
    HL_ASSERT_OK(
        hl_queue_fill_pattern(q0, NULL, NULL, c->buffers[0], (uint32_t)i));
  } else if (strcmp(op, "cross-wait") == 0) {
    // A fill on q0 that q1's fill waits for: two submissions, one wait.
    child_fence(c, i + 1);
    HL_ASSERT_OK(
        hl_queue_fill(q0, NULL, c->fence, c->buffers[0], 0, 4096, (uint32_t)i));
    HL_ASSERT_OK(
        hl_queue_fill(q1, c->fence, NULL, c->buffers[1], 0, 4096, (uint32_t)i));
  } else if (strcmp(op, "alloca") == 0 || strcmp(op, "alloca-cross") == 0) {
    hl_buffer_t* buffer = NULL;
    HL_ASSERT_OK(hl_queue_alloca(q0, NULL, NULL, 4096, 0, &buffer));
    HL_ASSERT_OK(hl_queue_dealloca(strcmp(op, "alloca") == 0 ? q0 : q1, NULL,
                                   NULL, buffer));
    hl_buffer_release(buffer);
  } else if (strcmp(op, "read-staged") == 0) {
    // Three staging pieces (4 MiB, 4 MiB, 1 MiB) into host memory. Each
    // copy is waited for on the host (no driver call on this thread), so
    // the pinned chunks are reused rather than grown with the device's lag.
    child_fence(c, i + 1);
    HL_ASSERT_OK(
        hl_queue_read(q0, NULL, c->fence, c->large, 0, c->host, kStagedBytes));
    HL_ASSERT_OK(hl_semaphore_wait(c->semaphore, i + 1, HL_INFINITE_FUTURE));
  } else if (strcmp(op, "write-staged") == 0) {
    child_fence(c, i + 1);
    HL_ASSERT_OK(
        hl_queue_write(q0, NULL, c->fence, c->host, c->large, 0, kStagedBytes));
    HL_ASSERT_OK(hl_semaphore_wait(c->semaphore, i + 1, HL_INFINITE_FUTURE));
  } else if (strcmp(op, "fill-4q") == 0) {
    // A fill on each of four queues: the device's one completer covers
    // them all (polling while this thread submits).
    for (size_t q = 0; q < 4; ++q) {
      HL_ASSERT_OK(hl_queue_fill(c->queues[q], NULL, NULL, c->buffers[q], 0,
                                 4096, (uint32_t)i));
    }
  } else if (strcmp(op, "wait-idle") == 0) {
    HL_ASSERT_OK(hl_device_wait_idle(c->device, HL_INFINITE_FUTURE));
  } else {
    fail_msg("unknown case %s", op);
  }
}

static hl_command_buffer_t* child_command_buffer(child_t* c) {
  hl_command_buffer_t* cb = NULL;
  HL_ASSERT_OK(hl_command_buffer_create(c->device, 0, &cb));
  // Eight commands the elision pass keeps (each writes its own buffer):
  // fills and kernel dispatches, alternately.
  for (size_t j = 0; j < 8; ++j) {
    if (j % 2) {
      HL_ASSERT_OK(
          hl_command_buffer_fill(cb, c->buffers[j], 0, 4096, (uint32_t)j));
      continue;
    }
    hl_kernel_arg_t args[3] = {
        {.kind = HL_KERNEL_ARG_BUFFER,
         .buffer = c->buffers[j],
         .length = 4096,
         .access = HL_ACCESS_WRITE},
        {.kind = HL_KERNEL_ARG_SCALAR, .scalar = 1024, .size = 8},
        {.kind = HL_KERNEL_ARG_SCALAR, .scalar = j, .size = 4}};
    HL_ASSERT_OK(
        hl_command_buffer_dispatch(cb, "fill_pattern", NULL, 3, args, NULL));
  }
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  return cb;
}

static int child_main(const char* op, long n) {
  child_t c = {0};
  hl_device_options_t options;
  hl_device_options_initialize(&options);
  options.backend = HL_BACKEND_HIP;
  HL_ASSERT_OK(hl_device_create(&options, hl_allocator_system(), &c.device));
  for (size_t i = 0; i < 4; ++i) {
    HL_ASSERT_OK(hl_queue_create(c.device, &c.queues[i]));
  }
  for (size_t i = 0; i < 8; ++i) {
    HL_ASSERT_OK(
        hl_queue_alloca(c.queues[0], NULL, NULL, 4096, 0, &c.buffers[i]));
  }
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &c.semaphore));
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &c.fence));
  HL_ASSERT_OK(hl_device_wait_idle(c.device, HL_INFINITE_FUTURE));
  if (strncmp(op, "read-", 5) == 0 || strncmp(op, "write-", 6) == 0) {
    HL_ASSERT_OK(
        hl_queue_alloca(c.queues[0], NULL, NULL, kStagedBytes, 0, &c.large));
    c.host = calloc(1, kStagedBytes);
    assert_non_null(c.host);
    HL_ASSERT_OK(hl_device_wait_idle(c.device, HL_INFINITE_FUTURE));
  }
  hl_command_buffer_t* cb = NULL;
  if (strcmp(op, "command-buffer") == 0) cb = child_command_buffer(&c);
  for (long i = 0; i < n; ++i) {
    if (cb) {
      HL_ASSERT_OK(hl_queue_execute(c.queues[0], NULL, NULL, cb));
    } else {
      child_op(&c, op, (uint64_t)i);
    }
  }
  HL_ASSERT_OK(hl_device_wait_idle(c.device, HL_INFINITE_FUTURE));
  hl_command_buffer_release(cb);
  if (c.large) {
    HL_ASSERT_OK(hl_queue_dealloca(c.queues[0], NULL, NULL, c.large));
    hl_buffer_release(c.large);
  }
  free(c.host);
  hl_fence_release(c.fence);
  hl_semaphore_release(c.semaphore);
  for (size_t i = 0; i < 8; ++i) {
    HL_ASSERT_OK(hl_queue_dealloca(c.queues[0], NULL, NULL, c.buffers[i]));
    hl_buffer_release(c.buffers[i]);
  }
  HL_ASSERT_OK(hl_device_wait_idle(c.device, HL_INFINITE_FUTURE));
  for (size_t i = 0; i < 4; ++i) hl_queue_release(c.queues[i]);
  hl_device_release(c.device);
  return 0;
}

//===----------------------------------------------------------------------===//
// The parent: two runs, their difference, the budget
//===----------------------------------------------------------------------===//

typedef struct counts_t {
  size_t count;
  char names[kMaxEntries][64];
  long long caller[kMaxEntries];
  long long runtime[kMaxEntries];
} counts_t;

static char self_path[4096];

static void counts_read(const char* path, counts_t* out) {
  memset(out, 0, sizeof(*out));
  FILE* file = fopen(path, "r");
  if (!file) fail_msg("%s: %s", path, strerror(errno));
  char line[256];
  while (fgets(line, sizeof(line), file)) {
    if (line[0] == '#') continue;
    long long total = 0;
    size_t i = out->count;
    assert_true(i < kMaxEntries);
    assert_int_equal(sscanf(line, "%63s %lld %lld %lld", out->names[i], &total,
                            &out->caller[i], &out->runtime[i]),
                     4);
    ++out->count;
  }
  fclose(file);
}

static void counts_of(const counts_t* c, const char* name, long long* caller,
                      long long* runtime) {
  *caller = *runtime = 0;
  for (size_t i = 0; i < c->count; ++i) {
    if (strcmp(c->names[i], name) == 0) {
      *caller = c->caller[i];
      *runtime = c->runtime[i];
    }
  }
}

// Runs |argv| with the counter writing to a fresh file; reads it into |out|.
static void run_counted(char* const* argv, const char* const* env,
                        counts_t* out) {
  char path[4200];
  const char* dir = getenv("TMPDIR");
  snprintf(path, sizeof(path), "%s/hl_call_budget_%ld.txt", dir ? dir : "/tmp",
           (long)getpid());
  unlink(path);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setenv(HL_CALL_COUNTS_ENV, path, 1);
    for (size_t i = 0; env && env[i]; i += 2) setenv(env[i], env[i + 1], 1);
    if (!freopen("/dev/null", "w", stdout)) _exit(126);
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail_msg("%s %s %s: exit status %d", argv[0], argv[1] ? argv[1] : "",
             argv[1] && argv[2] ? argv[2] : "", status);
  }
  counts_read(path, out);
  unlink(path);
}

typedef struct per_op_t {
  double caller, runtime;
  char detail[2048];  // Each entry's share, for the failure message.
} per_op_t;

static bool counted(const char* name) {
  return strcmp(name, "hipEventCreateWithFlags") != 0 &&
         strcmp(name, "hipEventDestroy") != 0;
}

static void per_op(const counts_t* a, const counts_t* b, long ops,
                   per_op_t* out) {
  memset(out, 0, sizeof(*out));
  size_t used = 0;
  for (size_t i = 0; i < b->count; ++i) {
    if (!counted(b->names[i])) continue;
    long long ca = 0, ra = 0;
    counts_of(a, b->names[i], &ca, &ra);
    double c = (double)(b->caller[i] - ca) / (double)ops;
    double r = (double)(b->runtime[i] - ra) / (double)ops;
    if (c == 0 && r == 0) continue;
    out->caller += c;
    out->runtime += r;
    int n = snprintf(out->detail + used, sizeof(out->detail) - used,
                     " %s=%.2f/%.2f", b->names[i], c, r);
    if (n > 0 && (size_t)n < sizeof(out->detail) - used) used += (size_t)n;
  }
}

// Per-operation calls from the submitting thread and from hipline's.
static void measure_child(const char* op, const char* const* env,
                          per_op_t* out) {
  char short_n[16], long_n[16];
  snprintf(short_n, sizeof(short_n), "%d", kShort);
  snprintf(long_n, sizeof(long_n), "%d", kLong);
  char* argv_short[] = {self_path, "--child", (char*)op, short_n, NULL};
  char* argv_long[] = {self_path, "--child", (char*)op, long_n, NULL};
  counts_t* a = malloc(sizeof(counts_t));
  counts_t* b = malloc(sizeof(counts_t));
  assert_non_null(a);
  assert_non_null(b);
  run_counted(argv_short, env, a);
  run_counted(argv_long, env, b);
  per_op(a, b, kLong - kShort, out);
  free(a);
  free(b);
  printf("%-28s caller %5.2f  runtime %5.2f  (caller/runtime:%s)\n", op,
         out->caller, out->runtime, out->detail);
}

static void check_budget_env(const char* op, const char* const* env,
                             const char* allocator, double caller_budget,
                             double runtime_budget, per_op_t* out) {
  per_op_t got;
  measure_child(op, env, &got);
  if (out) *out = got;
  if (got.caller > caller_budget + kSlack ||
      got.runtime > runtime_budget + kSlack) {
    fail_msg(
        "%s (HIPLINE_ALLOCATOR=%s): %.2f calls from the submitter "
        "(budget %.2f), %.2f from hipline's threads (budget %.2f):%s",
        op, allocator, got.caller, caller_budget, got.runtime, runtime_budget,
        got.detail);
  }
}

static void check_budget(const char* op, const char* allocator,
                         double caller_budget, double runtime_budget) {
  const char* env[] = {"HIPLINE_ALLOCATOR", allocator, NULL};
  check_budget_env(op, env, allocator, caller_budget, runtime_budget, NULL);
}

// The budgets: calls per operation from the submitting thread, and from
// hipline's threads. hipline's completer closes a batch of submissions with
// one wait, so its count depends on how far the device fell behind; its
// budget is the worst case, one wait per submission.
static void test_fill(void** state) {
  (void)state;
  check_budget("fill", "hipline", 1, 1);  // The memset; no event.
}

static void test_dispatch(void** state) {
  (void)state;
  check_budget("dispatch", "hipline", 1, 1);  // The launch; no event.
}

static void test_cross_queue_wait(void** state) {
  (void)state;
  // Two memsets, the waiter's record on the producer's stream and its
  // stream wait, and the current device for the event the record takes
  // from the pool when the pool is empty (the test runtime's slow device
  // keeps each one busy for longer than the run).
  check_budget("cross-wait", "hipline", 5 + kShortRunElided, 2);
}

static void test_alloca_hipline(void** state) {
  (void)state;
  check_budget("alloca", "hipline", 0, 2);
}

static void test_alloca_driver(void** state) {
  (void)state;
  check_budget("alloca", "driver", 2, 2);  // Malloc and free.
}

static void test_alloca_cross_driver(void** state) {
  (void)state;
  // The dealloca's queue waits for the alloca's (record, wait, and the
  // current device when the event pool is empty); the free goes to the
  // allocating stream after an event of the freeing one, from a pool
  // (hl_hip_free_after: query, record, wait, free); malloc.
  check_budget("alloca-cross", "driver", 8 + kShortRunElided, 2);
}

static void test_alloca_cross_hipline(void** state) {
  (void)state;
  // The dealloca's queue waits for the alloca's (a late waiter: one record,
  // one stream wait, the current device for a new event); the slabs grow
  // now and then while cross-queue frees wait to be reusable.
  check_budget("alloca-cross", "hipline", 4 + kShortRunElided, 2);
}

static void test_command_buffer(void** state) {
  (void)state;
  // Eight commands, one hipGraphLaunch (the graph is built at the first
  // execution, in both runs).
  check_budget("command-buffer", "hipline", 1, 1);
}

static void test_command_buffer_without_graphs(void** state) {
  (void)state;
  // A HIP library without the graph entries (the test runtime built with
  // HL_TRT_NO_GRAPH): the command buffer replays on the stream, four
  // launches and four memsets per execution, and makes no graph call.
  const char* env[] = {"HIPLINE_ALLOCATOR", "hipline", "LD_LIBRARY_PATH",
                       HL_TRT_NOGRAPH_DIR, NULL};
  per_op_t got;
  check_budget_env("command-buffer", env, "hipline", 8, 1, &got);
  assert_true(got.caller >= 8 - kSlack);
  assert_null(strstr(got.detail, "hipGraph"));
  assert_non_null(strstr(got.detail, "hipModuleLaunchKernel=4.00"));
}

static void test_read_staged(void** state) {
  (void)state;
  // Three pieces: three copies into pinned chunks, and one host function at
  // the end that delivers them all (not one per piece). The completer's
  // wait for the host waiter is on hipline's thread.
  check_budget("read-staged", "hipline", 4, 1);
}

static void test_write_staged(void** state) {
  (void)state;
  // Three copies from pinned chunks, one host function that releases them.
  check_budget("write-staged", "hipline", 4, 1);
}

static void test_wait_idle(void** state) {
  (void)state;
  // Four idle queues: one stream synchronization each; the pool's
  // attributes are known without asking the driver.
  check_budget("wait-idle", "hipline", 4, 0);
}

static void test_fill_four_queues(void** state) {
  (void)state;
  // Four memsets; the completer's waits and queries for all four queues
  // stay under one per submission, polled or blocking.
  check_budget("fill-4q", "hipline", 4, 4);
  const char* env[] = {"HIPLINE_COMPLETER", "block", NULL};
  check_budget_env("fill-4q", env, "hipline", 4, 4, NULL);
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "--child") == 0) {
    char* end = NULL;
    long n = strtol(argv[3], &end, 10);
    if (*end || n < 0) return 2;
    return child_main(argv[2], n);
  }
  ssize_t n = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
  if (n <= 0) return 1;
  self_path[n] = '\0';
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fill),
      cmocka_unit_test(test_dispatch),
      cmocka_unit_test(test_cross_queue_wait),
      cmocka_unit_test(test_alloca_hipline),
      cmocka_unit_test(test_alloca_driver),
      cmocka_unit_test(test_alloca_cross_driver),
      cmocka_unit_test(test_alloca_cross_hipline),
      cmocka_unit_test(test_command_buffer),
      cmocka_unit_test(test_command_buffer_without_graphs),
      cmocka_unit_test(test_read_staged),
      cmocka_unit_test(test_write_staged),
      cmocka_unit_test(test_wait_idle),
      cmocka_unit_test(test_fill_four_queues),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
