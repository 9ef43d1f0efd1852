// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "runtime/base/recycler.h"

#include <stdbool.h>
#include <string.h>
#include <threads.h>

#include "runtime/base/allocator_internal.h"
#include "runtime/base/spin.h"

static hl_recycler_t* _Atomic hl_recycler_slots_[HL_RECYCLER_SLOTS];
static atomic_int hl_recycler_slot_count_;
_Thread_local hl_recycler_cache_t hl_recycler_caches_[HL_RECYCLER_SLOTS];
_Thread_local bool hl_recycler_thread_registered_;
static tss_t hl_recycler_exit_key_;
static bool hl_recycler_exit_key_ok_;
static once_flag hl_recycler_once_ = ONCE_FLAG_INIT;

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
  // The system allocator as hl_allocator_system returns it, or with no
  // functions (what hl_recycler_alloc callers pass for "the default").
  return !a.alloc || hl_allocator_is_system(a);
#endif
}

// Puts the chain |first| (|n| objects, NULL-terminated) on the global list as
// one batch, or frees it when the list is full.
static void hl_recycler_give_chain(hl_recycler_t* r, hl_recycled_t* first,
                                   uint32_t n) {
  first->batch_count = n;
  hl_spinlock_lock(&r->lock);
  if (r->count + n <= r->capacity) {
    first->next_batch = r->head;
    r->head = first;
    r->count += n;
    first = NULL;
  }
  hl_spinlock_unlock(&r->lock);
  while (first) {
    hl_recycled_t* next = first->next;
    hl_allocator_free(first->allocator, first);
    first = next;
  }
}

// Takes the first batch off the global list (NULL when empty); |*out_n| is
// its object count.
static hl_recycled_t* hl_recycler_take_batch(hl_recycler_t* r,
                                             uint32_t* out_n) {
  hl_spinlock_lock(&r->lock);
  hl_recycled_t* first = r->head;
  if (first) {
    r->head = first->next_batch;
    r->count -= first->batch_count;
    *out_n = first->batch_count;
  }
  hl_spinlock_unlock(&r->lock);
  return first;
}

static void hl_recycler_thread_exit(void* unused) {
  (void)unused;
  int slots = atomic_load(&hl_recycler_slot_count_);
  if (slots > HL_RECYCLER_SLOTS) slots = HL_RECYCLER_SLOTS;
  for (int i = 0; i < slots; ++i) {
    hl_recycler_cache_t* c = &hl_recycler_caches_[i];
    hl_recycler_t* r = atomic_load(&hl_recycler_slots_[i]);
    if (!c->head || !r) continue;
    hl_recycler_give_chain(r, c->head, c->count);
    c->head = NULL;
    c->count = 0;
  }
}

static void hl_recycler_init_once(void) {
  hl_recycler_exit_key_ok_ =
      tss_create(&hl_recycler_exit_key_, hl_recycler_thread_exit) ==
      thrd_success;
}

// hl_recycler_cache past its first look: assigns |r| a slot and registers
// this thread's exit hook.
static __attribute__((noinline)) hl_recycler_cache_t* hl_recycler_cache_slow(
    hl_recycler_t* r) {
  int slot = atomic_load_explicit(&r->slot, memory_order_acquire);
  if (slot == 0) {
    call_once(&hl_recycler_once_, hl_recycler_init_once);
    int index = atomic_fetch_add(&hl_recycler_slot_count_, 1);
    int mine = index < HL_RECYCLER_SLOTS ? index + 1 : -1;
    if (mine > 0) atomic_store(&hl_recycler_slots_[index], r);
    int expected = 0;
    // Two first users: one slot wins, the other stays unused.
    if (!atomic_compare_exchange_strong(&r->slot, &expected, mine)) {
      mine = expected;
    }
    slot = mine;
  }
  if (slot < 0 || !hl_recycler_exit_key_ok_) return NULL;
  if (!hl_recycler_thread_registered_) {
    // A non-NULL value makes the exit hook run for this thread.
    if (tss_set(hl_recycler_exit_key_, (void*)1) != thrd_success) return NULL;
    hl_recycler_thread_registered_ = true;
  }
  return &hl_recycler_caches_[slot - 1];
}

// This thread's cache for |r|, or NULL (no slot left, or no exit hook:
// objects of a thread that exits must not be lost). Every allocation and
// free asks: the common case (a slot, a registered thread) is inline
// (hl_recycler_cache_ready in recycler.h), the rest is out of line.
static inline hl_recycler_cache_t* hl_recycler_cache(hl_recycler_t* r) {
  hl_recycler_cache_t* c = hl_recycler_cache_ready(r);
  return HL_LIKELY(c) ? c : hl_recycler_cache_slow(r);
}

hl_status_t hl_recycler_alloc_slow(hl_recycler_t* r, hl_allocator_t allocator,
                                   void** out_object) {
  hl_recycled_t* h = NULL;
  bool recyclable = hl_recyclable(allocator);
  if (recyclable) {
    hl_recycler_cache_t* c = hl_recycler_cache(r);
    if (c && !c->head) {
      // Refill the cache with a batch from the global list.
      c->head = hl_recycler_take_batch(r, &c->count);
    }
    if (c && c->head) {
      h = c->head;
      c->head = h->next;
      --c->count;
    } else if (!c) {
      uint32_t n = 0;
      h = hl_recycler_take_batch(r, &n);
      if (h && h->next) hl_recycler_give_chain(r, h->next, n - 1);
    }
  }
  if (h) {
    memset(h + 1, 0, r->zeroed);
  } else {
    if (!allocator.alloc) allocator = hl_allocator_system();
    HL_RETURN_IF_ERROR(
        hl_allocator_calloc(allocator, sizeof(*h) + r->size, (void**)&h),
        "allocating %s", r->what);
    h->allocator = allocator;
    h->recyclable = recyclable;
  }
  *out_object = h + 1;
  return NULL;
}

void hl_recycler_free_slow(hl_recycler_t* r, hl_recycled_t* h) {
  if (!h->recyclable) {
    hl_allocator_free(h->allocator, h);
    return;
  }
  hl_recycler_cache_t* c = hl_recycler_cache(r);
  if (!c) {
    h->next = NULL;
    hl_recycler_give_chain(r, h, 1);
    return;
  }
  h->next = c->head;
  c->head = h;
  if (++c->count < HL_RECYCLER_CACHE) return;
  // Full: a batch goes to the global list for the threads that allocate.
  hl_recycled_t* first = c->head;
  hl_recycled_t* last = first;
  for (uint32_t i = 1; i < HL_RECYCLER_BATCH; ++i) last = last->next;
  c->head = last->next;
  c->count -= HL_RECYCLER_BATCH;
  last->next = NULL;
  hl_recycler_give_chain(r, first, HL_RECYCLER_BATCH);
}
