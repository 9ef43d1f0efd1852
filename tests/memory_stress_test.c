// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Four threads share two queues on one host device and run random mixes of
// alloca, fill, copy, read-and-verify, dealloca (on either queue) and plain
// release (the fallback), with random stream delays injected and without
// (where hipline's allocas and deallocas may run at once). Every buffer's
// data is checked, and at the end the statistics balance: nothing in use,
// every alloca accounted for by a dealloca or a fallback release.

#include <threads.h>

#include "runtime/base/faults.h"
#include "tests/memory_util.h"

#define THREADS 4

typedef struct worker_t {
  hl_device_t* device;
  hl_queue_t* queues[2];
  int index;
  uint64_t iterations;
  uint64_t rng;
  uint64_t deallocas;
  uint64_t releases;
  uint64_t errors;
  char error[256];
} worker_t;

static uint64_t next_random(uint64_t* state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return x;
}

static void worker_error(worker_t* w, const char* what, hl_status_t st) {
  if (!w->errors++) {
    char text[200];
    hl_status_format(st, text, sizeof(text));
    snprintf(w->error, sizeof(w->error), "thread %d: %s: %s", w->index, what,
             text);
  }
  hl_status_free(st);
}

static hl_fence_t* fence1(hl_semaphore_t* s, uint64_t v) {
  hl_fence_t* f = NULL;
  if (hl_fence_create(hl_allocator_system(), &f)) abort();
  if (hl_fence_insert(f, s, v)) abort();
  return f;
}

// Waits for |s| to reach |v| (the read into |host|), then checks that every
// word of |size| bytes holds |pattern| (iteration |i|).
static void wait_and_verify(worker_t* w, hl_semaphore_t* s, uint64_t v,
                            uint64_t i, const uint32_t* host, uint64_t size,
                            uint32_t pattern) {
  hl_status_t st = hl_semaphore_wait(s, v, hl_deadline_after(20000 * MEM_MS));
  if (st) {
    worker_error(w, "waiting for the read", st);
    return;
  }
  for (uint64_t k = 0; k < size / 4; ++k) {
    if (host[k] != pattern) {
      w->errors++;
      snprintf(w->error, sizeof(w->error),
               "thread %d iteration %llu: word %llu is %08x, want %08x",
               w->index, (unsigned long long)i, (unsigned long long)k, host[k],
               pattern);
      return;
    }
  }
}

#define SUBMIT(w, what, expr)            \
  do {                                   \
    hl_status_t st_ = (expr);            \
    if (st_) worker_error(w, what, st_); \
  } while (0)

static int worker_main(void* arg) {
  worker_t* w = (worker_t*)arg;
  hl_semaphore_t* s = NULL;
  if (hl_semaphore_create(0, hl_allocator_system(), &s)) abort();
  uint64_t v = 0;
  uint32_t* host = malloc(64 * 1024);
  for (uint64_t i = 0; i < w->iterations && !w->errors; ++i) {
    uint64_t r = next_random(&w->rng);
    uint64_t size = 4 * (1 + next_random(&w->rng) % (16 * 1024));
    hl_queue_t* qa = w->queues[r & 1];
    hl_queue_t* qb = w->queues[(r >> 1) & 1];
    hl_queue_t* qc = w->queues[(r >> 2) & 1];
    uint32_t pattern = (uint32_t)(w->index << 24) ^ (uint32_t)i;

    // Two buffers: a is filled, copied into b, b is read back.
    hl_fence_t* sig = fence1(s, v + 1);
    hl_buffer_t* a = NULL;
    SUBMIT(w, "alloca a", hl_queue_alloca(qa, NULL, sig, size, 0, &a));
    hl_fence_release(sig);
    // Timeline values are only ordered if their signals are: alloca b waits
    // for alloca a, so that reaching v + 2 implies a exists as well.
    hl_fence_t* after_a = fence1(s, v + 1);
    sig = fence1(s, v + 2);
    hl_buffer_t* b = NULL;
    SUBMIT(w, "alloca b", hl_queue_alloca(qb, after_a, sig, size, 0, &b));
    hl_fence_release(after_a);
    hl_fence_release(sig);
    if (!a || !b) {
      hl_buffer_release(a);
      hl_buffer_release(b);
      break;
    }
    hl_fence_t* wait = fence1(s, v + 2);
    sig = fence1(s, v + 3);
    SUBMIT(w, "fill", hl_queue_fill(qb, wait, sig, a, 0, size, pattern));
    hl_fence_release(wait);
    hl_fence_release(sig);
    wait = fence1(s, v + 3);
    sig = fence1(s, v + 4);
    SUBMIT(w, "copy", hl_queue_copy(qc, wait, sig, a, 0, b, 0, size));
    hl_fence_release(wait);
    hl_fence_release(sig);
    // a is done: free it now in queue order (its use fence orders it after
    // the copy), or drop it to the fallback.
    if (r & 8) {
      SUBMIT(w, "dealloca a",
             hl_queue_dealloca(w->queues[(r >> 4) & 1], NULL, NULL, a));
      ++w->deallocas;
    } else {
      ++w->releases;
    }
    hl_buffer_release(a);
    memset(host, 0, size);
    wait = fence1(s, v + 4);
    sig = fence1(s, v + 5);
    SUBMIT(w, "read", hl_queue_read(qa, wait, sig, b, 0, host, size));
    hl_fence_release(wait);
    hl_fence_release(sig);
    v += 5;
    wait_and_verify(w, s, v, i, host, size, pattern);
    if (r & 32) {
      SUBMIT(w, "dealloca b", hl_queue_dealloca(qc, NULL, NULL, b));
      ++w->deallocas;
    } else {
      ++w->releases;
    }
    hl_buffer_release(b);
    if (r & 64) thrd_yield();
  }
  free(host);
  hl_semaphore_release(s);
  return 0;
}

