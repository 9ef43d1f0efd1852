// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// How a root's memory goes back: the queue-ordered dealloca op
// (hl_queue_dealloca; the rules it keeps are in alloca.c's opening comment),
// a root's last references, and the fallback release they may start
// (freeing a root whose last buffer went without a dealloca, in one of the
// modes described below). One file because the two recurse: the fallback
// frees an un-escaped root with a queue-ordered dealloca
// (hl_root_dealloca_as), and a dealloca whose wait failed drops the last
// reference of a still-live root, which then goes to the fallback as an
// orphan (hl_root_release_for_op).

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/log.h"
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

//===----------------------------------------------------------------------===//
// A root's last references
//===----------------------------------------------------------------------===//

static void hl_root_last_release(hl_root_t* root);

void hl_root_release_for_op(hl_root_t* root) {
  uint64_t old = atomic_fetch_sub_explicit(&root->refs, HL_ROOT_OP_REF,
                                           memory_order_acq_rel);
  if ((uint32_t)old == 1) hl_root_last_release(root);
}

// True when the memory of |root| would need the fallback if its last buffer
// went now: it is (or will be) allocated, nothing frees it in queue order yet
// and the fallback has not taken over already.
static bool hl_root_wants_fallback(hl_root_t* root) {
  int state = atomic_load(&root->state);
  return (state == HL_ROOT_LIVE || state == HL_ROOT_PENDING) &&
         !atomic_load(&root->dealloca_scheduled) &&
         !atomic_load(&root->fallback_started);
}

void hl_root_release(hl_root_t* root) {
  if (!root) return;
  // Acquire: a reference dropped on another thread is ordered before this.
  uint64_t old = atomic_load_explicit(&root->refs, memory_order_acquire);
  if (old == 1 && !hl_root_wants_fallback(root)) {
    // The caller holds the only reference (no operation holds one), so no
    // other thread can take or drop one (every retain starts from a held
    // reference): the count needs no read-modify-write to reach zero.
    atomic_store_explicit(&root->refs, 0, memory_order_relaxed);
    hl_root_last_release(root);
    return;
  }
  for (;;) {
    uint32_t total = (uint32_t)old;
    uint32_t ops = (uint32_t)(old >> 32);
    if (total - ops == 1 && hl_root_wants_fallback(root)) {
      // The last buffer goes (operations may still be in flight): turn this
      // reference into an operation reference owned by the fallback, so the
      // fallback acts now, on the releasing thread, with the root's use
      // fence complete (every in-flight operation recorded its use when it
      // was submitted). Nobody else can reach the root any more.
      if (atomic_compare_exchange_weak_explicit(
              &root->refs, &old, old + (UINT64_C(1) << 32),
              memory_order_acq_rel, memory_order_relaxed)) {
        atomic_store(&root->fallback_started, true);
        hl_memory_fallback_release(root);
        return;
      }
      continue;
    }
    if (atomic_compare_exchange_weak_explicit(&root->refs, &old, old - 1,
                                              memory_order_acq_rel,
                                              memory_order_relaxed)) {
      if (total == 1) hl_root_last_release(root);
      return;
    }
  }
}

static void hl_root_last_release(hl_root_t* root) {
  int state = atomic_load(&root->state);
  if (state == HL_ROOT_LIVE) {
    // Still live with no reference left: a dealloca (explicit, an import's
    // or the ordered fallback's) was cancelled because one of its waits
    // failed after the last buffer went. Free it the conservative way.
    hl_memory_fallback_orphan(root);
    return;
  }
  // Otherwise the memory is gone already (freed), or there never was any
  // (the alloca failed or never ran): only the metadata remains.
  hl_root_destroy(root);
}

//===----------------------------------------------------------------------===//
// Fallback release
//===----------------------------------------------------------------------===//
//
// When the last buffer of a root goes without a dealloca, hl_root_release
// turns that reference into an operation reference owned by the fallback
// (hl_memory_fallback_release), so the decision is made on the releasing
// thread while operations may still be in flight; their uses are already in
// the root's use fence. The modes:
// - ORDERED: an un-escaped root gets a queue-ordered free on its affinity
//   queue after its use fence (hl_root_dealloca_as). Nothing waits.
// - FRONTIER (and escaped roots under ORDERED): free once every queue of the
//   device has reached what it had submitted at release time, and every
//   recorded use is reached.
// - DEVICE_SYNC: the releasing thread drains every stream of the device and
//   then frees. The completion thread never drains (it would stall every
//   completion behind the device while the submitter runs ahead): a release
//   there owes the drain to the next host thread that allocates on the device
//   (hl_memory_pay_owed_drains), with a frontier notification as the backstop
//   for a program that never allocates again.
// A root whose refcount reaches zero while still live (a dealloca cancelled
// by a failed wait after the last buffer went) is an orphan and is freed the
// frontier way (hl_memory_fallback_orphan).

