// Roots, buffers, timeline resources, statistics and the fallback reclaimer.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/log.h"
#include "runtime/base/recycler.h"
#include "runtime/base/trace.h"
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

//===----------------------------------------------------------------------===//
// Memory state and statistics
//===----------------------------------------------------------------------===//

static void hl_memory_state_destroy(hl_device_t* device, void* opaque) {
  (void)device;
  hl_memory_state_t* state = (hl_memory_state_t*)opaque;
  hl_memory_pool_deinitialize(state);
  mtx_destroy(&state->mutex);
  free(state->per_queue);
  free(state);
}

// Guards the lazy creation of per-device memory state; separate from the
// timeline's locks because statistics are noted while one is held.
static mtx_t hl_memory_state_mutex_;
static once_flag hl_memory_state_once_ = ONCE_FLAG_INIT;
static void hl_memory_state_mutex_init(void) {
  mtx_init(&hl_memory_state_mutex_, mtx_plain);
}

hl_status_t hl_memory_state(hl_device_t* device,
                            hl_memory_state_t** out_state) {
  hl_memory_state_t* existing = hl_memory_state_get(device);
  if (HL_LIKELY(existing)) {
    *out_state = existing;
    return NULL;
  }
  call_once(&hl_memory_state_once_, hl_memory_state_mutex_init);
  mtx_lock(&hl_memory_state_mutex_);
  if (!hl_memory_state_get(device)) {
    hl_memory_state_t* state = calloc(1, sizeof(*state));
    if (state && mtx_init(&state->mutex, mtx_plain) != thrd_success) {
      free(state);
      state = NULL;
    }
    if (state) {
      hl_spinlock_init(&state->stats_lock);
      hl_device_extension_install(device, HL_DEVICE_EXTENSION_MEMORY, state,
                                  hl_memory_state_destroy);
    }
  }
  hl_memory_state_t* state = hl_memory_state_get(device);
  mtx_unlock(&hl_memory_state_mutex_);
  *out_state = state;
  return state ? NULL
               : HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                                "allocating the memory statistics");
}

static inline void hl_memory_apply(hl_memory_stats_t* s,
                                   hl_memory_event_t event, uint64_t bytes) {
  switch (event) {
    case HL_MEMORY_EVENT_ALLOCA:
      ++s->allocas;
      s->bytes_in_use += bytes;
      if (s->bytes_in_use > s->bytes_in_use_peak)
        s->bytes_in_use_peak = s->bytes_in_use;
      break;
    case HL_MEMORY_EVENT_DEALLOCA:
      ++s->deallocas;
      break;
    case HL_MEMORY_EVENT_DEALLOCA_CANCELLED:
      ++s->deallocas_cancelled;
      break;
    case HL_MEMORY_EVENT_FREE_BYTES:
      s->bytes_in_use -= bytes < s->bytes_in_use ? bytes : s->bytes_in_use;
      break;
    case HL_MEMORY_EVENT_FALLBACK_FRONTIER:
      ++s->fallback_releases_frontier;
      break;
    case HL_MEMORY_EVENT_FALLBACK_DEVICE_SYNC:
      ++s->fallback_releases_device_sync;
      break;
    case HL_MEMORY_EVENT_FALLBACK_ORDERED:
      ++s->fallback_releases_ordered;
      break;
    case HL_MEMORY_EVENT_FALLBACK_DEVICE_SYNC_OWED:
      ++s->fallback_device_sync_owed;
      break;
    case HL_MEMORY_EVENT_ESCAPE:
      ++s->escaped_roots;
      break;
    case HL_MEMORY_EVENT_OOM:
      ++s->ooms;
      break;
    case HL_MEMORY_EVENT_USE_AFTER_FREE:
      ++s->use_after_free;
      break;
  }
}

static atomic_uint_least64_t hl_global_frontier_releases_;
static atomic_uint_least64_t hl_global_device_sync_releases_;
static atomic_uint_least64_t hl_global_ordered_releases_;

void hl_memory_global_fallbacks(uint64_t* out_frontier,
                                uint64_t* out_device_sync,
                                uint64_t* out_ordered) {
  *out_frontier = atomic_load(&hl_global_frontier_releases_);
  *out_device_sync = atomic_load(&hl_global_device_sync_releases_);
  *out_ordered = atomic_load(&hl_global_ordered_releases_);
}

// hl_memory_per_queue_locked when the table must grow.
static __attribute__((noinline)) hl_memory_stats_t* hl_memory_per_queue_grow(
    hl_memory_state_t* state, uint32_t queue_id) {
  if (queue_id >= state->per_queue_capacity) {
    uint32_t capacity =
        state->per_queue_capacity ? state->per_queue_capacity : 8;
    while (capacity <= queue_id) capacity *= 2;
    hl_memory_stats_t* table =
        realloc(state->per_queue, capacity * sizeof(*table));
    if (!table) return NULL;
    memset(table + state->per_queue_capacity, 0,
           (capacity - state->per_queue_capacity) * sizeof(*table));
    state->per_queue = table;
    state->per_queue_capacity = capacity;
  }
  return &state->per_queue[queue_id];
}

// The statistics of queue |queue_id| (grown on demand), or NULL for
// UINT32_MAX or when growing fails. |stats_lock| held.
static inline hl_memory_stats_t* hl_memory_per_queue_locked(
    hl_memory_state_t* state, uint32_t queue_id) {
  if (HL_LIKELY(queue_id < state->per_queue_capacity)) {
    return &state->per_queue[queue_id];
  }
  return queue_id == UINT32_MAX ? NULL
                                : hl_memory_per_queue_grow(state, queue_id);
}

