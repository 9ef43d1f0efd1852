// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Queues: one backend stream plus a timeline semaphore.
//
// Every submission waits on a fence, runs its operations in queue order,
// then signals its fence and advances the queue's own timeline. Waits on
// values that nobody has submitted a signal for yet are parked without
// blocking the caller and issued once the signal is submitted. Waits the
// queue already covers (its frontier, or its own earlier signals) are elided.
// Queues are reference counted and thread-safe.
//
// Failures. A submission is issued only when each wait is reached, covered
// by the queue, or backed by the device timepoint of a submission issued
// without a known failure. A wait on a failed semaphore cancels the
// submission before anything of it is issued: its signals fail with that
// status, it gets no device timepoint, and whatever waits for it (on any
// queue, at any distance) is cancelled in turn. A cancelled dealloca leaves
// its buffer valid.
// The window (backends without stream ordered host work, that is hip): a
// failure that becomes known only after a dependent wait was issued on the
// device (the semaphore failed from the host while its signalling
// submission was in flight, or that submission failed as it ran) does not
// stop the dependent device work already enqueued; it runs, and only its
// signals fail. Host steps (host calls) are still skipped. See
// docs/timeline.md.
#ifndef HIPLINE_QUEUE_H_
#define HIPLINE_QUEUE_H_

#include <stdint.h>

#include "hipline/device.h"
#include "hipline/fence.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hl_queue_t hl_queue_t;
typedef struct hl_buffer_t hl_buffer_t;

// Creates a queue on |device| (retained).
HL_API hl_status_t hl_queue_create(hl_device_t* device, hl_queue_t** out_queue);
HL_API void hl_queue_retain(hl_queue_t* queue);
// Releases |queue| without waiting: submitted work holds the queue until it
// completes (call hl_queue_wait_idle first to wait for it). When the last
// reference of an idle queue goes, its stream and completion resources are
// given back before this returns.
HL_API void hl_queue_release(hl_queue_t* queue);

// Borrowed accessors.
HL_API hl_device_t* hl_queue_device(const hl_queue_t* queue);
// The queue a buffer's root was allocated on (hl_queue_alloca), where
// hl_queue_dealloca(NULL, ...) frees it. Borrowed: valid while |buffer| is
// (the root retains it); retain it to keep it longer. NULL for roots without
// one (hl_buffer_wrap) and for a NULL buffer.
HL_API hl_queue_t* hl_buffer_affinity_queue(const hl_buffer_t* buffer);
// The queue's timeline: value N means the Nth submission completed.
HL_API hl_semaphore_t* hl_queue_timeline(const hl_queue_t* queue);
// A small integer naming the queue within its device (for messages).
HL_API uint32_t hl_queue_id(const hl_queue_t* queue);

// An empty submission: waits on |wait_fence| then signals |signal_fence|.
HL_API hl_status_t hl_queue_barrier(hl_queue_t* queue,
                                    const hl_fence_t* wait_fence,
                                    const hl_fence_t* signal_fence);

// Runs |fn(user)| in queue order after |wait_fence|, then signals. |fn| runs
// on a runtime thread and must not block on this queue's own work.
typedef void (*hl_queue_host_fn_t)(void* user);
HL_API hl_status_t hl_queue_host_call(hl_queue_t* queue,
                                      const hl_fence_t* wait_fence,
                                      const hl_fence_t* signal_fence,
                                      hl_queue_host_fn_t fn, void* user);

// Blocks until every submission made before the call has finished on the
// stream: completed, failed or cancelled. None of it runs after this returns
// OK or the queue's failure; a failed queue is drained too, not abandoned.
// DEADLINE_EXCEEDED when |deadline| passes first (work may still run then).
HL_API hl_status_t hl_queue_wait_idle(hl_queue_t* queue, hl_time_t deadline);

// Backpressure. A queue holds at most its device's queue depth
// (hl_device_options_t.queue_depth, HIPLINE_QUEUE_DEPTH, default 1024) of
// submissions issued to its stream or ready to issue; a submission beyond
// that blocks the submitting thread until one completes, as a full HIP
// stream blocks the host (counted in hl_queue_stats_t.depth_stalls).
// Submissions parked on a signal nobody has submitted yet never block anyone
// (the signal may come from the blocked thread), and the runtime's
// completion thread never blocks. A host call that submits to its own queue
// while it is full (it would wait for itself) gets FAILED_PRECONDITION.
//
// hl_queue_wait_capacity waits for room until |deadline|: OK when a
// submission would not block now, DEADLINE_EXCEEDED when the queue stayed
// full, or the queue's failure. Use it before submitting when blocking
// without a deadline is not acceptable.
HL_API hl_status_t hl_queue_wait_capacity(hl_queue_t* queue,
                                          hl_time_t deadline);

// Returns the queue's failure (copied) if a backend error or checked-mode
// violation has failed the queue; OK otherwise. A failed queue fails every
// later submission with the same status.
HL_API hl_status_t hl_queue_status(hl_queue_t* queue);

typedef struct hl_queue_stats_t {
  uint64_t submissions;
  uint64_t submitted_value;  // Last value assigned on the timeline.
  uint64_t waits_issued;     // Device waits (stream-waits-event).
  uint64_t waits_elided;     // Waits covered by the frontier or reached.
  uint64_t parked;           // Submissions that waited for a signal.
  uint64_t failed;           // Submissions whose signals were failed.
  uint64_t depth_stalls;     // Submitters that waited for room (depth).
} hl_queue_stats_t;
HL_API void hl_queue_stats(hl_queue_t* queue, hl_queue_stats_t* out_stats);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_QUEUE_H_
