// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Shared internals of the hip backend: the backend contract
// (runtime/backend/backend.h) over one HIP device, with every HIP call made
// through the dynamically loaded symbol table (dynamic_symbols.h).
//
// Handles map onto HIP objects as follows:
// - a stream is the hipStream_t itself (non-blocking);
// - an event is an hl_hip_event_t wrapping a hipEvent_t and a "recorded"
//   flag, so an event never recorded counts as complete without asking HIP;
// - a module and a function are the hipModule_t and hipFunction_t.
//
// Memory comes from a hipMemPool created for the device; when the runtime
// cannot create pools, the device's default pool and hipMallocAsync serve
// instead. The backend keeps its own accounting (bytes in use, peak, counts,
// the size of each live block) because HIP does not report per-block sizes,
// and enforces limit_bytes itself.
//
// Files:
//   hip_backend.c  availability, properties, creation and the vtable
//   hip_scope.c    the device scope of the entry points (a leaf)
//   hip_stream.c   streams, events, host functions, copies and fills
//   hip_pool.c     stream-ordered allocation and the pool
//   hip_module.c   modules and kernels
//   hip_graph.c    graph capture and launch
//   hip_peer.c     peer access and peer copies
#ifndef HIPLINE_RUNTIME_BACKEND_HIP_HIP_INTERNAL_H_
#define HIPLINE_RUNTIME_BACKEND_HIP_HIP_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <threads.h>

#include "runtime/backend/backend.h"
#include "runtime/backend/hip/dynamic_symbols.h"
#include "runtime/backend/hip/size_map.h"
#include "runtime/backend/hip/status_util.h"
#include "runtime/base/log.h"

// Host<->device copies go through pinned staging chunks: hipMemcpyAsync on
// pageable memory waits for the copy (clr hipamd/src/hip_memory.cpp,
// ihipMemcpy: isHostAsync = false, then awaitCompletion), which deadlocks
// when the caller holds a lock a stream callback needs. Chunks are powers of
// two from 4 KiB to 4 MiB; a larger copy is split into 4 MiB pieces.
#define HL_HIP_STAGING_MIN_SHIFT 12
#define HL_HIP_STAGING_CLASSES 11
#define HL_HIP_STAGING_MAX_BYTES \
  ((size_t)1 << (HL_HIP_STAGING_MIN_SHIFT + HL_HIP_STAGING_CLASSES - 1))

typedef struct hl_hip_staging_t {
  // In the free list, or in the chain of one copy in flight.
  struct hl_hip_staging_t* next;
  struct hl_hip_backend_t* backend;
  void* pinned;  // hipHostMalloc'd, 1 << (MIN_SHIFT + size_class) bytes.
  int size_class;
  void* host;   // Device-to-host: where the chunk's bytes go.
  size_t size;  // Bytes in use for the current copy.
} hl_hip_staging_t;

#define HL_HIP_FREE_EVENTS 16

typedef struct hl_hip_backend_t {
  hl_backend_t base;  // Must be first: handles are cast to and from it.
  const hl_hip_dynamic_symbols_t* syms;
  int ordinal;
  hipMemPool_t pool;
  // True when |pool| was made by hipMemPoolCreate (allocations use
  // hipMallocFromPoolAsync and destroy destroys it); false when it is the
  // device's default pool (allocations use hipMallocAsync).
  bool owns_pool;
  _Atomic uint64_t limit_bytes;  // 0: no limit beyond the device's memory.
  _Atomic uint64_t used_bytes;
  _Atomic uint64_t used_high_bytes;
  _Atomic uint64_t alloc_count;
  _Atomic uint64_t free_count;
  _Atomic uint64_t fail_count;
  _Atomic int64_t live_streams;
  _Atomic int64_t live_events;
  _Atomic int64_t live_modules;
  // Live block -> size in bytes and allocating stream.
  hl_hip_size_map_t sizes;
  // Held shared by a free while it looks up the block's allocating stream
  // and, only when that is another live stream, across the redirect's
  // driver calls (hl_hip_free_cross_stream_locked); exclusively by stream
  // destruction. So a free never enqueues on a stream being destroyed,
  // frees never wait for each other, and a same-stream free makes no
  // driver call under it.
  pthread_rwlock_t free_lock;
  // Events for cross-stream frees (hl_hip_free_after), reused: a stream
  // wait takes the event's state when it is enqueued. A leaf lock.
  mtx_t free_events_mutex;
  hipEvent_t free_events[HL_HIP_FREE_EVENTS];
  int free_event_count;
  // Pinned staging chunks, free lists by size class (HL_HIP_STAGING_*).
  mtx_t staging_mutex;
  struct hl_hip_staging_t* staging_free[HL_HIP_STAGING_CLASSES];
  int64_t staging_live;  // Chunks allocated and not yet hipHostFree'd.
  // The attributes of a pool only this backend holds (|owns_pool|), as last
  // set or read: hl_device_wait_idle reads them after every wait, and
  // nobody else can change them. A leaf lock; no driver call under it.
  mtx_t attrs_mutex;
  bool attrs_known;
  uint64_t attrs_release_threshold;
  uint32_t attrs_reuse_flags;
} hl_hip_backend_t;

// What an hl_backend_event_t points at in this backend.
typedef struct hl_hip_event_t {
  hipEvent_t handle;
  atomic_bool recorded;
} hl_hip_event_t;

// The record hipStreamAddCallback carries when hipLaunchHostFunc is absent.
typedef struct hl_hip_host_call_t {
  hl_host_fn_t fn;
  void* user;
  hl_allocator_t allocator;
} hl_hip_host_call_t;

