// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The device's memory state: its pool and its statistics.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/faults.h"
#include "runtime/base/log.h"
#include "runtime/base/recycler.h"
#include "runtime/base/trace.h"
#include "runtime/memory/memory_internal.h"

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
      state->device = device;
      state->trace_track = hl_memory_trace_track_next();
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
  if (HL_UNLIKELY(hl_trace_is_active()) && hl_memory_event_traced(event)) {
    hl_memory_trace_sample_locked(state);
  }
}

void hl_memory_note(hl_device_t* device, uint32_t queue_id,
                    hl_memory_event_t event, uint64_t bytes) {
  hl_memory_count_global(event);
  hl_memory_state_t* state = hl_memory_state_for_note(device);
  if (!state) return;
  hl_spinlock_lock(&state->stats_lock);
  hl_memory_apply_locked(state, queue_id, event, bytes);
  hl_spinlock_unlock(&state->stats_lock);
  if (HL_UNLIKELY(hl_trace_is_active()) && hl_memory_event_traced(event)) {
    hl_memory_trace_sample(state);
  }
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
  if (HL_UNLIKELY(hl_trace_is_active()) &&
      (hl_memory_event_traced(event_a) || hl_memory_event_traced(event_b))) {
    hl_memory_trace_sample(state);
  }
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
// The pool
//===----------------------------------------------------------------------===//
//
// The pool behind queue_alloca: the driver's stream-ordered pool (one
// malloc_async per alloca) or hipline's suballocator over driver slabs, as
// the device's pool mode (HIPLINE_ALLOCATOR) says.

static void hl_memory_pool_trim_hook(hl_device_t* device,
                                     uint64_t min_bytes_to_keep) {
  hl_memory_state_t* state = hl_memory_state_get(device);
  hl_suballocator_t* sa = state ? atomic_load(&state->suballocator) : NULL;
  if (sa) {
    hl_suballocator_trim(sa, min_bytes_to_keep, NULL, HL_SUBALLOC_NO_QUEUE);
  }
}

hl_suballocator_t* hl_memory_pool_suballocator(hl_device_t* device) {
  if (device->pool_mode != HL_POOL_MODE_HIPLINE) return NULL;
  hl_memory_state_t* state = NULL;
  hl_status_t st = hl_memory_state(device, &state);
  if (st) {
    hl_status_free(st);
    return NULL;
  }
  hl_suballocator_t* sa = atomic_load(&state->suballocator);
  if (HL_LIKELY(sa)) return sa;
  mtx_lock(&state->mutex);
  sa = atomic_load(&state->suballocator);
  if (!sa) {
    hl_backend_t* backend = device->backend;
    hl_pool_attributes_t attrs;
    st = backend->vtable->pool_get_attributes(backend, &attrs);
    if (!st) {
      // Checked mode poisons freed blocks; the suballocator's frees happen
      // at their point of the stream only with stream_ordered_host_work.
      // It shares the statistics' lock: an alloca or a free it serves is
      // counted in the same critical section.
      st = hl_suballocator_create(
          backend, attrs.release_threshold,
          device->checked && backend->stream_ordered_host_work,
          &state->stats_lock, &sa);
    }
    if (st) {
      HL_LOG_ERROR("creating the suballocator: %s", hl_status_message(st));
      hl_status_free(st);
      sa = NULL;
    } else {
      atomic_store(&state->suballocator, sa);
      hl_device_extension_set_trim(device, HL_DEVICE_EXTENSION_MEMORY,
                                   hl_memory_pool_trim_hook);
    }
  }
  mtx_unlock(&state->mutex);
  return sa;
}

void hl_memory_pool_deinitialize(hl_memory_state_t* state) {
  hl_suballocator_t* sa = atomic_exchange(&state->suballocator, NULL);
  hl_suballocator_destroy(sa);
}

hl_status_t hl_memory_pool_alloc(hl_root_t* root, hl_backend_stream_t* stream,
                                 uint32_t queue_id, hl_semaphore_t* timeline,
                                 uint64_t value,
                                 const hl_suballoc_cover_t* cover,
                                 void** out_ptr) {
  hl_device_t* device = root->device;
  hl_backend_t* backend = device->backend;
  *out_ptr = NULL;
  if (device->pool_mode == HL_POOL_MODE_HIPLINE) {
    hl_suballocator_t* sa = hl_memory_pool_suballocator(device);
    if (!sa) {
      return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                            "the suballocator could not be created");
    }
    // HIPLINE_FAULTS' alloc_fail_every counts allocations of the pool that
    // serves queue_alloca, here this one (its slab requests to the backend
    // are exempt): an injected failure is retried once, as the driver's is
    // after its trim below. Real out of memory trims and retries inside.
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (!backend->injects_faults || !hl_faults_should_fail_alloc()) {
        return hl_suballocator_alloc_covered(sa, root->size, stream, queue_id,
                                             timeline, value, cover, out_ptr,
                                             &root->suballocation);
      }
    }
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "suballocation of %llu bytes failed twice (injected "
                          "by HIPLINE_FAULTS alloc_fail_every)",
                          (unsigned long long)root->size);
  }
  hl_status_t st = backend->vtable->malloc_async(backend, (size_t)root->size,
                                                 stream, out_ptr);
  if (st && hl_status_code(st) == HL_STATUS_RESOURCE_EXHAUSTED) {
    hl_status_free(st);
    hl_status_ignore(backend->vtable->pool_trim(backend, 0));
    st = backend->vtable->malloc_async(backend, (size_t)root->size, stream,
                                       out_ptr);
  }
  return st;
}

