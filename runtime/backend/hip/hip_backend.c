// The hip backend: the backend contract (runtime/backend/backend.h) over one
// HIP device, with every HIP call made through the dynamically loaded symbol
// table (dynamic_symbols.h).
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

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
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
  struct hl_hip_staging_t* next;  // In the free list.
  struct hl_hip_backend_t* backend;
  void* pinned;  // hipHostMalloc'd, 1 << (MIN_SHIFT + size_class) bytes.
  int size_class;
  void* host;   // Device-to-host: where the chunk's bytes go.
  size_t size;  // Bytes in use for the current copy.
} hl_hip_staging_t;

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
  // Serializes cross-stream frees against stream destruction, so a free
  // never enqueues on a stream being destroyed.
  mtx_t free_mutex;
  // Pinned staging chunks, free lists by size class (HL_HIP_STAGING_*).
  mtx_t staging_mutex;
  struct hl_hip_staging_t* staging_free[HL_HIP_STAGING_CLASSES];
  int64_t staging_live;  // Chunks allocated and not yet hipHostFree'd.
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

static const hl_backend_vtable_t hl_hip_backend_vtable;

static void hl_hip_staging_deinitialize(hl_hip_backend_t* backend);

static hl_hip_backend_t* hl_hip_backend_cast(hl_backend_t* backend) {
  return (hl_hip_backend_t*)backend;
}

static hipStream_t hl_hip_stream_handle(hl_backend_stream_t* stream) {
  return (hipStream_t)stream;
}

static hl_hip_event_t* hl_hip_event_cast(hl_backend_event_t* event) {
  return (hl_hip_event_t*)event;
}

// Makes the backend's device current on the calling thread.
static hl_status_t hl_hip_backend_make_current(hl_hip_backend_t* backend) {
  return HL_HIP_RESULT_TO_STATUS(backend->syms, hipSetDevice(backend->ordinal),
                                 "hipSetDevice(%d)", backend->ordinal);
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

static hl_status_t hl_hip_scope_enter(hl_hip_backend_t* backend,
                                      hl_hip_device_scope_t* scope) {
  scope->previous = -1;
  scope->changed = false;
  HL_HIP_RETURN_IF_ERROR(backend->syms, hipGetDevice(&scope->previous),
                         "hipGetDevice (before using device %d)",
                         backend->ordinal);
  if (scope->previous == backend->ordinal) return hl_ok_status();
  HL_RETURN_IF_ERROR_PLAIN(hl_hip_backend_make_current(backend));
  scope->changed = true;
  return hl_ok_status();
}

static void hl_hip_scope_exit(hl_hip_backend_t* backend,
                              const hl_hip_device_scope_t* scope) {
  if (!scope->changed) return;
  hipError_t error = backend->syms->hipSetDevice(scope->previous);
  if (error != hipSuccess) {
    HL_LOG_ERROR("hip backend: restoring the caller's device %d: %s",
                 scope->previous, backend->syms->hipGetErrorName(error));
  }
}

// Logs and frees a status from a call that cannot report failure.
static void hl_hip_log_and_ignore(hl_status_t status, const char* what) {
  if (hl_status_is_ok(status)) return;
  HL_LOG_ERROR("hip backend: %s: %s", what, hl_status_message(status));
  hl_status_ignore(status);
}

static void hl_hip_atomic_max(_Atomic uint64_t* target, uint64_t value) {
  uint64_t current = atomic_load_explicit(target, memory_order_relaxed);
  while (current < value && !atomic_compare_exchange_weak_explicit(
                                target, &current, value, memory_order_relaxed,
                                memory_order_relaxed)) {
  }
}

//===----------------------------------------------------------------------===//
// Availability and properties
//===----------------------------------------------------------------------===//

// Returns the loaded runtime, or UNAVAILABLE with the reason.
static hl_status_t hl_hip_runtime_require(const hl_hip_runtime_t** out) {
  const hl_hip_runtime_t* runtime = hl_hip_runtime_get();
  if (!runtime->available) {
    return HL_MAKE_STATUS(HL_STATUS_UNAVAILABLE, "%s", runtime->reason);
  }
  *out = runtime;
  return hl_ok_status();
}

static hl_status_t hl_hip_check_ordinal(const hl_hip_runtime_t* runtime,
                                        int ordinal) {
  if (ordinal < 0 || ordinal >= runtime->device_count) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hip device ordinal %d out of range: %s has %d "
                          "device(s)",
                          ordinal, runtime->library, runtime->device_count);
  }
  return hl_ok_status();
}

