// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Fences: small sets of semaphore@value pairs.

#include <stdlib.h>
#include <string.h>

#include "runtime/base/recycler.h"
#include "runtime/timeline/timeline_internal.h"

// Operations make and drop fences all the time (an alloca's ready fence, a
// dealloca's waits, a root's use fence).
static hl_recycler_t hl_fence_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_fence_t), 4096, "a fence");

hl_status_t hl_fence_create(hl_allocator_t host_allocator,
                            hl_fence_t** out_fence) {
  if (!out_fence) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_fence_create: out_fence is NULL");
  }
  hl_fence_t* f = NULL;
  HL_RETURN_IF_ERROR(
      hl_recycler_alloc(&hl_fence_recycler_, host_allocator, (void**)&f),
      "creating a fence");
  atomic_init(&f->ref_count, 1);
  f->entries = f->inline_entries;
  f->capacity = sizeof(f->inline_entries) / sizeof(f->inline_entries[0]);
  *out_fence = f;
  return NULL;
}

void hl_fence_init_embedded(hl_fence_t* fence, hl_semaphore_t* unretained) {
  atomic_init(&fence->ref_count, 1);
  fence->unretained = unretained;
  fence->entries = fence->inline_entries;
  fence->count = 0;
  fence->capacity =
      sizeof(fence->inline_entries) / sizeof(fence->inline_entries[0]);
}

void hl_fence_deinit_embedded_slow(hl_fence_t* fence) {
  hl_fence_clear(fence);
  if (fence->entries != fence->inline_entries) free(fence->entries);
  fence->entries = fence->inline_entries;
  fence->capacity =
      sizeof(fence->inline_entries) / sizeof(fence->inline_entries[0]);
}

void hl_fence_retain(hl_fence_t* fence) {
  if (fence)
    atomic_fetch_add_explicit(&fence->ref_count, 1, memory_order_relaxed);
}

void hl_fence_clear(hl_fence_t* fence) {
  if (!fence) return;
  for (size_t i = 0; i < fence->count; ++i) {
    hl_semaphore_t* s = fence->entries[i].semaphore;
    if (s != fence->unretained) hl_semaphore_release(s);
  }
  fence->count = 0;
}

void hl_fence_release(hl_fence_t* fence) {
  if (!fence) return;
  if (atomic_fetch_sub_explicit(&fence->ref_count, 1, memory_order_acq_rel) !=
      1) {
    return;
  }
  hl_fence_clear(fence);
  if (fence->entries != fence->inline_entries) free(fence->entries);
  hl_recycler_free(&hl_fence_recycler_, fence);
}

hl_status_t hl_fence_insert(hl_fence_t* fence, hl_semaphore_t* semaphore,
                            uint64_t value) {
  if (!fence || !semaphore) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_fence_insert: NULL fence or semaphore");
  }
  for (size_t i = 0; i < fence->count; ++i) {
    if (fence->entries[i].semaphore == semaphore) {
      if (fence->entries[i].value < value) fence->entries[i].value = value;
      return NULL;
    }
  }
  if (fence->count == fence->capacity) {
    size_t capacity = fence->capacity * 2;
    hl_fence_entry_t* entries = malloc(capacity * sizeof(*entries));
    if (!entries) {
      return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                            "growing a fence to %zu entries", capacity);
    }
    memcpy(entries, fence->entries, fence->count * sizeof(*entries));
    if (fence->entries != fence->inline_entries) free(fence->entries);
    fence->entries = entries;
    fence->capacity = capacity;
  }
  if (semaphore != fence->unretained) hl_semaphore_retain(semaphore);
  fence->entries[fence->count].semaphore = semaphore;
  fence->entries[fence->count].value = value;
  ++fence->count;
  return NULL;
}

hl_status_t hl_fence_join(hl_fence_t* fence, const hl_fence_t* source) {
  if (!fence) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_fence_join: fence is NULL");
  }
  if (!source) return NULL;
  for (size_t i = 0; i < source->count; ++i) {
    HL_RETURN_IF_ERROR_PLAIN(hl_fence_insert(
        fence, source->entries[i].semaphore, source->entries[i].value));
  }
  return NULL;
}

