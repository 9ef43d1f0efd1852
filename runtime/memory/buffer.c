// Roots, buffers, timeline resources, statistics and the fallback reclaimer.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/log.h"
#include "runtime/base/trace.h"
#include "runtime/memory/memory_internal.h"

static atomic_uint_least64_t hl_next_root_id_ = 1;

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

static void hl_memory_state_destroy(hl_device_t* device) {
  hl_memory_state_t* state = (hl_memory_state_t*)device->memory_state;
  hl_memory_pool_deinitialize(state);
  mtx_destroy(&state->mutex);
  free(state->per_queue);
  free(state);
  atomic_store(&device->memory_state, NULL);
}

// Guards the lazy creation of per-device memory state; separate from the
// scheduler lock because statistics are noted while that is held.
static mtx_t hl_memory_state_mutex_;
static once_flag hl_memory_state_once_ = ONCE_FLAG_INIT;
static void hl_memory_state_mutex_init(void) {
  mtx_init(&hl_memory_state_mutex_, mtx_plain);
}

hl_status_t hl_memory_state(hl_device_t* device,
                            hl_memory_state_t** out_state) {
  hl_memory_state_t* existing =
      atomic_load_explicit(&device->memory_state, memory_order_acquire);
  if (HL_LIKELY(existing)) {
    *out_state = existing;
    return NULL;
  }
  call_once(&hl_memory_state_once_, hl_memory_state_mutex_init);
  mtx_lock(&hl_memory_state_mutex_);
  if (!device->memory_state) {
    hl_memory_state_t* state = calloc(1, sizeof(*state));
    if (state && mtx_init(&state->mutex, mtx_plain) != thrd_success) {
      free(state);
      state = NULL;
    }
    if (state) {
      device->memory_state_destroy = hl_memory_state_destroy;
      atomic_store_explicit(&device->memory_state, state, memory_order_release);
    }
  }
  hl_memory_state_t* state =
      (hl_memory_state_t*)atomic_load(&device->memory_state);
  mtx_unlock(&hl_memory_state_mutex_);
  *out_state = state;
  return state ? NULL
               : HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                                "allocating the memory statistics");
}

static void hl_memory_apply(hl_memory_stats_t* s, hl_memory_event_t event,
                            uint64_t bytes) {
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

void hl_memory_global_fallbacks(uint64_t* out_frontier,
                                uint64_t* out_device_sync) {
  *out_frontier = atomic_load(&hl_global_frontier_releases_);
  *out_device_sync = atomic_load(&hl_global_device_sync_releases_);
}

void hl_memory_note(hl_device_t* device, uint32_t queue_id,
                    hl_memory_event_t event, uint64_t bytes) {
  if (event == HL_MEMORY_EVENT_FALLBACK_FRONTIER) {
    atomic_fetch_add(&hl_global_frontier_releases_, 1);
  } else if (event == HL_MEMORY_EVENT_FALLBACK_DEVICE_SYNC) {
    atomic_fetch_add(&hl_global_device_sync_releases_, 1);
  }
  hl_memory_state_t* state = NULL;
  hl_status_t st = hl_memory_state(device, &state);
  if (st) {
    hl_status_free(st);
    return;
  }
  mtx_lock(&state->mutex);
  hl_memory_apply(&state->stats, event, bytes);
  if (queue_id != UINT32_MAX) {
    if (queue_id >= state->per_queue_capacity) {
      uint32_t capacity =
          state->per_queue_capacity ? state->per_queue_capacity : 8;
      while (capacity <= queue_id) capacity *= 2;
      hl_memory_stats_t* table =
          realloc(state->per_queue, capacity * sizeof(*table));
      if (table) {
        memset(table + state->per_queue_capacity, 0,
               (capacity - state->per_queue_capacity) * sizeof(*table));
        state->per_queue = table;
        state->per_queue_capacity = capacity;
      }
    }
    if (queue_id < state->per_queue_capacity) {
      hl_memory_apply(&state->per_queue[queue_id], event, bytes);
    }
  }
  mtx_unlock(&state->mutex);
}

static hl_status_t hl_memory_fill_reserved(hl_device_t* device,
                                           hl_memory_stats_t* out) {
  return hl_memory_pool_fill_stats(device, out);
}

hl_status_t hl_device_memory_stats(hl_device_t* device,
                                   hl_memory_stats_t* out_stats) {
  if (!device || !out_stats) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_device_memory_stats: NULL device or out_stats");
  }
  hl_memory_state_t* state = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_memory_state(device, &state));
  mtx_lock(&state->mutex);
  *out_stats = state->stats;
  mtx_unlock(&state->mutex);
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
  mtx_lock(&state->mutex);
  if (id < state->per_queue_capacity) {
    *out_stats = state->per_queue[id];
  } else {
    memset(out_stats, 0, sizeof(*out_stats));
  }
  mtx_unlock(&state->mutex);
  return hl_memory_fill_reserved(device, out_stats);
}

