// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The memory history (memory_history.h) and its PyTorch snapshot pickle:
//   {"segments": [segment, ...], "device_traces": [[event, ...], ...]}
// as torch.cuda.memory._snapshot() returns it and _dump_snapshot() pickles
// it, which PyTorch's memory_viz and tools/hipline-trace-convert read. Each
// event is {"action": "alloc" | "free_completed", "addr", "size", "stream",
// "time_us", "frames": []}; each device (memory track) seen gets a trace, in
// order of first appearance. The segments are what is live when the history
// ends, one segment of one active_allocated block per allocation.

#include "runtime/memory/memory_history.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "hipline/time.h"
#include "hipline/trace.h"
#include "runtime/base/log.h"
#include "runtime/memory/memory_internal.h"

typedef struct hl_memory_history_event_t {
  int64_t time_ns;
  uint64_t addr;
  uint64_t size;
  uint32_t track;
  uint32_t stream;
  bool alloc;
} hl_memory_history_event_t;

atomic_bool hl_memory_history_active_;
static once_flag hl_memory_history_once_ = ONCE_FLAG_INIT;
static mtx_t hl_memory_history_mutex_;
static hl_memory_history_event_t* hl_history_events_;
static uint64_t hl_history_count_, hl_history_capacity_, hl_history_max_;
static uint64_t hl_history_dropped_;

static void hl_memory_history_init(void) {
  mtx_init(&hl_memory_history_mutex_, mtx_plain);
}

void hl_memory_history_record(hl_device_t* device, bool alloc, const void* ptr,
                              uint64_t size, uint32_t stream) {
  hl_memory_state_t* state = hl_memory_state_get(device);
  uint32_t track = state ? state->trace_track : 0;
  call_once(&hl_memory_history_once_, hl_memory_history_init);
  mtx_lock(&hl_memory_history_mutex_);
  if (!atomic_load(&hl_memory_history_active_)) {
    mtx_unlock(&hl_memory_history_mutex_);
    return;
  }
  if (hl_history_count_ == hl_history_capacity_ &&
      hl_history_capacity_ < hl_history_max_) {
    uint64_t capacity = hl_history_capacity_ ? hl_history_capacity_ * 2 : 4096;
    if (capacity > hl_history_max_) capacity = hl_history_max_;
    void* grown =
        realloc(hl_history_events_, capacity * sizeof(*hl_history_events_));
    if (grown) {
      hl_history_events_ = grown;
      hl_history_capacity_ = capacity;
    }
  }
  if (hl_history_count_ < hl_history_capacity_) {
    // The time is taken under the lock: the events are in time order.
    hl_memory_history_event_t ev = {
        hl_time_now(), (uint64_t)(uintptr_t)ptr, size, track, stream, alloc};
    hl_history_events_[hl_history_count_++] = ev;
  } else {
    ++hl_history_dropped_;
  }
  mtx_unlock(&hl_memory_history_mutex_);
}

void hl_memory_history_begin(uint64_t max_events) {
  call_once(&hl_memory_history_once_, hl_memory_history_init);
  mtx_lock(&hl_memory_history_mutex_);
  free(hl_history_events_);
  hl_history_events_ = NULL;
  hl_history_count_ = hl_history_capacity_ = 0;
  hl_history_max_ = max_events ? max_events : 1000000;
  hl_history_dropped_ = 0;
  atomic_store(&hl_memory_history_active_, true);
  mtx_unlock(&hl_memory_history_mutex_);
}

uint64_t hl_memory_history_dropped(void) {
  call_once(&hl_memory_history_once_, hl_memory_history_init);
  mtx_lock(&hl_memory_history_mutex_);
  uint64_t dropped = hl_history_dropped_;
  mtx_unlock(&hl_memory_history_mutex_);
  return dropped;
}

//===----------------------------------------------------------------------===//
// Pickle (protocol 2) of dicts, lists, strings and integers
//===----------------------------------------------------------------------===//

static void hl_pickle_u32(FILE* f, uint32_t v) {
  unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8),
                        (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
  fwrite(b, 1, 4, f);
}

static void hl_pickle_str(FILE* f, const char* s) {
  size_t n = strlen(s);
  fputc('X', f);  // BINUNICODE
  hl_pickle_u32(f, (uint32_t)n);
  fwrite(s, 1, n, f);
}

