// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Command buffers: execution (hl_queue_execute).
//
// An execution is one hl_op_t in one submission. At submit it takes an op
// reference on every root and records one use per root (a write when any
// command writes it). The execution is one piece of stream work
// (hl_stream_work_issue): it checks that every root is live, then enqueues
// each step through the backend (memset32_async, memcpy_async,
// launch_kernel). With the backend's |stream_ordered_host_work| that runs
// when the stream gets there (a failed submission runs no step, and the
// checks see that moment); without it, at issue.

#include <stdio.h>
#include <stdlib.h>

#include "runtime/base/log.h"
#include "runtime/base/trace.h"
#include "runtime/command/command_buffer_internal.h"

//===----------------------------------------------------------------------===//
// Execution
//===----------------------------------------------------------------------===//

typedef struct hl_execute_op_t {
  hl_op_t base;
  hl_command_buffer_t* cb;  // Retained.
  uint32_t queue_id;
  uint64_t value;
  hl_stream_work_t work;  // Filled at issue.
  // The dispatches' kernarg segments for this execution (cb->kernarg_total
  // bytes; NULL when there are none): executions may overlap, and a host
  // kernel reads its segment when it runs.
  unsigned char* kernargs;
} hl_execute_op_t;

static void hl_execute_on_submit(hl_op_t* base, hl_queue_t* queue,
                                 uint64_t value) {
  hl_execute_op_t* op = (hl_execute_op_t*)base;
  op->value = value;
  for (uint32_t i = 0; i < op->cb->root_count; ++i) {
    hl_root_record_use(op->cb->roots[i], queue, value, op->cb->root_writes[i]);
  }
}

// Checks every root; on a violation fails the submission (and, in checked
// mode, the queue) and returns false.
static bool hl_execute_check(hl_execute_op_t* op) {
  for (uint32_t i = 0; i < op->cb->root_count; ++i) {
    char what[128];
    snprintf(what, sizeof(what),
             "command buffer %llu on queue %u (submission %llu)",
             (unsigned long long)op->cb->id, op->queue_id,
             (unsigned long long)op->value);
    if (!hl_root_check_use(op->cb->roots[i], what, op->work.submission,
                           op->work.checked)) {
      return false;
    }
  }
  return true;
}

static char* hl_step_pointer(const hl_command_buffer_t* cb, uint32_t root,
                             uint64_t offset) {
  return (char*)atomic_load(&cb->roots[root]->ptr) + offset;
}

// Enqueues every step of |cb| on |stream|, the dispatches with their
// kernarg segments in |kernargs|. On failure |*out_failed| is the index of
// the step that failed.
static hl_status_t hl_command_buffer_enqueue_steps(
    const hl_command_buffer_t* cb, hl_backend_t* b, hl_backend_stream_t* stream,
    unsigned char* kernargs, size_t* out_failed) {
  for (size_t i = 0; i < cb->step_count; ++i) {
    const hl_command_t* step = &cb->steps[i];
    hl_status_t st = NULL;
    switch (step->kind) {
      case HL_COMMAND_FILL:
        st = b->vtable->memset32_async(
            b, hl_step_pointer(cb, step->target, step->target_offset),
            step->pattern, (size_t)(step->length / 4), stream);
        break;
      case HL_COMMAND_UPDATE:
        st = b->vtable->memcpy_async(
            b, hl_step_pointer(cb, step->target, step->target_offset),
            cb->data + step->data_offset, (size_t)step->length, stream);
        break;
      case HL_COMMAND_COPY:
        st = b->vtable->memcpy_async(
            b, hl_step_pointer(cb, step->target, step->target_offset),
            hl_step_pointer(cb, step->source, step->source_offset),
            (size_t)step->length, stream);
        break;
      case HL_COMMAND_DISPATCH: {
        const hl_command_call_t* recorded = cb->calls[step->call];
        st = hl_dispatch_call_launch(b, &recorded->call,
                                     kernargs + recorded->kernarg_at, stream);
        if (st) {
          st = hl_status_annotate(st, "dispatching %s",
                                  recorded->call.kernel.signature->name);
        }
        break;
      }
      case HL_COMMAND_BARRIER:
        break;
    }
    if (st) {
      *out_failed = i;
      return st;
    }
  }
  return NULL;
}

// Whether a graph can hold every step: an update copies from host memory,
// which the backend may stage through pinned chunks and host functions, so
// a command buffer with one replays on the stream instead.
static bool hl_command_buffer_graphable(const hl_command_buffer_t* cb) {
  for (size_t i = 0; i < cb->step_count; ++i) {
    if (cb->steps[i].kind == HL_COMMAND_UPDATE) return false;
  }
  return true;
}

// What the graph's record function enqueues: |op|'s execution.
static hl_status_t hl_command_buffer_record_graph(void* user,
                                                  hl_backend_stream_t* stream) {
  hl_execute_op_t* op = (hl_execute_op_t*)user;
  size_t failed = 0;
  return hl_command_buffer_enqueue_steps(op->cb, op->cb->device->backend,
                                         stream, op->kernargs, &failed);
}

