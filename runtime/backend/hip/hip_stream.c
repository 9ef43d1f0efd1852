// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The hip backend's streams, events, host functions, copies and fills.

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

//===----------------------------------------------------------------------===//
// Streams
//===----------------------------------------------------------------------===//

hl_status_t hl_hip_stream_create_on_device(hl_backend_t* base,
                                           hl_backend_stream_t** out_stream) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  *out_stream = NULL;
  hipStream_t stream = NULL;
  HL_HIP_RETURN_IF_ERROR(
      backend->syms,
      hipStreamCreateWithFlags(&stream, HL_HIP_STREAM_NON_BLOCKING),
      "hipStreamCreateWithFlags(device %d, non-blocking)", backend->ordinal);
  atomic_fetch_add(&backend->live_streams, 1);
  *out_stream = (hl_backend_stream_t*)stream;
  return hl_ok_status();
}

void hl_hip_stream_destroy_on_device(hl_backend_t* base,
                                     hl_backend_stream_t* stream) {
  if (!stream) return;
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hipStream_t handle = hl_hip_stream_handle(stream);
  hl_hip_log_and_ignore(
      HL_HIP_RESULT_TO_STATUS(backend->syms, hipStreamSynchronize(handle),
                              "hipStreamSynchronize(stream %p)", (void*)handle),
      "stream_destroy");
  hl_hip_log_and_ignore(
      HL_HIP_RESULT_TO_STATUS(backend->syms, hipStreamDestroy(handle),
                              "hipStreamDestroy(stream %p)", (void*)handle),
      "stream_destroy");
  atomic_fetch_sub(&backend->live_streams, 1);
}

hl_status_t hl_hip_stream_synchronize(hl_backend_t* base,
                                      hl_backend_stream_t* stream) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hipStream_t handle = hl_hip_stream_handle(stream);
  return HL_HIP_RESULT_TO_STATUS(backend->syms, hipStreamSynchronize(handle),
                                 "hipStreamSynchronize(stream %p)",
                                 (void*)handle);
}

//===----------------------------------------------------------------------===//
// Events
//===----------------------------------------------------------------------===//

hl_status_t hl_hip_event_create_on_device(hl_backend_t* base,
                                          hl_backend_event_t** out_event) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  *out_event = NULL;
  void* memory = NULL;
  HL_RETURN_IF_ERROR(hl_allocator_calloc(backend->base.host_allocator,
                                         sizeof(hl_hip_event_t), &memory),
                     "creating an event on hip device %d", backend->ordinal);
  // Zeroed by the calloc: |recorded| starts false. (An atomic_init here made
  // GCC 12's LTO warn -Wstringop-overflow about the store, not proving the
  // pointer non-NULL.)
  hl_hip_event_t* event = memory;
  // Timing is disabled: the layers above never read elapsed time, and a
  // timed event costs ROCm a timestamp per record (events_untimed in
  // backend.h). Blocking sync makes hipEventSynchronize sleep, not spin.
  hl_status_t status = HL_HIP_RESULT_TO_STATUS(
      backend->syms,
      hipEventCreateWithFlags(&event->handle, HL_HIP_EVENT_BLOCKING_SYNC |
                                                  HL_HIP_EVENT_DISABLE_TIMING),
      "hipEventCreateWithFlags(device %d, blocking sync, timing disabled)",
      backend->ordinal);
  if (!hl_status_is_ok(status)) {
    hl_allocator_free(backend->base.host_allocator, event);
    return status;
  }
  atomic_fetch_add(&backend->live_events, 1);
  *out_event = (hl_backend_event_t*)event;
  return hl_ok_status();
}

void hl_hip_event_destroy(hl_backend_t* base, hl_backend_event_t* base_event) {
  if (!base_event) return;
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hl_hip_event_t* event = hl_hip_event_cast(base_event);
  hl_hip_log_and_ignore(HL_HIP_RESULT_TO_STATUS(
                            backend->syms, hipEventDestroy(event->handle),
                            "hipEventDestroy(event %p)", (void*)event->handle),
                        "event_destroy");
  hl_allocator_free(backend->base.host_allocator, event);
  atomic_fetch_sub(&backend->live_events, 1);
}

hl_status_t hl_hip_event_record(hl_backend_t* base,
                                hl_backend_event_t* base_event,
                                hl_backend_stream_t* stream) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hl_hip_event_t* event = hl_hip_event_cast(base_event);
  hipStream_t handle = hl_hip_stream_handle(stream);
  HL_HIP_RETURN_IF_ERROR(backend->syms, hipEventRecord(event->handle, handle),
                         "hipEventRecord(event %p, stream %p)",
                         (void*)event->handle, (void*)handle);
  atomic_store_explicit(&event->recorded, true, memory_order_release);
  return hl_ok_status();
}

