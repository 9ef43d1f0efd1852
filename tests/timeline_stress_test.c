// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A randomized multi-queue DAG under random stream delays
// (HIPLINE_FAULTS stream_delay_us, set through hl_faults_set): every host
// call checks that all its predecessors (its waits and its queue's previous
// submission) have finished. Submission interleaves queues randomly, so many
// waits are submitted before their signals and park.

#include <stdatomic.h>
#include <threads.h>

#include "hipline/fence.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "hipline/time.h"
#include "runtime/base/faults.h"
#include "runtime/timeline/timeline_internal.h"
// C11 threads on pthreads under TSan (see tests/test_util.h).
#define HL_TEST_C11_THREADS_SHIM 1
#include "tests/test_util.h"

#define MS ((hl_duration_t)1000000)
#define QUEUES 4
#define MAX_WAITS 3
#define WINDOW 64  // Waits pick among this many most recent nodes.

typedef struct node_t {
  int queue;
  uint64_t value;  // On sems[queue].
  int waits[MAX_WAITS];
  int wait_count;
  int previous;  // Previous node on the same queue, or -1.
} node_t;

typedef struct dag_t {
  node_t* nodes;
  atomic_int* done;
  atomic_int violations;
  atomic_int ran;
} dag_t;

typedef struct call_t {
  dag_t* dag;
  int index;
} call_t;

static void node_fn(void* user) {
  call_t* c = (call_t*)user;
  dag_t* dag = c->dag;
  const node_t* n = &dag->nodes[c->index];
  for (int i = 0; i < n->wait_count; ++i) {
    if (!atomic_load(&dag->done[n->waits[i]]))
      atomic_fetch_add(&dag->violations, 1);
  }
  if (n->previous >= 0 && !atomic_load(&dag->done[n->previous])) {
    atomic_fetch_add(&dag->violations, 1);
  }
  atomic_store(&dag->done[c->index], 1);
  atomic_fetch_add(&dag->ran, 1);
}

