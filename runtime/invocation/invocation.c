// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Functions, invocations, export of arguments and import of results.

#include "hipline/invocation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/env.h"
#include "runtime/base/log.h"
#include "runtime/base/recycler.h"
#include "runtime/base/trace.h"
#include "runtime/memory/memory_internal.h"

//===----------------------------------------------------------------------===//
// Counters
//===----------------------------------------------------------------------===//

typedef struct hl_invocation_counters_t {
  atomic_uint_least64_t invocations;
  atomic_uint_least64_t async_imports;
  atomic_uint_least64_t sync_imports;
  atomic_uint_least64_t alias_detected;
  atomic_uint_least64_t async_deallocs;
} hl_invocation_counters_t;

static hl_invocation_counters_t hl_global_counters_;
static mtx_t hl_invocation_mutex_;  // Registry, lazy state, settings.
static once_flag hl_invocation_once_ = ONCE_FLAG_INIT;

static void hl_invocation_init(void) {
  mtx_init(&hl_invocation_mutex_, mtx_plain);
}

static void hl_invocation_state_destroy(hl_device_t* device, void* state) {
  (void)device;
  free(state);
}

static hl_invocation_counters_t* hl_device_counters(hl_device_t* device) {
  hl_invocation_counters_t* c =
      hl_device_extension(device, HL_DEVICE_EXTENSION_INVOCATION);
  if (HL_LIKELY(c)) return c;
  call_once(&hl_invocation_once_, hl_invocation_init);
  mtx_lock(&hl_invocation_mutex_);
  c = hl_device_extension(device, HL_DEVICE_EXTENSION_INVOCATION);
  if (!c) {
    c = calloc(1, sizeof(*c));
    if (c) {
      hl_device_extension_install(device, HL_DEVICE_EXTENSION_INVOCATION, c,
                                  hl_invocation_state_destroy);
    }
  }
  mtx_unlock(&hl_invocation_mutex_);
  return c;
}

#define HL_COUNT(device, field)                                             \
  do {                                                                      \
    hl_invocation_counters_t* c_ = hl_device_counters(device);              \
    if (c_) atomic_fetch_add_explicit(&c_->field, 1, memory_order_relaxed); \
    atomic_fetch_add_explicit(&hl_global_counters_.field, 1,                \
                              memory_order_relaxed);                        \
  } while (0)

static void hl_counters_load(hl_invocation_counters_t* c,
                             hl_invocation_stats_t* out) {
  out->invocations = atomic_load(&c->invocations);
  out->async_imports = atomic_load(&c->async_imports);
  out->sync_imports = atomic_load(&c->sync_imports);
  out->alias_detected = atomic_load(&c->alias_detected);
  out->async_deallocs = atomic_load(&c->async_deallocs);
}

hl_status_t hl_device_invocation_stats(hl_device_t* device,
                                       hl_invocation_stats_t* out_stats) {
  if (!device || !out_stats) {
    return HL_MAKE_STATUS(
        HL_STATUS_INVALID_ARGUMENT,
        "hl_device_invocation_stats: NULL device or out_stats");
  }
  memset(out_stats, 0, sizeof(*out_stats));
  hl_invocation_counters_t* c = hl_device_counters(device);
  if (c) hl_counters_load(c, out_stats);
  hl_memory_stats_t memory;
  HL_RETURN_IF_ERROR_PLAIN(hl_device_memory_stats(device, &memory));
  out_stats->fallback_releases_frontier = memory.fallback_releases_frontier;
  out_stats->fallback_releases_device_sync =
      memory.fallback_releases_device_sync;
  out_stats->fallback_releases_ordered = memory.fallback_releases_ordered;
  return NULL;
}

void hl_invocation_stats_global(hl_invocation_stats_t* out_stats) {
  if (!out_stats) return;
  memset(out_stats, 0, sizeof(*out_stats));
  hl_counters_load(&hl_global_counters_, out_stats);
  hl_memory_global_fallbacks(&out_stats->fallback_releases_frontier,
                             &out_stats->fallback_releases_device_sync,
                             &out_stats->fallback_releases_ordered);
}

//===----------------------------------------------------------------------===//
// assume_no_alias settings
//===----------------------------------------------------------------------===//