struct hl_fallback_t {
  atomic_int refs;       // The notification and the owed list each hold one.
  hl_root_t* root;       // An operation reference, or the last one when orphan.
  bool orphan;           // Destroy the root when done (no reference is left).
  hl_fence_t* frontier;  // What every queue of the device had submitted.
  hl_fence_t* fence;     // |frontier| and every recorded use.
  const char* who;
  hl_fallback_t* next_owed;
  hl_fallback_t* next_deferred;
  bool failed;  // A pair of |fence| failed.
};

static bool hl_on_completion_thread(hl_device_t* device) {
  return thrd_equal(thrd_current(), device->work_thread);
}

// Drains every queue's stream of the device (stop-the-world).
static void hl_memory_drain_streams(hl_device_t* device) {
  HL_TRACE_ZONE_BEGIN(zone, "FallbackDrain");
  hl_queue_t** queues = NULL;
  uint32_t count = 0;
  hl_status_t st = hl_device_snapshot_queues(device, &queues, &count);
  if (st) {
    HL_LOG_ERROR("fallback release: cannot list queues: %s",
                 hl_status_message(st));
    hl_status_free(st);
    HL_TRACE_ZONE_END(zone);
    return;
  }
  for (uint32_t i = 0; i < count; ++i) {
    hl_queue_drain(queues[i]);
    hl_queue_release_internal(queues[i]);
  }
  free(queues);
  HL_TRACE_ZONE_END(zone);
}

// Frees the root's memory on its affinity stream unless another path did
// already (the owed drain and its backstop race; the first one frees).
static void hl_memory_fallback_free(hl_root_t* root, const char* who) {
  // Freed, or never allocated.
  if (!hl_root_mark_freed(root, hl_root_freer(who))) return;
  hl_backend_stream_t* stream =
      root->affinity_queue ? hl_queue_stream(root->affinity_queue) : NULL;
  hl_status_t st = hl_root_return_memory(root, stream);
  if (st) {
    HL_LOG_ERROR("fallback release of root %llu: %s",
                 (unsigned long long)root->id, hl_status_message(st));
    hl_status_free(st);
  }
}

// Drops the fallback's hold on |root| once its memory is dealt with.
static void hl_memory_fallback_done(hl_root_t* root, bool orphan) {
  if (orphan) {
    hl_root_destroy(root);
  } else {
    hl_root_release_for_op(root);
  }
}

static void hl_fallback_unref(hl_fallback_t* fb) {
  if (atomic_fetch_sub(&fb->refs, 1) != 1) return;
  hl_root_t* root = fb->root;
  bool orphan = fb->orphan;
  hl_fence_release(fb->frontier);
  hl_fence_release(fb->fence);
  free(fb);
  hl_memory_fallback_done(root, orphan);
}

static void hl_memory_frontier_finish(hl_fallback_t* fb, bool failed);

static void hl_memory_failed_streams_fired(void* user, hl_status_t status) {
  hl_memory_frontier_finish((hl_fallback_t*)user, status != NULL);
}

