// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Roots: the allocations behind buffers, their references, recorded uses
// and the return of their memory.

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/log.h"
#include "runtime/base/recycler.h"
#include "runtime/base/trace.h"
#include "runtime/memory/memory_history.h"
#include "runtime/memory/memory_internal.h"

static atomic_uint_least64_t hl_next_root_id_ = 1;

// Root ids are unique, not dense: each thread takes them HL_ROOT_ID_BLOCK at
// a time, so an alloca pays no shared increment.
#define HL_ROOT_ID_BLOCK 256
static _Thread_local uint64_t hl_root_id_next_;
static _Thread_local uint64_t hl_root_id_end_;

static uint64_t hl_root_next_id(void) {
  if (HL_UNLIKELY(hl_root_id_next_ == hl_root_id_end_)) {
    hl_root_id_next_ = atomic_fetch_add(&hl_next_root_id_, HL_ROOT_ID_BLOCK);
    hl_root_id_end_ = hl_root_id_next_ + HL_ROOT_ID_BLOCK;
  }
  return hl_root_id_next_++;
}

//===----------------------------------------------------------------------===//
// Roots
//===----------------------------------------------------------------------===//

// Every alloca makes a root (its op embedded) and a buffer; both are
// recycled (base/recycler.h). A root is zeroed up to its embedded fences
// (see hl_root_t).
static hl_recycler_t hl_root_recycler_ = HL_RECYCLER_INITIALIZER_PREFIX(
    sizeof(hl_root_t), offsetof(hl_root_t, use_fence_storage), 4096, "a root");
hl_recycler_t hl_buffer_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_buffer_t), 4096, "a buffer");

// A root with |refs| references (see hl_root_t.refs) on its first
// atomic: callers that hand them straight to a buffer and an operation pay
// no read-modify-write for them.
hl_status_t hl_root_create(hl_device_t* device, hl_queue_t* affinity,
                           hl_root_memory_t memory, hl_buffer_origin_t origin,
                           uint64_t size, uint64_t refs, hl_root_t** out_root) {
  hl_root_t* root = NULL;
  HL_RETURN_IF_ERROR(
      hl_recycler_alloc_default(&hl_root_recycler_, (void**)&root),
      "a root for %llu bytes", (unsigned long long)size);
  hl_spinlock_init(&root->lock);
  // The affinity queue (retained below, released after the fences) keeps
  // its timeline alive: its uses need no semaphore reference.
  hl_semaphore_t* own = affinity ? hl_queue_timeline(affinity) : NULL;
  hl_fence_init_embedded(&root->use_fence_storage, own);
  hl_fence_init_embedded(&root->mutation_barrier_storage, own);
  root->use_fence = &root->use_fence_storage;
  root->mutation_barrier = &root->mutation_barrier_storage;
  atomic_init(&root->refs, refs);
  root->id = hl_root_next_id();
  root->device = device;
  // An affinity queue holds its device for as long as the root holds the
  // queue (hl_root_destroy releases the queue last).
  if (!affinity) hl_device_retain(device);
  root->affinity_queue = affinity;
  hl_queue_retain(affinity);
  root->memory = memory;
  atomic_init(&root->origin, (int)origin);
  atomic_init(&root->state, HL_ROOT_PENDING);
  root->size = size;
  atomic_init(&root->ptr, NULL);
  atomic_init(&root->dealloca_scheduled, false);
  atomic_init(&root->escaped, false);
  atomic_init(&root->fallback_started, false);
  *out_root = root;
  return NULL;
}

void hl_root_retain(hl_root_t* root) {
  atomic_fetch_add_explicit(&root->refs, 1, memory_order_relaxed);
}

void hl_root_retain_for_op(hl_root_t* root) {
  atomic_fetch_add_explicit(&root->refs, HL_ROOT_OP_REF, memory_order_relaxed);
}

void hl_root_ref_snapshot(hl_root_t* root, uint32_t* out_total,
                          uint32_t* out_ops) {
  uint64_t refs = atomic_load_explicit(&root->refs, memory_order_acquire);
  *out_total = (uint32_t)refs;
  *out_ops = (uint32_t)(refs >> 32);
}

