// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A dispatch call: one validated, ready-to-launch dispatch of one kernel of
// an executable, not tied to a queue submission. It is the one form every
// dispatch takes: hl_queue_dispatch (the built-in executable),
// hl_queue_dispatch_executable and the dispatches command buffers record
// are all built by hl_dispatch_call_initialize and launched by
// hl_dispatch_call_launch, so validation, the kernarg layout, the launch
// and the messages are the same everywhere.
//
// The arguments are laid out as the kernel's signature says (a user
// object's metadata; for built-in kernels builtin_kernels.h): scalars and
// hidden arguments into a kernarg template at initialize, buffer pointers
// at launch, from the roots' addresses (a root's memory may come later than
// the recording). A GPU kernel is launched with kernelParams pointing into
// the segment (the HIP runtime lays out and fills the hidden arguments
// itself); a host object's kernel through the host backend's trampoline
// with the segment's address.
#ifndef HIPLINE_RUNTIME_EXECUTABLE_DISPATCH_CALL_H_
#define HIPLINE_RUNTIME_EXECUTABLE_DISPATCH_CALL_H_

#include <stdalign.h>

#include "hipline/dispatch.h"
#include "kernels/kernel_table.h"
#include "runtime/executable/user_executable.h"
#include "runtime/timeline/stream_work.h"

// A root of the memory layer (memory_internal.h); a call only points at it.
typedef struct hl_root_t hl_root_t;

// One explicit argument of a call.
typedef struct hl_dispatch_binding_t {
  hl_root_t* root;  // NULL for scalars and NULL buffers; not retained.
  uint64_t offset;  // Of the declared range, from the root's start.
  uint64_t length;  // Of the declared range.
  // The bytes the kernel touches from |offset|: built-in kernels derive it
  // from their size parameters; for user kernels it is |length|.
  uint64_t extent;
  hl_access_t access;
} hl_dispatch_binding_t;

// Arguments and kernarg bytes a call holds without allocating: enough for
// the built-in kernels (one 8-byte slot per parameter), whose dispatch ops
// are recycled and zeroed whole, so a larger inline area costs every
// built-in dispatch. Larger signatures take one allocation.
#define HL_DISPATCH_INLINE_ARGS HL_KERNEL_MAX_PARAMS
#define HL_DISPATCH_INLINE_KERNARG (8 * HL_KERNEL_MAX_PARAMS)

typedef struct hl_dispatch_call_t {
  hl_executable_t* executable;  // Retained.
  hl_executable_kernel_t kernel;
  hl_launch_config_t config;
  uint32_t arg_count;               // Explicit arguments.
  uint32_t kernarg_size;            // Bytes of |kernarg|: a multiple of 16.
  hl_dispatch_binding_t* bindings;  // |arg_count| entries.
  // The kernarg template: scalars and hidden arguments laid out, pointer
  // slots zero. 16-byte aligned.
  unsigned char* kernarg;
  void* heap;  // |bindings| and |kernarg| when they do not fit inline.
  hl_dispatch_binding_t inline_bindings[HL_DISPATCH_INLINE_ARGS];
  alignas(16) unsigned char inline_kernarg[HL_DISPATCH_INLINE_KERNARG];
} hl_dispatch_call_t;

// Validates a dispatch of |kernel_name| of |executable| on |device| and
// initializes |call| (in place: it must not move while initialized). The
// built-in executable's arguments are checked against the kernel table
// (builtin_kernels.h), a user kernel's against its signature (count, kind,
// scalar size, access, device, range; INVALID_ARGUMENT, OUT_OF_RANGE or
// UNIMPLEMENTED naming the argument); then the device's object is selected
// and loaded (NOT_FOUND). |owner| names what the work is recorded for in
// messages ("queue 3", "command buffer 2"). With |peers| (a queue's
// dispatch) a buffer may belong to a device |device| reaches
// (hipline/device.h); without (command buffers), to |device| only. Retains
// |executable|, no buffer. On failure |call| holds nothing.
hl_status_t hl_dispatch_call_initialize(hl_dispatch_call_t* call,
                                        hl_device_t* device, const char* owner,
                                        bool peers, hl_executable_t* executable,
                                        const char* kernel_name,
                                        const hl_dispatch_config_t* config,
                                        size_t arg_count,
                                        const hl_kernel_arg_t* args);

// Releases what |call| holds. Accepts a zeroed call.
void hl_dispatch_call_deinitialize(hl_dispatch_call_t* call);

// The word messages use for the call's arguments: "parameter" for built-in
// kernels (as kernel_table.h calls them), "argument" for user kernels (as
// the AMDGPU metadata does).
const char* hl_dispatch_call_arg_word(const hl_dispatch_call_t* call);

// Launches |call| on |stream| through the backend's launch_kernel, with
// |kernarg| (|call->kernarg_size| bytes, 16-byte aligned; may be
// |call->kernarg|) as the segment: the template is copied there unless it
// is the template, and each bound root's current address plus offset is
// written to its slot. |kernarg| must stay valid until the kernel has run
// (a host object reads it then). The caller has checked that every bound
// root is live; it runs as stream work (hl_stream_work_issue).
hl_status_t hl_dispatch_call_launch(hl_backend_t* backend,
                                    const hl_dispatch_call_t* call,
                                    unsigned char* kernarg,
                                    hl_backend_stream_t* stream);

#endif  // HIPLINE_RUNTIME_EXECUTABLE_DISPATCH_CALL_H_
