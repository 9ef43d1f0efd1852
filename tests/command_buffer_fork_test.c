// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Fork and join lifetimes (MLIR D89937: lowering async GPU work leaked
// streams and events when a token had several uses or a wait joined several
// tokens). Rounds of fan-out (one signal waited on by four queues, each
// executing a command buffer) and fan-in (one submission waiting on a fence
// that joins the four queues' signals), with the fan-out submitted both
// after its signal and before it (parked waits). Afterwards the device's live
// events, pooled events and streams must be back to their starting counts,
// and the device itself must go once released.
//
// HL_FORK_ROUNDS sets the rounds (default 100000; 1/20 under sanitizers).

#include <threads.h>

#include "hipline/command_buffer.h"
#include "tests/memory_util.h"

#define FANOUT 4

static uint64_t fork_rounds(void) {
  const char* v = getenv("HL_FORK_ROUNDS");
  if (v && *v) return strtoull(v, NULL, 10);
  return hl_test_scale(100000, 20);
}

static hl_fence_t* fork_fence(hl_semaphore_t* s, uint64_t v) {
  return hl_test_fence(s, v);
}

typedef struct fork_world_t {
  hl_device_t* device;
  hl_queue_t* root;  // Signals the fork and runs the join.
  hl_queue_t* branches[FANOUT];
  hl_semaphore_t* fork;
  hl_semaphore_t* branch_done[FANOUT];
  hl_semaphore_t* joined;
  hl_buffer_t* buffers[FANOUT];
  hl_command_buffer_t* cbs[FANOUT];
} fork_world_t;

static void fork_round(fork_world_t* w, uint64_t r, bool parked) {
  hl_fence_t* fork_signal = fork_fence(w->fork, r);
  if (!parked) {
    HL_ASSERT_OK(hl_queue_barrier(w->root, NULL, fork_signal));
  }
  // Fan-out: one signal, four waiters (one fence shared by all four).
  for (int i = 0; i < FANOUT; ++i) {
    hl_fence_t* done = fork_fence(w->branch_done[i], r);
    HL_ASSERT_OK(
        hl_queue_execute(w->branches[i], fork_signal, done, w->cbs[i]));
    hl_fence_release(done);
  }
  if (parked) {
    HL_ASSERT_OK(hl_queue_barrier(w->root, NULL, fork_signal));
  }
  hl_fence_release(fork_signal);
  // Fan-in: one wait joining four fences.
  hl_fence_t* join = hl_test_fence(NULL, 0);
  for (int i = 0; i < FANOUT; ++i) {
    hl_fence_t* one = fork_fence(w->branch_done[i], r);
    HL_ASSERT_OK(hl_fence_join(join, one));
    hl_fence_release(one);
  }
  assert_int_equal(hl_fence_count(join), FANOUT);
  hl_fence_t* joined = fork_fence(w->joined, r);
  HL_ASSERT_OK(hl_queue_barrier(w->root, join, joined));
  hl_fence_release(join);
  hl_fence_release(joined);
}

static void fork_world_idle(fork_world_t* w) {
  HL_ASSERT_OK(hl_queue_wait_idle(w->root, MEM_DEADLINE()));
  for (int i = 0; i < FANOUT; ++i) {
    HL_ASSERT_OK(hl_queue_wait_idle(w->branches[i], MEM_DEADLINE()));
  }
}

static void expect_counts(hl_device_t* d, const hl_memory_stats_t* start,
                          const char* when) {
  hl_memory_stats_t now = hl_test_memory_stats(d);
  print_message("%s: events live %lld pooled %lld, streams %lld\n", when,
                (long long)now.events_live, (long long)now.events_pooled,
                (long long)now.streams_live);
  assert_int_equal(now.events_live, start->events_live);
  assert_int_equal(now.events_pooled, start->events_pooled);
  assert_int_equal(now.streams_live, start->streams_live);
}

