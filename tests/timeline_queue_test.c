// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Queues on the host backend through the public API: wait-before-signal
// parking, fan-out and fan-in, wait elision, failure propagation across
// queues, injected submission failures, and event/stream leak checks over a
// long fork-join run (through the internal device struct).

#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>
#include <threads.h>

#include "hipline/dispatch.h"
#include "hipline/fence.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "hipline/time.h"
#include "runtime/base/faults.h"
#include "runtime/timeline/timeline_internal.h"
// C11 threads on pthreads under TSan (see tests/test_util.h).
#define HL_TEST_C11_THREADS_SHIM 1
#include "tests/hip_test_runtime/hip_test_runtime.h"
#include "tests/test_util.h"

#define MS ((hl_duration_t)1000000)
#define LONG_DEADLINE() hl_deadline_after(20000 * MS)

static hl_semaphore_t* sem_create(uint64_t initial) {
  hl_semaphore_t* s = NULL;
  HL_ASSERT_OK(hl_semaphore_create(initial, hl_allocator_system(), &s));
  return s;
}

// A fence of up to three pairs (NULL semaphores are skipped).
static hl_fence_t* fence_of(hl_semaphore_t* s0, uint64_t v0, hl_semaphore_t* s1,
                            uint64_t v1, hl_semaphore_t* s2, uint64_t v2) {
  hl_fence_t* f = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &f));
  if (s0) HL_ASSERT_OK(hl_fence_insert(f, s0, v0));
  if (s1) HL_ASSERT_OK(hl_fence_insert(f, s1, v1));
  if (s2) HL_ASSERT_OK(hl_fence_insert(f, s2, v2));
  return f;
}
#define FENCE1(s, v) fence_of((s), (v), NULL, 0, NULL, 0)

// Records the global order in which host calls ran.
typedef struct order_t {
  atomic_int next;
} order_t;

typedef struct step_t {
  order_t* order;
  atomic_int at;  // 0 until run, then 1 + position.
  int sleep_ms;
} step_t;

static void step_init(step_t* s, order_t* order, int sleep_ms) {
  s->order = order;
  atomic_init(&s->at, 0);
  s->sleep_ms = sleep_ms;
}

static void step_fn(void* user) {
  step_t* s = (step_t*)user;
  if (s->sleep_ms) hl_test_sleep_ms(s->sleep_ms);
  atomic_store(&s->at, atomic_fetch_add(&s->order->next, 1) + 1);
}

static int step_at(step_t* s) { return atomic_load(&s->at); }

static void host_call(hl_queue_t* q, hl_fence_t* wait, hl_fence_t* signal,
                      step_t* step) {
  HL_ASSERT_OK(hl_queue_host_call(q, wait, signal, step_fn, step));
  hl_fence_release(wait);
  hl_fence_release(signal);
}

static void barrier(hl_queue_t* q, hl_fence_t* wait, hl_fence_t* signal) {
  HL_ASSERT_OK(hl_queue_barrier(q, wait, signal));
  hl_fence_release(wait);
  hl_fence_release(signal);
}

static hl_queue_t* queue_create(hl_device_t* device) {
  hl_queue_t* q = NULL;
  HL_ASSERT_OK(hl_queue_create(device, &q));
  return q;
}

// Every event the device made is back in its pool (none held by semaphores,
// timepoints or in flight twice), and the backend agrees on the counts.
static void expect_device_events_pooled(hl_device_t* device,
                                        int64_t live_queues) {
  hl_device_flush_work(device);
  hl_device_lock(device);
  int64_t live = atomic_load(&device->live_events);
  int64_t pooled = device->free_event_count;
  bool duplicate = false;
  for (uint32_t i = 0; i < device->free_event_count && !duplicate; ++i) {
    for (uint32_t j = i + 1; j < device->free_event_count; ++j) {
      if (device->free_events[i] == device->free_events[j]) {
        duplicate = true;
        break;
      }
    }
  }
  hl_device_unlock(device);
  hl_backend_counts_t counts;
  device->backend->vtable->live_counts(device->backend, &counts);
  assert_false(duplicate);  // An event recycled twice.
  assert_int_equal(live, pooled);
  assert_int_equal(counts.live_events, live);
  assert_int_equal(counts.live_streams, live_queues);
}

//===----------------------------------------------------------------------===//
// Wait-before-signal, fan-out, fan-in
//===----------------------------------------------------------------------===//

