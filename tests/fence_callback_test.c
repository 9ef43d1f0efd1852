// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hl_fence_call_when_reached: the public fence callback that event loops
// (the Python binding's asyncio awaits) use instead of a thread per wait.
#include <stdatomic.h>
#include <threads.h>

#include "hipline/hipline.h"
#include "tests/test_util.h"

typedef struct record_t {
  mtx_t mu;
  cnd_t cv;
  int calls;
  hl_status_code_t code;
  char message[256];
  thrd_t thread;
} record_t;

static void record_init(record_t* r) {
  memset(r, 0, sizeof(*r));
  mtx_init(&r->mu, mtx_plain);
  cnd_init(&r->cv);
}

static void record_deinit(record_t* r) {
  mtx_destroy(&r->mu);
  cnd_destroy(&r->cv);
}

static void on_reached(void* user, hl_status_t status) {
  record_t* r = (record_t*)user;
  mtx_lock(&r->mu);
  r->calls++;
  r->code = hl_status_code(status);
  snprintf(r->message, sizeof(r->message), "%s", hl_status_message(status));
  r->thread = thrd_current();
  cnd_broadcast(&r->cv);
  mtx_unlock(&r->mu);
}

// Waits (bounded by 60 s; a bug fails instead of hanging) for |calls|.
static int record_wait(record_t* r, int calls) {
  struct timespec until;
  timespec_get(&until, TIME_UTC);
  until.tv_sec += 60;
  mtx_lock(&r->mu);
  while (r->calls < calls) {
    if (cnd_timedwait(&r->cv, &r->mu, &until) == thrd_timedout) break;
  }
  int n = r->calls;
  mtx_unlock(&r->mu);
  return n;
}

static void test_bad_input(void** state) {
  hl_device_t* device;
  hl_test_host_device(&device);
  record_t r;
  record_init(&r);
  HL_ASSERT_STATUS(hl_fence_call_when_reached(NULL, NULL, on_reached, &r),
                   INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_fence_call_when_reached(NULL, device, NULL, &r),
                   INVALID_ARGUMENT);
  assert_int_equal(r.calls, 0);
  record_deinit(&r);
  hl_device_release(device);
}

static void test_empty_fence_fires_on_another_thread(void** state) {
  hl_device_t* device;
  hl_test_host_device(&device);
  record_t r;
  record_init(&r);
  HL_ASSERT_OK(hl_fence_call_when_reached(NULL, device, on_reached, &r));
  assert_int_equal(record_wait(&r, 1), 1);
  assert_int_equal(r.code, HL_STATUS_OK);
  assert_false(thrd_equal(r.thread, thrd_current()));
  record_deinit(&r);
  hl_device_release(device);
}

static void test_fires_once_when_every_pair_is_reached(void** state) {
  hl_device_t* device;
  hl_test_host_device(&device);
  hl_semaphore_t *a, *b;
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &a));
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &b));
  hl_fence_t* fence;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &fence));
  HL_ASSERT_OK(hl_fence_insert(fence, a, 2));
  HL_ASSERT_OK(hl_fence_insert(fence, b, 1));
  record_t r;
  record_init(&r);
  HL_ASSERT_OK(hl_fence_call_when_reached(fence, device, on_reached, &r));
  hl_fence_release(fence);  // The pairs were copied.
  HL_ASSERT_OK(hl_semaphore_signal(a, 1));
  HL_ASSERT_OK(hl_semaphore_signal(b, 1));
  // Not yet: a is at 1 of 2. Only a signal can make the callback run, so
  // this does not depend on timing.
  mtx_lock(&r.mu);
  assert_int_equal(r.calls, 0);
  mtx_unlock(&r.mu);
  HL_ASSERT_OK(hl_semaphore_signal(a, 2));
  assert_int_equal(record_wait(&r, 1), 1);
  assert_int_equal(r.code, HL_STATUS_OK);
  hl_semaphore_release(a);
  hl_semaphore_release(b);
  record_deinit(&r);
  hl_device_release(device);
}

static void test_failure_is_reported(void** state) {
  hl_device_t* device;
  hl_test_host_device(&device);
  hl_semaphore_t* s;
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &s));
  hl_fence_t* fence;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &fence));
  HL_ASSERT_OK(hl_fence_insert(fence, s, 1));
  record_t r;
  record_init(&r);
  HL_ASSERT_OK(hl_fence_call_when_reached(fence, device, on_reached, &r));
  hl_semaphore_fail(s, HL_MAKE_STATUS(HL_STATUS_DATA_LOSS, "lost it"));
  assert_int_equal(record_wait(&r, 1), 1);
  assert_int_equal(r.code, HL_STATUS_DATA_LOSS);
  assert_non_null(strstr(r.message, "lost it"));
  hl_fence_release(fence);
  hl_semaphore_release(s);
  record_deinit(&r);
  hl_device_release(device);
}

