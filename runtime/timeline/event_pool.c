// The device's event pool: backend events are recycled rather than
// destroyed, and a submission's shared event goes back to the pool when its
// last timepoint is dropped. All of it under the scheduler lock.

#include <stdlib.h>

#include "runtime/base/recycler.h"
#include "runtime/timeline/timeline_internal.h"

void hl_device_recycle_event(hl_device_t* device, hl_backend_event_t* event) {
  if (device->free_event_count == device->free_event_capacity) {
    uint32_t capacity =
        device->free_event_capacity ? device->free_event_capacity * 2 : 64;
    hl_backend_event_t** events =
        realloc(device->free_events, capacity * sizeof(*events));
    if (!events) {
      device->backend->vtable->event_destroy(device->backend, event);
      atomic_fetch_sub(&device->live_events, 1);
      return;
    }
    device->free_events = events;
    device->free_event_capacity = capacity;
  }
  device->free_events[device->free_event_count++] = event;
}

// One per submission that signals on the device.
static hl_recycler_t hl_shared_event_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_shared_event_t), 4096, "a shared event");

hl_status_t hl_shared_event_create(hl_device_t* device,
                                   hl_backend_event_t* event,
                                   hl_shared_event_t** out_shared) {
  hl_shared_event_t* shared = NULL;
  HL_RETURN_IF_ERROR(hl_recycler_alloc(&hl_shared_event_recycler_,
                                       hl_allocator_system(), (void**)&shared),
                     "a shared event");
  shared->device = device;
  shared->event = event;
  shared->refs = 1;
  *out_shared = shared;
  return NULL;
}

void hl_shared_event_drop_locked(hl_shared_event_t* shared) {
  if (--shared->refs == 0) {
    hl_device_recycle_event(shared->device, shared->event);
    hl_recycler_free(&hl_shared_event_recycler_, shared);
  }
}