static void hl_pickle_uint(FILE* f, uint64_t v) {
  if (v < (1ull << 31)) {
    fputc('J', f);  // BININT
    hl_pickle_u32(f, (uint32_t)v);
    return;
  }
  // LONG1: little-endian two's complement; a ninth byte keeps the top bit
  // of a 64-bit value from reading as a sign.
  unsigned char b[9];
  int n = 0;
  for (uint64_t x = v; x; x >>= 8) b[n++] = (unsigned char)x;
  if (b[n - 1] & 0x80) b[n++] = 0;
  fputc(0x8a, f);
  fputc(n, f);
  fwrite(b, 1, (size_t)n, f);
}

static void hl_pickle_key_uint(FILE* f, const char* key, uint64_t v) {
  hl_pickle_str(f, key);
  hl_pickle_uint(f, v);
}

static void hl_pickle_key_str(FILE* f, const char* key, const char* v) {
  hl_pickle_str(f, key);
  hl_pickle_str(f, v);
}

// "frames": [] (PyTorch's stack frames; hipline records none).
static void hl_pickle_no_frames(FILE* f) {
  hl_pickle_str(f, "frames");
  fputc(']', f);  // EMPTY_LIST
}

#define HL_PICKLE_MARK '('
#define HL_PICKLE_SETITEMS 'u'
#define HL_PICKLE_APPENDS 'e'

//===----------------------------------------------------------------------===//
// Snapshot
//===----------------------------------------------------------------------===//

// The device index of each event: tracks in order of first appearance.
static uint32_t* hl_history_devices(uint32_t* out_count) {
  uint32_t* device =
      calloc(hl_history_count_ ? hl_history_count_ : 1, sizeof(uint32_t));
  uint32_t* tracks =
      calloc(hl_history_count_ ? hl_history_count_ : 1, sizeof(uint32_t));
  uint32_t count = 0;
  if (!device || !tracks) {
    free(device);
    free(tracks);
    return NULL;
  }
  for (uint64_t i = 0; i < hl_history_count_; ++i) {
    uint32_t d = 0;
    while (d < count && tracks[d] != hl_history_events_[i].track) ++d;
    if (d == count) tracks[count++] = hl_history_events_[i].track;
    device[i] = d;
  }
  free(tracks);
  *out_count = count;
  return device;
}

// The device of each event while the snapshot is written (the history's
// mutex held), for hl_history_order.
static const uint32_t* hl_history_sort_devices_;

// Orders event indices by device, address, then time.
static int hl_history_order(const void* a, const void* b) {
  uint64_t i = *(const uint64_t*)a, j = *(const uint64_t*)b;
  const hl_memory_history_event_t* x = &hl_history_events_[i];
  const hl_memory_history_event_t* y = &hl_history_events_[j];
  uint32_t dx = hl_history_sort_devices_[i], dy = hl_history_sort_devices_[j];
  if (dx != dy) return dx < dy ? -1 : 1;
  if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
  return i < j ? -1 : i > j ? 1 : 0;
}

// Which events are allocations live at the end (no later free of their
// address on their device); NULL when out of memory.
static bool* hl_history_live_at_end(const uint32_t* device) {
  uint64_t n = hl_history_count_ ? hl_history_count_ : 1;
  bool* live = calloc(n, sizeof(bool));
  uint64_t* order = calloc(n, sizeof(uint64_t));
  if (!live || !order) {
    free(live);
    free(order);
    return NULL;
  }
  for (uint64_t i = 0; i < hl_history_count_; ++i) order[i] = i;
  hl_history_sort_devices_ = device;
  qsort(order, hl_history_count_, sizeof(uint64_t), hl_history_order);
  for (uint64_t k = 0; k < hl_history_count_; ++k) {
    uint64_t i = order[k];
    bool last =
        k + 1 == hl_history_count_ || device[order[k + 1]] != device[i] ||
        hl_history_events_[order[k + 1]].addr != hl_history_events_[i].addr;
    live[i] = last && hl_history_events_[i].alloc;
  }
  free(order);
  return live;
}