void hl_memory_note_elision(hl_device_t* device, uint32_t queue_id,
                            uint64_t fills_elided, uint64_t fills_shrunk,
                            uint64_t bytes) {
  hl_memory_state_t* state = NULL;
  hl_status_t st = hl_memory_state(device, &state);
  if (st) {
    hl_status_ignore(st);  // Statistics only.
    return;
  }
  hl_spinlock_lock(&state->stats_lock);
  for (int i = 0; i < 2; ++i) {
    hl_memory_stats_t* s =
        i == 0 ? &state->stats : hl_memory_per_queue_locked(state, queue_id);
    if (!s) continue;
    ++s->command_buffer_executions;
    s->fills_elided += fills_elided;
    s->fills_shrunk += fills_shrunk;
    s->fill_bytes_elided += bytes;
  }
  hl_spinlock_unlock(&state->stats_lock);
}

static inline void hl_memory_count_global(hl_memory_event_t event) {
  if (event == HL_MEMORY_EVENT_FALLBACK_FRONTIER) {
    atomic_fetch_add(&hl_global_frontier_releases_, 1);
  } else if (event == HL_MEMORY_EVENT_FALLBACK_DEVICE_SYNC) {
    atomic_fetch_add(&hl_global_device_sync_releases_, 1);
  } else if (event == HL_MEMORY_EVENT_FALLBACK_ORDERED) {
    atomic_fetch_add(&hl_global_ordered_releases_, 1);
  }
}

static inline void hl_memory_apply_locked(hl_memory_state_t* state,
                                          uint32_t queue_id,
                                          hl_memory_event_t event,
                                          uint64_t bytes) {
  hl_memory_apply(&state->stats, event, bytes);
  hl_memory_stats_t* per_queue = hl_memory_per_queue_locked(state, queue_id);
  if (per_queue) hl_memory_apply(per_queue, event, bytes);
}

// The device's memory state for a statistics note, or NULL (statistics
// only: a state that cannot be made is not an error).
static inline hl_memory_state_t* hl_memory_state_for_note(hl_device_t* device) {
  hl_memory_state_t* state = hl_memory_state_get(device);
  if (HL_LIKELY(state)) return state;
  hl_status_t st = hl_memory_state(device, &state);
  if (st) {
    hl_status_free(st);
    return NULL;
  }
  return state;
}

void hl_memory_note_locked(hl_memory_state_t* state, uint32_t queue_id,
                           hl_memory_event_t event, uint64_t bytes) {
  hl_memory_count_global(event);
  hl_memory_apply_locked(state, queue_id, event, bytes);
}

void hl_memory_note(hl_device_t* device, uint32_t queue_id,
                    hl_memory_event_t event, uint64_t bytes) {
  hl_memory_count_global(event);
  hl_memory_state_t* state = hl_memory_state_for_note(device);
  if (!state) return;
  hl_spinlock_lock(&state->stats_lock);
  hl_memory_apply_locked(state, queue_id, event, bytes);
  hl_spinlock_unlock(&state->stats_lock);
}

void hl_memory_note_two(hl_device_t* device, uint32_t queue_a,
                        hl_memory_event_t event_a, uint64_t bytes_a,
                        uint32_t queue_b, hl_memory_event_t event_b,
                        uint64_t bytes_b) {
  hl_memory_count_global(event_a);
  hl_memory_count_global(event_b);
  hl_memory_state_t* state = hl_memory_state_for_note(device);
  if (!state) return;
  hl_spinlock_lock(&state->stats_lock);
  hl_memory_apply_locked(state, queue_a, event_a, bytes_a);
  hl_memory_apply_locked(state, queue_b, event_b, bytes_b);
  hl_spinlock_unlock(&state->stats_lock);
}

static hl_status_t hl_memory_fill_reserved(hl_device_t* device,
                                           hl_memory_stats_t* out) {
  HL_RETURN_IF_ERROR_PLAIN(hl_memory_pool_fill_stats(device, out));
  hl_backend_counts_t counts;
  memset(&counts, 0, sizeof(counts));
  device->backend->vtable->live_counts(device->backend, &counts);
  out->streams_live = counts.live_streams;
  hl_device_lock(device);
  out->events_pooled = device->free_event_count;
  hl_device_unlock(device);
  out->events_live = atomic_load(&device->live_events);
  return NULL;
}

hl_status_t hl_device_memory_stats(hl_device_t* device,
                                   hl_memory_stats_t* out_stats) {
  if (!device || !out_stats) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_device_memory_stats: NULL device or out_stats");
  }
  hl_memory_state_t* state = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_memory_state(device, &state));
  hl_spinlock_lock(&state->stats_lock);
  *out_stats = state->stats;
  hl_spinlock_unlock(&state->stats_lock);
  return hl_memory_fill_reserved(device, out_stats);
}

hl_status_t hl_queue_memory_stats(hl_queue_t* queue,
                                  hl_memory_stats_t* out_stats) {
  if (!queue || !out_stats) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_memory_stats: NULL queue or out_stats");
  }
  hl_device_t* device = hl_queue_device(queue);
  hl_memory_state_t* state = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_memory_state(device, &state));
  uint32_t id = hl_queue_id(queue);
  hl_spinlock_lock(&state->stats_lock);
  if (id < state->per_queue_capacity) {
    *out_stats = state->per_queue[id];
  } else {
    memset(out_stats, 0, sizeof(*out_stats));
  }
  hl_spinlock_unlock(&state->stats_lock);
  return hl_memory_fill_reserved(device, out_stats);
}

//===----------------------------------------------------------------------===//
// Roots
//===----------------------------------------------------------------------===//

// Every alloca makes a root and a buffer; both are recycled
// (base/recycler.h).
static hl_recycler_t hl_root_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_root_t), 4096, "a root");
static hl_recycler_t hl_buffer_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_buffer_t), 4096, "a buffer");

