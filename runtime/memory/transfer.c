// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Queue operations that move bytes: fill, copy, read and write.
// hl_queue_copy itself is in peer_copy.c, which decides how a copy between
// devices goes and makes it with the ops here.
//
// Each is stream work (hl_stream_work_issue): it checks that every root it
// touches is still live, failing the submission with FAILED_PRECONDITION
// instead of touching freed memory (in checked mode the queue fails too),
// then enqueues the backend's memset32_async or memcpy_async. With the
// backend's |stream_ordered_host_work| that happens when the stream gets
// there, so the check sees the moment a use after free would happen and a
// submission that failed by then skips the transfer; without it, at issue.

#include <stdio.h>
#include <stdlib.h>

#include "runtime/base/recycler.h"
#include "runtime/memory/memory_internal.h"

typedef enum hl_transfer_kind_e {
  HL_TRANSFER_FILL,
  HL_TRANSFER_COPY,
  HL_TRANSFER_READ,
  HL_TRANSFER_WRITE,
} hl_transfer_kind_t;

static const char* const kTransferNames[] = {"fill", "copy", "read", "write"};

typedef struct hl_transfer_op_t {
  hl_op_t base;
  hl_transfer_kind_t kind;
  hl_root_t* source;       // Op reference (copy, read).
  hl_root_t* target;       // Op reference (fill, copy, write).
  uint64_t source_offset;  // From the start of the root.
  uint64_t target_offset;
  uint64_t length;
  uint32_t pattern;
  void* host_target;
  const void* host_source;
  uint32_t queue_id;
  uint64_t value;
  // A copy with a root of another device (which the queue's device
  // reaches): a peer copy between the roots' devices.
  bool peer;
  hl_stream_work_t work;  // Filled at issue.
} hl_transfer_op_t;

static void hl_transfer_on_submit(hl_op_t* base, hl_queue_t* queue,
                                  uint64_t value) {
  hl_transfer_op_t* op = (hl_transfer_op_t*)base;
  op->value = value;
  if (op->source) hl_root_record_use(op->source, queue, value, false);
  if (op->target) hl_root_record_use(op->target, queue, value, true);
}

// Checks the roots; on a violation fails the submission (and, in checked
// mode, the queue) and returns false.
static bool hl_transfer_check(hl_transfer_op_t* op) {
  hl_root_t* roots[2] = {op->source, op->target};
  for (int i = 0; i < 2; ++i) {
    if (!roots[i]) continue;
    char what[96];
    snprintf(what, sizeof(what), "%s on queue %u (submission %llu)",
             kTransferNames[op->kind], op->queue_id,
             (unsigned long long)op->value);
    if (!hl_root_check_use(roots[i], what, op->work.submission,
                           op->work.checked)) {
      return false;
    }
  }
  return true;
}

// The stream work: check the roots, then copy or fill on the stream.
static hl_status_t hl_transfer_run(void* user) {
  hl_transfer_op_t* op = (hl_transfer_op_t*)user;
  if (!hl_transfer_check(op)) return NULL;
  hl_backend_t* b = op->work.backend;
  char* src = op->source
                  ? (char*)atomic_load(&op->source->ptr) + op->source_offset
                  : NULL;
  char* dst = op->target
                  ? (char*)atomic_load(&op->target->ptr) + op->target_offset
                  : NULL;
  // A failed read leaves device memory as it was: only its submission
  // fails. The writes fail the queue too (hl_stream_work_write_failed).
  switch (op->kind) {
    case HL_TRANSFER_FILL:
      return hl_stream_work_write_failed(
          &op->work,
          b->vtable->memset32_async(b, dst, op->pattern,
                                    (size_t)(op->length / 4), op->work.stream));
    case HL_TRANSFER_COPY:
      if (op->peer) {
        return hl_stream_work_write_failed(
            &op->work,
            b->vtable->memcpy_peer_async(b, dst, op->target->device->backend,
                                         src, op->source->device->backend,
                                         (size_t)op->length, op->work.stream));
      }
      return hl_stream_work_write_failed(
          &op->work, b->vtable->memcpy_async(b, dst, src, (size_t)op->length,
                                             op->work.stream));
    case HL_TRANSFER_READ:
      return b->vtable->memcpy_async(b, op->host_target, src,
                                     (size_t)op->length, op->work.stream);
    case HL_TRANSFER_WRITE:
      return hl_stream_work_write_failed(
          &op->work,
          b->vtable->memcpy_async(b, dst, op->host_source, (size_t)op->length,
                                  op->work.stream));
  }
  return NULL;
}

static hl_status_t hl_transfer_issue(hl_op_t* base, hl_issue_ctx_t* ctx) {
  hl_transfer_op_t* op = (hl_transfer_op_t*)base;
  hl_stream_work_bind(&op->work, ctx);
  if (op->length == 0) return NULL;
  return hl_stream_work_issue(ctx, &op->work.gate, hl_transfer_run, op, false);
}

// Transfer ops are recycled (base/recycler.h).
static hl_recycler_t hl_transfer_op_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_transfer_op_t), 1024, "a transfer");

static void hl_transfer_release(hl_op_t* base, hl_status_t status) {
  hl_transfer_op_t* op = (hl_transfer_op_t*)base;
  if (op->source) hl_root_release_for_op(op->source);
  if (op->target) hl_root_release_for_op(op->target);
  hl_recycler_free(&hl_transfer_op_recycler_, op);
}

// hl_transfer_release where neither root loses its last reference.
static bool hl_transfer_release_light(hl_op_t* base, hl_status_t status) {
  hl_transfer_op_t* op = (hl_transfer_op_t*)base;
  if (op->source) {
    if (!hl_root_release_for_op_unless_last(op->source)) return false;
    op->source = NULL;  // Released; the full release skips it.
  }
  if (op->target && !hl_root_release_for_op_unless_last(op->target)) {
    return false;
  }
  hl_recycler_free(&hl_transfer_op_recycler_, op);
  return true;
}