//===----------------------------------------------------------------------===//
// Roots
//===----------------------------------------------------------------------===//

static hl_status_t hl_root_create(hl_device_t* device, hl_queue_t* affinity,
                                  hl_root_memory_t memory,
                                  hl_buffer_origin_t origin, uint64_t size,
                                  hl_root_t** out_root) {
  hl_root_t* root = calloc(1, sizeof(*root));
  if (!root) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating a root for %llu bytes",
                          (unsigned long long)size);
  }
  hl_status_t st = hl_fence_create(device->host_allocator, &root->use_fence);
  if (!st)
    st = hl_fence_create(device->host_allocator, &root->mutation_barrier);
  if (!st && mtx_init(&root->mutex, mtx_plain) != thrd_success) {
    st = HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "creating a root mutex");
  }
  if (st) {
    hl_fence_release(root->use_fence);
    hl_fence_release(root->mutation_barrier);
    free(root);
    return st;
  }
  atomic_init(&root->refs, 1);
  root->id = atomic_fetch_add(&hl_next_root_id_, 1);
  root->device = device;
  hl_device_retain(device);
  root->affinity_queue = affinity;
  hl_queue_retain(affinity);
  root->memory = memory;
  atomic_init(&root->origin, (int)origin);
  atomic_init(&root->state, HL_ROOT_PENDING);
  root->size = size;
  atomic_init(&root->ptr, NULL);
  atomic_init(&root->dealloca_scheduled, false);
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

void hl_root_release_for_op(hl_root_t* root) {
  uint64_t old = atomic_fetch_sub_explicit(&root->refs, HL_ROOT_OP_REF,
                                           memory_order_acq_rel);
  if ((uint32_t)old == 1) hl_root_last_release(root);
}

static void hl_root_destroy(hl_root_t* root) {
  hl_fence_release(root->use_fence);
  hl_fence_release(root->mutation_barrier);
  mtx_destroy(&root->mutex);
  hl_queue_t* queue = root->affinity_queue;
  hl_device_t* device = root->device;
  free(root);
  hl_queue_release(queue);
  hl_device_release(device);
}

void hl_root_release(hl_root_t* root) {
  if (!root) return;
  uint64_t old =
      atomic_fetch_sub_explicit(&root->refs, 1, memory_order_acq_rel);
  if ((uint32_t)old == 1) hl_root_last_release(root);
}

static void hl_root_last_release(hl_root_t* root) {
  int state = atomic_load(&root->state);
  if (state == HL_ROOT_LIVE) {
    // The last reference went without a dealloca: the conservative path.
    hl_memory_fallback_release(root);
    return;
  }
  // Otherwise the memory is gone already (freed), or there never was any
  // (the alloca failed or never ran): only the metadata remains.
  hl_root_destroy(root);
}