// A pair of |fb->fence| failed: a queue failed, so its timeline will not
// say when its stream is done with the memory, but the queue's done
// semaphore will (it counts failed submissions too and never fails).
// Replaces each failed pair with its queue's done pair and waits again,
// without blocking. Returns false when that cannot be arranged: a failed
// timeline that is no queue of this device (another device's use), or no
// memory; the caller drains then.
static bool hl_memory_await_failed_streams(hl_fallback_t* fb) {
  hl_device_t* device = fb->root->device;
  hl_fence_t* fence = NULL;
  hl_queue_t** queues = NULL;
  uint32_t count = 0;
  hl_status_t st = hl_fence_create(device->host_allocator, &fence);
  if (!st) st = hl_device_snapshot_queues(device, &queues, &count);
  for (size_t i = 0; !st && i < fb->fence->count; ++i) {
    hl_fence_entry_t e = fb->fence->entries[i];
    if (hl_semaphore_failure(e.semaphore)) {
      hl_semaphore_t* done = NULL;
      for (uint32_t q = 0; q < count && !done; ++q) {
        if (hl_queue_timeline(queues[q]) == e.semaphore) {
          done = hl_queue_done(queues[q]);
        }
      }
      if (!done) {
        st = HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                            "a failed timeline of another device");
        continue;  // Ends the loop.
      }
      e.semaphore = done;
    }
    st = hl_fence_insert(fence, e.semaphore, e.value);
  }
  for (uint32_t q = 0; q < count; ++q) hl_queue_release_internal(queues[q]);
  free(queues);
  if (!st) {
    st = hl_fence_notify(fence, device, hl_memory_failed_streams_fired, fb);
  }
  if (!st) {
    hl_fence_release(fb->fence);
    fb->fence = fence;
    return true;
  }
  hl_status_free(st);
  hl_fence_release(fence);
  return false;
}

static void hl_memory_frontier_finish(hl_fallback_t* fb, bool failed) {
  if (failed && atomic_load(&fb->root->state) == HL_ROOT_LIVE) {
    // The completion thread never drains: it waits for the failed queues'
    // streams instead. Elsewhere, and where that cannot be arranged, drain
    // the streams themselves (an error path).
    if (hl_on_completion_thread(fb->root->device) &&
        hl_memory_await_failed_streams(fb)) {
      return;
    }
    hl_memory_drain_streams(fb->root->device);
  }
  hl_memory_fallback_free(fb->root, fb->who);
  hl_fallback_unref(fb);
}

// Deferred frontier releases wait in one FIFO per device with a single
// notification armed on the oldest: frontiers grow with submission, so the
// oldest is (nearly always) reached first, and one waiter per device keeps
// every semaphore signal cheap however many releases are pending. When it
// fires, every release whose fence is reached (or failed) is freed and the
// notification moves on to the next one pending.
static void hl_memory_deferred_fired(void* user, hl_status_t status);

// Arms the device's notification on |next| (its fence is copied now).
static void hl_memory_deferred_arm(hl_device_t* device, hl_fallback_t* next) {
  hl_status_t st =
      hl_fence_notify(next->frontier, device, hl_memory_deferred_fired, device);
  if (!st) return;
  // Out of memory: nothing would wake the list, so degrade to stop-the-world
  // for everything pending.
  HL_LOG_ERROR("deferred fallback releases: cannot arm a notification: %s",
               hl_status_message(st));
  hl_status_free(st);
  hl_memory_state_t* state = hl_memory_state_get(device);
  mtx_lock(&state->mutex);
  hl_fallback_t* list = state->deferred_head;
  state->deferred_head = state->deferred_tail = NULL;
  state->deferred_armed = false;
  mtx_unlock(&state->mutex);
  hl_memory_drain_streams(device);
  while (list) {
    hl_fallback_t* fb = list;
    list = fb->next_deferred;
    hl_memory_fallback_free(fb->root, "fallback release (degraded)");
    hl_fallback_unref(fb);
  }
}

// A release whose queues are past its frontier but whose recorded uses are
// not all reached (one waits on a semaphore outside the device's queues):
// it leaves the FIFO, so it cannot hold up the others, and waits alone.
static void hl_memory_alone_fired(void* user, hl_status_t status) {
  hl_memory_frontier_finish((hl_fallback_t*)user, status != NULL);
}

static bool hl_fence_settled(const hl_fence_t* fence, bool* out_failed) {
  bool reached = false;
  hl_status_t failure = hl_fence_is_reached(fence, &reached);
  *out_failed = failure != NULL;
  hl_status_free(failure);
  return *out_failed || reached;
}