// A root with |refs| references (see hl_root_t.refs) on its first
// atomic: callers that hand them straight to a buffer and an operation pay
// no read-modify-write for them.
static hl_status_t hl_root_create(hl_device_t* device, hl_queue_t* affinity,
                                  hl_root_memory_t memory,
                                  hl_buffer_origin_t origin, uint64_t size,
                                  uint64_t refs, hl_root_t** out_root) {
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

#define HL_ROOT_OP_REF ((UINT64_C(1) << 32) + 1)

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

static void hl_root_last_release(hl_root_t* root);

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

void hl_root_release_for_op(hl_root_t* root) {
  uint64_t old = atomic_fetch_sub_explicit(&root->refs, HL_ROOT_OP_REF,
                                           memory_order_acq_rel);
  if ((uint32_t)old == 1) hl_root_last_release(root);
}

static void hl_root_destroy(hl_root_t* root) {
  hl_status_free(root->alloc_failure);
  hl_fence_deinit_embedded(root->use_fence);
  hl_fence_deinit_embedded(root->mutation_barrier);
  hl_queue_t* queue = root->affinity_queue;
  hl_device_t* device = root->device;
  hl_recycler_free(&hl_root_recycler_, root);
  if (queue) {
    hl_queue_release(queue);  // Its device reference covered the root's.
  } else {
    hl_device_release_internal(device);
  }
}

// True when the memory of |root| would need the fallback if its last buffer
// went now: it is (or will be) allocated, nothing frees it in queue order yet
// and the fallback has not taken over already.
static bool hl_root_wants_fallback(hl_root_t* root) {
  int state = atomic_load(&root->state);
  return (state == HL_ROOT_LIVE || state == HL_ROOT_PENDING) &&
         !atomic_load(&root->dealloca_scheduled) &&
         !atomic_load(&root->fallback_started);
}

void hl_root_release(hl_root_t* root) {
  if (!root) return;
  // Acquire: a reference dropped on another thread is ordered before this.
  uint64_t old = atomic_load_explicit(&root->refs, memory_order_acquire);
  if (old == 1 && !hl_root_wants_fallback(root)) {
    // The caller holds the only reference (no operation holds one), so no
    // other thread can take or drop one (every retain starts from a held
    // reference): the count needs no read-modify-write to reach zero.
    atomic_store_explicit(&root->refs, 0, memory_order_relaxed);
    hl_root_last_release(root);
    return;
  }
  for (;;) {
    uint32_t total = (uint32_t)old;
    uint32_t ops = (uint32_t)(old >> 32);
    if (total - ops == 1 && hl_root_wants_fallback(root)) {
      // The last buffer goes (operations may still be in flight): turn this
      // reference into an operation reference owned by the fallback, so the
      // fallback acts now, on the releasing thread, with the root's use
      // fence complete (every in-flight operation recorded its use when it
      // was submitted). Nobody else can reach the root any more.
      if (atomic_compare_exchange_weak_explicit(
              &root->refs, &old, old + (UINT64_C(1) << 32),
              memory_order_acq_rel, memory_order_relaxed)) {
        atomic_store(&root->fallback_started, true);
        hl_memory_fallback_release(root);
        return;
      }
      continue;
    }
    if (atomic_compare_exchange_weak_explicit(&root->refs, &old, old - 1,
                                              memory_order_acq_rel,
                                              memory_order_relaxed)) {
      if (total == 1) hl_root_last_release(root);
      return;
    }
  }
}

static void hl_memory_fallback_orphan(hl_root_t* root);

static void hl_root_last_release(hl_root_t* root) {
  int state = atomic_load(&root->state);
  if (state == HL_ROOT_LIVE) {
    // Still live with no reference left: a dealloca (explicit, an import's
    // or the ordered fallback's) was cancelled because one of its waits
    // failed after the last buffer went. Free it the conservative way.
    hl_memory_fallback_orphan(root);
    return;
  }
  // Otherwise the memory is gone already (freed), or there never was any
  // (the alloca failed or never ran): only the metadata remains.
  hl_root_destroy(root);
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

//===----------------------------------------------------------------------===//
// Fallback release
//===----------------------------------------------------------------------===//
//
// When the last buffer of a root goes without a dealloca, hl_root_release
// turns that reference into an operation reference owned by the fallback
// (hl_memory_fallback_release), so the decision is made on the releasing
// thread while operations may still be in flight; their uses are already in
// the root's use fence. The modes:
// - ORDERED: an un-escaped root gets a queue-ordered free on its affinity
//   queue after its use fence (hl_root_dealloca_as). Nothing waits.
// - FRONTIER (and escaped roots under ORDERED): free once every queue of the
//   device has reached what it had submitted at release time, and every
//   recorded use is reached.
// - DEVICE_SYNC: the releasing thread drains every stream of the device and
//   then frees. The completion thread never drains (it would stall every
//   completion behind the device while the submitter runs ahead): a release
//   there owes the drain to the next host thread that allocates on the device
//   (hl_memory_pay_owed_drains), with a frontier notification as the backstop
//   for a program that never allocates again.
// A root whose refcount reaches zero while still live (a dealloca cancelled
// by a failed wait after the last buffer went) is an orphan and is freed the
// frontier way (hl_memory_fallback_orphan).

struct hl_fallback_t {
  atomic_int refs;       // The notification and the owed list each hold one.
  hl_root_t* root;       // An operation reference, or the last one when orphan.
  bool orphan;           // Destroy the root when done (no reference is left).
  hl_fence_t* frontier;  // What every queue of the device had submitted.
  hl_fence_t* fence;     // |frontier| and every recorded use.
  const char* who;
  hl_fallback_t* next_owed;
  hl_fallback_t* next_deferred;
  bool failed;  // A pair of |fence| failed.
};

static bool hl_on_completion_thread(hl_device_t* device) {
  return thrd_equal(thrd_current(), device->work_thread);
}

// Drains every queue's stream of the device (stop-the-world).
static void hl_memory_drain_streams(hl_device_t* device) {
  HL_TRACE_ZONE_BEGIN(zone, "FallbackDrain");
  hl_queue_t** queues = NULL;
  uint32_t count = 0;
  hl_status_t st = hl_device_snapshot_queues(device, &queues, &count);
  if (st) {
    HL_LOG_ERROR("fallback release: cannot list queues: %s",
                 hl_status_message(st));
    hl_status_free(st);
    HL_TRACE_ZONE_END(zone);
    return;
  }
  for (uint32_t i = 0; i < count; ++i) {
    hl_queue_drain(queues[i]);
    hl_queue_release(queues[i]);
  }
  free(queues);
  HL_TRACE_ZONE_END(zone);
}

// Frees the root's memory on its affinity stream unless another path did
// already (the owed drain and its backstop race; the first one frees).
static void hl_memory_fallback_free(hl_root_t* root, const char* who) {
  // Freed, or never allocated.
  if (!hl_root_mark_freed(root, hl_root_freer(who))) return;
  hl_backend_stream_t* stream =
      root->affinity_queue ? hl_queue_stream(root->affinity_queue) : NULL;
  hl_status_t st = hl_root_return_memory(root, stream);
  if (st) {
    HL_LOG_ERROR("fallback release of root %llu: %s",
                 (unsigned long long)root->id, hl_status_message(st));
    hl_status_free(st);
  }
}

// Drops the fallback's hold on |root| once its memory is dealt with.
static void hl_memory_fallback_done(hl_root_t* root, bool orphan) {
  if (orphan) {
    hl_root_destroy(root);
  } else {
    hl_root_release_for_op(root);
  }
}

static void hl_fallback_unref(hl_fallback_t* fb) {
  if (atomic_fetch_sub(&fb->refs, 1) != 1) return;
  hl_root_t* root = fb->root;
  bool orphan = fb->orphan;
  hl_fence_release(fb->frontier);
  hl_fence_release(fb->fence);
  free(fb);
  hl_memory_fallback_done(root, orphan);
}

static void hl_memory_frontier_finish(hl_fallback_t* fb, bool failed);

static void hl_memory_failed_streams_fired(void* user, hl_status_t status) {
  hl_memory_frontier_finish((hl_fallback_t*)user, status != NULL);
}

// A pair of |fb->fence| failed: a queue failed, so its timeline will not
// say when its stream is done with the memory, but the queue's done
// semaphore will (it counts failed submissions too and never fails).
// Replaces each failed pair with its queue's done pair and waits again,
// without blocking. Returns false when that cannot be arranged: a failed
// timeline that is no queue of this device (another device's use), or no
// memory; the caller drains then.
static bool hl_memory_await_failed_streams(hl_fallback_t* fb) {
  hl_device_t* device = fb->root->device;
  hl_fence_t* fence = NULL;
  hl_queue_t** queues = NULL;
  uint32_t count = 0;
  hl_status_t st = hl_fence_create(device->host_allocator, &fence);
  if (!st) st = hl_device_snapshot_queues(device, &queues, &count);
  for (size_t i = 0; !st && i < fb->fence->count; ++i) {
    hl_fence_entry_t e = fb->fence->entries[i];
    if (hl_semaphore_failure(e.semaphore)) {
      hl_semaphore_t* done = NULL;
      for (uint32_t q = 0; q < count && !done; ++q) {
        if (hl_queue_timeline(queues[q]) == e.semaphore) {
          done = hl_queue_done(queues[q]);
        }
      }
      if (!done) {
        st = HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                            "a failed timeline of another device");
        continue;  // Ends the loop.
      }
      e.semaphore = done;
    }
    st = hl_fence_insert(fence, e.semaphore, e.value);
  }
  for (uint32_t q = 0; q < count; ++q) hl_queue_release(queues[q]);
  free(queues);
  if (!st) {
    st = hl_fence_notify(fence, device, hl_memory_failed_streams_fired, fb);
  }
  if (!st) {
    hl_fence_release(fb->fence);
    fb->fence = fence;
    return true;
  }
  hl_status_free(st);
  hl_fence_release(fence);
  return false;
}

static void hl_memory_frontier_finish(hl_fallback_t* fb, bool failed) {
  if (failed && atomic_load(&fb->root->state) == HL_ROOT_LIVE) {
    // The completion thread never drains: it waits for the failed queues'
    // streams instead. Elsewhere, and where that cannot be arranged, drain
    // the streams themselves (an error path).
    if (hl_on_completion_thread(fb->root->device) &&
        hl_memory_await_failed_streams(fb)) {
      return;
    }
    hl_memory_drain_streams(fb->root->device);
  }
  hl_memory_fallback_free(fb->root, fb->who);
  hl_fallback_unref(fb);
}

// Deferred frontier releases wait in one FIFO per device with a single
// notification armed on the oldest: frontiers grow with submission, so the
// oldest is (nearly always) reached first, and one waiter per device keeps
// every semaphore signal cheap however many releases are pending. When it
// fires, every release whose fence is reached (or failed) is freed and the
// notification moves on to the next one pending.
static void hl_memory_deferred_fired(void* user, hl_status_t status);

// Arms the device's notification on |next| (its fence is copied now).
static void hl_memory_deferred_arm(hl_device_t* device, hl_fallback_t* next) {
  hl_status_t st =
      hl_fence_notify(next->frontier, device, hl_memory_deferred_fired, device);
  if (!st) return;
  // Out of memory: nothing would wake the list, so degrade to stop-the-world
  // for everything pending.
  HL_LOG_ERROR("deferred fallback releases: cannot arm a notification: %s",
               hl_status_message(st));
  hl_status_free(st);
  hl_memory_state_t* state = hl_memory_state_get(device);
  mtx_lock(&state->mutex);
  hl_fallback_t* list = state->deferred_head;
  state->deferred_head = state->deferred_tail = NULL;
  state->deferred_armed = false;
  mtx_unlock(&state->mutex);
  hl_memory_drain_streams(device);
  while (list) {
    hl_fallback_t* fb = list;
    list = fb->next_deferred;
    hl_memory_fallback_free(fb->root, "fallback release (degraded)");
    hl_fallback_unref(fb);
  }
}

// A release whose queues are past its frontier but whose recorded uses are
// not all reached (one waits on a semaphore outside the device's queues):
// it leaves the FIFO, so it cannot hold up the others, and waits alone.
static void hl_memory_alone_fired(void* user, hl_status_t status) {
  hl_memory_frontier_finish((hl_fallback_t*)user, status != NULL);
}

static bool hl_fence_settled(const hl_fence_t* fence, bool* out_failed) {
  bool reached = false;
  hl_status_t failure = hl_fence_is_reached(fence, &reached);
  *out_failed = failure != NULL;
  hl_status_free(failure);
  return *out_failed || reached;
}

static void hl_memory_deferred_fired(void* user, hl_status_t status) {
  (void)status;  // Each release's own fences say whether one failed.
  hl_device_t* device = (hl_device_t*)user;
  hl_memory_state_t* state = hl_memory_state_get(device);
  hl_fallback_t* done = NULL;
  hl_fallback_t** done_tail = &done;
  hl_fallback_t* alone = NULL;
  mtx_lock(&state->mutex);
  hl_fallback_t** link = &state->deferred_head;
  hl_fallback_t* last = NULL;
  while (*link) {
    hl_fallback_t* fb = *link;
    bool failed = false;
    bool settled = hl_fence_settled(fb->fence, &failed);
    bool frontier_failed = false;
    bool alone_now =
        !settled && hl_fence_settled(fb->frontier, &frontier_failed);
    if (settled || alone_now) {
      fb->failed = failed;
      *link = fb->next_deferred;
      if (settled) {
        fb->next_deferred = NULL;
        *done_tail = fb;
        done_tail = &fb->next_deferred;
      } else {
        fb->next_deferred = alone;
        alone = fb;
      }
    } else {
      last = fb;
      link = &fb->next_deferred;
    }
  }
  state->deferred_tail = last;
  hl_fallback_t* next = state->deferred_head;
  state->deferred_armed = next != NULL;
  mtx_unlock(&state->mutex);
  while (done) {
    hl_fallback_t* fb = done;
    done = fb->next_deferred;
    hl_memory_frontier_finish(fb, fb->failed);
  }
  while (alone) {
    hl_fallback_t* fb = alone;
    alone = fb->next_deferred;
    fb->next_deferred = NULL;
    hl_status_t st =
        hl_fence_notify(fb->fence, device, hl_memory_alone_fired, fb);
    if (st) {
      HL_LOG_ERROR("fallback release of root %llu: %s; draining",
                   (unsigned long long)fb->root->id, hl_status_message(st));
      hl_status_free(st);
      hl_memory_frontier_finish(fb, true);
    }
  }
  if (next) hl_memory_deferred_arm(device, next);
}

// Frees |fb| once its fence is reached (or failed), on the completion
// thread. Never blocks.
static void hl_memory_defer(hl_fallback_t* fb) {
  hl_device_t* device = fb->root->device;
  hl_memory_state_t* state = NULL;
  hl_status_t st = hl_memory_state(device, &state);
  if (st) {
    hl_status_free(st);
    hl_memory_drain_streams(device);
    hl_memory_fallback_free(fb->root, "fallback release (degraded)");
    hl_fallback_unref(fb);
    return;
  }
  mtx_lock(&state->mutex);
  fb->next_deferred = NULL;
  if (state->deferred_tail) {
    state->deferred_tail->next_deferred = fb;
  } else {
    state->deferred_head = fb;
  }
  state->deferred_tail = fb;
  bool arm = !state->deferred_armed;
  state->deferred_armed = true;
  mtx_unlock(&state->mutex);
  if (arm) hl_memory_deferred_arm(device, fb);
}

// Builds the frontier fence of |root|: what every queue of its device has
// submitted so far, plus every recorded use (which may name other devices'
// queues).
static hl_status_t hl_memory_frontier_fence(hl_root_t* root,
                                            hl_fence_t** out_frontier,
                                            hl_fence_t** out_fence) {
  hl_device_t* device = root->device;
  hl_fence_t* frontier = NULL;
  hl_fence_t* fence = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_fence_create(device->host_allocator, &frontier));
  hl_status_t st = hl_fence_create(device->host_allocator, &fence);
  hl_queue_t** queues = NULL;
  uint32_t count = 0;
  if (!st) st = hl_device_snapshot_queues(device, &queues, &count);
  for (uint32_t i = 0; i < count; ++i) {
    if (!st) {
      st = hl_fence_insert(frontier, hl_queue_timeline(queues[i]),
                           hl_queue_submitted_value(queues[i]));
    }
    hl_queue_release(queues[i]);
  }
  free(queues);
  if (!st) st = hl_fence_join(fence, frontier);
  if (!st) {
    hl_spinlock_lock(&root->lock);
    st = hl_fence_join(fence, root->use_fence);
    hl_spinlock_unlock(&root->lock);
  }
  if (st) {
    hl_fence_release(frontier);
    hl_fence_release(fence);
    return st;
  }
  *out_frontier = frontier;
  *out_fence = fence;
  return NULL;
}

