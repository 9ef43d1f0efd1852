// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The quiet-queue path (runtime/timeline/submit_quiet.c): a submission on an
// idle queue whose waits are reached and that needs no stream work completes
// on the submitting thread without a submission record. These tests check
// both sides of its predicate through the queue's count of quiet
// submissions: it is taken where it may be (and the semantics are the
// general path's: statistics, elision counters, wait-before-signal on other
// queues, fork/join), and never where it must not be (a failed or
// unreached wait, work pending or in flight, checked mode, fault
// injection, invalid fences).
#include <stdatomic.h>
#include <string.h>
#include <threads.h>

#include "hipline/buffer.h"
#include "hipline/fence.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "hipline/time.h"
#include "runtime/base/faults.h"
#include "runtime/timeline/queue_internal.h"
#include "tests/test_util.h"

#define MS ((hl_duration_t)1000000)
#define LONG_DEADLINE() hl_deadline_after(20000 * MS)

static hl_semaphore_t* sem_create(uint64_t initial) {
  hl_semaphore_t* s = NULL;
  HL_ASSERT_OK(hl_semaphore_create(initial, hl_allocator_system(), &s));
  return s;
}

static hl_fence_t* fence1(hl_semaphore_t* s, uint64_t v) {
  hl_fence_t* f = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &f));
  if (s) HL_ASSERT_OK(hl_fence_insert(f, s, v));
  return f;
}

// A barrier waiting on |ws|@|wv| (none when NULL) and signalling |ss|@|sv|.
static hl_status_t barrier(hl_queue_t* q, hl_semaphore_t* ws, uint64_t wv,
                           hl_semaphore_t* ss, uint64_t sv) {
  hl_fence_t* wait = fence1(ws, wv);
  hl_fence_t* signal = fence1(ss, sv);
  hl_status_t st = hl_queue_barrier(q, wait, signal);
  hl_fence_release(wait);
  hl_fence_release(signal);
  return st;
}

static uint64_t value_of(hl_semaphore_t* s) {
  uint64_t v = 0;
  hl_status_ignore(hl_semaphore_query(s, &v));
  return v;
}

static hl_queue_stats_t stats_of(hl_queue_t* q) {
  hl_queue_stats_t stats;
  hl_queue_stats(q, &stats);
  return stats;
}

typedef struct gate_t {
  atomic_bool open;
} gate_t;

// Holds its stream until the test opens the gate.
static void gate_fn(void* user) {
  gate_t* g = (gate_t*)user;
  while (!atomic_load(&g->open)) hl_test_sleep_ms(1);
}

//===----------------------------------------------------------------------===//
// Taken
//===----------------------------------------------------------------------===//

// An empty submission with a reached wait on an idle queue takes the quiet
// path: its signal is reached when hl_queue_barrier returns, and the
// statistics count it as the general path would (a submission, an elided
// wait, the timeline's value). A wait on the queue's own timeline at a
// value it submitted is covered by queue order.
static void test_quiet_barrier_is_taken(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q = hl_test_queue_create(device);
  hl_semaphore_t* reached = sem_create(3);
  hl_semaphore_t* out = sem_create(0);
  for (uint64_t i = 1; i <= 10; ++i) {
    HL_ASSERT_OK(barrier(q, reached, 3, out, i));
    assert_int_equal(value_of(out), i);
    assert_int_equal(value_of(hl_queue_timeline(q)), i);
  }
  HL_ASSERT_OK(barrier(q, hl_queue_timeline(q), 10, out, 11));
  HL_ASSERT_OK(barrier(q, NULL, 0, NULL, 0));
  assert_int_equal(hl_queue_quiet_submissions(q), 12);
  hl_queue_stats_t stats = stats_of(q);
  assert_int_equal(stats.submissions, 12);
  assert_int_equal(stats.submitted_value, 12);
  assert_int_equal(stats.waits_elided, 11);
  assert_int_equal(stats.failed, 0);
  assert_int_equal(stats.parked, 0);
  // Nothing retained: the fences were released, so only the test's
  // references are left.
  assert_int_equal(atomic_load(&out->ref_count), 1);
  assert_int_equal(atomic_load(&reached->ref_count), 1);
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  hl_semaphore_release(out);
  hl_semaphore_release(reached);
  hl_queue_release(q);
  hl_device_release(device);
}

