// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Queue-ordered memory on two queues: queue A allocates a buffer and fills
// it, queue B copies it into a buffer of its own, reads that back and frees
// both. Nothing here waits on the host until the read: each step waits on
// the previous one's semaphore value, and each dealloca is ordered after
// every recorded use of its buffer (on any queue) without naming them.
//
//   build/bin/example_alloca_two_queues
#include <stdint.h>
#include <string.h>

#include "examples/example.h"

enum { kBytes = 1 << 20, kPattern = 0x2A2A2A2A };

int main(void) {
  hl_allocator_t host = hl_allocator_system();
  hl_device_t* device = NULL;  // HIPLINE_BACKEND decides: hip or host.
  CHECK_OK(hl_device_create(NULL, host, &device));
  hl_queue_t *a = NULL, *b = NULL;
  CHECK_OK(hl_queue_create(device, &a));
  CHECK_OK(hl_queue_create(device, &b));

  // One semaphore counts the steps; step N signals value N.
  hl_semaphore_t* steps = NULL;
  CHECK_OK(hl_semaphore_create(0, host, &steps));
  hl_fence_t* step[6];
  for (int i = 1; i <= 5; ++i) step[i] = example_fence(steps, (uint64_t)i);

  hl_buffer_t *source = NULL, *target = NULL;
  CHECK_OK(hl_queue_alloca(a, NULL, step[1], kBytes, 0, &source));
  CHECK_OK(hl_queue_fill(a, step[1], step[2], source, 0, kBytes, kPattern));
  CHECK_OK(hl_queue_alloca(b, step[2], step[3], kBytes, 0, &target));
  CHECK_OK(hl_queue_copy(b, step[3], step[4], source, 0, target, 0, kBytes));
  uint32_t* host_copy = malloc(kBytes);
  CHECK_TRUE(host_copy != NULL, "out of host memory");
  CHECK_OK(hl_queue_read(b, step[4], step[5], target, 0, host_copy, kBytes));
  // Freed on queue B after the fill (A), the copy and the read (B).
  CHECK_OK(hl_queue_dealloca(b, NULL, NULL, source));
  CHECK_OK(hl_queue_dealloca(b, NULL, NULL, target));

  CHECK_OK(hl_fence_wait(step[5], HL_INFINITE_FUTURE));
  for (size_t i = 0; i < kBytes / sizeof(uint32_t); ++i) {
    CHECK_TRUE(host_copy[i] == kPattern, "word %zu is 0x%08x", i, host_copy[i]);
  }
  CHECK_OK(hl_queue_wait_idle(a, HL_INFINITE_FUTURE));
  CHECK_OK(hl_queue_wait_idle(b, HL_INFINITE_FUTURE));
  CHECK_TRUE(hl_buffer_is_freed(source) && hl_buffer_is_freed(target),
             "a dealloca did not free its buffer");
  hl_memory_stats_t stats;
  CHECK_OK(hl_device_memory_stats(device, &stats));
  CHECK_TRUE(stats.bytes_in_use == 0 && stats.deallocas == 2,
             "%llu bytes in use, %llu deallocas",
             (unsigned long long)stats.bytes_in_use,
             (unsigned long long)stats.deallocas);

  printf(
      "filled on queue %u, copied and read on queue %u: %d bytes of 0x%08x; "
      "both buffers freed in queue order\n",
      hl_queue_id(a), hl_queue_id(b), kBytes, kPattern);
  free(host_copy);
  hl_buffer_release(source);
  hl_buffer_release(target);
  for (int i = 1; i <= 5; ++i) hl_fence_release(step[i]);
  hl_semaphore_release(steps);
  hl_queue_release(a);
  hl_queue_release(b);
  hl_device_release(device);
  return 0;
}