static hl_fallback_t* hl_fallback_new(hl_root_t* root, bool orphan,
                                      const char* who, hl_status_t* out_st) {
  hl_fallback_t* fb = calloc(1, sizeof(*fb));
  if (!fb) {
    *out_st = HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                             "allocating a fallback release");
    return NULL;
  }
  atomic_init(&fb->refs, 1);
  fb->root = root;
  fb->orphan = orphan;
  fb->who = who;
  *out_st = hl_memory_frontier_fence(root, &fb->frontier, &fb->fence);
  if (*out_st) {
    free(fb);
    return NULL;
  }
  return fb;
}

// The frontier release: frees at once when the frontier is already reached,
// otherwise on the completion thread once it is. Never blocks (except to
// drain on the error path where the deferred free cannot be arranged, and
// never on the completion thread: there the root waits for its uses only).
static void hl_memory_frontier(hl_root_t* root, bool orphan) {
  hl_device_t* device = root->device;
  uint32_t queue_id =
      root->affinity_queue ? hl_queue_id(root->affinity_queue) : UINT32_MAX;
  HL_TRACE_ZONE_BEGIN(zone, "FallbackFrontier");
  hl_memory_note(device, queue_id, HL_MEMORY_EVENT_FALLBACK_FRONTIER, 0);
  const char* who = "fallback release (frontier)";
  hl_status_t st = NULL;
  hl_fallback_t* fb = hl_fallback_new(root, orphan, who, &st);
  if (fb) {
    bool reached = false;
    hl_status_t failure = hl_fence_is_reached(fb->fence, &reached);
    if (!failure && reached) {
      // Every queue is already past its value: free now, on this thread.
      hl_memory_frontier_finish(fb, false);
      HL_TRACE_ZONE_END(zone);
      return;
    }
    hl_status_free(failure);
    hl_memory_defer(fb);
    HL_TRACE_ZONE_END(zone);
    return;
  }
  // Could not arrange the deferred free (out of memory): do the
  // stop-the-world one.
  HL_LOG_WARN("frontier release of root %llu degraded to device-sync: %s",
              (unsigned long long)root->id, hl_status_message(st));
  hl_status_free(st);
  hl_memory_drain_streams(device);
  hl_memory_fallback_free(root, "fallback release (frontier, degraded)");
  hl_memory_fallback_done(root, orphan);
  HL_TRACE_ZONE_END(zone);
}

