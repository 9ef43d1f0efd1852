// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Fences: sets of semaphore@value pairs, at most one pair per semaphore.
//
// Submissions take a wait fence and a signal fence. A NULL fence is empty.
// A fence retains its semaphores. Fences are not thread-safe: one thread
// builds a fence, after which any number may read it.
#ifndef HIPLINE_FENCE_H_
#define HIPLINE_FENCE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hipline/device.h"
#include "hipline/semaphore.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hl_fence_t hl_fence_t;

HL_API hl_status_t hl_fence_create(hl_allocator_t host_allocator,
                                   hl_fence_t** out_fence);
HL_API void hl_fence_retain(hl_fence_t* fence);
HL_API void hl_fence_release(hl_fence_t* fence);

// Adds |semaphore|@|value|; if the semaphore is already present the larger
// value is kept.
HL_API hl_status_t hl_fence_insert(hl_fence_t* fence, hl_semaphore_t* semaphore,
                                   uint64_t value);

// Adds every pair of |source| to |fence|, keeping the maximum per semaphore.
HL_API hl_status_t hl_fence_join(hl_fence_t* fence, const hl_fence_t* source);

// Removes every pair.
HL_API void hl_fence_clear(hl_fence_t* fence);

HL_API size_t hl_fence_count(const hl_fence_t* fence);

// Returns pair |index| (borrowed semaphore).
HL_API void hl_fence_entry(const hl_fence_t* fence, size_t index,
                           hl_semaphore_t** out_semaphore, uint64_t* out_value);

// Sets |*out_reached| when every pair is reached. Returns the failure of a
// failed semaphore (copied) instead.
HL_API hl_status_t hl_fence_is_reached(const hl_fence_t* fence,
                                       bool* out_reached);

// Blocks until every pair is reached (see hl_semaphore_wait_many).
HL_API hl_status_t hl_fence_wait(const hl_fence_t* fence, hl_time_t deadline);

// Calls |fn(user, status)| once, on |device|'s completion thread, when every
// pair of |fence| (copied now; NULL is empty) is reached, with |status| OK
// (NULL), or when a semaphore of it fails, with that failure. |status| is
// borrowed for the call (clone it to keep it). Never blocks and never calls
// |fn| on the caller's thread: an already reached fence is reported from the
// completion thread too. |fn| must return promptly and must not wait on
// |device|'s work. |device| (retained until the call) only names the thread.
// For event loops: wake the loop from |fn| instead of a thread per wait.
// INVALID_ARGUMENT for a NULL |device| or |fn|.
typedef void (*hl_fence_reached_fn_t)(void* user, hl_status_t status);
HL_API hl_status_t hl_fence_call_when_reached(const hl_fence_t* fence,
                                              hl_device_t* device,
                                              hl_fence_reached_fn_t fn,
                                              void* user);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_FENCE_H_
