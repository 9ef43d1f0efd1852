// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The README's first program, verbatim (example.readme checks that the two
// agree): allocate in queue order, fill, read back, free.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hipline/hipline.h"

static void check(hl_status_t status) {
  if (!status) return;
  hl_status_fprint(stderr, "hipline: ", status);
  exit(1);
}

// A fence that names one value of |semaphore|.
static hl_fence_t* at(hl_semaphore_t* semaphore, uint64_t value) {
  hl_fence_t* fence;
  check(hl_fence_create(hl_allocator_system(), &fence));
  check(hl_fence_insert(fence, semaphore, value));
  return fence;
}

int main(void) {
  hl_device_t* device;  // HIPLINE_BACKEND decides: hip on a GPU, else host.
  hl_queue_t* queue;
  hl_semaphore_t* steps;
  check(hl_device_create(NULL, hl_allocator_system(), &device));
  check(hl_queue_create(device, &queue));
  check(hl_semaphore_create(0, hl_allocator_system(), &steps));
  hl_fence_t* allocated = at(steps, 1);
  hl_fence_t* filled = at(steps, 2);
  hl_fence_t* read = at(steps, 3);

  uint32_t words[256];
  hl_buffer_t* buffer;
  // Each call returns at once; the steps run in order on the device.
  check(hl_queue_alloca(queue, NULL, allocated, sizeof(words), 0, &buffer));
  check(hl_queue_fill(queue, allocated, filled, buffer, 0, sizeof(words), 42));
  check(hl_queue_read(queue, filled, read, buffer, 0, words, sizeof(words)));
  check(hl_queue_dealloca(queue, NULL, NULL, buffer));  // After every use.
  check(hl_fence_wait(read, HL_INFINITE_FUTURE));       // The only host wait.

  for (size_t i = 0; i < 256; ++i) {
    if (words[i] != 42) {
      fprintf(stderr, "word %zu is %u, not 42\n", i, words[i]);
      return 1;
    }
  }
  printf("read back 256 words of 42 on queue %u\n", hl_queue_id(queue));
  hl_buffer_release(buffer);
  hl_fence_release(allocated);
  hl_fence_release(filled);
  hl_fence_release(read);
  hl_semaphore_release(steps);
  check(hl_queue_wait_idle(queue, HL_INFINITE_FUTURE));
  hl_queue_release(queue);
  hl_device_release(device);
  return 0;
}
