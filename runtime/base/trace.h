// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Trace zones, instants and named counters.
//
// With HIPLINE_ENABLE_TRACING=0 at build time every macro compiles to nothing.
// With it on, events are recorded only while a sink is active
// (hl_trace_start), so the idle cost is one relaxed atomic load. Events are
// exported as Chrome trace-event JSON, which Perfetto opens.
#ifndef HIPLINE_RUNTIME_BASE_TRACE_H_
#define HIPLINE_RUNTIME_BASE_TRACE_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hipline/status.h"
#include "hipline/trace.h"

#ifndef HIPLINE_ENABLE_TRACING
#define HIPLINE_ENABLE_TRACING 1
#endif

typedef struct hl_trace_zone_t {
  const char* name;  // NULL when the zone is not recorded.
  int64_t begin_ns;
} hl_trace_zone_t;

// Whether a sink is recording (trace.c). Read inline: every submission
// opens zones, and the idle cost stays one relaxed load and a branch.
extern atomic_bool hl_trace_active_;

static inline bool hl_trace_is_active(void) {
  return atomic_load_explicit(&hl_trace_active_, memory_order_relaxed);
}

hl_trace_zone_t hl_trace_zone_begin_recording(const char* name);
void hl_trace_zone_end_recording(hl_trace_zone_t zone);
void hl_trace_instant_recording(const char* name, uint64_t arg);
void hl_trace_counter_recording(const char* name, int64_t value);
void hl_trace_memory_recording(uint32_t track, const char* pool, int64_t in_use,
                               int64_t reserved);

static inline hl_trace_zone_t hl_trace_zone_begin(const char* name) {
  if (HL_LIKELY(!hl_trace_is_active())) {
    hl_trace_zone_t none = {NULL, 0};
    return none;
  }
  return hl_trace_zone_begin_recording(name);
}
static inline void hl_trace_zone_end(hl_trace_zone_t zone) {
  if (HL_UNLIKELY(zone.name != NULL)) hl_trace_zone_end_recording(zone);
}
static inline void hl_trace_instant(const char* name, uint64_t arg) {
  if (HL_UNLIKELY(hl_trace_is_active())) hl_trace_instant_recording(name, arg);
}
static inline void hl_trace_counter(const char* name, int64_t value) {
  if (HL_UNLIKELY(hl_trace_is_active())) {
    hl_trace_counter_recording(name, value);
  }
}

// A sample of memory track |track| (one per device, numbered by the caller)
// whose pool is named |pool| (a string literal): bytes in use and reserved.
// Written as a Chrome counter event, "memory <track> (<pool> pool)" with
// args in_use_bytes and reserved_bytes, which Perfetto draws as two counter
// tracks beside the zones.
static inline void hl_trace_memory(uint32_t track, const char* pool,
                                   int64_t in_use, int64_t reserved) {
  if (HL_UNLIKELY(hl_trace_is_active())) {
    hl_trace_memory_recording(track, pool, in_use, reserved);
  }
}

// Starts recording, keeping at most |max_events| events (later ones are
// counted as dropped). Clears earlier events.
void hl_trace_start(uint64_t max_events);
// Stops recording and writes everything recorded as Chrome JSON to |path|.
hl_status_t hl_trace_stop_and_write(const char* path);
// Events dropped beyond the limit by the current or last capture.
uint64_t hl_trace_dropped(void);
// Number of recorded events with |name| so far (for tests).
uint64_t hl_trace_count(const char* name);

#if HIPLINE_ENABLE_TRACING
#define HL_TRACE_ZONE_BEGIN(var, name) \
  hl_trace_zone_t var = hl_trace_zone_begin(name)
#define HL_TRACE_ZONE_END(var) hl_trace_zone_end(var)
#define HL_TRACE_INSTANT(name, arg) hl_trace_instant((name), (arg))
#define HL_TRACE_COUNTER(name, value) hl_trace_counter((name), (value))
#else
#define HL_TRACE_ZONE_BEGIN(var, name) \
  do {                                 \
  } while (0)
#define HL_TRACE_ZONE_END(var) \
  do {                         \
  } while (0)
#define HL_TRACE_INSTANT(name, arg) \
  do {                              \
  } while (0)
#define HL_TRACE_COUNTER(name, value) \
  do {                                \
  } while (0)
#endif

#endif  // HIPLINE_RUNTIME_BASE_TRACE_H_