static void test_wait_before_signal(void** state) {
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* a = queue_create(device);
  hl_queue_t* b = queue_create(device);
  hl_semaphore_t* s = sem_create(0);
  hl_semaphore_t* done = sem_create(0);
  order_t order;
  atomic_init(&order.next, 0);
  step_t sa, sb;
  step_init(&sa, &order, 0);
  step_init(&sb, &order, 0);

  // The waiter first. The signal is submitted later by this same thread, so
  // a submission that blocked its caller would never return.
  host_call(b, FENCE1(s, 1), FENCE1(done, 1), &sb);
  hl_queue_stats_t stats;
  hl_queue_stats(b, &stats);
  assert_int_equal(stats.parked, 1);
  assert_int_equal(stats.submissions, 1);
  hl_test_sleep_ms(50);
  assert_int_equal(step_at(&sb), 0);
  uint64_t v = 1;
  HL_ASSERT_OK(hl_semaphore_query(done, &v));
  assert_int_equal(v, 0);

  host_call(a, NULL, FENCE1(s, 1), &sa);
  HL_ASSERT_OK(hl_semaphore_wait(done, 1, LONG_DEADLINE()));
  assert_int_equal(step_at(&sa), 1);
  assert_int_equal(step_at(&sb), 2);

  HL_ASSERT_OK(hl_queue_wait_idle(a, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(b, LONG_DEADLINE()));
  expect_device_events_pooled(device, 2);
  hl_semaphore_release(s);
  hl_semaphore_release(done);
  hl_queue_release(a);
  hl_queue_release(b);
  hl_device_release(device);
}

// A signals S; B, C, D wait on it; E waits on all three. Submitted in the
// worst order (consumers first) and the best (producer first).
static void run_fan_out_fan_in(bool consumers_first) {
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q[5];
  for (int i = 0; i < 5; ++i) q[i] = queue_create(device);
  hl_semaphore_t* s = sem_create(0);
  hl_semaphore_t* x[3];
  for (int i = 0; i < 3; ++i) x[i] = sem_create(0);
  hl_semaphore_t* end = sem_create(0);
  order_t order;
  atomic_init(&order.next, 0);
  step_t steps[5];
  step_init(&steps[0], &order, 20);  // The producer is slow.
  for (int i = 1; i < 5; ++i) step_init(&steps[i], &order, i == 4 ? 0 : 5);

  if (!consumers_first) host_call(q[0], NULL, FENCE1(s, 1), &steps[0]);
  host_call(q[4], fence_of(x[0], 1, x[1], 1, x[2], 1), FENCE1(end, 1),
            &steps[4]);
  for (int i = 1; i <= 3; ++i) {
    host_call(q[i], FENCE1(s, 1), FENCE1(x[i - 1], 1), &steps[i]);
  }
  if (consumers_first) host_call(q[0], NULL, FENCE1(s, 1), &steps[0]);

  HL_ASSERT_OK(hl_semaphore_wait(end, 1, LONG_DEADLINE()));
  assert_int_equal(step_at(&steps[0]), 1);
  for (int i = 1; i <= 3; ++i) {
    assert_true(step_at(&steps[i]) >= 2 && step_at(&steps[i]) <= 4);
  }
  assert_int_equal(step_at(&steps[4]), 5);
  for (int i = 0; i < 5; ++i)
    HL_ASSERT_OK(hl_queue_wait_idle(q[i], LONG_DEADLINE()));
  expect_device_events_pooled(device, 5);
  for (int i = 0; i < 5; ++i) hl_queue_release(q[i]);
  for (int i = 0; i < 3; ++i) hl_semaphore_release(x[i]);
  hl_semaphore_release(s);
  hl_semaphore_release(end);
  hl_device_release(device);
}

static void test_fan_out_fan_in(void** state) {
  run_fan_out_fan_in(false);
  run_fan_out_fan_in(true);
}

// Parked submissions are released by a host signal, by a larger value than
// the one they wait for, and by another queue's timeline.
static void test_park_released_by_host_and_timeline(void** state) {
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* a = queue_create(device);
  hl_queue_t* b = queue_create(device);
  hl_semaphore_t* s = sem_create(0);
  hl_semaphore_t* done = sem_create(0);
  order_t order;
  atomic_init(&order.next, 0);
  step_t steps[4];
  for (int i = 0; i < 4; ++i) step_init(&steps[i], &order, 0);

  // 1. Host signal of a larger value.
  host_call(b, FENCE1(s, 3), FENCE1(done, 1), &steps[0]);
  hl_test_sleep_ms(10);
  assert_int_equal(step_at(&steps[0]), 0);
  HL_ASSERT_OK(hl_semaphore_signal(s, 5));
  HL_ASSERT_OK(hl_semaphore_wait(done, 1, LONG_DEADLINE()));
  assert_int_equal(step_at(&steps[0]), 1);

  // 2. A's timeline value 2, not yet submitted when B waits on it.
  host_call(b, FENCE1(hl_queue_timeline(a), 2), FENCE1(done, 2), &steps[1]);
  host_call(a, NULL, NULL, &steps[2]);
  hl_test_sleep_ms(10);
  assert_int_equal(step_at(&steps[1]), 0);  // A's value 1 is not enough.
  host_call(a, NULL, NULL, &steps[3]);
  HL_ASSERT_OK(hl_semaphore_wait(done, 2, LONG_DEADLINE()));
  assert_int_equal(step_at(&steps[2]), 2);
  assert_int_equal(step_at(&steps[3]), 3);
  assert_int_equal(step_at(&steps[1]), 4);
  hl_queue_stats_t stats;
  hl_queue_stats(b, &stats);
  assert_int_equal(stats.parked, 2);

  HL_ASSERT_OK(hl_queue_wait_idle(a, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(b, LONG_DEADLINE()));
  expect_device_events_pooled(device, 2);
  hl_semaphore_release(s);
  hl_semaphore_release(done);
  hl_queue_release(a);
  hl_queue_release(b);
  hl_device_release(device);
}

//===----------------------------------------------------------------------===//
// Wait elision
//===----------------------------------------------------------------------===//

static void gate_sleep_fn(void* user) { hl_test_sleep_ms(*(int*)user); }

static void test_wait_elision(void** state) {
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* a = queue_create(device);
  hl_queue_t* b = queue_create(device);
  hl_semaphore_t* s = sem_create(0);
  hl_queue_stats_t before, after;

  // Reached on the host: a wait on a smaller value is elided.
  barrier(a, NULL, FENCE1(s, 5));
  HL_ASSERT_OK(hl_semaphore_wait(s, 5, LONG_DEADLINE()));
  hl_queue_stats(b, &before);
  barrier(b, FENCE1(s, 3), NULL);
  hl_queue_stats(b, &after);
  assert_int_equal(after.waits_elided, before.waits_elided + 1);
  assert_int_equal(after.waits_issued, before.waits_issued);

  // Not reached yet: the first wait is issued, then the frontier covers
  // smaller (and equal) values. A host call holds the signal back on the
  // device only where host calls run on the stream; where the queue runs
  // them on its completer (host_functions_serialized: HIP), the barrier
  // after it is not issued until the call has run, so there is no "issued,
  // not reached" state to look at.
  if (device->backend->host_functions_serialized) {
    HL_ASSERT_OK(hl_queue_wait_idle(a, LONG_DEADLINE()));
    HL_ASSERT_OK(hl_queue_wait_idle(b, LONG_DEADLINE()));
    expect_device_events_pooled(device, 2);
    hl_semaphore_release(s);
    hl_queue_release(a);
    hl_queue_release(b);
    hl_device_release(device);
    return;
  }
  int sleep_ms = 50;
  HL_ASSERT_OK(hl_queue_host_call(a, NULL, NULL, gate_sleep_fn, &sleep_ms));
  barrier(a, NULL, FENCE1(s, 10));
  hl_queue_stats(b, &before);
  barrier(b, FENCE1(s, 10), NULL);
  hl_queue_stats(b, &after);
  assert_int_equal(after.waits_issued, before.waits_issued + 1);
  assert_int_equal(after.waits_elided, before.waits_elided);
  barrier(b, FENCE1(s, 7), NULL);
  barrier(b, FENCE1(s, 10), NULL);
  hl_queue_stats(b, &after);
  assert_int_equal(after.waits_issued, before.waits_issued + 1);
  assert_int_equal(after.waits_elided, before.waits_elided + 2);

  // A wait on the queue's own earlier submission is elided.
  hl_queue_stats(b, &before);
  barrier(b, FENCE1(hl_queue_timeline(b), before.submitted_value), NULL);
  hl_queue_stats(b, &after);
  assert_int_equal(after.waits_issued, before.waits_issued);
  assert_int_equal(after.waits_elided, before.waits_elided + 1);

  HL_ASSERT_OK(hl_queue_wait_idle(b, LONG_DEADLINE()));
  uint64_t v = 0;
  HL_ASSERT_OK(hl_semaphore_query(s, &v));
  assert_int_equal(v, 10);  // B finished, so A's signal is reached.
  HL_ASSERT_OK(hl_queue_wait_idle(a, LONG_DEADLINE()));
  expect_device_events_pooled(device, 2);
  hl_semaphore_release(s);
  hl_queue_release(a);
  hl_queue_release(b);
  hl_device_release(device);
}

//===----------------------------------------------------------------------===//
// Failure propagation
//===----------------------------------------------------------------------===//

static void expect_failed(hl_semaphore_t* s, hl_status_code_t code,
                          const char* text) {
  hl_status_t st = hl_semaphore_wait(s, 1, LONG_DEADLINE());
  char buffer[1024];
  hl_status_format(st, buffer, sizeof(buffer));
  bool ok = hl_status_code(st) == code && strstr(hl_status_message(st), text);
  hl_status_free(st);
  if (!ok) {
    fail_msg("expected %s with '%s', got '%s'", hl_status_code_name(code), text,
             buffer);
  }
}

// mode 0: the chain parks, then the root fails.
// mode 1: the root fails before the chain is submitted.
// mode 2: the chain is issued on the device (the root has a pending device
//         signal), then the root fails from the host before it completes.
static void run_failure_chain(int mode) {
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q[4];
  for (int i = 0; i < 4; ++i) q[i] = queue_create(device);
  hl_semaphore_t* s[4];
  for (int i = 0; i < 4; ++i) s[i] = sem_create(0);
  order_t order;
  atomic_init(&order.next, 0);
  step_t last;
  step_init(&last, &order, 0);
  const char* text = "root cause #1234";

  int sleep_ms = 100;
  if (mode == 2) {
    HL_ASSERT_OK(
        hl_queue_host_call(q[3], NULL, NULL, gate_sleep_fn, &sleep_ms));
    barrier(q[3], NULL, FENCE1(s[0], 1));
  }
  if (mode == 1) {
    hl_semaphore_fail(s[0], HL_MAKE_STATUS(HL_STATUS_ABORTED, "%s", text));
  }
  barrier(q[0], FENCE1(s[0], 1), FENCE1(s[1], 1));
  barrier(q[1], FENCE1(s[1], 1), FENCE1(s[2], 1));
  host_call(q[2], FENCE1(s[2], 1), FENCE1(s[3], 1), &last);
  if (mode != 1) {
    hl_test_sleep_ms(10);
    hl_semaphore_fail(s[0], HL_MAKE_STATUS(HL_STATUS_ABORTED, "%s", text));
  }
  for (int i = 1; i < 4; ++i) expect_failed(s[i], HL_STATUS_ABORTED, text);
  assert_int_equal(step_at(&last), 0);  // Skipped.
  hl_queue_stats_t stats;
  hl_queue_stats(q[2], &stats);
  assert_int_equal(stats.failed, 1);

  // A failed wait fails the submission, not the queue: later work runs.
  for (int i = 0; i < 3; ++i) {
    hl_status_t st = hl_queue_status(q[i]);
    assert_null(st);
    hl_status_free(st);
  }
  step_t after;
  step_init(&after, &order, 0);
  hl_semaphore_t* fine = sem_create(0);
  host_call(q[2], NULL, FENCE1(fine, 1), &after);
  HL_ASSERT_OK(hl_semaphore_wait(fine, 1, LONG_DEADLINE()));
  assert_int_equal(step_at(&after), 1);

  for (int i = 0; i < 4; ++i) {
    HL_ASSERT_OK(hl_queue_wait_idle(q[i], LONG_DEADLINE()));
  }
  expect_device_events_pooled(device, 4);
  hl_semaphore_release(fine);
  for (int i = 0; i < 4; ++i) {
    hl_queue_release(q[i]);
    hl_semaphore_release(s[i]);
  }
  hl_device_release(device);
}

static void test_failure_chain_parked(void** state) { run_failure_chain(0); }
static void test_failure_chain_prefailed(void** state) { run_failure_chain(1); }
static void test_failure_chain_issued(void** state) { run_failure_chain(2); }

// HIPLINE_FAULTS fail_submission=K: the Kth submission fails with INTERNAL
// ("injected"), its signal semaphores fail, and the queue keeps working.
static void test_injected_submission_failure(void** state) {
  hl_faults_t faults;
  memset(&faults, 0, sizeof(faults));
  faults.fail_submission = 2;
  hl_faults_t previous = hl_faults_set(&faults);  // Before any stream exists.
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q = queue_create(device);
  hl_semaphore_t* s[3];
  for (int i = 0; i < 3; ++i) s[i] = sem_create(0);
  order_t order;
  atomic_init(&order.next, 0);
  step_t steps[3];
  for (int i = 0; i < 3; ++i) step_init(&steps[i], &order, 0);
  for (int i = 0; i < 3; ++i) host_call(q, NULL, FENCE1(s[i], 1), &steps[i]);

  HL_ASSERT_OK(hl_semaphore_wait(s[0], 1, LONG_DEADLINE()));
  expect_failed(s[1], HL_STATUS_INTERNAL, "injected");
  HL_ASSERT_OK(hl_semaphore_wait(s[2], 1, LONG_DEADLINE()));
  assert_int_equal(step_at(&steps[0]), 1);
  assert_int_equal(step_at(&steps[1]), 0);  // The failed one never ran.
  assert_int_equal(step_at(&steps[2]), 2);
  hl_status_t st = hl_queue_status(q);
  assert_null(st);
  hl_status_free(st);
  hl_queue_stats_t stats;
  hl_queue_stats(q, &stats);
  assert_int_equal(stats.failed, 1);
  assert_int_equal(stats.submissions, 3);
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  expect_device_events_pooled(device, 1);
  for (int i = 0; i < 3; ++i) hl_semaphore_release(s[i]);
  hl_queue_release(q);
  hl_device_release(device);
  hl_faults_set(&previous);
}

//===----------------------------------------------------------------------===//
// Leaks
//===----------------------------------------------------------------------===//

// The smallest case: one submission signalling one semaphore.
static void test_single_signal_event_pooled(void** state) {
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q = queue_create(device);
  hl_semaphore_t* s = sem_create(0);
  barrier(q, NULL, FENCE1(s, 1));
  HL_ASSERT_OK(hl_semaphore_wait(s, 1, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  expect_device_events_pooled(device, 1);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(device);
}

// 100,000 submissions in fork-join groups of four: A signals S; B and C wait
// on S and signal X and Y; D waits on X and Y. The event count stays bounded
// and every event ends up back in the pool.
static void test_fork_join_no_leaks(void** state) {
  const uint64_t submissions = hl_test_scale(100000, 10);
  const uint64_t groups = submissions / 4;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q[4];
  for (int i = 0; i < 4; ++i) q[i] = queue_create(device);
  hl_semaphore_t* s = sem_create(0);
  hl_semaphore_t* x = sem_create(0);
  hl_semaphore_t* y = sem_create(0);
  hl_fence_t* f_s = FENCE1(s, 0);
  hl_fence_t* f_x = FENCE1(x, 0);
  hl_fence_t* f_y = FENCE1(y, 0);
  hl_fence_t* f_xy = fence_of(x, 0, y, 0, NULL, 0);
  int64_t max_live = 0;
  for (uint64_t i = 1; i <= groups; ++i) {
    hl_fence_clear(f_s);
    HL_ASSERT_OK(hl_fence_insert(f_s, s, i));
    hl_fence_clear(f_x);
    HL_ASSERT_OK(hl_fence_insert(f_x, x, i));
    hl_fence_clear(f_y);
    HL_ASSERT_OK(hl_fence_insert(f_y, y, i));
    hl_fence_clear(f_xy);
    HL_ASSERT_OK(hl_fence_insert(f_xy, x, i));
    HL_ASSERT_OK(hl_fence_insert(f_xy, y, i));
    // Alternate which side is submitted first, so half the groups park.
    if (i & 1) HL_ASSERT_OK(hl_queue_barrier(q[0], NULL, f_s));
    HL_ASSERT_OK(hl_queue_barrier(q[1], f_s, f_x));
    HL_ASSERT_OK(hl_queue_barrier(q[2], f_s, f_y));
    if (!(i & 1)) HL_ASSERT_OK(hl_queue_barrier(q[0], NULL, f_s));
    HL_ASSERT_OK(hl_queue_barrier(q[3], f_xy, NULL));
    if (i % 64 == 0) {
      // Bound the work in flight (at most ~100 groups, 400 submissions,
      // each holding one event), then sample the event count.
      HL_ASSERT_OK(
          hl_semaphore_wait(hl_queue_timeline(q[3]), i - 32, LONG_DEADLINE()));
      int64_t live = atomic_load(&device->live_events);
      if (live > max_live) max_live = live;
      assert_true(live < 1000);
    }
  }
  for (int i = 0; i < 4; ++i)
    HL_ASSERT_OK(hl_queue_wait_idle(q[i], LONG_DEADLINE()));
  uint64_t v = 0;
  HL_ASSERT_OK(hl_semaphore_query(x, &v));
  assert_int_equal(v, groups);
  hl_queue_stats_t stats;
  uint64_t total = 0;
  for (int i = 0; i < 4; ++i) {
    hl_queue_stats(q[i], &stats);
    total += stats.submissions;
    assert_int_equal(stats.failed, 0);
  }
  assert_int_equal(total, groups * 4);
  print_message("%llu submissions, at most %lld live events\n",
                (unsigned long long)total, (long long)max_live);
  expect_device_events_pooled(device, 4);
  hl_fence_release(f_s);
  hl_fence_release(f_x);
  hl_fence_release(f_y);
  hl_fence_release(f_xy);
  for (int i = 0; i < 4; ++i) hl_queue_release(q[i]);
  expect_device_events_pooled(device, 0);
  hl_semaphore_release(s);
  hl_semaphore_release(x);
  hl_semaphore_release(y);
  hl_device_release(device);
}

//===----------------------------------------------------------------------===//
// A queue's own timeline is the queue's (issue 19)
//===----------------------------------------------------------------------===//

static void noop_fn(void* user) { (void)user; }

// Signalling or failing hl_queue_timeline(q) from outside is
// INVALID_ARGUMENT (before: accepted, and a later completion touched freed
// memory); so is a wait on the queue's own timeline at a value the queue has
// not submitted (before: silently skipped).
static void test_queue_timeline_is_owned(void** state) {
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q = queue_create(device);
  hl_semaphore_t* t = hl_queue_timeline(q);
  hl_semaphore_t* s = sem_create(0);
  HL_ASSERT_OK(hl_queue_host_call(q, NULL, NULL, noop_fn, NULL));
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  hl_test_assert_status_has(hl_semaphore_signal(t, 5),
                            HL_STATUS_INVALID_ARGUMENT, "timeline", NULL);
  hl_test_assert_status_has(
      hl_semaphore_fail(t, HL_MAKE_STATUS(HL_STATUS_ABORTED, "outside")),
      HL_STATUS_INVALID_ARGUMENT, "timeline", NULL);
  uint64_t value = 0;
  HL_ASSERT_OK(hl_semaphore_query(t, &value));
  assert_int_equal(value, 1);
  HL_ASSERT_OK(hl_queue_status(q));

  // Waits on the own timeline: submitted values are fine, others are not.
  hl_fence_t* ok = FENCE1(t, 1);
  hl_fence_t* signal = FENCE1(s, 1);
  HL_ASSERT_OK(hl_queue_barrier(q, ok, signal));
  uint64_t bad_values[2] = {1000, UINT64_MAX};
  for (int i = 0; i < 2; ++i) {
    hl_fence_t* bad = FENCE1(t, bad_values[i]);
    hl_test_assert_status_has(hl_queue_barrier(q, bad, NULL),
                              HL_STATUS_INVALID_ARGUMENT, "own timeline", NULL);
    hl_fence_release(bad);
  }
  // The submission's own value (it would wait on itself) is refused too.
  hl_queue_stats_t stats;
  hl_queue_stats(q, &stats);
  hl_fence_t* self = FENCE1(t, stats.submitted_value + 1);
  hl_test_assert_status_has(hl_queue_barrier(q, self, NULL),
                            HL_STATUS_INVALID_ARGUMENT, "own timeline", NULL);
  hl_fence_release(self);
  HL_ASSERT_OK(hl_semaphore_wait(s, 1, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_status(q));

  // Another queue may wait on q's timeline, but not signal it: before, a
  // barrier on |other| signalling t to 1000 was accepted, q's timeline
  // jumped past values q had not reached, and q's next submission (value 3)
  // was "reached" before it ran.
  hl_queue_t* other = queue_create(device);
  hl_fence_t* foreign = FENCE1(t, 1000);
  hl_test_assert_status_has(hl_queue_barrier(other, NULL, foreign),
                            HL_STATUS_INVALID_ARGUMENT, "timeline", NULL);
  HL_ASSERT_OK(hl_queue_barrier(other, ok, NULL));  // Waiting is fine.
  HL_ASSERT_OK(hl_queue_wait_idle(other, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_semaphore_query(t, &value));
  assert_int_equal(value, 2);
  HL_ASSERT_OK(hl_queue_status(other));
  hl_fence_release(foreign);
  hl_queue_release(other);

  hl_fence_release(ok);
  hl_fence_release(signal);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(device);
}

//===----------------------------------------------------------------------===//
// Backpressure: bounded submissions in flight (issue 19)
//===----------------------------------------------------------------------===//

static hl_device_t* device_with_depth(uint32_t depth) {
  hl_device_options_t options;
  hl_device_options_initialize(&options);
  options.backend = HL_BACKEND_HOST;
  const char* want = getenv("HIPLINE_TEST_BACKEND");
  if (want && strcmp(want, "hip") == 0) options.backend = HL_BACKEND_HIP;
  options.queue_depth = depth;
  hl_device_t* device = NULL;
  HL_ASSERT_OK(hl_device_create(&options, hl_allocator_system(), &device));
  return device;
}

typedef struct gate_t {
  atomic_bool open;
  atomic_int runs;
} gate_t;

// Blocks its stream until the test opens the gate (not on queue work).
static void gate_fn(void* user) {
  gate_t* g = (gate_t*)user;
  while (!atomic_load(&g->open)) hl_test_sleep_ms(1);
  atomic_fetch_add(&g->runs, 1);
}

typedef struct submitter_t {
  hl_queue_t* queue;
  gate_t* gate;
  int count;
  atomic_int submitted;
} submitter_t;

static int submitter_main(void* arg) {
  submitter_t* t = (submitter_t*)arg;
  for (int i = 0; i < t->count; ++i) {
    HL_ASSERT_OK(hl_queue_host_call(t->queue, NULL, NULL, gate_fn, t->gate));
    atomic_fetch_add(&t->submitted, 1);
  }
  return 0;
}

// With depth 4 and a stream blocked by a closed gate, the fifth submission
// blocks its thread (counted as a stall) until the gate opens; the deadline
// variant returns DEADLINE_EXCEEDED while the queue stays full. Before the fix
// every submission was accepted at once, without bound.
static void test_depth_blocks_submitter(void** state) {
  hl_device_t* device = device_with_depth(4);
  hl_queue_t* q = queue_create(device);
  gate_t gate;
  atomic_init(&gate.open, false);
  atomic_init(&gate.runs, 0);
  for (int i = 0; i < 4; ++i) {
    HL_ASSERT_OK(hl_queue_host_call(q, NULL, NULL, gate_fn, &gate));
  }
  hl_test_assert_status_has(
      hl_queue_wait_capacity(q, hl_deadline_after(20 * MS)),
      HL_STATUS_DEADLINE_EXCEEDED, "depth 4", NULL);
  submitter_t t = {q, &gate, 3, 0};
  atomic_init(&t.submitted, 0);
  thrd_t thread;
  assert_int_equal(thrd_create(&thread, submitter_main, &t), thrd_success);
  hl_queue_stats_t stats;
  hl_time_t deadline = LONG_DEADLINE();
  do {
    hl_test_sleep_ms(1);
    hl_queue_stats(q, &stats);
  } while (stats.depth_stalls < 2 && hl_time_now() < deadline);
  assert_true(stats.depth_stalls >= 2);  // The probe above, then the thread.
  // Nothing ran, so nothing made room: the thread is still blocked.
  assert_int_equal(atomic_load(&t.submitted), 0);
  assert_int_equal(stats.submissions, 4);
  atomic_store(&gate.open, true);
  thrd_join(thread, NULL);
  assert_int_equal(atomic_load(&t.submitted), 3);
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  assert_int_equal(atomic_load(&gate.runs), 7);
  HL_ASSERT_OK(hl_queue_wait_capacity(q, hl_deadline_after(0)));
  hl_queue_release(q);
  hl_device_release(device);
}

// Submissions parked on a signal nobody has submitted do not count against
// the depth: one thread queues far more of them than the depth allows, then
// submits the signal itself. A depth that counted them would deadlock here.
static void test_depth_ignores_parked(void** state) {
  hl_device_t* device = device_with_depth(2);
  hl_queue_t* consumer = queue_create(device);
  hl_queue_t* producer = queue_create(device);
  hl_semaphore_t* s = sem_create(0);
  gate_t gate;
  atomic_init(&gate.open, true);
  atomic_init(&gate.runs, 0);
  hl_fence_t* wait = FENCE1(s, 1);
  for (int i = 0; i < 16; ++i) {
    HL_ASSERT_OK(hl_queue_host_call(consumer, wait, NULL, gate_fn, &gate));
  }
  hl_fence_t* signal = FENCE1(s, 1);
  HL_ASSERT_OK(hl_queue_barrier(producer, NULL, signal));
  HL_ASSERT_OK(hl_queue_wait_idle(consumer, LONG_DEADLINE()));
  assert_int_equal(atomic_load(&gate.runs), 16);
  hl_queue_stats_t stats;
  hl_queue_stats(consumer, &stats);
  assert_true(stats.parked >= 1);
  hl_fence_release(wait);
  hl_fence_release(signal);
  hl_semaphore_release(s);
  hl_queue_release(consumer);
  hl_queue_release(producer);
  hl_device_release(device);
}

// A host call that submits to its own full queue would wait for itself
// (the queue cannot move on until the call returns): FAILED_PRECONDITION
// instead. With room, or to another queue, it submits as usual.
typedef struct self_submit_t {
  hl_queue_t* target;
  hl_status_t status;
} self_submit_t;

static void self_submit_fn(void* user) {
  self_submit_t* s = (self_submit_t*)user;
  s->status = hl_queue_barrier(s->target, NULL, NULL);
}

static void test_host_call_submitting_to_its_full_queue_fails(void** state) {
  hl_device_t* device = device_with_depth(1);
  hl_queue_t* q = queue_create(device);
  hl_queue_t* other = queue_create(device);
  self_submit_t own = {q, NULL};
  HL_ASSERT_OK(hl_queue_host_call(q, NULL, NULL, self_submit_fn, &own));
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  // Where host calls run on the runtime's own thread (the hip test
  // runtime's callbacks), submitting never blocks on depth and succeeds;
  // elsewhere it would wait for itself and is refused. Neither hangs.
  if (own.status || hl_test_backend_kind() == HL_BACKEND_HOST) {
    hl_test_assert_status_has(own.status, HL_STATUS_FAILED_PRECONDITION,
                              "host call", "its own queue");
  }
  HL_ASSERT_OK(hl_queue_status(q));  // The queue itself is fine.
  self_submit_t elsewhere = {other, NULL};
  HL_ASSERT_OK(hl_queue_host_call(q, NULL, NULL, self_submit_fn, &elsewhere));
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(other, LONG_DEADLINE()));
  HL_ASSERT_OK(elsewhere.status);
  hl_queue_release(q);
  hl_queue_release(other);
  hl_device_release(device);
  // With room in the queue the same call submits.
  device = device_with_depth(4);
  q = queue_create(device);
  self_submit_t roomy = {q, NULL};
  HL_ASSERT_OK(hl_queue_host_call(q, NULL, NULL, self_submit_fn, &roomy));
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  HL_ASSERT_OK(roomy.status);
  hl_queue_release(q);
  hl_device_release(device);
}

// HIPLINE_QUEUE_DEPTH is parsed strictly; a bad value names the variable.
static void test_depth_env_strict(void** state) {
  const char* bad[] = {"0", "abc", "12x", "-1", "99999999999"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    setenv("HIPLINE_QUEUE_DEPTH", bad[i], 1);
    hl_device_options_t options;
    hl_device_options_initialize(&options);
    options.backend = HL_BACKEND_HOST;
    hl_device_t* device = NULL;
    hl_test_assert_status_has(
        hl_device_create(&options, hl_allocator_system(), &device),
        HL_STATUS_INVALID_ARGUMENT, "HIPLINE_QUEUE_DEPTH", bad[i]);
    assert_null(device);
  }
  setenv("HIPLINE_QUEUE_DEPTH", "3", 1);
  HL_ASSERT_OK(hl_environment_check());
  unsetenv("HIPLINE_QUEUE_DEPTH");
}

//===----------------------------------------------------------------------===//
// Dealloca placement (issue 19)
//===----------------------------------------------------------------------===//

// hl_queue_dealloca(NULL, ...) frees on the buffer's origin queue, which
// hl_buffer_affinity_queue reports; a wrapped buffer has none. Before: NULL
// queue was INVALID_ARGUMENT.
//===----------------------------------------------------------------------===//
// Host functions and completions off the backend's threads (issue 18)
//===----------------------------------------------------------------------===//

typedef struct reentrant_call_t {
  hl_queue_t* other;
  hl_semaphore_t* done;
  hl_status_t status;  // Of the wait inside the host function.
  atomic_bool ran;
} reentrant_call_t;

// A host function that calls hipline: submits to another queue and waits for
// that work. On HIP this deadlocked while host functions ran on the driver's
// callback thread (the other queue's completion needed the same thread).
static void reentrant_fn(void* user) {
  reentrant_call_t* call = (reentrant_call_t*)user;
  hl_status_t st = hl_queue_barrier(call->other, NULL, NULL);
  if (!st) {
    hl_fence_t* f = FENCE1(call->done, 1);
    st = hl_queue_barrier(call->other, NULL, f);
    hl_fence_release(f);
  }
  if (!st) {
    st = hl_semaphore_wait(call->done, 1, hl_deadline_after(3000 * MS));
  }
  call->status = st;
  atomic_store(&call->ran, true);
}

static void test_host_function_may_call_hipline(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* a = queue_create(device);
  hl_queue_t* b = queue_create(device);
  reentrant_call_t call = {.other = b, .done = sem_create(0)};
  atomic_init(&call.ran, false);
  hl_semaphore_t* s = sem_create(0);
  hl_fence_t* f = FENCE1(s, 1);
  HL_ASSERT_OK(hl_queue_host_call(a, NULL, f, reentrant_fn, &call));
  hl_fence_release(f);
  HL_ASSERT_OK(hl_semaphore_wait(s, 1, LONG_DEADLINE()));
  assert_true(atomic_load(&call.ran));
  HL_ASSERT_OK(call.status);
  HL_ASSERT_OK(hl_queue_wait_idle(a, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(b, LONG_DEADLINE()));
  expect_device_events_pooled(device, 2);
  hl_semaphore_release(call.done);
  hl_semaphore_release(s);
  hl_queue_release(a);
  hl_queue_release(b);
  hl_device_release(device);
}

// A host call that blocks its queue leaves other queues running (on HIP,
// host functions used to share the driver's one callback thread): A's host
// call waits for something only B's later host call does.
typedef struct waiting_call_t {
  hl_semaphore_t* s;
  hl_status_t status;
} waiting_call_t;

static void waiting_fn(void* user) {
  waiting_call_t* call = (waiting_call_t*)user;
  call->status = hl_semaphore_wait(call->s, 1, hl_deadline_after(3000 * MS));
}

static void signalling_fn(void* user) {
  HL_ASSERT_OK(hl_semaphore_signal((hl_semaphore_t*)user, 1));
}

static void test_host_calls_of_queues_are_independent(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* a = queue_create(device);
  hl_queue_t* b = queue_create(device);
  waiting_call_t call = {.s = sem_create(0)};
  HL_ASSERT_OK(hl_queue_host_call(a, NULL, NULL, waiting_fn, &call));
  HL_ASSERT_OK(hl_queue_host_call(b, NULL, NULL, signalling_fn, call.s));
  HL_ASSERT_OK(hl_queue_wait_idle(a, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(b, LONG_DEADLINE()));
  HL_ASSERT_OK(call.status);
  expect_device_events_pooled(device, 2);
  hl_semaphore_release(call.s);
  hl_queue_release(a);
  hl_queue_release(b);
  hl_device_release(device);
}

// Host callbacks the hip test runtime has run, or -1 when the loaded
// backend library is not the test runtime (host backend, a real GPU).
// The hip test runtime's counters; false when it is not what is loaded.
static bool test_runtime_counters(hl_trt_counters_t* out) {
  void* library = dlopen("libamdhip64.so", RTLD_NOW | RTLD_NOLOAD);
  if (!library) return false;
  void* symbol = dlsym(library, HL_TRT_GET_COUNTERS_SYMBOL);
  dlclose(library);
  if (!symbol) return false;
  hl_trt_get_counters_fn_t get = NULL;
  memcpy(&get, &symbol, sizeof(get));
  get(out);
  return true;
}

// A device for a test that reads the hip test runtime's counters (|out|,
// taken after the device exists); skips the test on any other runtime.
static hl_device_t* device_with_runtime_counters(hl_trt_counters_t* out) {
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  if (!test_runtime_counters(out)) {
    hl_device_release(device);
    print_message("skipped: needs the hip test runtime's counters\n");
    skip();
  }
  return device;
}

// A completer that fell behind its stream catches up with one wait on the
// last event of what it has, not one per submission: each wait is a driver
// call that contends with the submitting thread's (on an H200, a launch
// cost 3.3 us beside one busy completer and 14.8 us beside four). Queue b's
// 200 barriers are all issued behind a wait on queue a's 50 ms spin, so
// they pile up while b's completer waits on the first.
static void test_completer_catches_up_with_one_wait(void** state) {
  (void)state;
  hl_trt_counters_t before;
  hl_device_t* device = device_with_runtime_counters(&before);
  hl_queue_t* a = queue_create(device);
  hl_queue_t* b = queue_create(device);
  hl_semaphore_t* s = sem_create(0);
  hl_fence_t* spun = FENCE1(s, 1);
  HL_ASSERT_OK(hl_queue_spin(a, NULL, spun, 50000000));  // 50 ms here.
  hl_fence_release(spun);
  barrier(b, FENCE1(s, 1), NULL);
  for (int i = 0; i < 200; ++i) barrier(b, NULL, NULL);
  HL_ASSERT_OK(hl_queue_wait_idle(b, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(a, LONG_DEADLINE()));
  hl_trt_counters_t after;
  assert_true(test_runtime_counters(&after));
  int64_t waits = after.event_synchronizes - before.event_synchronizes;
  print_message("202 submissions, %lld event waits\n", (long long)waits);
  assert_true(waits <= 20);
  hl_semaphore_release(s);
  hl_queue_release(a);
  hl_queue_release(b);
  hl_device_release(device);
}

// Submissions complete through events waited on by the queue's completer,
// not through a driver host callback each (which holds the stream until the
// host runs it; IREE dropped it for the same reason): on the hip test
// runtime, a thousand submissions and two host calls run no host callback.
static void test_no_host_callback_per_submission(void** state) {
  (void)state;
  hl_trt_counters_t counters;
  hl_device_t* device = device_with_runtime_counters(&counters);
  int64_t before = counters.host_callbacks;
  hl_queue_t* a = queue_create(device);
  hl_queue_t* b = queue_create(device);
  hl_semaphore_t* s = sem_create(0);
  order_t order;
  atomic_init(&order.next, 0);
  step_t first, second;
  step_init(&first, &order, 0);
  step_init(&second, &order, 0);
  host_call(a, NULL, NULL, &first);
  for (uint64_t i = 1; i <= 500; ++i) {
    barrier(a, NULL, FENCE1(s, 2 * i - 1));
    barrier(b, FENCE1(s, 2 * i - 1), FENCE1(s, 2 * i));
  }
  host_call(b, FENCE1(s, 1000), NULL, &second);
  HL_ASSERT_OK(hl_queue_wait_idle(a, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(b, LONG_DEADLINE()));
  assert_int_equal(step_at(&first), 1);
  assert_int_equal(step_at(&second), 2);
  assert_true(test_runtime_counters(&counters));
  assert_int_equal(counters.host_callbacks, before);
  expect_device_events_pooled(device, 2);
  hl_semaphore_release(s);
  hl_queue_release(a);
  hl_queue_release(b);
  hl_device_release(device);
}

static void test_dealloca_on_origin_queue(void** state) {
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* other = queue_create(device);
  hl_queue_t* origin = queue_create(device);
  hl_semaphore_t* s = sem_create(0);
  hl_fence_t* allocated = FENCE1(s, 1);
  hl_buffer_t* b = NULL;
  HL_ASSERT_OK(hl_queue_alloca(origin, NULL, allocated, 4096, 0, &b));
  assert_ptr_equal(hl_buffer_affinity_queue(b), origin);
  assert_null(hl_buffer_affinity_queue(NULL));
  hl_queue_stats_t before_origin, before_other, after_origin, after_other;
  hl_queue_stats(origin, &before_origin);
  hl_queue_stats(other, &before_other);
  hl_fence_t* wait = FENCE1(s, 1);
  hl_fence_t* freed = FENCE1(s, 2);
  HL_ASSERT_OK(hl_queue_dealloca(NULL, wait, freed, b));
  HL_ASSERT_OK(hl_semaphore_wait(s, 2, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_device_wait_idle(device, LONG_DEADLINE()));
  assert_true(hl_buffer_is_freed(b));
  hl_queue_stats(origin, &after_origin);
  hl_queue_stats(other, &after_other);
  assert_int_equal(after_origin.submissions, before_origin.submissions + 1);
  assert_int_equal(after_other.submissions, before_other.submissions);
  hl_buffer_release(b);

  static uint8_t storage[256];
  hl_buffer_t* wrapped = NULL;
  HL_ASSERT_OK(
      hl_buffer_wrap(device, storage, sizeof(storage), NULL, NULL, &wrapped));
  assert_null(hl_buffer_affinity_queue(wrapped));
  hl_test_assert_status_has(hl_queue_dealloca(NULL, NULL, NULL, wrapped),
                            HL_STATUS_INVALID_ARGUMENT, "origin queue", NULL);
  hl_buffer_release(wrapped);
  hl_test_assert_status_has(hl_queue_dealloca(NULL, NULL, NULL, NULL),
                            HL_STATUS_INVALID_ARGUMENT, NULL, NULL);
  hl_fence_release(allocated);
  hl_fence_release(wait);
  hl_fence_release(freed);
  hl_semaphore_release(s);
  hl_queue_release(other);
  hl_queue_release(origin);
  hl_device_release(device);
}

// Skips unless the device is on the host backend with its inline path on
// and no stream delays (the conditions under which idle streams run the
// runtime's work at once). Releases |device| when it skips.
static bool host_inline_or_skip(hl_device_t* device) {
  hl_device_properties_t props;
  HL_ASSERT_OK(hl_device_properties(device, &props));
  const char* inline_env = getenv("HIPLINE_HOST_INLINE");
  if (props.backend != HL_BACKEND_HOST ||
      hl_faults_snapshot().stream_delay_us ||
      (inline_env && !strcmp(inline_env, "0"))) {
    hl_device_release(device);
    print_message("skipped: needs the host backend's inline path\n");
    return false;
  }
  return true;
}

// On the host backend an idle queue's runtime-only submissions (barriers
// here) complete inside hl_queue_submit: an idle device starts their work at
// once, and the issuer publishes their signals before it returns (the
// completion defers its publication to the issuer, under one lock). A
// submission waiting on a reached value does too; one waiting on a value not
// yet reached parks, and completes when the value comes.
static void test_idle_host_queue_completes_at_submit(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  if (!host_inline_or_skip(device)) skip();
  hl_queue_t* q = queue_create(device);
  hl_semaphore_t* s = sem_create(0);
  hl_semaphore_t* gate = sem_create(0);
  uint64_t value = 0;
  for (uint64_t i = 1; i <= 100; ++i) {
    barrier(q, i > 1 ? FENCE1(s, i - 1) : NULL, FENCE1(s, i));
    HL_ASSERT_OK(hl_semaphore_query(s, &value));
    assert_int_equal(value, i);
  }
  barrier(q, FENCE1(gate, 1), FENCE1(s, 101));
  HL_ASSERT_OK(hl_semaphore_query(s, &value));
  assert_int_equal(value, 100);
  HL_ASSERT_OK(hl_semaphore_signal(gate, 1));
  HL_ASSERT_OK(hl_semaphore_wait(s, 101, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  hl_queue_stats_t stats;
  hl_queue_stats(q, &stats);
  assert_int_equal(stats.submissions, 101);
  assert_int_equal(stats.failed, 0);
  expect_device_events_pooled(device, 1);
  hl_semaphore_release(gate);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(device);
}

// An empty submission (no operations) whose waits are reached, on a queue
// with nothing in flight, completes inside hl_queue_submit without touching
// the stream, whether or not the host backend runs runtime work inline
// (HIPLINE_HOST_INLINE=0 here does not matter), and on hip queues, which
// complete by events. Behind a busy stream it waits its turn, and then it
// holds its own references: the submitter drops every handle it had and the
// submission still reads its semaphores (they are not the submitter's
// borrowed ones any more).
static void test_empty_submission_completes_without_stream(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q = queue_create(device);
  hl_semaphore_t* reached = sem_create(5);
  hl_semaphore_t* s = sem_create(0);
  uint64_t value = 0;
  for (uint64_t i = 1; i <= 50; ++i) {
    barrier(q, FENCE1(reached, 5), FENCE1(s, i));
    HL_ASSERT_OK(hl_semaphore_query(s, &value));
    assert_int_equal(value, i);
  }
  // A closed gate holds the stream: the next barrier must wait for it.
  gate_t gate;
  atomic_init(&gate.open, false);
  atomic_init(&gate.runs, 0);
  HL_ASSERT_OK(hl_queue_host_call(q, NULL, NULL, gate_fn, &gate));
  hl_semaphore_t* w = sem_create(1);
  hl_semaphore_t* x = sem_create(0);
  hl_semaphore_retain(x);  // The test's second reference, to look at it.
  barrier(q, FENCE1(w, 1), FENCE1(x, 1));  // Releases its fences.
  HL_ASSERT_OK(hl_semaphore_query(x, &value));
  assert_int_equal(value, 0);
  // The submission holds references of its own now.
  assert_true(atomic_load(&w->ref_count) >= 2);
  assert_true(atomic_load(&x->ref_count) >= 3);
  hl_semaphore_release(w);  // Only the submission's reference is left.
  hl_semaphore_release(x);
  atomic_store(&gate.open, true);
  HL_ASSERT_OK(hl_semaphore_wait(x, 1, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  hl_device_flush_work(device);
  assert_int_equal(atomic_load(&x->ref_count), 1);  // Given back.
  hl_queue_stats_t stats;
  hl_queue_stats(q, &stats);
  assert_int_equal(stats.submissions, 52);
  assert_int_equal(stats.failed, 0);
  hl_semaphore_release(x);
  hl_semaphore_release(s);
  hl_semaphore_release(reached);
  hl_queue_release(q);
  hl_device_release(device);
}

// A wait on a semaphore that failed fails the submission even when the
// value it waits for was reached before the failure, on a quiet queue too
// (where an empty submission completes without the pump), and the failure
// says which submission waited on it.
static void test_reached_wait_on_failed_semaphore_fails(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q = queue_create(device);
  hl_semaphore_t* s = sem_create(0);
  HL_ASSERT_OK(hl_semaphore_signal(s, 5));
  HL_ASSERT_OK(hl_semaphore_fail(
      s, HL_MAKE_STATUS(HL_STATUS_ABORTED, "producer failed")));
  hl_semaphore_t* x = sem_create(0);
  barrier(q, FENCE1(s, 3), FENCE1(x, 1));
  hl_status_t st = hl_semaphore_wait(x, 1, LONG_DEADLINE());
  assert_int_equal(hl_status_code(st), HL_STATUS_ABORTED);
  // Named as the pump names it: which submission waited on a failed one.
  assert_non_null(
      strstr(hl_status_message(st), "waited on a failed semaphore"));
  hl_status_free(st);
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  hl_queue_stats_t stats;
  hl_queue_stats(q, &stats);
  assert_int_equal(stats.failed, 1);
  hl_semaphore_release(x);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(device);
}

typedef struct timeline_waiter_t {
  hl_semaphore_t* timeline;
  uint64_t value;
  hl_status_t status;
  hl_time_t returned_at;
} timeline_waiter_t;

static int timeline_waiter_main(void* arg) {
  timeline_waiter_t* w = arg;
  w->status =
      hl_semaphore_wait(w->timeline, w->value, hl_deadline_after(5000 * MS));
  w->returned_at = hl_time_now();
  return 0;
}

typedef struct idle_waiter_t {
  hl_queue_t* queue;
  hl_status_t status;
  hl_time_t returned_at;
} idle_waiter_t;

static int idle_waiter_main(void* arg) {
  idle_waiter_t* w = arg;
  w->status = hl_queue_wait_idle(w->queue, hl_deadline_after(5000 * MS));
  w->returned_at = hl_time_now();
  return 0;
}

// A publish wakes threads blocked on the queue's timeline and on its done
// value (wait_idle): both are signalled with one barrier before the waiter
// counts are read, and a waiter that registered after its look at the value
// must still be woken. The gate holds the stream long past the waits' spin,
// so both are asleep on their condition variables when it opens; a missed
// wake-up would hold them to their 5 s deadline.
static void test_blocked_waiters_wake_on_publish(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q = queue_create(device);
  // A parked barrier, released by a host signal 30 ms in: it completes at
  // once on the signalling thread (a quiet queue) while both waiters sleep.
  for (uint64_t round = 1; round <= 3; ++round) {
    hl_semaphore_t* s = sem_create(0);
    barrier(q, FENCE1(s, 1), NULL);
    timeline_waiter_t w = {hl_queue_timeline(q), hl_queue_submitted_value(q),
                           NULL, 0};
    thrd_t thread;
    assert_int_equal(thrd_create(&thread, timeline_waiter_main, &w),
                     thrd_success);
    idle_waiter_t idle = {q, NULL, 0};
    thrd_t idle_thread;
    assert_int_equal(thrd_create(&idle_thread, idle_waiter_main, &idle),
                     thrd_success);
    hl_test_sleep_ms(30);
    hl_time_t signalled = hl_time_now();
    HL_ASSERT_OK(hl_semaphore_signal(s, 1));
    assert_int_equal(thrd_join(thread, NULL), thrd_success);
    assert_int_equal(thrd_join(idle_thread, NULL), thrd_success);
    HL_ASSERT_OK(w.status);
    HL_ASSERT_OK(idle.status);
    assert_true(w.returned_at - signalled < 2000 * MS);
    assert_true(idle.returned_at - signalled < 2000 * MS);
    hl_semaphore_release(s);
  }
  // The same behind a gate that holds the stream (the stream's worker
  // publishes).
  for (int round = 0; round < 3; ++round) {
    gate_t gate;
    atomic_init(&gate.open, false);
    atomic_init(&gate.runs, 0);
    HL_ASSERT_OK(hl_queue_host_call(q, NULL, NULL, gate_fn, &gate));
    timeline_waiter_t w = {hl_queue_timeline(q), hl_queue_submitted_value(q),
                           NULL, 0};
    thrd_t thread;
    assert_int_equal(thrd_create(&thread, timeline_waiter_main, &w),
                     thrd_success);
    hl_test_sleep_ms(30);  // The timeline's waiter is asleep by now.
    // The gate looks every millisecond: wait_idle, called right after it
    // opens, is asleep too when the host call finishes and publishes.
    atomic_store(&gate.open, true);
    hl_time_t opened = hl_time_now();
    HL_ASSERT_OK(hl_queue_wait_idle(q, hl_deadline_after(5000 * MS)));
    hl_time_t idle_at = hl_time_now();
    assert_int_equal(thrd_join(thread, NULL), thrd_success);
    HL_ASSERT_OK(w.status);
    // Woken by the publish, not by a deadline.
    assert_true(idle_at - opened < 2000 * MS);
    assert_true(w.returned_at - opened < 2000 * MS);
  }
  hl_queue_release(q);
  hl_device_release(device);
}

// A signal of a plain semaphore takes no lock when nobody waits and no
// timepoint is attached. It can land while another queue's issuer attaches
// a device timepoint for a lower value under the semaphore's lock, between
// its look at the value and the attach: replayed here on one thread
// (the fast signal needs no lock, so it runs inside the attacher's). The
// attach sees the value that passed it and drops the timepoint at once, so
// none is left holding its event. A timepoint above the value makes the
// next signal take the lock and drop it.
static void test_fast_signal_and_timepoint_attach(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_semaphore_t* s = sem_create(0);
  hl_backend_event_t* event = NULL;
  HL_ASSERT_OK(device->backend->vtable->event_create(device->backend, &event));
  atomic_fetch_add(&device->live_events, 1);
  hl_shared_event_t* shared = NULL;
  HL_ASSERT_OK(hl_shared_event_create(device, event, NULL, &shared));

  hl_semaphore_lock(s);
  assert_true(hl_semaphore_value(s) < 5);  // The attacher's look.
  hl_semaphore_signal_unlocked(s, 7);      // Another queue's completion.
  assert_int_equal(hl_semaphore_value(s), 7);
  HL_ASSERT_OK(hl_semaphore_add_timepoint_locked(s, 5, shared));
  assert_int_equal(atomic_load(&s->timepoint_count), 0);
  assert_null(s->timepoints);
  assert_int_equal(atomic_load(&shared->refs), 1);  // Only the attacher's.
  hl_semaphore_unlock(s);
  // A timepoint above the value stays, and the next signal takes the lock
  // to drop it.
  hl_semaphore_lock(s);
  HL_ASSERT_OK(hl_semaphore_add_timepoint_locked(s, 9, shared));
  hl_semaphore_unlock(s);
  assert_int_equal(atomic_load(&s->timepoint_count), 1);
  assert_int_equal(hl_semaphore_issued_value(s), 9);
  hl_semaphore_signal_unlocked(s, 9);
  assert_int_equal(atomic_load(&s->timepoint_count), 0);
  assert_null(s->timepoints);
  assert_int_equal(hl_semaphore_issued_value(s), 9);
  hl_shared_event_drop(shared);  // Recycles the event.
  expect_device_events_pooled(device, 0);
  hl_semaphore_release(s);
  hl_device_release(device);
}

// A host signal pumps the submissions it releases on the signalling thread
// (a pump sink), so a chain of parked barriers across queues, each waiting
// on the one before, completes inside hl_semaphore_signal. Longer than the
// sink's budget (64 pumps) the rest goes to the work thread and completes
// too. Also from a stream's worker: a host call that signals releases a
// parked barrier of another queue whose last user reference is gone.
#define CHAIN_QUEUES 80
static void signal_fn(void* user) {
  HL_ASSERT_OK(hl_semaphore_signal((hl_semaphore_t*)user, 1));
}

static void test_host_signal_pumps_released_chain(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  if (!host_inline_or_skip(device)) skip();
  hl_queue_t* queues[CHAIN_QUEUES];
  hl_semaphore_t* sems[CHAIN_QUEUES + 1];
  for (int i = 0; i <= CHAIN_QUEUES; ++i) sems[i] = sem_create(0);
  for (int i = 0; i < CHAIN_QUEUES; ++i) {
    queues[i] = queue_create(device);
    barrier(queues[i], FENCE1(sems[i], 1), FENCE1(sems[i + 1], 1));
  }
  uint64_t value = 0;
  HL_ASSERT_OK(hl_semaphore_query(sems[CHAIN_QUEUES], &value));
  assert_int_equal(value, 0);  // Parked, all of them.
  HL_ASSERT_OK(hl_semaphore_signal(sems[0], 1));
  // The first links ran on this thread, before the signal returned.
  HL_ASSERT_OK(hl_semaphore_query(sems[8], &value));
  assert_int_equal(value, 1);
  HL_ASSERT_OK(hl_semaphore_wait(sems[CHAIN_QUEUES], 1, LONG_DEADLINE()));

  // From a stream's worker, releasing a queue only the parked barrier holds.
  hl_queue_t* caller = queue_create(device);
  hl_queue_t* parked = queue_create(device);
  hl_semaphore_t* gate = sem_create(0);
  hl_semaphore_t* out = sem_create(0);
  barrier(parked, FENCE1(gate, 1), FENCE1(out, 1));
  hl_queue_release(parked);
  HL_ASSERT_OK(hl_queue_host_call(caller, NULL, NULL, signal_fn, gate));
  HL_ASSERT_OK(hl_semaphore_wait(out, 1, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(caller, LONG_DEADLINE()));
  hl_device_flush_work(device);

  for (int i = 0; i < CHAIN_QUEUES; ++i) {
    HL_ASSERT_OK(hl_queue_wait_idle(queues[i], LONG_DEADLINE()));
    hl_queue_release(queues[i]);
  }
  for (int i = 0; i <= CHAIN_QUEUES; ++i) hl_semaphore_release(sems[i]);
  hl_semaphore_release(gate);
  hl_semaphore_release(out);
  hl_queue_release(caller);
  expect_device_events_pooled(device, 0);
  hl_device_release(device);
}

// A semaphore's device timepoints stay sorted whatever order they come in
// (appended, in the middle, at the head, equal values), and a wait finds
// the first one at or above its value (searched from the tail).
static void expect_timepoints(hl_semaphore_t* s, const uint64_t* values,
                              size_t count) {
  size_t i = 0;
  hl_timepoint_t* prev = NULL;
  for (hl_timepoint_t* tp = s->timepoints; tp; tp = tp->next, ++i) {
    assert_true(i < count);
    assert_int_equal(tp->value, values[i]);
    assert_ptr_equal(tp->prev, prev);
    prev = tp;
  }
  assert_int_equal(i, count);
  assert_ptr_equal(s->timepoints_tail, prev);
}

static void test_timepoint_list_order_and_search(void** state) {
  (void)state;
  hl_semaphore_t* s = sem_create(0);
  // Never the last reference: no event goes back to a device pool.
  hl_shared_event_t shared = {NULL, NULL, NULL, 1000};
  hl_semaphore_lock(s);
  const uint64_t adds[] = {5, 10, 7, 10, 3, 12};
  for (size_t i = 0; i < 6; ++i) {
    HL_ASSERT_OK(hl_semaphore_add_timepoint_locked(s, adds[i], &shared));
  }
  const uint64_t sorted[] = {3, 5, 7, 10, 10, 12};
  expect_timepoints(s, sorted, 6);
  assert_int_equal(hl_semaphore_find_timepoint_locked(s, 1)->value, 3);
  assert_int_equal(hl_semaphore_find_timepoint_locked(s, 4)->value, 5);
  assert_int_equal(hl_semaphore_find_timepoint_locked(s, 6)->value, 7);
  hl_timepoint_t* ten = hl_semaphore_find_timepoint_locked(s, 8);
  assert_int_equal(ten->value, 10);
  assert_int_equal(ten->prev->value, 7);  // The first of the two tens.
  assert_int_equal(hl_semaphore_find_timepoint_locked(s, 12)->value, 12);
  assert_null(hl_semaphore_find_timepoint_locked(s, 13));
  hl_semaphore_signal_locked(s, 7);  // Drops 3, 5, 7.
  const uint64_t left[] = {10, 10, 12};
  expect_timepoints(s, left, 3);
  assert_ptr_equal(hl_semaphore_find_timepoint_locked(s, 8), s->timepoints);
  HL_ASSERT_OK(hl_semaphore_add_timepoint_locked(s, 9, &shared));
  const uint64_t head[] = {9, 10, 10, 12};
  expect_timepoints(s, head, 4);
  hl_semaphore_signal_locked(s, 12);
  expect_timepoints(s, NULL, 0);
  hl_semaphore_unlock(s);
  assert_int_equal(atomic_load(&shared.refs), 1000);
  hl_semaphore_release(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wait_before_signal),
      cmocka_unit_test(test_blocked_waiters_wake_on_publish),
      cmocka_unit_test(test_reached_wait_on_failed_semaphore_fails),
      cmocka_unit_test(test_fan_out_fan_in),
      cmocka_unit_test(test_park_released_by_host_and_timeline),
      cmocka_unit_test(test_wait_elision),
      cmocka_unit_test(test_failure_chain_parked),
      cmocka_unit_test(test_failure_chain_prefailed),
      cmocka_unit_test(test_failure_chain_issued),
      cmocka_unit_test(test_injected_submission_failure),
      cmocka_unit_test(test_single_signal_event_pooled),
      cmocka_unit_test(test_fork_join_no_leaks),
      cmocka_unit_test(test_queue_timeline_is_owned),
      cmocka_unit_test(test_depth_blocks_submitter),
      cmocka_unit_test(test_depth_ignores_parked),
      cmocka_unit_test(test_host_call_submitting_to_its_full_queue_fails),
      cmocka_unit_test(test_depth_env_strict),
      cmocka_unit_test(test_dealloca_on_origin_queue),
      cmocka_unit_test(test_idle_host_queue_completes_at_submit),
      cmocka_unit_test(test_empty_submission_completes_without_stream),
      cmocka_unit_test(test_fast_signal_and_timepoint_attach),
      cmocka_unit_test(test_host_signal_pumps_released_chain),
      cmocka_unit_test(test_timepoint_list_order_and_search),
      cmocka_unit_test(test_host_function_may_call_hipline),
      cmocka_unit_test(test_host_calls_of_queues_are_independent),
      cmocka_unit_test(test_no_host_callback_per_submission),
      cmocka_unit_test(test_completer_catches_up_with_one_wait),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
