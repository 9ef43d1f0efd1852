// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The hip backend's stream-ordered allocation and its pool.

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>

#include "runtime/backend/backend.h"
#include "runtime/backend/hip/dynamic_symbols.h"
#include "runtime/backend/hip/hip_internal.h"
#include "runtime/backend/hip/size_map.h"
#include "runtime/backend/hip/status_util.h"
#include "runtime/base/log.h"

static void hl_hip_atomic_max(_Atomic uint64_t* target, uint64_t value) {
  uint64_t current = atomic_load_explicit(target, memory_order_relaxed);
  while (current < value && !atomic_compare_exchange_weak_explicit(
                                target, &current, value, memory_order_relaxed,
                                memory_order_relaxed)) {
  }
}

//===----------------------------------------------------------------------===//
// Stream-ordered allocation
//===----------------------------------------------------------------------===//

// Adds |size| to the bytes in use unless that would pass the limit.
// With a limit set, the pool's reservation (blocks in use plus freed blocks
// it keeps) is held under the limit too: ROCm reuses a freed block only
// within 12.5% of the request (clr hip_mempool_impl.cpp, Heap::FindMemory),
// so freed blocks of other sizes would otherwise add up past it. Freed
// blocks whose free has completed are released to make room for |size|,
// as the host backend trims its cache before reporting out of memory.
static void hl_hip_backend_trim_for_limit(hl_hip_backend_t* backend,
                                          size_t size) {
  uint64_t limit =
      atomic_load_explicit(&backend->limit_bytes, memory_order_relaxed);
  if (!limit) return;
  const hl_hip_dynamic_symbols_t* syms = backend->syms;
  uint64_t reserved = 0;
  if (syms->hipMemPoolGetAttribute(backend->pool,
                                   hipMemPoolAttrReservedMemCurrent,
                                   &reserved) != hipSuccess ||
      reserved + size <= limit) {
    return;
  }
  size_t keep = limit > size ? (size_t)(limit - size) : 0;
  hl_hip_log_and_ignore(
      HL_HIP_RESULT_TO_STATUS(syms, hipMemPoolTrimTo(backend->pool, keep),
                              "hipMemPoolTrimTo(device %d, %zu bytes)",
                              backend->ordinal, keep),
      "malloc_async");
}

static hl_status_t hl_hip_backend_reserve(hl_hip_backend_t* backend,
                                          size_t size) {
  uint64_t limit =
      atomic_load_explicit(&backend->limit_bytes, memory_order_relaxed);
  uint64_t used =
      atomic_load_explicit(&backend->used_bytes, memory_order_relaxed);
  // What the pool itself counts in use: the blocks handed out, which can be
  // larger than what was asked (ROCm 5.2's pool reuses any free block at
  // least as large as the request; later ones stay within 12.5%). The sum of
  // requests alone would let the pool pass the limit.
  uint64_t pool_used = 0;
  if (limit && backend->syms->hipMemPoolGetAttribute(
                   backend->pool, hipMemPoolAttrUsedMemCurrent, &pool_used) !=
                   hipSuccess) {
    pool_used = 0;
  }
  for (;;) {
    uint64_t in_use = used > pool_used ? used : pool_used;
    if (limit && (size > limit || in_use > limit - size)) {
      atomic_fetch_add(&backend->fail_count, 1);
      return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                            "malloc_async(%zu bytes) on hip device %d would "
                            "pass the pool limit: %llu bytes in use, limit "
                            "%llu bytes",
                            size, backend->ordinal, (unsigned long long)in_use,
                            (unsigned long long)limit);
    }
    if (atomic_compare_exchange_weak_explicit(&backend->used_bytes, &used,
                                              used + size, memory_order_relaxed,
                                              memory_order_relaxed)) {
      hl_hip_atomic_max(&backend->used_high_bytes, used + size);
      return hl_ok_status();
    }
  }
}