// Threads register callbacks while another signals: every callback fires
// exactly once (TSan checks the hand-off).
enum { kThreads = 4, kPerThread = 64 };
typedef struct race_t {
  hl_device_t* device;
  hl_semaphore_t* sem;
  record_t* records;
} race_t;

static int race_register(void* arg) {
  race_t* race = (race_t*)arg;
  for (int i = 0; i < kPerThread; ++i) {
    hl_fence_t* fence;
    HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &fence));
    HL_ASSERT_OK(hl_fence_insert(fence, race->sem, (uint64_t)i + 1));
    HL_ASSERT_OK(hl_fence_call_when_reached(fence, race->device, on_reached,
                                            &race->records[i]));
    hl_fence_release(fence);
  }
  return 0;
}

static void test_concurrent_registration(void** state) {
  hl_device_t* device;
  hl_test_host_device(&device);
  hl_semaphore_t* sem;
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &sem));
  static record_t records[kThreads][kPerThread];
  race_t races[kThreads];
  thrd_t threads[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) record_init(&records[t][i]);
    races[t] = (race_t){device, sem, records[t]};
    assert_int_equal(thrd_create(&threads[t], race_register, &races[t]),
                     thrd_success);
  }
  for (uint64_t v = 1; v <= kPerThread; ++v) {
    HL_ASSERT_OK(hl_semaphore_signal(sem, v));
  }
  for (int t = 0; t < kThreads; ++t) thrd_join(threads[t], NULL);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      assert_int_equal(record_wait(&records[t][i], 1), 1);
      assert_int_equal(records[t][i].code, HL_STATUS_OK);
    }
  }
  // Exactly once: nothing more arrives once the device has drained.
  HL_ASSERT_OK(hl_device_wait_idle(device, HL_INFINITE_FUTURE));
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      assert_int_equal(records[t][i].calls, 1);
      record_deinit(&records[t][i]);
    }
  }
  hl_semaphore_release(sem);
  hl_device_release(device);
}

// A failure that lands while hl_fence_call_when_reached is still
// registering: the callback must not run (and free the notification) before
// registration is over, nor may a waiter be registered after it ran. A
// helper thread fails the first semaphore after a random spin while this
// thread registers on three; the other two are signalled afterwards, which
// would run a waiter left behind. ASan reported the first as a
// heap-use-after-free in hl_fence_notify (CI, 2026-11-27).
typedef struct fail_race_t {
  hl_semaphore_t* sem;
  atomic_int go;
  unsigned spin;
} fail_race_t;

static int fail_race_main(void* arg) {
  fail_race_t* race = (fail_race_t*)arg;
  while (!atomic_load(&race->go)) {
  }
  for (volatile unsigned i = 0; i < race->spin; ++i) {
  }
  hl_status_free(
      hl_semaphore_fail(race->sem, HL_MAKE_STATUS(HL_STATUS_ABORTED, "raced")));
  return 0;
}

static void test_failure_races_registration(void** state) {
  (void)state;
  hl_device_t* device;
  hl_test_host_device(&device);
  const int rounds = hl_test_scale(3000, 10);
  uint32_t seed = 12345;
  for (int round = 0; round < rounds; ++round) {
    hl_semaphore_t* sems[3];
    hl_fence_t* fence = NULL;
    HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &fence));
    for (int i = 0; i < 3; ++i) {
      HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &sems[i]));
      HL_ASSERT_OK(hl_fence_insert(fence, sems[i], 1));
    }
    seed = seed * 1103515245u + 12345u;
    fail_race_t race = {sems[0], 0, (seed >> 16) % 4000};
    thrd_t helper;
    assert_int_equal(thrd_create(&helper, fail_race_main, &race), thrd_success);
    record_t record;
    record_init(&record);
    atomic_store(&race.go, 1);
    HL_ASSERT_OK(
        hl_fence_call_when_reached(fence, device, on_reached, &record));
    thrd_join(helper, NULL);
    assert_int_equal(record_wait(&record, 1), 1);
    assert_int_equal(record.code, HL_STATUS_ABORTED);
    HL_ASSERT_OK(hl_semaphore_signal(sems[1], 1));
    HL_ASSERT_OK(hl_semaphore_signal(sems[2], 1));
    HL_ASSERT_OK(hl_device_wait_idle(device, HL_INFINITE_FUTURE));
    assert_int_equal(record.calls, 1);
    record_deinit(&record);
    hl_fence_release(fence);
    for (int i = 0; i < 3; ++i) hl_semaphore_release(sems[i]);
  }
  hl_device_release(device);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_empty_fence_fires_on_another_thread),
      cmocka_unit_test(test_fires_once_when_every_pair_is_reached),
      cmocka_unit_test(test_failure_is_reported),
      cmocka_unit_test(test_concurrent_registration),
      cmocka_unit_test(test_failure_races_registration),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
