// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The hip backend's modules and kernels.

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>

#include "runtime/backend/backend.h"
#include "runtime/backend/hip/dynamic_symbols.h"
#include "runtime/backend/hip/hip_internal.h"
#include "runtime/backend/hip/size_map.h"
#include "runtime/backend/hip/status_util.h"
#include "runtime/base/log.h"

//===----------------------------------------------------------------------===//
// Modules and kernels
//===----------------------------------------------------------------------===//

hl_status_t hl_hip_module_load_on_device(hl_backend_t* base, const void* image,
                                         size_t size,
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

void hl_hip_module_unload(hl_backend_t* base, hl_backend_module_t* module) {
  if (!module) return;
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hl_hip_log_and_ignore(HL_HIP_RESULT_TO_STATUS(
                            backend->syms, hipModuleUnload((hipModule_t)module),
                            "hipModuleUnload(module %p)", (void*)module),
                        "module_unload");
  atomic_fetch_sub(&backend->live_modules, 1);
}

hl_status_t hl_hip_module_get_function_on_device(
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

hl_status_t hl_hip_launch_kernel(hl_backend_t* base,
                                 hl_backend_function_t* function,
                                 const hl_launch_config_t* config,
                                 void** params, hl_backend_stream_t* stream) {
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
