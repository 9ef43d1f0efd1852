// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The hip backend's completion threads, on the hip test runtime: one
// completer per device however many queues it has, a step thread only for
// a queue that runs host calls, a host call that blocks until another
// queue's work completes (it must not hold up that completion), and a
// chain of cross-queue waits under random stream delays. Threads are
// counted by name in /proc/self/task.

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipline/buffer.h"
#include "hipline/device.h"
#include "hipline/fence.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "tests/test_util.h"

// Threads of this process named |name| (/proc/self/task/*/comm).
static int threads_named(const char* name) {
  DIR* dir = opendir("/proc/self/task");
  assert_non_null(dir);
  int count = 0;
  struct dirent* entry;
  while ((entry = readdir(dir))) {
    if (entry->d_name[0] == '.') continue;
    char path[300];
    snprintf(path, sizeof(path), "/proc/self/task/%s/comm", entry->d_name);
    FILE* f = fopen(path, "r");
    if (!f) continue;  // The thread has just exited.
    char comm[32] = "";
    if (fgets(comm, sizeof(comm), f)) {
      comm[strcspn(comm, "\n")] = 0;
      if (strcmp(comm, name) == 0) ++count;
    }
    fclose(f);
  }
  closedir(dir);
  return count;
}

// A thread names itself once it runs: waits (at most ten seconds, a bound
// on a hang, not a timing check) until |expected| threads carry |name|,
// and returns the count then.
static int await_threads_named(const char* name, int expected) {
  int count = threads_named(name);
  for (int i = 0; i < 10000 && count != expected; ++i) {
    hl_test_sleep_ms(1);
    count = threads_named(name);
  }
  return count;
}

static hl_device_t* create_hip_device(void) {
  hl_device_options_t options;
  hl_device_options_initialize(&options);
  options.backend = HL_BACKEND_HIP;
  hl_device_t* device = NULL;
  HL_ASSERT_OK(hl_device_create(&options, hl_allocator_system(), &device));
  return device;
}

static void test_one_completer_per_device(void** state) {
  (void)state;
  int before = threads_named("hl-completer");
  hl_device_t* device = create_hip_device();
  hl_queue_t* queues[6];
  for (size_t i = 0; i < 6; ++i) {
    HL_ASSERT_OK(hl_queue_create(device, &queues[i]));
  }
  // One per device (it was one per queue: six here).
  assert_int_equal(await_threads_named("hl-completer", before + 1) - before, 1);
  assert_int_equal(threads_named("hl-host-step"), 0);
  for (size_t i = 0; i < 6; ++i) hl_queue_release(queues[i]);
  hl_device_release(device);
  assert_int_equal(threads_named("hl-completer"), before);
}

typedef struct blocking_call_t {
  hl_semaphore_t* semaphore;
  uint64_t value;
  hl_status_t waited;
} blocking_call_t;

static void blocking_call(void* user) {
  blocking_call_t* call = user;
  call->waited = hl_semaphore_wait(call->semaphore, call->value,
                                   hl_time_now() + (hl_duration_t)60e9);
}

// A host call on queue 0 that blocks until queue 1's later submission
// completes: it runs on queue 0's step thread, so the device's completer
// goes on publishing queue 1 meanwhile.
static void test_host_call_blocks_on_another_queue(void** state) {
  (void)state;
  hl_device_t* device = create_hip_device();
  hl_queue_t* q0 = NULL;
  hl_queue_t* q1 = NULL;
  HL_ASSERT_OK(hl_queue_create(device, &q0));
  HL_ASSERT_OK(hl_queue_create(device, &q1));
  hl_buffer_t* buffer = NULL;
  HL_ASSERT_OK(hl_queue_alloca(q1, NULL, NULL, 4096, 0, &buffer));
  hl_semaphore_t* s = NULL;
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &s));
  hl_fence_t* fence = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &fence));
  for (uint64_t round = 1; round <= 4; ++round) {
    blocking_call_t call = {s, round, NULL};
    HL_ASSERT_OK(hl_queue_host_call(q0, NULL, NULL, blocking_call, &call));
    // Queue 0's completion of the call's predecessor must not wait for it.
    HL_ASSERT_OK(hl_queue_fill(q1, NULL, NULL, buffer, 0, 4096, 7));
    hl_fence_clear(fence);
    HL_ASSERT_OK(hl_fence_insert(fence, s, round));
    HL_ASSERT_OK(hl_queue_fill(q1, NULL, fence, buffer, 0, 4096, 9));
    HL_ASSERT_OK(hl_queue_wait_idle(q0, HL_INFINITE_FUTURE));
    HL_ASSERT_OK(call.waited);
  }
  // Queue 0's only.
  assert_int_equal(await_threads_named("hl-host-step", 1), 1);
  HL_ASSERT_OK(hl_queue_dealloca(q1, NULL, NULL, buffer));
  hl_buffer_release(buffer);
  HL_ASSERT_OK(hl_device_wait_idle(device, HL_INFINITE_FUTURE));
  hl_fence_release(fence);
  hl_semaphore_release(s);
  hl_queue_release(q0);
  hl_queue_release(q1);
  assert_int_equal(threads_named("hl-host-step"), 0);
  hl_device_release(device);
}

