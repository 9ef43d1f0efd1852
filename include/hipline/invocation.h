// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Functions and invocations: the import/export timeline layer.
//
// A function is a named callback with a signature. An invocation calls it on
// a queue with the coarse-fences convention: the callback receives a wait
// fence (everything its arguments depend on) and a signal fence (which it
// must signal when its work is done), enqueues its work, and returns result
// buffers.
//
// Export: each argument's wait is its mutation barrier (reads) or use fence
// (writes); after the call every argument's use fence includes the
// invocation's signal and writes move the mutation barrier there.
//
// Import: per distinct result root, hipline decides how the memory will be
// freed:
// - async (queue-ordered free on the invocation's queue once the caller
//   drops its last reference) when the root is ASYNC, on the same device,
//   has affinity to the invocation's queue, and is either provably unique
//   (every reference is held by the results) or assume_no_alias is on;
// - sync (the conservative refcount fallback of the device) otherwise.
// A root that is also an argument's root or is registered PERSISTENT is
// always imported sync and counted as alias_detected (the safety net).
//
// assume_no_alias: each invocation has its own value (default true). The
// process-wide value is unset, true or false, set by
// hl_set_assume_no_alias() or HIPLINE_ASSUME_NO_ALIAS (1|0|true|false|on|off,
// read at start-up); when set it overrides every invocation's value.
#ifndef HIPLINE_INVOCATION_H_
#define HIPLINE_INVOCATION_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hipline/buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hl_function_t hl_function_t;
typedef struct hl_invocation_t hl_invocation_t;

typedef enum hl_access_e {
  HL_ACCESS_READ = 1,
  HL_ACCESS_WRITE = 2,
  HL_ACCESS_READ_WRITE = 3,
} hl_access_t;

#define HL_FUNCTION_MAX_ARGUMENTS 32
#define HL_FUNCTION_MAX_RESULTS 32

typedef struct hl_function_signature_t {
  uint32_t argument_count;
  uint32_t result_count;
  // |argument_count| entries.
  const hl_access_t* argument_access;
} hl_function_signature_t;

// The callback. It enqueues work on |queue| that waits on |wait_fence| and
// signals |signal_fence| when done, and stores |result_count| buffers in
// |out_results| (ownership passes to the caller). A returned error fails the
// invocation's signal fence; results stored before the error are released.
typedef hl_status_t (*hl_function_fn_t)(void* user, hl_queue_t* queue,
                                        hl_buffer_t* const* arguments,
                                        size_t argument_count,
                                        const hl_fence_t* wait_fence,
                                        const hl_fence_t* signal_fence,
                                        hl_buffer_t** out_results,
                                        size_t result_count);

// Creates a function. |name| and the access list are copied.
HL_API hl_status_t hl_function_create(const char* name,
                                      const hl_function_signature_t* signature,
                                      hl_function_fn_t fn, void* user,
                                      hl_allocator_t host_allocator,
                                      hl_function_t** out_function);
HL_API void hl_function_retain(hl_function_t* function);
HL_API void hl_function_release(hl_function_t* function);
HL_API const char* hl_function_name(const hl_function_t* function);

// Process-wide registry of functions by name (retains |function|).
// Registering a taken name is ALREADY_EXISTS.
HL_API hl_status_t hl_function_register(hl_function_t* function);
HL_API hl_status_t hl_function_unregister(const char* name);
// Looks |name| up; the caller owns the returned reference. NOT_FOUND names
// the function.
HL_API hl_status_t hl_function_lookup(const char* name,
                                      hl_function_t** out_function);

// Creates an invocation of |function| on |queue| (both retained).
HL_API hl_status_t hl_invocation_create(hl_function_t* function,
                                        hl_queue_t* queue,
                                        hl_invocation_t** out_invocation);
HL_API void hl_invocation_release(hl_invocation_t* invocation);

