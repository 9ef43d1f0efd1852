// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The per-device module cache (see executable_cache.h).
//
// Locking: |hl_cache_| (one process-wide mutex) guards the device list, the
// group table and the counters. Loading a module can take milliseconds on a
// GPU, so it runs under the entry's own mutex instead: devices load in
// parallel, and concurrent first dispatches on one device load once. An
// entry is unlinked and freed only by hl_executable_device_destroy, when no
// one can dispatch on the device any more, so a pointer to it taken under
// the list lock stays valid for the caller.
#include "runtime/executable/executable_cache.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "hipline/executable.h"

// Distinct target ids one process can meet; a machine has a handful.
#define HL_EXECUTABLE_MAX_GROUPS 64

// One group: every device whose target id canonicalizes to |canonical|.
typedef struct hl_executable_group_t {
  char canonical[HL_TARGET_ID_MAX];
  // The registry target (hl_executable_registry_target index) selected for
  // the group, when |matched|; otherwise the registry has none.
  bool matched;
  size_t registry_index;
} hl_executable_group_t;

typedef struct hl_executable_entry_t {
  struct hl_executable_entry_t* next;
  hl_device_t* device;  // Not retained: the device destroys the entry.
  mtx_t load_mutex;
  // Guarded by |load_mutex|.
  bool has_group;
  uint32_t group;
  hl_executable_module_t module;
  // Set (release) once |module| is loaded; read without the lock.
  atomic_bool loaded;
} hl_executable_entry_t;

static struct {
  mtx_t mutex;
  hl_executable_entry_t* entries;
  uint32_t entry_count;
  hl_executable_group_t groups[HL_EXECUTABLE_MAX_GROUPS];
  uint32_t group_count;
  uint64_t module_loads;
  uint64_t module_unloads;
  uint64_t selections;
} hl_cache_;
static once_flag hl_cache_once_ = ONCE_FLAG_INIT;

static void hl_cache_init(void) { mtx_init(&hl_cache_.mutex, mtx_plain); }

static void hl_cache_lock(void) {
  call_once(&hl_cache_once_, hl_cache_init);
  mtx_lock(&hl_cache_.mutex);
}

static void hl_cache_unlock(void) { mtx_unlock(&hl_cache_.mutex); }

// Matches |canonical| against the registry (every embedded GPU target, then
// "host").
static hl_status_t hl_cache_match(const char* canonical, size_t* out_index) {
  const char* targets[HL_EXECUTABLE_MAX_GROUPS + 1];
  size_t count = hl_executable_registry_target_count();
  if (count > sizeof(targets) / sizeof(targets[0])) {
    return HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                          "the registry lists %zu targets; at most %zu fit",
                          count, sizeof(targets) / sizeof(targets[0]));
  }
  for (size_t i = 0; i < count; ++i) {
    targets[i] = hl_executable_registry_target(i);
  }
  return hl_executable_match_target(canonical, targets, count, out_index);
}

// Finds or creates the group of |device_target| and selects its code object
// the first time. Returns the matching failure for a group without one.
// Cache lock held.
static hl_status_t hl_cache_select_locked(const char* device_target,
                                          uint32_t* out_group) {
  char canonical[HL_TARGET_ID_MAX];
  HL_RETURN_IF_ERROR(
      hl_target_id_canonicalize(device_target, canonical, sizeof(canonical)),
      "device target");
  uint32_t group = 0;
  while (group < hl_cache_.group_count &&
         strcmp(hl_cache_.groups[group].canonical, canonical) != 0) {
    ++group;
  }
  if (group == hl_cache_.group_count) {
    if (group == HL_EXECUTABLE_MAX_GROUPS) {
      return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                            "device target '%s' would be distinct target %d "
                            "in this process; at most %d are supported",
                            canonical, HL_EXECUTABLE_MAX_GROUPS + 1,
                            HL_EXECUTABLE_MAX_GROUPS);
    }
    hl_executable_group_t* g = &hl_cache_.groups[group];
    memcpy(g->canonical, canonical, sizeof(canonical));
    hl_status_t st = hl_cache_match(canonical, &g->registry_index);
    ++hl_cache_.selections;
    if (st && hl_status_code(st) != HL_STATUS_NOT_FOUND) return st;
    // A target without a code object is a group too: the answer is cached.
    g->matched = st == NULL;
    hl_status_free(st);
    ++hl_cache_.group_count;
  }
  *out_group = group;
  if (!hl_cache_.groups[group].matched) {
    // Only the failure path matches again, to rebuild the message.
    size_t unused = 0;
    hl_status_t st = hl_cache_match(canonical, &unused);
    if (!st) {
      st = HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                          "target '%s' matched on a second try", canonical);
    }
    return st;
  }
  return NULL;
}

// The device's extension slot destroy hook (the state lives in the list).
static void hl_executable_extension_destroy(hl_device_t* device, void* state) {
  (void)state;
  hl_executable_device_destroy(device);
}

