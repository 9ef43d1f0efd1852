// Recyclers: bounded free lists of fixed-size objects.
//
// hipline's steady state makes no heap allocation: the objects every
// operation needs (submissions, timepoints, shared events, fences, roots,
// buffers, ops) come back to a recycler when they die and are handed out
// again, zeroed, by the next operation. Objects are born on one thread
// (the submitter) and die on another (the completion thread); glibc's
// allocator pays for that with arena-lock contention and futex calls, a
// recycler with a short spin lock.
//
// Each object carries a small header that remembers the host allocator it
// came from. Only objects of the system allocator are kept; a caller's
// allocator hook sees every allocation and free of its objects (it may be
// gone before a kept object would be freed). AddressSanitizer builds keep
// nothing, so a use after free is still caught. A recycler is a static
// object (HL_RECYCLER_INITIALIZER): no initialisation call, usable from any
// thread at any time; what it keeps is reachable until exit.
#ifndef HIPLINE_RUNTIME_BASE_RECYCLER_H_
#define HIPLINE_RUNTIME_BASE_RECYCLER_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hipline/allocator.h"
#include "hipline/status.h"

typedef struct hl_recycled_t hl_recycled_t;

typedef struct hl_recycler_t {
  atomic_flag lock;
  hl_recycled_t* head;
  uint32_t count;
  uint32_t capacity;  // Objects kept at most.
  size_t size;        // Object size in bytes.
  const char* what;   // For messages: "a submission".
  // Counters (under |lock|): objects handed out from the list, and objects
  // that needed the allocator.
  uint64_t reused;
  uint64_t allocated;
} hl_recycler_t;

#define HL_RECYCLER_INITIALIZER(object_size, max_kept, description) \
  {ATOMIC_FLAG_INIT, NULL, 0, (max_kept), (object_size), (description), 0, 0}

// Initialises a recycler that is not a static object (one per owner).
void hl_recycler_initialize(hl_recycler_t* recycler, size_t object_size,
                            uint32_t max_kept, const char* description);

// A zeroed object of the recycler's size, recycled when one is kept or else
// from |allocator| (the system allocator when it has no alloc function).
hl_status_t hl_recycler_alloc(hl_recycler_t* recycler, hl_allocator_t allocator,
                              void** out_object);
// Gives |object| (from hl_recycler_alloc on this recycler; NULL is ignored)
// back: kept for reuse, or freed through its allocator when the list is full.
void hl_recycler_free(hl_recycler_t* recycler, void* object);
// Frees every kept object through its allocator.
void hl_recycler_drain(hl_recycler_t* recycler);

typedef struct hl_recycler_stats_t {
  uint64_t reused;
  uint64_t allocated;
  uint32_t kept;
} hl_recycler_stats_t;
void hl_recycler_stats(hl_recycler_t* recycler, hl_recycler_stats_t* out);

#endif  // HIPLINE_RUNTIME_BASE_RECYCLER_H_