hl_status_t hl_hip_malloc_async_on_device(hl_backend_t* base, size_t size,
                                          hl_backend_stream_t* stream,
                                          void** out_ptr) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  const hl_hip_dynamic_symbols_t* syms = backend->syms;
  *out_ptr = NULL;
  if (size == 0) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "malloc_async of 0 bytes on hip device %d",
                          backend->ordinal);
  }
  HL_RETURN_IF_ERROR_PLAIN(hl_hip_backend_reserve(backend, size));
  hl_hip_backend_trim_for_limit(backend, size);
  hipStream_t handle = hl_hip_stream_handle(stream);
  void* ptr = NULL;
  hl_status_t status = hl_ok_status();
  {
    if (backend->owns_pool) {
      status = HL_HIP_RESULT_TO_STATUS(
          syms, hipMallocFromPoolAsync(&ptr, size, backend->pool, handle),
          "hipMallocFromPoolAsync(%zu bytes)", size);
    } else {
      status = HL_HIP_RESULT_TO_STATUS(syms, hipMallocAsync(&ptr, size, handle),
                                       "hipMallocAsync(%zu bytes)", size);
    }
  }
  if (hl_status_is_ok(status)) {
    status = hl_hip_size_map_insert_owned(&backend->sizes, ptr, size, handle);
    if (!hl_status_is_ok(status)) {
      hl_hip_log_and_ignore(
          HL_HIP_RESULT_TO_STATUS(syms, hipFreeAsync(ptr, handle),
                                  "hipFreeAsync(%p)", ptr),
          "malloc_async cleanup");
    }
  }
  if (!hl_status_is_ok(status)) {
    atomic_fetch_sub(&backend->used_bytes, size);
    if (hl_status_code(status) == HL_STATUS_RESOURCE_EXHAUSTED) {
      atomic_fetch_add(&backend->fail_count, 1);
    }
    return hl_status_annotate(status, "hip device %d", backend->ordinal);
  }
  atomic_fetch_add(&backend->alloc_count, 1);
  *out_ptr = ptr;
  return hl_ok_status();
}

// Frees |ptr| after the work enqueued so far on |stream| when the block was
// allocated on |owner|, another stream. ROCm lets the allocating stream
// reuse a freed block at once, whatever stream freed it and whether or not
// the free has executed (clr hipamd/src/hip_mempool_impl.hpp, IsSafeFind:
// the allocating stream is in safe_streams_; AddSafeStream never adds the
// freeing one). So the free goes to |owner|, after |owner| waits on an
// event recorded on |stream| now: |owner|'s next allocations come after
// the wait in its own order, and other streams reuse the block only once
// the free's marker on |owner| has completed (opportunistic reuse), which
// is after |stream|'s work too.
static hl_status_t hl_hip_free_after(hl_hip_backend_t* backend, void* ptr,
                                     hipStream_t owner, hipStream_t stream) {
  const hl_hip_dynamic_symbols_t* syms = backend->syms;
  hipEvent_t event = NULL;
  mtx_lock(&backend->free_events_mutex);
  if (backend->free_event_count) {
    event = backend->free_events[--backend->free_event_count];
  }
  mtx_unlock(&backend->free_events_mutex);
  if (!event) {
    // An event belongs to the current device.
    hl_hip_device_scope_t scope;
    HL_RETURN_IF_ERROR_PLAIN(hl_hip_scope_enter(backend, &scope));
    hipError_t created =
        syms->hipEventCreateWithFlags(&event, HL_HIP_EVENT_DISABLE_TIMING);
    hl_hip_scope_exit(backend, &scope);
    if (created != hipSuccess) {
      return hl_hip_result_to_status(
          syms, created, __FILE__, __LINE__,
          "hipEventCreateWithFlags (cross-stream free of %p)", ptr);
    }
  }
  hl_status_t status =
      HL_HIP_RESULT_TO_STATUS(syms, hipEventRecord(event, stream),
                              "hipEventRecord(stream %p)", (void*)stream);
  if (hl_status_is_ok(status)) {
    status = HL_HIP_RESULT_TO_STATUS(
        syms, hipStreamWaitEvent(owner, event, 0),
        "hipStreamWaitEvent(allocating stream %p, freeing stream %p)",
        (void*)owner, (void*)stream);
  }
  // The wait took the event's state when it was enqueued: the event may be
  // recorded again at once.
  mtx_lock(&backend->free_events_mutex);
  bool kept = backend->free_event_count < HL_HIP_FREE_EVENTS;
  if (kept) backend->free_events[backend->free_event_count++] = event;
  mtx_unlock(&backend->free_events_mutex);
  if (!kept) {
    hl_hip_log_and_ignore(
        HL_HIP_RESULT_TO_STATUS(syms, hipEventDestroy(event),
                                "hipEventDestroy (cross-stream free)"),
        "free_async");
  }
  if (!hl_status_is_ok(status)) return status;
  return HL_HIP_RESULT_TO_STATUS(
      syms, hipFreeAsync(ptr, owner),
      "hipFreeAsync(%p, allocating stream %p, after stream %p)", ptr,
      (void*)owner, (void*)stream);
}

