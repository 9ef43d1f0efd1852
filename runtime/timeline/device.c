// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Devices: lifecycle (creation, layer extensions, destruction), options and
// environment checks. The work thread is in scheduler.c, the event pool in
// event_pool.c, and what walks a device's queues in queue.c.

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/env.h"
#include "runtime/base/faults.h"
#include "runtime/base/log.h"
#include "runtime/base/peer_spec.h"
#include "runtime/base/time_util.h"
#include "runtime/base/trace.h"
#include "runtime/timeline/timeline_internal.h"

extern char** environ;

// By the index of HIPLINE_FALLBACK's values (base/env.c).
static const hl_fallback_mode_t kFallbackModes[] = {
    HL_FALLBACK_ORDERED, HL_FALLBACK_FRONTIER, HL_FALLBACK_DEVICE_SYNC};

const char* hl_pool_mode_name(hl_pool_mode_t mode) {
  switch (mode) {
    case HL_POOL_MODE_DEFAULT:
      return "default";
    case HL_POOL_MODE_DRIVER:
      return "driver";
    case HL_POOL_MODE_HIPLINE:
      return "hipline";
  }
  return "unknown";
}

const char* hl_fallback_mode_name(hl_fallback_mode_t mode) {
  switch (mode) {
    case HL_FALLBACK_FRONTIER:
      return "frontier";
    case HL_FALLBACK_DEVICE_SYNC:
      return "device-sync";
    case HL_FALLBACK_ORDERED:
      return "ordered";
    default:
      return "default";
  }
}

// HIPLINE_TRACE=FILE: capture from the first device to process exit.
static char hl_trace_path_[512];
static void hl_trace_at_exit(void) {
  hl_status_t st = hl_trace_capture_end(hl_trace_path_);
  if (!st) return;
  hl_status_fprint(stderr, "hipline: HIPLINE_TRACE: ", st);
  hl_status_free(st);
  // The trace the user asked for is lost: the process must not report
  // success. (A bad path is refused at device creation already; this is a
  // write that failed at the end, such as a full disk.)
  fflush(NULL);
  _exit(1);
}

// Whether the trace at |path| could be written: an existing file must be
// writable and not a directory; otherwise its directory must be writable.
static hl_status_t hl_trace_path_check(const char* path) {
  struct stat st;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode) || access(path, W_OK) != 0) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "HIPLINE_TRACE='%s' is not a writable file", path);
    }
    return NULL;
  }
  char dir[sizeof(hl_trace_path_)];
  snprintf(dir, sizeof(dir), "%s", path);
  char* slash = strrchr(dir, '/');
  if (!slash) {
    snprintf(dir, sizeof(dir), ".");
  } else if (slash == dir) {
    slash[1] = '\0';
  } else {
    *slash = '\0';
  }
  if (access(dir, W_OK | X_OK) != 0) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "HIPLINE_TRACE='%s': directory '%s' does not exist "
                          "or is not writable",
                          path, dir);
  }
  return NULL;
}
static void hl_trace_from_env(void) {
  const char* path = hl_env_read_text(HL_ENV_TRACE);
  if (!path || strlen(path) >= sizeof(hl_trace_path_)) return;
  snprintf(hl_trace_path_, sizeof(hl_trace_path_), "%s", path);
  hl_trace_capture_begin(0);
  atexit(hl_trace_at_exit);
}
static once_flag hl_trace_env_once_ = ONCE_FLAG_INIT;

// HIPLINE_QUEUE_DEPTH: a decimal in [1, HL_QUEUE_DEPTH_MAX]; 0 when unset.
static hl_status_t hl_queue_depth_from_env(uint32_t* out_depth) {
  *out_depth = 0;
  uint64_t depth = 0;
  bool set = false;
  HL_RETURN_IF_ERROR_PLAIN(hl_env_read_uint(HL_ENV_QUEUE_DEPTH, &depth, &set));
  if (depth > HL_QUEUE_DEPTH_MAX) {  // The table's range (base/env.c).
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "HIPLINE_QUEUE_DEPTH=%llu is more than %u",
                          (unsigned long long)depth, HL_QUEUE_DEPTH_MAX);
  }
  *out_depth = (uint32_t)depth;
  return NULL;
}

