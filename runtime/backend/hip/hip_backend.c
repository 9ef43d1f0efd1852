// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The hip backend (hip_internal.h): availability and properties, creation
// and destruction, and the vtable (its entry points run in the device scope
// of hip_scope.c).

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>

#include "runtime/backend/backend.h"
#include "runtime/backend/hip/dynamic_symbols.h"
#include "runtime/backend/hip/hip_graph.h"
#include "runtime/backend/hip/hip_internal.h"
#include "runtime/backend/hip/size_map.h"
#include "runtime/backend/hip/status_util.h"
#include "runtime/base/log.h"

static const hl_backend_vtable_t hl_hip_backend_vtable;

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
  for (int i = 0; i < backend->free_event_count; ++i) {
    (void)syms->hipEventDestroy(backend->free_events[i]);
  }
  if (hl_status_is_ok(scope_status)) hl_hip_scope_exit(backend, &scope);
  hl_hip_log_and_ignore(scope_status, "destroy");
  pthread_rwlock_destroy(&backend->free_lock);
  mtx_destroy(&backend->free_events_mutex);
  mtx_destroy(&backend->attrs_mutex);
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
  pthread_rwlock_init(&backend->free_lock, NULL);
  mtx_init(&backend->free_events_mutex, mtx_plain);
  mtx_init(&backend->attrs_mutex, mtx_plain);
  mtx_init(&backend->staging_mutex, mtx_plain);
  hl_status_t status = hl_hip_size_map_initialize(allocator, &backend->sizes);
  if (!hl_status_is_ok(status)) {
    pthread_rwlock_destroy(&backend->free_lock);
    mtx_destroy(&backend->free_events_mutex);
    mtx_destroy(&backend->attrs_mutex);
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
  pthread_rwlock_wrlock(&backend->free_lock);
  hl_hip_size_map_clear_owner(&backend->sizes, stream);
  pthread_rwlock_unlock(&backend->free_lock);
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

// Stream-ordered allocation and free name their stream (and pool), whose
// device they run on whatever the calling thread's current device is (clr:
// hipMallocAsync and hipFreeAsync take the device from the stream,
// hipMallocFromPoolAsync from the pool): no device scope, so no
// hipGetDevice per call. Only the cross-stream free creates an object (an
// event) and enters the scope for it (hl_hip_free_after).
static hl_status_t hl_hip_malloc_async(hl_backend_t* base, size_t size,
                                       hl_backend_stream_t* stream,
                                       void** out_ptr) {
  *out_ptr = NULL;
  return hl_hip_malloc_async_on_device(base, size, stream, out_ptr);
}

static hl_status_t hl_hip_free_async(hl_backend_t* base, void* ptr,
                                     hl_backend_stream_t* stream) {
  return hl_hip_free_async_on_device(base, ptr, stream);
}

// Remembers |threshold| and |reuse_flags| as the owned pool's attributes;
// |known| false forgets them.
static void hl_hip_attrs_cache_store(hl_hip_backend_t* backend, bool known,
                                     uint64_t threshold, uint32_t reuse_flags) {
  mtx_lock(&backend->attrs_mutex);
  backend->attrs_known = known && backend->owns_pool;
  backend->attrs_release_threshold = threshold;
  backend->attrs_reuse_flags = reuse_flags;
  mtx_unlock(&backend->attrs_mutex);
}

static hl_status_t hl_hip_pool_set_attributes_in_scope(
    hl_backend_t* base, const hl_pool_attributes_t* attrs) {
  HL_HIP_ON_DEVICE(base, hl_hip_pool_set_attributes_on_device(base, attrs));
}

static hl_status_t hl_hip_pool_set_attributes(
    hl_backend_t* base, const hl_pool_attributes_t* attrs) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hl_hip_attrs_cache_store(backend, false, 0, 0);
  hl_status_t st = hl_hip_pool_set_attributes_in_scope(base, attrs);
  if (hl_status_is_ok(st)) {
    hl_hip_attrs_cache_store(backend, true, attrs->release_threshold,
                             attrs->reuse_flags);
  }
  return st;
}

static hl_status_t hl_hip_pool_get_attributes_in_scope(
    hl_backend_t* base, hl_pool_attributes_t* out) {
  HL_HIP_ON_DEVICE(base, hl_hip_pool_get_attributes_on_device(base, out));
}

// Without a driver call when the pool is this backend's own and its
// attributes are known.
static hl_status_t hl_hip_pool_get_attributes(hl_backend_t* base,
                                              hl_pool_attributes_t* out) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  mtx_lock(&backend->attrs_mutex);
  bool known = backend->attrs_known;
  if (known) {
    memset(out, 0, sizeof(*out));
    out->release_threshold = backend->attrs_release_threshold;
    out->reuse_flags = backend->attrs_reuse_flags;
    out->limit_bytes = atomic_load(&backend->limit_bytes);
  }
  mtx_unlock(&backend->attrs_mutex);
  if (known) return hl_ok_status();
  hl_status_t st = hl_hip_pool_get_attributes_in_scope(base, out);
  if (hl_status_is_ok(st)) {
    hl_hip_attrs_cache_store(backend, true, out->release_threshold,
                             out->reuse_flags);
  }
  return st;
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
    .stream_query = hl_hip_stream_query,
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
    .graph_capture = hl_hip_graph_capture,
    .graph_launch = hl_hip_graph_launch,
    .graph_destroy = hl_hip_graph_destroy,
    .peer_can_access = hl_hip_peer_can_access,
    .peer_enable = hl_hip_peer_enable,
    .memcpy_peer_async = hl_hip_memcpy_peer_async,
};
