// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Host events: a (stream, sequence) pair, untimed (events_untimed, as
// hipline's HIP events are).
//
// An event depends on streams (it retains the stream it was recorded on),
// never the other way round: host_stream.c needs nothing from here.

#include "runtime/backend/host/host_item.h"
#include "runtime/base/spin.h"
#include "runtime/base/time_util.h"

hl_status_t hl_host_event_create(hl_backend_t* backend,
                                 hl_backend_event_t** out_event) {
  hl_host_backend_t* device = ((hl_host_backend_t*)backend);
  hl_backend_event_t* event = NULL;
  HL_RETURN_IF_ERROR(hl_allocator_calloc(device->base.host_allocator,
                                         sizeof(*event), (void**)&event),
                     "allocating a host event");
  atomic_init(&event->ref_count, 1);
  event->device = device;
  hl_spinlock_init(&event->mutex);
  atomic_fetch_add(&device->live_events, 1);
  *out_event = event;
  return NULL;
}

void hl_host_event_release(hl_backend_event_t* event) {
  if (atomic_fetch_sub_explicit(&event->ref_count, 1, memory_order_acq_rel) !=
      1) {
    return;
  }
  if (event->stream) hl_host_stream_release(event->stream);
  hl_allocator_free(event->device->base.host_allocator, event);
}

void hl_host_event_destroy(hl_backend_t* backend, hl_backend_event_t* event) {
  atomic_fetch_sub(&((hl_host_backend_t*)backend)->live_events, 1);
  hl_host_event_release(event);
}

hl_status_t hl_host_event_record(hl_backend_t* backend,
                                 hl_backend_event_t* event,
                                 hl_backend_stream_t* stream) {
  (void)backend;
  // The event's lock keeps the (stream, seq) pair whole for a concurrent
  // query. No stream item: the event completes with the stream's last
  // sequence so far, idle or busy.
  hl_spinlock_lock(&event->mutex);
  uint64_t seq = hl_host_stream_record_seq(stream);
  hl_backend_stream_t* old = event->stream;
  hl_host_stream_retain(stream);
  event->stream = stream;
  event->seq = seq;
  hl_spinlock_unlock(&event->mutex);
  if (old) hl_host_stream_release(old);
  return NULL;
}

// Reads the event's (stream, seq) pair with the stream retained.
hl_backend_stream_t* hl_host_event_snapshot(hl_backend_event_t* event,
                                            uint64_t* out_seq) {
  hl_spinlock_lock(&event->mutex);
  hl_backend_stream_t* stream = event->stream;
  if (stream) hl_host_stream_retain(stream);
  *out_seq = event->seq;
  hl_spinlock_unlock(&event->mutex);
  return stream;
}

hl_status_t hl_host_event_query(hl_backend_t* backend,
                                hl_backend_event_t* event, bool* out_complete) {
  uint64_t seq = 0;
  hl_backend_stream_t* stream = hl_host_event_snapshot(event, &seq);
  *out_complete = !stream || hl_host_stream_completed(stream) >= seq;
  if (stream) hl_host_stream_release(stream);
  return NULL;
}

hl_status_t hl_host_event_elapsed_ms(hl_backend_t* backend,
                                     hl_backend_event_t* start,
                                     hl_backend_event_t* end, float* out_ms) {
  (void)backend;
  (void)start;
  (void)end;
  *out_ms = 0.0f;
  return HL_MAKE_STATUS(HL_STATUS_UNIMPLEMENTED,
                        "event_elapsed_ms on the host backend: events are "
                        "untimed (events_untimed), as on hip");
}
