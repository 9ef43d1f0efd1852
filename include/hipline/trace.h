// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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
// memory grows with the events kept. Later events are counted as dropped
// (hl_trace_capture_dropped, the trace's otherData.dropped, and a warning
// when the trace is written). Discards an earlier capture.
HL_API void hl_trace_capture_begin(uint64_t max_events);

// Stops capturing and writes the events to |path| (NULL: discards them).
// PERMISSION_DENIED names the path when it cannot be opened, DATA_LOSS when
// a write fails (a full disk). Without an active capture it writes nothing
// and returns OK, so a second end never replaces a trace with an empty one.
HL_API hl_status_t hl_trace_capture_end(const char* path);

// Events dropped beyond the limit by the current or the last capture.
HL_API uint64_t hl_trace_capture_dropped(void);

// True while capturing (false when tracing was compiled out).
HL_API bool hl_trace_capture_active(void);

// Number of events named |name| captured so far (for tests and tools).
HL_API uint64_t hl_trace_capture_count(const char* name);

// Memory history, PyTorch's torch.cuda.memory._record_memory_history and
// _dump_snapshot: from hl_memory_history_begin, every alloca's memory and
// every free of every device (address, size, queue id as the stream, time)
// is recorded, at most |max_events| (0: one million; later ones are counted,
// hl_memory_history_dropped, and warned about). Discards an earlier history.
HL_API void hl_memory_history_begin(uint64_t max_events);
// Stops recording and writes the history to |snapshot_path| (NULL: discards
// it) as a PyTorch memory snapshot pickle: "segments" (the allocations live
// at the end, each with its one active_allocated block) and "device_traces"
// (per device, "alloc" and "free_completed" actions with addr, size, stream
// and time_us), which PyTorch's memory_viz opens and
// tools/hipline-trace-convert turns into a replayable log. Errors as
// hl_trace_capture_end's; without a history it writes nothing.
HL_API hl_status_t hl_memory_history_end(const char* snapshot_path);
// Events dropped beyond the limit by the current or the last history.
HL_API uint64_t hl_memory_history_dropped(void);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_TRACE_H_