static uint64_t rng_next(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void run_random_dag(uint64_t seed, int count, uint64_t delay_us) {
  hl_faults_t faults;
  memset(&faults, 0, sizeof(faults));
  faults.stream_delay_us = delay_us;
  faults.seed = seed;
  // Set before the device exists: stream workers read it without a lock.
  hl_faults_t previous = hl_faults_set(&faults);

  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* queues[QUEUES];
  hl_semaphore_t* sems[QUEUES];
  for (int q = 0; q < QUEUES; ++q) {
    HL_ASSERT_OK(hl_queue_create(device, &queues[q]));
    HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &sems[q]));
  }

  dag_t dag;
  dag.nodes = calloc((size_t)count, sizeof(node_t));
  dag.done = calloc((size_t)count, sizeof(atomic_int));
  call_t* calls = calloc((size_t)count, sizeof(call_t));
  assert_non_null(dag.nodes);
  assert_non_null(dag.done);
  assert_non_null(calls);
  atomic_init(&dag.violations, 0);
  atomic_init(&dag.ran, 0);

  // Build the DAG in a global order: each node waits on up to MAX_WAITS
  // recent nodes of other queues.
  uint64_t rng = seed;
  uint64_t counts[QUEUES] = {0};
  int last[QUEUES];
  for (int q = 0; q < QUEUES; ++q) last[q] = -1;
  for (int k = 0; k < count; ++k) {
    node_t* n = &dag.nodes[k];
    atomic_init(&dag.done[k], 0);
    n->queue = (int)(rng_next(&rng) % QUEUES);
    n->value = ++counts[n->queue];
    n->previous = last[n->queue];
    last[n->queue] = k;
    int wanted = (int)(rng_next(&rng) % (MAX_WAITS + 1));
    for (int w = 0; w < wanted && k > 0; ++w) {
      int span = k < WINDOW ? k : WINDOW;
      int j = k - 1 - (int)(rng_next(&rng) % (uint64_t)span);
      if (dag.nodes[j].queue == n->queue) continue;
      n->waits[n->wait_count++] = j;
    }
    calls[k].dag = &dag;
    calls[k].index = k;
  }

  // Submit in a random interleaving that keeps each queue's own order, so a
  // wait may reach the runtime before the signal it names.
  int* per_queue[QUEUES];
  int per_count[QUEUES] = {0}, cursor[QUEUES] = {0};
  for (int q = 0; q < QUEUES; ++q) {
    per_queue[q] = calloc((size_t)count, sizeof(int));
    assert_non_null(per_queue[q]);
  }
  for (int k = 0; k < count; ++k) {
    int q = dag.nodes[k].queue;
    per_queue[q][per_count[q]++] = k;
  }
  hl_fence_t* wait = NULL;
  hl_fence_t* signal = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &wait));
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &signal));
  for (int submitted = 0; submitted < count; ++submitted) {
    int q = (int)(rng_next(&rng) % QUEUES);
    while (cursor[q] == per_count[q]) q = (q + 1) % QUEUES;
    int k = per_queue[q][cursor[q]++];
    const node_t* n = &dag.nodes[k];
    hl_fence_clear(wait);
    hl_fence_clear(signal);
    for (int i = 0; i < n->wait_count; ++i) {
      const node_t* w = &dag.nodes[n->waits[i]];
      HL_ASSERT_OK(hl_fence_insert(wait, sems[w->queue], w->value));
    }
    HL_ASSERT_OK(hl_fence_insert(signal, sems[q], n->value));
    HL_ASSERT_OK(
        hl_queue_host_call(queues[q], wait, signal, node_fn, &calls[k]));
  }
  hl_fence_release(wait);
  hl_fence_release(signal);

  for (int q = 0; q < QUEUES; ++q) {
    HL_ASSERT_OK(
        hl_semaphore_wait(sems[q], counts[q], hl_deadline_after(60000 * MS)));
    HL_ASSERT_OK(hl_queue_wait_idle(queues[q], hl_deadline_after(60000 * MS)));
  }
  uint64_t parked = 0, issued = 0, elided = 0;
  for (int q = 0; q < QUEUES; ++q) {
    hl_queue_stats_t stats;
    hl_queue_stats(queues[q], &stats);
    parked += stats.parked;
    issued += stats.waits_issued;
    elided += stats.waits_elided;
    assert_int_equal(stats.failed, 0);
  }
  hl_fault_counts_t fault_counts;
  hl_faults_counts(&fault_counts);
  print_message(
      "seed %llu: %d nodes, %llu parked, %llu waits issued, %llu "
      "elided, %llu delays so far\n",
      (unsigned long long)seed, count, (unsigned long long)parked,
      (unsigned long long)issued, (unsigned long long)elided,
      (unsigned long long)fault_counts.delays_injected);
  assert_int_equal(atomic_load(&dag.ran), count);
  assert_int_equal(atomic_load(&dag.violations), 0);
  // Backends without HIPLINE_FAULTS (hip) are delayed by their runtime
  // instead (HL_HIP_TEST_RUNTIME_DELAY_US on the hip test runtime).
  if (delay_us && device->backend->injects_faults) {
    assert_true(fault_counts.delays_injected > 0);
  }

  // Every event is back in the pool.
  hl_device_flush_work(device);
  hl_device_lock(device);
  int64_t live = atomic_load(&device->live_events);
  int64_t pooled = device->free_event_count;
  hl_device_unlock(device);
  assert_int_equal(live, pooled);

  for (int q = 0; q < QUEUES; ++q) {
    hl_queue_release(queues[q]);
    hl_semaphore_release(sems[q]);
    free(per_queue[q]);
  }
  hl_device_release(device);
  hl_faults_set(&previous);
  free(calls);
  free(dag.nodes);
  free(dag.done);
}

static void test_random_dag_with_delays(void** state) {
  int count = (int)hl_test_scale(2000, 4);
  run_random_dag(1, count, 200);
  run_random_dag(7, count, 200);
}