static bool hl_setting_loaded_;
static hl_tristate_t hl_setting_value_ = HL_TRISTATE_UNSET;
static hl_setting_source_t hl_setting_source_ = HL_SETTING_SOURCE_API;
static hl_status_t hl_setting_error_;  // Parse error of the environment.

const char* hl_setting_source_name(hl_setting_source_t source) {
  switch (source) {
    case HL_SETTING_SOURCE_INVOCATION:
      return "invocation";
    case HL_SETTING_SOURCE_API:
      return "api";
    case HL_SETTING_SOURCE_ENVIRONMENT:
      return "environment";
  }
  return "unknown";
}

// Reads HIPLINE_ASSUME_NO_ALIAS once. Mutex held.
static void hl_setting_load_locked(void) {
  if (hl_setting_loaded_) return;
  hl_setting_loaded_ = true;
  bool value = false, set = false;
  hl_setting_error_ = hl_env_read_bool(HL_ENV_ASSUME_NO_ALIAS, &value, &set);
  if (!hl_setting_error_ && set) {
    hl_setting_value_ = value ? HL_TRISTATE_TRUE : HL_TRISTATE_FALSE;
    hl_setting_source_ = HL_SETTING_SOURCE_ENVIRONMENT;
  }
}

void hl_set_assume_no_alias(hl_tristate_t value) {
  call_once(&hl_invocation_once_, hl_invocation_init);
  mtx_lock(&hl_invocation_mutex_);
  hl_setting_load_locked();
  hl_setting_value_ = (value == HL_TRISTATE_TRUE || value == HL_TRISTATE_FALSE)
                          ? value
                          : HL_TRISTATE_UNSET;
  hl_setting_source_ = HL_SETTING_SOURCE_API;
  mtx_unlock(&hl_invocation_mutex_);
}

hl_status_t hl_get_assume_no_alias(hl_tristate_t* out_value,
                                   hl_setting_source_t* out_source) {
  call_once(&hl_invocation_once_, hl_invocation_init);
  mtx_lock(&hl_invocation_mutex_);
  hl_setting_load_locked();
  hl_tristate_t value = hl_setting_value_;
  hl_setting_source_t source = hl_setting_source_;
  hl_status_t error = hl_status_clone(hl_setting_error_);
  mtx_unlock(&hl_invocation_mutex_);
  if (out_value) *out_value = value;
  if (out_source) *out_source = source;
  return error;
}

//===----------------------------------------------------------------------===//
// Functions
//===----------------------------------------------------------------------===//

struct hl_function_t {
  atomic_int ref_count;
  hl_allocator_t host_allocator;
  hl_function_fn_t fn;
  void* user;
  uint32_t argument_count;
  uint32_t result_count;
  hl_access_t access[HL_FUNCTION_MAX_ARGUMENTS];
  atomic_bool alias_warned;
  hl_function_t* registry_next;
  char name[64];
};

static hl_function_t* hl_registry_;

hl_status_t hl_function_create(const char* name,
                               const hl_function_signature_t* signature,
                               hl_function_fn_t fn, void* user,
                               hl_allocator_t host_allocator,
                               hl_function_t** out_function) {
  if (!out_function) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_function_create: out_function is NULL");
  }
  *out_function = NULL;
  if (!name || !name[0] || !signature || !fn) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_function_create: name, signature and fn are "
                          "required");
  }
  if (strlen(name) >= sizeof(((hl_function_t*)0)->name)) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "function name '%.40s...' is longer than 63 bytes",
                          name);
  }
  if (signature->argument_count > HL_FUNCTION_MAX_ARGUMENTS ||
      signature->result_count > HL_FUNCTION_MAX_RESULTS) {
    return HL_MAKE_STATUS(HL_STATUS_OUT_OF_RANGE,
                          "function '%s': %u arguments and %u results; at most "
                          "%d of each",
                          name, signature->argument_count,
                          signature->result_count, HL_FUNCTION_MAX_ARGUMENTS);
  }
  if (signature->argument_count && !signature->argument_access) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "function '%s': argument_access is NULL", name);
  }
  for (uint32_t i = 0; i < signature->argument_count; ++i) {
    hl_access_t a = signature->argument_access[i];
    if (a != HL_ACCESS_READ && a != HL_ACCESS_WRITE &&
        a != HL_ACCESS_READ_WRITE) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "function '%s': argument %u has invalid access %d",
                            name, i, (int)a);
    }
  }
  hl_function_t* f = NULL;
  HL_RETURN_IF_ERROR(
      hl_allocator_calloc(host_allocator, sizeof(*f), (void**)&f),
      "creating function '%s'", name);
  atomic_init(&f->ref_count, 1);
  f->host_allocator = host_allocator;
  f->fn = fn;
  f->user = user;
  f->argument_count = signature->argument_count;
  f->result_count = signature->result_count;
  if (signature->argument_count) {
    memcpy(f->access, signature->argument_access,
           signature->argument_count * sizeof(hl_access_t));
  }
  snprintf(f->name, sizeof(f->name), "%s", name);
  *out_function = f;
  return NULL;
}

