// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Internals of command buffers (hipline/command_buffer.h) shared by their
// files: recording (command_buffer.c), the elision pass and finalize
// (command_finalize.c) and execution (command_execute.c).
#ifndef HIPLINE_RUNTIME_COMMAND_COMMAND_BUFFER_INTERNAL_H_
#define HIPLINE_RUNTIME_COMMAND_COMMAND_BUFFER_INTERNAL_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <threads.h>

#include "hipline/command_buffer.h"
#include "runtime/executable/dispatch_call.h"
#include "runtime/memory/memory_internal.h"

typedef enum hl_command_kind_e {
  HL_COMMAND_FILL,
  HL_COMMAND_UPDATE,
  HL_COMMAND_COPY,
  HL_COMMAND_DISPATCH,
  HL_COMMAND_BARRIER,
} hl_command_kind_t;

typedef struct hl_command_t {
  hl_command_kind_t kind;
  uint32_t target;         // Root index (fill, update, copy).
  uint32_t source;         // Root index (copy).
  uint64_t target_offset;  // From the root's start.
  uint64_t source_offset;
  uint64_t length;
  uint32_t pattern;      // Fill.
  uint32_t call;         // Dispatch: into |calls|.
  uint64_t data_offset;  // Update: into |data|.
} hl_command_t;

// A recorded dispatch (allocated on its own: a call must not move): the
// call and, per explicit argument, its root index + 1 (0 for none) and
// HL_COMMAND_ARG_* flags, both in the same allocation; and where the call's
// kernarg segment lies in each execution's kernarg arena.
typedef struct hl_command_call_t {
  hl_dispatch_call_t call;
  uint32_t* arg_roots;
  uint32_t* arg_flags;
  size_t kernarg_at;
} hl_command_call_t;

struct hl_command_buffer_t {
  atomic_int ref_count;
  hl_device_t* device;  // Retained.
  uint32_t flags;
  uint64_t id;
  bool finalized;

  hl_buffer_t** buffers;  // Retained; distinct handles.
  uint32_t buffer_count;
  size_t buffer_capacity;
  hl_root_t** roots;  // Distinct roots (held through |buffers|).
  bool* root_writes;
  uint32_t root_count;
  size_t root_capacity;
  size_t root_writes_capacity;

  hl_command_t* commands;
  size_t command_count;
  size_t command_capacity;
  hl_command_call_t** calls;
  uint32_t call_count;
  size_t call_capacity;
  // Bytes of the kernarg arena each execution allocates: the calls' kernarg
  // segments, each 16-byte aligned. Executions may overlap, so each fills
  // its own.
  size_t kernarg_total;
  uint8_t* data;
  size_t data_size;
  size_t data_capacity;

  hl_command_t* steps;  // Built by finalize.
  size_t step_count;
  hl_command_buffer_info_t info;

  // The steps as one backend graph (backends with graph_capture), built at
  // the first execution, when every root's address is known, and launched
  // by every execution after (see hl_execute_run_graph).
  mtx_t graph_mutex;
  hl_backend_graph_t* graph;
  bool graph_tried;  // Built, or known not to be buildable.
};

// Grows |*items| (|*capacity| elements of |size|) to hold |needed|.
bool hl_command_grow(void** items, size_t size, size_t* capacity,
                     size_t needed);

// FAILED_PRECONDITION when |cb| is finalized (|what| names the caller),
// INVALID_ARGUMENT when it is NULL.
hl_status_t hl_command_check_open(const hl_command_buffer_t* cb,
                                  const char* what);

// Frees a recorded dispatch (NULL is fine).
void hl_command_call_destroy(hl_command_call_t* recorded);

#endif  // HIPLINE_RUNTIME_COMMAND_COMMAND_BUFFER_INTERNAL_H_
