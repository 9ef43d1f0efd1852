// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The built-in kernels (kernels/kernel_table.h) as the dispatch path sees
// them. Beyond its size, each parameter has a description the metadata of
// a code object does not carry: the access the kernel needs, whether a NULL
// buffer is allowed, the alignment, and how many bytes the kernel touches
// (from its size parameters). hl_builtin_kernel_validate checks a dispatch
// against it. Each kernel also has a signature in the form user code
// objects' metadata takes (hl_kernel_signature_t: one 8-byte kernarg slot
// per parameter, no hidden arguments), so that built-in and user dispatches
// lay out and launch the same way (dispatch_call.h).
#ifndef HIPLINE_RUNTIME_EXECUTABLE_BUILTIN_KERNELS_H_
#define HIPLINE_RUNTIME_EXECUTABLE_BUILTIN_KERNELS_H_

#include "hipline/dispatch.h"
#include "kernels/kernel_table.h"
#include "runtime/executable/code_object.h"

// Finds built-in kernel |name|. NOT_FOUND names the kernels there are.
hl_status_t hl_builtin_kernel_lookup(const char* name, hl_kernel_id_t* out_id);

// The signature of built-in kernel |id| (static storage). Thread-safe.
const hl_kernel_signature_t* hl_builtin_kernel_signature(hl_kernel_id_t id);

// Validates the |arg_count| arguments of a dispatch of built-in kernel |id|
// as hipline/dispatch.h documents for hl_queue_dispatch: INVALID_ARGUMENT or
// OUT_OF_RANGE naming the parameter (index and name). |owner| names what the
// work is recorded for in messages ("queue 3", "command buffer 2"); buffers
// must belong to |device|, or with |peers| to a device it reaches
// (hipline/device.h). Writes the bytes the kernel touches through each
// parameter to |out_extents| (0 for scalars and NULL buffers).
hl_status_t hl_builtin_kernel_validate(hl_kernel_id_t id, hl_device_t* device,
                                       const char* owner, bool peers,
                                       size_t arg_count,
                                       const hl_kernel_arg_t* args,
                                       uint64_t* out_extents);

#endif  // HIPLINE_RUNTIME_EXECUTABLE_BUILTIN_KERNELS_H_