bool hl_root_release_for_op_unless_last(hl_root_t* root) {
  uint64_t refs = atomic_load_explicit(&root->refs, memory_order_relaxed);
  while ((uint32_t)refs > 1) {
    if (atomic_compare_exchange_weak_explicit(
            &root->refs, &refs, refs - HL_ROOT_OP_REF, memory_order_acq_rel,
            memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

void hl_root_destroy(hl_root_t* root) {
  hl_status_free(root->alloc_failure);
  hl_fence_deinit_embedded(root->use_fence);
  hl_fence_deinit_embedded(root->mutation_barrier);
  hl_queue_t* queue = root->affinity_queue;
  hl_device_t* device = root->device;
  hl_recycler_free(&hl_root_recycler_, root);
  if (queue) {
    // Its device reference covered the root's.
    hl_queue_release_internal(queue);
  } else {
    hl_device_release_internal(device);
  }
}

// hl_root_record_use with |root|'s lock held, or on a root nobody else can
// reach yet.
static void hl_root_record_use_locked(hl_root_t* root, hl_queue_t* queue,
                                      uint64_t value, bool write) {
  hl_semaphore_t* timeline = hl_queue_timeline(queue);
  hl_root_note_use_locked(root);
  if (hl_fence_count(root->use_fence) >= 8)
    hl_fence_prune_reached(root->use_fence);
  hl_status_t st = hl_fence_insert(root->use_fence, timeline, value);
  if (!st && write) {
    // Replaces this queue's earlier writes (queue order covers them) but
    // keeps other queues' until they are reached: nothing says this write
    // is ordered after theirs (it may not wait for them, or be cancelled),
    // and a reader must wait for every write that may still land.
    if (hl_fence_count(root->mutation_barrier) >= 8)
      hl_fence_prune_reached(root->mutation_barrier);
    st = hl_fence_insert(root->mutation_barrier, timeline, value);
  }
  if (st) {
    // A lost use would let a dealloca run early: make it loud.
    HL_LOG_ERROR("root %llu: recording a use failed: %s",
                 (unsigned long long)root->id, hl_status_message(st));
    hl_status_free(st);
  }
}

void hl_root_record_use(hl_root_t* root, hl_queue_t* queue, uint64_t value,
                        bool write) {
  hl_spinlock_lock(&root->lock);
  hl_root_record_use_locked(root, queue, value, write);
  hl_spinlock_unlock(&root->lock);
}

void hl_root_record_first_use(hl_root_t* root, hl_queue_t* queue,
                              uint64_t value) {
  hl_fence_t* uses = root->use_fence;
  hl_fence_t* writes = root->mutation_barrier;
  hl_semaphore_t* timeline = hl_queue_timeline(queue);
  if (!uses->count && !writes->count && timeline == uses->unretained &&
      timeline == writes->unretained) {
    // A new root on its own queue: both fences are empty and name that
    // queue's timeline without a reference, so the pair goes straight in.
    hl_fence_entry_t entry = {timeline, value};
    uses->entries[0] = entry;
    uses->count = 1;
    writes->entries[0] = entry;
    writes->count = 1;
    return;
  }
  hl_root_record_use_locked(root, queue, value, true);
}

hl_status_t hl_root_check_live(hl_root_t* root, const char* what) {
  int state = atomic_load(&root->state);
  if (HL_LIKELY(state == HL_ROOT_LIVE)) return NULL;
  if (state == HL_ROOT_FREED) {
    hl_memory_note(root->device, UINT32_MAX, HL_MEMORY_EVENT_USE_AFTER_FREE, 0);
    hl_spinlock_lock(&root->lock);
    hl_root_freer_t by = root->freed_by;
    hl_spinlock_unlock(&root->lock);
    char who[128];
    if (by.queue_id == UINT32_MAX) {
      snprintf(who, sizeof(who), "%s", by.what ? by.what : "an unknown path");
    } else {
      snprintf(who, sizeof(who), "%s on queue %u (submission %llu)", by.what,
               by.queue_id, (unsigned long long)by.value);
    }
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "use after free: %s touches root %llu (%llu bytes) "
                          "which was freed by %s",
                          what, (unsigned long long)root->id,
                          (unsigned long long)root->size, who);
  }
  if (state == HL_ROOT_FAILED && root->alloc_failure) {
    // The producer's failure, with the consumer named.
    return hl_status_annotate(
        hl_status_clone(root->alloc_failure),
        "%s touches root %llu (%llu bytes) whose allocation failed", what,
        (unsigned long long)root->id, (unsigned long long)root->size);
  }
  return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                        "%s touches root %llu (%llu bytes) whose allocation %s",
                        what, (unsigned long long)root->id,
                        (unsigned long long)root->size,
                        state == HL_ROOT_FAILED ? "failed" : "has not run");
}

bool hl_root_check_use(hl_root_t* root, const char* what,
                       hl_submission_t* submission, bool checked) {
  hl_status_t st = hl_root_check_live(root, what);
  if (HL_LIKELY(!st)) return true;
  bool freed = atomic_load(&root->state) == HL_ROOT_FREED;
  hl_submission_fail(submission, st, checked && freed);
  return false;
}

void hl_root_fail_allocation(hl_root_t* root, hl_status_t status) {
  hl_spinlock_lock(&root->lock);
  if (atomic_load(&root->state) == HL_ROOT_PENDING && !root->alloc_failure) {
    root->alloc_failure = hl_status_clone(status);
    atomic_store(&root->state, HL_ROOT_FAILED);  // Publishes alloc_failure.
  }
  hl_spinlock_unlock(&root->lock);
}

bool hl_root_mark_freed(hl_root_t* root, hl_root_freer_t who) {
  // A load and a store, not a compare-and-swap: LIVE is left only here, and
  // under the lock (PENDING becomes LIVE or FAILED, never the reverse).
  hl_spinlock_lock(&root->lock);
  bool marked =
      atomic_load_explicit(&root->state, memory_order_relaxed) == HL_ROOT_LIVE;
  if (marked) {
    root->freed_by = who;
    atomic_store_explicit(&root->state, HL_ROOT_FREED, memory_order_release);
  }
  hl_spinlock_unlock(&root->lock);
  return marked;
}

// hl_root_return_memory; a dealloca of queue |dealloca_queue| (UINT32_MAX:
// none) is counted with the freed bytes, under one lock, when the free
// succeeds.
static hl_status_t hl_root_return_memory_counting(hl_root_t* root,
                                                  hl_backend_stream_t* stream,
                                                  uint32_t dealloca_queue) {
  void* ptr = atomic_load(&root->ptr);
  if (root->memory == HL_ROOT_MEMORY_EXTERNAL) {
    if (root->release_fn) root->release_fn(root->release_user, ptr);
    return NULL;
  }
  uint32_t affinity = hl_queue_id(root->affinity_queue);
  hl_memory_history_free(root->device, ptr, root->size, affinity);
  if (root->suballocation) {
    // hipline's pool counts it in the same critical section as the free.
    return hl_memory_pool_free(root, stream, affinity, dealloca_queue);
  }
  hl_backend_t* backend = root->device->backend;
  hl_status_t st = backend->vtable->free_async(backend, ptr, stream);
  // The bytes leave the statistics whether or not the pool took them back
  // (the root is freed either way).
  if (!st && dealloca_queue != UINT32_MAX) {
    hl_memory_note_two(root->device, affinity, HL_MEMORY_EVENT_FREE_BYTES,
                       root->size, dealloca_queue, HL_MEMORY_EVENT_DEALLOCA, 0);
  } else {
    hl_memory_note(root->device, affinity, HL_MEMORY_EVENT_FREE_BYTES,
                   root->size);
  }
  return st;
}

hl_status_t hl_root_return_memory(hl_root_t* root,
                                  hl_backend_stream_t* stream) {
  return hl_root_return_memory_counting(root, stream, UINT32_MAX);
}

hl_status_t hl_root_free_memory(hl_root_t* root, hl_backend_stream_t* stream,
                                hl_root_freer_t who) {
  if (!hl_root_mark_freed(root, who)) {
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "root %llu freed twice (second: %s on queue %u, "
                          "submission %llu)",
                          (unsigned long long)root->id, who.what, who.queue_id,
                          (unsigned long long)who.value);
  }
  return hl_root_return_memory_counting(root, stream, who.queue_id);
}

void hl_root_mark_escaped(hl_root_t* root) {
  if (atomic_load_explicit(&root->escaped, memory_order_relaxed)) return;
  if (atomic_exchange(&root->escaped, true)) return;
  hl_memory_note(
      root->device,
      root->affinity_queue ? hl_queue_id(root->affinity_queue) : UINT32_MAX,
      HL_MEMORY_EVENT_ESCAPE, 0);
}

const char* hl_buffer_origin_name(hl_buffer_origin_t origin) {
  switch (origin) {
    case HL_BUFFER_ORIGIN_ASYNC:
      return "async";
    case HL_BUFFER_ORIGIN_EXTERNAL:
      return "external";
    case HL_BUFFER_ORIGIN_PERSISTENT:
      return "persistent";
  }
  return "unknown";
}

hl_buffer_origin_t hl_buffer_origin(const hl_buffer_t* buffer) {
  return buffer ? (hl_buffer_origin_t)atomic_load(&buffer->root->origin)
                : HL_BUFFER_ORIGIN_ASYNC;
}
