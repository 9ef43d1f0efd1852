// Internals of kernel dispatch shared with the layers above (command
// buffers): a validated, ready-to-run dispatch that is not tied to a queue
// submission.
#ifndef HIPLINE_RUNTIME_EXECUTABLE_DISPATCH_INTERNAL_H_
#define HIPLINE_RUNTIME_EXECUTABLE_DISPATCH_INTERNAL_H_

#include "hipline/dispatch.h"
#include "kernels/kernel_table.h"
#include "runtime/timeline/stream_work.h"

// A root of the memory layer (memory_internal.h); a call only points at it.
typedef struct hl_root_t hl_root_t;

typedef struct hl_dispatch_call_t {
  const char* kernel_name;  // Static storage.
  uint32_t param_count;
  hl_backend_function_t* function;  // Owned by the device's module.
  hl_launch_config_t config;
  // Per parameter. Pointers: the bound root (NULL for scalars and NULL
  // pointers; not retained by the call), its offset from the root's start,
  // the declared range length and access, and the bytes the kernel touches
  // (from its size parameters). Scalars: their value in |scalars|.
  hl_root_t* roots[HL_KERNEL_MAX_PARAMS];
  uint64_t offsets[HL_KERNEL_MAX_PARAMS];
  uint64_t lengths[HL_KERNEL_MAX_PARAMS];
  hl_access_t access[HL_KERNEL_MAX_PARAMS];
  uint64_t extents[HL_KERNEL_MAX_PARAMS];
  uint64_t scalars[HL_KERNEL_MAX_PARAMS];
  const char* param_names[HL_KERNEL_MAX_PARAMS];  // Static storage.
} hl_dispatch_call_t;

// Validates a dispatch of |kernel_name| exactly as hl_queue_dispatch does
// (|owner| names the recorder in messages, e.g. "command buffer 3") and
// loads |device|'s module. Retains nothing.
hl_status_t hl_dispatch_call_init(hl_device_t* device, const char* owner,
                                  const char* kernel_name,
                                  const hl_dispatch_config_t* config,
                                  size_t arg_count, const hl_kernel_arg_t* args,
                                  hl_dispatch_call_t* out_call);

// Launches |call| on |stream| through the backend's launch_kernel. The
// caller has checked that every bound root is live; it runs as stream work
// (hl_stream_work_issue), so |stream| is the stream it runs for.
hl_status_t hl_dispatch_call_launch(hl_backend_t* backend,
                                    const hl_dispatch_call_t* call,
                                    hl_backend_stream_t* stream);

#endif  // HIPLINE_RUNTIME_EXECUTABLE_DISPATCH_INTERNAL_H_
