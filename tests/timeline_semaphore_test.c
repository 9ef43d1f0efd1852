// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Timeline semaphores through the public API: values, host waits (deadlines,
// wait-all and wait-any in every signal order, ping-pong), failures, and the
// CPU cost of a long host wait.

#include <stdatomic.h>
#include <threads.h>

#include "hipline/fence.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "hipline/time.h"
// C11 threads on pthreads under TSan (see tests/test_util.h).
#define HL_TEST_C11_THREADS_SHIM 1
#include "tests/test_util.h"

#define MS ((hl_duration_t)1000000)

static void noop_fn(void* user) { (void)user; }

static hl_semaphore_t* sem_create(uint64_t initial) {
  hl_semaphore_t* s = NULL;
  HL_ASSERT_OK(hl_semaphore_create(initial, hl_allocator_system(), &s));
  return s;
}

static uint64_t sem_value(hl_semaphore_t* s) {
  uint64_t v = 0;
  HL_ASSERT_OK(hl_semaphore_query(s, &v));
  return v;
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

static void test_create_release_noop(void** state) {
  hl_semaphore_t* s = sem_create(5);
  assert_int_equal(sem_value(s), 5);
  hl_semaphore_retain(s);
  hl_semaphore_release(s);
  assert_int_equal(sem_value(s), 5);
  hl_semaphore_release(s);
  hl_semaphore_retain(NULL);
  hl_semaphore_release(NULL);
}

static void test_signal_then_query(void** state) {
  hl_semaphore_t* s = sem_create(0);
  HL_ASSERT_OK(hl_semaphore_signal(s, 1));
  assert_int_equal(sem_value(s), 1);
  HL_ASSERT_OK(hl_semaphore_signal(s, 1000));
  assert_int_equal(sem_value(s), 1000);
  HL_ASSERT_STATUS(hl_semaphore_signal(s, 1000), OUT_OF_RANGE);  // Equal.
  HL_ASSERT_STATUS(hl_semaphore_signal(s, 999), OUT_OF_RANGE);   // Lower.
  HL_ASSERT_STATUS(hl_semaphore_signal(s, 0), OUT_OF_RANGE);
  assert_int_equal(sem_value(s), 1000);
  hl_status_t st = hl_semaphore_signal(s, 7);
  assert_non_null(strstr(hl_status_message(st), "1000"));  // Says why.
  hl_status_free(st);
  hl_semaphore_release(s);
}

//===----------------------------------------------------------------------===//
// Host waits
//===----------------------------------------------------------------------===//

static void test_wait_already_reached(void** state) {
  hl_semaphore_t* s = sem_create(3);
  HL_ASSERT_OK(hl_semaphore_wait(s, 3, HL_IMMEDIATE_PAST));
  HL_ASSERT_OK(hl_semaphore_wait(s, 1, HL_INFINITE_FUTURE));
  HL_ASSERT_OK(hl_semaphore_wait(s, 0, hl_time_now()));
  HL_ASSERT_STATUS(hl_semaphore_wait(s, 4, HL_IMMEDIATE_PAST),
                   DEADLINE_EXCEEDED);
  hl_semaphore_release(s);
}

static void test_wait_times_out(void** state) {
  hl_semaphore_t* s = sem_create(0);
  const hl_duration_t timeout = 50 * MS;
  hl_time_t start = hl_time_now();
  HL_ASSERT_STATUS(hl_semaphore_wait(s, 1, start + timeout), DEADLINE_EXCEEDED);
  hl_time_t elapsed = hl_time_now() - start;
  assert_true(elapsed >= timeout);
  // Many: both modes time out too.
  hl_semaphore_t* list[2] = {s, s};
  uint64_t values[2] = {1, 2};
  start = hl_time_now();
  HL_ASSERT_STATUS(hl_semaphore_wait_many(HL_WAIT_ANY, 2, list, values,
                                          start + 20 * MS, NULL),
                   DEADLINE_EXCEEDED);
  assert_true(hl_time_now() - start >= 20 * MS);
  hl_semaphore_release(s);
}

typedef struct signaller_t {
  hl_semaphore_t* sems[3];
  int order[3];
  hl_semaphore_t* ack;  // wait-any: the first signal waits for this.
  hl_duration_t gap;    // Sleep between signals.
} signaller_t;

static int signaller_main(void* arg) {
  signaller_t* s = (signaller_t*)arg;
  for (int i = 0; i < 3; ++i) {
    if (i) hl_test_sleep_ms(s->gap / MS);
    hl_status_t st = hl_semaphore_signal(s->sems[s->order[i]], 1);
    if (st) {
      hl_status_fprint(stderr, "signaller", st);
      hl_status_free(st);
      return 1;
    }
    if (i == 0 && s->ack) {
      st = hl_semaphore_wait(s->ack, 1, hl_deadline_after(10000 * MS));
      if (st) {
        hl_status_fprint(stderr, "signaller ack", st);
        hl_status_free(st);
        return 1;
      }
    }
  }
  return 0;
}

static const int kPermutations[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                        {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

static void test_wait_all_every_order(void** state) {
  for (int p = 0; p < 6; ++p) {
    signaller_t sig;
    memset(&sig, 0, sizeof(sig));
    for (int i = 0; i < 3; ++i) {
      sig.sems[i] = sem_create(0);
      sig.order[i] = kPermutations[p][i];
    }
    sig.gap = 5 * MS;
    uint64_t values[3] = {1, 1, 1};
    thrd_t t;
    assert_int_equal(thrd_create(&t, signaller_main, &sig), thrd_success);
    HL_ASSERT_OK(hl_semaphore_wait_many(HL_WAIT_ALL, 3, sig.sems, values,
                                        hl_deadline_after(10000 * MS), NULL));
    // "All" means all: nothing may be missing when the wait returns.
    for (int i = 0; i < 3; ++i) assert_int_equal(sem_value(sig.sems[i]), 1);
    int rc = 1;
    thrd_join(t, &rc);
    assert_int_equal(rc, 0);
    for (int i = 0; i < 3; ++i) hl_semaphore_release(sig.sems[i]);
  }
}

static void test_wait_any_every_order(void** state) {
  for (int p = 0; p < 6; ++p) {
    signaller_t sig;
    memset(&sig, 0, sizeof(sig));
    for (int i = 0; i < 3; ++i) {
      sig.sems[i] = sem_create(0);
      sig.order[i] = kPermutations[p][i];
    }
    sig.ack = sem_create(0);
    sig.gap = 1 * MS;
    uint64_t values[3] = {1, 1, 1};
    thrd_t t;
    assert_int_equal(thrd_create(&t, signaller_main, &sig), thrd_success);
    size_t index = 99;
    HL_ASSERT_OK(hl_semaphore_wait_many(HL_WAIT_ANY, 3, sig.sems, values,
                                        hl_deadline_after(10000 * MS), &index));
    // The signaller holds the other two until we acknowledge.
    assert_int_equal(index, (size_t)kPermutations[p][0]);
    for (int i = 0; i < 3; ++i) {
      assert_int_equal(sem_value(sig.sems[i]),
                       i == kPermutations[p][0] ? 1 : 0);
    }
    HL_ASSERT_OK(hl_semaphore_signal(sig.ack, 1));
    int rc = 1;
    thrd_join(t, &rc);
    assert_int_equal(rc, 0);
    // Now any of them satisfies an "any" wait at once.
    HL_ASSERT_OK(hl_semaphore_wait_many(HL_WAIT_ANY, 3, sig.sems, values,
                                        HL_IMMEDIATE_PAST, &index));
    assert_true(index < 3);
    for (int i = 0; i < 3; ++i) hl_semaphore_release(sig.sems[i]);
    hl_semaphore_release(sig.ack);
  }
}

typedef struct pingpong_t {
  hl_semaphore_t* ping;
  hl_semaphore_t* pong;
  uint64_t rounds;
  bool first;
} pingpong_t;

static int pingpong_main(void* arg) {
  pingpong_t* p = (pingpong_t*)arg;
  for (uint64_t i = 1; i <= p->rounds; ++i) {
    hl_status_t st = NULL;
    if (p->first) {
      st = hl_semaphore_signal(p->ping, i);
      if (!st)
        st = hl_semaphore_wait(p->pong, i, hl_deadline_after(10000 * MS));
    } else {
      st = hl_semaphore_wait(p->ping, i, hl_deadline_after(10000 * MS));
      if (!st) {
        // The other side is still at i - 1 on its own semaphore.
        uint64_t v = 0;
        st = hl_semaphore_query(p->pong, &v);
        if (!st && v != i - 1) {
          st = HL_MAKE_STATUS(HL_STATUS_INTERNAL, "round %llu saw pong %llu",
                              (unsigned long long)i, (unsigned long long)v);
        }
      }
      if (!st) st = hl_semaphore_signal(p->pong, i);
    }
    if (st) {
      hl_status_fprint(stderr, "ping-pong", st);
      hl_status_free(st);
      return 1;
    }
  }
  return 0;
}

static void test_ping_pong_threads(void** state) {
  const uint64_t rounds = hl_test_scale(10000, 5);
  hl_semaphore_t* ping = sem_create(0);
  hl_semaphore_t* pong = sem_create(0);
  pingpong_t a = {ping, pong, rounds, true};
  pingpong_t b = {ping, pong, rounds, false};
  thrd_t ta, tb;
  assert_int_equal(thrd_create(&ta, pingpong_main, &a), thrd_success);
  assert_int_equal(thrd_create(&tb, pingpong_main, &b), thrd_success);
  int ra = 1, rb = 1;
  thrd_join(ta, &ra);
  thrd_join(tb, &rb);
  assert_int_equal(ra, 0);
  assert_int_equal(rb, 0);
  assert_int_equal(sem_value(ping), rounds);
  assert_int_equal(sem_value(pong), rounds);
  hl_semaphore_release(ping);
  hl_semaphore_release(pong);
}

//===----------------------------------------------------------------------===//
// Failures
//===----------------------------------------------------------------------===//

// Expects |st| to carry |code| and |text|; frees it.
static void expect_failure(hl_status_t st, hl_status_code_t code,
                           const char* text) {
  char buffer[1024];
  hl_status_format(st, buffer, sizeof(buffer));
  if (hl_status_code(st) != code || !strstr(hl_status_message(st), text)) {
    hl_status_free(st);
    fail_msg("expected %s with '%s', got '%s'", hl_status_code_name(code), text,
             buffer);
  }
  hl_status_free(st);
}

static void test_fail_then_wait(void** state) {
  hl_semaphore_t* s = sem_create(2);
  hl_semaphore_fail(s,
                    HL_MAKE_STATUS(HL_STATUS_ABORTED, "disk on fire %d", 42));
  expect_failure(hl_semaphore_wait(s, 5, HL_INFINITE_FUTURE), HL_STATUS_ABORTED,
                 "disk on fire 42");
  // Already-reached values fail too: a failed semaphore has no value to trust.
  expect_failure(hl_semaphore_wait(s, 1, HL_INFINITE_FUTURE), HL_STATUS_ABORTED,
                 "disk on fire 42");
  uint64_t v = 0;
  expect_failure(hl_semaphore_query(s, &v), HL_STATUS_ABORTED,
                 "disk on fire 42");
  expect_failure(hl_semaphore_signal(s, 10), HL_STATUS_ABORTED,
                 "disk on fire 42");
  hl_semaphore_t* list[2] = {s, s};
  uint64_t values[2] = {1, 9};
  expect_failure(hl_semaphore_wait_many(HL_WAIT_ANY, 2, list, values,
                                        HL_INFINITE_FUTURE, NULL),
                 HL_STATUS_ABORTED, "disk on fire 42");
  hl_semaphore_release(s);
}

typedef struct failer_t {
  hl_semaphore_t* s;
  hl_duration_t delay;
  hl_status_code_t code;
  const char* text;
} failer_t;

static int failer_main(void* arg) {
  failer_t* f = (failer_t*)arg;
  hl_test_sleep_ms(f->delay / MS);
  hl_semaphore_fail(f->s, HL_MAKE_STATUS(f->code, "%s", f->text));
  return 0;
}

static void test_wait_then_fail(void** state) {
  hl_semaphore_t* s = sem_create(0);
  failer_t f = {s, 30 * MS, HL_STATUS_DATA_LOSS, "lost the plot"};
  thrd_t t;
  hl_time_t start = hl_time_now();
  assert_int_equal(thrd_create(&t, failer_main, &f), thrd_success);
  expect_failure(hl_semaphore_wait(s, 1, hl_deadline_after(10000 * MS)),
                 HL_STATUS_DATA_LOSS, "lost the plot");
  assert_true(hl_time_now() - start >= 30 * MS);  // Woken by the failure.
  thrd_join(t, NULL);
  hl_semaphore_release(s);
}

typedef struct waiter_thread_t {
  hl_semaphore_t* s;
  uint64_t value;
  hl_status_code_t code;
  char message[512];
  atomic_int* started;
} waiter_thread_t;

static int waiter_main(void* arg) {
  waiter_thread_t* w = (waiter_thread_t*)arg;
  atomic_fetch_add(w->started, 1);
  hl_status_t st =
      hl_semaphore_wait(w->s, w->value, hl_deadline_after(10000 * MS));
  w->code = hl_status_code(st);
  snprintf(w->message, sizeof(w->message), "%s", hl_status_message(st));
  hl_status_free(st);
  return 0;
}

static void test_many_waiters_one_failure(void** state) {
  enum { WAITERS = 6 };
  hl_semaphore_t* s = sem_create(0);
  waiter_thread_t w[WAITERS];
  thrd_t t[WAITERS];
  atomic_int started;
  atomic_init(&started, 0);
  for (int i = 0; i < WAITERS; ++i) {
    memset(&w[i], 0, sizeof(w[i]));
    w[i].s = s;
    w[i].value = (uint64_t)(i + 1);
    w[i].started = &started;
    assert_int_equal(thrd_create(&t[i], waiter_main, &w[i]), thrd_success);
  }
  while (atomic_load(&started) < WAITERS) hl_test_sleep_ms(1);
  hl_test_sleep_ms(20);  // Let them block.
  hl_semaphore_fail(s, HL_MAKE_STATUS(HL_STATUS_UNAVAILABLE, "device lost #7"));
  for (int i = 0; i < WAITERS; ++i) {
    thrd_join(t[i], NULL);
    assert_int_equal(w[i].code, HL_STATUS_UNAVAILABLE);
    assert_non_null(strstr(w[i].message, "device lost #7"));
  }
  hl_semaphore_release(s);
}

static void test_double_failure_keeps_first(void** state) {
  hl_semaphore_t* s = sem_create(0);
  hl_semaphore_fail(s, HL_MAKE_STATUS(HL_STATUS_ABORTED, "first failure"));
  hl_semaphore_fail(s, HL_MAKE_STATUS(HL_STATUS_CANCELLED, "second failure"));
  hl_status_t st = hl_semaphore_wait(s, 1, HL_INFINITE_FUTURE);
  assert_null(strstr(hl_status_message(st), "second failure"));
  expect_failure(st, HL_STATUS_ABORTED, "first failure");
  // Failing with OK is a caller error, and still fails the semaphore.
  hl_semaphore_t* t = sem_create(0);
  hl_semaphore_fail(t, NULL);
  HL_ASSERT_STATUS(hl_semaphore_wait(t, 1, HL_INFINITE_FUTURE),
                   INVALID_ARGUMENT);
  hl_semaphore_release(t);
  hl_semaphore_release(s);
}

//===----------------------------------------------------------------------===//
// CPU use of long waits
//===----------------------------------------------------------------------===//

static int delayed_signal_main(void* arg) {
  hl_test_sleep_ms(200);
  hl_status_t st = hl_semaphore_signal((hl_semaphore_t*)arg, 1);
  hl_status_free(st);
  return st ? 1 : 0;
}

// A host wait of 200 ms uses under 10% of a core (no busy spinning).
static void test_long_wait_cpu_use(void** state) {
  hl_semaphore_t* s = sem_create(0);
  thrd_t t;
  int64_t cpu0 = hl_test_cpu_ns();
  hl_time_t start = hl_time_now();
  assert_int_equal(thrd_create(&t, delayed_signal_main, s), thrd_success);
  HL_ASSERT_OK(hl_semaphore_wait(s, 1, hl_deadline_after(10000 * MS)));
  hl_time_t wall = hl_time_now() - start;
  int64_t cpu = hl_test_cpu_ns() - cpu0;
  thrd_join(t, NULL);
  assert_true(wall >= 200 * MS);
  print_message("signalled wait: %.1f ms wall, %.3f ms cpu\n", wall / 1e6,
                cpu / 1e6);
  assert_true(cpu * 10 < wall);

  // A wait that ends at its deadline.
  cpu0 = hl_test_cpu_ns();
  start = hl_time_now();
  HL_ASSERT_STATUS(hl_semaphore_wait(s, 2, start + 200 * MS),
                   DEADLINE_EXCEEDED);
  wall = hl_time_now() - start;
  cpu = hl_test_cpu_ns() - cpu0;
  print_message("timed-out wait: %.1f ms wall, %.3f ms cpu\n", wall / 1e6,
                cpu / 1e6);
  assert_true(wall >= 200 * MS);
  assert_true(cpu * 10 < wall);
  hl_semaphore_release(s);
}

static void sleep_200ms(void* user) { hl_test_sleep_ms(200); }
static void noop_host_fn(void* user) { (void)user; }

// The same through a queue: a host wait on a device-signalled value; the
// waiting thread and hipline's own threads together stay under 10% of a core
// (hl_test_runtime_cpu_ns: a GPU driver's threads are not hipline's).
static void test_long_queue_wait_cpu_use(void** state) {
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* queue = NULL;
  HL_ASSERT_OK(hl_queue_create(device, &queue));
  hl_semaphore_t* s = sem_create(0);
  hl_fence_t* signal = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &signal));
  // One round trip first, so that what is measured is the wait, not the
  // queue's first use.
  HL_ASSERT_OK(hl_fence_insert(signal, s, 1));
  HL_ASSERT_OK(hl_queue_host_call(queue, NULL, signal, noop_host_fn, NULL));
  HL_ASSERT_OK(hl_semaphore_wait(s, 1, hl_deadline_after(10000 * MS)));
  hl_fence_release(signal);
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &signal));
  HL_ASSERT_OK(hl_fence_insert(signal, s, 2));
  int64_t cpu0 = hl_test_runtime_cpu_ns();
  hl_time_t start = hl_time_now();
  HL_ASSERT_OK(hl_queue_host_call(queue, NULL, signal, sleep_200ms, NULL));
  HL_ASSERT_OK(hl_semaphore_wait(s, 2, hl_deadline_after(10000 * MS)));
  hl_time_t wall = hl_time_now() - start;
  int64_t cpu = hl_test_runtime_cpu_ns() - cpu0;
  print_message(
      "queue wait: %.1f ms wall, %.3f ms cpu (hipline and this thread)\n",
      wall / 1e6, cpu / 1e6);
  if (cpu * 10 >= wall || getenv("HL_TEST_PRINT_THREADS"))
    hl_test_print_thread_cpu();
  assert_true(wall >= 200 * MS);
  assert_true(cpu * 10 < wall);
  hl_fence_release(signal);
  hl_semaphore_release(s);
  hl_queue_release(queue);
  hl_device_release(device);
}