static inline hl_hip_backend_t* hl_hip_backend_cast(hl_backend_t* backend) {
  return (hl_hip_backend_t*)backend;
}

static inline hipStream_t hl_hip_stream_handle(hl_backend_stream_t* stream) {
  return (hipStream_t)stream;
}

static inline hl_hip_event_t* hl_hip_event_cast(hl_backend_event_t* event) {
  return (hl_hip_event_t*)event;
}

// The calling thread's current device, saved while an entry point makes the
// backend's device current and restored when it returns: ROCm binds streams,
// events, pools and modules to the current device, and aborts in
// hipModuleGetFunction when it is not the module's (clr
// hipamd/src/hip_code_object.hpp, DynCO::CheckDeviceIdMatch), so every entry
// that creates or looks up such an object runs on the backend's device, and
// the caller's choice of device survives the call.
typedef struct hl_hip_device_scope_t {
  int previous;
  bool changed;
} hl_hip_device_scope_t;

// Logs and frees a status from a call that cannot report failure.
static inline void hl_hip_log_and_ignore(hl_status_t status, const char* what) {
  if (hl_status_is_ok(status)) return;
  HL_LOG_ERROR("hip backend: %s: %s", what, hl_status_message(status));
  hl_status_ignore(status);
}

// Shared between the files of the hip backend.
hl_status_t hl_hip_scope_enter(hl_hip_backend_t* backend,
                               hl_hip_device_scope_t* scope);
void hl_hip_scope_exit(hl_hip_backend_t* backend,
                       const hl_hip_device_scope_t* scope);
hl_status_t hl_hip_stream_create_on_device(hl_backend_t* base,
                                           hl_backend_stream_t** out_stream);
void hl_hip_stream_destroy_on_device(hl_backend_t* base,
                                     hl_backend_stream_t* stream);
hl_status_t hl_hip_stream_synchronize(hl_backend_t* base,
                                      hl_backend_stream_t* stream);
hl_status_t hl_hip_event_create_on_device(hl_backend_t* base,
                                          hl_backend_event_t** out_event);
void hl_hip_event_destroy(hl_backend_t* base, hl_backend_event_t* base_event);
hl_status_t hl_hip_stream_query(hl_backend_t* base, hl_backend_stream_t* stream,
                                bool* out_idle);
hl_status_t hl_hip_event_record(hl_backend_t* base,
                                hl_backend_event_t* base_event,
                                hl_backend_stream_t* stream);
hl_status_t hl_hip_event_query(hl_backend_t* base,
                               hl_backend_event_t* base_event,
                               bool* out_complete);
hl_status_t hl_hip_event_synchronize(hl_backend_t* base,
                                     hl_backend_event_t* base_event);
hl_status_t hl_hip_event_elapsed_ms(hl_backend_t* base,
                                    hl_backend_event_t* base_start,
                                    hl_backend_event_t* base_end,
                                    float* out_ms);
hl_status_t hl_hip_stream_wait_event(hl_backend_t* base,
                                     hl_backend_stream_t* stream,
                                     hl_backend_event_t* base_event);
hl_status_t hl_hip_launch_host_func(hl_backend_t* base,
                                    hl_backend_stream_t* stream,
                                    hl_host_fn_t fn, void* user);
void hl_hip_staging_deinitialize(hl_hip_backend_t* backend);
hl_status_t hl_hip_memcpy_async(hl_backend_t* base, void* dst, const void* src,
                                size_t size, hl_backend_stream_t* stream);
hl_status_t hl_hip_memset32_async(hl_backend_t* base, void* dst, uint32_t value,
                                  size_t count, hl_backend_stream_t* stream);
hl_status_t hl_hip_malloc_async_on_device(hl_backend_t* base, size_t size,
                                          hl_backend_stream_t* stream,
                                          void** out_ptr);
hl_status_t hl_hip_free_async_on_device(hl_backend_t* base, void* ptr,
                                        hl_backend_stream_t* stream);
hl_status_t hl_hip_pool_set_attributes_on_device(
    hl_backend_t* base, const hl_pool_attributes_t* attrs);
hl_status_t hl_hip_pool_get_attributes_on_device(hl_backend_t* base,
                                                 hl_pool_attributes_t* out);
hl_status_t hl_hip_pool_trim_on_device(hl_backend_t* base,
                                       uint64_t min_bytes_to_keep);
hl_status_t hl_hip_pool_stats_on_device(hl_backend_t* base,
                                        hl_backend_pool_stats_t* out);
hl_status_t hl_hip_module_load_on_device(hl_backend_t* base, const void* image,
                                         size_t size,
                                         hl_backend_module_t** out_module);
void hl_hip_module_unload(hl_backend_t* base, hl_backend_module_t* module);
hl_status_t hl_hip_module_get_function_on_device(
    hl_backend_t* base, hl_backend_module_t* module, const char* name,
    hl_backend_function_t** out_function);
hl_status_t hl_hip_launch_kernel(hl_backend_t* base,
                                 hl_backend_function_t* function,
                                 const hl_launch_config_t* config,
                                 void** params, hl_backend_stream_t* stream);

hl_status_t hl_hip_peer_can_access(hl_backend_t* base, hl_backend_t* base_peer,
                                   bool* out_can_access);
hl_status_t hl_hip_peer_enable(hl_backend_t* base, hl_backend_t* base_peer);
hl_status_t hl_hip_memcpy_peer_async(hl_backend_t* base, void* dst,
                                     hl_backend_t* dst_backend, const void* src,
                                     hl_backend_t* src_backend, size_t size,
                                     hl_backend_stream_t* stream);

#endif  // HIPLINE_RUNTIME_BACKEND_HIP_HIP_INTERNAL_H_
