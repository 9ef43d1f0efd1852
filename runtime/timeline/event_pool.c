// The device's event pool: backend events are recycled rather than
// destroyed, and a submission's shared event goes back to the pool when its
// last reference is dropped. The pool is under the device's lock, a leaf.

#include <stdlib.h>

#include "runtime/base/recycler.h"
#include "runtime/timeline/timeline_internal.h"

void hl_device_lock(hl_device_t* device) { hl_spinlock_lock(&device->lock); }

void hl_device_unlock(hl_device_t* device) {
  hl_spinlock_unlock(&device->lock);
}

hl_backend_event_t* hl_device_take_event(hl_device_t* device) {
  hl_backend_event_t* event = NULL;
  hl_device_lock(device);
  if (device->free_event_count) {
    event = device->free_events[--device->free_event_count];
  }
  hl_device_unlock(device);
  return event;
}

void hl_device_recycle_event(hl_device_t* device, hl_backend_event_t* event) {
  hl_device_lock(device);
  if (device->free_event_count == device->free_event_capacity) {
    uint32_t capacity =
        device->free_event_capacity ? device->free_event_capacity * 2 : 64;
    hl_backend_event_t** events =
        realloc(device->free_events, capacity * sizeof(*events));
    if (!events) {
      hl_device_unlock(device);
      // Destroying an event takes only the backend's leaf locks.
      device->backend->vtable->event_destroy(device->backend, event);
      atomic_fetch_sub(&device->live_events, 1);
      return;
    }
    device->free_events = events;
    device->free_event_capacity = capacity;
  }
  device->free_events[device->free_event_count++] = event;
  hl_device_unlock(device);
}

// One per submission that signals on the device.
static hl_recycler_t hl_shared_event_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_shared_event_t), 4096, "a shared event");

hl_status_t hl_shared_event_create(hl_device_t* device,
                                   hl_backend_event_t* event,
                                   hl_shared_event_t** out_shared) {
  hl_shared_event_t* shared = NULL;
  HL_RETURN_IF_ERROR(
      hl_recycler_alloc_default(&hl_shared_event_recycler_, (void**)&shared),
      "a shared event");
  shared->device = device;
  shared->event = event;
  atomic_init(&shared->refs, 1);
  *out_shared = shared;
  return NULL;
}

void hl_shared_event_drop(hl_shared_event_t* shared) {
  if (atomic_fetch_sub_explicit(&shared->refs, 1, memory_order_acq_rel) == 1) {
    hl_device_recycle_event(shared->device, shared->event);
    hl_recycler_free(&hl_shared_event_recycler_, shared);
  }
}