static void hl_memory_fallback_orphan(hl_root_t* root) {
  hl_memory_frontier(root, /*orphan=*/true);
}

// After a drain every operation issued on the device's streams has run, so
// the root is idle unless a use is still waiting to be issued (a submission
// blocked on a semaphore nobody has signalled yet). A failed use will never
// be issued.
static bool hl_memory_idle_after_drain(hl_root_t* root) {
  hl_spinlock_lock(&root->lock);
  bool reached = false;
  hl_status_t failure = hl_fence_is_reached(root->use_fence, &reached);
  hl_spinlock_unlock(&root->lock);
  if (failure) {
    hl_status_free(failure);
    return true;
  }
  return reached;
}

// Takes the owed list of |state| (NULL when empty).
static hl_fallback_t* hl_memory_take_owed(hl_memory_state_t* state) {
  if (atomic_load(&state->owed_count) == 0) return NULL;
  mtx_lock(&state->mutex);
  hl_fallback_t* list = state->owed;
  state->owed = NULL;
  atomic_store(&state->owed_count, 0);
  mtx_unlock(&state->mutex);
  return list;
}

// Frees every owed root that the drain just made idle; the others keep
// their frontier notification.
static void hl_memory_settle_owed(hl_fallback_t* list) {
  while (list) {
    hl_fallback_t* fb = list;
    list = fb->next_owed;
    if (hl_memory_idle_after_drain(fb->root)) {
      hl_memory_fallback_free(fb->root, fb->who);
    }
    hl_fallback_unref(fb);
  }
}

