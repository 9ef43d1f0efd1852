// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The host backend: a CPU implementation of the backend contract.
//
// Streams are FIFOs served by worker threads, events are (stream, sequence)
// pairs, and memory comes from a stream-ordered pool over host memory that
// follows HIP's reuse rules. It is the backend every test runs on.
//
// It has |stream_ordered_host_work|: host functions run on their stream's
// worker, and a copy, fill or kernel launched from a host function for its
// own stream runs right there instead of being queued (allocations and
// frees made there take effect there too, host_pool.c).

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/backend/host/host_item.h"
#include "runtime/base/env.h"
#include "runtime/base/time_util.h"

#define HL_HOST_MAX_DEVICES 64

static hl_host_backend_t* hl_host_cast(hl_backend_t* backend) {
  return (hl_host_backend_t*)backend;
}

static hl_status_t hl_host_device_count(int* out_count) {
  uint64_t n = 1;
  bool set = false;
  HL_RETURN_IF_ERROR_PLAIN(hl_env_read_uint(HL_ENV_HOST_DEVICES, &n, &set));
  if (n > HL_HOST_MAX_DEVICES) {  // The table's range (base/env.c) is wider.
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "HIPLINE_HOST_DEVICES=%llu is more than %d devices",
                          (unsigned long long)n, HL_HOST_MAX_DEVICES);
  }
  *out_count = (int)n;
  return NULL;
}

static uint64_t hl_host_memory_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 4ull << 30;
  // Half of physical memory: the rest belongs to the host side of the process.
  return (uint64_t)pages * (uint64_t)page_size / 2;
}

hl_status_t hl_host_backend_query(hl_backend_info_t* out_info) {
  memset(out_info, 0, sizeof(*out_info));
  out_info->kind = HL_BACKEND_HOST;
  hl_status_t st = hl_host_device_count(&out_info->device_count);
  if (st) {
    out_info->available = false;
    snprintf(out_info->reason, sizeof(out_info->reason), "%s",
             hl_status_message(st));
    hl_status_free(st);
    return NULL;
  }
  out_info->available = true;
  return NULL;
}