// A free on another stream than the allocating one (|owner|), with
// |backend->free_lock| held shared (it keeps |owner| from being destroyed
// while the redirect enqueues on it). The driver calls made under the lock
// are this path's only ones: the query and the redirect.
static hl_status_t hl_hip_free_cross_stream_locked(hl_hip_backend_t* backend,
                                                   void* ptr, hipStream_t owner,
                                                   hipStream_t handle) {
  // A freeing stream with nothing pending orders the free after nothing:
  // every use of the block has completed, so the allocating stream may
  // reuse it at once and the free needs no redirect. Callers that give
  // back idle memory (the suballocator's trim) rely on this to find the
  // block trimmable once |handle| is synchronized.
  hipError_t idle = backend->syms->hipStreamQuery(handle);
  if (idle == hipSuccess) {
    return HL_HIP_RESULT_TO_STATUS(backend->syms, hipFreeAsync(ptr, handle),
                                   "hipFreeAsync(%p, idle stream %p)", ptr,
                                   (void*)handle);
  }
  if (idle != hipErrorNotReady) {
    return hl_hip_result_to_status(backend->syms, idle, __FILE__, __LINE__,
                                   "hipStreamQuery(stream %p)", (void*)handle);
  }
  return hl_hip_free_after(backend, ptr, owner, handle);
}

hl_status_t hl_hip_free_async_on_device(hl_backend_t* base, void* ptr,
                                        hl_backend_stream_t* stream) {
  if (!ptr) return hl_ok_status();
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hipStream_t handle = hl_hip_stream_handle(stream);
  uint64_t size = 0;
  void* owner = NULL;
  pthread_rwlock_rdlock(&backend->free_lock);
  if (!hl_hip_size_map_remove_owned(&backend->sizes, ptr, &size, &owner)) {
    pthread_rwlock_unlock(&backend->free_lock);
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "free_async(%p) on hip device %d: not a live "
                          "allocation of this device",
                          ptr, backend->ordinal);
  }
  hl_status_t status = hl_ok_status();
  if (owner && owner != (void*)handle) {
    status = hl_hip_free_cross_stream_locked(backend, ptr, (hipStream_t)owner,
                                             handle);
    if (!hl_status_is_ok(status)) {
      // The block is still live; keep accounting for it.
      hl_status_ignore(
          hl_hip_size_map_insert_owned(&backend->sizes, ptr, size, owner));
    }
    pthread_rwlock_unlock(&backend->free_lock);
  } else {
    // Same stream, or the allocating stream is gone (its destruction
    // synchronized it, and ROCm dropped it from the block's safe streams):
    // the free enqueues on the caller's own stream, outside the lock.
    pthread_rwlock_unlock(&backend->free_lock);
    status =
        HL_HIP_RESULT_TO_STATUS(backend->syms, hipFreeAsync(ptr, handle),
                                "hipFreeAsync(%p, %llu bytes, stream %p)", ptr,
                                (unsigned long long)size, (void*)handle);
    if (!hl_status_is_ok(status)) {
      // Still live, and |owner| is the caller's stream or none.
      hl_status_ignore(
          hl_hip_size_map_insert_owned(&backend->sizes, ptr, size, owner));
    }
  }
  if (!hl_status_is_ok(status)) return status;
  atomic_fetch_sub(&backend->used_bytes, size);
  atomic_fetch_add(&backend->free_count, 1);
  return hl_ok_status();
}

// The three reuse policies, in HL_POOL_REUSE_* bit order.
static const struct {
  uint32_t flag;
  hipMemPoolAttr attr;
  const char* name;
} hl_hip_reuse_attrs[3] = {
    {HL_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES,
     hipMemPoolReuseFollowEventDependencies,
     "hipMemPoolReuseFollowEventDependencies"},
    {HL_POOL_REUSE_ALLOW_OPPORTUNISTIC, hipMemPoolReuseAllowOpportunistic,
     "hipMemPoolReuseAllowOpportunistic"},
    {HL_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
     hipMemPoolReuseAllowInternalDependencies,
     "hipMemPoolReuseAllowInternalDependencies"},
};

