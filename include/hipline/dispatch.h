// Kernel dispatch on queues, and the kernel-backed functions.
//
// A dispatch launches one of hipline's kernels (see kernels/kernel_table.h:
// fill_pattern, verify_pattern, copy, spin, axpy) on a queue after a wait
// fence, then signals a signal fence. Buffer arguments are declared as
// bindings with their access: they are retained until the work completes,
// recorded in their roots' timeline resources (reads in the use fence,
// writes also in the mutation barrier), and checked for use-after-free when
// the work runs on the host backend (and failing the queue in checked mode).
// The device's code object is loaded on first dispatch (executable registry:
// matched by target id, selected once per group of equal targets).
#ifndef HIPLINE_DISPATCH_H_
#define HIPLINE_DISPATCH_H_

#include <stdint.h>

#include "hipline/invocation.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hl_kernel_arg_kind_e {
  HL_KERNEL_ARG_BUFFER = 0,  // The device address of buffer+offset.
  HL_KERNEL_ARG_SCALAR = 1,  // |size| bytes (1..8) of |scalar|.
} hl_kernel_arg_kind_t;

typedef struct hl_kernel_arg_t {
  hl_kernel_arg_kind_t kind;
  // HL_KERNEL_ARG_BUFFER: the kernel touches [offset, offset+length) of
  // |buffer| with |access|.
  hl_buffer_t* buffer;
  uint64_t offset;
  uint64_t length;
  hl_access_t access;
  // HL_KERNEL_ARG_SCALAR: the value, little-endian in the low |size| bytes.
  uint64_t scalar;
  uint32_t size;
} hl_kernel_arg_t;

typedef struct hl_dispatch_config_t {
  uint32_t grid[3];   // Blocks; 0 entries count as 1.
  uint32_t block[3];  // Threads per block; 0 entries count as 1.
  uint32_t shared_bytes;
} hl_dispatch_config_t;

// Launches kernel |kernel_name| with |arg_count| arguments in the kernel's
// parameter order. Unknown kernels are NOT_FOUND; arguments that do not
// match the kernel's parameter list (count, or scalar sizes) are
// INVALID_ARGUMENT naming the parameter; a device without a code object for
// its target gets NOT_FOUND naming the target and the targets built.
HL_API hl_status_t hl_queue_dispatch(hl_queue_t* queue,
                                     const hl_fence_t* wait_fence,
                                     const hl_fence_t* signal_fence,
                                     const char* kernel_name,
                                     const hl_dispatch_config_t* config,
                                     size_t arg_count,
                                     const hl_kernel_arg_t* args);

// The pattern oracle: the value fill_pattern writes to word |index| for
// |seed| (same function on host and device).
HL_API uint32_t hl_pattern_value(uint32_t seed, uint64_t index);

// Conveniences over hl_queue_dispatch.

// Writes the pattern of |seed| over the whole of |buffer| (length a multiple
// of 4): word i = hl_pattern_word(seed, i).
HL_API hl_status_t hl_queue_fill_pattern(hl_queue_t* queue,
                                         const hl_fence_t* wait_fence,
                                         const hl_fence_t* signal_fence,
                                         hl_buffer_t* buffer, uint32_t seed);

// Adds the number of words of |buffer| that differ from the pattern of
// |seed| to the uint32 at |counter| (offset 0; 4 bytes; zero it first).
HL_API hl_status_t hl_queue_verify_pattern(hl_queue_t* queue,
                                           const hl_fence_t* wait_fence,
                                           const hl_fence_t* signal_fence,
                                           hl_buffer_t* buffer, uint32_t seed,
                                           hl_buffer_t* counter);

// Keeps the queue busy for about |cycles| device clock cycles (host: ns).
HL_API hl_status_t hl_queue_spin(hl_queue_t* queue,
                                 const hl_fence_t* wait_fence,
                                 const hl_fence_t* signal_fence,
                                 uint64_t cycles);

// Registers the kernel-backed functions with the function registry (see
// hl_function_lookup). Idempotent. The functions:
// - "hipline.fill_pattern": 1 argument (write), 0 results; the seed is the
//   argument's root id truncated to 32 bits.
// - "hipline.copy": 2 arguments (read source, write target), 0 results.
// - "hipline.clone": 1 argument (read), 1 result: a fresh alloca'd copy.
// - "hipline.axpy2": 2 arguments (read x, read-write y), 0 results: y += 2x.
HL_API hl_status_t hl_kernels_register_functions(void);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_DISPATCH_H_