// Warns about a HIPLINE_* variable that looks like a misspelling of one in
// the table (base/env.c), which would otherwise be silently ignored. Other
// HIPLINE_* names belong to the scripts and tools (docs/environment.md).
// Said once per process, not once per device.
static void hl_environment_warn_misspelt(void) {
  static atomic_flag scanned = ATOMIC_FLAG_INIT;
  if (atomic_flag_test_and_set(&scanned)) return;
  for (char** e = environ; e && *e; ++e) {
    if (strncmp(*e, "HIPLINE_", 8) != 0) continue;
    const char* eq = strchr(*e, '=');
    size_t length = eq ? (size_t)(eq - *e) : strlen(*e);
    const hl_env_var_t* meant = hl_env_suggest(*e, length);
    if (meant) {
      HL_LOG_WARN("unknown environment variable %.*s is ignored (%s?)",
                  (int)length, *e, meant->name);
    }
  }
}

hl_status_t hl_environment_check(void) {
  // Every variable of the table parses as its reader parses it.
  for (int id = 0; id < HL_ENV_COUNT; ++id) {
    HL_RETURN_IF_ERROR_PLAIN(hl_env_var_check(hl_env_var((hl_env_id_t)id)));
  }
  // What a kind's parser leaves to the reader.
  hl_faults_t faults;
  HL_RETURN_IF_ERROR_PLAIN(hl_faults_from_env(&faults));
  const char* trace = hl_env_read_text(HL_ENV_TRACE);
  if (trace) HL_RETURN_IF_ERROR_PLAIN(hl_trace_path_check(trace));
  uint32_t depth = 0;
  HL_RETURN_IF_ERROR_PLAIN(hl_queue_depth_from_env(&depth));
  uint64_t unreachable[HL_PEER_SPEC_MAX_DEVICES];
  HL_RETURN_IF_ERROR_PLAIN(hl_peer_spec_from_env(unreachable));
  hl_environment_warn_misspelt();
  return NULL;
}

void hl_device_options_initialize(hl_device_options_t* out_options) {
  if (!out_options) return;
  memset(out_options, 0, sizeof(*out_options));
  out_options->backend = HL_BACKEND_AUTO;
  out_options->fallback = HL_FALLBACK_DEFAULT;
  out_options->checked = -1;
}

//===----------------------------------------------------------------------===//
// Completion thread
//===----------------------------------------------------------------------===//

static void hl_device_destroy(hl_device_t* device);
static atomic_int_least64_t hl_live_devices_;

int64_t hl_device_live_count(void) { return atomic_load(&hl_live_devices_); }

//===----------------------------------------------------------------------===//
// Devices
//===----------------------------------------------------------------------===//

