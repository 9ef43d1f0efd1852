// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "runtime/base/trace.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "hipline/time.h"
#include "runtime/base/log.h"

typedef enum {
  HL_TRACE_ZONE,
  HL_TRACE_INSTANT_EV,
  HL_TRACE_COUNTER_EV,
  HL_TRACE_MEMORY_EV  // |tid| the track, |value| in use, |value2| reserved.
} hl_trace_kind_t;

typedef struct hl_trace_event_t {
  const char* name;
  hl_trace_kind_t kind;
  uint32_t tid;
  int64_t ts_ns;
  int64_t dur_ns;
  int64_t value;
  int64_t value2;
} hl_trace_event_t;

atomic_bool hl_trace_active_;
static once_flag hl_trace_once_ = ONCE_FLAG_INIT;
static mtx_t hl_trace_mutex_;
// The event array grows by doubling up to |hl_trace_max_| events; events
// beyond it are counted in |hl_trace_dropped_| (written into the trace,
// warned about, and returned by hl_trace_capture_dropped).
static hl_trace_event_t* hl_trace_events_;
static uint64_t hl_trace_count_, hl_trace_capacity_, hl_trace_max_;
static uint64_t hl_trace_dropped_;
static int64_t hl_trace_epoch_;
static atomic_uint hl_trace_next_tid_ = 1;
static _Thread_local uint32_t hl_trace_tid_;

static void hl_trace_init(void) { mtx_init(&hl_trace_mutex_, mtx_plain); }

static void hl_trace_record(const hl_trace_event_t* ev) {
  call_once(&hl_trace_once_, hl_trace_init);
  mtx_lock(&hl_trace_mutex_);
  if (!hl_trace_is_active()) {  // Stopped since the caller checked.
    mtx_unlock(&hl_trace_mutex_);
    return;
  }
  if (hl_trace_count_ == hl_trace_capacity_ &&
      hl_trace_capacity_ < hl_trace_max_) {
    uint64_t capacity = hl_trace_capacity_ ? hl_trace_capacity_ * 2 : 4096;
    if (capacity > hl_trace_max_) capacity = hl_trace_max_;
    hl_trace_event_t* grown =
        realloc(hl_trace_events_, capacity * sizeof(hl_trace_event_t));
    if (grown) {
      hl_trace_events_ = grown;
      hl_trace_capacity_ = capacity;
    }
  }
  if (hl_trace_count_ < hl_trace_capacity_) {
    hl_trace_events_[hl_trace_count_++] = *ev;
  } else {
    ++hl_trace_dropped_;
  }
  mtx_unlock(&hl_trace_mutex_);
}

static uint32_t hl_trace_tid(void) {
  if (!hl_trace_tid_) hl_trace_tid_ = atomic_fetch_add(&hl_trace_next_tid_, 1);
  return hl_trace_tid_;
}

hl_trace_zone_t hl_trace_zone_begin_recording(const char* name) {
  hl_trace_zone_t zone;
  zone.name = name;
  zone.begin_ns = hl_time_now();
  return zone;
}

void hl_trace_zone_end_recording(hl_trace_zone_t zone) {
  hl_trace_event_t ev = {zone.name,
                         HL_TRACE_ZONE,
                         hl_trace_tid(),
                         zone.begin_ns,
                         hl_time_now() - zone.begin_ns,
                         0,
                         0};
  hl_trace_record(&ev);
}

void hl_trace_instant_recording(const char* name, uint64_t arg) {
  hl_trace_event_t ev = {
      name, HL_TRACE_INSTANT_EV, hl_trace_tid(), hl_time_now(), 0, (int64_t)arg,
      0};
  hl_trace_record(&ev);
}

void hl_trace_counter_recording(const char* name, int64_t value) {
  hl_trace_event_t ev = {
      name, HL_TRACE_COUNTER_EV, hl_trace_tid(), hl_time_now(), 0, value, 0};
  hl_trace_record(&ev);
}

void hl_trace_memory_recording(uint32_t track, const char* pool, int64_t in_use,
                               int64_t reserved) {
  hl_trace_event_t ev = {
      pool, HL_TRACE_MEMORY_EV, track, hl_time_now(), 0, in_use, reserved};
  hl_trace_record(&ev);
}

void hl_trace_start(uint64_t max_events) {
  call_once(&hl_trace_once_, hl_trace_init);
  mtx_lock(&hl_trace_mutex_);
  free(hl_trace_events_);
  hl_trace_events_ = NULL;
  hl_trace_capacity_ = 0;
  hl_trace_max_ = max_events;
  hl_trace_count_ = 0;
  hl_trace_dropped_ = 0;
  hl_trace_epoch_ = hl_time_now();
  mtx_unlock(&hl_trace_mutex_);
  atomic_store(&hl_trace_active_, true);
}