// |delay_us|: the streams' injected random delays (0: none, so allocas and
// deallocas on a quiet queue run at once with hipline's suballocator).
static void stress_threads_queues(uint32_t delay_us) {
  hl_faults_t delays = {.stream_delay_us = delay_us, .seed = 7};
  hl_faults_t saved = hl_faults_set(&delays);

  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* queues[2] = {hl_test_queue_create(d), hl_test_queue_create(d)};
  worker_t workers[THREADS];
  thrd_t threads[THREADS];
  uint64_t iterations = hl_test_scale(150, 3);
  for (int t = 0; t < THREADS; ++t) {
    workers[t] = (worker_t){.device = d,
                            .queues = {queues[0], queues[1]},
                            .index = t,
                            .iterations = iterations,
                            .rng = 0x9E3779B97F4A7C15ull * (uint64_t)(t + 1)};
    assert_int_equal(thrd_create(&threads[t], worker_main, &workers[t]),
                     thrd_success);
  }
  uint64_t deallocas = 0, releases = 0;
  for (int t = 0; t < THREADS; ++t) {
    thrd_join(threads[t], NULL);
    if (workers[t].errors) fail_msg("%s", workers[t].error);
    deallocas += workers[t].deallocas;
    releases += workers[t].releases;
  }
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  bool balanced = hl_test_poll_bytes_in_use(d, 0, 5000);
  hl_faults_set(&saved);

  hl_memory_stats_t st = hl_test_memory_stats(d);
  // Op releases and frontier frees finish on the completion thread.
  hl_time_t deadline = hl_deadline_after(5000 * MEM_MS);
  while (
      (st.deallocas < deallocas || st.fallback_releases_frontier < releases) &&
      hl_time_now() < deadline) {
    hl_test_sleep_ms(2);
    st = hl_test_memory_stats(d);
  }
  print_message(
      "stress: %llu allocas, %llu deallocas, %llu fallback, peak "
      "in use %llu, reserved %llu\n",
      (unsigned long long)st.allocas, (unsigned long long)st.deallocas,
      (unsigned long long)st.fallback_releases_frontier,
      (unsigned long long)st.bytes_in_use_peak,
      (unsigned long long)st.bytes_reserved);
  assert_true(balanced);
  assert_int_equal(st.bytes_in_use, 0);
  assert_int_equal(st.allocas, THREADS * iterations * 2);
  assert_int_equal(st.allocas, deallocas + releases);
  assert_int_equal(st.deallocas, deallocas);
  assert_int_equal(st.fallback_releases_frontier, releases);
  assert_int_equal(st.deallocas_cancelled, 0);
  assert_int_equal(st.ooms, 0);
  assert_int_equal(st.use_after_free, 0);
  hl_memory_stats_t s0 = mem_queue_stats(queues[0]);
  hl_memory_stats_t s1 = mem_queue_stats(queues[1]);
  assert_int_equal(s0.bytes_in_use + s1.bytes_in_use, 0);
  assert_int_equal(s0.allocas + s1.allocas, st.allocas);
  HL_ASSERT_OK(hl_queue_status(queues[0]));
  HL_ASSERT_OK(hl_queue_status(queues[1]));
  // Everything cached can be given back.
  HL_ASSERT_OK(hl_device_trim(d, 0));
  assert_int_equal(hl_test_memory_stats(d).bytes_reserved, 0);
  hl_queue_release(queues[0]);
  hl_queue_release(queues[1]);
  hl_device_release(d);
}

