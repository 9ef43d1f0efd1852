// Recyclers: bounded free lists of fixed-size objects.
//
// hipline's steady state makes no heap allocation: the objects every
// operation needs (submissions, timepoints, shared events, fences, roots,
// buffers, ops, host stream items) go back to a recycler when they die and
// are handed out again, zeroed, by the next operation. Objects are born on
// one thread (the submitter) and die on another (a stream worker); glibc's
// allocator pays for that with arena-lock contention and futex calls.
//
// A recycler is a global list under a spin lock plus a cache per thread
// (mimalloc's and the magazine allocators' idea): a thread allocates from
// and frees to its own cache without any lock, and moves objects to or from
// the global list HL_RECYCLER_BATCH at a time, so a producer/consumer pair
// of threads touches the shared lock once per batch. A thread's cache goes
// back to the global list when the thread exits.
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
#include "runtime/base/spin.h"

typedef struct hl_recycled_t hl_recycled_t;

// Objects moved between a thread's cache and the global list at a time.
#define HL_RECYCLER_BATCH 32

typedef struct hl_recycler_t {
  hl_spinlock_t lock;
  hl_recycled_t* head;  // The global list, batches of objects (|lock|).
  uint32_t count;       // Objects on it (|lock|).
  uint32_t capacity;    // Objects kept on it at most.
  size_t size;          // Object size in bytes.
  const char* what;     // For messages: "a submission".
  atomic_int slot;      // 1 + index of the thread caches; 0: not yet; -1: none.
} hl_recycler_t;

#define HL_RECYCLER_INITIALIZER(object_size, max_kept, description) \
  {                                                                 \
    HL_SPINLOCK_INITIALIZER, NULL, 0, (max_kept), (object_size),    \
        (description), 0                                            \
  }

// A zeroed object of the recycler's size, recycled when one is kept or else
// from |allocator| (the system allocator when it has no alloc function).
hl_status_t hl_recycler_alloc(hl_recycler_t* recycler, hl_allocator_t allocator,
                              void** out_object);
// hl_recycler_alloc with the system allocator (an allocator with no
// functions means that), without building hl_allocator_system() at every
// call.
static inline hl_status_t hl_recycler_alloc_default(hl_recycler_t* recycler,
                                                    void** out_object) {
  hl_allocator_t none = {NULL, NULL, NULL};
  return hl_recycler_alloc(recycler, none, out_object);
}
// Gives |object| (from hl_recycler_alloc on this recycler; NULL is ignored)
// back: kept for reuse, or freed through its allocator when the recycler
// keeps enough.
void hl_recycler_free(hl_recycler_t* recycler, void* object);

#endif  // HIPLINE_RUNTIME_BASE_RECYCLER_H_
