// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Command buffers: fills, updates, copies, dispatches and barriers recorded
// once and executed on a queue as one submission, as many times as wanted.
//
// Lifecycle: hl_command_buffer_create on a device; record commands; then
// hl_command_buffer_finalize; then hl_queue_execute any number of times, on
// any queue of the device. Recording is not thread-safe (one thread records,
// like building a fence); a finalized command buffer is immutable and may be
// executed from many threads at once.
//
// Recording validates what it can and fails with a status naming the
// command: NULL handles and buffers (INVALID_ARGUMENT), a buffer of another
// device (INVALID_ARGUMENT), ranges outside the buffer, zero lengths and
// updates over HL_COMMAND_BUFFER_MAX_UPDATE_SIZE (OUT_OF_RANGE /
// INVALID_ARGUMENT), unaligned fills, dispatch arguments exactly as
// hl_queue_dispatch and hl_queue_dispatch_executable check them, and
// recording after finalize or executing before it (FAILED_PRECONDITION). A
// failed record leaves the command buffer as it was.
//
// The command buffer retains every buffer and executable it names until it
// is destroyed.
// Each execution holds the buffers' memory for the work and records one use
// per buffer root on the root's timeline resource (a write when any command
// writes it), exactly as the single queue operations do: hl_queue_dealloca,
// imports, the fallback release and checked mode all see command-buffer work.
// An execution first checks that every root is live (a freed root fails the
// submission with FAILED_PRECONDITION, and the queue in checked mode), then
// enqueues its commands; on the host backend that happens when the stream
// gets there, on hip at issue.
//
// Fill elision (at finalize, unless HIPLINE_ELIDE_FILLS=0 or the
// HL_COMMAND_BUFFER_FLAG_NO_ELISION flag). Per root, in command order, the
// bytes each command reads and writes are tracked:
// - writes: fills, updates, copy targets, and dispatch bindings with write
//   access whose argument flag is HL_COMMAND_ARG_WRITES_WHOLE_RANGE (the
//   kernel must write every byte of the declared range; for a built-in
//   kernel recording checks that the kernel's extent equals the range, for
//   a user kernel it is the caller's promise);
// - reads: copy sources and dispatch bindings with read access, READ or
//   READ_WRITE (their whole declared range); the end of the command buffer
//   reads everything (memory is observable afterwards);
// - a command reads before it writes; barriers and dispatch writes without
//   the flag neither read nor overwrite.
// A fill byte that is overwritten before anything reads it is not filled: a
// fill wholly overwritten is dropped (a fresh alloca that is fully updated
// stays a bare alloca), and one partly overwritten shrinks to the gaps,
// rounded out to whole 32-bit words. The memory after an execution is the
// same with and without elision.
#ifndef HIPLINE_COMMAND_BUFFER_H_
#define HIPLINE_COMMAND_BUFFER_H_

#include <stdint.h>

#include "hipline/buffer.h"
#include "hipline/dispatch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hl_command_buffer_t hl_command_buffer_t;

enum {
  // Turns fill elision off for this command buffer.
  HL_COMMAND_BUFFER_FLAG_NO_ELISION = 1u << 0,
};

// Largest update (bytes copied from the host at record time).
#define HL_COMMAND_BUFFER_MAX_UPDATE_SIZE (UINT64_C(64) << 10)

// Creates an empty command buffer for |device| (retained). |flags| is a set
// of HL_COMMAND_BUFFER_FLAG_* bits; others are INVALID_ARGUMENT.
HL_API hl_status_t hl_command_buffer_create(hl_device_t* device, uint32_t flags,
                                            hl_command_buffer_t** out_cb);
HL_API void hl_command_buffer_retain(hl_command_buffer_t* cb);
// The last release drops the buffers; executions in flight hold their own
// reference, so releasing right after hl_queue_execute is fine.
HL_API void hl_command_buffer_release(hl_command_buffer_t* cb);

// Fills |length| bytes at |offset| of |buffer| with the 32-bit |pattern|
// (offset in the allocation and length multiples of 4).
HL_API hl_status_t hl_command_buffer_fill(hl_command_buffer_t* cb,
                                          hl_buffer_t* buffer, uint64_t offset,
                                          uint64_t length, uint32_t pattern);