// Returns |device|'s entry, creating it. Never NULL on success.
static hl_status_t hl_cache_entry(hl_device_t* device,
                                  hl_executable_entry_t** out_entry) {
  hl_cache_lock();
  hl_executable_entry_t* entry = hl_cache_.entries;
  while (entry && entry->device != device) entry = entry->next;
  if (!entry) {
    entry = calloc(1, sizeof(*entry));
    if (!entry || mtx_init(&entry->load_mutex, mtx_plain) != thrd_success) {
      hl_cache_unlock();
      free(entry);
      return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                            "allocating the kernel module entry of device %s",
                            device->props.name);
    }
    entry->device = device;
    hl_device_extension_install(device, HL_DEVICE_EXTENSION_EXECUTABLE, NULL,
                                hl_executable_extension_destroy);
    atomic_init(&entry->loaded, false);
    entry->next = hl_cache_.entries;
    hl_cache_.entries = entry;
    ++hl_cache_.entry_count;
  }
  hl_cache_unlock();
  *out_entry = entry;
  return NULL;
}

// Selects the entry's group once. Entry load mutex held.
static hl_status_t hl_cache_entry_select(hl_executable_entry_t* entry) {
  if (entry->has_group) return NULL;
  hl_cache_lock();
  hl_status_t st =
      hl_cache_select_locked(entry->device->props.target, &entry->group);
  hl_cache_unlock();
  HL_RETURN_IF_ERROR(st, "selecting the code object of device %d (%s)",
                     entry->device->props.ordinal, entry->device->props.name);
  entry->has_group = true;
  return NULL;
}

hl_status_t hl_executable_device_module(
    hl_device_t* device, const hl_executable_module_t** out_module) {
  hl_executable_entry_t* entry = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_cache_entry(device, &entry));
  if (HL_LIKELY(atomic_load_explicit(&entry->loaded, memory_order_acquire))) {
    *out_module = &entry->module;
    return NULL;
  }
  mtx_lock(&entry->load_mutex);
  hl_status_t st = NULL;
  if (!atomic_load_explicit(&entry->loaded, memory_order_relaxed)) {
    st = hl_cache_entry_select(entry);
    if (!st) {
      // Every device loads its group's selection ("host" for the host
      // backend): passing the selected target makes the module's own
      // matching an exact match, so the choice is not redone.
      hl_cache_lock();
      const char* selected = hl_executable_registry_target(
          hl_cache_.groups[entry->group].registry_index);
      hl_cache_unlock();
      st = hl_executable_module_initialize(device->backend, selected,
                                           &entry->module);
      if (st) {
        st = hl_status_annotate(st, "device %d (%s, target %s)",
                                device->props.ordinal, device->props.name,
                                device->props.target);
      }
    }
    if (!st) {
      hl_cache_lock();
      ++hl_cache_.module_loads;
      hl_cache_unlock();
      atomic_store_explicit(&entry->loaded, true, memory_order_release);
    }
  }
  mtx_unlock(&entry->load_mutex);
  if (!st) *out_module = &entry->module;
  return st;
}

void hl_executable_device_destroy(hl_device_t* device) {
  if (!device) return;
  hl_cache_lock();
  hl_executable_entry_t** link = &hl_cache_.entries;
  while (*link && (*link)->device != device) link = &(*link)->next;
  hl_executable_entry_t* entry = *link;
  if (entry) {
    *link = entry->next;
    --hl_cache_.entry_count;
    if (atomic_load(&entry->loaded)) ++hl_cache_.module_unloads;
  }
  hl_cache_unlock();
  if (!entry) return;
  if (atomic_load(&entry->loaded)) {
    hl_executable_module_deinitialize(&entry->module);
  }
  mtx_destroy(&entry->load_mutex);
  free(entry);
}

void hl_executable_cache_stats(hl_executable_cache_stats_t* out_stats) {
  hl_cache_lock();
  out_stats->module_loads = hl_cache_.module_loads;
  out_stats->module_unloads = hl_cache_.module_unloads;
  out_stats->selections = hl_cache_.selections;
  out_stats->devices = hl_cache_.entry_count;
  out_stats->groups = hl_cache_.group_count;
  hl_cache_unlock();
}

hl_status_t hl_executable_device_group(hl_device_t* device, uint32_t* out_group,
                                       const char** out_target) {
  hl_executable_entry_t* entry = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_cache_entry(device, &entry));
  mtx_lock(&entry->load_mutex);
  hl_status_t st = hl_cache_entry_select(entry);
  uint32_t group = entry->group;
  mtx_unlock(&entry->load_mutex);
  HL_RETURN_IF_ERROR_PLAIN(st);
  hl_cache_lock();
  *out_target =
      hl_executable_registry_target(hl_cache_.groups[group].registry_index);
  hl_cache_unlock();
  *out_group = group;
  return NULL;
}
