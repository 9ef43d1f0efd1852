// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Lazy device timepoints on the hip backend (runtime/timeline/event_pool.c,
// hl_shared_event_materialize): a submission records no event at issue, and
// a queue that waits on one of its signals later records one on the
// producer's stream then. That event must never mark a point before the
// producer's work: here the producer's stream runs slowly (the test runtime's
// random delays), so a consumer whose wait were satisfied early would copy
// data the producer had not written yet. Runs on the hip test runtime.

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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

enum { kBytes = 4096, kRounds = 64 };

static hl_fence_t* fence_of(hl_semaphore_t* s, uint64_t value) {
  hl_fence_t* fence = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &fence));
  HL_ASSERT_OK(hl_fence_insert(fence, s, value));
  return fence;
}

// Round r: q0 fills A with r (its signal S@r+1 gets a lazy timepoint); q1,
// waiting for S@r+1, copies A to B and fills A's neighbour C; the host reads
// B back after q1's signal. Every read sees r.
static void test_late_waiter_never_early(void** state) {
  (void)state;
  hl_device_options_t options;
  hl_device_options_initialize(&options);
  options.backend = HL_BACKEND_HIP;
  hl_device_t* device = NULL;
  HL_ASSERT_OK(hl_device_create(&options, hl_allocator_system(), &device));
  hl_queue_t* q0 = NULL;
  hl_queue_t* q1 = NULL;
  HL_ASSERT_OK(hl_queue_create(device, &q0));
  HL_ASSERT_OK(hl_queue_create(device, &q1));
  hl_buffer_t* a = NULL;
  hl_buffer_t* b = NULL;
  HL_ASSERT_OK(hl_queue_alloca(q0, NULL, NULL, kBytes, 0, &a));
  HL_ASSERT_OK(hl_queue_alloca(q0, NULL, NULL, kBytes, 0, &b));
  HL_ASSERT_OK(hl_device_wait_idle(device, HL_INFINITE_FUTURE));
  hl_semaphore_t* produced = NULL;
  hl_semaphore_t* consumed = NULL;
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &produced));
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &consumed));
  uint32_t* host = calloc(kBytes / 4, sizeof(uint32_t));
  assert_non_null(host);
  for (uint32_t r = 0; r < kRounds; ++r) {
    hl_fence_t* p = fence_of(produced, r + 1);
    hl_fence_t* c = fence_of(consumed, r + 1);
    // Several fills before the signalled one keep q0's stream busy, so q1
    // issues its wait while q0 has not run the fill yet.
    for (int k = 0; k < 4; ++k) {
      HL_ASSERT_OK(hl_queue_fill(q0, NULL, NULL, a, 0, kBytes, 0xDEAD0000u));
    }
    HL_ASSERT_OK(hl_queue_fill(q0, NULL, p, a, 0, kBytes, r));
    HL_ASSERT_OK(hl_queue_copy(q1, p, NULL, a, 0, b, 0, kBytes));
    HL_ASSERT_OK(hl_queue_read(q1, NULL, c, b, 0, host, kBytes));
    HL_ASSERT_OK(hl_semaphore_wait(consumed, r + 1, HL_INFINITE_FUTURE));
    for (size_t i = 0; i < kBytes / 4; ++i) {
      if (host[i] != r) {
        fail_msg(
            "round %u: word %zu is 0x%08x, expected %u (the copy ran "
            "before the fill it waited for)",
            r, i, host[i], r);
      }
    }
    hl_fence_release(p);
    hl_fence_release(c);
  }
  HL_ASSERT_OK(hl_device_wait_idle(device, HL_INFINITE_FUTURE));
  free(host);
  hl_semaphore_release(produced);
  hl_semaphore_release(consumed);
  HL_ASSERT_OK(hl_queue_dealloca(q0, NULL, NULL, a));
  HL_ASSERT_OK(hl_queue_dealloca(q0, NULL, NULL, b));
  HL_ASSERT_OK(hl_device_wait_idle(device, HL_INFINITE_FUTURE));
  hl_buffer_release(a);
  hl_buffer_release(b);
  hl_queue_release(q0);
  hl_queue_release(q1);
  hl_device_release(device);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_late_waiter_never_early),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