// Fills the target id: gcnArchName ("gfx90a:sramecc+:xnack-") from the
// original-layout device properties, or "sm_XY" from the compute capability
// when the runtime reports no architecture name (HIP on NVIDIA).
static hl_status_t hl_hip_device_target(const hl_hip_dynamic_symbols_t* syms,
                                        int ordinal, char* target,
                                        size_t capacity) {
  hipError_t (*get_properties)(void*, int) =
      syms->hipGetDevicePropertiesR0000 ? syms->hipGetDevicePropertiesR0000
                                        : syms->hipGetDeviceProperties;
  if (get_properties) {
    union {
      hl_hip_device_prop_r0000_t props;
      unsigned char bytes[HL_HIP_DEVICE_PROP_BUFFER_SIZE];
    } buffer;
    memset(&buffer, 0, sizeof(buffer));
    HL_RETURN_IF_ERROR_PLAIN(hl_hip_result_to_status(
        syms, get_properties(&buffer, ordinal), __FILE__, __LINE__,
        "hipGetDeviceProperties(device %d)", ordinal));
    const char* arch = buffer.props.gcn_arch_name;
    size_t length = strnlen(arch, sizeof(buffer.props.gcn_arch_name));
    if (length > 0 && length < sizeof(buffer.props.gcn_arch_name)) {
      snprintf(target, capacity, "%.*s", (int)length, arch);
      return hl_ok_status();
    }
  }
  int major = 0, minor = 0;
  HL_HIP_RETURN_IF_ERROR(
      syms,
      hipDeviceGetAttribute(&major, HL_HIP_ATTR_COMPUTE_CAPABILITY_MAJOR,
                            ordinal),
      "hipDeviceGetAttribute(ComputeCapabilityMajor, device %d)", ordinal);
  HL_HIP_RETURN_IF_ERROR(
      syms,
      hipDeviceGetAttribute(&minor, HL_HIP_ATTR_COMPUTE_CAPABILITY_MINOR,
                            ordinal),
      "hipDeviceGetAttribute(ComputeCapabilityMinor, device %d)", ordinal);
  snprintf(target, capacity, "sm_%d%d", major, minor);
  return hl_ok_status();
}

static hl_status_t hl_hip_device_properties_fill(
    const hl_hip_dynamic_symbols_t* syms, int ordinal,
    hl_device_properties_t* out) {
  memset(out, 0, sizeof(*out));
  out->backend = HL_BACKEND_HIP;
  out->ordinal = ordinal;
  HL_HIP_RETURN_IF_ERROR(
      syms, hipDeviceGetName(out->name, (int)sizeof(out->name), ordinal),
      "hipDeviceGetName(device %d)", ordinal);
  out->name[sizeof(out->name) - 1] = 0;
  size_t total = 0;
  HL_HIP_RETURN_IF_ERROR(syms, hipDeviceTotalMem(&total, ordinal),
                         "hipDeviceTotalMem(device %d)", ordinal);
  out->memory_bytes = total;
  HL_HIP_RETURN_IF_ERROR(
      syms,
      hipDeviceGetAttribute(&out->compute_units,
                            HL_HIP_ATTR_MULTIPROCESSOR_COUNT, ordinal),
      "hipDeviceGetAttribute(MultiprocessorCount, device %d)", ordinal);
  return hl_hip_device_target(syms, ordinal, out->target, sizeof(out->target));
}

hl_status_t hl_hip_backend_query(hl_backend_info_t* out_info) {
  if (!out_info) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_hip_backend_query: out_info is NULL");
  }
  memset(out_info, 0, sizeof(*out_info));
  out_info->kind = HL_BACKEND_HIP;
  const hl_hip_runtime_t* runtime = hl_hip_runtime_get();
  out_info->available = runtime->available;
  out_info->device_count = runtime->available ? runtime->device_count : 0;
  snprintf(out_info->reason, sizeof(out_info->reason), "%s", runtime->reason);
  return hl_ok_status();
}

