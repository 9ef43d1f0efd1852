// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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
                                   hl_backend_stream_t* stream,
                                   hl_shared_event_t** out_shared) {
  hl_shared_event_t* shared = NULL;
  HL_RETURN_IF_ERROR(
      hl_recycler_alloc_default(&hl_shared_event_recycler_, (void**)&shared),
      "a shared event");
  shared->device = device;
  atomic_init(&shared->event, event);
  shared->stream = event ? NULL : stream;
  atomic_init(&shared->refs, 1);
  *out_shared = shared;
  return NULL;
}

hl_status_t hl_shared_event_materialize(hl_shared_event_t* shared,
                                        hl_backend_event_t** out_event) {
  hl_backend_event_t* event = atomic_load(&shared->event);
  if (event) {
    *out_event = event;
    return NULL;
  }
  hl_device_t* device = shared->device;
  hl_backend_t* backend = device->backend;
  event = hl_device_take_event(device);
  if (!event) {
    HL_RETURN_IF_ERROR(backend->vtable->event_create(backend, &event),
                       "an event for a late waiter");
    atomic_fetch_add(&device->live_events, 1);
  }
  hl_status_t st =
      backend->vtable->event_record(backend, event, shared->stream);
  if (st) {
    hl_device_recycle_event(device, event);
    return hl_status_annotate(st, "recording an event for a late waiter");
  }
  hl_backend_event_t* expected = NULL;
  if (!atomic_compare_exchange_strong(&shared->event, &expected, event)) {
    // Another waiter recorded first; its event is the earlier one.
    hl_device_recycle_event(device, event);
    event = expected;
  }
  *out_event = event;
  return NULL;
}

void hl_shared_event_drop(hl_shared_event_t* shared) {
  if (atomic_fetch_sub_explicit(&shared->refs, 1, memory_order_acq_rel) == 1) {
    hl_backend_event_t* event = atomic_load(&shared->event);
    if (event) hl_device_recycle_event(shared->device, event);
    hl_recycler_free(&hl_shared_event_recycler_, shared);
  }
}