hl_status_t hl_host_backend_device_properties(int ordinal,
                                              hl_device_properties_t* out) {
  int count = 0;
  HL_RETURN_IF_ERROR_PLAIN(hl_host_device_count(&count));
  if (ordinal < 0 || ordinal >= count) {
    return HL_MAKE_STATUS(HL_STATUS_OUT_OF_RANGE,
                          "host device ordinal %d out of range; %d host "
                          "device(s) (HIPLINE_HOST_DEVICES)",
                          ordinal, count);
  }
  memset(out, 0, sizeof(*out));
  out->backend = HL_BACKEND_HOST;
  out->ordinal = ordinal;
  snprintf(out->name, sizeof(out->name), "hipline host device %d", ordinal);
  snprintf(out->target, sizeof(out->target), "host");
  out->memory_bytes = hl_host_memory_bytes();
  // HIPLINE_HOST_MEMORY sets the device's memory size (the pool's limit), so
  // a trace recorded on a bigger GPU replays here: the pool hands out
  // address ranges, and pages nobody writes are never committed.
  uint64_t memory = 0;
  bool set = false;
  HL_RETURN_IF_ERROR_PLAIN(hl_env_read_size(HL_ENV_HOST_MEMORY, &memory, &set));
  if (set) {
    out->memory_bytes = memory;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  out->compute_units = cpus > 0 ? (int)cpus : 1;
  return NULL;
}

static void hl_host_destroy(hl_backend_t* backend) {
  hl_host_backend_t* device = hl_host_cast(backend);
  hl_host_pool_deinitialize(device);
  hl_allocator_free(device->base.host_allocator, device);
}

static hl_status_t hl_host_query_properties(hl_backend_t* backend,
                                            hl_device_properties_t* out) {
  hl_host_backend_t* device = hl_host_cast(backend);
  HL_RETURN_IF_ERROR_PLAIN(
      hl_host_backend_device_properties(device->ordinal, out));
  out->memory_bytes = device->memory_bytes;
  return NULL;
}

static hl_status_t hl_host_stream_create_entry(
    hl_backend_t* backend, hl_backend_stream_t** out_stream) {
  return hl_host_stream_create(hl_host_cast(backend), out_stream);
}

static void hl_host_stream_destroy_entry(hl_backend_t* backend,
                                         hl_backend_stream_t* stream) {
  hl_host_backend_t* device = hl_host_cast(backend);
  hl_host_stream_stop(stream);
  // Its cached blocks become plainly free before the stream goes.
  hl_host_pool_forget_stream(device, stream);
  atomic_fetch_sub(&device->live_streams, 1);
  hl_host_stream_release(stream);
}

static hl_status_t hl_host_stream_synchronize(hl_backend_t* backend,
                                              hl_backend_stream_t* stream) {
  hl_host_stream_wait_seq(stream, hl_host_stream_submitted(stream));
  hl_host_pool_release_to_threshold(hl_host_cast(backend));
  return NULL;
}

static hl_status_t hl_host_event_synchronize(hl_backend_t* backend,
                                             hl_backend_event_t* event) {
  uint64_t seq = 0;
  hl_backend_stream_t* stream = hl_host_event_snapshot(event, &seq);
  if (stream) {
    hl_host_stream_wait_seq(stream, seq);
    hl_host_stream_release(stream);
  }
  hl_host_pool_release_to_threshold(hl_host_cast(backend));
  return NULL;
}

static hl_status_t hl_host_stream_wait_event(hl_backend_t* backend,
                                             hl_backend_stream_t* stream,
                                             hl_backend_event_t* event) {
  uint64_t seq = 0;
  hl_backend_stream_t* other = hl_host_event_snapshot(event, &seq);
  if (!other) return NULL;  // Never recorded: complete.
  hl_status_t st = hl_host_stream_enqueue_wait(stream, other, seq);
  // A stream of another device (a cross-device wait) frees nothing into
  // this pool, and stream ids are dense per device: only this device's
  // streams are dependencies of its pool.
  if (!st && other->device == hl_host_cast(backend))
    hl_host_pool_note_dependency(hl_host_cast(backend), stream, other, seq);
  hl_host_stream_release(other);
  return st;
}

static hl_status_t hl_host_launch_host_func(hl_backend_t* backend,
                                            hl_backend_stream_t* stream,
                                            hl_host_fn_t fn, void* user) {
  if (!fn) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "launch_host_func: fn is NULL");
  }
  return hl_host_stream_enqueue_fn(stream, fn, user, NULL);
}

static bool hl_host_run_runtime_func_now(hl_backend_t* backend,
                                         hl_backend_stream_t* stream,
                                         hl_host_fn_t fn, void* user) {
  (void)backend;
  return fn && hl_host_stream_run_inline(stream, fn, user);
}

static bool hl_host_stream_claim_entry(hl_backend_t* backend,
                                       hl_backend_stream_t* stream) {
  (void)backend;
  return hl_host_stream_claim(stream);
}

static void hl_host_stream_unclaim_entry(hl_backend_t* backend,
                                         hl_backend_stream_t* stream) {
  (void)backend;
  hl_host_stream_unclaim(stream);
}

static bool hl_host_stream_claim_intact_entry(hl_backend_t* backend,
                                              hl_backend_stream_t* stream) {
  (void)backend;
  return hl_host_stream_claim_intact(stream);
}

static hl_status_t hl_host_launch_runtime_func(hl_backend_t* backend,
                                               hl_backend_stream_t* stream,
                                               hl_host_fn_t fn, void* user) {
  if (fn && hl_host_stream_run_inline(stream, fn, user)) return NULL;
  return hl_host_launch_host_func(backend, stream, fn, user);
}