// Appends an argument (retained). Too many arguments is OUT_OF_RANGE; after
// invoke it is FAILED_PRECONDITION.
HL_API hl_status_t hl_invocation_add_argument(hl_invocation_t* invocation,
                                              hl_buffer_t* buffer);

// Adds a semaphore@value the invocation must wait for, besides its
// arguments' exports.
HL_API hl_status_t hl_invocation_add_wait(hl_invocation_t* invocation,
                                          hl_semaphore_t* semaphore,
                                          uint64_t value);

// The per-invocation assume_no_alias value (default true).
HL_API void hl_invocation_set_assume_no_alias(hl_invocation_t* invocation,
                                              bool value);
HL_API bool hl_invocation_assume_no_alias(const hl_invocation_t* invocation);

typedef enum hl_setting_source_e {
  HL_SETTING_SOURCE_INVOCATION = 0,   // The invocation's own value.
  HL_SETTING_SOURCE_API = 1,          // hl_set_assume_no_alias.
  HL_SETTING_SOURCE_ENVIRONMENT = 2,  // HIPLINE_ASSUME_NO_ALIAS.
} hl_setting_source_t;

// Returns "invocation", "api" or "environment".
HL_API const char* hl_setting_source_name(hl_setting_source_t source);

// The value the invocation will actually use, and where it comes from.
// Fails (INVALID_ARGUMENT naming the variable) if HIPLINE_ASSUME_NO_ALIAS is
// invalid.
HL_API hl_status_t hl_invocation_effective_assume_no_alias(
    const hl_invocation_t* invocation, bool* out_value,
    hl_setting_source_t* out_source);

typedef enum hl_tristate_e {
  HL_TRISTATE_UNSET = -1,
  HL_TRISTATE_FALSE = 0,
  HL_TRISTATE_TRUE = 1,
} hl_tristate_t;

// Sets the process-wide value (UNSET clears it, including a value that came
// from the environment). Thread-safe.
HL_API void hl_set_assume_no_alias(hl_tristate_t value);
// Reads the process-wide value and its source (API or ENVIRONMENT; UNSET has
// no meaningful source). Returns the environment's parse error if any.
HL_API hl_status_t hl_get_assume_no_alias(hl_tristate_t* out_value,
                                          hl_setting_source_t* out_source);

// Calls the function asynchronously: exports the arguments, calls the
// callback, imports the results. Returns once the work is enqueued. Can be
// called once.
HL_API hl_status_t hl_invocation_invoke(hl_invocation_t* invocation);

// The invocation's signal fence (borrowed; valid while the invocation
// lives). Waiting on it waits for the function's work; joining it into
// another fence chains work without a host wait.
HL_API const hl_fence_t* hl_invocation_signal_fence(
    const hl_invocation_t* invocation);

HL_API size_t hl_invocation_result_count(const hl_invocation_t* invocation);
// Transfers result |index| to the caller (NULL afterwards; taking twice is
// FAILED_PRECONDITION).
HL_API hl_status_t hl_invocation_take_result(hl_invocation_t* invocation,
                                             size_t index,
                                             hl_buffer_t** out_buffer);

typedef struct hl_invocation_stats_t {
  uint64_t invocations;
  uint64_t async_imports;   // Result roots imported with a queue-ordered free.
  uint64_t sync_imports;    // Result roots left to the refcount fallback.
  uint64_t alias_detected;  // Roots the safety net forced to sync.
  uint64_t async_deallocs;  // Queue-ordered frees scheduled by imports.
  uint64_t fallback_releases_frontier;
  uint64_t fallback_releases_device_sync;
  uint64_t fallback_releases_ordered;  // Queue-ordered fallback frees.
} hl_invocation_stats_t;

// Counters of one device (fallback releases come from its memory stats).
HL_API hl_status_t hl_device_invocation_stats(hl_device_t* device,
                                              hl_invocation_stats_t* out_stats);
// Process-wide counters (all devices, including destroyed ones).
HL_API void hl_invocation_stats_global(hl_invocation_stats_t* out_stats);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_INVOCATION_H_
