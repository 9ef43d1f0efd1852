#include "runtime/base/recycler.h"

#include <stdbool.h>
#include <string.h>
#include <threads.h>

#include "runtime/base/spin.h"

// Precedes every object; 16-byte multiple keeps the object's alignment.
struct hl_recycled_t {
  hl_recycled_t* next;  // On the free list.
  hl_allocator_t allocator;
};
_Static_assert(sizeof(hl_recycled_t) % 16 == 0, "header keeps alignment");

static void hl_recycler_lock(hl_recycler_t* r) {
  for (uint32_t i = 0; atomic_flag_test_and_set_explicit(
           &r->lock, memory_order_acquire);
       ++i) {
    // The lock is held for a few instructions; a holder that was preempted
    // gets the core back.
    if (i < 256) {
      hl_cpu_relax();
    } else {
      thrd_yield();
    }
  }
}

static void hl_recycler_unlock(hl_recycler_t* r) {
  atomic_flag_clear_explicit(&r->lock, memory_order_release);
}

// Only objects of the system allocator are kept: a caller's allocator may
// be gone by the time a kept object would be freed, so its objects go back
// to it at once (the hook sees every allocation and free).
static bool hl_recyclable(hl_allocator_t a) {
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer builds free every object, so a use after free is still
  // caught.
  (void)a;
  return false;
#else
  hl_allocator_t system = hl_allocator_system();
  return a.self == system.self && a.alloc == system.alloc &&
         a.free == system.free;
#endif
}

void hl_recycler_initialize(hl_recycler_t* r, size_t object_size,
                            uint32_t max_kept, const char* description) {
  atomic_flag_clear(&r->lock);
  r->head = NULL;
  r->count = 0;
  r->capacity = max_kept;
  r->size = object_size;
  r->what = description;
  r->reused = 0;
  r->allocated = 0;
}

hl_status_t hl_recycler_alloc(hl_recycler_t* r, hl_allocator_t allocator,
                              void** out_object) {
  if (!allocator.alloc) allocator = hl_allocator_system();
  hl_recycled_t* h = NULL;
  bool recyclable = hl_recyclable(allocator);
  hl_recycler_lock(r);
  if (recyclable && r->head) {
    h = r->head;
    r->head = h->next;
    --r->count;
    ++r->reused;
  } else {
    ++r->allocated;
  }
  hl_recycler_unlock(r);
  if (h) {
    memset(h + 1, 0, r->size);
  } else {
    HL_RETURN_IF_ERROR(
        hl_allocator_calloc(allocator, sizeof(*h) + r->size, (void**)&h),
        "allocating %s", r->what);
    h->allocator = allocator;
  }
  *out_object = h + 1;
  return NULL;
}

void hl_recycler_free(hl_recycler_t* r, void* object) {
  if (!object) return;
  hl_recycled_t* h = (hl_recycled_t*)object - 1;
  if (!hl_recyclable(h->allocator)) {
    hl_allocator_free(h->allocator, h);
    return;
  }
  hl_recycler_lock(r);
  if (r->count < r->capacity) {
    h->next = r->head;
    r->head = h;
    ++r->count;
    h = NULL;
  }
  hl_recycler_unlock(r);
  if (h) hl_allocator_free(h->allocator, h);
}

void hl_recycler_drain(hl_recycler_t* r) {
  hl_recycler_lock(r);
  hl_recycled_t* h = r->head;
  r->head = NULL;
  r->count = 0;
  hl_recycler_unlock(r);
  while (h) {
    hl_recycled_t* next = h->next;
    hl_allocator_free(h->allocator, h);
    h = next;
  }
}

void hl_recycler_stats(hl_recycler_t* r, hl_recycler_stats_t* out) {
  hl_recycler_lock(r);
  out->reused = r->reused;
  out->allocated = r->allocated;
  out->kept = r->count;
  hl_recycler_unlock(r);
}