hl_status_t hl_hip_backend_device_properties(int ordinal,
                                             hl_device_properties_t* out) {
  if (!out) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_hip_backend_device_properties: out is NULL");
  }
  const hl_hip_runtime_t* runtime = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_hip_runtime_require(&runtime));
  HL_RETURN_IF_ERROR_PLAIN(hl_hip_check_ordinal(runtime, ordinal));
  return hl_hip_device_properties_fill(&runtime->syms, ordinal, out);
}

static hl_status_t hl_hip_query_properties(hl_backend_t* base,
                                           hl_device_properties_t* out) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  return hl_hip_device_properties_fill(backend->syms, backend->ordinal, out);
}

//===----------------------------------------------------------------------===//
// Creation and destruction
//===----------------------------------------------------------------------===//

// Creates the device's own pool, or falls back to its default pool when the
// runtime cannot create one.
static hl_status_t hl_hip_backend_pool_initialize(hl_hip_backend_t* backend) {
  const hl_hip_dynamic_symbols_t* syms = backend->syms;
  hl_status_t create_status = hl_ok_status();
  if (syms->hipMemPoolCreate && syms->hipMemPoolDestroy &&
      syms->hipMallocFromPoolAsync) {
    hipMemPoolProps props;
    memset(&props, 0, sizeof(props));
    props.alloc_type = HL_HIP_MEM_ALLOCATION_TYPE_PINNED;
    props.handle_types = HL_HIP_MEM_HANDLE_TYPE_NONE;
    props.location.type = HL_HIP_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = backend->ordinal;
    create_status = HL_HIP_RESULT_TO_STATUS(
        syms, hipMemPoolCreate(&backend->pool, &props),
        "hipMemPoolCreate(device %d)", backend->ordinal);
    if (hl_status_is_ok(create_status)) {
      backend->owns_pool = true;
      return hl_ok_status();
    }
  } else {
    create_status = HL_MAKE_STATUS(HL_STATUS_UNIMPLEMENTED,
                                   "hipMemPoolCreate is not exported");
  }
  hl_status_t default_status = HL_HIP_RESULT_TO_STATUS(
      syms, hipDeviceGetDefaultMemPool(&backend->pool, backend->ordinal),
      "hipDeviceGetDefaultMemPool(device %d)", backend->ordinal);
  if (!hl_status_is_ok(default_status)) {
    return hl_status_join(create_status, default_status);
  }
  HL_LOG_INFO("hip device %d: using the default memory pool (%s)",
              backend->ordinal, hl_status_message(create_status));
  hl_status_ignore(create_status);
  backend->owns_pool = false;
  return hl_ok_status();
}

static void hl_hip_backend_destroy(hl_backend_t* base) {
  if (!base) return;
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  const hl_hip_dynamic_symbols_t* syms = backend->syms;
  hl_hip_device_scope_t scope;
  hl_status_t scope_status = hl_hip_scope_enter(backend, &scope);
  int64_t streams = atomic_load(&backend->live_streams);
  int64_t events = atomic_load(&backend->live_events);
  int64_t modules = atomic_load(&backend->live_modules);
  size_t blocks = hl_hip_size_map_count(&backend->sizes);
  if (streams || events || modules || blocks) {
    HL_LOG_WARN(
        "hip device %d destroyed with live objects: %lld streams, %lld "
        "events, %lld modules, %zu blocks",
        backend->ordinal, (long long)streams, (long long)events,
        (long long)modules, blocks);
  }
  if (backend->pool) {
    // Frees enqueued on streams must complete before their blocks can be
    // returned to the system.
    hl_hip_log_and_ignore(
        HL_HIP_RESULT_TO_STATUS(syms, hipDeviceSynchronize(),
                                "hipDeviceSynchronize(device %d)",
                                backend->ordinal),
        "destroy");
    hl_hip_log_and_ignore(
        HL_HIP_RESULT_TO_STATUS(syms, hipMemPoolTrimTo(backend->pool, 0),
                                "hipMemPoolTrimTo(device %d, 0 bytes)",
                                backend->ordinal),
        "destroy");
    if (backend->owns_pool) {
      hl_hip_log_and_ignore(
          HL_HIP_RESULT_TO_STATUS(syms, hipMemPoolDestroy(backend->pool),
                                  "hipMemPoolDestroy(device %d)",
                                  backend->ordinal),
          "destroy");
    }
  }
  hl_hip_staging_deinitialize(backend);
  if (hl_status_is_ok(scope_status)) hl_hip_scope_exit(backend, &scope);
  hl_hip_log_and_ignore(scope_status, "destroy");
  mtx_destroy(&backend->free_mutex);
  mtx_destroy(&backend->staging_mutex);
  hl_hip_size_map_deinitialize(&backend->sizes);
  hl_allocator_free(backend->base.host_allocator, backend);
}

