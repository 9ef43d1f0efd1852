// The device's event pool: backend events are recycled rather than
// destroyed, and a submission's shared event goes back to the pool when its
// last timepoint is dropped. All of it under the scheduler lock.

#include <stdlib.h>

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

void hl_shared_event_drop_locked(hl_shared_event_t* shared) {
  if (--shared->refs == 0) {
    hl_device_recycle_event(shared->device, shared->event);
    free(shared);
  }
}