void hl_function_retain(hl_function_t* function) {
  if (function) atomic_fetch_add(&function->ref_count, 1);
}

void hl_function_release(hl_function_t* function) {
  if (!function || atomic_fetch_sub(&function->ref_count, 1) != 1) return;
  hl_allocator_free(function->host_allocator, function);
}

const char* hl_function_name(const hl_function_t* function) {
  return function ? function->name : "";
}

hl_status_t hl_function_register(hl_function_t* function) {
  if (!function) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_function_register: function is NULL");
  }
  call_once(&hl_invocation_once_, hl_invocation_init);
  mtx_lock(&hl_invocation_mutex_);
  for (hl_function_t* f = hl_registry_; f; f = f->registry_next) {
    if (strcmp(f->name, function->name) == 0) {
      mtx_unlock(&hl_invocation_mutex_);
      return HL_MAKE_STATUS(HL_STATUS_ALREADY_EXISTS,
                            "a function named '%s' is already registered",
                            function->name);
    }
  }
  hl_function_retain(function);
  function->registry_next = hl_registry_;
  hl_registry_ = function;
  mtx_unlock(&hl_invocation_mutex_);
  return NULL;
}

hl_status_t hl_function_unregister(const char* name) {
  call_once(&hl_invocation_once_, hl_invocation_init);
  mtx_lock(&hl_invocation_mutex_);
  for (hl_function_t** link = &hl_registry_; name && *link;
       link = &(*link)->registry_next) {
    if (strcmp((*link)->name, name) == 0) {
      hl_function_t* f = *link;
      *link = f->registry_next;
      f->registry_next = NULL;
      mtx_unlock(&hl_invocation_mutex_);
      hl_function_release(f);
      return NULL;
    }
  }
  mtx_unlock(&hl_invocation_mutex_);
  return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                        "no function named '%s' is registered",
                        name ? name : "(null)");
}

hl_status_t hl_function_lookup(const char* name, hl_function_t** out_function) {
  if (!name || !out_function) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_function_lookup: NULL name or out_function");
  }
  call_once(&hl_invocation_once_, hl_invocation_init);
  mtx_lock(&hl_invocation_mutex_);
  for (hl_function_t* f = hl_registry_; f; f = f->registry_next) {
    if (strcmp(f->name, name) == 0) {
      hl_function_retain(f);
      *out_function = f;
      mtx_unlock(&hl_invocation_mutex_);
      return NULL;
    }
  }
  mtx_unlock(&hl_invocation_mutex_);
  *out_function = NULL;
  return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                        "no function named '%s' is registered", name);
}

//===----------------------------------------------------------------------===//
// Invocations
//===----------------------------------------------------------------------===//

struct hl_invocation_t {
  hl_function_t* function;                            // Retained.
  hl_queue_t* queue;                                  // Retained.
  hl_buffer_t* arguments[HL_FUNCTION_MAX_ARGUMENTS];  // Retained.
  uint32_t argument_count;
  hl_buffer_t* results[HL_FUNCTION_MAX_RESULTS];  // Owned until taken.
  uint32_t result_count;
  hl_fence_t* waits;         // User waits.
  hl_semaphore_t* signal;    // Signalled to 1 by the function's work.
  hl_fence_t* signal_fence;  // {signal@1}
  bool assume_no_alias;
  bool invoked;
};

