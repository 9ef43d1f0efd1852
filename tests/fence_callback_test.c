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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_empty_fence_fires_on_another_thread),
      cmocka_unit_test(test_fires_once_when_every_pair_is_reached),
      cmocka_unit_test(test_failure_is_reported),
      cmocka_unit_test(test_concurrent_registration),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