void hl_fence_prune_reached(hl_fence_t* fence) {
  size_t kept = 0;
  for (size_t i = 0; i < fence->count; ++i) {
    hl_fence_entry_t e = fence->entries[i];
    if (!hl_semaphore_failure(e.semaphore) &&
        hl_semaphore_value(e.semaphore) >= e.value) {
      if (e.semaphore != fence->unretained) hl_semaphore_release(e.semaphore);
      continue;
    }
    fence->entries[kept++] = e;
  }
  fence->count = kept;
}

size_t hl_fence_count(const hl_fence_t* fence) {
  return fence ? fence->count : 0;
}

void hl_fence_entry(const hl_fence_t* fence, size_t index,
                    hl_semaphore_t** out_semaphore, uint64_t* out_value) {
  if (!fence || index >= fence->count) {
    if (out_semaphore) *out_semaphore = NULL;
    if (out_value) *out_value = 0;
    return;
  }
  if (out_semaphore) *out_semaphore = fence->entries[index].semaphore;
  if (out_value) *out_value = fence->entries[index].value;
}

hl_status_t hl_fence_is_reached(const hl_fence_t* fence, bool* out_reached) {
  if (!out_reached) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_fence_is_reached: out_reached is NULL");
  }
  *out_reached = true;
  if (!fence) return NULL;
  for (size_t i = 0; i < fence->count; ++i) {
    hl_semaphore_t* s = fence->entries[i].semaphore;
    hl_status_t failure = hl_semaphore_failure(s);
    if (failure) {
      *out_reached = false;
      return hl_status_clone(failure);
    }
    if (hl_semaphore_value(s) < fence->entries[i].value) *out_reached = false;
  }
  return NULL;
}

hl_status_t hl_fence_wait(const hl_fence_t* fence, hl_time_t deadline) {
  if (!fence || fence->count == 0) return NULL;
  // One wait over every pair, so a failure of any of them ends it.
  return hl_semaphore_wait_pairs(HL_WAIT_ALL, fence->count, fence->entries,
                                 deadline, NULL);
}

// Fence notification: watches every pending pair without blocking anyone,
// so a failure of any pair ends it. Each pending pair has one waiter, which
// fires once (reached or failed) under its semaphore's lock and only counts
// down; the last one, or a failure, queues the callback on the device's
// work thread, which unregisters what is left before it runs it.
// Nothing queues the callback while hl_fence_notify is still registering
// (the pending count holds one for it, and a failure seen then is left for
// it to queue): the callback's unregistering must come after the last
// registration. The notification lives until both the registering thread
// and the callback are done with it (refs).
typedef struct hl_fence_notify_t hl_fence_notify_t;
typedef struct hl_fence_notify_waiter_t {
  hl_waiter_t base;
  hl_fence_notify_t* owner;
} hl_fence_notify_waiter_t;

struct hl_fence_notify_t {
  hl_work_t work;
  hl_device_t* device;
  hl_fence_entry_t* entries;          // Retained semaphores.
  hl_fence_notify_waiter_t* waiters;  // One per entry.
  size_t count;
  // Pairs not reached yet, plus one held while registering.
  atomic_size_t pending;
  atomic_bool registering;      // hl_fence_notify is registering waiters.
  atomic_int refs;              // The registering thread's and the callback's.
  atomic_bool queued;           // The callback is queued (once).
  _Atomic(hl_status_t) status;  // The first failure seen.
  hl_fence_callback_t fn;
  void* user;
};

static void hl_fence_notify_unref(hl_fence_notify_t* n) {
  if (atomic_fetch_sub(&n->refs, 1) != 1) return;
  hl_device_t* device = n->device;
  free(n);
  hl_device_release(device);
}

static void hl_fence_notify_finish(hl_work_t* work) {
  hl_fence_notify_t* n =
      (hl_fence_notify_t*)((char*)work - offsetof(hl_fence_notify_t, work));
  // After this no notification runs on |n|: each ran, or is unregistered
  // under its semaphore's lock.
  for (size_t i = 0; i < n->count; ++i) {
    hl_waiter_unregister(&n->waiters[i].base);
  }
  hl_status_t status = atomic_load(&n->status);
  n->fn(n->user, status);
  hl_status_free(status);
  for (size_t i = 0; i < n->count; ++i)
    hl_semaphore_release(n->entries[i].semaphore);
  hl_fence_notify_unref(n);
}