static hl_recycler_t hl_invocation_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_invocation_t), 1024, "an invocation");

hl_status_t hl_invocation_create(hl_function_t* function, hl_queue_t* queue,
                                 hl_invocation_t** out_invocation) {
  if (!out_invocation) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_invocation_create: out_invocation is NULL");
  }
  *out_invocation = NULL;
  if (!function || !queue) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_invocation_create: NULL function or queue");
  }
  hl_invocation_t* inv = NULL;
  HL_RETURN_IF_ERROR(
      hl_recycler_alloc_default(&hl_invocation_recycler_, (void**)&inv),
      "an invocation of '%s'", function->name);
  hl_allocator_t a = function->host_allocator;
  hl_status_t st = hl_fence_create(a, &inv->waits);
  if (!st) st = hl_fence_create(a, &inv->signal_fence);
  if (!st) st = hl_semaphore_create(0, a, &inv->signal);
  if (!st) st = hl_fence_insert(inv->signal_fence, inv->signal, 1);
  if (st) {
    hl_fence_release(inv->waits);
    hl_fence_release(inv->signal_fence);
    hl_semaphore_release(inv->signal);
    hl_recycler_free(&hl_invocation_recycler_, inv);
    return hl_status_annotate(st, "creating an invocation of '%s'",
                              function->name);
  }
  hl_function_retain(function);
  inv->function = function;
  hl_queue_retain(queue);
  inv->queue = queue;
  inv->assume_no_alias = true;
  *out_invocation = inv;
  return NULL;
}

void hl_invocation_release(hl_invocation_t* inv) {
  if (!inv) return;
  for (uint32_t i = 0; i < inv->argument_count; ++i)
    hl_buffer_release(inv->arguments[i]);
  for (uint32_t i = 0; i < inv->result_count; ++i)
    hl_buffer_release(inv->results[i]);
  hl_fence_release(inv->waits);
  hl_fence_release(inv->signal_fence);
  hl_semaphore_release(inv->signal);
  hl_queue_release_internal(inv->queue);
  hl_function_release(inv->function);
  hl_recycler_free(&hl_invocation_recycler_, inv);
}

hl_status_t hl_invocation_add_argument(hl_invocation_t* inv,
                                       hl_buffer_t* buffer) {
  if (!inv || !buffer) {
    return HL_MAKE_STATUS(
        HL_STATUS_INVALID_ARGUMENT,
        "hl_invocation_add_argument: NULL invocation or buffer");
  }
  if (inv->invoked) {
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "invocation of '%s' was already invoked",
                          inv->function->name);
  }
  if (inv->argument_count >= inv->function->argument_count) {
    return HL_MAKE_STATUS(HL_STATUS_OUT_OF_RANGE,
                          "function '%s' takes %u arguments",
                          inv->function->name, inv->function->argument_count);
  }
  // A peer's buffer is an argument as a local one is: its use is recorded
  // on its root (export), so its own device's frees wait for it.
  if (!hl_device_reaches(hl_queue_device(inv->queue),
                         hl_buffer_device(buffer))) {
    return HL_MAKE_STATUS(
        HL_STATUS_INVALID_ARGUMENT,
        "argument %u of '%s' lives on another device than the "
        "invocation's queue, which does not reach it",
        inv->argument_count, inv->function->name);
  }
  hl_buffer_retain(buffer);
  inv->arguments[inv->argument_count++] = buffer;
  return NULL;
}

hl_status_t hl_invocation_add_wait(hl_invocation_t* inv,
                                   hl_semaphore_t* semaphore, uint64_t value) {
  if (!inv || !semaphore) {
    return HL_MAKE_STATUS(
        HL_STATUS_INVALID_ARGUMENT,
        "hl_invocation_add_wait: NULL invocation or semaphore");
  }
  return hl_fence_insert(inv->waits, semaphore, value);
}

void hl_invocation_set_assume_no_alias(hl_invocation_t* inv, bool value) {
  if (inv) inv->assume_no_alias = value;
}

bool hl_invocation_assume_no_alias(const hl_invocation_t* inv) {
  return inv ? inv->assume_no_alias : true;
}

