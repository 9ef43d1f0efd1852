// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Loading libamdhip64 and resolving the symbol table.

#include "runtime/backend/hip/dynamic_symbols.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>

// Library names to try, most generic first: the unversioned development
// link, then the ROCm 5 and ROCm 6 sonames.
static const char* const hl_hip_library_names[] = {
    "libamdhip64.so",
    "libamdhip64.so.5",
    "libamdhip64.so.6",
};

// HIP 5.2.0 as hipRuntimeGetVersion encodes it (major * 10^7 + minor *
// 10^5 + patch).
#define HL_HIP_MIN_VERSION 50200000

static hl_hip_runtime_t hl_hip_runtime;
static once_flag hl_hip_runtime_once = ONCE_FLAG_INIT;

// Opens the first library that loads. On failure, records the first dlerror
// (the one for the generic name) in the reason.
static void* hl_hip_runtime_open(hl_hip_runtime_t* runtime) {
  char first_error[160] = "";
  const size_t name_count =
      sizeof(hl_hip_library_names) / sizeof(hl_hip_library_names[0]);
  for (size_t i = 0; i < name_count; ++i) {
    void* handle = dlopen(hl_hip_library_names[i], RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      runtime->library = hl_hip_library_names[i];
      return handle;
    }
    const char* error = dlerror();
    if (!first_error[0]) {
      snprintf(first_error, sizeof(first_error), "%s",
               error ? error : "unknown dlopen error");
    }
  }
  snprintf(runtime->reason, sizeof(runtime->reason),
           "libamdhip64.so not found: %s (also tried libamdhip64.so.5 and "
           "libamdhip64.so.6)",
           first_error);
  return NULL;
}

// Whether a row's KIND makes a missing symbol fatal.
#define HL_HIP_PFN_IS_REQUIRED_REQUIRED 1
#define HL_HIP_PFN_IS_REQUIRED_OPTIONAL 0

// Resolves every row of the table. Returns false and records the reason when
// a required symbol is missing.
static bool hl_hip_runtime_resolve(hl_hip_runtime_t* runtime, void* handle) {
  hl_hip_dynamic_symbols_t* syms = &runtime->syms;
  // dlsym returns an object pointer; copying its bytes into the function
  // pointer is the conversion POSIX guarantees, without a cast ISO C lacks.
#define HL_HIP_PFN(kind, return_type, name, params)                          \
  {                                                                          \
    void* symbol = dlsym(handle, #name);                                     \
    memcpy(&syms->name, &symbol, sizeof(syms->name));                        \
    if (!symbol && HL_HIP_PFN_IS_REQUIRED_##kind) {                          \
      snprintf(runtime->reason, sizeof(runtime->reason),                     \
               "%s lacks the required symbol %s (ROCm 5.2 or later needed)", \
               runtime->library, #name);                                     \
      return false;                                                          \
    }                                                                        \
  }
#include "runtime/backend/hip/dynamic_symbol_table.h"
#undef HL_HIP_PFN
  return true;
}

static const char* hl_hip_runtime_error_name(const hl_hip_runtime_t* runtime,
                                             hipError_t error) {
  const char* name = runtime->syms.hipGetErrorName(error);
  return name && name[0] ? name : "unnamed HIP error";
}

static void hl_hip_runtime_load(void) {
  hl_hip_runtime_t* runtime = &hl_hip_runtime;
  memset(runtime, 0, sizeof(*runtime));
  runtime->library = "";
  void* handle = hl_hip_runtime_open(runtime);
  if (!handle) return;
  if (!hl_hip_runtime_resolve(runtime, handle)) return;
  runtime->symbols_loaded = true;

  // Name the library and, when it says, its version in every reason.
  char origin[96];
  int version = 0;
  if (runtime->syms.hipRuntimeGetVersion &&
      runtime->syms.hipRuntimeGetVersion(&version) == hipSuccess &&
      version > 0) {
    // HIP encodes major * 10^7 + minor * 10^5 + patch.
    snprintf(origin, sizeof(origin), "%s (HIP %d.%d.%d)", runtime->library,
             version / 10000000, (version / 100000) % 100, version % 100000);
  } else {
    snprintf(origin, sizeof(origin), "%s", runtime->library);
  }

  // The supported range: ROCm 5.2 (the first to export the stream-ordered
  // allocator) and later. A library that reports an older version is
  // refused even when it happens to export every symbol.
  if (version > 0 && version < HL_HIP_MIN_VERSION) {
    snprintf(runtime->reason, sizeof(runtime->reason),
             "%s is older than the supported range: ROCm 5.2 or later "
             "needed",
             origin);
    return;
  }

  // hipGetDeviceCount is asked even when hipInit fails: its answer
  // (hipErrorNoDevice on a machine without a GPU) says more than hipInit's.
  hipError_t init_error = runtime->syms.hipInit(0);
  int count = 0;
  hipError_t count_error = runtime->syms.hipGetDeviceCount(&count);
  if (count_error != hipSuccess) {
    int n = snprintf(runtime->reason, sizeof(runtime->reason),
                     "%s: hipGetDeviceCount failed: %s", origin,
                     hl_hip_runtime_error_name(runtime, count_error));
    if (init_error != hipSuccess && n > 0 &&
        (size_t)n < sizeof(runtime->reason)) {
      snprintf(runtime->reason + n, sizeof(runtime->reason) - (size_t)n,
               " (hipInit(0) failed: %s)",
               hl_hip_runtime_error_name(runtime, init_error));
    }
    return;
  }
  if (init_error != hipSuccess) {
    snprintf(runtime->reason, sizeof(runtime->reason),
             "%s: hipInit(0) failed: %s", origin,
             hl_hip_runtime_error_name(runtime, init_error));
    return;
  }
  if (count <= 0) {
    snprintf(runtime->reason, sizeof(runtime->reason),
             "%s: hipGetDeviceCount reported no devices", origin);
    return;
  }
  runtime->device_count = count;
  runtime->available = true;
}

const hl_hip_runtime_t* hl_hip_runtime_get(void) {
  call_once(&hl_hip_runtime_once, hl_hip_runtime_load);
  return &hl_hip_runtime;
}
