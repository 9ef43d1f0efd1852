// The host backend's stream items and their per-device cache. A leaf: it
// uses nothing else of the host backend.

#include "runtime/backend/host/host_item.h"

// Items are recycled per device: submitters allocate them and workers free
// them, which glibc's allocator handles with arena-lock contention (a futex
// call per item under load); the recycler's spin lock never sleeps. At most
// this many are kept.
#define HL_HOST_ITEM_CACHE 1024

void hl_host_item_cache_initialize(hl_host_backend_t* device) {
  hl_recycler_initialize(&device->items, sizeof(hl_host_item_t),
                         HL_HOST_ITEM_CACHE, "a host stream item");
}

hl_status_t hl_host_item_alloc(hl_host_backend_t* device,
                               hl_host_item_kind_t kind,
                               hl_host_item_t** out_item) {
  hl_host_item_t* item = NULL;
  HL_RETURN_IF_ERROR(hl_recycler_alloc(&device->items,
                                       device->base.host_allocator,
                                       (void**)&item),
                     "a host stream item");
  item->kind = kind;
  *out_item = item;
  return NULL;
}

void hl_host_item_free(hl_host_backend_t* device, hl_host_item_t* item) {
  hl_recycler_free(&device->items, item);
}

void hl_host_item_cache_deinitialize(hl_host_backend_t* device) {
  hl_recycler_drain(&device->items);
}
