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

typedef struct hl_alloca_op_t {
  hl_op_t base;
  // An operation reference until the submission completes, once |owns_root|;
  // until then borrowed from hl_queue_alloca (the buffer it returns).
  hl_root_t* root;
  bool owns_root;
  uint32_t queue_id;
  uint64_t value;            // The alloca's submission on its queue.
  hl_semaphore_t* timeline;  // The queue's (borrowed while in flight).
  hl_device_t* device;
  hl_backend_stream_t* stream;
  hl_gated_t gate;
  // The queue's wait frontier when the alloca was issued (hipline's pool):
  // blocks whose free it covers are reused.
  size_t cover_count;
  hl_timepoint_id_t cover[HL_QUEUE_FRONTIER_CAPACITY];
} hl_alloca_op_t;

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
  hl_suballoc_cover_t cover = {op->cover, op->cover_count};
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
  op->cover_count = ctx->device->pool_mode == HL_POOL_MODE_HIPLINE
                        ? hl_queue_frontier_snapshot(ctx->queue, op->cover)
                        : 0;
  // Where the backend runs stream work in order (stream_ordered_host_work)
  // the pool sees allocations and frees in execution order, so a block
  // freed on this stream is reused at once however far the host has run
  // ahead; elsewhere the stream-ordered pool gives that at enqueue time.
  return hl_stream_work_issue(ctx, &op->gate, hl_alloca_allocate, op, true);
}

// Ops are recycled (base/recycler.h).
static hl_recycler_t hl_alloca_op_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_alloca_op_t), 4096, "an alloca op");

// Releases an op whose one resource is its reference on |root| (when it
// |owns| one: a borrowed reference is its submitter's); with |light|, only
// where that is not the root's last reference (see
// hl_op_vtable_t.release_light).
static bool hl_root_op_release(hl_recycler_t* recycler, hl_op_t* op,
                               hl_root_t* root, bool owns, bool light) {
  if (!owns) {
    // Nothing to drop.
  } else if (!light) {
    hl_root_release_for_op(root);
  } else if (!hl_root_release_for_op_unless_last(root)) {
    return false;
  }
  hl_recycler_free(recycler, op);
  return true;
}

static void hl_alloca_release(hl_op_t* base, hl_status_t status) {
  hl_alloca_op_t* op = (hl_alloca_op_t*)base;
  hl_root_op_release(&hl_alloca_op_recycler_, base, op->root, op->owns_root,
                     false);
}

static bool hl_alloca_release_light(hl_op_t* base, hl_status_t status) {
  hl_alloca_op_t* op = (hl_alloca_op_t*)base;
  return hl_root_op_release(&hl_alloca_op_recycler_, base, op->root,
                            op->owns_root, true);
}

// An op's own operation reference on |root|, in place of the one it
// borrowed (own_refs: the submission may outlive its submitter's call).
static void hl_root_op_own(hl_root_t* root, bool* owns) {
  if (*owns) return;
  hl_root_retain_for_op(root);
  *owns = true;
}

static void hl_alloca_own_refs(hl_op_t* base) {
  hl_alloca_op_t* op = (hl_alloca_op_t*)base;
  hl_root_op_own(op->root, &op->owns_root);
}

// The two vtables of a pool op (hl_alloca, hl_dealloca): with hipline's
// suballocator (outside checked mode) its op may run at once; with the
// driver's pool it never can, so it does not ask.
#define HL_POOL_OP_FIELDS(op)                                                \
  .issue = op##_issue, .release = op##_release, .on_submit = op##_on_submit, \
  .on_cancel = op##_on_cancel, .release_light = op##_release_light,          \
  .own_refs = op##_own_refs
#define HL_POOL_OP_VTABLES(op)                                       \
  static const hl_op_vtable_t op##_vtable = {HL_POOL_OP_FIELDS(op)}; \
  static const hl_op_vtable_t op##_vtable_at_once = {                \
      HL_POOL_OP_FIELDS(op), .run_at_once = op##_run_at_once}
HL_POOL_OP_VTABLES(hl_alloca);