static hl_status_t hl_host_memcpy_async(hl_backend_t* backend, void* dst,
                                        const void* src, size_t size,
                                        hl_backend_stream_t* stream) {
  if (size && (!dst || !src)) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "memcpy_async of %zu bytes with a NULL pointer",
                          size);
  }
  if (hl_host_stream_is_current(stream)) {
    // From a host function on |stream|: this is the stream's point
    // (stream_ordered_host_work).
    if (size) memmove(dst, src, size);
    return NULL;
  }
  hl_host_item_t* item = NULL;
  HL_RETURN_IF_ERROR(
      hl_host_item_alloc(hl_host_cast(backend), HL_HOST_ITEM_MEMCPY, &item),
      "memcpy_async");
  item->memcpy.dst = dst;
  item->memcpy.src = src;
  item->memcpy.size = size;
  return hl_host_stream_push_item(stream, item, NULL);
}

static hl_status_t hl_host_memset32_async(hl_backend_t* backend, void* dst,
                                          uint32_t value, size_t count,
                                          hl_backend_stream_t* stream) {
  if (count && (!dst || ((uintptr_t)dst & 3u))) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "memset32_async: destination %p is NULL or not "
                          "4-byte aligned",
                          dst);
  }
  if (hl_host_stream_is_current(stream)) {
    uint32_t* words = (uint32_t*)dst;
    for (size_t i = 0; i < count; ++i) words[i] = value;
    return NULL;
  }
  hl_host_item_t* item = NULL;
  HL_RETURN_IF_ERROR(
      hl_host_item_alloc(hl_host_cast(backend), HL_HOST_ITEM_MEMSET32, &item),
      "memset32_async");
  item->memset32.dst = dst;
  item->memset32.value = value;
  item->memset32.count = count;
  return hl_host_stream_push_item(stream, item, NULL);
}

static hl_status_t hl_host_malloc_async(hl_backend_t* backend, size_t size,
                                        hl_backend_stream_t* stream,
                                        void** out_ptr) {
  return hl_host_pool_malloc(hl_host_cast(backend), size, stream, out_ptr);
}

static hl_status_t hl_host_free_async(hl_backend_t* backend, void* ptr,
                                      hl_backend_stream_t* stream) {
  return hl_host_pool_free(hl_host_cast(backend), ptr, stream);
}

static hl_status_t hl_host_pool_set_attributes(hl_backend_t* backend,
                                               const hl_pool_attributes_t* a) {
  hl_host_backend_t* device = hl_host_cast(backend);
  if (a->reuse_flags & ~(uint32_t)HL_POOL_REUSE_ALL) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "unknown pool reuse flags 0x%x", a->reuse_flags);
  }
  hl_spinlock_lock(&device->pool.lock);
  device->pool.attrs = *a;
  if (!device->pool.attrs.limit_bytes) {
    device->pool.attrs.limit_bytes = device->memory_bytes;
  }
  hl_spinlock_unlock(&device->pool.lock);
  hl_host_pool_release_to_threshold(device);
  return NULL;
}

static hl_status_t hl_host_pool_get_attributes(hl_backend_t* backend,
                                               hl_pool_attributes_t* out) {
  hl_host_backend_t* device = hl_host_cast(backend);
  hl_spinlock_lock(&device->pool.lock);
  *out = device->pool.attrs;
  hl_spinlock_unlock(&device->pool.lock);
  return NULL;
}

static hl_status_t hl_host_pool_trim_entry(hl_backend_t* backend,
                                           uint64_t min_bytes_to_keep) {
  return hl_host_pool_trim(hl_host_cast(backend), min_bytes_to_keep);
}

static hl_status_t hl_host_pool_stats(hl_backend_t* backend,
                                      hl_backend_pool_stats_t* out) {
  hl_host_backend_t* device = hl_host_cast(backend);
  hl_spinlock_lock(&device->pool.lock);
  *out = device->pool.stats;
  hl_spinlock_unlock(&device->pool.lock);
  return NULL;
}

