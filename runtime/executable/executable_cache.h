// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The per-device cache of loaded kernel modules.
//
// Each device gets its kernel module (executable_module.h) on first use and
// keeps it until the device is destroyed. The code object is *selected* once
// per group of devices with equal target ids (hl_executable_group_targets'
// rule): the first device of a target matches it against the registry, and
// every later device of an equal target reuses that choice; the module is
// then *loaded* per device, since a module belongs to one backend object.
//
// The device struct has no slot for this state, so the cache is a
// process-wide table keyed by device, and the device must tell it when it
// goes: hl_device_destroy calls hl_executable_device_destroy before it
// destroys the backend.
#ifndef HIPLINE_RUNTIME_EXECUTABLE_EXECUTABLE_CACHE_H_
#define HIPLINE_RUNTIME_EXECUTABLE_EXECUTABLE_CACHE_H_

#include <stdint.h>

#include "runtime/executable/executable_module.h"
#include "runtime/timeline/timeline_internal.h"

// Returns |device|'s kernel module in |*out_module|, loading it on the first
// call (borrowed; valid until hl_executable_device_destroy). Thread-safe;
// concurrent first calls load once. Must not be called from a stream
// callback (it may call into the backend). A device without a code object
// for its target gets NOT_FOUND naming the target and the built targets;
// the failure is not cached for the device, so a later call tries again
// (the group's selection, a pure function of the target, is cached).
hl_status_t hl_executable_device_module(
    hl_device_t* device, const hl_executable_module_t** out_module);

// Unloads |device|'s module, if one was loaded, and forgets the device.
// Called by hl_device_destroy once no queue of |device| is left and before
// the backend is destroyed. Safe for devices that never dispatched.
void hl_executable_device_destroy(hl_device_t* device);

// Diagnostics, for tests and tools.
typedef struct hl_executable_cache_stats_t {
  uint64_t module_loads;    // Successful module loads, process lifetime.
  uint64_t module_unloads;  // By hl_executable_device_destroy.
  uint64_t selections;      // Target matches computed (one per group).
  uint32_t devices;         // Devices with a cache entry now.
  uint32_t groups;          // Distinct canonical targets seen.
} hl_executable_cache_stats_t;
void hl_executable_cache_stats(hl_executable_cache_stats_t* out_stats);

// The group id of |device| (groups are numbered 0, 1, ... in the order their
// first device was seen by the cache, process-wide) in |*out_group|, and the
// registry target its code object was selected for in |*out_target| (static
// storage). Selects (but does not load) when the device has not dispatched
// yet. NOT_FOUND as for hl_executable_device_module.
hl_status_t hl_executable_device_group(hl_device_t* device, uint32_t* out_group,
                                       const char** out_target);

#endif  // HIPLINE_RUNTIME_EXECUTABLE_EXECUTABLE_CACHE_H_
