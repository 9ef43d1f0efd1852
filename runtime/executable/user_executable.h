// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Internals of user executables (hipline/executable.h, "User executables")
// shared with the dispatch path (dispatch_call.c), and the built-in executable.
#ifndef HIPLINE_RUNTIME_EXECUTABLE_USER_EXECUTABLE_H_
#define HIPLINE_RUNTIME_EXECUTABLE_USER_EXECUTABLE_H_

#include "hipline/executable.h"
#include "kernels/kernel_table.h"
#include "runtime/backend/backend.h"
#include "runtime/executable/code_object.h"

// What a dispatch needs to launch one kernel of an executable on one
// device. Everything is owned by the executable (the built-in one: by the
// device's module, kept until the device goes) and valid while the caller
// holds a reference to it.
typedef struct hl_executable_kernel_t {
  const hl_kernel_signature_t* signature;
  hl_backend_function_t* function;  // The device module's function.
  // Host objects: the kernel's entry, launched through |function| (the
  // host backend's trampoline); NULL for GPU objects.
  hl_host_kernel_entry_t host_entry;
  const char* target;  // The object's canonical target.
  // A kernel of the built-in executable: its id (its arguments are checked
  // against kernels/kernel_table.h); HL_KERNEL_COUNT for user kernels.
  hl_kernel_id_t builtin;
} hl_executable_kernel_t;

// hl_executable_release where the reference is not the last one: returns
// false, changing nothing, when it is (for hl_op_vtable_t.release_light,
// which must not unload modules).
bool hl_executable_release_unless_last(hl_executable_t* executable);

// True for hl_executable_builtin().
bool hl_executable_is_builtin(const hl_executable_t* executable);

// Selects |device|'s object, loads it on |device| on first use and resolves
// kernel |name| there. NOT_FOUND for a device without a compatible object
// (listing the targets offered and the device's) or a kernel the object
// lacks (listing its kernels). The built-in executable takes its module
// from the device's module cache (executable_cache.h). Thread-safe; must not
// run on a stream callback (it may call into the backend).
hl_status_t hl_executable_kernel_resolve(hl_executable_t* executable,
                                         hl_device_t* device, const char* name,
                                         hl_executable_kernel_t* out_kernel);

// The host backend's trampoline for host objects: a host code object with
// one kernel of two pointer-sized parameters, the hl_host_kernel_entry_t and
// the kernarg segment.
extern const hl_host_code_object_t hl_user_host_trampoline_object;

#endif  // HIPLINE_RUNTIME_EXECUTABLE_USER_EXECUTABLE_H_
