// Host events: a (stream, sequence) pair plus the time its latest record ran.
//
// An event depends on streams (it retains the stream it was recorded on and
// pushes record items), never the other way round: a stream runs a record
// item through the item's |mark| function, so host_stream.c needs nothing
// from here.

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

static void hl_host_event_mark(hl_backend_event_t* event, uint64_t generation) {
  int64_t now = hl_time_now();
  hl_spinlock_lock(&event->mutex);
  if (event->generation == generation) event->time_ns = now;
  hl_spinlock_unlock(&event->mutex);
  hl_host_event_release(event);
}

hl_status_t hl_host_event_record(hl_backend_t* backend,
                                 hl_backend_event_t* event,
                                 hl_backend_stream_t* stream) {
  // The event mutex is held across the push so a concurrent query sees
  // either the old record or the new one, never a half-updated pair.
  hl_spinlock_lock(&event->mutex);
  uint64_t seq = 0;
  if (hl_host_stream_lock_idle(stream, &seq)) {
    // On an idle stream the record completes at once: no item.
    ++event->generation;
    event->time_ns = hl_time_now();
    hl_host_stream_unlock_idle(stream);
  } else {
    hl_host_item_t* item = NULL;
    hl_status_t st = hl_host_item_alloc(((hl_host_backend_t*)backend),
                                        HL_HOST_ITEM_RECORD, &item);
    if (st) {
      hl_spinlock_unlock(&event->mutex);
      return hl_status_annotate(st, "recording an event");
    }
    atomic_fetch_add(&event->ref_count, 1);
    item->record.event = event;
    item->record.mark = hl_host_event_mark;
    item->record.generation = ++event->generation;
    hl_host_stream_push_item(stream, item, &seq);
  }
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
  bool start_done = false, end_done = false;
  hl_host_event_query(backend, start, &start_done);
  hl_host_event_query(backend, end, &end_done);
  hl_spinlock_lock(&start->mutex);
  int64_t t0 = start->time_ns;
  bool start_recorded = start->stream != NULL;
  hl_spinlock_unlock(&start->mutex);
  hl_spinlock_lock(&end->mutex);
  int64_t t1 = end->time_ns;
  bool end_recorded = end->stream != NULL;
  hl_spinlock_unlock(&end->mutex);
  if (!start_recorded || !end_recorded) {
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "event_elapsed_ms: both events must be recorded");
  }
  if (!start_done || !end_done) {
    return HL_MAKE_STATUS(HL_STATUS_UNAVAILABLE,
                          "event_elapsed_ms: events not complete yet");
  }
  *out_ms = (float)((double)(t1 - t0) / 1e6);
  return NULL;
}