static void test_random_dag_no_delays(void** state) {
  int count = (int)hl_test_scale(4000, 4);
  run_random_dag(3, count, 0);
}

//===----------------------------------------------------------------------===//
// Signals racing registrations
//===----------------------------------------------------------------------===//

// A queue signals its own timeline without the semaphore's lock when nobody
// waits (hl_semaphore_signal_owned), and every waiter registers under the
// lock and only then looks at the value. Here a helper thread releases a
// gate after a random 0-60 us, so the queue's completion (run on the
// helper, through its pump sink) lands before, during and after the
// registration of three kinds of waiters on the queue's timeline: a host
// wait (past its spin or not), a submission on another queue parked on it,
// and a fence callback. A lost wake-up hangs one of them until its
// deadline.
typedef struct gate_thread_t {
  hl_semaphore_t* gate;
  atomic_uint_least64_t posted;  // Values to signal the gate to.
  atomic_bool stop;
  uint64_t rng;
} gate_thread_t;

static int gate_main(void* arg) {
  gate_thread_t* g = (gate_thread_t*)arg;
  uint64_t signalled = 0;
  while (!atomic_load(&g->stop)) {
    uint64_t want = atomic_load(&g->posted);
    if (want == signalled) {
      thrd_yield();
      continue;
    }
    hl_time_t until = hl_time_now() + (hl_time_t)(rng_next(&g->rng) % 60000);
    while (hl_time_now() < until) {
    }
    HL_ASSERT_OK(hl_semaphore_signal(g->gate, want));
    signalled = want;
  }
  return 0;
}

static void count_fn(void* user, hl_status_t status) {
  if (!status) atomic_fetch_add((atomic_int*)user, 1);
}

static void test_signals_race_registrations(void** state) {
  int rounds = (int)hl_test_scale(3000, 10);
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  hl_queue_t* producer = NULL;
  hl_queue_t* consumer = NULL;
  HL_ASSERT_OK(hl_queue_create(device, &producer));
  HL_ASSERT_OK(hl_queue_create(device, &consumer));
  hl_semaphore_t* timeline = hl_queue_timeline(producer);
  hl_semaphore_t* out = NULL;
  gate_thread_t g;
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &g.gate));
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &out));
  atomic_init(&g.posted, 0);
  atomic_init(&g.stop, false);
  g.rng = 11;
  thrd_t helper;
  assert_int_equal(thrd_create(&helper, gate_main, &g), thrd_success);
  hl_fence_t* wait = NULL;
  hl_fence_t* signal = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &wait));
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &signal));
  atomic_int callbacks;
  atomic_init(&callbacks, 0);
  for (uint64_t i = 1; i <= (uint64_t)rounds; ++i) {
    hl_fence_clear(wait);
    HL_ASSERT_OK(hl_fence_insert(wait, g.gate, i));
    uint64_t value = 0;
    HL_ASSERT_OK(hl_queue_submit(producer, wait, NULL, NULL, &value));
    hl_fence_clear(wait);
    HL_ASSERT_OK(hl_fence_insert(wait, timeline, value));
    hl_fence_clear(signal);
    HL_ASSERT_OK(hl_fence_insert(signal, out, i));
    HL_ASSERT_OK(hl_queue_barrier(consumer, wait, signal));
    HL_ASSERT_OK(
        hl_fence_call_when_reached(wait, device, count_fn, &callbacks));
    atomic_store(&g.posted, i);
    HL_ASSERT_OK(
        hl_semaphore_wait(timeline, value, hl_deadline_after(10000 * MS)));
    HL_ASSERT_OK(hl_semaphore_wait(out, i, hl_deadline_after(10000 * MS)));
  }
  atomic_store(&g.stop, true);
  thrd_join(helper, NULL);
  HL_ASSERT_OK(hl_queue_wait_idle(producer, hl_deadline_after(10000 * MS)));
  HL_ASSERT_OK(hl_queue_wait_idle(consumer, hl_deadline_after(10000 * MS)));
  hl_device_flush_work(device);
  assert_int_equal(atomic_load(&callbacks), rounds);
  hl_queue_stats_t stats;
  hl_queue_stats(consumer, &stats);
  print_message("%d rounds: consumer parked %llu times\n", rounds,
                (unsigned long long)stats.parked);
  hl_fence_release(wait);
  hl_fence_release(signal);
  hl_semaphore_release(g.gate);
  hl_semaphore_release(out);
  hl_queue_release(producer);
  hl_queue_release(consumer);
  hl_device_release(device);
}