static bool hl_hip_event_was_recorded(hl_hip_event_t* event) {
  return atomic_load_explicit(&event->recorded, memory_order_acquire);
}

hl_status_t hl_hip_event_query(hl_backend_t* base,
                               hl_backend_event_t* base_event,
                               bool* out_complete) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hl_hip_event_t* event = hl_hip_event_cast(base_event);
  if (!hl_hip_event_was_recorded(event)) {
    *out_complete = true;
    return hl_ok_status();
  }
  hipError_t error = backend->syms->hipEventQuery(event->handle);
  if (error == hipErrorNotReady) {
    *out_complete = false;
    return hl_ok_status();
  }
  *out_complete = error == hipSuccess;
  return hl_hip_result_to_status(backend->syms, error, __FILE__, __LINE__,
                                 "hipEventQuery(event %p)",
                                 (void*)event->handle);
}

hl_status_t hl_hip_stream_query(hl_backend_t* base, hl_backend_stream_t* stream,
                                bool* out_idle) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hipStream_t handle = hl_hip_stream_handle(stream);
  hipError_t error = backend->syms->hipStreamQuery(handle);
  *out_idle = error == hipSuccess;
  if (error == hipErrorNotReady || error == hipSuccess) return hl_ok_status();
  return hl_hip_result_to_status(backend->syms, error, __FILE__, __LINE__,
                                 "hipStreamQuery(stream %p)", (void*)handle);
}

hl_status_t hl_hip_event_synchronize(hl_backend_t* base,
                                     hl_backend_event_t* base_event) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hl_hip_event_t* event = hl_hip_event_cast(base_event);
  if (!hl_hip_event_was_recorded(event)) return hl_ok_status();
  return HL_HIP_RESULT_TO_STATUS(
      backend->syms, hipEventSynchronize(event->handle),
      "hipEventSynchronize(event %p)", (void*)event->handle);
}

hl_status_t hl_hip_event_elapsed_ms(hl_backend_t* base,
                                    hl_backend_event_t* base_start,
                                    hl_backend_event_t* base_end,
                                    float* out_ms) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  (void)base_start;
  (void)base_end;
  *out_ms = 0.0f;
  return HL_MAKE_STATUS(HL_STATUS_UNIMPLEMENTED,
                        "event_elapsed_ms on hip device %d: events are made "
                        "with hipEventDisableTiming (events_untimed)",
                        backend->ordinal);
}

hl_status_t hl_hip_stream_wait_event(hl_backend_t* base,
                                     hl_backend_stream_t* stream,
                                     hl_backend_event_t* base_event) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hl_hip_event_t* event = hl_hip_event_cast(base_event);
  // An event never recorded is complete: there is nothing to wait for.
  if (!hl_hip_event_was_recorded(event)) return hl_ok_status();
  hipStream_t handle = hl_hip_stream_handle(stream);
  return HL_HIP_RESULT_TO_STATUS(backend->syms,
                                 hipStreamWaitEvent(handle, event->handle, 0),
                                 "hipStreamWaitEvent(stream %p, event %p)",
                                 (void*)handle, (void*)event->handle);
}

//===----------------------------------------------------------------------===//
// Host functions, copies and fills
//===----------------------------------------------------------------------===//

// Runs a host function queued with hipStreamAddCallback and frees its
// record. The call runs whatever |status| says: the layers above gate their
// own work on failure.
static void hl_hip_host_call_trampoline(hipStream_t stream, hipError_t status,
                                        void* user_data) {
  (void)stream;
  (void)status;
  hl_hip_host_call_t* call = user_data;
  hl_host_fn_t fn = call->fn;
  void* user = call->user;
  hl_allocator_free(call->allocator, call);
  fn(user);
}

hl_status_t hl_hip_launch_host_func(hl_backend_t* base,
                                    hl_backend_stream_t* stream,
                                    hl_host_fn_t fn, void* user) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  const hl_hip_dynamic_symbols_t* syms = backend->syms;
  hipStream_t handle = hl_hip_stream_handle(stream);
  if (syms->hipLaunchHostFunc) {
    return HL_HIP_RESULT_TO_STATUS(syms, hipLaunchHostFunc(handle, fn, user),
                                   "hipLaunchHostFunc(stream %p)",
                                   (void*)handle);
  }
  void* memory = NULL;
  HL_RETURN_IF_ERROR(hl_allocator_calloc(backend->base.host_allocator,
                                         sizeof(hl_hip_host_call_t), &memory),
                     "queueing a host function on stream %p", (void*)handle);
  hl_hip_host_call_t* call = memory;
  call->fn = fn;
  call->user = user;
  call->allocator = backend->base.host_allocator;
  hl_status_t status = HL_HIP_RESULT_TO_STATUS(
      syms, hipStreamAddCallback(handle, hl_hip_host_call_trampoline, call, 0),
      "hipStreamAddCallback(stream %p)", (void*)handle);
  if (!hl_status_is_ok(status)) {
    hl_allocator_free(backend->base.host_allocator, call);
  }
  return status;
}