static void hl_memory_deferred_fired(void* user, hl_status_t status) {
  (void)status;  // Each release's own fences say whether one failed.
  hl_device_t* device = (hl_device_t*)user;
  hl_memory_state_t* state = hl_memory_state_get(device);
  hl_fallback_t* done = NULL;
  hl_fallback_t** done_tail = &done;
  hl_fallback_t* alone = NULL;
  mtx_lock(&state->mutex);
  hl_fallback_t** link = &state->deferred_head;
  hl_fallback_t* last = NULL;
  while (*link) {
    hl_fallback_t* fb = *link;
    bool failed = false;
    bool settled = hl_fence_settled(fb->fence, &failed);
    bool frontier_failed = false;
    bool alone_now =
        !settled && hl_fence_settled(fb->frontier, &frontier_failed);
    if (settled || alone_now) {
      fb->failed = failed;
      *link = fb->next_deferred;
      if (settled) {
        fb->next_deferred = NULL;
        *done_tail = fb;
        done_tail = &fb->next_deferred;
      } else {
        fb->next_deferred = alone;
        alone = fb;
      }
    } else {
      last = fb;
      link = &fb->next_deferred;
    }
  }
  state->deferred_tail = last;
  hl_fallback_t* next = state->deferred_head;
  state->deferred_armed = next != NULL;
  mtx_unlock(&state->mutex);
  while (done) {
    hl_fallback_t* fb = done;
    done = fb->next_deferred;
    hl_memory_frontier_finish(fb, fb->failed);
  }
  while (alone) {
    hl_fallback_t* fb = alone;
    alone = fb->next_deferred;
    fb->next_deferred = NULL;
    hl_status_t st =
        hl_fence_notify(fb->fence, device, hl_memory_alone_fired, fb);
    if (st) {
      HL_LOG_ERROR("fallback release of root %llu: %s; draining",
                   (unsigned long long)fb->root->id, hl_status_message(st));
      hl_status_free(st);
      hl_memory_frontier_finish(fb, true);
    }
  }
  if (next) hl_memory_deferred_arm(device, next);
}

// Frees |fb| once its fence is reached (or failed), on the completion
// thread. Never blocks.
static void hl_memory_defer(hl_fallback_t* fb) {
  hl_device_t* device = fb->root->device;
  hl_memory_state_t* state = NULL;
  hl_status_t st = hl_memory_state(device, &state);
  if (st) {
    hl_status_free(st);
    hl_memory_drain_streams(device);
    hl_memory_fallback_free(fb->root, "fallback release (degraded)");
    hl_fallback_unref(fb);
    return;
  }
  mtx_lock(&state->mutex);
  fb->next_deferred = NULL;
  if (state->deferred_tail) {
    state->deferred_tail->next_deferred = fb;
  } else {
    state->deferred_head = fb;
  }
  state->deferred_tail = fb;
  bool arm = !state->deferred_armed;
  state->deferred_armed = true;
  mtx_unlock(&state->mutex);
  if (arm) hl_memory_deferred_arm(device, fb);
}

// Builds the frontier fence of |root|: what every queue of its device has
// submitted so far, plus every recorded use (which may name other devices'
// queues).
static hl_status_t hl_memory_frontier_fence(hl_root_t* root,
                                            hl_fence_t** out_frontier,
                                            hl_fence_t** out_fence) {
  hl_device_t* device = root->device;
  hl_fence_t* frontier = NULL;
  hl_fence_t* fence = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_fence_create(device->host_allocator, &frontier));
  hl_status_t st = hl_fence_create(device->host_allocator, &fence);
  hl_queue_t** queues = NULL;
  uint32_t count = 0;
  if (!st) st = hl_device_snapshot_queues(device, &queues, &count);
  for (uint32_t i = 0; i < count; ++i) {
    if (!st) {
      st = hl_fence_insert(frontier, hl_queue_timeline(queues[i]),
                           hl_queue_submitted_value(queues[i]));
    }
    hl_queue_release_internal(queues[i]);
  }
  free(queues);
  if (!st) st = hl_fence_join(fence, frontier);
  if (!st) {
    hl_spinlock_lock(&root->lock);
    st = hl_fence_join(fence, root->use_fence);
    hl_spinlock_unlock(&root->lock);
  }
  if (st) {
    hl_fence_release(frontier);
    hl_fence_release(fence);
    return st;
  }
  *out_frontier = frontier;
  *out_fence = fence;
  return NULL;
}

static hl_fallback_t* hl_fallback_new(hl_root_t* root, bool orphan,
                                      const char* who, hl_status_t* out_st) {
  hl_fallback_t* fb = calloc(1, sizeof(*fb));
  if (!fb) {
    *out_st = HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                             "allocating a fallback release");
    return NULL;
  }
  atomic_init(&fb->refs, 1);
  fb->root = root;
  fb->orphan = orphan;
  fb->who = who;
  *out_st = hl_memory_frontier_fence(root, &fb->frontier, &fb->fence);
  if (*out_st) {
    free(fb);
    return NULL;
  }
  return fb;
}