bool hl_memory_pool_try_alloc(hl_root_t* root, uint32_t queue_id,
                              void** out_ptr) {
  hl_device_t* device = root->device;
  if (device->pool_mode != HL_POOL_MODE_HIPLINE) return false;
  hl_memory_state_t* state = hl_memory_state_get(device);
  hl_suballocator_t* sa = state ? atomic_load(&state->suballocator) : NULL;
  if (!sa) return false;
  hl_spinlock_lock(&state->stats_lock);  // The suballocator's lock too.
  bool taken = hl_suballocator_try_alloc_locked(sa, root->size, queue_id,
                                                out_ptr, &root->suballocation);
  if (taken) {
    hl_memory_note_locked(state, queue_id, HL_MEMORY_EVENT_ALLOCA, root->size);
  }
  hl_spinlock_unlock(&state->stats_lock);
  return taken;
}

hl_status_t hl_memory_pool_free(hl_root_t* root, hl_backend_stream_t* stream,
                                uint32_t affinity, uint32_t dealloca_queue) {
  hl_suballocation_t* allocation = root->suballocation;
  root->suballocation = NULL;
  hl_memory_state_t* state = hl_memory_state_get(root->device);
  hl_suballocator_t* sa = state ? atomic_load(&state->suballocator) : NULL;
  if (!sa || !allocation) {
    hl_memory_note(root->device, affinity, HL_MEMORY_EVENT_FREE_BYTES,
                   root->size);
    return HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                          "root %llu has no suballocation to free",
                          (unsigned long long)root->id);
  }
  hl_suballocator_poison(sa, allocation);
  hl_spinlock_lock(&state->stats_lock);  // The suballocator's lock too.
  hl_suballocator_free_signalled_locked(
      sa, allocation, stream, root->free_queue_id, root->free_timeline,
      root->free_value, root->free_signal_id, root->free_signal_value);
  hl_memory_note_locked(state, affinity, HL_MEMORY_EVENT_FREE_BYTES,
                        root->size);
  if (dealloca_queue != UINT32_MAX) {
    hl_memory_note_locked(state, dealloca_queue, HL_MEMORY_EVENT_DEALLOCA, 0);
  }
  hl_spinlock_unlock(&state->stats_lock);
  return NULL;
}