static int hl_hip_staging_class(size_t size) {
  int size_class = 0;
  while (((size_t)1 << (HL_HIP_STAGING_MIN_SHIFT + size_class)) < size) {
    ++size_class;
  }
  return size_class;
}

// Takes a chunk of at least |size| bytes (<= HL_HIP_STAGING_MAX_BYTES) from
// the free list, or pins a new one.
static hl_status_t hl_hip_staging_acquire(hl_hip_backend_t* backend,
                                          size_t size,
                                          hl_hip_staging_t** out_chunk) {
  int size_class = hl_hip_staging_class(size);
  mtx_lock(&backend->staging_mutex);
  hl_hip_staging_t* chunk = backend->staging_free[size_class];
  if (chunk) backend->staging_free[size_class] = chunk->next;
  mtx_unlock(&backend->staging_mutex);
  if (!chunk) {
    void* memory = NULL;
    HL_RETURN_IF_ERROR(hl_allocator_calloc(backend->base.host_allocator,
                                           sizeof(*chunk), &memory),
                       "allocating a staging chunk record on hip device %d",
                       backend->ordinal);
    chunk = memory;
    chunk->backend = backend;
    chunk->size_class = size_class;
    size_t bytes = (size_t)1 << (HL_HIP_STAGING_MIN_SHIFT + size_class);
    hl_status_t status = HL_HIP_RESULT_TO_STATUS(
        backend->syms, hipHostMalloc(&chunk->pinned, bytes, 0),
        "hipHostMalloc(%zu-byte staging chunk, device %d)", bytes,
        backend->ordinal);
    if (!hl_status_is_ok(status)) {
      hl_allocator_free(backend->base.host_allocator, chunk);
      return status;
    }
    mtx_lock(&backend->staging_mutex);
    ++backend->staging_live;
    mtx_unlock(&backend->staging_mutex);
  }
  chunk->next = NULL;
  chunk->host = NULL;
  chunk->size = size;
  *out_chunk = chunk;
  return hl_ok_status();
}

static void hl_hip_staging_release(hl_hip_staging_t* chunk) {
  hl_hip_backend_t* backend = chunk->backend;
  mtx_lock(&backend->staging_mutex);
  chunk->next = backend->staging_free[chunk->size_class];
  backend->staging_free[chunk->size_class] = chunk;
  mtx_unlock(&backend->staging_mutex);
}

// The stream-ordered host function at the end of a staged copy (no HIP
// calls: it may run on HIP's callback thread). |user| is the copy's chain
// of chunks, linked by |next|: each device-to-host chunk delivers its bytes,
// then every chunk goes back to its free list.
static void hl_hip_staging_finish_fn(void* user) {
  hl_hip_staging_t* chunk = user;
  while (chunk) {
    hl_hip_staging_t* next = chunk->next;
    if (chunk->host) memcpy(chunk->host, chunk->pinned, chunk->size);
    hl_hip_staging_release(chunk);
    chunk = next;
  }
}

// Returns every free chunk to the system. In-flight chunks must be done
// (the backend's streams are destroyed, so synchronized, first).
void hl_hip_staging_deinitialize(hl_hip_backend_t* backend) {
  for (int c = 0; c < HL_HIP_STAGING_CLASSES; ++c) {
    while (backend->staging_free[c]) {
      hl_hip_staging_t* chunk = backend->staging_free[c];
      backend->staging_free[c] = chunk->next;
      hl_hip_log_and_ignore(HL_HIP_RESULT_TO_STATUS(
                                backend->syms, hipHostFree(chunk->pinned),
                                "hipHostFree(staging chunk %p)", chunk->pinned),
                            "destroy");
      hl_allocator_free(backend->base.host_allocator, chunk);
      --backend->staging_live;
    }
  }
  if (backend->staging_live) {
    HL_LOG_WARN("hip device %d destroyed with %lld staging chunks in flight",
                backend->ordinal, (long long)backend->staging_live);
  }
}