// Regression (issue 19, TSan "thread leak" at exit): once a host wait has
// seen a submission's signal, that submission's clean-up is already queued,
// so releasing the queue and then the device right away is the last release
// and tears the device down in the caller, not later on the completion
// thread (whose destroy thread could start after the at-exit join).
static void test_release_after_wait_tears_down_in_caller(void** state) {
  int rounds = (int)hl_test_scale(200, 4);
  for (int i = 0; i < rounds; ++i) {
    int64_t live_before = hl_device_live_count();
    hl_device_t* device = NULL;
    hl_test_host_device(&device);
    hl_queue_t* queue = hl_test_queue_create(device);
    hl_semaphore_t* s = sem_create(0);
    hl_fence_t* signal = hl_test_fence(s, 1);
    HL_ASSERT_OK(hl_queue_host_call(queue, NULL, signal, noop_fn, NULL));
    HL_ASSERT_OK(hl_semaphore_wait(s, 1, hl_deadline_after(10000 * MS)));
    hl_fence_release(signal);
    hl_semaphore_release(s);
    hl_queue_release(queue);
    hl_device_release(device);
    if (hl_device_live_count() > live_before) {
      fail_msg(
          "round %d: the device outlived its last release after the "
          "wait (%lld live, %lld before)",
          i, (long long)hl_device_live_count(), (long long)live_before);
    }
  }
}