// A host module is a view of a host code object.
struct hl_backend_module_t {
  const hl_host_code_object_t* code;
};

static hl_status_t hl_host_module_load(hl_backend_t* backend, const void* image,
                                       size_t size,
                                       hl_backend_module_t** out_module) {
  const hl_host_code_object_t* code = (const hl_host_code_object_t*)image;
  if (!code || size != sizeof(*code) ||
      code->magic != HL_HOST_CODE_OBJECT_MAGIC) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "host module_load: image is not a host code object "
                          "(target 'host' needs the built-in host kernels)");
  }
  hl_host_backend_t* device = hl_host_cast(backend);
  hl_backend_module_t* module = NULL;
  HL_RETURN_IF_ERROR(hl_allocator_calloc(device->base.host_allocator,
                                         sizeof(*module), (void**)&module),
                     "loading a host module");
  module->code = code;
  atomic_fetch_add(&device->live_modules, 1);
  *out_module = module;
  return NULL;
}

static void hl_host_module_unload(hl_backend_t* backend,
                                  hl_backend_module_t* module) {
  hl_host_backend_t* device = hl_host_cast(backend);
  atomic_fetch_sub(&device->live_modules, 1);
  hl_allocator_free(device->base.host_allocator, module);
}

static hl_status_t hl_host_module_get_function(
    hl_backend_t* backend, hl_backend_module_t* module, const char* name,
    hl_backend_function_t** out_function) {
  for (uint32_t i = 0; i < module->code->kernel_count; ++i) {
    if (strcmp(module->code->kernels[i].name, name) == 0) {
      *out_function = (hl_backend_function_t*)&module->code->kernels[i];
      return NULL;
    }
  }
  return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                        "host module has no kernel named '%s'", name);
}

static hl_status_t hl_host_launch_kernel(hl_backend_t* backend,
                                         hl_backend_function_t* function,
                                         const hl_launch_config_t* config,
                                         void** params,
                                         hl_backend_stream_t* stream) {
  const hl_host_kernel_t* kernel = (const hl_host_kernel_t*)function;
  if (!kernel || !config) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "launch_kernel: NULL function or config");
  }
  if (kernel->param_count > 16 || (kernel->param_count && !params)) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "launch_kernel(%s): bad parameter list",
                          kernel->name);
  }
  if (hl_host_stream_is_current(stream)) {
    // |params| stay valid for the call, so the kernel reads them in place.
    kernel->fn(params, config);
    return NULL;
  }
  hl_host_item_t* item = NULL;
  HL_RETURN_IF_ERROR(
      hl_host_item_alloc(hl_host_cast(backend), HL_HOST_ITEM_KERNEL, &item),
      "launch_kernel(%s)", kernel->name);
  size_t offset = 0;
  for (uint32_t i = 0; i < kernel->param_count; ++i) {
    size_t sz = kernel->param_sizes[i];
    if (offset + sz > HL_HOST_KERNEL_STORAGE) {
      hl_host_item_free(hl_host_cast(backend), item);
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "launch_kernel(%s): parameters exceed %d bytes",
                            kernel->name, HL_HOST_KERNEL_STORAGE);
    }
    memcpy(item->kernel.storage + offset, params[i], sz);
    offset += (sz + 7u) & ~(size_t)7u;
  }
  item->kernel.kernel = kernel;
  item->kernel.config = *config;
  if (!item->kernel.config.launch_ns) {
    item->kernel.config.launch_ns = hl_time_now();
  }
  return hl_host_stream_push_item(stream, item, NULL);
}

