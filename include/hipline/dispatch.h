// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Kernel dispatch on queues, and the kernel-backed functions.
//
// A dispatch launches one kernel of an executable on a queue after a wait
// fence, then signals a signal fence: hl_queue_dispatch_executable for any
// executable, hl_queue_dispatch for the kernels built into hipline (see
// kernels/kernel_table.h: fill_pattern, verify_pattern, copy, spin, axpy),
// which is hl_queue_dispatch_executable with hl_executable_builtin(). Buffer
// arguments are declared as bindings with their access: they are retained
// until the work completes, recorded in their roots' timeline resources
// (reads in the use fence, writes also in the mutation barrier), and checked
// for use-after-free when the work runs (failing the queue too in checked
// mode). The device's code object is loaded on first dispatch (matched by
// target id, selected once per group of equal targets).
#ifndef HIPLINE_DISPATCH_H_
#define HIPLINE_DISPATCH_H_

#include <stdint.h>

#include "hipline/executable.h"
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
// parameter order. |config| may be NULL (one block of one thread). Buffers
// are retained until the work completes; the caller keeps its references.
// - Unknown kernels are NOT_FOUND naming the kernels there are.
// - INVALID_ARGUMENT, naming the parameter index and name: a wrong argument
//   count; a pointer parameter without a BUFFER argument or a scalar one
//   without a SCALAR argument of the parameter's size; a NULL buffer (only
//   spin's out_blocks_done may be NULL); a declared |access| that lacks what
//   the kernel does through the parameter (fill_pattern's buf and copy's dst
//   need WRITE, verify_pattern's out_mismatches, spin's out_blocks_done and
//   axpy's y need READ_WRITE); a buffer on another device than |queue|; an
//   offset in the allocation that is not a multiple of the element size (4
//   for uint32_t and float data); a written range that overlaps another
//   touched range of the same allocation.
// - OUT_OF_RANGE: [offset, offset+length) is not within the buffer, or the
//   bytes the kernel touches (from its size parameters: words*4, bytes, n*4,
//   4 for a counter) exceed |length|.
// - A device without a code object for its target gets NOT_FOUND naming the
//   target and the targets built.
// When the work runs (when the stream gets there on the host backend; at
// issue on hip, whose host functions cannot launch), a bound buffer whose
// memory has been freed fails the submission (its signals) with
// FAILED_PRECONDITION "use after free" instead of touching the memory; in
// checked mode the queue fails too.
HL_API hl_status_t hl_queue_dispatch(hl_queue_t* queue,
                                     const hl_fence_t* wait_fence,
                                     const hl_fence_t* signal_fence,
                                     const char* kernel_name,
                                     const hl_dispatch_config_t* config,
                                     size_t arg_count,
                                     const hl_kernel_arg_t* args);

// Launches kernel |kernel_name| of the user executable |executable| (see
// hipline/executable.h) with |arg_count| arguments: one per explicit
// argument of the kernel's signature (its AMDGPU metadata; hidden arguments
// are the runtime's), in order. A "global_buffer" argument takes a BUFFER
// argument (a NULL buffer passes a null pointer; otherwise
// [offset, offset+length) is the range the kernel may touch, declared with
// the |access| it needs: reads are recorded in the root's use fence and
// writes in its mutation barrier too, as for hl_queue_dispatch); a
// "by_value" argument of 1..8 bytes takes a SCALAR argument of that size.
// The executable is retained until the work completes.
// - INVALID_ARGUMENT names the argument (index and metadata name): a wrong
//   count, kind or scalar size; an access that is not a hl_access_t; a
//   buffer on another device than |queue|.
// - OUT_OF_RANGE: the range is not within the buffer.
// - UNIMPLEMENTED: an argument of another value kind (images, samplers,
//   by-value structs over 8 bytes).
// - NOT_FOUND: the device has no compatible object (naming the targets
//   offered and the device's), or the object has no such kernel.
// The device's object is loaded on its first dispatch. Use after free is
// caught as for hl_queue_dispatch.
HL_API hl_status_t hl_queue_dispatch_executable(
    hl_queue_t* queue, const hl_fence_t* wait_fence,
    const hl_fence_t* signal_fence, hl_executable_t* executable,
    const char* kernel_name, const hl_dispatch_config_t* config,
    size_t arg_count, const hl_kernel_arg_t* args);

