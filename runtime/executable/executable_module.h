// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A kernel module loaded on one backend: the registry's code object for the
// backend's target, with every kernel of kernels/kernel_table.h resolved.
//
// This is what the dispatch layer launches through. Every backend gets the
// code object that hl_executable_match_target picks for its target id among
// the registry's (hl_executable_registry_target): a GPU one of the embedded
// code objects, the host backend (target "host") the host code object.
#ifndef HIPLINE_RUNTIME_EXECUTABLE_EXECUTABLE_MODULE_H_
#define HIPLINE_RUNTIME_EXECUTABLE_EXECUTABLE_MODULE_H_

#include "hipline/executable.h"
#include "kernels/kernel_table.h"
#include "runtime/backend/backend.h"

typedef struct hl_executable_module_t {
  hl_backend_t* backend;        // Borrowed; must outlive the module.
  hl_backend_module_t* module;  // Owned; unloaded by _deinitialize.
  // The code object's target ("host", "gfx90a", ...); static storage.
  const char* target;
  // Functions owned by |module|, indexed by hl_kernel_id_t.
  hl_backend_function_t* functions[HL_KERNEL_COUNT];
} hl_executable_module_t;

// Returns the id of the kernel named |name| in kernel_table.h, or
// HL_KERNEL_COUNT when there is none.
hl_kernel_id_t hl_kernel_id_from_name(const char* name);

// Returns the name of kernel |id| (static storage), or NULL when out of
// range.
const char* hl_kernel_name(hl_kernel_id_t id);

// Loads the code object for |backend| and resolves every kernel. The target
// is |device_target| when not NULL, else the backend's reported target
// (query_properties); "host" selects the host code object, as a GPU target
// id selects its GPU code object. NOT_FOUND names the target
// and the built ones when the library has no code object for it; a backend
// failure is returned with the target added. On failure nothing stays
// loaded. Not thread-safe on one |out_module|.
hl_status_t hl_executable_module_initialize(hl_backend_t* backend,
                                            const char* device_target,
                                            hl_executable_module_t* out_module);

// Unloads |module| (its functions become invalid). Accepts a zeroed struct.
void hl_executable_module_deinitialize(hl_executable_module_t* module);

// Returns the function for kernel |name| in |*out_function| (owned by the
// module). NOT_FOUND names |name| and the module's target.
hl_status_t hl_executable_module_lookup(const hl_executable_module_t* module,
                                        const char* name,
                                        hl_backend_function_t** out_function);

#endif  // HIPLINE_RUNTIME_EXECUTABLE_EXECUTABLE_MODULE_H_