static void hl_host_live_counts(hl_backend_t* backend,
                                hl_backend_counts_t* out) {
  hl_host_backend_t* device = hl_host_cast(backend);
  out->live_streams = atomic_load(&device->live_streams);
  out->live_events = atomic_load(&device->live_events);
  out->live_modules = atomic_load(&device->live_modules);
  hl_spinlock_lock(&device->pool.lock);
  out->live_blocks = device->pool.block_count;
  hl_spinlock_unlock(&device->pool.lock);
}

static const hl_backend_vtable_t hl_host_vtable = {
    .destroy = hl_host_destroy,
    .query_properties = hl_host_query_properties,
    .stream_create = hl_host_stream_create_entry,
    .stream_destroy = hl_host_stream_destroy_entry,
    .stream_synchronize = hl_host_stream_synchronize,
    .event_create = hl_host_event_create,
    .event_destroy = hl_host_event_destroy,
    .event_record = hl_host_event_record,
    .event_query = hl_host_event_query,
    .event_synchronize = hl_host_event_synchronize,
    .event_elapsed_ms = hl_host_event_elapsed_ms,
    .stream_wait_event = hl_host_stream_wait_event,
    .launch_host_func = hl_host_launch_host_func,
    .launch_runtime_func = hl_host_launch_runtime_func,
    .run_runtime_func_now = hl_host_run_runtime_func_now,
    .stream_claim = hl_host_stream_claim_entry,
    .stream_unclaim = hl_host_stream_unclaim_entry,
    .stream_claim_intact = hl_host_stream_claim_intact_entry,
    .memcpy_async = hl_host_memcpy_async,
    .memset32_async = hl_host_memset32_async,
    .malloc_async = hl_host_malloc_async,
    .free_async = hl_host_free_async,
    .pool_set_attributes = hl_host_pool_set_attributes,
    .pool_get_attributes = hl_host_pool_get_attributes,
    .pool_trim = hl_host_pool_trim_entry,
    .pool_stats = hl_host_pool_stats,
    .module_load = hl_host_module_load,
    .module_unload = hl_host_module_unload,
    .module_get_function = hl_host_module_get_function,
    .launch_kernel = hl_host_launch_kernel,
    .live_counts = hl_host_live_counts,
    .set_poison = hl_host_backend_set_poison,
    .peer_can_access = hl_host_peer_can_access,
    .peer_enable = hl_host_peer_enable,
    .memcpy_peer_async = hl_host_memcpy_peer_async,
};

hl_status_t hl_host_backend_create(int ordinal, hl_allocator_t allocator,
                                   hl_backend_t** out_backend) {
  hl_device_properties_t props;
  HL_RETURN_IF_ERROR_PLAIN(hl_host_backend_device_properties(ordinal, &props));
  hl_host_backend_t* device = NULL;
  HL_RETURN_IF_ERROR(
      hl_allocator_calloc(allocator, sizeof(*device), (void**)&device),
      "creating host device %d", ordinal);
  device->base.vtable = &hl_host_vtable;
  device->base.kind = HL_BACKEND_HOST;
  device->base.host_visible_memory = true;
  device->base.stream_ordered_host_work = true;
  device->base.events_untimed = true;  // As hip's (host_item.h).
  device->base.injects_faults = true;
  device->base.host_allocator = allocator;
  device->ordinal = ordinal;
  device->memory_bytes = props.memory_bytes;
  atomic_init(&device->next_stream_id, 0);
  // HIPLINE_HOST_INLINE=0 keeps all stream work on the workers (to compare,
  // or to rule the inline path out while chasing a bug).
  bool inline_work = true, inline_set = false;
  hl_status_t env_st =
      hl_env_read_bool(HL_ENV_HOST_INLINE, &inline_work, &inline_set);
  if (env_st) {
    hl_allocator_free(allocator, device);
    return env_st;
  }
  device->inline_work = inline_work;
  hl_status_t st = hl_host_pool_initialize(device);
  if (st) {
    hl_allocator_free(allocator, device);
    return st;
  }
  *out_backend = &device->base;
  return NULL;
}
