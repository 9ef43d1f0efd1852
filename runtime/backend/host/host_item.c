// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The host backend's stream items and their cache. A leaf: it uses nothing
// else of the host backend.

#include "runtime/backend/host/host_item.h"

// Items are recycled (base/recycler.h): submitters allocate them and
// workers free them, which glibc's allocator handles with arena-lock
// contention (a futex call per item under load). One recycler serves every
// host device (items of devices with their own host allocator go back to
// it at once).
static hl_recycler_t hl_host_item_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_host_item_t), 4096, "a host stream item");

hl_status_t hl_host_item_alloc(hl_host_backend_t* device,
                               hl_host_item_kind_t kind,
                               hl_host_item_t** out_item) {
  hl_host_item_t* item = NULL;
  HL_RETURN_IF_ERROR(
      hl_recycler_alloc(&hl_host_item_recycler_, device->base.host_allocator,
                        (void**)&item),
      "a host stream item");
  item->kind = kind;
  *out_item = item;
  return NULL;
}

void hl_host_item_free(hl_host_backend_t* device, hl_host_item_t* item) {
  (void)device;
  hl_recycler_free(&hl_host_item_recycler_, item);
}