// An alloca and its dealloca on an idle queue with hipline's suballocator
// take the quiet path once the suballocator has a block (the first alloca
// grows it on the stream); the memory is usable and the dealloca's signal
// reached when each call returns.
static void test_quiet_alloca_pair_is_taken(void** state) {
  (void)state;
  hl_device_options_t options;
  hl_device_options_initialize(&options);
  options.backend = hl_test_backend_kind();
  options.pool_mode = HL_POOL_MODE_HIPLINE;
  options.checked = 0;
  hl_device_t* device = NULL;
  HL_ASSERT_OK(hl_device_create(&options, hl_allocator_system(), &device));
  hl_queue_t* q = hl_test_queue_create(device);
  hl_semaphore_t* freed = sem_create(0);
  for (uint64_t i = 1; i <= 20; ++i) {
    hl_buffer_t* buffer = NULL;
    HL_ASSERT_OK(hl_queue_alloca(q, NULL, NULL, 4096, 0, &buffer));
    HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
    hl_fence_t* signal = fence1(freed, i);
    HL_ASSERT_OK(hl_queue_dealloca(q, NULL, signal, buffer));
    hl_fence_release(signal);
    assert_int_equal(value_of(freed), i);
    hl_buffer_release(buffer);
  }
  // The first alloca may grow the suballocator on the stream; every
  // dealloca and the later allocas are quiet.
  assert_true(hl_queue_quiet_submissions(q) >= 39);
  assert_int_equal(stats_of(q).submissions, 40);
  assert_int_equal(stats_of(q).failed, 0);
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  hl_semaphore_release(freed);
  hl_queue_release(q);
  hl_device_release(device);
}