uint64_t hl_trace_count(const char* name) {
  call_once(&hl_trace_once_, hl_trace_init);
  uint64_t n = 0;
  mtx_lock(&hl_trace_mutex_);
  for (uint64_t i = 0; i < hl_trace_count_; ++i) {
    if (strcmp(hl_trace_events_[i].name, name) == 0) ++n;
  }
  mtx_unlock(&hl_trace_mutex_);
  return n;
}

hl_status_t hl_trace_stop_and_write(const char* path) {
  call_once(&hl_trace_once_, hl_trace_init);
  // Nothing is captured (never started, or already written): nothing to
  // write, and an earlier trace at |path| is not overwritten with nothing.
  if (!atomic_exchange(&hl_trace_active_, false)) return NULL;
  mtx_lock(&hl_trace_mutex_);
  hl_status_t status = NULL;
  FILE* f = path ? fopen(path, "w") : NULL;
  if (path && !f) {
    status = HL_MAKE_STATUS(HL_STATUS_PERMISSION_DENIED,
                            "cannot open trace file '%s' for writing: %s", path,
                            strerror(errno));
  } else if (f) {
    fprintf(f,
            "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"dropped\":%llu,"
            "\"max_events\":%llu},\"traceEvents\":[\n",
            (unsigned long long)hl_trace_dropped_,
            (unsigned long long)hl_trace_max_);
    for (uint64_t i = 0; i < hl_trace_count_; ++i) {
      const hl_trace_event_t* ev = &hl_trace_events_[i];
      double ts_us = (double)(ev->ts_ns - hl_trace_epoch_) / 1000.0;
      const char* sep = i + 1 < hl_trace_count_ ? "," : "";
      switch (ev->kind) {
        case HL_TRACE_ZONE:
          fprintf(f,
                  "{\"name\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%u,"
                  "\"ts\":%.3f,\"dur\":%.3f}%s\n",
                  ev->name, ev->tid, ts_us, (double)ev->dur_ns / 1000.0, sep);
          break;
        case HL_TRACE_INSTANT_EV:
          fprintf(f,
                  "{\"name\":\"%s\",\"ph\":\"i\",\"s\":\"t\",\"pid\":1,"
                  "\"tid\":%u,\"ts\":%.3f,\"args\":{\"value\":%lld}}%s\n",
                  ev->name, ev->tid, ts_us, (long long)ev->value, sep);
          break;
        case HL_TRACE_COUNTER_EV:
          fprintf(f,
                  "{\"name\":\"%s\",\"ph\":\"C\",\"pid\":1,\"tid\":%u,"
                  "\"ts\":%.3f,\"args\":{\"value\":%lld}}%s\n",
                  ev->name, ev->tid, ts_us, (long long)ev->value, sep);
          break;
        case HL_TRACE_MEMORY_EV:
          fprintf(f,
                  "{\"name\":\"memory %u (%s pool)\",\"ph\":\"C\",\"pid\":1,"
                  "\"ts\":%.3f,\"args\":{\"in_use_bytes\":%lld,"
                  "\"reserved_bytes\":%lld}}%s\n",
                  ev->tid, ev->name, ts_us, (long long)ev->value,
                  (long long)ev->value2, sep);
          break;
      }
    }
    fprintf(f, "]}\n");
    int failed = ferror(f);
    int saved = errno;
    if (fclose(f) != 0 && !failed) {
      failed = 1;
      saved = errno;
    }
    if (failed) {
      status = HL_MAKE_STATUS(HL_STATUS_DATA_LOSS,
                              "writing trace file '%s' failed: %s", path,
                              strerror(saved));
    }
  }
  uint64_t kept = hl_trace_count_, dropped = hl_trace_dropped_;
  uint64_t max = hl_trace_max_;
  free(hl_trace_events_);
  hl_trace_events_ = NULL;
  hl_trace_count_ = hl_trace_capacity_ = 0;
  mtx_unlock(&hl_trace_mutex_);
  if (dropped && path && !status) {
    HL_LOG_WARN(
        "trace '%s' holds the first %llu events; %llu later events were "
        "dropped (the capture's limit is %llu events)",
        path, (unsigned long long)kept, (unsigned long long)dropped,
        (unsigned long long)max);
  }
  return status;
}

uint64_t hl_trace_dropped(void) {
  call_once(&hl_trace_once_, hl_trace_init);
  mtx_lock(&hl_trace_mutex_);
  uint64_t dropped = hl_trace_dropped_;
  mtx_unlock(&hl_trace_mutex_);
  return dropped;
}

//===----------------------------------------------------------------------===//
// Public capture API (include/hipline/trace.h)
//===----------------------------------------------------------------------===//

void hl_trace_capture_begin(uint64_t max_events) {
  hl_trace_start(max_events ? max_events : 1000000);
}

hl_status_t hl_trace_capture_end(const char* path) {
  return hl_trace_stop_and_write(path);
}

bool hl_trace_capture_active(void) { return hl_trace_is_active(); }

uint64_t hl_trace_capture_count(const char* name) {
  return name ? hl_trace_count(name) : 0;
}

uint64_t hl_trace_capture_dropped(void) { return hl_trace_dropped(); }
