// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Items queued on host streams, and host events.
#ifndef HIPLINE_RUNTIME_BACKEND_HOST_HOST_ITEM_H_
#define HIPLINE_RUNTIME_BACKEND_HOST_HOST_ITEM_H_

#include "runtime/backend/host/host_internal.h"

typedef enum hl_host_item_kind_e {
  HL_HOST_ITEM_FN,
  HL_HOST_ITEM_WAIT,
  HL_HOST_ITEM_MEMCPY,
  HL_HOST_ITEM_MEMSET32,
  HL_HOST_ITEM_KERNEL,
  HL_HOST_ITEM_POISON,
  HL_HOST_ITEM_STOP,
} hl_host_item_kind_t;

#define HL_HOST_KERNEL_STORAGE 256

struct hl_host_item_t {
  hl_host_item_t* next;
  uint64_t seq;
  hl_host_item_kind_t kind;
  union {
    struct {
      hl_host_fn_t fn;
      void* user;
    } fn;
    struct {
      hl_backend_stream_t* other;  // Retained.
      uint64_t seq;
    } wait;
    struct {
      void* dst;
      const void* src;
      size_t size;
    } memcpy;
    struct {
      void* dst;
      uint32_t value;
      size_t count;
    } memset32;
    struct {
      const hl_host_kernel_t* kernel;
      hl_launch_config_t config;
      _Alignas(8) unsigned char storage[HL_HOST_KERNEL_STORAGE];
    } kernel;
    struct {
      void* ptr;
      size_t size;
    } poison;
  };
};

// An event is a (stream, sequence) pair: it completes when the stream has
// finished that sequence. Untimed, as hipline's HIP events are
// (hipEventDisableTiming): a record is no stream item, on a busy stream too.
struct hl_backend_event_t {
  atomic_int ref_count;
  hl_host_backend_t* device;
  hl_spinlock_t mutex;          // A spin lock (base/spin.h): a few stores.
  hl_backend_stream_t* stream;  // Retained; NULL until recorded.
  uint64_t seq;
};

// Item cache (host_item.c): a leaf.
hl_status_t hl_host_item_alloc(hl_host_backend_t* device,
                               hl_host_item_kind_t kind,
                               hl_host_item_t** out_item);
void hl_host_item_free(hl_host_backend_t* device, hl_host_item_t* item);

hl_status_t hl_host_stream_push_item(hl_backend_stream_t* stream,
                                     hl_host_item_t* item, uint64_t* out_seq);

// Events (host_event.c): use streams and items, never the pool.
hl_status_t hl_host_event_create(hl_backend_t* backend,
                                 hl_backend_event_t** out_event);
void hl_host_event_destroy(hl_backend_t* backend, hl_backend_event_t* event);
void hl_host_event_release(struct hl_backend_event_t* event);
hl_status_t hl_host_event_record(hl_backend_t* backend,
                                 hl_backend_event_t* event,
                                 hl_backend_stream_t* stream);
// Reads the event's (stream, seq) pair with the stream retained (NULL when
// never recorded).
hl_backend_stream_t* hl_host_event_snapshot(hl_backend_event_t* event,
                                            uint64_t* out_seq);
hl_status_t hl_host_event_query(hl_backend_t* backend,
                                hl_backend_event_t* event, bool* out_complete);
hl_status_t hl_host_event_elapsed_ms(hl_backend_t* backend,
                                     hl_backend_event_t* start,
                                     hl_backend_event_t* end, float* out_ms);

#endif  // HIPLINE_RUNTIME_BACKEND_HOST_HOST_ITEM_H_
