// queue_dealloca: free in queue order (the rules it keeps are in alloca.c's
// opening comment).

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/recycler.h"
#include "runtime/base/trace.h"
#include "runtime/memory/memory_internal.h"

//===----------------------------------------------------------------------===//
// An op's reference on its root (alloca and dealloca ops)
//===----------------------------------------------------------------------===//

// Releases an op whose one resource is its reference on |root| (when it
// |owns| one: a borrowed reference is its submitter's); with |light|, only
// where that is not the root's last reference (see
// hl_op_vtable_t.release_light). An op embedded in |root| (no |recycler|)
// is not touched once the reference is gone: it may have taken the root.
bool hl_root_op_release(hl_recycler_t* recycler, hl_op_t* op, hl_root_t* root,
                        bool owns, bool light) {
  if (!owns) {
    // Nothing to drop.
  } else if (!light) {
    hl_root_release_for_op(root);
  } else if (!hl_root_release_for_op_unless_last(root)) {
    return false;
  }
  if (recycler) hl_recycler_free(recycler, op);
  return true;
}

// An op's own operation reference on |root|, in place of the one it
// borrowed (own_refs: the submission may outlive its submitter's call).
void hl_root_op_own(hl_root_t* root, bool* owns) {
  if (*owns) return;
  hl_root_retain_for_op(root);
  *owns = true;
}

//===----------------------------------------------------------------------===//
// Dealloca
//===----------------------------------------------------------------------===//

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

// Ops beyond a root's first dealloca are recycled.
static hl_recycler_t hl_dealloca_op_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_dealloca_op_t), 4096, "a dealloca op");

// The recycler of |op|, or NULL for the one embedded in its root.
static hl_recycler_t* hl_dealloca_op_recycler(hl_dealloca_op_t* op) {
  return op == &op->root->dealloca_op ? NULL : &hl_dealloca_op_recycler_;
}

static void hl_dealloca_release(hl_op_t* base, hl_status_t status) {
  hl_dealloca_op_t* op = (hl_dealloca_op_t*)base;
  hl_root_op_release(hl_dealloca_op_recycler(op), base, op->root, op->owns_root,
                     false);
}

static bool hl_dealloca_release_light(hl_op_t* base, hl_status_t status) {
  hl_dealloca_op_t* op = (hl_dealloca_op_t*)base;
  return hl_root_op_release(hl_dealloca_op_recycler(op), base, op->root,
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
  // The root's own op the first time (zeroed with the root, used once: a
  // later dealloca, after a cancelled one, may run while the first one's
  // op is still to be released). Only the winner of |dealloca_scheduled|
  // gets here, ordered after the previous one by it.
  hl_status_t st = NULL;
  if (!atomic_load_explicit(&root->dealloca_op_taken, memory_order_relaxed)) {
    atomic_store_explicit(&root->dealloca_op_taken, true, memory_order_relaxed);
    op = &root->dealloca_op;
  } else {
    st = hl_recycler_alloc_default(&hl_dealloca_op_recycler_, (void**)&op);
  }
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
    if (op != &root->dealloca_op)
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