// Whether ops of |device|'s allocas and deallocas may run at once.
static bool hl_pool_ops_run_at_once(const hl_device_t* device) {
  return device->pool_mode == HL_POOL_MODE_HIPLINE && !device->checked;
}

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
  hl_alloca_op_t* op = NULL;
  hl_status_t st =
      hl_recycler_alloc_default(&hl_alloca_op_recycler_, (void**)&op);
  if (st) {
    hl_buffer_release(buffer);
    return st;
  }
  op->base.vtable = hl_pool_ops_run_at_once(hl_queue_device(queue))
                        ? &hl_alloca_vtable_at_once
                        : &hl_alloca_vtable;
  // Borrowed: |buffer| keeps the root alive until this call returns, and the
  // op takes its own reference if the submission outlives it (own_refs).
  op->root = buffer->root;
  op->queue_id = hl_queue_id(queue);
  st = hl_queue_submit(queue, wait_fence, signal_fence, &op->base, NULL);
  if (st) {
    hl_buffer_release(buffer);
    return st;
  }
  *out_buffer = buffer;
  return NULL;
}

//===----------------------------------------------------------------------===//
// Dealloca
//===----------------------------------------------------------------------===//

typedef struct hl_dealloca_op_t {
  hl_op_t base;
  // An operation reference once |owns_root|; until then borrowed from the
  // caller of hl_root_dealloca_as.
  hl_root_t* root;
  bool owns_root;
  bool frees;  // ASYNC pool root: free on the stream.
  // The cancel check ran (at most once), or the free did (which settles it).
  atomic_bool settled;
  uint32_t queue_id;
  uint64_t value;
  hl_semaphore_t* timeline;  // The queue's (borrowed while in flight).
  hl_backend_stream_t* stream;
  hl_gated_t gate;
  const char* what;    // "queue_dealloca" or the fallback that scheduled it.
  uint64_t signal_id;  // The first signal of the submission (0: none).
  uint64_t signal_value;
} hl_dealloca_op_t;

// Stamps the root with this dealloca's timepoint: the pool lets its own
// queue reuse the memory at once and other queues once the timepoint is
// reached.
static void hl_dealloca_stamp(hl_dealloca_op_t* op) {
  op->root->free_timeline = op->timeline;
  op->root->free_queue_id = op->queue_id;
  op->root->free_value = op->value;
  op->root->free_signal_id = op->signal_id;
  op->root->free_signal_value = op->signal_value;
}

static void hl_dealloca_on_submit(hl_op_t* base, hl_queue_t* queue,
                                  uint64_t value) {
  hl_dealloca_op_t* op = (hl_dealloca_op_t*)base;
  op->value = value;
}

// Decides, once, whether the dealloca was cancelled: if it did not free, the
// buffer stays valid and may be deallocated again. Runs before the
// submission's signals are published, so a caller that sees the failed
// signal can retry at once.
static void hl_dealloca_settle(hl_dealloca_op_t* op) {
  // A free that ran settled it (hl_dealloca_freed), earlier in stream order.
  if (atomic_load_explicit(&op->settled, memory_order_acquire)) return;
  if (atomic_exchange(&op->settled, true) || !op->frees) return;
  atomic_store(&op->root->dealloca_scheduled, false);
  hl_memory_note(op->root->device, op->queue_id,
                 HL_MEMORY_EVENT_DEALLOCA_CANCELLED, 0);
}

static void hl_dealloca_settle_fn(void* user) {
  hl_dealloca_settle((hl_dealloca_op_t*)user);
}

// The free succeeded (hl_root_free_memory counted the dealloca): nothing is
// left for the settle step, later in stream order, to decide.
static void hl_dealloca_freed(hl_dealloca_op_t* op) {
  atomic_store_explicit(&op->settled, true, memory_order_release);
}

// The stream work: mark the root freed and return its memory on the stream.
// The root dies exactly when this runs (checked mode sees later uses).
static hl_status_t hl_dealloca_free(void* user) {
  hl_dealloca_op_t* op = (hl_dealloca_op_t*)user;
  hl_root_t* root = op->root;
  if (atomic_load(&root->state) != HL_ROOT_LIVE) return NULL;  // Alloca failed.
  hl_dealloca_stamp(op);
  hl_root_freer_t who = {op->what, op->queue_id, op->value};
  hl_status_t st = hl_root_free_memory(root, op->stream, who);
  if (!st) hl_dealloca_freed(op);
  return st;
}