hl_status_t hl_device_create(const hl_device_options_t* options,
                             hl_allocator_t host_allocator,
                             hl_device_t** out_device) {
  if (!out_device) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_device_create: out_device is NULL");
  }
  *out_device = NULL;
  hl_device_options_t defaults;
  if (!options) {
    hl_device_options_initialize(&defaults);
    options = &defaults;
  }
  if (!host_allocator.alloc) host_allocator = hl_allocator_system();
  HL_RETURN_IF_ERROR(hl_environment_check(), "creating a device");
  call_once(&hl_trace_env_once_, hl_trace_from_env);
  if ((unsigned)options->fallback > HL_FALLBACK_ORDERED) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "unknown fallback mode %d; accepted: "
                          "ordered|frontier|device-sync",
                          (int)options->fallback);
  }
  if ((unsigned)options->pool_mode > HL_POOL_MODE_HIPLINE) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "unknown pool mode %d; accepted: driver|hipline",
                          (int)options->pool_mode);
  }
  if (options->queue_depth > HL_QUEUE_DEPTH_MAX) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "options.queue_depth must be 0 (default) or 1..%u, "
                          "got %u",
                          HL_QUEUE_DEPTH_MAX, options->queue_depth);
  }
  if (options->checked < -1 || options->checked > 1) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "options.checked must be -1, 0 or 1, got %d",
                          options->checked);
  }
  hl_backend_kind_t kind;
  HL_RETURN_IF_ERROR(hl_backend_resolve(options->backend, &kind),
                     "creating a device");

  hl_device_t* device = NULL;
  HL_RETURN_IF_ERROR(
      hl_allocator_calloc(host_allocator, sizeof(*device), (void**)&device),
      "creating a device");
  atomic_init(&device->ref_count, 1);
  device->host_allocator = host_allocator;
  hl_status_t st = hl_backend_create(kind, options->ordinal, host_allocator,
                                     &device->backend);
  if (st) {
    hl_allocator_free(host_allocator, device);
    return hl_status_annotate(st, "creating %s device %d",
                              hl_backend_kind_name(kind), options->ordinal);
  }
  hl_backend_t* backend = device->backend;
  st = backend->vtable->query_properties(backend, &device->props);

  // Pool attributes: explicit options, then the environment, then defaults.
  hl_pool_attributes_t attrs;
  if (!st) st = backend->vtable->pool_get_attributes(backend, &attrs);
  if (!st) {
    bool set = false;
    uint64_t threshold = 0;
    if (options->pool_release_threshold_set) {
      attrs.release_threshold = options->pool.release_threshold;
    } else {
      st = hl_env_read_size(HL_ENV_POOL_RELEASE_THRESHOLD, &threshold, &set);
      if (!st && set) attrs.release_threshold = threshold;
    }
    if (options->pool_reuse_flags_set)
      attrs.reuse_flags = options->pool.reuse_flags;
    if (options->pool.limit_bytes)
      attrs.limit_bytes = options->pool.limit_bytes;
  }
  if (!st) st = backend->vtable->pool_set_attributes(backend, &attrs);

  device->fallback = options->fallback;
  if (!st && device->fallback == HL_FALLBACK_DEFAULT) {
    int index = 0;
    bool set = false;
    st = hl_env_read_enum(HL_ENV_FALLBACK, &index, &set);
    device->fallback = set ? kFallbackModes[index] : HL_FALLBACK_ORDERED;
  }
  device->pool_mode = options->pool_mode;
  if (!st && device->pool_mode == HL_POOL_MODE_DEFAULT) {
    int index = 0;
    bool set = false;
    st = hl_env_read_enum(HL_ENV_ALLOCATOR, &index, &set);
    // hipline's suballocator unless HIPLINE_ALLOCATOR=driver (issue 16: it
    // became the default once it held less memory than the driver's pool on
    // every trace and workload and its pair reached the target).
    device->pool_mode =
        (set && index == 0) ? HL_POOL_MODE_DRIVER : HL_POOL_MODE_HIPLINE;
  }
  device->checked = options->checked == 1;
  if (!st && options->checked == -1) {
    bool set = false, checked = false;
    st = hl_env_read_bool(HL_ENV_CHECKED, &checked, &set);
    device->checked = set && checked;
  }
  if (!st && device->checked && backend->vtable->set_poison) {
    backend->vtable->set_poison(backend, true);
  }
  if (!st && device->checked && !backend->vtable->set_poison) {
    HL_LOG_WARN(
        "HIPLINE_CHECKED applies to the host backend only; device %d "
        "(%s) runs unchecked",
        options->ordinal, hl_backend_kind_name(backend->kind));
    device->checked = false;
  }
  device->queue_depth = options->queue_depth;
  if (!st && !device->queue_depth) {
    st = hl_queue_depth_from_env(&device->queue_depth);
    if (!device->queue_depth) device->queue_depth = HL_QUEUE_DEPTH_DEFAULT;
  }
  atomic_init(&device->next_queue_id, 0);
  hl_spinlock_init(&device->lock);
  if (!st && (mtx_init(&device->work_mutex, mtx_plain) != thrd_success ||
              cnd_init(&device->work_cond) != thrd_success ||
              cnd_init(&device->idle_cond) != thrd_success)) {
    st = HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                        "creating the completion thread's mutex");
  }
  if (!st && thrd_create(&device->work_thread, hl_device_work_main, device) !=
                 thrd_success) {
    mtx_destroy(&device->work_mutex);
    cnd_destroy(&device->work_cond);
    cnd_destroy(&device->idle_cond);
    st = HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                        "starting the completion thread");
  }
  if (st) {
    backend->vtable->destroy(backend);
    hl_allocator_free(host_allocator, device);
    return hl_status_annotate(st, "creating %s device %d",
                              hl_backend_kind_name(kind), options->ordinal);
  }
  atomic_fetch_add(&hl_live_devices_, 1);
  *out_device = device;
  return NULL;
}

void hl_device_retain(hl_device_t* device) {
  if (device)
    atomic_fetch_add_explicit(&device->ref_count, 1, memory_order_relaxed);
}

