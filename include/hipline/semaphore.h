// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Timeline semaphores: a monotonically increasing uint64 counter that can
// also be failed with a status.
//
// A semaphore is signalled from the host (hl_semaphore_signal) or by queue
// submissions whose signal fence names it. Host waits block (after a spin of
// at most 20 us) until the value is reached, the semaphore fails, or the
// deadline passes.
// Semaphores are reference counted and thread-safe.
#ifndef HIPLINE_SEMAPHORE_H_
#define HIPLINE_SEMAPHORE_H_

#include <stddef.h>
#include <stdint.h>

#include "hipline/allocator.h"
#include "hipline/status.h"
#include "hipline/time.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hl_semaphore_t hl_semaphore_t;

// Creates a semaphore with |initial_value|. The caller owns the result.
HL_API hl_status_t hl_semaphore_create(uint64_t initial_value,
                                       hl_allocator_t host_allocator,
                                       hl_semaphore_t** out_semaphore);
HL_API void hl_semaphore_retain(hl_semaphore_t* semaphore);
HL_API void hl_semaphore_release(hl_semaphore_t* semaphore);

// Stores the current value in |*out_value|. Returns a copy of the failure
// status (owned by the caller) if the semaphore has failed.
HL_API hl_status_t hl_semaphore_query(hl_semaphore_t* semaphore,
                                      uint64_t* out_value);

// Signals |value| from the host. |value| must be greater than the current
// value (OUT_OF_RANGE otherwise); a failed semaphore returns its failure; a
// queue's own timeline (hl_queue_timeline) is INVALID_ARGUMENT.
// Waiters whose values are now reached wake up, and queue submissions parked
// on them are issued.
HL_API hl_status_t hl_semaphore_signal(hl_semaphore_t* semaphore,
                                       uint64_t value);

// Fails |semaphore| with |status| (consumed; must not be OK). Every waiter,
// present and future, gets a copy of it, and every queue submission waiting
// on it fails. Only the first failure is kept; later ones are freed. Returns
// INVALID_ARGUMENT (and frees |status|) for a NULL semaphore or a queue's own
// timeline, which fails only with its queue.
HL_API hl_status_t hl_semaphore_fail(hl_semaphore_t* semaphore,
                                     hl_status_t status);

// Blocks until |semaphore| reaches |value|, fails (its status, copied) or
// |deadline| passes (DEADLINE_EXCEEDED). Spins for at most 20 us (pause,
// then yields) before it sleeps.
HL_API hl_status_t hl_semaphore_wait(hl_semaphore_t* semaphore, uint64_t value,
                                     hl_time_t deadline);

typedef enum hl_wait_mode_e {
  HL_WAIT_ALL = 0,  // Every semaphore reaches its value.
  HL_WAIT_ANY = 1,  // At least one does.
} hl_wait_mode_t;

// Waits on |count| (at most 64) semaphore@value pairs. For HL_WAIT_ANY,
// |out_index| (may be NULL) receives the index of a reached pair. A failure of
// ANY of the semaphores ends the wait at once with its status, in both modes,
// even while other pairs are still pending.
HL_API hl_status_t hl_semaphore_wait_many(hl_wait_mode_t mode, size_t count,
                                          hl_semaphore_t* const* semaphores,
                                          const uint64_t* values,
                                          hl_time_t deadline,
                                          size_t* out_index);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_SEMAPHORE_H_