static void hl_history_write_segments(FILE* f, const uint32_t* device,
                                      const bool* live) {
  hl_pickle_str(f, "segments");
  fputc(']', f);
  fputc(HL_PICKLE_MARK, f);
  for (uint64_t i = 0; i < hl_history_count_; ++i) {
    const hl_memory_history_event_t* e = &hl_history_events_[i];
    if (!live[i]) continue;
    fputc('}', f);
    fputc(HL_PICKLE_MARK, f);
    hl_pickle_key_uint(f, "device", device[i]);
    hl_pickle_key_uint(f, "address", e->addr);
    hl_pickle_key_uint(f, "total_size", e->size);
    hl_pickle_key_uint(f, "allocated_size", e->size);
    hl_pickle_key_uint(f, "active_size", e->size);
    hl_pickle_key_uint(f, "requested_size", e->size);
    hl_pickle_key_uint(f, "stream", e->stream);
    hl_pickle_key_str(f, "segment_type",
                      e->size <= (1u << 20) ? "small" : "large");
    hl_pickle_no_frames(f);
    hl_pickle_str(f, "blocks");
    fputc(']', f);
    fputc(HL_PICKLE_MARK, f);
    fputc('}', f);
    fputc(HL_PICKLE_MARK, f);
    hl_pickle_key_uint(f, "address", e->addr);
    hl_pickle_key_uint(f, "size", e->size);
    hl_pickle_key_uint(f, "requested_size", e->size);
    hl_pickle_key_str(f, "state", "active_allocated");
    hl_pickle_no_frames(f);
    fputc(HL_PICKLE_SETITEMS, f);
    fputc(HL_PICKLE_APPENDS, f);
    fputc(HL_PICKLE_SETITEMS, f);
  }
  fputc(HL_PICKLE_APPENDS, f);
}

static void hl_history_write_traces(FILE* f, const uint32_t* device,
                                    uint32_t devices) {
  int64_t epoch = hl_history_count_ ? hl_history_events_[0].time_ns : 0;
  hl_pickle_str(f, "device_traces");
  fputc(']', f);
  fputc(HL_PICKLE_MARK, f);
  for (uint32_t d = 0; d < devices; ++d) {
    fputc(']', f);
    fputc(HL_PICKLE_MARK, f);
    for (uint64_t i = 0; i < hl_history_count_; ++i) {
      const hl_memory_history_event_t* e = &hl_history_events_[i];
      if (device[i] != d) continue;
      fputc('}', f);
      fputc(HL_PICKLE_MARK, f);
      hl_pickle_key_str(f, "action", e->alloc ? "alloc" : "free_completed");
      hl_pickle_key_uint(f, "addr", e->addr);
      hl_pickle_key_uint(f, "size", e->size);
      hl_pickle_key_uint(f, "stream", e->stream);
      hl_pickle_key_uint(f, "time_us", (uint64_t)(e->time_ns - epoch) / 1000u);
      hl_pickle_no_frames(f);
      fputc(HL_PICKLE_SETITEMS, f);
    }
    fputc(HL_PICKLE_APPENDS, f);
  }
  fputc(HL_PICKLE_APPENDS, f);
}

static hl_status_t hl_history_write(const char* path) {
  uint32_t devices = 0;
  uint32_t* device = hl_history_devices(&devices);
  bool* live = device ? hl_history_live_at_end(device) : NULL;
  if (!live) {
    free(device);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "writing memory snapshot '%s': out of memory", path);
  }
  FILE* f = fopen(path, "wb");
  if (!f) {
    free(device);
    free(live);
    return HL_MAKE_STATUS(HL_STATUS_PERMISSION_DENIED,
                          "cannot open memory snapshot '%s' for writing: %s",
                          path, strerror(errno));
  }
  fputc(0x80, f);  // PROTO 2
  fputc(2, f);
  fputc('}', f);
  fputc(HL_PICKLE_MARK, f);
  hl_history_write_segments(f, device, live);
  hl_history_write_traces(f, device, devices);
  fputc(HL_PICKLE_SETITEMS, f);
  fputc('.', f);  // STOP
  free(device);
  free(live);
  int failed = ferror(f);
  int saved = errno;
  if (fclose(f) != 0 && !failed) {
    failed = 1;
    saved = errno;
  }
  return failed ? HL_MAKE_STATUS(HL_STATUS_DATA_LOSS,
                                 "writing memory snapshot '%s' failed: %s",
                                 path, strerror(saved))
                : NULL;
}

hl_status_t hl_memory_history_end(const char* snapshot_path) {
  call_once(&hl_memory_history_once_, hl_memory_history_init);
  mtx_lock(&hl_memory_history_mutex_);
  hl_status_t status = NULL;
  if (atomic_exchange(&hl_memory_history_active_, false) && snapshot_path) {
    status = hl_history_write(snapshot_path);
    if (!status && hl_history_dropped_) {
      HL_LOG_WARN(
          "memory snapshot '%s' holds the first %llu events; %llu later "
          "events were dropped (the history's limit)",
          snapshot_path, (unsigned long long)hl_history_count_,
          (unsigned long long)hl_history_dropped_);
    }
  }
  free(hl_history_events_);
  hl_history_events_ = NULL;
  hl_history_count_ = hl_history_capacity_ = 0;
  mtx_unlock(&hl_memory_history_mutex_);
  return status;
}