//===----------------------------------------------------------------------===//
// Layer extensions
//===----------------------------------------------------------------------===//

void* hl_device_extension(hl_device_t* device, hl_device_extension_id_t id) {
  return atomic_load_explicit(&device->extensions[id].state,
                              memory_order_acquire);
}

void hl_device_extension_install(hl_device_t* device,
                                 hl_device_extension_id_t id, void* state,
                                 hl_device_extension_destroy_fn_t destroy) {
  hl_device_extension_t* extension = &device->extensions[id];
  atomic_store_explicit(&extension->destroy, destroy, memory_order_relaxed);
  atomic_store_explicit(&extension->state, state, memory_order_release);
}

void hl_device_extension_set_trim(hl_device_t* device,
                                  hl_device_extension_id_t id,
                                  hl_device_extension_trim_fn_t trim) {
  atomic_store(&device->extensions[id].trim, trim);
}

// Runs the destroy hooks of slots [begin, end), in slot order, and clears
// them. No other thread uses the device any more.
static void hl_device_extensions_destroy(hl_device_t* device, int begin,
                                         int end) {
  for (int id = begin; id < end; ++id) {
    hl_device_extension_t* extension = &device->extensions[id];
    hl_device_extension_destroy_fn_t destroy =
        atomic_exchange(&extension->destroy, NULL);
    if (destroy) destroy(device, atomic_load(&extension->state));
    atomic_store(&extension->state, NULL);
    atomic_store(&extension->trim, NULL);
  }
}

// The layers' own trims, in slot order, before the backend pool's.
static void hl_device_extensions_trim(hl_device_t* device,
                                      uint64_t min_bytes_to_keep) {
  for (int id = 0; id < HL_DEVICE_EXTENSION_COUNT; ++id) {
    hl_device_extension_trim_fn_t trim =
        atomic_load(&device->extensions[id].trim);
    if (trim) trim(device, min_bytes_to_keep);
  }
}

static void hl_device_destroy(hl_device_t* device) {
  // Every queue retains its device, so none is left; what may remain is
  // deferred work (fallback frees, notifications) that drains here.
  hl_device_flush_work(device);
  hl_device_extensions_destroy(device, 0, HL_DEVICE_EXTENSION_LATE_BEGIN);
  hl_device_flush_work(device);
  hl_device_stop_completer(device);
  hl_device_stop_work(device);
  mtx_destroy(&device->work_mutex);
  cnd_destroy(&device->work_cond);
  cnd_destroy(&device->idle_cond);
  for (uint32_t i = 0; i < device->free_event_count; ++i) {
    device->backend->vtable->event_destroy(device->backend,
                                           device->free_events[i]);
    atomic_fetch_sub(&device->live_events, 1);
  }
  free(device->free_events);
  free(device->queues);
  // Before the backend goes.
  hl_device_extensions_destroy(device, HL_DEVICE_EXTENSION_LATE_BEGIN,
                               HL_DEVICE_EXTENSION_COUNT);
  device->backend->vtable->destroy(device->backend);
  hl_allocator_free(device->host_allocator, device);
  atomic_fetch_sub(&hl_live_devices_, 1);
}

// Devices are released from the completion thread too (deferred work holds
// references). Destroying there would join the thread from itself, so that
// case hands the destruction to a short-lived thread. Those threads are
// joined at process exit, so a process that drops its last handle and exits
// at once still tears every device down.
static int hl_device_destroy_main(void* arg) {
  hl_thread_set_name("hl-destroy");
  hl_device_destroy((hl_device_t*)arg);
  return 0;
}

typedef struct hl_destroy_thread_t {
  struct hl_destroy_thread_t* next;
  thrd_t thread;
} hl_destroy_thread_t;
static mtx_t hl_destroy_mutex_;
static once_flag hl_destroy_once_ = ONCE_FLAG_INIT;
static hl_destroy_thread_t* hl_destroy_threads_;

static void hl_destroy_threads_join(void) {
  mtx_lock(&hl_destroy_mutex_);
  hl_destroy_thread_t* list = hl_destroy_threads_;
  hl_destroy_threads_ = NULL;
  mtx_unlock(&hl_destroy_mutex_);
  while (list) {
    hl_destroy_thread_t* next = list->next;
    thrd_join(list->thread, NULL);
    free(list);
    list = next;
  }
}

