// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The HIP runtime, loaded at run time: libamdhip64 is opened with dlopen and
// every entry point in dynamic_symbol_table.h is resolved once per process.
// A build never links against ROCm, so it works on machines without it.
#ifndef HIPLINE_RUNTIME_BACKEND_HIP_DYNAMIC_SYMBOLS_H_
#define HIPLINE_RUNTIME_BACKEND_HIP_DYNAMIC_SYMBOLS_H_

#include <stdbool.h>

#include "runtime/backend/hip/hip_types.h"

// Function pointers for every row of the table. Required ones are non-NULL
// once loading succeeded; optional ones may be NULL.
typedef struct hl_hip_dynamic_symbols_t {
#define HL_HIP_PFN(kind, return_type, name, params) return_type(*name) params;
#include "runtime/backend/hip/dynamic_symbol_table.h"
#undef HL_HIP_PFN
} hl_hip_dynamic_symbols_t;

// The outcome of loading and initializing the runtime, computed once.
typedef struct hl_hip_runtime_t {
  // True when the library loaded, every required symbol resolved, hipInit
  // succeeded and at least one device exists.
  bool available;
  int device_count;
  // The library name that dlopen accepted ("" when none did); static.
  const char* library;
  // Why the runtime is unavailable, or "" when it is available. Examples:
  // "libamdhip64.so not found: <dlerror>" and
  // "libamdhip64.so (HIP 5.2.21153): hipGetDeviceCount failed:
  // hipErrorNoDevice (hipInit(0) failed: hipErrorInvalidDevice)".
  char reason[256];
  // Valid when the library loaded and the required symbols resolved (even
  // when no device exists), so callers can name errors.
  bool symbols_loaded;
  hl_hip_dynamic_symbols_t syms;
} hl_hip_runtime_t;

// Loads the library, resolves the table, calls hipInit(0) and counts
// devices, all on the first call only (thread-safe). Never fails: the result
// records why the runtime is unavailable. The returned object lives for the
// rest of the process; the library is never unloaded.
const hl_hip_runtime_t* hl_hip_runtime_get(void);

#endif  // HIPLINE_RUNTIME_BACKEND_HIP_DYNAMIC_SYMBOLS_H_
