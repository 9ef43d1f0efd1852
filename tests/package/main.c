// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Consumer of an installed hipline (or one built with add_subdirectory):
// probes the host backend through the public API, then creates a device and
// a queue on it, allocates, fills, reads back and frees a buffer, and prints
// what it found. Exits 0 when all of that worked, 1 otherwise.
#include <stdio.h>

#include "hipline/buffer.h"
#include "hipline/device.h"
#include "hipline/export.h"
#include "hipline/queue.h"
#include "hipline/status.h"
#include "hipline/time.h"

static int fail(const char* what, hl_status_t status) {
  fprintf(stderr, "hipline-consumer: %s: ", what);
  hl_status_fprint(stderr, "", status);
  hl_status_free(status);
  return 1;
}

// Allocates 256 bytes on a queue of a host device, fills them with a
// pattern, reads them back and frees them.
static int use_device(void) {
  hl_device_options_t options;
  hl_device_options_initialize(&options);
  options.backend = HL_BACKEND_HOST;
  hl_device_t* device = NULL;
  hl_status_t st = hl_device_create(&options, hl_allocator_system(), &device);
  if (st) return fail("hl_device_create", st);
  hl_queue_t* queue = NULL;
  hl_buffer_t* buffer = NULL;
  uint32_t words[64] = {0};
  st = hl_queue_create(device, &queue);
  if (!st) st = hl_queue_alloca(queue, NULL, NULL, sizeof(words), 0, &buffer);
  if (!st) {
    st =
        hl_queue_fill(queue, NULL, NULL, buffer, 0, sizeof(words), 0x600DF00Du);
  }
  if (!st)
    st = hl_queue_read(queue, NULL, NULL, buffer, 0, words, sizeof(words));
  if (!st) st = hl_queue_dealloca(queue, NULL, NULL, buffer);
  if (!st) st = hl_queue_wait_idle(queue, hl_deadline_after(30000000000ll));
  hl_buffer_release(buffer);
  hl_queue_release(queue);
  hl_device_release(device);
  if (st) return fail("using a host device", st);
  if (words[0] != 0x600DF00Du || words[63] != 0x600DF00Du) {
    fprintf(stderr, "hipline-consumer: read back 0x%08x, not the fill\n",
            words[0]);
    return 1;
  }
  return 0;
}

int main(void) {
  hl_backend_info_t info;
  hl_status_t status = hl_backend_query(HL_BACKEND_HOST, &info);
  if (!hl_status_is_ok(status)) return fail("hl_backend_query", status);
  if (!info.available) {
    fprintf(stderr, "hipline-consumer: host backend unavailable: %s\n",
            info.reason);
    return 1;
  }
  if (use_device() != 0) return 1;
  printf(
      "hipline %s: %s backend available, %d device(s); a queue "
      "allocated, filled, read and freed a buffer\n",
      HIPLINE_VERSION_STRING, hl_backend_kind_name(info.kind),
      info.device_count);
  return 0;
}