// Native-stream interop: a queue operation that runs the caller's function
// with the queue's native stream, so an embedder can launch its own work
// (hipModuleLaunchKernel, a library call) in the queue's timeline order.
//
// |bindings| declare the buffers the function's work touches, as dispatch
// arguments do: each is retained until the operation completes, its use is
// recorded in the root's timeline (writes in the mutation barrier too), so
// deallocas order after the work; a binding whose memory was freed by the
// time the function would run fails the submission with FAILED_PRECONDITION
// "use after free" and the function is not called (the queue fails too in
// checked mode).
typedef struct hl_buffer_binding_t {
  hl_buffer_t* buffer;
  uint64_t offset;  // Of the range the work touches, within |buffer|.
  uint64_t length;
  hl_access_t access;
} hl_buffer_binding_t;

// |native_stream| is the backend's stream: a hipStream_t on the hip
// backend; on the host backend an opaque handle of the stream whose worker
// runs the function. |pointers[i]| is the device address of binding i
// (buffer address plus offset). A returned status (ownership passes to
// hipline) fails the submission's signals; when a binding writes, the queue
// fails too, since the bytes are not what program order says.
typedef hl_status_t (*hl_native_stream_fn_t)(void* user, void* native_stream,
                                             void* const* pointers,
                                             size_t binding_count);

#define HL_NATIVE_CALL_MAX_BINDINGS 64

// Enqueues a call of |fn(user, ...)| on |queue| after |wait_fence|, before
// |signal_fence| is signalled. When and where it runs follows the backend:
// - host backend: on the queue's stream worker thread, when the stream gets
//   there: every wait is met and all earlier work of the queue has run; a
//   submission that failed by then does not call it;
// - hip backend: on the thread that issues the submission (a submitting
//   thread or the queue's issuer), once the submission's waits have been
//   enqueued on the stream: what the function enqueues on |native_stream|
//   runs after the waits are met and after the queue's earlier work; the
//   host code itself runs at issue. A submission known failed at issue
//   does not call it.
// The function must enqueue work and return: it must not wait for the
// stream or for hipline semaphores, fences or queues (hipStreamSynchronize,
// hl_semaphore_wait, hl_queue_wait_idle), must not call hipline functions
// that submit to |queue|, and must not keep |native_stream| after it
// returns. INVALID_ARGUMENT: a NULL queue or fn, too many bindings, a
// NULL buffer, an access that is not a hl_access_t, a buffer of another
// device (naming the binding); OUT_OF_RANGE: a range outside its buffer.
HL_API hl_status_t hl_queue_native_call(hl_queue_t* queue,
                                        const hl_fence_t* wait_fence,
                                        const hl_fence_t* signal_fence,
                                        hl_native_stream_fn_t fn, void* user,
                                        size_t binding_count,
                                        const hl_buffer_binding_t* bindings);

// The pattern oracle: the value fill_pattern writes to word |index| for
// |seed| (same function on host and device).
HL_API uint32_t hl_pattern_value(uint32_t seed, uint64_t index);

// The kernels hl_queue_dispatch accepts, in kernel-table order: their number,
// and the name of kernel |index| (static storage; NULL when |index| is out of
// range). Thread-safe; never touch a device.
HL_API size_t hl_dispatch_kernel_count(void);
HL_API const char* hl_dispatch_kernel_name(size_t index);

// Conveniences over hl_queue_dispatch.

// Writes the pattern of |seed| over the whole of |buffer| (length a multiple
// of 4): word i = hl_pattern_value(seed, i).
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
// - "hipline.copy": 2 arguments (read source, write target), 0 results; the
//   whole source is copied to the start of target (a shorter target is
//   OUT_OF_RANGE).
// - "hipline.clone": 1 argument (read), 1 result: a fresh copy of the same
//   length, allocated with hl_queue_alloca on the invocation's queue.
// - "hipline.axpy2": 2 arguments (read x, read-write y), 0 results: y += 2x
//   over the floats of y (x at least as long).
// Each callback follows the coarse-fences convention: its first submission
// waits on the wait fence and only its last signals the signal fence; a
// function with two submissions (clone) chains them with a private
// semaphore, so a failed first step fails the second with its status. A
// name already registered is left as it is (not an error), so this can be
// called by every user of the functions.
HL_API hl_status_t hl_kernels_register_functions(void);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_DISPATCH_H_