// The frontier release: frees at once when the frontier is already reached,
// otherwise on the completion thread once it is. Never blocks (except to
// drain on the error path where the deferred free cannot be arranged, and
// never on the completion thread: there the root waits for its uses only).
static void hl_memory_frontier(hl_root_t* root, bool orphan) {
  hl_device_t* device = root->device;
  uint32_t queue_id =
      root->affinity_queue ? hl_queue_id(root->affinity_queue) : UINT32_MAX;
  HL_TRACE_ZONE_BEGIN(zone, "FallbackFrontier");
  hl_memory_note(device, queue_id, HL_MEMORY_EVENT_FALLBACK_FRONTIER, 0);
  const char* who = "fallback release (frontier)";
  hl_status_t st = NULL;
  hl_fallback_t* fb = hl_fallback_new(root, orphan, who, &st);
  if (fb) {
    bool reached = false;
    hl_status_t failure = hl_fence_is_reached(fb->fence, &reached);
    if (!failure && reached) {
      // Every queue is already past its value: free now, on this thread.
      hl_memory_frontier_finish(fb, false);
      HL_TRACE_ZONE_END(zone);
      return;
    }
    hl_status_free(failure);
    hl_memory_defer(fb);
    HL_TRACE_ZONE_END(zone);
    return;
  }
  // Could not arrange the deferred free (out of memory): do the
  // stop-the-world one.
  HL_LOG_WARN("frontier release of root %llu degraded to device-sync: %s",
              (unsigned long long)root->id, hl_status_message(st));
  hl_status_free(st);
  hl_memory_drain_streams(device);
  hl_memory_fallback_free(root, "fallback release (frontier, degraded)");
  hl_memory_fallback_done(root, orphan);
  HL_TRACE_ZONE_END(zone);
}

void hl_memory_fallback_orphan(hl_root_t* root) {
  hl_memory_frontier(root, /*orphan=*/true);
}

// After a drain every operation issued on the device's streams has run, so
// the root is idle unless a use is still waiting to be issued (a submission
// blocked on a semaphore nobody has signalled yet). A failed use will never
// be issued.
static bool hl_memory_idle_after_drain(hl_root_t* root) {
  hl_spinlock_lock(&root->lock);
  bool reached = false;
  hl_status_t failure = hl_fence_is_reached(root->use_fence, &reached);
  hl_spinlock_unlock(&root->lock);
  if (failure) {
    hl_status_free(failure);
    return true;
  }
  return reached;
}

// Takes the owed list of |state| (NULL when empty).
static hl_fallback_t* hl_memory_take_owed(hl_memory_state_t* state) {
  if (atomic_load(&state->owed_count) == 0) return NULL;
  mtx_lock(&state->mutex);
  hl_fallback_t* list = state->owed;
  state->owed = NULL;
  atomic_store(&state->owed_count, 0);
  mtx_unlock(&state->mutex);
  return list;
}

// Frees every owed root that the drain just made idle; the others keep
// their frontier notification.
static void hl_memory_settle_owed(hl_fallback_t* list) {
  while (list) {
    hl_fallback_t* fb = list;
    list = fb->next_owed;
    if (hl_memory_idle_after_drain(fb->root)) {
      hl_memory_fallback_free(fb->root, fb->who);
    }
    hl_fallback_unref(fb);
  }
}

void hl_memory_pay_owed_drains(hl_device_t* device) {
  // NULL-checked: hl_queue_device's NULL result, inlined, otherwise made
  // GCC 12's LTO warn -Wstringop-overflow about the state's load.
  hl_memory_state_t* state = device ? hl_memory_state_get(device) : NULL;
  if (HL_LIKELY(!state || atomic_load_explicit(&state->owed_count,
                                               memory_order_relaxed) == 0)) {
    return;
  }
  if (hl_on_completion_thread(device)) return;
  hl_fallback_t* owed = hl_memory_take_owed(state);
  if (!owed) return;
  HL_TRACE_ZONE_BEGIN(zone, "FallbackDeviceSyncOwed");
  hl_memory_drain_streams(device);
  hl_memory_settle_owed(owed);
  HL_TRACE_ZONE_END(zone);
}