void hl_memory_pay_owed_drains(hl_device_t* device) {
  hl_memory_state_t* state = hl_memory_state_get(device);
  if (HL_LIKELY(!state || atomic_load_explicit(&state->owed_count,
                                               memory_order_relaxed) == 0)) {
    return;
  }
  if (hl_on_completion_thread(device)) return;
  hl_fallback_t* owed = hl_memory_take_owed(state);
  if (!owed) return;
  HL_TRACE_ZONE_BEGIN(zone, "FallbackDeviceSyncOwed");
  hl_memory_drain_streams(device);
  hl_memory_settle_owed(owed);
  HL_TRACE_ZONE_END(zone);
}

// DEVICE_SYNC on the completion thread: owe the drain, with a frontier
// notification as the backstop.
static void hl_memory_device_sync_owe(hl_root_t* root, uint32_t queue_id) {
  hl_device_t* device = root->device;
  hl_memory_state_t* state = NULL;
  hl_status_t st = hl_memory_state(device, &state);
  hl_fallback_t* fb =
      st ? NULL
         : hl_fallback_new(root, false, "fallback release (device-sync, owed)",
                           &st);
  if (!fb) {
    HL_LOG_WARN(
        "device-sync release of root %llu on the completion thread: "
        "%s; taking the frontier path",
        (unsigned long long)root->id, hl_status_message(st));
    hl_status_free(st);
    hl_memory_frontier(root, false);
    return;
  }
  hl_memory_note(device, queue_id, HL_MEMORY_EVENT_FALLBACK_DEVICE_SYNC_OWED,
                 0);
  atomic_store(&fb->refs, 2);
  mtx_lock(&state->mutex);
  fb->next_owed = state->owed;
  state->owed = fb;
  atomic_fetch_add(&state->owed_count, 1);
  mtx_unlock(&state->mutex);
  hl_memory_defer(fb);  // The backstop.
}

static void hl_memory_device_sync(hl_root_t* root, uint32_t queue_id) {
  hl_device_t* device = root->device;
  hl_memory_note(device, queue_id, HL_MEMORY_EVENT_FALLBACK_DEVICE_SYNC, 0);
  if (hl_on_completion_thread(device)) {
    hl_memory_device_sync_owe(root, queue_id);
    return;
  }
  HL_TRACE_ZONE_BEGIN(zone, "FallbackDeviceSync");
  hl_memory_state_t* state = NULL;
  hl_status_t st = hl_memory_state(device, &state);
  hl_status_free(st);
  hl_fallback_t* owed = state ? hl_memory_take_owed(state) : NULL;
  hl_memory_drain_streams(device);
  hl_memory_settle_owed(owed);
  if (hl_memory_idle_after_drain(root)) {
    hl_memory_fallback_free(root, "fallback release (device-sync)");
    hl_root_release_for_op(root);
  } else {
    // A use is still waiting to be issued (its submission waits on a
    // semaphore not signalled yet, perhaps by this very thread later):
    // waiting here could deadlock, so free after every recorded use.
    hl_fallback_t* fb =
        hl_fallback_new(root, false, "fallback release (device-sync)", &st);
    if (fb) hl_memory_defer(fb);
    if (st) {
      HL_LOG_ERROR("device-sync release of root %llu: cannot defer: %s",
                   (unsigned long long)root->id, hl_status_message(st));
      hl_status_free(st);
      hl_root_release_for_op(root);  // Leaves it to the orphan path.
    }
  }
  HL_TRACE_ZONE_END(zone);
}