// Writes |length| bytes from |host_source| at |offset| of |buffer|. The
// bytes are copied now; |host_source| may be reused at once.
HL_API hl_status_t hl_command_buffer_update(hl_command_buffer_t* cb,
                                            const void* host_source,
                                            hl_buffer_t* buffer,
                                            uint64_t offset, uint64_t length);

// Copies |length| bytes from |source|+|source_offset| to
// |target|+|target_offset| (overlap behaves as memmove).
HL_API hl_status_t hl_command_buffer_copy(
    hl_command_buffer_t* cb, hl_buffer_t* source, uint64_t source_offset,
    hl_buffer_t* target, uint64_t target_offset, uint64_t length);

enum {
  // The kernel writes every byte of this argument's declared range (lets
  // the elision pass count the binding as an overwrite).
  HL_COMMAND_ARG_WRITES_WHOLE_RANGE = 1u << 0,
};

// Records a dispatch of built-in kernel |kernel_name|, validated as
// hl_queue_dispatch validates it (hl_command_buffer_dispatch_executable
// with hl_executable_builtin()).
// |arg_flags| (may be NULL) holds HL_COMMAND_ARG_* bits per argument;
// WRITES_WHOLE_RANGE is only valid on a buffer argument with write access
// whose kernel extent equals its length (INVALID_ARGUMENT otherwise).
HL_API hl_status_t hl_command_buffer_dispatch(
    hl_command_buffer_t* cb, const char* kernel_name,
    const hl_dispatch_config_t* config, size_t arg_count,
    const hl_kernel_arg_t* args, const uint32_t* arg_flags);

// Records a dispatch of kernel |kernel_name| of |executable| (a user
// executable, or hl_executable_builtin()), validated now as
// hl_queue_dispatch_executable validates it against the kernel's signature
// for this command buffer's device: the device's object is selected and
// loaded now, and a wrong argument count, kind or scalar size is
// INVALID_ARGUMENT naming the argument (index and metadata name). The
// argument list is as long as the kernel's signature says (there is no
// fixed cap). The command buffer retains |executable| until it is
// destroyed, so the caller may release it right after recording.
// |arg_flags| (may be NULL) holds HL_COMMAND_ARG_* bits per argument;
// WRITES_WHOLE_RANGE is valid on a buffer argument with write access, and
// for a user kernel it is the caller's promise (the metadata says nothing
// about which bytes a kernel writes).
HL_API hl_status_t hl_command_buffer_dispatch_executable(
    hl_command_buffer_t* cb, hl_executable_t* executable,
    const char* kernel_name, const hl_dispatch_config_t* config,
    size_t arg_count, const hl_kernel_arg_t* args, const uint32_t* arg_flags);

// An execution barrier: commands after it start after those before it
// finish. (Commands of one execution already run in order on the queue's
// stream, so this records the ordering the caller relies on.)
HL_API hl_status_t hl_command_buffer_barrier(hl_command_buffer_t* cb);

// Ends recording and runs the elision pass. Finalizing twice, or an empty
// command buffer, is FAILED_PRECONDITION.
HL_API hl_status_t hl_command_buffer_finalize(hl_command_buffer_t* cb);

// Executes finalized |cb| on |queue| as ONE submission: after |wait_fence|,
// then signals |signal_fence|. The queue must belong to the command
// buffer's device (INVALID_ARGUMENT).
HL_API hl_status_t hl_queue_execute(hl_queue_t* queue,
                                    const hl_fence_t* wait_fence,
                                    const hl_fence_t* signal_fence,
                                    hl_command_buffer_t* cb);

typedef struct hl_command_buffer_info_t {
  bool finalized;
  bool elision_enabled;
  uint64_t commands;  // Recorded (barriers included).
  uint64_t fills;     // Fill commands recorded.
  uint64_t updates;
  uint64_t copies;
  uint64_t dispatches;
  uint64_t barriers;
  uint64_t roots;  // Distinct allocations touched.
  // From the elision pass (0 before finalize):
  uint64_t fills_elided;       // Fills dropped whole.
  uint64_t fills_shrunk;       // Fills cut to their gaps.
  uint64_t fill_bytes_elided;  // Bytes no longer filled.
  uint64_t fill_ranges;        // Fill ranges each execution issues.
  uint64_t update_bytes;       // Host bytes held by the command buffer.
} hl_command_buffer_info_t;

HL_API hl_status_t hl_command_buffer_query(const hl_command_buffer_t* cb,
                                           hl_command_buffer_info_t* out_info);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_COMMAND_BUFFER_H_
