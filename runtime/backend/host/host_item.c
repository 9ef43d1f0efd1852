// The host backend's stream items and their per-device cache. A leaf: it
// uses nothing else of the host backend.

#include "runtime/backend/host/host_item.h"

#include <stddef.h>
#include <string.h>

// Items are recycled per device: submitters allocate them and workers free
// them, which glibc's per-thread caches handle poorly. At most this many are
// kept.
#define HL_HOST_ITEM_CACHE 1024

hl_status_t hl_host_item_alloc(hl_host_backend_t* device,
                               hl_host_item_kind_t kind,
                               hl_host_item_t** out_item) {
  mtx_lock(&device->item_mutex);
  hl_host_item_t* item = device->free_items;
  if (item) {
    device->free_items = item->next;
    --device->free_item_count;
  }
  mtx_unlock(&device->item_mutex);
  if (item) {
    memset(item, 0, offsetof(hl_host_item_t, kernel.storage));
  } else {
    HL_RETURN_IF_ERROR(hl_allocator_calloc(device->base.host_allocator,
                                           sizeof(*item), (void**)&item),
                       "allocating a host stream item");
  }
  item->kind = kind;
  *out_item = item;
  return NULL;
}

void hl_host_item_free(hl_host_backend_t* device, hl_host_item_t* item) {
  mtx_lock(&device->item_mutex);
  if (device->free_item_count < HL_HOST_ITEM_CACHE) {
    item->next = device->free_items;
    device->free_items = item;
    ++device->free_item_count;
    item = NULL;
  }
  mtx_unlock(&device->item_mutex);
  if (item) hl_allocator_free(device->base.host_allocator, item);
}

void hl_host_item_cache_deinitialize(hl_host_backend_t* device) {
  while (device->free_items) {
    hl_host_item_t* item = device->free_items;
    device->free_items = item->next;
    hl_allocator_free(device->base.host_allocator, item);
  }
  device->free_item_count = 0;
  mtx_destroy(&device->item_mutex);
}
