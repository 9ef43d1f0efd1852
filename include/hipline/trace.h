// Trace capture: queue submissions, allocas and deallocas, fallback releases
// and SyncImportTimelineResource zones, written as Chrome trace-event JSON
// (Perfetto opens it). HIPLINE_TRACE=FILE captures from the first device
// creation to process exit. Capture is process-wide and thread-safe.
#ifndef HIPLINE_TRACE_H_
#define HIPLINE_TRACE_H_

#include <stdbool.h>
#include <stdint.h>

#include "hipline/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// Starts capturing, keeping at most |max_events| events (0: one million);
// later events are counted as dropped. Discards an earlier capture.
HL_API void hl_trace_capture_begin(uint64_t max_events);

// Stops capturing and writes the events to |path|. PERMISSION_DENIED names
// the path when it cannot be opened.
HL_API hl_status_t hl_trace_capture_end(const char* path);

// True while capturing (false when tracing was compiled out).
HL_API bool hl_trace_capture_active(void);

// Number of events named |name| captured so far (for tests and tools).
HL_API uint64_t hl_trace_capture_count(const char* name);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_TRACE_H_