hl_status_t hl_invocation_effective_assume_no_alias(
    const hl_invocation_t* inv, bool* out_value,
    hl_setting_source_t* out_source) {
  if (!inv || !out_value) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_invocation_effective_assume_no_alias: NULL "
                          "invocation or out_value");
  }
  hl_tristate_t global = HL_TRISTATE_UNSET;
  hl_setting_source_t source = HL_SETTING_SOURCE_API;
  HL_RETURN_IF_ERROR_PLAIN(hl_get_assume_no_alias(&global, &source));
  if (global != HL_TRISTATE_UNSET) {
    *out_value = global == HL_TRISTATE_TRUE;
    if (out_source) *out_source = source;
  } else {
    *out_value = inv->assume_no_alias;
    if (out_source) *out_source = HL_SETTING_SOURCE_INVOCATION;
  }
  return NULL;
}

const hl_fence_t* hl_invocation_signal_fence(const hl_invocation_t* inv) {
  return inv ? inv->signal_fence : NULL;
}

size_t hl_invocation_result_count(const hl_invocation_t* inv) {
  return inv ? inv->result_count : 0;
}

hl_status_t hl_invocation_take_result(hl_invocation_t* inv, size_t index,
                                      hl_buffer_t** out_buffer) {
  if (!inv || !out_buffer) {
    return HL_MAKE_STATUS(
        HL_STATUS_INVALID_ARGUMENT,
        "hl_invocation_take_result: NULL invocation or out_buffer");
  }
  *out_buffer = NULL;
  if (index >= inv->result_count) {
    return HL_MAKE_STATUS(HL_STATUS_OUT_OF_RANGE,
                          "result %zu of '%s': it has %u results", index,
                          inv->function->name, inv->result_count);
  }
  if (!inv->results[index]) {
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "result %zu of '%s' was already taken", index,
                          inv->function->name);
  }
  *out_buffer = inv->results[index];
  inv->results[index] = NULL;
  return NULL;
}

// The async import's token: when the caller's last view goes, the root is
// freed in queue order on the importing queue after every recorded use.
typedef struct hl_import_token_t {
  hl_buffer_token_t base;
  hl_root_t* root;    // Retained.
  hl_queue_t* queue;  // Retained.
} hl_import_token_t;

// Import tokens are made for every result freed in queue order, and
// invocations for every call (base/recycler.h).
static hl_recycler_t hl_import_token_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_import_token_t), 1024, "an import token");

static void hl_import_token_last_release(hl_buffer_token_t* base) {
  hl_import_token_t* token = (hl_import_token_t*)base;
  hl_root_t* root = token->root;
  // An explicit dealloca by the caller already took care of it.
  if (!atomic_load(&root->dealloca_scheduled) &&
      atomic_load(&root->state) != HL_ROOT_FREED) {
    hl_status_t st = hl_root_dealloca(token->queue, NULL, NULL, root);
    if (st) {
      HL_LOG_WARN(
          "async import of root %llu: dealloca on queue %u failed: %s; "
          "the refcount fallback frees it instead",
          (unsigned long long)root->id, hl_queue_id(token->queue),
          hl_status_message(st));
      hl_status_free(st);
    } else {
      HL_COUNT(root->device, async_deallocs);
    }
  }
  hl_queue_release_internal(token->queue);
  hl_root_release(root);
  hl_recycler_free(&hl_import_token_recycler_, token);
}

static void hl_invocation_warn_alias(hl_invocation_t* inv, hl_root_t* root,
                                     const char* why) {
  bool expected = false;
  if (atomic_compare_exchange_strong(&inv->function->alias_warned, &expected,
                                     true)) {
    HL_LOG_WARN(
        "function '%s' returned root %llu, which %s: imported with the "
        "refcount fallback whatever assume_no_alias says (logged once "
        "per function)",
        inv->function->name, (unsigned long long)root->id, why);
  }
}

