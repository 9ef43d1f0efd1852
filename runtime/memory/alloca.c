// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// queue_alloca and queue_dealloca: allocation and free in queue order.
//
// Both do their pool work as stream work (hl_stream_work_issue), so one
// set of rules holds on every backend:
// - an alloca's memory is usable by work ordered after it on its queue; a
//   failed allocation fails the alloca's submission and leaves the root
//   FAILED (later uses fail with that cause, a dealloca of it frees
//   nothing and is counted cancelled);
// - a dealloca frees after its waits and the root's use fence, on its
//   queue's stream, and the pool gives the block to the same queue at once
//   and to other queues once the dealloca's timepoint is reached;
// - a dealloca whose submission failed before it freed is cancelled: the
//   buffer stays valid and may be deallocated again, decided before the
//   failed signal is published.
// What the backend's |stream_ordered_host_work| capability changes is when
// the pool is used and so which failures still cancel: with it, the alloca
// and the free run when the stream gets there, so a wait that fails at any
// time before cancels them; without it, they run at issue, so only failures
// known at issue cancel (a wait issued as a device-side wait that fails
// later fails the dealloca's signal, but the memory is already freed; see
// docs/timeline.md for that window). A submission that waits on a failed
// one is never issued on any backend: a cancelled submission gives its
// signals no device timepoint.
// An alloca on hipline's pool reuses blocks that other queues freed behind
// its queue's wait frontier (hl_queue_frontier_snapshot).

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/recycler.h"
#include "runtime/base/trace.h"
#include "runtime/memory/memory_history.h"
#include "runtime/memory/memory_internal.h"

//===----------------------------------------------------------------------===//
// Alloca
//===----------------------------------------------------------------------===//

static void hl_alloca_on_submit(hl_op_t* base, hl_queue_t* queue,
                                uint64_t value) {
  hl_alloca_op_t* op = (hl_alloca_op_t*)base;
  op->value = value;
  // The alloca counts as the first write: a dealloca waits for it too. The
  // buffer is not returned yet, so nobody else reads the root's fences.
  hl_root_record_first_use(op->root, queue, value);
}

// The memory is |ptr|: the root is live (counted already when |counted|).
static void hl_alloca_commit(hl_alloca_op_t* op, void* ptr, bool counted) {
  hl_root_t* root = op->root;
  // Release stores (no full barrier each): a reader that sees LIVE sees
  // the pointer, and the root's last release is ordered after this by the
  // op's reference.
  atomic_store_explicit(&root->ptr, ptr, memory_order_release);
  atomic_store_explicit(&root->state, HL_ROOT_LIVE, memory_order_release);
  if (!counted) {
    hl_memory_note(root->device, op->queue_id, HL_MEMORY_EVENT_ALLOCA,
                   root->size);
  }
  hl_memory_history_alloc(root->device, ptr, root->size, op->queue_id);
  HL_TRACE_INSTANT("alloca", root->size);
}

// Allocates from the pool on |op->stream|; out of memory trims the pool and
// retries once.
static hl_status_t hl_alloca_allocate(void* user) {
  hl_alloca_op_t* op = (hl_alloca_op_t*)user;
  hl_root_t* root = op->root;
  HL_TRACE_ZONE_BEGIN(zone, "hl_queue_alloca.allocate");
  void* ptr = NULL;
  hl_suballoc_cover_t cover = {root->alloca_cover, op->cover_count};
  hl_status_t st = hl_memory_pool_alloc(root, op->stream, op->queue_id,
                                        op->timeline, op->value, &cover, &ptr);
  if (st && hl_status_code(st) == HL_STATUS_RESOURCE_EXHAUSTED) {
    uint64_t used = 0, reserved = 0;
    hl_memory_pool_usage(op->device, &used, &reserved);
    hl_memory_note(op->device, op->queue_id, HL_MEMORY_EVENT_OOM, 0);
    st = hl_status_annotate(
        st,
        "queue_alloca of %llu bytes on queue %u: out of memory after trim "
        "and retry (pool used %llu, reserved %llu bytes)",
        (unsigned long long)root->size, op->queue_id, (unsigned long long)used,
        (unsigned long long)reserved);
  }
  if (st) {
    hl_root_fail_allocation(root, st);
    HL_TRACE_ZONE_END(zone);
    return st;
  }
  hl_alloca_commit(op, ptr, false);
  HL_TRACE_ZONE_END(zone);
  return NULL;
}