static void hl_fence_notify_queue(hl_fence_notify_t* n) {
  if (!atomic_exchange(&n->queued, true)) {
    hl_device_enqueue_work(n->device, &n->work);
  }
}

// Records |failure| (borrowed) unless one is recorded.
static void hl_fence_notify_record_failure(hl_fence_notify_t* n,
                                           hl_status_t failure) {
  hl_status_t copy = hl_status_clone(failure);
  hl_status_t expected = NULL;
  if (!atomic_compare_exchange_strong(&n->status, &expected, copy)) {
    hl_status_free(copy);
  }
}

// A waiter fired (its semaphore's lock held): reached or failed.
static void hl_fence_notify_wake(hl_waiter_t* waiter) {
  hl_fence_notify_t* n = ((hl_fence_notify_waiter_t*)waiter)->owner;
  hl_status_t failure = hl_semaphore_failure(waiter->semaphore);
  if (failure) {
    // Recorded, then |registering| looked at; hl_fence_notify clears it,
    // then looks at the status (both sequentially consistent), so one of
    // the two queues the callback.
    hl_fence_notify_record_failure(n, failure);
    if (!atomic_load(&n->registering)) hl_fence_notify_queue(n);
  }
  if (atomic_fetch_sub(&n->pending, 1) == 1) hl_fence_notify_queue(n);
}

hl_status_t hl_fence_notify(const hl_fence_t* fence, hl_device_t* device,
                            hl_fence_callback_t fn, void* user) {
  size_t count = hl_fence_count(fence);
  // One block: the notification, then its entries, then its waiters.
  hl_fence_notify_t* n = calloc(
      1, sizeof(*n) + count * (sizeof(*n->entries) + sizeof(*n->waiters)));
  if (!n) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating a fence notification");
  }
  n->waiters = (hl_fence_notify_waiter_t*)(n + 1);
  n->entries = count ? (hl_fence_entry_t*)(n->waiters + count) : NULL;
  for (size_t i = 0; i < count; ++i) {
    n->entries[i] = fence->entries[i];
    hl_semaphore_retain(n->entries[i].semaphore);
    n->waiters[i].base.notify = hl_fence_notify_wake;
    n->waiters[i].owner = n;
  }
  n->count = count;
  n->device = device;
  hl_device_retain(device);
  n->fn = fn;
  n->user = user;
  n->work.fn = hl_fence_notify_finish;
  atomic_init(&n->pending, 1);
  atomic_init(&n->registering, true);
  atomic_init(&n->refs, 2);
  atomic_init(&n->queued, false);
  atomic_init(&n->status, NULL);
  for (size_t i = 0; i < count; ++i) {
    hl_semaphore_t* s = n->entries[i].semaphore;
    hl_semaphore_lock(s);
    hl_status_t failure = hl_semaphore_failure(s);
    if (failure) {
      hl_semaphore_unlock(s);
      hl_fence_notify_record_failure(n, failure);
      break;
    }
    // Registered first, then looked at (hl_semaphore_signal_owned).
    n->waiters[i].base.value = n->entries[i].value;
    hl_semaphore_add_waiter_locked(s, &n->waiters[i].base);
    if (hl_semaphore_value(s) < n->entries[i].value) {
      atomic_fetch_add(&n->pending, 1);
    } else {
      hl_semaphore_remove_waiter_locked(&n->waiters[i].base);
    }
    hl_semaphore_unlock(s);
  }
  atomic_store(&n->registering, false);
  if (atomic_load(&n->status)) hl_fence_notify_queue(n);
  if (atomic_fetch_sub(&n->pending, 1) == 1) hl_fence_notify_queue(n);
  hl_fence_notify_unref(n);  // The callback may have run and gone already.
  return NULL;
}

hl_status_t hl_fence_call_when_reached(const hl_fence_t* fence,
                                       hl_device_t* device,
                                       hl_fence_reached_fn_t fn, void* user) {
  if (!device || !fn) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_fence_call_when_reached: %s is NULL",
                          !device ? "device" : "fn");
  }
  return hl_fence_notify(fence, device, fn, user);
}