static hl_status_t hl_dealloca_issue(hl_op_t* base, hl_issue_ctx_t* ctx) {
  hl_dealloca_op_t* op = (hl_dealloca_op_t*)base;
  if (!op->frees) return NULL;  // A barrier: the waits were the point.
  op->stream = ctx->stream;
  op->timeline = hl_queue_timeline(ctx->queue);
  HL_TRACE_INSTANT("dealloca", op->root->size);
  // A failure that skips the free (before issue: hl_dealloca_on_cancel; up to
  // the stream's point with stream_ordered_host_work: the gate) cancels the
  // dealloca; whether it freed is settled right after, before the signals
  // are published.
  hl_status_t st = hl_stream_work_issue_then(ctx, &op->gate, hl_dealloca_free,
                                             op, hl_dealloca_settle_fn, op);
  if (st) hl_dealloca_settle(op);
  return st;
}

// The dealloca on a quiet queue (hl_op_vtable_t.run_at_once): every use of
// the root has completed (the submission's waits, which hold the uses on
// other queues, are reached, and this queue has nothing in flight), so a
// suballocation goes back to hipline's pool now, with no stream work.
static bool hl_dealloca_run_at_once(hl_op_t* base, hl_queue_t* queue,
                                    uint64_t value, hl_status_t* out_status) {
  hl_dealloca_op_t* op = (hl_dealloca_op_t*)base;
  op->value = value;  // Its free is stamped with it (on_submit may follow).
  if (!op->frees) return true;  // A barrier: the waits were the point.
  hl_root_t* root = op->root;
  // A root whose alloca failed is the stream path's to cancel; memory from
  // anything but a suballocation is a backend call to free.
  if (atomic_load_explicit(&root->state, memory_order_acquire) !=
          HL_ROOT_LIVE ||
      !hl_memory_pool_frees_locally(root)) {
    return false;
  }
  op->stream = hl_queue_stream(queue);
  op->timeline = hl_queue_timeline(queue);
  HL_TRACE_INSTANT("dealloca", root->size);
  hl_status_t st = hl_dealloca_free(op);
  if (st) hl_dealloca_settle(op);
  *out_status = st;
  return true;
}

static void hl_dealloca_on_cancel(hl_op_t* base, hl_status_t status) {
  (void)status;
  hl_dealloca_settle((hl_dealloca_op_t*)base);
}

static hl_recycler_t hl_dealloca_op_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_dealloca_op_t), 4096, "a dealloca op");

static void hl_dealloca_release(hl_op_t* base, hl_status_t status) {
  hl_dealloca_op_t* op = (hl_dealloca_op_t*)base;
  hl_root_op_release(&hl_dealloca_op_recycler_, base, op->root, op->owns_root,
                     false);
}

static bool hl_dealloca_release_light(hl_op_t* base, hl_status_t status) {
  hl_dealloca_op_t* op = (hl_dealloca_op_t*)base;
  return hl_root_op_release(&hl_dealloca_op_recycler_, base, op->root,
                            op->owns_root, true);
}

static void hl_dealloca_own_refs(hl_op_t* base) {
  hl_dealloca_op_t* op = (hl_dealloca_op_t*)base;
  hl_root_op_own(op->root, &op->owns_root);
}

HL_POOL_OP_VTABLES(hl_dealloca);

hl_queue_t* hl_buffer_affinity_queue(const hl_buffer_t* buffer) {
  return buffer ? buffer->root->affinity_queue : NULL;
}

hl_status_t hl_queue_dealloca(hl_queue_t* queue, const hl_fence_t* wait_fence,
                              const hl_fence_t* signal_fence,
                              hl_buffer_t* buffer) {
  if (!buffer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_dealloca: buffer is NULL");
  }
  // No queue named: the buffer's origin (affinity) queue, as IREE does.
  if (!queue) queue = buffer->root->affinity_queue;
  if (!queue) {
    return HL_MAKE_STATUS(
        HL_STATUS_INVALID_ARGUMENT,
        "hl_queue_dealloca: no queue named and root %llu (%s) has no origin "
        "queue; name the queue to free it on",
        (unsigned long long)buffer->root->id,
        hl_buffer_origin_name(hl_buffer_origin(buffer)));
  }
  return hl_root_dealloca(queue, wait_fence, signal_fence, buffer->root);
}