// Regression (issue 19): a failure of ANY waited semaphore ends a wait on
// several, in both modes and through a fence, even when another semaphore of
// the wait is never signalled. Before the fix a wait-all registered on the
// first pending semaphore only and slept until the deadline.
static void run_wait_many_later_one_fails(int how) {
  hl_semaphore_t* a = sem_create(0);  // Never signalled.
  hl_semaphore_t* b = sem_create(0);
  hl_semaphore_t* c = sem_create(0);  // Never signalled.
  failer_t f = {b, 20 * MS, HL_STATUS_DATA_LOSS, "b is gone"};
  thrd_t t;
  assert_int_equal(thrd_create(&t, failer_main, &f), thrd_success);
  hl_semaphore_t* sems[3] = {a, b, c};
  uint64_t values[3] = {1, 1, 1};
  hl_time_t deadline = hl_deadline_after(10000 * MS);
  hl_status_t st = NULL;
  if (how == 0) {
    st = hl_semaphore_wait_many(HL_WAIT_ALL, 3, sems, values, deadline, NULL);
  } else if (how == 1) {
    size_t index = 99;
    st = hl_semaphore_wait_many(HL_WAIT_ANY, 3, sems, values, deadline, &index);
  } else {
    hl_fence_t* fence = NULL;
    HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &fence));
    for (int i = 0; i < 3; ++i)
      HL_ASSERT_OK(hl_fence_insert(fence, sems[i], values[i]));
    st = hl_fence_wait(fence, deadline);
    hl_fence_release(fence);
  }
  // DEADLINE_EXCEEDED, or the failure only seen once the deadline passed,
  // means the failure did not wake the waiter.
  assert_true(hl_time_now() < deadline);
  expect_failure(st, HL_STATUS_DATA_LOSS, "b is gone");
  thrd_join(t, NULL);
  hl_semaphore_release(a);
  hl_semaphore_release(b);
  hl_semaphore_release(c);
}
static void test_wait_all_second_fails(void** state) {
  run_wait_many_later_one_fails(0);
}
static void test_wait_any_second_fails(void** state) {
  run_wait_many_later_one_fails(1);
}
static void test_fence_wait_second_fails(void** state) {
  run_wait_many_later_one_fails(2);
}