hl_status_t hl_hip_backend_create(int ordinal, hl_allocator_t allocator,
                                  hl_backend_t** out_backend) {
  if (!out_backend) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_hip_backend_create: out_backend is NULL");
  }
  *out_backend = NULL;
  const hl_hip_runtime_t* runtime = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_hip_runtime_require(&runtime));
  HL_RETURN_IF_ERROR_PLAIN(hl_hip_check_ordinal(runtime, ordinal));

  void* memory = NULL;
  HL_RETURN_IF_ERROR(
      hl_allocator_calloc(allocator, sizeof(hl_hip_backend_t), &memory),
      "creating hip device %d", ordinal);
  hl_hip_backend_t* backend = memory;
  backend->base.vtable = &hl_hip_backend_vtable;
  backend->base.kind = HL_BACKEND_HIP;
  backend->base.host_visible_memory = false;
  backend->base.events_untimed = true;
  backend->base.host_functions_serialized = true;
  backend->base.host_allocator = allocator;
  backend->syms = &runtime->syms;
  backend->ordinal = ordinal;
  atomic_init(&backend->limit_bytes, 0);
  atomic_init(&backend->used_bytes, 0);
  atomic_init(&backend->used_high_bytes, 0);
  atomic_init(&backend->alloc_count, 0);
  atomic_init(&backend->free_count, 0);
  atomic_init(&backend->fail_count, 0);
  atomic_init(&backend->live_streams, 0);
  atomic_init(&backend->live_events, 0);
  atomic_init(&backend->live_modules, 0);
  mtx_init(&backend->free_mutex, mtx_plain);
  mtx_init(&backend->staging_mutex, mtx_plain);
  hl_status_t status = hl_hip_size_map_initialize(allocator, &backend->sizes);
  if (!hl_status_is_ok(status)) {
    mtx_destroy(&backend->free_mutex);
    mtx_destroy(&backend->staging_mutex);
    hl_allocator_free(allocator, backend);
    return status;
  }
  hl_hip_device_scope_t scope;
  status = hl_hip_scope_enter(backend, &scope);
  if (hl_status_is_ok(status)) {
    status = hl_hip_backend_pool_initialize(backend);
    if (hl_status_is_ok(status)) {
      // The backend contract's default: keep freed memory (ROCm's default
      // threshold, 0, releases it at every synchronization).
      uint64_t keep_all = UINT64_MAX;
      status = HL_HIP_RESULT_TO_STATUS(
          backend->syms,
          hipMemPoolSetAttribute(backend->pool, hipMemPoolAttrReleaseThreshold,
                                 &keep_all),
          "hipMemPoolSetAttribute(device %d, ReleaseThreshold, UINT64_MAX)",
          backend->ordinal);
    }
    hl_hip_scope_exit(backend, &scope);
  }
  if (!hl_status_is_ok(status)) {
    hl_hip_backend_destroy(&backend->base);
    return hl_status_annotate(status, "creating hip device %d", ordinal);
  }
  *out_backend = &backend->base;
  return hl_ok_status();
}

//===----------------------------------------------------------------------===//
// Streams
//===----------------------------------------------------------------------===//