// One piece (<= HL_HIP_STAGING_MAX_BYTES) of a copy with a host side: its
// copy through a staging chunk, which it appends to |*tail| once enqueued
// (the copy's host function delivers and releases it).
static hl_status_t hl_hip_memcpy_staged(hl_hip_backend_t* backend, char* dst,
                                        const char* src, size_t size,
                                        bool to_device, hipStream_t handle,
                                        hl_hip_staging_t*** tail) {
  hl_hip_staging_t* chunk = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_hip_staging_acquire(backend, size, &chunk));
  hl_status_t status;
  if (to_device) {
    // The host bytes are taken now: the caller's buffer is stable from the
    // write's submission until its completion, and issue lies in between.
    memcpy(chunk->pinned, src, size);
    status = HL_HIP_RESULT_TO_STATUS(
        backend->syms,
        hipMemcpyAsync(dst, chunk->pinned, size, HL_HIP_MEMCPY_DEFAULT, handle),
        "hipMemcpyAsync(%p <- staging %p, %zu bytes, stream %p)", (void*)dst,
        chunk->pinned, size, (void*)handle);
  } else {
    chunk->host = dst;
    status = HL_HIP_RESULT_TO_STATUS(
        backend->syms,
        hipMemcpyAsync(chunk->pinned, src, size, HL_HIP_MEMCPY_DEFAULT, handle),
        "hipMemcpyAsync(staging %p <- %p, %zu bytes, stream %p)", chunk->pinned,
        (const void*)src, size, (void*)handle);
  }
  if (!hl_status_is_ok(status)) {
    hl_hip_staging_release(chunk);
    return status;
  }
  **tail = chunk;
  *tail = &chunk->next;
  return status;
}

// A copy with host memory on one side, through pinned staging in pieces,
// ended by one host function that delivers (device to host) and releases
// every chunk: one driver call per piece and one for the whole copy. When a
// piece fails, the pieces enqueued before it are still ended the same way.
static hl_status_t hl_hip_memcpy_through_staging(hl_hip_backend_t* backend,
                                                 char* dst, const char* src,
                                                 size_t size, bool to_device,
                                                 hl_backend_stream_t* stream) {
  hipStream_t handle = hl_hip_stream_handle(stream);
  hl_hip_staging_t* chain = NULL;
  hl_hip_staging_t** tail = &chain;
  hl_status_t status = hl_ok_status();
  for (size_t offset = 0; offset < size;) {
    size_t piece = size - offset;
    if (piece > HL_HIP_STAGING_MAX_BYTES) piece = HL_HIP_STAGING_MAX_BYTES;
    status = hl_hip_memcpy_staged(backend, dst + offset, src + offset, piece,
                                  to_device, handle, &tail);
    if (!hl_status_is_ok(status)) {
      status = hl_status_annotate(
          status, "copying bytes [%zu, %zu) of %zu through pinned staging",
          offset, offset + piece, size);
      break;
    }
    offset += piece;
  }
  if (!chain) return status;
  hl_status_t ended = hl_hip_launch_host_func(&backend->base, stream,
                                              hl_hip_staging_finish_fn, chain);
  if (!hl_status_is_ok(ended)) {
    // The copies are enqueued and may still read or write the chunks: leak
    // them rather than reuse them (the stream is broken anyway).
    HL_LOG_ERROR("hip device %d: leaking the staging chunks of a %zu-byte copy",
                 backend->ordinal, size);
    if (hl_status_is_ok(status)) return ended;
    hl_status_ignore(ended);
  }
  return status;
}

hl_status_t hl_hip_memcpy_async(hl_backend_t* base, void* dst, const void* src,
                                size_t size, hl_backend_stream_t* stream) {
  if (size == 0) return hl_ok_status();
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hipStream_t handle = hl_hip_stream_handle(stream);
  bool dst_device = hl_hip_size_map_contains_range(&backend->sizes, dst, size);
  bool src_device = hl_hip_size_map_contains_range(&backend->sizes, src, size);
  if (dst_device == src_device) {
    // Device to device, or memory this backend did not allocate on either
    // side (HIP infers the direction; such a copy may wait if pageable).
    return HL_HIP_RESULT_TO_STATUS(
        backend->syms,
        hipMemcpyAsync(dst, src, size, HL_HIP_MEMCPY_DEFAULT, handle),
        "hipMemcpyAsync(%p <- %p, %zu bytes, stream %p)", dst, src, size,
        (void*)handle);
  }
  return hl_hip_memcpy_through_staging(backend, (char*)dst, (const char*)src,
                                       size, dst_device, stream);
}

hl_status_t hl_hip_memset32_async(hl_backend_t* base, void* dst, uint32_t value,
                                  size_t count, hl_backend_stream_t* stream) {
  if (count == 0) return hl_ok_status();
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  if ((uintptr_t)dst % 4u != 0) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "memset32_async on hip device %d: destination %p "
                          "is not 4-byte aligned",
                          backend->ordinal, dst);
  }
  int word = 0;  // The same 32 bits, as the int HIP takes.
  memcpy(&word, &value, sizeof(word));
  hipStream_t handle = hl_hip_stream_handle(stream);
  return HL_HIP_RESULT_TO_STATUS(
      backend->syms, hipMemsetD32Async(dst, word, count, handle),
      "hipMemsetD32Async(%p, 0x%08x, %zu words, stream %p)", dst,
      (unsigned)value, count, (void*)handle);
}