// Imports every result root. Results are replaced by views that carry the
// import token when the root is imported async.
static hl_status_t hl_invocation_import(hl_invocation_t* inv, bool no_alias) {
  hl_device_t* device = hl_queue_device(inv->queue);
  uint32_t n = inv->result_count;
  bool done[HL_FUNCTION_MAX_RESULTS] = {false};
  for (uint32_t i = 0; i < n; ++i) {
    if (done[i]) continue;
    hl_root_t* root = inv->results[i]->root;
    // Count the references the results hold on this root: one per distinct
    // buffer object, and each buffer must be held only by the results.
    uint32_t distinct = 0;
    bool buffers_unique = true;
    for (uint32_t j = i; j < n; ++j) {
      if (inv->results[j]->root != root || done[j]) continue;
      done[j] = true;
      bool seen = false;
      for (uint32_t k = i; k < j; ++k)
        seen |= inv->results[k] == inv->results[j];
      if (seen) continue;
      ++distinct;
      uint32_t occurrences = 0;
      for (uint32_t k = j; k < n; ++k)
        occurrences += inv->results[k] == inv->results[j];
      if ((uint32_t)atomic_load(&inv->results[j]->ref_count) != occurrences) {
        buffers_unique = false;
      }
    }
    uint32_t total = 0, ops = 0;
    hl_root_ref_snapshot(root, &total, &ops);
    bool unique = buffers_unique && total - ops == distinct;

    bool is_argument = false;
    for (uint32_t a = 0; a < inv->argument_count; ++a) {
      is_argument |= inv->arguments[a]->root == root;
    }
    hl_buffer_origin_t origin = (hl_buffer_origin_t)atomic_load(&root->origin);
    bool persistent = origin == HL_BUFFER_ORIGIN_PERSISTENT;
    bool eligible = origin == HL_BUFFER_ORIGIN_ASYNC &&
                    root->device == device &&
                    root->affinity_queue == inv->queue;

    // Every view of the root also depends on the invocation's signal. A
    // result the function produced (neither an argument nor a registered
    // global) was last written by this invocation: readers wait on its
    // signal too, so a failed write fails them instead of letting them copy
    // bytes nobody wrote (the queue timepoint of the failed write is reached
    // all the same, it carries no failure).
    bool produced = !is_argument && !persistent;
    hl_spinlock_lock(&root->lock);
    hl_root_note_use_locked(root);
    if (hl_fence_count(root->use_fence) >= 8)
      hl_fence_prune_reached(root->use_fence);
    hl_status_t st = hl_fence_insert(root->use_fence, inv->signal, 1);
    if (!st && produced) {
      if (hl_fence_count(root->mutation_barrier) >= 8)
        hl_fence_prune_reached(root->mutation_barrier);
      st = hl_fence_insert(root->mutation_barrier, inv->signal, 1);
    }
    hl_spinlock_unlock(&root->lock);
    HL_RETURN_IF_ERROR(st, "recording the result's use");

    if (is_argument || persistent) {
      HL_COUNT(device, alias_detected);
      hl_invocation_warn_alias(inv, root,
                               is_argument ? "is also one of its arguments"
                                           : "is registered as a global");
    }
    if (!is_argument && !persistent && eligible && (unique || no_alias)) {
      HL_COUNT(device, async_imports);
      hl_import_token_t* token = NULL;
      HL_RETURN_IF_ERROR(
          hl_recycler_alloc_default(&hl_import_token_recycler_, (void**)&token),
          "an import token");
      atomic_init(&token->base.ref_count, 0);
      token->base.on_last_release = hl_import_token_last_release;
      token->root = root;
      hl_root_retain(root);
      token->queue = inv->queue;
      hl_queue_retain(inv->queue);
      // Replace each result with a view that carries the token; a buffer
      // object listed twice gets one view, listed twice.
      hl_buffer_t* originals[HL_FUNCTION_MAX_RESULTS];
      memcpy(originals, inv->results, sizeof(originals));
      st = NULL;
      for (uint32_t j = i; j < n && !st; ++j) {
        if (originals[j]->root != root) continue;
        hl_buffer_t* view = NULL;
        for (uint32_t k = i; k < j; ++k) {
          if (originals[k] == originals[j]) view = inv->results[k];
        }
        if (view) {
          hl_buffer_retain(view);
        } else {
          st = hl_buffer_create_view(root, originals[j]->offset,
                                     originals[j]->length, &token->base, &view);
        }
        if (!st) inv->results[j] = view;
      }
      for (uint32_t j = i; j < n; ++j) {
        if (originals[j]->root == root && inv->results[j] != originals[j]) {
          hl_buffer_release(originals[j]);
        }
      }
      if (atomic_load(&token->base.ref_count) == 0) {
        // No view was made (allocation failed on the first one).
        token->base.ref_count = 1;
        hl_buffer_token_t* t = &token->base;
        if (atomic_fetch_sub(&t->ref_count, 1) == 1) t->on_last_release(t);
      }
      HL_RETURN_IF_ERROR_PLAIN(st);
    } else {
      HL_TRACE_ZONE_BEGIN(zone, "SyncImportTimelineResource");
      HL_COUNT(device, sync_imports);
      HL_TRACE_ZONE_END(zone);
    }
  }
  return NULL;
}