static hl_status_t hl_hip_stream_create_on_device(
    hl_backend_t* base, hl_backend_stream_t** out_stream) {
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

static void hl_hip_stream_destroy_on_device(hl_backend_t* base,
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

static hl_status_t hl_hip_stream_synchronize(hl_backend_t* base,
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

static hl_status_t hl_hip_event_create_on_device(
    hl_backend_t* base, hl_backend_event_t** out_event) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  *out_event = NULL;
  void* memory = NULL;
  HL_RETURN_IF_ERROR(hl_allocator_calloc(backend->base.host_allocator,
                                         sizeof(hl_hip_event_t), &memory),
                     "creating an event on hip device %d", backend->ordinal);
  hl_hip_event_t* event = memory;
  atomic_init(&event->recorded, false);
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

static void hl_hip_event_destroy(hl_backend_t* base,
                                 hl_backend_event_t* base_event) {
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

static hl_status_t hl_hip_event_record(hl_backend_t* base,
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

static hl_status_t hl_hip_event_query(hl_backend_t* base,
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

static hl_status_t hl_hip_event_synchronize(hl_backend_t* base,
                                            hl_backend_event_t* base_event) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hl_hip_event_t* event = hl_hip_event_cast(base_event);
  if (!hl_hip_event_was_recorded(event)) return hl_ok_status();
  return HL_HIP_RESULT_TO_STATUS(
      backend->syms, hipEventSynchronize(event->handle),
      "hipEventSynchronize(event %p)", (void*)event->handle);
}

static hl_status_t hl_hip_event_elapsed_ms(hl_backend_t* base,
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

static hl_status_t hl_hip_stream_wait_event(hl_backend_t* base,
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

static hl_status_t hl_hip_launch_host_func(hl_backend_t* base,
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

// Stream-ordered host functions (no HIP calls: they may run on HIP's
// callback thread). The device-to-host one delivers the bytes first.
static void hl_hip_staging_release_fn(void* user) {
  hl_hip_staging_release(user);
}

static void hl_hip_staging_deliver_fn(void* user) {
  hl_hip_staging_t* chunk = user;
  memcpy(chunk->host, chunk->pinned, chunk->size);
  hl_hip_staging_release(chunk);
}

// Returns every free chunk to the system. In-flight chunks must be done
// (the backend's streams are destroyed, so synchronized, first).
static void hl_hip_staging_deinitialize(hl_hip_backend_t* backend) {
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

// One piece (<= HL_HIP_STAGING_MAX_BYTES) of a copy with a host side.
static hl_status_t hl_hip_memcpy_staged(hl_hip_backend_t* backend, char* dst,
                                        const char* src, size_t size,
                                        bool to_device,
                                        hl_backend_stream_t* stream) {
  hipStream_t handle = hl_hip_stream_handle(stream);
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
  status = hl_hip_launch_host_func(
      &backend->base, stream,
      to_device ? hl_hip_staging_release_fn : hl_hip_staging_deliver_fn, chunk);
  if (!hl_status_is_ok(status)) {
    // The copy is enqueued and may still read or write the chunk: leak it
    // rather than reuse it (the stream is broken anyway).
    HL_LOG_ERROR("hip device %d: leaking staging chunk %p", backend->ordinal,
                 chunk->pinned);
  }
  return status;
}

static hl_status_t hl_hip_memcpy_async(hl_backend_t* base, void* dst,
                                       const void* src, size_t size,
                                       hl_backend_stream_t* stream) {
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
  // Host memory on one side: through pinned staging, in pieces.
  for (size_t offset = 0; offset < size;) {
    size_t piece = size - offset;
    if (piece > HL_HIP_STAGING_MAX_BYTES) piece = HL_HIP_STAGING_MAX_BYTES;
    HL_RETURN_IF_ERROR(hl_hip_memcpy_staged(backend, (char*)dst + offset,
                                            (const char*)src + offset, piece,
                                            dst_device, stream),
                       "copying bytes [%zu, %zu) of %zu through pinned staging",
                       offset, offset + piece, size);
    offset += piece;
  }
  return hl_ok_status();
}

static hl_status_t hl_hip_memset32_async(hl_backend_t* base, void* dst,
                                         uint32_t value, size_t count,
                                         hl_backend_stream_t* stream) {
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

static hl_status_t hl_hip_malloc_async_on_device(hl_backend_t* base,
                                                 size_t size,
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
  HL_HIP_RETURN_IF_ERROR(
      syms, hipEventCreateWithFlags(&event, HL_HIP_EVENT_DISABLE_TIMING),
      "hipEventCreateWithFlags (cross-stream free of %p)", ptr);
  hl_status_t status =
      HL_HIP_RESULT_TO_STATUS(syms, hipEventRecord(event, stream),
                              "hipEventRecord(stream %p)", (void*)stream);
  if (hl_status_is_ok(status)) {
    status = HL_HIP_RESULT_TO_STATUS(
        syms, hipStreamWaitEvent(owner, event, 0),
        "hipStreamWaitEvent(allocating stream %p, freeing stream %p)",
        (void*)owner, (void*)stream);
  }
  // The wait holds what it needs: the event may go now (HIP defers the
  // release of a recorded event until its work completes).
  hl_hip_log_and_ignore(
      HL_HIP_RESULT_TO_STATUS(syms, hipEventDestroy(event),
                              "hipEventDestroy (cross-stream free)"),
      "free_async");
  if (!hl_status_is_ok(status)) return status;
  return HL_HIP_RESULT_TO_STATUS(
      syms, hipFreeAsync(ptr, owner),
      "hipFreeAsync(%p, allocating stream %p, after stream %p)", ptr,
      (void*)owner, (void*)stream);
}

static hl_status_t hl_hip_free_async_on_device(hl_backend_t* base, void* ptr,
                                               hl_backend_stream_t* stream) {
  if (!ptr) return hl_ok_status();
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hipStream_t handle = hl_hip_stream_handle(stream);
  uint64_t size = 0;
  void* owner = NULL;
  mtx_lock(&backend->free_mutex);
  if (!hl_hip_size_map_remove_owned(&backend->sizes, ptr, &size, &owner)) {
    mtx_unlock(&backend->free_mutex);
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "free_async(%p) on hip device %d: not a live "
                          "allocation of this device",
                          ptr, backend->ordinal);
  }
  hl_status_t status = hl_ok_status();
  bool redirect = owner && owner != (void*)handle;
  if (redirect) {
    // A freeing stream with nothing pending orders the free after nothing:
    // every use of the block has completed, so the allocating stream may
    // reuse it at once and the free needs no redirect. Callers that give
    // back idle memory (the suballocator's trim) rely on this to find the
    // block trimmable once |stream| is synchronized.
    hipError_t idle = backend->syms->hipStreamQuery(handle);
    if (idle == hipSuccess) {
      redirect = false;
    } else if (idle != hipErrorNotReady) {
      status =
          hl_hip_result_to_status(backend->syms, idle, __FILE__, __LINE__,
                                  "hipStreamQuery(stream %p)", (void*)handle);
    }
  }
  if (hl_status_is_ok(status) && redirect) {
    status = hl_hip_free_after(backend, ptr, (hipStream_t)owner, handle);
  } else if (hl_status_is_ok(status)) {
    // Same stream, an idle freeing stream, or the allocating stream is gone
    // (its destruction synchronized it, and ROCm dropped it from the
    // block's safe streams).
    status =
        HL_HIP_RESULT_TO_STATUS(backend->syms, hipFreeAsync(ptr, handle),
                                "hipFreeAsync(%p, %llu bytes, stream %p)", ptr,
                                (unsigned long long)size, (void*)handle);
  }
  if (!hl_status_is_ok(status)) {
    // The block is still live; keep accounting for it.
    hl_status_ignore(
        hl_hip_size_map_insert_owned(&backend->sizes, ptr, size, owner));
    mtx_unlock(&backend->free_mutex);
    return status;
  }
  mtx_unlock(&backend->free_mutex);
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

static hl_status_t hl_hip_pool_set_attributes_on_device(
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

static hl_status_t hl_hip_pool_get_attributes_on_device(
    hl_backend_t* base, hl_pool_attributes_t* out) {
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

static hl_status_t hl_hip_pool_trim_on_device(hl_backend_t* base,
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

static hl_status_t hl_hip_pool_stats_on_device(hl_backend_t* base,
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

//===----------------------------------------------------------------------===//
// Modules and kernels
//===----------------------------------------------------------------------===//

static hl_status_t hl_hip_module_load_on_device(
    hl_backend_t* base, const void* image, size_t size,
    hl_backend_module_t** out_module) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  *out_module = NULL;
  if (!image || size == 0) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "module_load on hip device %d: empty code object",
                          backend->ordinal);
  }
  hipModule_t module = NULL;
  HL_HIP_RETURN_IF_ERROR(backend->syms, hipModuleLoadData(&module, image),
                         "hipModuleLoadData(%zu-byte code object, device %d)",
                         size, backend->ordinal);
  atomic_fetch_add(&backend->live_modules, 1);
  *out_module = (hl_backend_module_t*)module;
  return hl_ok_status();
}

static void hl_hip_module_unload(hl_backend_t* base,
                                 hl_backend_module_t* module) {
  if (!module) return;
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hl_hip_log_and_ignore(HL_HIP_RESULT_TO_STATUS(
                            backend->syms, hipModuleUnload((hipModule_t)module),
                            "hipModuleUnload(module %p)", (void*)module),
                        "module_unload");
  atomic_fetch_sub(&backend->live_modules, 1);
}

static hl_status_t hl_hip_module_get_function_on_device(
    hl_backend_t* base, hl_backend_module_t* module, const char* name,
    hl_backend_function_t** out_function) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  *out_function = NULL;
  if (!name) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "module_get_function: name is NULL");
  }
  hipFunction_t function = NULL;
  HL_HIP_RETURN_IF_ERROR(
      backend->syms, hipModuleGetFunction(&function, (hipModule_t)module, name),
      "hipModuleGetFunction(\"%s\", module %p)", name, (void*)module);
  *out_function = (hl_backend_function_t*)function;
  return hl_ok_status();
}

static hl_status_t hl_hip_launch_kernel(hl_backend_t* base,
                                        hl_backend_function_t* function,
                                        const hl_launch_config_t* config,
                                        void** params,
                                        hl_backend_stream_t* stream) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hipStream_t handle = hl_hip_stream_handle(stream);
  const hl_dim3_t* g = &config->grid;
  const hl_dim3_t* b = &config->block;
  return HL_HIP_RESULT_TO_STATUS(
      backend->syms,
      hipModuleLaunchKernel((hipFunction_t)function, g->x, g->y, g->z, b->x,
                            b->y, b->z, config->shared_bytes, handle, params,
                            NULL),
      "hipModuleLaunchKernel(function %p, grid %ux%ux%u, block %ux%ux%u, %u "
      "shared bytes, stream %p)",
      (void*)function, (unsigned)g->x, (unsigned)g->y, (unsigned)g->z,
      (unsigned)b->x, (unsigned)b->y, (unsigned)b->z,
      (unsigned)config->shared_bytes, (void*)handle);
}

//===----------------------------------------------------------------------===//
// Entry points that run on the backend's device (see hl_hip_scope_enter)
//===----------------------------------------------------------------------===//

#define HL_HIP_ON_DEVICE(backend, call)                       \
  hl_hip_backend_t* hl_b_ = hl_hip_backend_cast(backend);     \
  hl_hip_device_scope_t hl_scope_;                            \
  hl_status_t hl_st_ = hl_hip_scope_enter(hl_b_, &hl_scope_); \
  if (hl_status_is_ok(hl_st_)) {                              \
    hl_st_ = call;                                            \
    hl_hip_scope_exit(hl_b_, &hl_scope_);                     \
  }                                                           \
  return hl_st_

static hl_status_t hl_hip_stream_create(hl_backend_t* base,
                                        hl_backend_stream_t** out_stream) {
  *out_stream = NULL;
  HL_HIP_ON_DEVICE(base, hl_hip_stream_create_on_device(base, out_stream));
}

static void hl_hip_stream_destroy(hl_backend_t* base,
                                  hl_backend_stream_t* stream) {
  if (!stream) return;
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  // Blocks this stream allocated are freed on their freeing stream from now
  // on (see hl_hip_free_after).
  mtx_lock(&backend->free_mutex);
  hl_hip_size_map_clear_owner(&backend->sizes, stream);
  mtx_unlock(&backend->free_mutex);
  hl_hip_device_scope_t scope;
  hl_status_t status = hl_hip_scope_enter(backend, &scope);
  hl_hip_stream_destroy_on_device(base, stream);
  if (hl_status_is_ok(status)) hl_hip_scope_exit(backend, &scope);
  hl_hip_log_and_ignore(status, "stream_destroy");
}

static hl_status_t hl_hip_event_create(hl_backend_t* base,
                                       hl_backend_event_t** out_event) {
  *out_event = NULL;
  HL_HIP_ON_DEVICE(base, hl_hip_event_create_on_device(base, out_event));
}

static hl_status_t hl_hip_malloc_async(hl_backend_t* base, size_t size,
                                       hl_backend_stream_t* stream,
                                       void** out_ptr) {
  *out_ptr = NULL;
  HL_HIP_ON_DEVICE(base,
                   hl_hip_malloc_async_on_device(base, size, stream, out_ptr));
}

static hl_status_t hl_hip_free_async(hl_backend_t* base, void* ptr,
                                     hl_backend_stream_t* stream) {
  HL_HIP_ON_DEVICE(base, hl_hip_free_async_on_device(base, ptr, stream));
}

static hl_status_t hl_hip_pool_set_attributes(
    hl_backend_t* base, const hl_pool_attributes_t* attrs) {
  HL_HIP_ON_DEVICE(base, hl_hip_pool_set_attributes_on_device(base, attrs));
}

static hl_status_t hl_hip_pool_get_attributes(hl_backend_t* base,
                                              hl_pool_attributes_t* out) {
  HL_HIP_ON_DEVICE(base, hl_hip_pool_get_attributes_on_device(base, out));
}

static hl_status_t hl_hip_pool_trim(hl_backend_t* base,
                                    uint64_t min_bytes_to_keep) {
  HL_HIP_ON_DEVICE(base, hl_hip_pool_trim_on_device(base, min_bytes_to_keep));
}

static hl_status_t hl_hip_pool_stats(hl_backend_t* base,
                                     hl_backend_pool_stats_t* out) {
  HL_HIP_ON_DEVICE(base, hl_hip_pool_stats_on_device(base, out));
}

static hl_status_t hl_hip_module_load(hl_backend_t* base, const void* image,
                                      size_t size,
                                      hl_backend_module_t** out_module) {
  *out_module = NULL;
  HL_HIP_ON_DEVICE(base,
                   hl_hip_module_load_on_device(base, image, size, out_module));
}

static hl_status_t hl_hip_module_get_function(
    hl_backend_t* base, hl_backend_module_t* module, const char* name,
    hl_backend_function_t** out_function) {
  *out_function = NULL;
  HL_HIP_ON_DEVICE(base, hl_hip_module_get_function_on_device(
                             base, module, name, out_function));
}

static void hl_hip_live_counts(hl_backend_t* base, hl_backend_counts_t* out) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  out->live_streams = atomic_load(&backend->live_streams);
  out->live_events = atomic_load(&backend->live_events);
  out->live_blocks = (int64_t)hl_hip_size_map_count(&backend->sizes);
  out->live_modules = atomic_load(&backend->live_modules);
}

static const hl_backend_vtable_t hl_hip_backend_vtable = {
    .destroy = hl_hip_backend_destroy,
    .query_properties = hl_hip_query_properties,
    .stream_create = hl_hip_stream_create,
    .stream_destroy = hl_hip_stream_destroy,
    .stream_synchronize = hl_hip_stream_synchronize,
    .event_create = hl_hip_event_create,
    .event_destroy = hl_hip_event_destroy,
    .event_record = hl_hip_event_record,
    .event_query = hl_hip_event_query,
    .event_synchronize = hl_hip_event_synchronize,
    .event_elapsed_ms = hl_hip_event_elapsed_ms,
    .stream_wait_event = hl_hip_stream_wait_event,
    .launch_host_func = hl_hip_launch_host_func,
    .memcpy_async = hl_hip_memcpy_async,
    .memset32_async = hl_hip_memset32_async,
    .malloc_async = hl_hip_malloc_async,
    .free_async = hl_hip_free_async,
    .pool_set_attributes = hl_hip_pool_set_attributes,
    .pool_get_attributes = hl_hip_pool_get_attributes,
    .pool_trim = hl_hip_pool_trim,
    .pool_stats = hl_hip_pool_stats,
    .module_load = hl_hip_module_load,
    .module_unload = hl_hip_module_unload,
    .module_get_function = hl_hip_module_get_function,
    .launch_kernel = hl_hip_launch_kernel,
    .live_counts = hl_hip_live_counts,
};