void hl_root_record_use(hl_root_t* root, hl_queue_t* queue, uint64_t value,
                        bool write) {
  hl_semaphore_t* timeline = hl_queue_timeline(queue);
  mtx_lock(&root->mutex);
  if (hl_fence_count(root->use_fence) >= 8)
    hl_fence_prune_reached(root->use_fence);
  hl_status_t st = hl_fence_insert(root->use_fence, timeline, value);
  if (!st && write) {
    hl_fence_clear(root->mutation_barrier);
    st = hl_fence_insert(root->mutation_barrier, timeline, value);
  }
  mtx_unlock(&root->mutex);
  if (st) {
    // A lost use would let a dealloca run early: make it loud.
    HL_LOG_ERROR("root %llu: recording a use failed: %s",
                 (unsigned long long)root->id, hl_status_message(st));
    hl_status_free(st);
  }
}

hl_status_t hl_root_check_live(hl_root_t* root, const char* what) {
  int state = atomic_load(&root->state);
  if (HL_LIKELY(state == HL_ROOT_LIVE)) return NULL;
  if (state == HL_ROOT_FREED) {
    hl_memory_note(root->device, UINT32_MAX, HL_MEMORY_EVENT_USE_AFTER_FREE, 0);
    mtx_lock(&root->mutex);
    char who[sizeof(root->freed_by)];
    memcpy(who, root->freed_by, sizeof(who));
    mtx_unlock(&root->mutex);
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "use after free: %s touches root %llu (%llu bytes) "
                          "which was freed by %s",
                          what, (unsigned long long)root->id,
                          (unsigned long long)root->size, who);
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

bool hl_root_mark_freed(hl_root_t* root, const char* who) {
  mtx_lock(&root->mutex);
  int expected = HL_ROOT_LIVE;
  bool marked =
      atomic_compare_exchange_strong(&root->state, &expected, HL_ROOT_FREED);
  if (marked) snprintf(root->freed_by, sizeof(root->freed_by), "%s", who);
  mtx_unlock(&root->mutex);
  return marked;
}

hl_status_t hl_root_return_memory(hl_root_t* root,
                                  hl_backend_stream_t* stream) {
  void* ptr = atomic_load(&root->ptr);
  if (root->memory == HL_ROOT_MEMORY_EXTERNAL) {
    if (root->release_fn) root->release_fn(root->release_user, ptr);
    return NULL;
  }
  hl_memory_note(root->device, hl_queue_id(root->affinity_queue),
                 HL_MEMORY_EVENT_FREE_BYTES, root->size);
  if (root->suballocation) return hl_memory_pool_free(root, stream);
  hl_backend_t* backend = root->device->backend;
  return backend->vtable->free_async(backend, ptr, stream);
}

hl_status_t hl_root_free_memory(hl_root_t* root, hl_backend_stream_t* stream,
                                const char* who) {
  if (!hl_root_mark_freed(root, who)) {
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "root %llu freed twice (second: %s)",
                          (unsigned long long)root->id, who);
  }
  return hl_root_return_memory(root, stream);
}

//===----------------------------------------------------------------------===//
// Fallback release
//===----------------------------------------------------------------------===//

typedef struct hl_fallback_t {
  hl_root_t* root;
  hl_fence_t* fence;
} hl_fallback_t;

// Drains every queue's stream of the device (stop-the-world).
static void hl_memory_drain_streams(hl_device_t* device) {
  hl_queue_t** queues = NULL;
  uint32_t count = 0;
  hl_status_t st = hl_device_snapshot_queues(device, &queues, &count);
  if (st) {
    HL_LOG_ERROR("fallback release: cannot list queues: %s",
                 hl_status_message(st));
    hl_status_free(st);
    return;
  }
  for (uint32_t i = 0; i < count; ++i) {
    hl_status_ignore(device->backend->vtable->stream_synchronize(
        device->backend, hl_queue_stream(queues[i])));
    hl_queue_release(queues[i]);
  }
  free(queues);
}