// Each thread allocas on its own queue (quiet between its steps, so with
// hipline's suballocator the alloca and a dealloca there run at once),
// sometimes fills and reads the buffer back, and deallocas it on its own
// queue or on the next thread's: the pool is shared, blocks move between
// queues, and frees on another queue wait for the owner's uses.
static int pair_worker_main(void* arg) {
  worker_t* w = (worker_t*)arg;
  hl_semaphore_t* s = NULL;
  if (hl_semaphore_create(0, hl_allocator_system(), &s)) abort();
  uint64_t v = 0;
  uint32_t* host = malloc(64 * 1024);
  for (uint64_t i = 0; i < w->iterations && !w->errors; ++i) {
    uint64_t r = next_random(&w->rng);
    uint64_t size = 4 * (1 + next_random(&w->rng) % (16 * 1024));
    uint32_t pattern = (uint32_t)(w->index << 24) ^ (uint32_t)i;
    hl_buffer_t* b = NULL;
    SUBMIT(w, "alloca", hl_queue_alloca(w->queues[0], NULL, NULL, size, 0, &b));
    if (!b) break;
    if (r & 1) {
      hl_fence_t* sig = fence1(s, v + 1);
      SUBMIT(w, "fill",
             hl_queue_fill(w->queues[0], NULL, sig, b, 0, size, pattern));
      hl_fence_release(sig);
      hl_fence_t* wait = fence1(s, v + 1);
      sig = fence1(s, v + 2);
      SUBMIT(w, "read",
             hl_queue_read(w->queues[0], wait, sig, b, 0, host, size));
      hl_fence_release(wait);
      hl_fence_release(sig);
      v += 2;
      wait_and_verify(w, s, v, i, host, size, pattern);
    }
    SUBMIT(w, "dealloca",
           hl_queue_dealloca(w->queues[(r >> 1) & 1], NULL, NULL, b));
    ++w->deallocas;
    hl_buffer_release(b);
    if (r & 64) thrd_yield();
  }
  free(host);
  hl_semaphore_release(s);
  return 0;
}

static void test_stress_pairs_own_queues(void** state) {
  (void)state;
  hl_faults_t none = {0};
  hl_faults_t saved = hl_faults_set(&none);
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* queues[THREADS];
  for (int t = 0; t < THREADS; ++t) queues[t] = hl_test_queue_create(d);
  worker_t workers[THREADS];
  thrd_t threads[THREADS];
  uint64_t iterations = hl_test_scale(2000, 20);
  for (int t = 0; t < THREADS; ++t) {
    workers[t] = (worker_t){.device = d,
                            .queues = {queues[t], queues[(t + 1) % THREADS]},
                            .index = t,
                            .iterations = iterations,
                            .rng = 0xD1B54A32D192ED03ull * (uint64_t)(t + 1)};
    assert_int_equal(thrd_create(&threads[t], pair_worker_main, &workers[t]),
                     thrd_success);
  }
  uint64_t deallocas = 0;
  for (int t = 0; t < THREADS; ++t) {
    thrd_join(threads[t], NULL);
    if (workers[t].errors) fail_msg("%s", workers[t].error);
    deallocas += workers[t].deallocas;
  }
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  assert_true(hl_test_poll_bytes_in_use(d, 0, 5000));
  hl_faults_set(&saved);
  hl_memory_stats_t st = hl_test_memory_stats(d);
  hl_time_t deadline = hl_deadline_after(5000 * MEM_MS);
  while (st.deallocas < deallocas && hl_time_now() < deadline) {
    hl_test_sleep_ms(2);
    st = hl_test_memory_stats(d);
  }
  print_message("pairs: %llu allocas, %llu deallocas, %llu block reuses\n",
                (unsigned long long)st.allocas,
                (unsigned long long)st.deallocas,
                (unsigned long long)st.pool_block_reuses);
  assert_int_equal(st.allocas, THREADS * iterations);
  assert_int_equal(st.deallocas, deallocas);
  assert_int_equal(st.bytes_in_use, 0);
  assert_int_equal(st.deallocas_cancelled, 0);
  assert_int_equal(st.use_after_free, 0);
  for (int t = 0; t < THREADS; ++t) {
    HL_ASSERT_OK(hl_queue_status(queues[t]));
    hl_queue_release(queues[t]);
  }
  hl_device_release(d);
}

static void test_stress_threads_queues(void** state) {
  (void)state;
  stress_threads_queues(100);
}

static void test_stress_threads_queues_no_delays(void** state) {
  (void)state;
  stress_threads_queues(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stress_threads_queues),
      cmocka_unit_test(test_stress_threads_queues_no_delays),
      cmocka_unit_test(test_stress_pairs_own_queues),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
