// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A command buffer: a fill, an update and a copy recorded once, finalized
// (which drops the fill bytes the update overwrites), then executed as one
// submission each on two queues. See docs/command-buffers.md.
//
//   build/bin/example_command_buffer
#include <stdint.h>
#include <string.h>

#include "examples/example.h"

enum { kBytes = 4096, kHeader = 256, kFill = 0x01010101 };

int main(void) {
  hl_allocator_t host = hl_allocator_system();
  hl_device_t* device = NULL;
  CHECK_OK(hl_device_create(NULL, host, &device));
  hl_queue_t *first = NULL, *second = NULL;
  CHECK_OK(hl_queue_create(device, &first));
  CHECK_OK(hl_queue_create(device, &second));

  hl_semaphore_t* steps = NULL;
  CHECK_OK(hl_semaphore_create(0, host, &steps));
  hl_fence_t* step[5];
  for (int i = 1; i <= 4; ++i) step[i] = example_fence(steps, (uint64_t)i);
  hl_buffer_t *staging = NULL, *output = NULL;
  CHECK_OK(hl_queue_alloca(first, NULL, NULL, kBytes, 0, &staging));
  CHECK_OK(hl_queue_alloca(first, NULL, step[1], kBytes, 0, &output));

  // Record: fill all of |staging|, write a header over its first bytes, copy
  // it to |output|. Recording copies the header bytes at once.
  uint8_t header[kHeader];
  for (int i = 0; i < kHeader; ++i) header[i] = (uint8_t)(255 - i);
  hl_command_buffer_t* cb = NULL;
  CHECK_OK(hl_command_buffer_create(device, 0, &cb));
  CHECK_OK(hl_command_buffer_fill(cb, staging, 0, kBytes, kFill));
  CHECK_OK(hl_command_buffer_update(cb, header, staging, 0, kHeader));
  CHECK_OK(hl_command_buffer_copy(cb, staging, 0, output, 0, kBytes));
  CHECK_OK(hl_command_buffer_finalize(cb));
  hl_command_buffer_info_t info;
  CHECK_OK(hl_command_buffer_query(cb, &info));
  if (info.elision_enabled) {  // HIPLINE_ELIDE_FILLS=0 turns it off.
    CHECK_TRUE(info.fills_shrunk == 1 && info.fill_bytes_elided == kHeader,
               "%llu fills shrunk, %llu bytes not filled",
               (unsigned long long)info.fills_shrunk,
               (unsigned long long)info.fill_bytes_elided);
  }

  // Run it on one queue, then (after that) on the other; read the output.
  CHECK_OK(hl_queue_execute(first, step[1], step[2], cb));
  CHECK_OK(hl_queue_execute(second, step[2], step[3], cb));
  static uint8_t out[kBytes];
  CHECK_OK(hl_queue_read(second, step[3], step[4], output, 0, out, kBytes));
  CHECK_OK(hl_fence_wait(step[4], HL_INFINITE_FUTURE));
  for (int i = 0; i < kBytes; ++i) {
    uint8_t want = i < kHeader ? (uint8_t)(255 - i) : 0x01;
    CHECK_TRUE(out[i] == want, "byte %d is %u, not %u", i, out[i], want);
  }
  hl_memory_stats_t stats;
  CHECK_OK(hl_device_memory_stats(device, &stats));
  CHECK_TRUE(stats.command_buffer_executions == 2, "%llu executions",
             (unsigned long long)stats.command_buffer_executions);
  printf(
      "%llu commands executed twice as one submission each; %llu fill "
      "bytes elided per execution\n",
      (unsigned long long)info.commands,
      (unsigned long long)info.fill_bytes_elided);

  CHECK_OK(hl_queue_dealloca(second, NULL, NULL, staging));
  CHECK_OK(hl_queue_dealloca(second, NULL, NULL, output));
  CHECK_OK(hl_device_wait_idle(device, HL_INFINITE_FUTURE));
  hl_command_buffer_release(cb);
  hl_buffer_release(staging);
  hl_buffer_release(output);
  for (int i = 1; i <= 4; ++i) hl_fence_release(step[i]);
  hl_semaphore_release(steps);
  hl_queue_release(first);
  hl_queue_release(second);
  hl_device_release(device);
  return 0;
}
