// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The loops that tools/count-atomics.sh counts (docs/benchmarks.md): N
// alloca+dealloca pairs of 4 KiB on one queue (`pair`), or N empty
// submissions with one reached wait and one signal (`barrier`), with a
// wait_idle every 1,024. tools/count-atomics.sh links it statically and
// counts what it executes under callgrind.
//
//   loop pair|barrier N
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipline/buffer.h"
#include "hipline/device.h"
#include "hipline/fence.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "hipline/time.h"

static void check(hl_status_t st, const char* what) {
  if (!st) return;
  fprintf(stderr, "loop: %s: %s\n", what, hl_status_message(st));
  hl_status_free(st);
  exit(1);
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "pair") && strcmp(argv[1], "barrier"))) {
    fprintf(stderr, "usage: %s pair|barrier N\n", argv[0]);
    return 2;
  }
  bool pairs = !strcmp(argv[1], "pair");
  long n = atol(argv[2]);
  hl_device_options_t options;
  hl_device_options_initialize(&options);
  hl_device_t* device = NULL;
  check(hl_device_create(&options, hl_allocator_system(), &device), "device");
  hl_queue_t* queue = NULL;
  check(hl_queue_create(device, &queue), "queue");
  hl_semaphore_t* reached = NULL;
  hl_semaphore_t* out = NULL;
  check(hl_semaphore_create(1, hl_allocator_system(), &reached), "semaphore");
  check(hl_semaphore_create(0, hl_allocator_system(), &out), "semaphore");
  hl_fence_t* wait = NULL;
  hl_fence_t* signal = NULL;
  check(hl_fence_create(hl_allocator_system(), &wait), "fence");
  check(hl_fence_create(hl_allocator_system(), &signal), "fence");
  check(hl_fence_insert(wait, reached, 1), "fence");
  for (long i = 0; i < n; ++i) {
    if (pairs) {
      hl_buffer_t* buffer = NULL;
      check(hl_queue_alloca(queue, NULL, NULL, 4096, 0, &buffer), "alloca");
      check(hl_queue_dealloca(queue, NULL, NULL, buffer), "dealloca");
      hl_buffer_release(buffer);
    } else {
      hl_fence_clear(signal);
      check(hl_fence_insert(signal, out, (uint64_t)i + 1), "fence");
      check(hl_queue_barrier(queue, wait, signal), "barrier");
    }
    if ((i & 1023) == 1023) {
      check(hl_queue_wait_idle(queue, hl_deadline_after(60000000000LL)),
            "wait_idle");
    }
  }
  check(hl_queue_wait_idle(queue, hl_deadline_after(60000000000LL)),
        "wait_idle");
  hl_fence_release(wait);
  hl_fence_release(signal);
  hl_semaphore_release(reached);
  hl_semaphore_release(out);
  hl_queue_release(queue);
  hl_device_release(device);
  return 0;
}
