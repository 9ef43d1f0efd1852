// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Native-stream interop (hl_queue_native_call).
//
// One queue operation whose stream work is the caller's function. It is
// built like a dispatch (dispatch.c): op references on the bound roots
// from submit, uses recorded once the submission has its value, and stream
// work (hl_stream_work_issue) that checks every root is live, resolves the
// pointers and then calls the function with the backend stream, which is
// the native one (runtime/backend/backend.h, hl_backend_stream_t). So it
// runs where stream work runs: on the host backend from a gated host
// function when the stream gets there (on the stream's worker), on hip at
// issue, behind the submission's waits enqueued on the stream.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipline/dispatch.h"
#include "runtime/base/trace.h"
#include "runtime/memory/memory_internal.h"

typedef struct hl_native_call_op_t {
  hl_op_t base;
  hl_native_stream_fn_t fn;
  void* user;
  uint32_t queue_id;
  uint64_t value;
  size_t count;
  bool writes_any;
  hl_root_t* roots[HL_NATIVE_CALL_MAX_BINDINGS];  // Op references.
  uint64_t offsets[HL_NATIVE_CALL_MAX_BINDINGS];  // From the root's start.
  bool writes[HL_NATIVE_CALL_MAX_BINDINGS];
  void* pointers[HL_NATIVE_CALL_MAX_BINDINGS];
  hl_stream_work_t work;
} hl_native_call_op_t;

static void hl_native_call_on_submit(hl_op_t* base, hl_queue_t* queue,
                                     uint64_t value) {
  hl_native_call_op_t* op = (hl_native_call_op_t*)base;
  op->value = value;
  for (size_t i = 0; i < op->count; ++i) {
    hl_root_record_use(op->roots[i], queue, value, op->writes[i]);
  }
}

static hl_status_t hl_native_call_run(void* user) {
  hl_native_call_op_t* op = user;
  for (size_t i = 0; i < op->count; ++i) {
    char what[160];
    snprintf(what, sizeof(what),
             "native call on queue %u (submission %llu), binding %zu",
             op->queue_id, (unsigned long long)op->value, i);
    if (!hl_root_check_use(op->roots[i], what, op->work.submission,
                           op->work.checked)) {
      return NULL;
    }
    op->pointers[i] = (char*)atomic_load(&op->roots[i]->ptr) + op->offsets[i];
  }
  hl_status_t st =
      op->fn(op->user, (void*)op->work.stream, op->pointers, op->count);
  if (!st) return NULL;
  st = hl_status_annotate(st, "native call on queue %u (submission %llu)",
                          op->queue_id, (unsigned long long)op->value);
  return op->writes_any ? hl_stream_work_write_failed(&op->work, st) : st;
}

static hl_status_t hl_native_call_issue(hl_op_t* base, hl_issue_ctx_t* ctx) {
  hl_native_call_op_t* op = (hl_native_call_op_t*)base;
  hl_stream_work_bind(&op->work, ctx);
  return hl_stream_work_issue(ctx, &op->work.gate, hl_native_call_run, op,
                              false);
}

static void hl_native_call_release(hl_op_t* base, hl_status_t status) {
  (void)status;
  hl_native_call_op_t* op = (hl_native_call_op_t*)base;
  for (size_t i = 0; i < op->count; ++i) hl_root_release_for_op(op->roots[i]);
  free(op);
}

static const hl_op_vtable_t hl_native_call_vtable = {
    .issue = hl_native_call_issue,
    .release = hl_native_call_release,
    .on_submit = hl_native_call_on_submit,
};

static hl_status_t hl_native_binding_check(hl_device_t* device, size_t i,
                                           const hl_buffer_binding_t* b) {
  if (!b->buffer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_native_call: binding %zu has no buffer", i);
  }
  if (b->access != HL_ACCESS_READ && b->access != HL_ACCESS_WRITE &&
      b->access != HL_ACCESS_READ_WRITE) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_native_call: binding %zu: access %d is "
                          "not a hl_access_t",
                          i, (int)b->access);
  }
  if (b->buffer->root->device != device) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_native_call: binding %zu: buffer (root "
                          "%llu) belongs to another device than the queue's",
                          i, (unsigned long long)b->buffer->root->id);
  }
  uint64_t length = b->buffer->length;
  if (b->offset > length || b->length > length - b->offset) {
    return HL_MAKE_STATUS(HL_STATUS_OUT_OF_RANGE,
                          "hl_queue_native_call: binding %zu: range [%llu, "
                          "+%llu) exceeds the %llu-byte buffer",
                          i, (unsigned long long)b->offset,
                          (unsigned long long)b->length,
                          (unsigned long long)length);
  }
  return NULL;
}

static hl_status_t hl_queue_native_call_impl(
    hl_queue_t* queue, const hl_fence_t* wait_fence,
    const hl_fence_t* signal_fence, hl_native_stream_fn_t fn, void* user,
    size_t binding_count, const hl_buffer_binding_t* bindings) {
  if (!queue || !fn || (binding_count && !bindings)) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_native_call: queue, fn or bindings is "
                          "NULL");
  }
  if (binding_count > HL_NATIVE_CALL_MAX_BINDINGS) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_native_call: %zu bindings; at most %d",
                          binding_count, HL_NATIVE_CALL_MAX_BINDINGS);
  }
  hl_device_t* device = hl_queue_device(queue);
  for (size_t i = 0; i < binding_count; ++i) {
    HL_RETURN_IF_ERROR_PLAIN(hl_native_binding_check(device, i, &bindings[i]));
  }
  hl_native_call_op_t* op = calloc(1, sizeof(*op));
  if (!op) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "a native call");
  }
  op->base.vtable = &hl_native_call_vtable;
  op->fn = fn;
  op->user = user;
  op->queue_id = hl_queue_id(queue);
  op->count = binding_count;
  for (size_t i = 0; i < binding_count; ++i) {
    const hl_buffer_binding_t* b = &bindings[i];
    op->roots[i] = b->buffer->root;
    op->offsets[i] = b->buffer->offset + b->offset;
    op->writes[i] = (b->access & HL_ACCESS_WRITE) != 0;
    op->writes_any |= op->writes[i];
    hl_root_retain_for_op(op->roots[i]);
  }
  return hl_queue_submit(queue, wait_fence, signal_fence, &op->base, NULL);
}

hl_status_t hl_queue_native_call(hl_queue_t* queue,
                                 const hl_fence_t* wait_fence,
                                 const hl_fence_t* signal_fence,
                                 hl_native_stream_fn_t fn, void* user,
                                 size_t binding_count,
                                 const hl_buffer_binding_t* bindings) {
  HL_TRACE_ZONE_BEGIN(zone, "hl_queue_native_call");
  hl_status_t st = hl_queue_native_call_impl(queue, wait_fence, signal_fence,
                                             fn, user, binding_count, bindings);
  HL_TRACE_ZONE_END(zone);
  return st;
}