static void hl_memory_fallback_finish(hl_root_t* root, const char* who) {
  hl_backend_stream_t* stream =
      root->affinity_queue ? hl_queue_stream(root->affinity_queue) : NULL;
  hl_status_t st = hl_root_free_memory(root, stream, who);
  if (st) {
    HL_LOG_ERROR("fallback release of root %llu: %s",
                 (unsigned long long)root->id, hl_status_message(st));
    hl_status_free(st);
  }
  hl_root_destroy(root);
}

static void hl_memory_frontier_reached(void* user, hl_status_t status) {
  hl_fallback_t* fb = (hl_fallback_t*)user;
  if (status) {
    // Some queue failed, so its timeline will not say when it is done with
    // the memory; fall back to draining the streams themselves.
    hl_memory_drain_streams(fb->root->device);
  }
  hl_memory_fallback_finish(fb->root, "fallback release (frontier)");
  hl_fence_release(fb->fence);
  free(fb);
}

void hl_memory_fallback_release(hl_root_t* root) {
  hl_device_t* device = root->device;
  uint32_t queue_id =
      root->affinity_queue ? hl_queue_id(root->affinity_queue) : UINT32_MAX;
  if (device->fallback == HL_FALLBACK_DEVICE_SYNC) {
    HL_TRACE_ZONE_BEGIN(zone, "FallbackDeviceSync");
    hl_memory_note(device, queue_id, HL_MEMORY_EVENT_FALLBACK_DEVICE_SYNC, 0);
    hl_memory_drain_streams(device);
    hl_memory_fallback_finish(root, "fallback release (device-sync)");
    HL_TRACE_ZONE_END(zone);
    return;
  }
  HL_TRACE_ZONE_BEGIN(zone, "FallbackFrontier");
  hl_memory_note(device, queue_id, HL_MEMORY_EVENT_FALLBACK_FRONTIER, 0);
  // Everything submitted to any queue of the device so far, plus every use
  // recorded on the root (which may name other devices' queues).
  hl_fallback_t* fb = calloc(1, sizeof(*fb));
  hl_status_t st = fb ? hl_fence_create(device->host_allocator, &fb->fence)
                      : HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                                       "allocating a fallback release");
  hl_queue_t** queues = NULL;
  uint32_t count = 0;
  if (!st) st = hl_device_snapshot_queues(device, &queues, &count);
  for (uint32_t i = 0; i < count; ++i) {
    if (!st) {
      st = hl_fence_insert(fb->fence, hl_queue_timeline(queues[i]),
                           hl_queue_submitted_value(queues[i]));
    }
    hl_queue_release(queues[i]);
  }
  free(queues);
  if (!st) {
    mtx_lock(&root->mutex);
    st = hl_fence_join(fb->fence, root->use_fence);
    mtx_unlock(&root->mutex);
  }
  if (!st) {
    fb->root = root;
    bool reached = false;
    hl_status_t failure = hl_fence_is_reached(fb->fence, &reached);
    if (!failure && reached) {
      // Every queue is already past its value: free now, on this thread.
      hl_memory_frontier_reached(fb, NULL);
      HL_TRACE_ZONE_END(zone);
      return;
    }
    hl_status_free(failure);
    st = hl_fence_notify(fb->fence, device, hl_memory_frontier_reached, fb);
  }
  if (st) {
    // Could not arrange the deferred free: do the stop-the-world one.
    HL_LOG_WARN("frontier release of root %llu degraded to device-sync: %s",
                (unsigned long long)root->id, hl_status_message(st));
    hl_status_free(st);
    if (fb) hl_fence_release(fb->fence);
    free(fb);
    hl_memory_drain_streams(device);
    hl_memory_fallback_finish(root, "fallback release (frontier, degraded)");
  }
  HL_TRACE_ZONE_END(zone);
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