// Chains across four queues (each step waits on the previous queue's
// signal, a device-side wait whose producer the same completer publishes),
// with random stream delays from the test runtime: every value is reached
// in order and nothing hangs.
static void test_cross_queue_chains(void** state) {
  (void)state;
  hl_device_t* device = create_hip_device();
  enum { kQueues = 4, kSteps = 200 };
  hl_queue_t* queues[kQueues];
  hl_buffer_t* buffers[kQueues];
  for (size_t i = 0; i < kQueues; ++i) {
    HL_ASSERT_OK(hl_queue_create(device, &queues[i]));
    HL_ASSERT_OK(hl_queue_alloca(queues[i], NULL, NULL, 4096, 0, &buffers[i]));
  }
  hl_semaphore_t* s = NULL;
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &s));
  hl_fence_t* wait = NULL;
  hl_fence_t* signal = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &wait));
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &signal));
  for (uint64_t v = 1; v <= kSteps; ++v) {
    size_t q = (size_t)(v % kQueues);
    hl_fence_clear(wait);
    hl_fence_clear(signal);
    if (v > 1) HL_ASSERT_OK(hl_fence_insert(wait, s, v - 1));
    HL_ASSERT_OK(hl_fence_insert(signal, s, v));
    HL_ASSERT_OK(hl_queue_fill(queues[q], wait, signal, buffers[q], 0, 4096,
                               (uint32_t)v));
  }
  HL_ASSERT_OK(hl_semaphore_wait(s, kSteps, HL_INFINITE_FUTURE));
  uint64_t value = 0;
  HL_ASSERT_OK(hl_semaphore_query(s, &value));
  assert_int_equal(value, kSteps);
  for (size_t i = 0; i < kQueues; ++i) {
    HL_ASSERT_OK(hl_queue_dealloca(queues[i], NULL, NULL, buffers[i]));
    hl_buffer_release(buffers[i]);
  }
  HL_ASSERT_OK(hl_device_wait_idle(device, HL_INFINITE_FUTURE));
  hl_fence_release(wait);
  hl_fence_release(signal);
  hl_semaphore_release(s);
  for (size_t i = 0; i < kQueues; ++i) hl_queue_release(queues[i]);
  hl_device_release(device);
}

// HIPLINE_COMPLETER with a value it does not know fails the first queue's
// creation with a status that names the variable.
static void test_bad_completer_mode(void** state) {
  (void)state;
  hl_device_t* device = create_hip_device();
  setenv("HIPLINE_COMPLETER", "sometimes", 1);
  hl_queue_t* queue = NULL;
  hl_status_t st = hl_queue_create(device, &queue);
  unsetenv("HIPLINE_COMPLETER");
  assert_int_equal(hl_status_code(st), HL_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hl_status_message(st), "HIPLINE_COMPLETER"));
  hl_status_free(st);
  assert_null(queue);
  hl_device_release(device);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_completer_mode),
      cmocka_unit_test(test_one_completer_per_device),
      cmocka_unit_test(test_host_call_blocks_on_another_queue),
      cmocka_unit_test(test_cross_queue_chains),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