hl_status_t hl_invocation_invoke(hl_invocation_t* inv) {
  if (!inv) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_invocation_invoke: invocation is NULL");
  }
  hl_function_t* f = inv->function;
  if (inv->invoked) {
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "invocation of '%s' was already invoked", f->name);
  }
  if (inv->argument_count != f->argument_count) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "function '%s' takes %u arguments; %u were added",
                          f->name, f->argument_count, inv->argument_count);
  }
  bool no_alias = true;
  HL_RETURN_IF_ERROR(
      hl_invocation_effective_assume_no_alias(inv, &no_alias, NULL),
      "invoking '%s'", f->name);
  inv->invoked = true;
  hl_device_t* device = hl_queue_device(inv->queue);
  HL_COUNT(device, invocations);
  HL_TRACE_ZONE_BEGIN(zone, "hl_invocation_invoke");

  // Export: reads wait for the last write, writes for every use.
  hl_fence_t* waits = NULL;
  hl_status_t st = hl_fence_create(f->host_allocator, &waits);
  if (!st) st = hl_fence_join(waits, inv->waits);
  for (uint32_t i = 0; i < inv->argument_count && !st; ++i) {
    st = (f->access[i] & HL_ACCESS_WRITE)
             ? hl_buffer_use_fence(inv->arguments[i], waits)
             : hl_buffer_mutation_barrier(inv->arguments[i], waits);
  }
  if (!st) {
    st = f->fn(f->user, inv->queue, inv->arguments, inv->argument_count, waits,
               inv->signal_fence, inv->results, f->result_count);
    inv->result_count = f->result_count;
    if (!st) {
      for (uint32_t i = 0; i < inv->result_count && !st; ++i) {
        if (!inv->results[i]) {
          st = HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                              "function '%s' returned no buffer for result %u",
                              f->name, i);
        } else if (!hl_device_reaches(device,
                                      hl_buffer_device(inv->results[i]))) {
          // A result on a peer is imported sync (not eligible below): its
          // last release frees it on its own device after every use.
          st = HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                              "function '%s' returned result %u on another "
                              "device, which the queue's does not reach",
                              f->name, i);
        }
      }
    }
    if (st) st = hl_status_annotate(st, "function '%s'", f->name);
  }
  hl_fence_release(waits);

  // Export, after: every argument's use now includes the invocation.
  for (uint32_t i = 0; i < inv->argument_count && !st; ++i) {
    hl_root_t* root = inv->arguments[i]->root;
    hl_spinlock_lock(&root->lock);
    hl_root_note_use_locked(root);
    if (hl_fence_count(root->use_fence) >= 8)
      hl_fence_prune_reached(root->use_fence);
    st = hl_fence_insert(root->use_fence, inv->signal, 1);
    if (!st && (f->access[i] & HL_ACCESS_WRITE)) {
      hl_fence_clear(root->mutation_barrier);
      st = hl_fence_insert(root->mutation_barrier, inv->signal, 1);
    }
    hl_spinlock_unlock(&root->lock);
  }
  if (!st) st = hl_invocation_import(inv, no_alias);
  if (st) {
    // Nothing downstream may proceed as if the function succeeded.
    hl_semaphore_fail(inv->signal, hl_status_clone(st));
    for (uint32_t i = 0; i < inv->result_count; ++i) {
      hl_buffer_release(inv->results[i]);
      inv->results[i] = NULL;
    }
    inv->result_count = 0;
  }
  HL_TRACE_ZONE_END(zone);
  return st;
}