//===----------------------------------------------------------------------===//
// A flush waits for issuers on other threads
//===----------------------------------------------------------------------===//

// A thread that saw a submission's signal and then flushes the device finds
// the submission's references dropped, even when another thread issued it
// (and is still in its publish step when the signal becomes visible). The
// issuer is counted on its queue, not the device (hl_device_wait_issuers):
// here the submitting thread issues inline, and this thread checks the
// signalled semaphore's reference count right after its flush.
typedef struct issuer_thread_t {
  hl_queue_t* queue;
  _Atomic(hl_fence_t*) slot;  // A signal fence to submit, or NULL.
  atomic_bool stop;
} issuer_thread_t;

static int issuer_main(void* arg) {
  issuer_thread_t* t = (issuer_thread_t*)arg;
  while (!atomic_load(&t->stop)) {
    hl_fence_t* f = atomic_exchange(&t->slot, NULL);
    if (!f) {
      thrd_yield();
      continue;
    }
    HL_ASSERT_OK(hl_queue_barrier(t->queue, NULL, f));
  }
  return 0;
}

static void test_flush_waits_for_other_threads_issuers(void** state) {
  // Up to |rounds| rounds, but no more than a few seconds' worth past the
  // first |min_rounds|: each round hands off between two threads, which
  // costs a scheduler slice per hand-off when the CPUs are oversubscribed
  // (two other busy processes made 20000 rounds take 20-90 s). The bound
  // limits the work, never the verdict.
  int rounds = (int)hl_test_scale(20000, 10);
  int min_rounds = (int)hl_test_scale(1000, 10);
  hl_time_t soft_end = hl_deadline_after(3000 * MS);
  hl_device_t* device = NULL;
  hl_test_host_device(&device);
  issuer_thread_t t;
  HL_ASSERT_OK(hl_queue_create(device, &t.queue));
  atomic_init(&t.slot, NULL);
  atomic_init(&t.stop, false);
  thrd_t thread;
  assert_int_equal(thrd_create(&thread, issuer_main, &t), thrd_success);
  for (int i = 0; i < rounds; ++i) {
    if (i >= min_rounds && hl_time_now() >= soft_end) break;
    hl_semaphore_t* s = NULL;
    HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &s));
    hl_fence_t* f = NULL;
    HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &f));
    HL_ASSERT_OK(hl_fence_insert(f, s, 1));
    atomic_store(&t.slot, f);
    // Spin on the value (no host wait: it must not order anything),
    // yielding so that the issuer runs even when the CPUs are oversubscribed.
    while (hl_semaphore_value(s) < 1) {
      thrd_yield();
    }
    hl_device_flush_work(device);
    // This thread's reference and the fence's; the submission's is gone.
    assert_int_equal(atomic_load(&s->ref_count), 2);
    hl_fence_release(f);
    hl_semaphore_release(s);
  }
  atomic_store(&t.stop, true);
  thrd_join(thread, NULL);
  HL_ASSERT_OK(hl_queue_wait_idle(t.queue, hl_deadline_after(10000 * MS)));
  hl_queue_release(t.queue);
  hl_device_release(device);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_dag_with_delays),
      cmocka_unit_test(test_random_dag_no_delays),
      cmocka_unit_test(test_signals_race_registrations),
      cmocka_unit_test(test_flush_waits_for_other_threads_issuers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