hl_status_t hl_root_dealloca(hl_queue_t* queue, const hl_fence_t* wait_fence,
                             const hl_fence_t* signal_fence, hl_root_t* root) {
  return hl_root_dealloca_as(queue, wait_fence, signal_fence, root,
                             "queue_dealloca");
}

hl_status_t hl_root_dealloca_as(hl_queue_t* queue, const hl_fence_t* wait_fence,
                                const hl_fence_t* signal_fence, hl_root_t* root,
                                const char* who) {
  if (root->device != hl_queue_device(queue)) {
    return HL_MAKE_STATUS(
        HL_STATUS_INVALID_ARGUMENT,
        "hl_queue_dealloca: root %llu belongs to another device",
        (unsigned long long)root->id);
  }
  bool expected = false;
  if (!atomic_compare_exchange_strong(&root->dealloca_scheduled, &expected,
                                      true)) {
    return HL_MAKE_STATUS(
        HL_STATUS_FAILED_PRECONDITION,
        "double dealloca: root %llu (%llu bytes) already has a "
        "dealloca scheduled or done",
        (unsigned long long)root->id, (unsigned long long)root->size);
  }
  if (atomic_load(&root->state) == HL_ROOT_FREED) {
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "dealloca of root %llu, which was already freed",
                          (unsigned long long)root->id);
  }
  hl_dealloca_op_t* op = NULL;
  // The caller's waits and the root's uses, on the stack (it only lives
  // through the submit). Uses on this queue's own timeline are left out:
  // queue order covers them (the submission would elide them anyway).
  hl_fence_t waits;
  hl_fence_init_embedded(&waits, NULL);
  hl_status_t st =
      hl_recycler_alloc_default(&hl_dealloca_op_recycler_, (void**)&op);
  if (!st) st = hl_fence_join(&waits, wait_fence);
  // Only the alloca's use on this (its affinity) queue: queue order covers
  // it, and the root's lock is not needed to know (uses_recorded). A use
  // recorded by a submission ordered before this call is seen; one racing
  // with it is unordered with the dealloca either way.
  bool own_uses_only =
      queue == root->affinity_queue &&
      !atomic_load_explicit(&root->uses_recorded, memory_order_acquire);
  if (!st && !own_uses_only) {
    hl_semaphore_t* own = hl_queue_timeline(queue);
    hl_spinlock_lock(&root->lock);
    for (size_t i = 0; i < root->use_fence->count && !st; ++i) {
      hl_fence_entry_t e = root->use_fence->entries[i];
      if (e.semaphore != own)
        st = hl_fence_insert(&waits, e.semaphore, e.value);
    }
    hl_spinlock_unlock(&root->lock);
  }
  if (st) {
    atomic_store(&root->dealloca_scheduled, false);
    hl_fence_deinit_embedded(&waits);
    hl_recycler_free(&hl_dealloca_op_recycler_, op);
    return st;
  }
  op->base.vtable = hl_pool_ops_run_at_once(root->device)
                        ? &hl_dealloca_vtable_at_once
                        : &hl_dealloca_vtable;
  // Borrowed from the caller, which holds a reference through this call;
  // the op takes its own if the submission outlives it (own_refs).
  op->root = root;
  op->frees = root->memory == HL_ROOT_MEMORY_POOL &&
              atomic_load(&root->origin) == HL_BUFFER_ORIGIN_ASYNC;
  atomic_init(&op->settled, false);
  op->queue_id = hl_queue_id(queue);
  op->what = who;
  op->signal_id = 0;
  op->signal_value = 0;
  if (signal_fence && signal_fence->count) {
    op->signal_id = signal_fence->entries[0].semaphore->id;
    op->signal_value = signal_fence->entries[0].value;
  }
  st = hl_queue_submit(queue, &waits, signal_fence, &op->base, NULL);
  hl_fence_deinit_embedded(&waits);
  if (st) {
    // Not submitted (the queue has failed): nothing was scheduled.
    atomic_store(&root->dealloca_scheduled, false);
  }
  return st;
}