// |cb|'s graph, built on first use; NULL when the backend has none or it
// cannot be built (the caller replays the steps then). The roots are live
// (hl_execute_check), so their addresses are final.
static hl_backend_graph_t* hl_command_buffer_graph(hl_execute_op_t* op,
                                                   hl_backend_t* b) {
  hl_command_buffer_t* cb = op->cb;
  if (!b->vtable->graph_capture) return NULL;
  mtx_lock(&cb->graph_mutex);
  if (!cb->graph_tried) {
    cb->graph_tried = true;
    if (hl_command_buffer_graphable(cb)) {
      hl_status_t st = b->vtable->graph_capture(
          b, hl_command_buffer_record_graph, op, &cb->graph);
      if (st) {
        HL_LOG_INFO("command buffer %llu replays on the stream: %s",
                    (unsigned long long)cb->id, hl_status_message(st));
        hl_status_free(st);
      }
    }
  }
  hl_backend_graph_t* graph = cb->graph;
  mtx_unlock(&cb->graph_mutex);
  return graph;
}

// The stream work: check the roots, then launch the graph or enqueue every
// step.
static hl_status_t hl_execute_run(void* user) {
  hl_execute_op_t* op = (hl_execute_op_t*)user;
  if (!hl_execute_check(op)) return NULL;
  hl_backend_t* b = op->work.backend;
  hl_command_buffer_t* cb = op->cb;
  hl_backend_graph_t* graph = hl_command_buffer_graph(op, b);
  hl_status_t st = NULL;
  size_t failed = 0;
  if (graph) {
    st = b->vtable->graph_launch(b, graph, op->work.stream);
    if (st) {
      st = hl_status_annotate(st, "the graph of command buffer %llu",
                              (unsigned long long)cb->id);
    }
  } else {
    st = hl_command_buffer_enqueue_steps(cb, b, op->work.stream, op->kernargs,
                                         &failed);
    if (st) {
      st = hl_status_annotate(st, "command %zu of command buffer %llu", failed,
                              (unsigned long long)cb->id);
    }
  }
  // Every step but a barrier writes device memory.
  return st ? hl_stream_work_write_failed(&op->work, st) : NULL;
}

static hl_status_t hl_execute_issue(hl_op_t* base, hl_issue_ctx_t* ctx) {
  hl_execute_op_t* op = (hl_execute_op_t*)base;
  hl_stream_work_bind(&op->work, ctx);
  return hl_stream_work_issue(ctx, &op->work.gate, hl_execute_run, op, false);
}

static void hl_execute_release(hl_op_t* base, hl_status_t status) {
  (void)status;
  hl_execute_op_t* op = (hl_execute_op_t*)base;
  for (uint32_t i = 0; i < op->cb->root_count; ++i) {
    hl_root_release_for_op(op->cb->roots[i]);
  }
  hl_command_buffer_release(op->cb);
  free(op->kernargs);
  free(op);
}

static const hl_op_vtable_t hl_execute_vtable = {
    .issue = hl_execute_issue,
    .release = hl_execute_release,
    .on_submit = hl_execute_on_submit,
};

hl_status_t hl_queue_execute(hl_queue_t* queue, const hl_fence_t* wait_fence,
                             const hl_fence_t* signal_fence,
                             hl_command_buffer_t* cb) {
  if (!queue || !cb) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_execute: queue or command buffer is NULL");
  }
  if (!cb->finalized) {
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "hl_queue_execute: command buffer %llu is not "
                          "finalized; call hl_command_buffer_finalize first",
                          (unsigned long long)cb->id);
  }
  hl_device_t* device = hl_queue_device(queue);
  if (device != cb->device) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_execute: command buffer %llu belongs to "
                          "another device than queue %u",
                          (unsigned long long)cb->id, hl_queue_id(queue));
  }
  HL_TRACE_ZONE_BEGIN(zone, "hl_queue_execute");
  hl_execute_op_t* op = calloc(1, sizeof(*op));
  if (op && cb->kernarg_total) {
    op->kernargs = aligned_alloc(16, cb->kernarg_total);
    if (!op->kernargs) {
      free(op);
      op = NULL;
    }
  }
  if (!op) {
    HL_TRACE_ZONE_END(zone);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating an execution of command buffer %llu",
                          (unsigned long long)cb->id);
  }
  uint32_t queue_id = hl_queue_id(queue);
  op->base.vtable = &hl_execute_vtable;
  op->queue_id = queue_id;
  hl_command_buffer_retain(cb);
  op->cb = cb;
  for (uint32_t i = 0; i < cb->root_count; ++i) {
    hl_root_retain_for_op(cb->roots[i]);
  }
  hl_status_t st =
      hl_queue_submit(queue, wait_fence, signal_fence, &op->base, NULL);
  if (!st) {
    // |op| may already be released; |cb| is the caller's.
    hl_memory_note_elision(device, queue_id, cb->info.fills_elided,
                           cb->info.fills_shrunk, cb->info.fill_bytes_elided);
  }
  HL_TRACE_ZONE_END(zone);
  return st;
}