// Regression (issue 19): a submission parked on {a@1, b@1} fails when b
// fails even though a never comes: its signal fails, and it lets go of its
// queue and device.
static void test_parked_submission_fails_on_any_wait(void** state) {
  int64_t live_before = hl_device_live_count();
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* queue = hl_test_queue_create(device);
  hl_semaphore_t* a = sem_create(0);  // Never signalled.
  hl_semaphore_t* b = sem_create(0);
  hl_semaphore_t* s = sem_create(0);
  hl_fence_t* wait = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &wait));
  HL_ASSERT_OK(hl_fence_insert(wait, a, 1));
  HL_ASSERT_OK(hl_fence_insert(wait, b, 1));
  hl_fence_t* signal = hl_test_fence(s, 1);
  HL_ASSERT_OK(hl_queue_host_call(queue, wait, signal, noop_fn, NULL));
  hl_semaphore_fail(b, HL_MAKE_STATUS(HL_STATUS_DATA_LOSS, "b is gone"));
  expect_failure(hl_semaphore_wait(s, 1, hl_deadline_after(10000 * MS)),
                 HL_STATUS_DATA_LOSS, "b is gone");
  hl_fence_release(wait);
  hl_fence_release(signal);
  hl_queue_release(queue);
  hl_device_release(device);
  assert_true(hl_device_live_count() <= live_before);
  hl_semaphore_release(a);
  hl_semaphore_release(b);
  hl_semaphore_release(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_release_noop),
      cmocka_unit_test(test_signal_then_query),
      cmocka_unit_test(test_wait_already_reached),
      cmocka_unit_test(test_wait_times_out),
      cmocka_unit_test(test_wait_all_every_order),
      cmocka_unit_test(test_wait_any_every_order),
      cmocka_unit_test(test_ping_pong_threads),
      cmocka_unit_test(test_fail_then_wait),
      cmocka_unit_test(test_wait_then_fail),
      cmocka_unit_test(test_many_waiters_one_failure),
      cmocka_unit_test(test_double_failure_keeps_first),
      cmocka_unit_test(test_long_wait_cpu_use),
      cmocka_unit_test(test_long_queue_wait_cpu_use),
      cmocka_unit_test(test_release_after_wait_tears_down_in_caller),
      cmocka_unit_test(test_wait_all_second_fails),
      cmocka_unit_test(test_wait_any_second_fails),
      cmocka_unit_test(test_fence_wait_second_fails),
      cmocka_unit_test(test_parked_submission_fails_on_any_wait),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
