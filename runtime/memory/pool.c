// The pool behind queue_alloca: the driver's stream-ordered pool (one
// malloc_async per alloca) or hipline's suballocator over driver slabs, as
// the device's pool mode (HIPLINE_ALLOCATOR) says.

#include <stdlib.h>
#include <string.h>

#include "runtime/base/faults.h"
#include "runtime/base/log.h"
#include "runtime/memory/memory_internal.h"

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