void hl_memory_pool_usage(hl_device_t* device, uint64_t* out_used,
                          uint64_t* out_reserved) {
  hl_memory_stats_t stats;
  memset(&stats, 0, sizeof(stats));
  hl_status_ignore(hl_memory_pool_fill_stats(device, &stats));
  hl_backend_pool_stats_t pool;
  memset(&pool, 0, sizeof(pool));
  hl_status_ignore(device->backend->vtable->pool_stats(device->backend, &pool));
  *out_used = device->pool_mode == HL_POOL_MODE_HIPLINE ? stats.pool_used_bytes
                                                        : pool.used_bytes;
  *out_reserved = stats.bytes_reserved;
}

// The driver pool's reserved peak since hl_device_reset_peak_memory_stats
// (hl_memory_state_t::reserved_peak_reset).
static void hl_memory_pool_peak_since_reset(hl_memory_state_t* state,
                                            const hl_backend_pool_stats_t* pool,
                                            hl_memory_stats_t* out) {
  hl_spinlock_lock(&state->stats_lock);
  if (state->reserved_peak_reset) {
    if (pool->reserved_bytes > state->reserved_seen) {
      state->reserved_seen = pool->reserved_bytes;
    }
    out->bytes_reserved_peak =
        pool->reserved_high_bytes > state->reserved_high_at_reset
            ? pool->reserved_high_bytes
            : state->reserved_seen;
  }
  hl_spinlock_unlock(&state->stats_lock);
}

hl_status_t hl_memory_pool_fill_stats(hl_device_t* device,
                                      hl_memory_stats_t* out) {
  hl_backend_pool_stats_t pool;
  HL_RETURN_IF_ERROR_PLAIN(
      device->backend->vtable->pool_stats(device->backend, &pool));
  out->bytes_reserved = pool.reserved_bytes;
  out->bytes_reserved_peak = pool.reserved_high_bytes;
  hl_memory_state_t* state = hl_memory_state_get(device);
  hl_suballocator_t* sa = state ? atomic_load(&state->suballocator) : NULL;
  if (state && !sa) hl_memory_pool_peak_since_reset(state, &pool, out);
  if (!sa) return NULL;
  hl_suballocator_stats_t s;
  hl_suballocator_stats(sa, &s);
  // What hipline holds is its slabs plus what the driver caches beyond
  // them (slabs given back and not yet trimmed); the driver's own rounding
  // of a slab is not hipline's to count.
  uint64_t cached = pool.reserved_bytes > pool.used_bytes
                        ? pool.reserved_bytes - pool.used_bytes
                        : 0;
  out->bytes_reserved = s.slab_bytes + cached;
  out->bytes_reserved_peak = s.slab_bytes_peak > out->bytes_reserved
                                 ? s.slab_bytes_peak
                                 : out->bytes_reserved;
  out->pool_slabs = s.slabs;
  out->pool_slab_bytes = s.slab_bytes;
  out->pool_used_bytes = s.used_bytes;
  out->pool_free_bytes = s.free_bytes;
  out->pool_largest_free_block = s.largest_free_block;
  out->pool_fragmentation =
      s.free_bytes ? 1.0 - (double)s.largest_free_block / (double)s.free_bytes
                   : 0.0;
  out->pool_pending_free_blocks = s.pending_free_blocks;
  out->pool_slab_allocs = s.slab_allocs;
  out->pool_slab_releases = s.slab_releases;
  out->pool_block_reuses = s.block_reuses;
  out->pool_cross_queue_reuses = s.cross_queue_reuses;
  const hl_suballocator_account_t* peak = &s.peak_account;
  out->pool_peak_slab_bytes = peak->slab_bytes;
  out->pool_peak_requested_bytes = peak->requested_bytes;
  out->pool_peak_rounding_bytes = peak->rounding_bytes;
  out->pool_peak_tail_bytes = peak->tail_bytes;
  out->pool_peak_fragment_bytes = peak->fragment_bytes;
  out->pool_peak_free_slab_bytes = peak->free_slab_bytes;
  return NULL;
}

// Whether ops of |device|'s allocas and deallocas may run at once.
bool hl_pool_ops_run_at_once(const hl_device_t* device) {
  return device->pool_mode == HL_POOL_MODE_HIPLINE && !device->checked;
}
