// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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
#include <string.h>

#include "hipline/allocator.h"
#include "hipline/status.h"
#include "runtime/base/allocator_internal.h"
#include "runtime/base/spin.h"

// Precedes every object; 16-byte multiple keeps the object's alignment.
typedef struct hl_recycled_t hl_recycled_t;
struct hl_recycled_t {
  hl_recycled_t* next;  // On a free list (within a batch).
  hl_allocator_t allocator;
  // On the global list, in the first object of a batch only: the next batch
  // and this one's object count. Handing a batch over then touches its first
  // object alone; walking a batch that another core freed would miss the
  // cache on every object (about 300 ns each on the 2-core VMs).
  hl_recycled_t* next_batch;
  uint32_t batch_count;
  // Whether the object may be kept (hl_recyclable of |allocator|), decided
  // once when it is made.
  bool recyclable;
};
_Static_assert(sizeof(hl_recycled_t) % 16 == 0, "header keeps alignment");

// Objects moved between a thread's cache and the global list at a time.
#define HL_RECYCLER_BATCH 32

typedef struct hl_recycler_t {
  hl_spinlock_t lock;
  hl_recycled_t* head;  // The global list, batches of objects (|lock|).
  uint32_t count;       // Objects on it (|lock|).
  uint32_t capacity;    // Objects kept on it at most.
  size_t size;          // Object size in bytes.
  size_t zeroed;        // Bytes zeroed from its start when handed out again.
  const char* what;     // For messages: "a submission".
  atomic_int slot;      // 1 + index of the thread caches; 0: not yet; -1: none.
} hl_recycler_t;

#define HL_RECYCLER_INITIALIZER(object_size, max_kept, description)  \
  HL_RECYCLER_INITIALIZER_PREFIX(object_size, object_size, max_kept, \
                                 description)
// A recycler whose objects are handed out again with only their first
// |zeroed_bytes| zeroed: the rest (an array every user writes before it
// reads) keeps what its last user left. A new object is all zero.
#define HL_RECYCLER_INITIALIZER_PREFIX(object_size, zeroed_bytes, max_kept, \
                                       description)                         \
  {                                                                         \
    HL_SPINLOCK_INITIALIZER, NULL, 0, (max_kept), (object_size),            \
        (zeroed_bytes), (description), 0                                    \
  }

// Recyclers with thread caches (the rest use only the global list).
#define HL_RECYCLER_SLOTS 32
// A thread's cache holds at most this many objects of one recycler.
#define HL_RECYCLER_CACHE (2 * HL_RECYCLER_BATCH)

typedef struct hl_recycler_cache_t {
  hl_recycled_t* head;
  uint32_t count;
} hl_recycler_cache_t;

// This thread's caches, by slot, and whether its exit hook is registered
// (recycler.c; read here by the inline hit paths only).
extern _Thread_local hl_recycler_cache_t hl_recycler_caches_[HL_RECYCLER_SLOTS];
extern _Thread_local bool hl_recycler_thread_registered_;

// This thread's cache for |r| when the common case holds (|r| has a slot and
// this thread is registered), else NULL: no call, no side effect.
static inline hl_recycler_cache_t* hl_recycler_cache_ready(hl_recycler_t* r) {
  int slot = atomic_load_explicit(&r->slot, memory_order_acquire);
  // Registered implies the exit hook exists.
  if (__builtin_expect(slot > 0 && hl_recycler_thread_registered_, 1)) {
    return &hl_recycler_caches_[slot - 1];
  }
  return NULL;
}

// Past a hit in this thread's cache (recycler.c).
hl_status_t hl_recycler_alloc_slow(hl_recycler_t* recycler,
                                   hl_allocator_t allocator, void** out_object);
void hl_recycler_free_slow(hl_recycler_t* recycler, hl_recycled_t* header);

// A hit in this thread's cache: the object, zeroed (its |zeroed| first
// bytes); NULL otherwise.
static inline void* hl_recycler_take_cached(hl_recycler_t* r) {
  hl_recycler_cache_t* c = hl_recycler_cache_ready(r);
  if (__builtin_expect(!c || !c->head, 0)) return NULL;
  hl_recycled_t* h = c->head;
  c->head = h->next;
  --c->count;
  // The next object was most likely freed on another core: start fetching
  // it now rather than at the next allocation.
  if (c->head) __builtin_prefetch(c->head, 1);
  memset(h + 1, 0, r->zeroed);
  return h + 1;
}

// A zeroed object of the recycler's size, recycled when one is kept or else
// from |allocator| (the system allocator when it has no alloc function).
// The common case, a hit in this thread's cache, is inline (every operation
// allocates several objects); the rest is out of line.
static inline hl_status_t hl_recycler_alloc(hl_recycler_t* recycler,
                                            hl_allocator_t allocator,
                                            void** out_object) {
  // Only objects of the system allocator (no functions, or the system's)
  // are kept; recycler.c decides the rest.
  void* object = !allocator.alloc || hl_allocator_is_system(allocator)
                     ? hl_recycler_take_cached(recycler)
                     : NULL;
  if (__builtin_expect(object != NULL, 1)) {
    *out_object = object;
    return NULL;
  }
  return hl_recycler_alloc_slow(recycler, allocator, out_object);
}
// hl_recycler_alloc with the system allocator (an allocator with no
// functions means that), without building hl_allocator_system() at every
// call.
static inline hl_status_t hl_recycler_alloc_default(hl_recycler_t* recycler,
                                                    void** out_object) {
  hl_allocator_t none = {NULL, NULL, NULL};  // Folds to the cached path.
  return hl_recycler_alloc(recycler, none, out_object);
}
// Gives |object| (from hl_recycler_alloc on this recycler; NULL is ignored)
// back: kept for reuse, or freed through its allocator when the recycler
// keeps enough.
static inline void hl_recycler_free(hl_recycler_t* recycler, void* object) {
  if (!object) return;
  hl_recycled_t* h = (hl_recycled_t*)object - 1;
  hl_recycler_cache_t* c =
      h->recyclable ? hl_recycler_cache_ready(recycler) : NULL;
  if (__builtin_expect(c && c->count + 1 < HL_RECYCLER_CACHE, 1)) {
    h->next = c->head;
    c->head = h;
    ++c->count;
    return;
  }
  hl_recycler_free_slow(recycler, h);
}

#endif  // HIPLINE_RUNTIME_BASE_RECYCLER_H_