static const hl_op_vtable_t hl_transfer_vtable = {
    .issue = hl_transfer_issue,
    .release = hl_transfer_release,
    .on_submit = hl_transfer_on_submit,
    .release_light = hl_transfer_release_light,
};

hl_status_t hl_transfer_check_buffer(const char* what, hl_queue_t* queue,
                                     const hl_buffer_t* buffer, uint64_t offset,
                                     uint64_t length, bool any_device) {
  if (!buffer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "%s: buffer is NULL",
                          what);
  }
  if (!any_device && buffer->root->device != hl_queue_device(queue)) {
    return HL_MAKE_STATUS(
        HL_STATUS_INVALID_ARGUMENT,
        "%s: buffer (root %llu) belongs to another device than "
        "queue %u",
        what, (unsigned long long)buffer->root->id, hl_queue_id(queue));
  }
  if (offset > buffer->length || length > buffer->length - offset) {
    return HL_MAKE_STATUS(
        HL_STATUS_OUT_OF_RANGE,
        "%s: range [%llu, +%llu) exceeds the %llu-byte buffer", what,
        (unsigned long long)offset, (unsigned long long)length,
        (unsigned long long)buffer->length);
  }
  return NULL;
}

static hl_status_t hl_transfer_check_range(const char* what, hl_queue_t* queue,
                                           const hl_buffer_t* buffer,
                                           uint64_t offset, uint64_t length) {
  return hl_transfer_check_buffer(what, queue, buffer, offset, length, false);
}

static hl_status_t hl_transfer_submit(hl_queue_t* queue,
                                      const hl_fence_t* wait_fence,
                                      const hl_fence_t* signal_fence,
                                      const hl_transfer_op_t* proto) {
  hl_transfer_op_t* op = NULL;
  HL_RETURN_IF_ERROR(
      hl_recycler_alloc_default(&hl_transfer_op_recycler_, (void**)&op),
      "a %s op", kTransferNames[proto->kind]);
  *op = *proto;
  op->base.vtable = &hl_transfer_vtable;
  op->queue_id = hl_queue_id(queue);
  if (op->source) hl_root_retain_for_op(op->source);
  if (op->target) hl_root_retain_for_op(op->target);
  return hl_queue_submit(queue, wait_fence, signal_fence, &op->base, NULL);
}

hl_status_t hl_queue_fill(hl_queue_t* queue, const hl_fence_t* wait_fence,
                          const hl_fence_t* signal_fence, hl_buffer_t* buffer,
                          uint64_t offset, uint64_t length, uint32_t pattern) {
  if (!queue)
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_fill: queue is NULL");
  HL_RETURN_IF_ERROR_PLAIN(
      hl_transfer_check_range("hl_queue_fill", queue, buffer, offset, length));
  if (((buffer->offset + offset) | length) & 3u) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_fill: offset %llu and length %llu must be "
                          "multiples of 4",
                          (unsigned long long)(buffer->offset + offset),
                          (unsigned long long)length);
  }
  hl_transfer_op_t proto = {.kind = HL_TRANSFER_FILL,
                            .target = buffer->root,
                            .target_offset = buffer->offset + offset,
                            .length = length,
                            .pattern = pattern};
  return hl_transfer_submit(queue, wait_fence, signal_fence, &proto);
}

hl_status_t hl_queue_copy_direct(hl_queue_t* queue,
                                 const hl_fence_t* wait_fence,
                                 const hl_fence_t* signal_fence,
                                 hl_buffer_t* source, uint64_t source_offset,
                                 hl_buffer_t* target, uint64_t target_offset,
                                 uint64_t length, bool peer) {
  hl_transfer_op_t proto = {.kind = HL_TRANSFER_COPY,
                            .source = source->root,
                            .source_offset = source->offset + source_offset,
                            .target = target->root,
                            .target_offset = target->offset + target_offset,
                            .length = length,
                            .peer = peer};
  return hl_transfer_submit(queue, wait_fence, signal_fence, &proto);
}

hl_status_t hl_queue_read(hl_queue_t* queue, const hl_fence_t* wait_fence,
                          const hl_fence_t* signal_fence, hl_buffer_t* source,
                          uint64_t source_offset, void* host_target,
                          uint64_t length) {
  if (!queue)
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_read: queue is NULL");
  HL_RETURN_IF_ERROR_PLAIN(hl_transfer_check_range(
      "hl_queue_read", queue, source, source_offset, length));
  if (!host_target && length) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_read: host_target is NULL");
  }
  hl_transfer_op_t proto = {.kind = HL_TRANSFER_READ,
                            .source = source->root,
                            .source_offset = source->offset + source_offset,
                            .host_target = host_target,
                            .length = length};
  return hl_transfer_submit(queue, wait_fence, signal_fence, &proto);
}

hl_status_t hl_queue_write(hl_queue_t* queue, const hl_fence_t* wait_fence,
                           const hl_fence_t* signal_fence,
                           const void* host_source, hl_buffer_t* target,
                           uint64_t target_offset, uint64_t length) {
  if (!queue)
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_write: queue is NULL");
  HL_RETURN_IF_ERROR_PLAIN(hl_transfer_check_range(
      "hl_queue_write", queue, target, target_offset, length));
  if (!host_source && length) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_write: host_source is NULL");
  }
  hl_transfer_op_t proto = {.kind = HL_TRANSFER_WRITE,
                            .host_source = host_source,
                            .target = target->root,
                            .target_offset = target->offset + target_offset,
                            .length = length};
  return hl_transfer_submit(queue, wait_fence, signal_fence, &proto);
}