static void hl_destroy_init(void) {
  mtx_init(&hl_destroy_mutex_, mtx_plain);
  atexit(hl_destroy_threads_join);
}

static bool hl_device_destroy_in_thread(hl_device_t* device) {
  call_once(&hl_destroy_once_, hl_destroy_init);
  hl_destroy_thread_t* entry = calloc(1, sizeof(*entry));
  if (!entry) return false;
  if (thrd_create(&entry->thread, hl_device_destroy_main, device) !=
      thrd_success) {
    free(entry);
    return false;
  }
  mtx_lock(&hl_destroy_mutex_);
  entry->next = hl_destroy_threads_;
  hl_destroy_threads_ = entry;
  mtx_unlock(&hl_destroy_mutex_);
  return true;
}

void hl_device_release_internal(hl_device_t* device) {
  if (!device || hl_ref_drop_unless_last(&device->ref_count)) return;
  hl_device_release(device);
}

void hl_device_release(hl_device_t* device) {
  if (!device) return;
  // Deferred work (fallback frees, notifications) holds references too; let
  // what is already queued finish first, so that a caller releasing its last
  // handle really destroys the device here rather than on the completion
  // thread after the caller has moved on (or exited).
  if (!thrd_equal(thrd_current(), device->work_thread)) {
    hl_device_flush_work(device);
  }
  if (atomic_fetch_sub_explicit(&device->ref_count, 1, memory_order_acq_rel) !=
      1) {
    return;
  }
  if (thrd_equal(thrd_current(), device->work_thread)) {
    if (hl_device_destroy_in_thread(device)) return;
    HL_LOG_ERROR("cannot start a thread to destroy device %d; leaking it",
                 device->props.ordinal);
    return;
  }
  hl_device_destroy(device);
}

hl_status_t hl_device_properties(hl_device_t* device,
                                 hl_device_properties_t* out_props) {
  if (!device || !out_props) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_device_properties: NULL device or out_props");
  }
  *out_props = device->props;
  return NULL;
}

hl_fallback_mode_t hl_device_fallback_mode(const hl_device_t* device) {
  return device ? device->fallback : HL_FALLBACK_DEFAULT;
}

bool hl_device_checked(const hl_device_t* device) {
  return device && device->checked;
}

hl_pool_mode_t hl_device_pool_mode(const hl_device_t* device) {
  return device ? device->pool_mode : HL_POOL_MODE_DEFAULT;
}

hl_status_t hl_device_pool_attributes(hl_device_t* device,
                                      hl_pool_attributes_t* out_attrs) {
  if (!device || !out_attrs) {
    return HL_MAKE_STATUS(
        HL_STATUS_INVALID_ARGUMENT,
        "hl_device_pool_attributes: NULL device or out_attrs");
  }
  return device->backend->vtable->pool_get_attributes(device->backend,
                                                      out_attrs);
}

hl_status_t hl_device_trim(hl_device_t* device, uint64_t min_bytes_to_keep) {
  if (!device) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_device_trim: device is NULL");
  }
  hl_device_extensions_trim(device, min_bytes_to_keep);
  // Idle pooled events go too; they are destroyed after unlocking.
  hl_device_lock(device);
  hl_backend_event_t** events = device->free_events;
  uint32_t count = device->free_event_count;
  device->free_events = NULL;
  device->free_event_count = 0;
  device->free_event_capacity = 0;
  hl_device_unlock(device);
  for (uint32_t i = 0; i < count; ++i) {
    device->backend->vtable->event_destroy(device->backend, events[i]);
    atomic_fetch_sub(&device->live_events, 1);
  }
  free(events);
  return device->backend->vtable->pool_trim(device->backend, min_bytes_to_keep);
}

void hl_device_apply_release_threshold(hl_device_t* device) {
  hl_pool_attributes_t attrs;
  hl_backend_t* backend = device->backend;
  hl_status_t st = backend->vtable->pool_get_attributes(backend, &attrs);
  // The layers trim even without a threshold (UINT64_MAX keeps every
  // byte): a synchronization point also empties their caches.
  if (!st) hl_device_extensions_trim(device, attrs.release_threshold);
  if (!st && attrs.release_threshold != UINT64_MAX) {
    st = backend->vtable->pool_trim(backend, attrs.release_threshold);
  }
  hl_status_ignore(st);  // Trimming is an optimisation; memory stays valid.
}