// The alloca on a quiet queue (hl_op_vtable_t.run_at_once): served from
// hipline's suballocator without growing it, it needs no stream, because
// everything before it on the queue (its frees included) has completed.
static bool hl_alloca_run_at_once(hl_op_t* base, hl_queue_t* queue,
                                  uint64_t value, hl_status_t* out_status) {
  (void)queue;
  (void)value;
  (void)out_status;
  hl_alloca_op_t* op = (hl_alloca_op_t*)base;
  hl_root_t* root = op->root;
  void* ptr = NULL;
  if (!hl_memory_pool_try_alloc(root, op->queue_id, &ptr)) return false;
  hl_alloca_commit(op, ptr, true);
  return true;
}

// The submission failed before the alloca was issued (a failed wait, a
// failed queue): the memory never comes, and users of the buffer issued
// after it fail with that status.
static void hl_alloca_on_cancel(hl_op_t* base, hl_status_t status) {
  hl_root_fail_allocation(((hl_alloca_op_t*)base)->root, status);
}

static hl_status_t hl_alloca_issue(hl_op_t* base, hl_issue_ctx_t* ctx) {
  hl_alloca_op_t* op = (hl_alloca_op_t*)base;
  op->device = ctx->device;
  op->stream = ctx->stream;
  op->timeline = hl_queue_timeline(ctx->queue);
  // What the alloca is ordered after: a block another queue freed behind
  // that frontier is free by the time the alloca runs (its waits and the
  // queue's earlier ones come first on the stream).
  op->cover_count =
      ctx->device->pool_mode == HL_POOL_MODE_HIPLINE
          ? hl_queue_frontier_snapshot(ctx->queue, op->root->alloca_cover)
          : 0;
  // Where the backend runs stream work in order (stream_ordered_host_work)
  // the pool sees allocations and frees in execution order, so a block
  // freed on this stream is reused at once however far the host has run
  // ahead; elsewhere the stream-ordered pool gives that at enqueue time.
  return hl_stream_work_issue(ctx, &op->gate, hl_alloca_allocate, op, true);
}

static void hl_alloca_release(hl_op_t* base, hl_status_t status) {
  hl_alloca_op_t* op = (hl_alloca_op_t*)base;
  hl_root_op_release(NULL, base, op->root, op->owns_root, false);
}

static bool hl_alloca_release_light(hl_op_t* base, hl_status_t status) {
  hl_alloca_op_t* op = (hl_alloca_op_t*)base;
  return hl_root_op_release(NULL, base, op->root, op->owns_root, true);
}

static void hl_alloca_own_refs(hl_op_t* base) {
  hl_alloca_op_t* op = (hl_alloca_op_t*)base;
  hl_root_op_own(op->root, &op->owns_root);
}

HL_POOL_OP_VTABLES(hl_alloca);

hl_status_t hl_queue_alloca(hl_queue_t* queue, const hl_fence_t* wait_fence,
                            const hl_fence_t* signal_fence, uint64_t size,
                            uint32_t flags, hl_buffer_t** out_buffer) {
  if (!out_buffer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_alloca: out_buffer is NULL");
  }
  *out_buffer = NULL;
  if (!queue) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_alloca: queue is NULL");
  }
  if (size == 0) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_alloca of 0 bytes on queue %u",
                          hl_queue_id(queue));
  }
  if (size > HL_BUFFER_MAX_SIZE) {
    return HL_MAKE_STATUS(
        HL_STATUS_OUT_OF_RANGE,
        "hl_queue_alloca of %llu bytes on queue %u exceeds the "
        "2^48-byte limit",
        (unsigned long long)size, hl_queue_id(queue));
  }
  if (flags != 0) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_alloca: unknown flags 0x%x", flags);
  }
  // A device-sync release owed by the completion thread stalls the
  // allocating thread here, as stop-the-world would.
  hl_memory_pay_owed_drains(hl_queue_device(queue));
  hl_buffer_t* buffer = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_root_create_async(queue, size, &buffer));
  // The op lives in the root, which the alloca made zeroed.
  hl_alloca_op_t* op = &buffer->root->alloca_op;
  op->base.vtable = hl_pool_ops_run_at_once(hl_queue_device(queue))
                        ? &hl_alloca_vtable_at_once
                        : &hl_alloca_vtable;
  // Borrowed: |buffer| keeps the root alive until this call returns, and the
  // op takes its own reference if the submission outlives it (own_refs).
  op->root = buffer->root;
  op->queue_id = hl_queue_id(queue);
  hl_status_t st =
      hl_queue_submit(queue, wait_fence, signal_fence, &op->base, NULL);
  if (st) {
    hl_buffer_release(buffer);
    return st;
  }
  *out_buffer = buffer;
  return NULL;
}