void hl_memory_fallback_release(hl_root_t* root) {
  hl_device_t* device = root->device;
  uint32_t queue_id =
      root->affinity_queue ? hl_queue_id(root->affinity_queue) : UINT32_MAX;
  switch (device->fallback) {
    case HL_FALLBACK_DEVICE_SYNC:
      hl_memory_device_sync(root, queue_id);
      return;
    case HL_FALLBACK_FRONTIER:
      hl_memory_frontier(root, false);
      return;
    default:
      break;
  }
  // ORDERED. A root that never escaped has a complete use fence: every use
  // went through hipline and was recorded when it was submitted.
  if (!atomic_load(&root->escaped) && root->affinity_queue &&
      root->memory == HL_ROOT_MEMORY_POOL &&
      atomic_load(&root->origin) == HL_BUFFER_ORIGIN_ASYNC) {
    HL_TRACE_ZONE_BEGIN(zone, "FallbackOrdered");
    hl_status_t st = hl_root_dealloca_as(root->affinity_queue, NULL, NULL, root,
                                         "fallback release (ordered)");
    if (!st) {
      hl_memory_note(device, queue_id, HL_MEMORY_EVENT_FALLBACK_ORDERED, 0);
      // The dealloca has its own operation reference if it outlived the
      // call (it borrowed this one until then).
      hl_root_release_for_op(root);
      HL_TRACE_ZONE_END(zone);
      return;
    }
    // The affinity queue has failed (or out of memory): the frontier path
    // copes with failed queues.
    HL_LOG_WARN(
        "ordered release of root %llu on queue %u failed: %s; taking "
        "the frontier path",
        (unsigned long long)root->id, queue_id, hl_status_message(st));
    hl_status_free(st);
    HL_TRACE_ZONE_END(zone);
  }
  hl_memory_frontier(root, false);
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

// A view of |root| that takes over one of its references (the caller's;
// on failure it stays the caller's).
static hl_status_t hl_buffer_create_view_adopting(hl_root_t* root,
                                                  uint64_t offset,
                                                  uint64_t length,
                                                  hl_buffer_token_t* token,
                                                  hl_buffer_t** out_buffer) {
  hl_buffer_t* buffer = NULL;
  hl_status_t st = hl_recycler_alloc(
      &hl_buffer_recycler_, root->device->host_allocator, (void**)&buffer);
  if (st) return hl_status_annotate(st, "creating a buffer view");
  atomic_init(&buffer->ref_count, 1);
  buffer->root = root;
  buffer->offset = offset;
  buffer->length = length;
  if (token) atomic_fetch_add(&token->ref_count, 1);
  buffer->token = token;
  *out_buffer = buffer;
  return NULL;
}

hl_status_t hl_buffer_create_view(hl_root_t* root, uint64_t offset,
                                  uint64_t length, hl_buffer_token_t* token,
                                  hl_buffer_t** out_buffer) {
  hl_root_retain(root);
  hl_status_t st =
      hl_buffer_create_view_adopting(root, offset, length, token, out_buffer);
  if (st) hl_root_release(root);
  return st;
}

void hl_buffer_retain(hl_buffer_t* buffer) {
  if (buffer)
    atomic_fetch_add_explicit(&buffer->ref_count, 1, memory_order_relaxed);
}

void hl_buffer_release(hl_buffer_t* buffer) {
  if (!buffer) return;
  // The only reference (every retain starts from a held one, so none can
  // appear meanwhile) needs no read-modify-write; acquire orders the other
  // threads' releases before the destroy.
  if (atomic_load_explicit(&buffer->ref_count, memory_order_acquire) != 1 &&
      atomic_fetch_sub_explicit(&buffer->ref_count, 1, memory_order_acq_rel) !=
          1) {
    return;
  }
  hl_root_t* root = buffer->root;
  hl_buffer_token_t* token = buffer->token;
  hl_recycler_free(&hl_buffer_recycler_, buffer);
  if (token && atomic_fetch_sub(&token->ref_count, 1) == 1) {
    token->on_last_release(token);
  }
  hl_root_release(root);
}

hl_status_t hl_buffer_subview(hl_buffer_t* buffer, uint64_t offset,
                              uint64_t length, hl_buffer_t** out_view) {
  if (!buffer || !out_view) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_subview: NULL buffer or out_view");
  }
  *out_view = NULL;
  if (offset > buffer->length || length > buffer->length - offset) {
    return HL_MAKE_STATUS(HL_STATUS_OUT_OF_RANGE,
                          "subview [%llu, +%llu) exceeds the %llu-byte buffer",
                          (unsigned long long)offset,
                          (unsigned long long)length,
                          (unsigned long long)buffer->length);
  }
  // Views always point at the root, so a subview of a subview resolves to the
  // same root and timeline resource.
  return hl_buffer_create_view(buffer->root, buffer->offset + offset, length,
                               buffer->token, out_view);
}