hl_status_t hl_buffer_create_view(hl_root_t* root, uint64_t offset,
                                  uint64_t length, hl_buffer_token_t* token,
                                  hl_buffer_t** out_buffer) {
  hl_buffer_t* buffer = NULL;
  HL_RETURN_IF_ERROR(hl_allocator_calloc(root->device->host_allocator,
                                         sizeof(*buffer), (void**)&buffer),
                     "creating a buffer view");
  atomic_init(&buffer->ref_count, 1);
  hl_root_retain(root);
  buffer->root = root;
  buffer->offset = offset;
  buffer->length = length;
  if (token) atomic_fetch_add(&token->ref_count, 1);
  buffer->token = token;
  *out_buffer = buffer;
  return NULL;
}

void hl_buffer_retain(hl_buffer_t* buffer) {
  if (buffer)
    atomic_fetch_add_explicit(&buffer->ref_count, 1, memory_order_relaxed);
}

void hl_buffer_release(hl_buffer_t* buffer) {
  if (!buffer) return;
  if (atomic_fetch_sub_explicit(&buffer->ref_count, 1, memory_order_acq_rel) !=
      1) {
    return;
  }
  hl_root_t* root = buffer->root;
  hl_buffer_token_t* token = buffer->token;
  hl_allocator_free(root->device->host_allocator, buffer);
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
                                          HL_BUFFER_ORIGIN_EXTERNAL, size,
                                          &root));
  atomic_store(&root->ptr, device_ptr);
  atomic_store(&root->state, HL_ROOT_LIVE);
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
  mtx_lock(&root->mutex);
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
  mtx_unlock(&root->mutex);
  return st;
}

hl_status_t hl_buffer_unregister_global(hl_buffer_t* buffer) {
  if (!buffer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_unregister_global: buffer is NULL");
  }
  hl_root_t* root = buffer->root;
  mtx_lock(&root->mutex);
  bool registered = atomic_load(&root->origin) == HL_BUFFER_ORIGIN_PERSISTENT;
  if (registered) {
    atomic_store(&root->origin, root->memory == HL_ROOT_MEMORY_EXTERNAL
                                    ? HL_BUFFER_ORIGIN_EXTERNAL
                                    : HL_BUFFER_ORIGIN_ASYNC);
  }
  mtx_unlock(&root->mutex);
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

void* hl_buffer_device_pointer(const hl_buffer_t* buffer) {
  if (!buffer) return NULL;
  char* base = (char*)atomic_load(&buffer->root->ptr);
  return base ? base + buffer->offset : NULL;
}

bool hl_buffer_is_freed(const hl_buffer_t* buffer) {
  return buffer && atomic_load(&buffer->root->state) == HL_ROOT_FREED;
}

hl_status_t hl_buffer_use_fence(const hl_buffer_t* buffer, hl_fence_t* fence) {
  if (!buffer || !fence) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_use_fence: NULL buffer or fence");
  }
  mtx_lock(&buffer->root->mutex);
  hl_status_t st = hl_fence_join(fence, buffer->root->use_fence);
  mtx_unlock(&buffer->root->mutex);
  return st;
}

hl_status_t hl_buffer_mutation_barrier(const hl_buffer_t* buffer,
                                       hl_fence_t* fence) {
  if (!buffer || !fence) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_mutation_barrier: NULL buffer or fence");
  }
  mtx_lock(&buffer->root->mutex);
  hl_status_t st = hl_fence_join(fence, buffer->root->mutation_barrier);
  mtx_unlock(&buffer->root->mutex);
  return st;
}

hl_status_t hl_root_create_async(hl_queue_t* queue, uint64_t size,
                                 hl_root_t** out_root) {
  return hl_root_create(hl_queue_device(queue), queue, HL_ROOT_MEMORY_POOL,
                        HL_BUFFER_ORIGIN_ASYNC, size, out_root);
}