// Cross-queue round trip: queue B's barrier is parked on a value of A's
// signal that nobody has submitted; A's quiet barrier signals it, and B's
// pump runs on the signalling thread, so B's signal is reached when A's
// hl_queue_barrier returns, with no hand-off to another thread. After
// that, both queues are idle and each round trip is two quiet barriers.
static void test_quiet_signal_pumps_parked_queue_here(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* a = hl_test_queue_create(device);
  hl_queue_t* b = hl_test_queue_create(device);
  hl_semaphore_t* sa = sem_create(0);
  hl_semaphore_t* sb = sem_create(0);
  HL_ASSERT_OK(barrier(b, sa, 1, sb, 1));  // Parks: sa@1 is not submitted.
  assert_int_equal(value_of(sb), 0);
  HL_ASSERT_OK(barrier(a, NULL, 0, sa, 1));
  assert_int_equal(hl_queue_quiet_submissions(a), 1);
  assert_int_equal(value_of(sb), 1);  // Pumped here, before the return.
  assert_int_equal(hl_queue_quiet_submissions(b), 0);
  assert_int_equal(stats_of(b).parked, 1);
  for (uint64_t v = 2; v <= 50; ++v) {
    HL_ASSERT_OK(barrier(a, sb, v - 1, sa, v));
    HL_ASSERT_OK(barrier(b, sa, v, sb, v));
    assert_int_equal(value_of(sb), v);
  }
  assert_int_equal(hl_queue_quiet_submissions(a), 50);
  assert_int_equal(hl_queue_quiet_submissions(b), 49);
  HL_ASSERT_OK(hl_queue_wait_idle(a, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(b, LONG_DEADLINE()));
  hl_semaphore_release(sa);
  hl_semaphore_release(sb);
  hl_queue_release(a);
  hl_queue_release(b);
  hl_device_release(device);
}

//===----------------------------------------------------------------------===//
// Not taken
//===----------------------------------------------------------------------===//

// A wait whose value was reached before its semaphore failed fails the
// submission, named by the general path; the quiet path must not publish
// it as reached.
static void test_quiet_not_taken_on_failed_wait(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q = hl_test_queue_create(device);
  hl_semaphore_t* s = sem_create(5);
  HL_ASSERT_OK(
      hl_semaphore_fail(s, HL_MAKE_STATUS(HL_STATUS_ABORTED, "producer")));
  hl_semaphore_t* out = sem_create(0);
  HL_ASSERT_OK(barrier(q, s, 3, out, 1));
  hl_status_t st = hl_semaphore_wait(out, 1, LONG_DEADLINE());
  assert_int_equal(hl_status_code(st), HL_STATUS_ABORTED);
  assert_non_null(
      strstr(hl_status_message(st), "waited on a failed semaphore"));
  hl_status_free(st);
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  assert_int_equal(hl_queue_quiet_submissions(q), 0);
  assert_int_equal(stats_of(q).failed, 1);
  hl_semaphore_release(out);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(device);
}

// A wait not reached yet parks the submission (wait-before-signal) until a
// host signal releases it.
static void test_quiet_not_taken_on_unreached_wait(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q = hl_test_queue_create(device);
  hl_semaphore_t* gate = sem_create(0);
  hl_semaphore_t* out = sem_create(0);
  HL_ASSERT_OK(barrier(q, gate, 1, out, 1));
  assert_int_equal(value_of(out), 0);
  HL_ASSERT_OK(hl_semaphore_signal(gate, 1));
  HL_ASSERT_OK(hl_semaphore_wait(out, 1, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  assert_int_equal(hl_queue_quiet_submissions(q), 0);
  assert_int_equal(stats_of(q).parked, 1);
  hl_semaphore_release(out);
  hl_semaphore_release(gate);
  hl_queue_release(q);
  hl_device_release(device);
}

// Behind a submission still on the stream (a host call held by a gate) a
// barrier with a reached wait waits its turn: its signal must not come
// before the earlier submission's.
static void test_quiet_not_taken_behind_pending_work(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q = hl_test_queue_create(device);
  hl_semaphore_t* first = sem_create(0);
  hl_semaphore_t* out = sem_create(0);
  gate_t gate;
  atomic_init(&gate.open, false);
  hl_fence_t* signal = fence1(first, 1);
  HL_ASSERT_OK(hl_queue_host_call(q, NULL, signal, gate_fn, &gate));
  hl_fence_release(signal);
  HL_ASSERT_OK(barrier(q, NULL, 0, out, 1));
  HL_ASSERT_OK(barrier(q, NULL, 0, out, 2));
  hl_test_sleep_ms(5);
  assert_int_equal(value_of(first), 0);
  assert_int_equal(value_of(out), 0);
  atomic_store(&gate.open, true);
  HL_ASSERT_OK(hl_semaphore_wait(out, 2, LONG_DEADLINE()));
  assert_int_equal(value_of(first), 1);
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  assert_int_equal(hl_queue_quiet_submissions(q), 0);
  // Idle again: the next one is quiet.
  HL_ASSERT_OK(barrier(q, NULL, 0, out, 3));
  assert_int_equal(hl_queue_quiet_submissions(q), 1);
  hl_semaphore_release(out);
  hl_semaphore_release(first);
  hl_queue_release(q);
  hl_device_release(device);
}

// Checked mode keeps the general path, which still completes an idle
// queue's barrier (at once, with a record).
static void test_quiet_not_taken_in_checked_mode(void** state) {
  (void)state;
  hl_device_options_t options;
  hl_device_options_initialize(&options);
  options.backend = hl_test_backend_kind();
  options.checked = 1;
  hl_device_t* device = NULL;
  HL_ASSERT_OK(hl_device_create(&options, hl_allocator_system(), &device));
  hl_test_require_checked(device);
  hl_queue_t* q = hl_test_queue_create(device);
  hl_semaphore_t* reached = sem_create(1);
  hl_semaphore_t* out = sem_create(0);
  for (uint64_t i = 1; i <= 5; ++i) {
    HL_ASSERT_OK(barrier(q, reached, 1, out, i));
  }
  hl_buffer_t* buffer = NULL;
  HL_ASSERT_OK(hl_queue_alloca(q, NULL, NULL, 4096, 0, &buffer));
  HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, buffer));
  hl_buffer_release(buffer);
  HL_ASSERT_OK(hl_semaphore_wait(out, 5, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  assert_int_equal(hl_queue_quiet_submissions(q), 0);
  assert_int_equal(stats_of(q).submissions, 7);
  hl_semaphore_release(out);
  hl_semaphore_release(reached);
  hl_queue_release(q);
  hl_device_release(device);
}

// With fault injection on, an idle queue's barrier goes through the
// general path, where HIPLINE_FAULTS' injected submission failure fails its
// signal.
static void test_quiet_not_taken_with_faults(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q = hl_test_queue_create(device);
  hl_semaphore_t* out = sem_create(0);
  hl_faults_t faults;
  memset(&faults, 0, sizeof(faults));
  faults.fail_submission_every = 1;
  hl_faults_t previous = hl_faults_set(&faults);
  HL_ASSERT_OK(barrier(q, NULL, 0, out, 1));
  hl_faults_set(&previous);
  hl_status_t st = hl_semaphore_wait(out, 1, LONG_DEADLINE());
  hl_test_assert_status_has(st, HL_STATUS_INTERNAL,
                            "injected by HIPLINE_FAULTS", NULL);
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  assert_int_equal(hl_queue_quiet_submissions(q), 0);
  assert_int_equal(stats_of(q).failed, 1);
  hl_semaphore_release(out);
  hl_queue_release(q);
  hl_device_release(device);
}

// The quiet path runs before the submission's argument checks: invalid
// fences must still be rejected by them, on an idle queue too.
static void test_quiet_keeps_argument_checks(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q = hl_test_queue_create(device);
  hl_queue_t* other = hl_test_queue_create(device);
  hl_semaphore_t* out = sem_create(0);
  HL_ASSERT_OK(barrier(q, NULL, 0, out, 1));
  HL_ASSERT_STATUS(barrier(q, NULL, 0, hl_queue_timeline(q), 2),
                   INVALID_ARGUMENT);
  HL_ASSERT_STATUS(barrier(q, NULL, 0, hl_queue_timeline(other), 1),
                   INVALID_ARGUMENT);
  HL_ASSERT_STATUS(barrier(q, hl_queue_timeline(q), 2, out, 2),
                   INVALID_ARGUMENT);
  assert_int_equal(hl_queue_quiet_submissions(q), 1);
  assert_int_equal(stats_of(q).submissions, 1);
  assert_int_equal(value_of(out), 1);
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  hl_semaphore_release(out);
  hl_queue_release(other);
  hl_queue_release(q);
  hl_device_release(device);
}

//===----------------------------------------------------------------------===//
// Concurrency
//===----------------------------------------------------------------------===//

// Threads submitting to one queue at once, a mix of quiet barriers and host
// calls (which keep the queue busy now and then, so both paths and the
// switch between them race): every submission gets its own value, each
// thread's signals arrive in order, and the timeline ends at the total.
typedef struct mixer_t {
  hl_queue_t* queue;
  hl_semaphore_t* out;
  int rounds;
  int seed;
} mixer_t;

static void nop_fn(void* user) { (void)user; }

static int mixer_main(void* arg) {
  mixer_t* m = (mixer_t*)arg;
  unsigned seed = (unsigned)m->seed;
  for (int i = 1; i <= m->rounds; ++i) {
    seed = seed * 1103515245u + 12345u;
    hl_fence_t* signal = fence1(m->out, (uint64_t)i);
    hl_fence_t* wait = i > 1 ? fence1(m->out, (uint64_t)i - 1) : NULL;
    hl_status_t st =
        (seed >> 16) % 4 == 0
            ? hl_queue_host_call(m->queue, wait, signal, nop_fn, NULL)
            : hl_queue_barrier(m->queue, wait, signal);
    hl_fence_release(signal);
    hl_fence_release(wait);
    if (st) {
      hl_status_free(st);
      return 1;
    }
  }
  return 0;
}

static void test_quiet_concurrent_submitters(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* q = hl_test_queue_create(device);
  enum { kThreads = 3 };
  int rounds = (int)hl_test_scale(3000, 10);
  mixer_t mixers[kThreads];
  thrd_t threads[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    mixers[t] = (mixer_t){q, sem_create(0), rounds, t + 1};
    assert_int_equal(thrd_create(&threads[t], mixer_main, &mixers[t]),
                     thrd_success);
  }
  for (int t = 0; t < kThreads; ++t) {
    int rc = 1;
    thrd_join(threads[t], &rc);
    assert_int_equal(rc, 0);
  }
  for (int t = 0; t < kThreads; ++t) {
    HL_ASSERT_OK(
        hl_semaphore_wait(mixers[t].out, (uint64_t)rounds, LONG_DEADLINE()));
  }
  HL_ASSERT_OK(hl_queue_wait_idle(q, LONG_DEADLINE()));
  uint64_t total = (uint64_t)kThreads * (uint64_t)rounds;
  assert_int_equal(value_of(hl_queue_timeline(q)), total);
  hl_queue_stats_t stats = stats_of(q);
  assert_int_equal(stats.submissions, total);
  assert_int_equal(stats.failed, 0);
  for (int t = 0; t < kThreads; ++t) hl_semaphore_release(mixers[t].out);
  hl_queue_release(q);
  hl_device_release(device);
}

// Two threads play ping-pong across two queues, each submitting to its own
// queue and waiting on the other's last signal from the host: quiet
// barriers signal a semaphore another thread is blocked on, and parked
// barriers are released by the other queue's quiet signal.
typedef struct player_t {
  hl_queue_t* queue;
  hl_semaphore_t* mine;
  hl_semaphore_t* theirs;
  int rounds;
  bool first;
} player_t;

static int player_main(void* arg) {
  player_t* p = (player_t*)arg;
  for (int i = 1; i <= p->rounds; ++i) {
    uint64_t want = p->first ? (uint64_t)i - 1 : (uint64_t)i;
    hl_fence_t* wait = want ? fence1(p->theirs, want) : NULL;
    hl_fence_t* signal = fence1(p->mine, (uint64_t)i);
    hl_status_t st = hl_queue_barrier(p->queue, wait, signal);
    hl_fence_release(wait);
    hl_fence_release(signal);
    if (!st && i % 3 == 0) {
      st = hl_semaphore_wait(p->theirs, want, LONG_DEADLINE());
    }
    if (st) {
      hl_status_free(st);
      return 1;
    }
  }
  return 0;
}

static void test_quiet_cross_queue_ping_pong_threads(void** state) {
  (void)state;
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* a = hl_test_queue_create(device);
  hl_queue_t* b = hl_test_queue_create(device);
  hl_semaphore_t* sa = sem_create(0);
  hl_semaphore_t* sb = sem_create(0);
  int rounds = (int)hl_test_scale(2000, 10);
  player_t pa = {a, sa, sb, rounds, true};
  player_t pb = {b, sb, sa, rounds, false};
  thrd_t ta, tb;
  assert_int_equal(thrd_create(&ta, player_main, &pa), thrd_success);
  assert_int_equal(thrd_create(&tb, player_main, &pb), thrd_success);
  int ra = 1, rb = 1;
  thrd_join(ta, &ra);
  thrd_join(tb, &rb);
  assert_int_equal(ra, 0);
  assert_int_equal(rb, 0);
  HL_ASSERT_OK(hl_semaphore_wait(sb, (uint64_t)rounds, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(a, LONG_DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(b, LONG_DEADLINE()));
  assert_int_equal(value_of(sa), (uint64_t)rounds);
  assert_int_equal(stats_of(a).failed + stats_of(b).failed, 0);
  hl_semaphore_release(sa);
  hl_semaphore_release(sb);
  hl_queue_release(a);
  hl_queue_release(b);
  hl_device_release(device);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quiet_barrier_is_taken),
      cmocka_unit_test(test_quiet_alloca_pair_is_taken),
      cmocka_unit_test(test_quiet_signal_pumps_parked_queue_here),
      cmocka_unit_test(test_quiet_not_taken_on_failed_wait),
      cmocka_unit_test(test_quiet_not_taken_on_unreached_wait),
      cmocka_unit_test(test_quiet_not_taken_behind_pending_work),
      cmocka_unit_test(test_quiet_not_taken_in_checked_mode),
      cmocka_unit_test(test_quiet_not_taken_with_faults),
      cmocka_unit_test(test_quiet_keeps_argument_checks),
      cmocka_unit_test(test_quiet_concurrent_submitters),
      cmocka_unit_test(test_quiet_cross_queue_ping_pong_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