hl_status_t hl_buffer_wrap(hl_device_t* device, void* device_ptr, uint64_t size,
                           hl_buffer_release_fn_t release_fn, void* user,
                           hl_buffer_t** out_buffer) {
  if (!device || !device_ptr || !out_buffer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_wrap: NULL device, pointer or out_buffer");
  }
  *out_buffer = NULL;
  if (size == 0 || size > HL_BUFFER_MAX_SIZE) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_wrap: size %llu must be in [1, 2^48]",
                          (unsigned long long)size);
  }
  // External memory has no queue affinity: it is never freed on a stream.
  hl_root_t* root = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_root_create(device, NULL, HL_ROOT_MEMORY_EXTERNAL,
                                          HL_BUFFER_ORIGIN_EXTERNAL, size, 1,
                                          &root));
  atomic_store(&root->ptr, device_ptr);
  atomic_store(&root->state, HL_ROOT_LIVE);
  // Its address is known outside hipline: escaped from the start.
  hl_root_mark_escaped(root);
  root->release_fn = release_fn;
  root->release_user = user;
  hl_status_t st = hl_buffer_create_view(root, 0, size, NULL, out_buffer);
  hl_root_release(root);
  return st;
}

hl_status_t hl_buffer_register_global(hl_buffer_t* buffer) {
  if (!buffer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_register_global: buffer is NULL");
  }
  hl_root_t* root = buffer->root;
  hl_spinlock_lock(&root->lock);
  int origin = atomic_load(&root->origin);
  hl_status_t st = NULL;
  if (origin == HL_BUFFER_ORIGIN_PERSISTENT) {
    st = HL_MAKE_STATUS(HL_STATUS_ALREADY_EXISTS,
                        "root %llu is already registered as a global",
                        (unsigned long long)root->id);
  } else {
    atomic_store(&root->origin, HL_BUFFER_ORIGIN_PERSISTENT);
    hl_root_retain(root);  // The registry's reference.
  }
  hl_spinlock_unlock(&root->lock);
  return st;
}

hl_status_t hl_buffer_unregister_global(hl_buffer_t* buffer) {
  if (!buffer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_unregister_global: buffer is NULL");
  }
  hl_root_t* root = buffer->root;
  hl_spinlock_lock(&root->lock);
  bool registered = atomic_load(&root->origin) == HL_BUFFER_ORIGIN_PERSISTENT;
  if (registered) {
    atomic_store(&root->origin, root->memory == HL_ROOT_MEMORY_EXTERNAL
                                    ? HL_BUFFER_ORIGIN_EXTERNAL
                                    : HL_BUFFER_ORIGIN_ASYNC);
  }
  hl_spinlock_unlock(&root->lock);
  if (!registered) {
    return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                          "root %llu is not registered as a global",
                          (unsigned long long)root->id);
  }
  hl_root_release(root);
  return NULL;
}

uint64_t hl_buffer_length(const hl_buffer_t* buffer) {
  return buffer ? buffer->length : 0;
}

uint64_t hl_buffer_offset(const hl_buffer_t* buffer) {
  return buffer ? buffer->offset : 0;
}

hl_buffer_origin_t hl_buffer_origin(const hl_buffer_t* buffer) {
  return buffer ? (hl_buffer_origin_t)atomic_load(&buffer->root->origin)
                : HL_BUFFER_ORIGIN_ASYNC;
}

hl_device_t* hl_buffer_device(const hl_buffer_t* buffer) {
  return buffer ? buffer->root->device : NULL;
}

uint64_t hl_buffer_root_id(const hl_buffer_t* buffer) {
  return buffer ? buffer->root->id : 0;
}

void hl_root_mark_escaped(hl_root_t* root) {
  if (atomic_load_explicit(&root->escaped, memory_order_relaxed)) return;
  if (atomic_exchange(&root->escaped, true)) return;
  hl_memory_note(
      root->device,
      root->affinity_queue ? hl_queue_id(root->affinity_queue) : UINT32_MAX,
      HL_MEMORY_EVENT_ESCAPE, 0);
}

void* hl_buffer_device_pointer(const hl_buffer_t* buffer) {
  if (!buffer) return NULL;
  char* base = (char*)atomic_load(&buffer->root->ptr);
  if (!base) return NULL;
  // The address leaves hipline's sight: uses through it are not recorded.
  hl_root_mark_escaped(buffer->root);
  return base + buffer->offset;
}

bool hl_buffer_is_escaped(const hl_buffer_t* buffer) {
  return buffer && atomic_load(&buffer->root->escaped);
}

bool hl_buffer_is_freed(const hl_buffer_t* buffer) {
  return buffer && atomic_load(&buffer->root->state) == HL_ROOT_FREED;
}

hl_status_t hl_buffer_use_fence(const hl_buffer_t* buffer, hl_fence_t* fence) {
  if (!buffer || !fence) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_use_fence: NULL buffer or fence");
  }
  hl_spinlock_lock(&buffer->root->lock);
  hl_status_t st = hl_fence_join(fence, buffer->root->use_fence);
  hl_spinlock_unlock(&buffer->root->lock);
  return st;
}

hl_status_t hl_buffer_mutation_barrier(const hl_buffer_t* buffer,
                                       hl_fence_t* fence) {
  if (!buffer || !fence) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_mutation_barrier: NULL buffer or fence");
  }
  hl_spinlock_lock(&buffer->root->lock);
  hl_status_t st = hl_fence_join(fence, buffer->root->mutation_barrier);
  hl_spinlock_unlock(&buffer->root->lock);
  return st;
}

hl_status_t hl_root_create_async(hl_queue_t* queue, uint64_t size,
                                 hl_buffer_t** out_buffer) {
  // One reference, the buffer's (the alloca's op borrows it).
  hl_root_t* root = NULL;
  HL_RETURN_IF_ERROR_PLAIN(
      hl_root_create(hl_queue_device(queue), queue, HL_ROOT_MEMORY_POOL,
                     HL_BUFFER_ORIGIN_ASYNC, size, 1, &root));
  hl_status_t st =
      hl_buffer_create_view_adopting(root, 0, size, NULL, out_buffer);
  if (st) hl_root_destroy(root);  // Nobody else has seen it.
  return st;
}
