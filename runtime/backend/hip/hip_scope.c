// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The hip backend's device scope (hip_internal.h): the entry points that
// create or look up HIP objects run on the backend's device and give the
// caller's device back; and the backend's symbol table for hip_graph.c.

#include "runtime/backend/hip/hip_graph.h"
#include "runtime/backend/hip/hip_internal.h"

// Makes the backend's device current on the calling thread.
static hl_status_t hl_hip_backend_make_current(hl_hip_backend_t* backend) {
  return HL_HIP_RESULT_TO_STATUS(backend->syms, hipSetDevice(backend->ordinal),
                                 "hipSetDevice(%d)", backend->ordinal);
}

hl_status_t hl_hip_scope_enter(hl_hip_backend_t* backend,
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

void hl_hip_scope_exit(hl_hip_backend_t* backend,
                       const hl_hip_device_scope_t* scope) {
  if (!scope->changed) return;
  hipError_t error = backend->syms->hipSetDevice(scope->previous);
  if (error != hipSuccess) {
    HL_LOG_ERROR("hip backend: restoring the caller's device %d: %s",
                 scope->previous, backend->syms->hipGetErrorName(error));
  }
}

const hl_hip_dynamic_symbols_t* hl_hip_backend_symbols(hl_backend_t* base) {
  return hl_hip_backend_cast(base)->syms;
}