static void test_fork_join_lifetimes(void** state) {
  (void)state;
  int64_t devices_before = hl_device_live_count();
  fork_world_t w;
  memset(&w, 0, sizeof(w));
  w.device = mem_device_create(NULL);
  w.root = hl_test_queue_create(w.device);
  w.fork = hl_test_semaphore_create();
  w.joined = hl_test_semaphore_create();
  for (int i = 0; i < FANOUT; ++i) {
    w.branches[i] = hl_test_queue_create(w.device);
    w.branch_done[i] = hl_test_semaphore_create();
    w.buffers[i] = mem_alloca(w.branches[i], NULL, 0, NULL, 0, 256);
    HL_ASSERT_OK(hl_command_buffer_create(w.device, 0, &w.cbs[i]));
    uint32_t word = (uint32_t)i;
    HL_ASSERT_OK(hl_command_buffer_fill(w.cbs[i], w.buffers[i], 0, 256, 7));
    HL_ASSERT_OK(hl_command_buffer_update(w.cbs[i], &word, w.buffers[i], 0, 4));
    HL_ASSERT_OK(hl_command_buffer_finalize(w.cbs[i]));
  }
  fork_world_idle(&w);
  HL_ASSERT_OK(hl_device_trim(w.device, 0));
  hl_memory_stats_t start = hl_test_memory_stats(w.device);
  assert_int_equal(start.events_pooled, 0);
  assert_int_equal(start.streams_live, 1 + FANOUT);

  uint64_t rounds = fork_rounds();
  uint64_t halfway = rounds / 2;
  for (uint64_t r = 1; r <= rounds; ++r) {
    fork_round(&w, r, (r & 1) == 0);
    // Keep a bounded number of rounds in flight.
    if (r > 8) HL_ASSERT_OK(hl_semaphore_wait(w.joined, r - 8, MEM_DEADLINE()));
    if (r == halfway) {
      fork_world_idle(&w);
      hl_memory_stats_t mid = hl_test_memory_stats(w.device);
      // Idle: every event created is back in the pool.
      assert_int_equal(mid.events_live, mid.events_pooled);
      assert_int_equal(mid.streams_live, start.streams_live);
    }
  }
  HL_ASSERT_OK(hl_semaphore_wait(w.joined, rounds, MEM_DEADLINE()));
  fork_world_idle(&w);
  for (int i = 0; i < FANOUT; ++i) {
    uint32_t words[2];
    hl_fence_t* done = fork_fence(w.branch_done[i], rounds + 1);
    HL_ASSERT_OK(
        hl_queue_read(w.branches[i], NULL, done, w.buffers[i], 0, words, 8));
    hl_fence_release(done);
    HL_ASSERT_OK(
        hl_semaphore_wait(w.branch_done[i], rounds + 1, MEM_DEADLINE()));
    assert_int_equal(words[0], (uint32_t)i);
    assert_int_equal(words[1], 7);
  }
  // A signal is visible before the queue's completion thread gives back its
  // hold on the submission's event; once the queue is idle (its done value
  // reached) every event is back in the pool.
  fork_world_idle(&w);
  hl_memory_stats_t end = hl_test_memory_stats(w.device);
  assert_int_equal(
      end.command_buffer_executions - start.command_buffer_executions,
      rounds * FANOUT);
  HL_ASSERT_OK(hl_device_trim(w.device, 0));
  expect_counts(w.device, &start, "after fork/join rounds");

  for (int i = 0; i < FANOUT; ++i) {
    hl_command_buffer_release(w.cbs[i]);
    hl_buffer_release(w.buffers[i]);
    hl_queue_release(w.branches[i]);
    hl_semaphore_release(w.branch_done[i]);
  }
  hl_semaphore_release(w.fork);
  hl_semaphore_release(w.joined);
  hl_queue_release(w.root);
  hl_device_release(w.device);
  // The device goes once its deferred work is done.
  hl_time_t deadline = hl_deadline_after(20000 * MEM_MS);
  while (hl_device_live_count() != devices_before && hl_time_now() < deadline) {
    hl_test_sleep_ms(2);
  }
  assert_int_equal(hl_device_live_count(), devices_before);
}

// A failed fork: the signal fails, every branch fails with it, the join fails
// too, and nothing leaks.
static void test_failed_fork_releases_everything(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* branches[FANOUT];
  hl_semaphore_t* done[FANOUT];
  hl_buffer_t* b[FANOUT];
  hl_command_buffer_t* cb[FANOUT];
  hl_queue_t* root = hl_test_queue_create(d);
  for (int i = 0; i < FANOUT; ++i) {
    branches[i] = hl_test_queue_create(d);
    done[i] = hl_test_semaphore_create();
    b[i] = mem_alloca(branches[i], NULL, 0, NULL, 0, 64);
    HL_ASSERT_OK(hl_command_buffer_create(d, 0, &cb[i]));
    HL_ASSERT_OK(hl_command_buffer_fill(cb[i], b[i], 0, 64, 1));
    HL_ASSERT_OK(hl_command_buffer_finalize(cb[i]));
    HL_ASSERT_OK(hl_queue_wait_idle(branches[i], MEM_DEADLINE()));
  }
  HL_ASSERT_OK(hl_device_trim(d, 0));
  hl_memory_stats_t start = hl_test_memory_stats(d);
  uint64_t rounds = hl_test_scale(200, 4);
  for (uint64_t r = 1; r <= rounds; ++r) {
    hl_semaphore_t* fork = hl_test_semaphore_create();
    hl_semaphore_t* joined = hl_test_semaphore_create();
    hl_fence_t* f = fork_fence(fork, 1);
    hl_fence_t* join = hl_test_fence(NULL, 0);
    for (int i = 0; i < FANOUT; ++i) {
      hl_fence_t* sig = fork_fence(done[i], r);
      HL_ASSERT_OK(hl_queue_execute(branches[i], f, sig, cb[i]));
      HL_ASSERT_OK(hl_fence_join(join, sig));
      hl_fence_release(sig);
    }
    hl_fence_t* j = fork_fence(joined, 1);
    HL_ASSERT_OK(hl_queue_barrier(root, join, j));
    hl_semaphore_fail(fork, HL_MAKE_STATUS(HL_STATUS_ABORTED, "fork %llu",
                                           (unsigned long long)r));
    hl_test_assert_status_has(hl_semaphore_wait(joined, 1, MEM_DEADLINE()),
                              HL_STATUS_ABORTED, "fork", NULL);
    hl_fence_release(f);
    hl_fence_release(join);
    hl_fence_release(j);
    hl_semaphore_release(fork);
    hl_semaphore_release(joined);
    // The branches' semaphores failed; use fresh ones next round.
    for (int i = 0; i < FANOUT; ++i) {
      HL_ASSERT_OK(hl_queue_wait_idle(branches[i], MEM_DEADLINE()));
      hl_semaphore_release(done[i]);
      done[i] = hl_test_semaphore_create();
    }
  }
  HL_ASSERT_OK(hl_queue_wait_idle(root, MEM_DEADLINE()));
  HL_ASSERT_OK(hl_device_trim(d, 0));
  expect_counts(d, &start, "after failed forks");
  for (int i = 0; i < FANOUT; ++i) {
    HL_ASSERT_OK(hl_queue_status(branches[i]));  // Only submissions failed.
    hl_command_buffer_release(cb[i]);
    hl_buffer_release(b[i]);
    hl_queue_release(branches[i]);
    hl_semaphore_release(done[i]);
  }
  hl_queue_release(root);
  hl_device_release(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fork_join_lifetimes),
      cmocka_unit_test(test_failed_fork_releases_everything),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