// DEVICE_SYNC on the completion thread: owe the drain, with a frontier
// notification as the backstop.
static void hl_memory_device_sync_owe(hl_root_t* root, uint32_t queue_id) {
  hl_device_t* device = root->device;
  hl_memory_state_t* state = NULL;
  hl_status_t st = hl_memory_state(device, &state);
  hl_fallback_t* fb =
      st ? NULL
         : hl_fallback_new(root, false, "fallback release (device-sync, owed)",
                           &st);
  if (!fb) {
    HL_LOG_WARN(
        "device-sync release of root %llu on the completion thread: "
        "%s; taking the frontier path",
        (unsigned long long)root->id, hl_status_message(st));
    hl_status_free(st);
    hl_memory_frontier(root, false);
    return;
  }
  hl_memory_note(device, queue_id, HL_MEMORY_EVENT_FALLBACK_DEVICE_SYNC_OWED,
                 0);
  atomic_store(&fb->refs, 2);
  mtx_lock(&state->mutex);
  fb->next_owed = state->owed;
  state->owed = fb;
  atomic_fetch_add(&state->owed_count, 1);
  mtx_unlock(&state->mutex);
  hl_memory_defer(fb);  // The backstop.
}

static void hl_memory_device_sync(hl_root_t* root, uint32_t queue_id) {
  hl_device_t* device = root->device;
  hl_memory_note(device, queue_id, HL_MEMORY_EVENT_FALLBACK_DEVICE_SYNC, 0);
  if (hl_on_completion_thread(device)) {
    hl_memory_device_sync_owe(root, queue_id);
    return;
  }
  HL_TRACE_ZONE_BEGIN(zone, "FallbackDeviceSync");
  hl_memory_state_t* state = NULL;
  hl_status_t st = hl_memory_state(device, &state);
  hl_status_free(st);
  hl_fallback_t* owed = state ? hl_memory_take_owed(state) : NULL;
  hl_memory_drain_streams(device);
  hl_memory_settle_owed(owed);
  if (hl_memory_idle_after_drain(root)) {
    hl_memory_fallback_free(root, "fallback release (device-sync)");
    hl_root_release_for_op(root);
  } else {
    // A use is still waiting to be issued (its submission waits on a
    // semaphore not signalled yet, perhaps by this very thread later):
    // waiting here could deadlock, so free after every recorded use.
    hl_fallback_t* fb =
        hl_fallback_new(root, false, "fallback release (device-sync)", &st);
    if (fb) hl_memory_defer(fb);
    if (st) {
      HL_LOG_ERROR("device-sync release of root %llu: cannot defer: %s",
                   (unsigned long long)root->id, hl_status_message(st));
      hl_status_free(st);
      hl_root_release_for_op(root);  // Leaves it to the orphan path.
    }
  }
  HL_TRACE_ZONE_END(zone);
}

void hl_memory_fallback_release(hl_root_t* root) {
  hl_device_t* device = root->device;
  uint32_t queue_id =
      root->affinity_queue ? hl_queue_id(root->affinity_queue) : UINT32_MAX;
  switch (device->fallback) {
    case HL_FALLBACK_DEVICE_SYNC:
      hl_memory_device_sync(root, queue_id);
      return;
    case HL_FALLBACK_FRONTIER:
      hl_memory_frontier(root, false);
      return;
    default:
      break;
  }
  // ORDERED. A root that never escaped has a complete use fence: every use
  // went through hipline and was recorded when it was submitted.
  if (!atomic_load(&root->escaped) && root->affinity_queue &&
      root->memory == HL_ROOT_MEMORY_POOL &&
      atomic_load(&root->origin) == HL_BUFFER_ORIGIN_ASYNC) {
    HL_TRACE_ZONE_BEGIN(zone, "FallbackOrdered");
    hl_status_t st = hl_root_dealloca_as(root->affinity_queue, NULL, NULL, root,
                                         "fallback release (ordered)");
    if (!st) {
      hl_memory_note(device, queue_id, HL_MEMORY_EVENT_FALLBACK_ORDERED, 0);
      // The dealloca has its own operation reference if it outlived the
      // call (it borrowed this one until then).
      hl_root_release_for_op(root);
      HL_TRACE_ZONE_END(zone);
      return;
    }
    // The affinity queue has failed (or out of memory): the frontier path
    // copes with failed queues.
    HL_LOG_WARN(
        "ordered release of root %llu on queue %u failed: %s; taking "
        "the frontier path",
        (unsigned long long)root->id, queue_id, hl_status_message(st));
    hl_status_free(st);
    HL_TRACE_ZONE_END(zone);
  }
  hl_memory_frontier(root, false);
}