hl_status_t hl_hip_pool_set_attributes_on_device(
    hl_backend_t* base, const hl_pool_attributes_t* attrs) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  const hl_hip_dynamic_symbols_t* syms = backend->syms;
  if (attrs->reuse_flags & ~(uint32_t)HL_POOL_REUSE_ALL) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "pool reuse flags 0x%x on hip device %d: only bits "
                          "0x%x are defined",
                          (unsigned)attrs->reuse_flags, backend->ordinal,
                          (unsigned)HL_POOL_REUSE_ALL);
  }
  uint64_t threshold = attrs->release_threshold;
  HL_HIP_RETURN_IF_ERROR(
      syms,
      hipMemPoolSetAttribute(backend->pool, hipMemPoolAttrReleaseThreshold,
                             &threshold),
      "hipMemPoolSetAttribute(device %d, ReleaseThreshold, %llu bytes)",
      backend->ordinal, (unsigned long long)threshold);
  for (size_t i = 0; i < 3; ++i) {
    int enabled = (attrs->reuse_flags & hl_hip_reuse_attrs[i].flag) ? 1 : 0;
    HL_HIP_RETURN_IF_ERROR(
        syms,
        hipMemPoolSetAttribute(backend->pool, hl_hip_reuse_attrs[i].attr,
                               &enabled),
        "hipMemPoolSetAttribute(device %d, %s, %d)", backend->ordinal,
        hl_hip_reuse_attrs[i].name, enabled);
  }
  atomic_store(&backend->limit_bytes, attrs->limit_bytes);
  return hl_ok_status();
}

hl_status_t hl_hip_pool_get_attributes_on_device(hl_backend_t* base,
                                                 hl_pool_attributes_t* out) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  const hl_hip_dynamic_symbols_t* syms = backend->syms;
  memset(out, 0, sizeof(*out));
  uint64_t threshold = 0;
  HL_HIP_RETURN_IF_ERROR(
      syms,
      hipMemPoolGetAttribute(backend->pool, hipMemPoolAttrReleaseThreshold,
                             &threshold),
      "hipMemPoolGetAttribute(device %d, ReleaseThreshold)", backend->ordinal);
  uint32_t flags = 0;
  for (size_t i = 0; i < 3; ++i) {
    int enabled = 0;
    HL_HIP_RETURN_IF_ERROR(
        syms,
        hipMemPoolGetAttribute(backend->pool, hl_hip_reuse_attrs[i].attr,
                               &enabled),
        "hipMemPoolGetAttribute(device %d, %s)", backend->ordinal,
        hl_hip_reuse_attrs[i].name);
    if (enabled) flags |= hl_hip_reuse_attrs[i].flag;
  }
  out->release_threshold = threshold;
  out->reuse_flags = flags;
  out->limit_bytes = atomic_load(&backend->limit_bytes);
  return hl_ok_status();
}

hl_status_t hl_hip_pool_trim_on_device(hl_backend_t* base,
                                       uint64_t min_bytes_to_keep) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  // The contract counts what is in use: at most |min_bytes_to_keep| stay
  // reserved. ROCm's hipMemPoolTrimTo keeps its argument of free memory
  // (MemoryPool::TrimTo releases the free heap down to it) on top of the
  // blocks in use, so it gets what the contract leaves for free blocks.
  // (CUDA counts reserved memory, in use included: there this trims at
  // least as far as the contract asks.)
  uint64_t used = atomic_load(&backend->used_bytes);
  uint64_t free_to_keep =
      min_bytes_to_keep > used ? min_bytes_to_keep - used : 0;
  size_t keep = free_to_keep > SIZE_MAX ? SIZE_MAX : (size_t)free_to_keep;
  return HL_HIP_RESULT_TO_STATUS(
      backend->syms, hipMemPoolTrimTo(backend->pool, keep),
      "hipMemPoolTrimTo(device %d, %zu bytes)", backend->ordinal, keep);
}

hl_status_t hl_hip_pool_stats_on_device(hl_backend_t* base,
                                        hl_backend_pool_stats_t* out) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  const hl_hip_dynamic_symbols_t* syms = backend->syms;
  memset(out, 0, sizeof(*out));
  uint64_t reserved = 0, reserved_high = 0;
  HL_HIP_RETURN_IF_ERROR(
      syms,
      hipMemPoolGetAttribute(backend->pool, hipMemPoolAttrReservedMemCurrent,
                             &reserved),
      "hipMemPoolGetAttribute(device %d, ReservedMemCurrent)",
      backend->ordinal);
  HL_HIP_RETURN_IF_ERROR(
      syms,
      hipMemPoolGetAttribute(backend->pool, hipMemPoolAttrReservedMemHigh,
                             &reserved_high),
      "hipMemPoolGetAttribute(device %d, ReservedMemHigh)", backend->ordinal);
  out->used_bytes = atomic_load(&backend->used_bytes);
  out->used_high_bytes = atomic_load(&backend->used_high_bytes);
  out->reserved_bytes = reserved;
  out->reserved_high_bytes = reserved_high;
  out->alloc_count = atomic_load(&backend->alloc_count);
  out->free_count = atomic_load(&backend->free_count);
  out->fail_count = atomic_load(&backend->fail_count);
  // HIP reports neither block reuse nor blocks released by trimming.
  out->reuse_count = 0;
  out->trim_count = 0;
  return hl_ok_status();
}
