// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Queues: the queue object (creation, references, waits, drains, statistics),
// its submissions' lifetime, and the walks over a device's queues.
// Submitting is in submit.c, completing in completer.c.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/faults.h"
#include "runtime/base/log.h"
#include "runtime/base/recycler.h"
#include "runtime/base/time_util.h"
#include "runtime/base/trace.h"
#include "runtime/timeline/queue_internal.h"
#include "runtime/timeline/timeline_internal.h"

// Submissions are recycled (base/recycler.h): a steady stream of them makes
// no heap allocation.
hl_recycler_t hl_submission_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_submission_t), 4096, "a submission");

//===----------------------------------------------------------------------===//
// Submissions
//===----------------------------------------------------------------------===//

void hl_submission_fail(hl_submission_t* submission, hl_status_t status,
                        bool fail_queue) {
  if (!status) return;
  hl_status_t expected = NULL;
  if (!atomic_compare_exchange_strong(&submission->failure, &expected,
                                      status)) {
    hl_status_free(status);
  }
  if (fail_queue) atomic_store(&submission->fail_queue, true);
}

// Fails |sub| with a copy of |failure| (borrowed), the failure of a
// semaphore it waits on.
void hl_submission_fail_waited(hl_submission_t* sub, hl_status_t failure) {
  hl_submission_fail(
      sub,
      hl_status_annotate(hl_status_clone(failure),
                         "queue %u submission %llu waited on a failed "
                         "semaphore",
                         sub->queue->id, (unsigned long long)sub->value),
      false);
}

void hl_submission_describe(const hl_submission_t* submission, char* buffer,
                            size_t capacity) {
  snprintf(buffer, capacity, "queue %u submission %llu", submission->queue->id,
           (unsigned long long)submission->value);
}

// Takes the references of a |borrowed| submission: only its issuer, still
// inside hl_queue_submit, calls this, before the submission can outlive it.
void hl_submission_own_refs(hl_submission_t* sub) {
  if (!sub->borrowed) return;
  sub->borrowed = false;
  for (size_t i = 0; i < sub->wait_count + sub->signal_count; ++i) {
    hl_semaphore_retain(sub->waits[i].semaphore);  // Waits, then signals.
  }
  hl_queue_retain(sub->queue);
  for (hl_op_t* op = sub->ops; op; op = op->next) {
    if (op->vtable->own_refs) op->vtable->own_refs(op);
  }
}

// Frees what |sub| allocated for itself and recycles it.
static void hl_submission_recycle(hl_submission_t* sub) {
  if (sub->parks) free(sub->parks);
  if (sub->waits != sub->inline_entries) free(sub->waits);
  hl_recycler_free(&hl_submission_recycler_, sub);
}

void hl_submission_destroy(hl_work_t* work) {
  hl_submission_t* sub =
      (hl_submission_t*)((char*)work - offsetof(hl_submission_t, work));
  hl_status_t status = atomic_load(&sub->failure);
  hl_op_t* op = sub->ops;
  while (op) {
    hl_op_t* next = op->next;
    op->vtable->release(op, status);
    op = next;
  }
  // Never |borrowed| here (hl_submission_finish owns the references before
  // it leaves the destroy to the completion thread).
  for (size_t i = 0; i < sub->wait_count; ++i) {
    hl_semaphore_release(sub->waits[i].semaphore);
  }
  for (size_t i = 0; i < sub->signal_count; ++i) {
    hl_semaphore_release(sub->signals[i].semaphore);
  }
  hl_status_free(status);
  hl_queue_t* queue = sub->queue;
  hl_submission_recycle(sub);
  hl_queue_release_internal(queue);
}

// Finishes |sub| on the calling thread where that is cheap: releases the
// ops that can release anywhere and the semaphore and queue references that
// are not the last ones, and recycles the submission. Returns false when
// something is left for hl_submission_destroy on the completion thread
// (what was released is gone from |sub|). Any thread, any lock held.
bool hl_submission_destroy_light(hl_submission_t* sub) {
  hl_status_t status = atomic_load(&sub->failure);
  while (sub->ops) {
    hl_op_t* op = sub->ops;
    hl_op_t* next = op->next;
    if (!op->vtable->release_light || !op->vtable->release_light(op, status)) {
      return false;
    }
    sub->ops = next;
  }
  if (!sub->borrowed) {
    for (size_t i = 0; i < sub->wait_count + sub->signal_count; ++i) {
      // Waits and signals are one array.
      hl_fence_entry_t* e = &sub->waits[i];
      if (!hl_semaphore_release_unless_last(e->semaphore)) return false;
      e->semaphore = NULL;
    }
    if (!hl_queue_release_unless_last(sub->queue)) return false;
  }
  if (status) hl_status_free(status);
  hl_submission_recycle(sub);
  return true;
}

// Checks the waits for failures that happened after issue (host backend).
hl_status_t hl_submission_gate_check(void* user) {
  hl_submission_t* sub = (hl_submission_t*)user;
  for (size_t i = 0; i < sub->wait_count; ++i) {
    hl_status_t failure = hl_semaphore_failure(sub->waits[i].semaphore);
    if (failure) return hl_status_clone(failure);
  }
  return NULL;
}

// An issuer's span (hl_queue_t.issuers), changed under the queue's lock
// (a load and a store, no read-modify-write: hl_device_wait_issuers only
// reads it). Its effects become visible (its signals are published) after
// the begin, so a thread that saw them and then flushes sees the count;
// the end comes after the issuer's last use of the device.
void hl_queue_issuer_begin_locked(hl_queue_t* queue) {
  atomic_store_explicit(
      &queue->issuers,
      atomic_load_explicit(&queue->issuers, memory_order_relaxed) + 1,
      memory_order_relaxed);
}
void hl_queue_issuer_end_locked(hl_queue_t* queue) {
  atomic_store_explicit(
      &queue->issuers,
      atomic_load_explicit(&queue->issuers, memory_order_relaxed) - 1,
      memory_order_release);
}

// Wakes submitters blocked on the depth limit to look again. Never blocks
// (|space_mutex| is only held around a check and a wait).
void hl_queue_wake_submitters_locked(hl_queue_t* queue) {
  if (!queue->space_waiters) return;
  mtx_lock(&queue->space_mutex);
  ++queue->space_wakeups;
  cnd_broadcast(&queue->space_cond);
  mtx_unlock(&queue->space_mutex);
}

// A submission left the stream. The queue's lock held (safe from a host
// function: it only signals a condition variable). Submitters blocked on
// the depth limit are woken once an eighth of the depth is free, not at
// every completion: woken one at a time, a submitter and the stream move in
// lock step and each submission pays for a wake-up (a system call); woken
// late, the submitter hands the stream a burst.
void hl_queue_note_completion_locked(hl_queue_t* queue) {
  --queue->in_flight;
  if (!queue->space_waiters) return;
  uint32_t depth = queue->device->queue_depth;
  uint32_t slack = depth / 8 ? depth / 8 : 1;
  if ((uint64_t)queue->in_flight + queue->pending_count + slack <= depth) {
    hl_queue_wake_submitters_locked(queue);
  }
}

// Fails |queue| with |status| (consumed): its timeline fails, and the
// submissions not yet issued are failed too (the pump issues them as
// cancelled, which fails their signals in order). Work already on the stream
// is cancelled by its gate. The queue's lock held.
void hl_queue_fail_locked(hl_queue_t* queue, hl_status_t status) {
  if (!queue->failure) {
    queue->failure = hl_status_clone(status);
    atomic_store(&queue->failed, true);
  }
  hl_semaphore_fail_unlocked(queue->timeline, status);
  hl_queue_wake_submitters_locked(queue);  // They fail fast now.
  if (!queue->pending_head) return;
  for (hl_submission_t* p = queue->pending_head; p; p = p->next) {
    hl_submission_fail(p, hl_status_clone(queue->failure), false);
  }
  hl_queue_schedule_pump(queue);
}

hl_status_t hl_queue_create(hl_device_t* device, hl_queue_t** out_queue) {
  if (!device || !out_queue) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_create: NULL device or out_queue");
  }
  *out_queue = NULL;
  hl_queue_t* queue = NULL;
  HL_RETURN_IF_ERROR(hl_allocator_calloc(device->host_allocator, sizeof(*queue),
                                         (void**)&queue),
                     "creating a queue");
  atomic_init(&queue->ref_count, 1);
  queue->device = device;
  queue->id = atomic_fetch_add(&device->next_queue_id, 1);
  atomic_init(&queue->failed, false);
  atomic_init(&queue->pump_scheduled, false);
  atomic_init(&queue->issuers, 0);
  hl_spinlock_init(&queue->lock);
  if (mtx_init(&queue->space_mutex, mtx_plain) != thrd_success) {
    hl_allocator_free(device->host_allocator, queue);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "creating a queue's mutex");
  }
  if (cnd_init(&queue->space_cond) != thrd_success) {
    mtx_destroy(&queue->space_mutex);
    hl_allocator_free(device->host_allocator, queue);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "creating a queue's condition variable");
  }
  hl_status_t st =
      hl_semaphore_create(0, device->host_allocator, &queue->timeline);
  if (!st) {
    queue->timeline->queue_owned = true;
    st = hl_semaphore_create(0, device->host_allocator, &queue->done);
    if (st) {
      hl_semaphore_release(queue->timeline);
    } else {
      queue->done->queue_owned = true;
    }
  }
  if (!st) {
    st =
        device->backend->vtable->stream_create(device->backend, &queue->stream);
    if (st) {
      hl_semaphore_release(queue->timeline);
      hl_semaphore_release(queue->done);
    }
  }
  if (!st && device->backend->host_functions_serialized) {
    st = hl_queue_start_completer(queue);
    if (st) {
      device->backend->vtable->stream_destroy(device->backend, queue->stream);
      hl_semaphore_release(queue->timeline);
      hl_semaphore_release(queue->done);
    }
  }
  if (!st) {
    hl_device_lock(device);
    if (device->queue_count == device->queue_capacity) {
      uint32_t capacity =
          device->queue_capacity ? device->queue_capacity * 2 : 8;
      hl_queue_t** queues = realloc(device->queues, capacity * sizeof(*queues));
      if (queues) {
        device->queues = queues;
        device->queue_capacity = capacity;
      }
    }
    if (device->queue_count < device->queue_capacity) {
      device->queues[device->queue_count++] = queue;
    } else {
      st = HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "registering a queue");
    }
    hl_device_unlock(device);
    if (st) {
      hl_queue_stop_completer(queue);
      device->backend->vtable->stream_destroy(device->backend, queue->stream);
      hl_semaphore_release(queue->timeline);
      hl_semaphore_release(queue->done);
    }
  }
  if (st) {
    cnd_destroy(&queue->space_cond);
    mtx_destroy(&queue->space_mutex);
    hl_allocator_free(device->host_allocator, queue);
    return hl_status_annotate(st, "creating a queue on device %d",
                              device->props.ordinal);
  }
  hl_device_retain(device);
  *out_queue = queue;
  return NULL;
}

void hl_queue_retain(hl_queue_t* queue) {
  if (queue)
    atomic_fetch_add_explicit(&queue->ref_count, 1, memory_order_relaxed);
}

bool hl_queue_release_unless_last(hl_queue_t* queue) {
  if (!queue) return true;
  return hl_ref_drop_unless_last(&queue->ref_count);
}

// Whether every submission made so far has finished on the stream. Under
// the queue's lock: a caller that saw a submission's signal then also sees
// its done value (both are published in one critical section).
static bool hl_queue_idle(hl_queue_t* queue) {
  hl_queue_lock(queue);
  bool idle =
      hl_semaphore_value(queue->done) >= hl_queue_submitted_value(queue);
  hl_queue_unlock(queue);
  return idle;
}

void hl_queue_release(hl_queue_t* queue) {
  if (!queue) return;
  // An idle queue may still be held by the clean-ups of its finished
  // submissions (deferred to the device's work thread, in batches): the
  // application's release lets them run first, so that when it drops the
  // last handle the stream and the completer are gone before this returns,
  // and a new queue can have them (a backend has a limited number of
  // streams). The runtime's own references go with
  // hl_queue_release_internal, which never waits for deferred work.
  if (atomic_load_explicit(&queue->ref_count, memory_order_relaxed) > 1 &&
      !hl_device_on_runtime_thread(queue->device) && hl_queue_idle(queue)) {
    hl_device_flush_work(queue->device);
  }
  hl_queue_release_internal(queue);
}

void hl_queue_release_internal(hl_queue_t* queue) {
  if (!queue) return;
  // Fast path: not the last reference.
  if (hl_ref_drop_unless_last(&queue->ref_count)) return;
  // The last reference goes under the device's lock, together with the
  // queue's entry in its device, so hl_device_snapshot_queues (which retains
  // under the same lock) never picks up a dying queue.
  hl_device_t* device = queue->device;
  hl_device_lock(device);
  if (atomic_fetch_sub_explicit(&queue->ref_count, 1, memory_order_acq_rel) !=
      1) {
    hl_device_unlock(device);
    return;
  }
  for (uint32_t i = 0; i < device->queue_count; ++i) {
    if (device->queues[i] == queue) {
      device->queues[i] = device->queues[--device->queue_count];
      break;
    }
  }
  hl_device_unlock(device);
  // Submissions retain their queue, so nothing is pending or in flight here
  // except the tail of the stream (the event record after a completion).
  hl_queue_stop_completer(queue);
  device->backend->vtable->stream_destroy(device->backend, queue->stream);
  hl_semaphore_release(queue->timeline);
  hl_semaphore_release(queue->done);
  hl_status_free(queue->failure);
  cnd_destroy(&queue->space_cond);
  mtx_destroy(&queue->space_mutex);
  hl_allocator_free(device->host_allocator, queue);
  hl_device_release(device);
}

hl_device_t* hl_queue_device(const hl_queue_t* queue) {
  return queue ? queue->device : NULL;
}

hl_semaphore_t* hl_queue_timeline(const hl_queue_t* queue) {
  return queue ? queue->timeline : NULL;
}

uint32_t hl_queue_id(const hl_queue_t* queue) { return queue ? queue->id : 0; }

hl_backend_stream_t* hl_queue_stream(const hl_queue_t* queue) {
  return queue->stream;
}

hl_semaphore_t* hl_queue_done(const hl_queue_t* queue) { return queue->done; }

uint64_t hl_queue_submitted_value(hl_queue_t* queue) {
  return atomic_load_explicit(&queue->next_value, memory_order_acquire);
}

hl_status_t hl_queue_wait_capacity(hl_queue_t* queue, hl_time_t deadline) {
  if (!queue) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_wait_capacity: queue is NULL");
  }
  hl_queue_lock(queue);
  bool full = !queue->failure && hl_queue_full_locked(queue);
  if (full && hl_device_on_runtime_thread(queue->device)) {
    hl_queue_unlock(queue);
    return NULL;  // Submissions from the runtime's threads never block.
  }
  if (full) {
    ++queue->stats.depth_stalls;
    full = !hl_queue_wait_space_locked(queue, deadline);
  }
  hl_status_t st = hl_status_clone(queue->failure);
  uint32_t in_flight = queue->in_flight;
  uint64_t pending = queue->pending_count;
  hl_queue_unlock(queue);
  if (st) return hl_status_annotate(st, "queue %u has failed", queue->id);
  if (full) {
    return HL_MAKE_STATUS(HL_STATUS_DEADLINE_EXCEEDED,
                          "queue %u is full: %u submissions in flight and "
                          "%llu waiting to issue (depth %u)",
                          queue->id, in_flight, (unsigned long long)pending,
                          queue->device->queue_depth);
  }
  return NULL;
}

hl_status_t hl_queue_barrier(hl_queue_t* queue, const hl_fence_t* wait_fence,
                             const hl_fence_t* signal_fence) {
  return hl_queue_submit(queue, wait_fence, signal_fence, NULL, NULL);
}

typedef struct hl_host_call_op_t {
  hl_op_t base;
  hl_queue_host_fn_t fn;
  void* user;
  hl_queue_t* queue;  // Held by the submission.
  hl_gated_t gate;
} hl_host_call_op_t;

_Thread_local hl_queue_t* hl_host_call_queue_;

static void hl_host_call_trampoline(void* user) {
  hl_host_call_op_t* op = (hl_host_call_op_t*)user;
  hl_queue_t* outer = hl_host_call_queue_;
  hl_host_call_queue_ = op->queue;
  op->fn(op->user);
  hl_host_call_queue_ = outer;
}

static hl_status_t hl_host_call_gated(void* user) {
  hl_host_call_trampoline(user);
  return NULL;
}

static hl_status_t hl_host_call_issue(hl_op_t* base, hl_issue_ctx_t* ctx) {
  hl_host_call_op_t* op = (hl_host_call_op_t*)base;
  return hl_issue_enqueue_gated(ctx, &op->gate, hl_host_call_gated, op, false);
}

static hl_recycler_t hl_host_call_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_host_call_op_t), 1024, "a host call");

static void hl_host_call_release(hl_op_t* base, hl_status_t status) {
  hl_recycler_free(&hl_host_call_recycler_, base);
}

static bool hl_host_call_release_light(hl_op_t* base, hl_status_t status) {
  hl_host_call_release(base, status);
  return true;
}

static const hl_op_vtable_t hl_host_call_vtable = {
    .issue = hl_host_call_issue,
    .release = hl_host_call_release,
    .release_light = hl_host_call_release_light,
};

hl_status_t hl_queue_host_call(hl_queue_t* queue, const hl_fence_t* wait_fence,
                               const hl_fence_t* signal_fence,
                               hl_queue_host_fn_t fn, void* user) {
  if (!fn) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_host_call: fn is NULL");
  }
  hl_host_call_op_t* op = NULL;
  HL_RETURN_IF_ERROR(
      hl_recycler_alloc_default(&hl_host_call_recycler_, (void**)&op),
      "hl_queue_host_call");
  op->base.vtable = &hl_host_call_vtable;
  op->fn = fn;
  op->user = user;
  op->queue = queue;
  return hl_queue_submit(queue, wait_fence, signal_fence, &op->base, NULL);
}

hl_status_t hl_queue_wait_idle(hl_queue_t* queue, hl_time_t deadline) {
  if (!queue) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_wait_idle: queue is NULL");
  }
  HL_TRACE_ZONE_BEGIN(zone, "hl_queue_wait_idle");
  // Idle means every submission made so far has finished on the stream,
  // completed, failed or cancelled: a failure of the queue does not end the
  // wait early (its timeline fails at once, but work after the failure is
  // still being cancelled in order).
  uint64_t value = hl_queue_submitted_value(queue);
  hl_status_t st = hl_semaphore_wait(queue->done, value, deadline);
  if (st) {
    HL_TRACE_ZONE_END(zone);
    return hl_status_annotate(st, "waiting for queue %u to be idle", queue->id);
  }
  // The completion is published from inside the stream; let the stream
  // finish its tail (the timepoint's event record) so "idle" means idle, and
  // stream ordered frees on it count as complete.
  hl_backend_t* backend = queue->device->backend;
  st = backend->vtable->stream_synchronize(backend, queue->stream);
  if (st) {
    HL_TRACE_ZONE_END(zone);
    return hl_status_annotate(st, "synchronizing queue %u", queue->id);
  }
  // Completed submissions drop their references on the completion thread;
  // let that happen so a caller's release right after is really the last.
  if (!thrd_equal(thrd_current(), queue->device->work_thread)) {
    hl_device_flush_work(queue->device);
  }
  hl_device_apply_release_threshold(queue->device);
  HL_TRACE_ZONE_END(zone);
  return hl_queue_status(queue);
}

void hl_queue_drain(hl_queue_t* queue) {
  hl_backend_t* backend = queue->device->backend;
  if (queue->by_events && !hl_on_completer_thread_) {
    // Host steps run on the completer after the stream has reached them, and
    // what follows them is issued only then: wait until every submission
    // made before this call has finished, except from a head parked on a
    // signal nobody has submitted (it may never come). Whether the head
    // parks is only known once the issuer reaches it, so look again every
    // millisecond.
    hl_queue_lock(queue);
    uint64_t target =
        atomic_load_explicit(&queue->next_value, memory_order_relaxed);
    hl_queue_unlock(queue);
    for (;;) {
      hl_queue_lock(queue);
      uint64_t limit = target;
      if (queue->head_parked && queue->pending_head &&
          queue->pending_head->value - 1 < limit) {
        limit = queue->pending_head->value - 1;
      }
      bool reached = hl_semaphore_value(queue->done) >= limit;
      hl_queue_unlock(queue);
      if (reached) break;
      hl_status_ignore(hl_semaphore_wait(
          queue->done, limit, hl_deadline_after((hl_duration_t)1000000)));
    }
  }
  hl_status_ignore(backend->vtable->stream_synchronize(backend, queue->stream));
}

hl_status_t hl_queue_status(hl_queue_t* queue) {
  if (!queue) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_status: queue is NULL");
  }
  hl_queue_lock(queue);
  hl_status_t st = hl_status_clone(queue->failure);
  hl_queue_unlock(queue);
  return st;
}

void hl_queue_stats(hl_queue_t* queue, hl_queue_stats_t* out_stats) {
  if (!queue || !out_stats) return;
  hl_queue_lock(queue);
  *out_stats = queue->stats;
  out_stats->submitted_value =
      atomic_load_explicit(&queue->next_value, memory_order_relaxed);
  hl_queue_unlock(queue);
}

//===----------------------------------------------------------------------===//
// Walking a device's queues
//===----------------------------------------------------------------------===//

// Whether every queue of the device has no issuer between plan and the end
// of publish. The device's lock keeps the listed queues alive.
static bool hl_device_issuers_idle(hl_device_t* device) {
  bool idle = true;
  hl_device_lock(device);
  for (uint32_t i = 0; i < device->queue_count && idle; ++i) {
    idle = !atomic_load_explicit(&device->queues[i]->issuers,
                                 memory_order_acquire);
  }
  hl_device_unlock(device);
  return idle;
}

void hl_device_wait_issuers(hl_device_t* device) {
  // Issuing is short (its backend calls never wait for the flusher, and a
  // host step suspends the issuer), so look, yield a few times, then look
  // every 50 us rather than make every issuer able to wake flushers. (Not
  // hl_spin_until: its predicate may take no lock.)
  for (int round = 0; !hl_device_issuers_idle(device); ++round) {
    if (round < 16) {
      thrd_yield();
    } else {
      struct timespec pause = {0, 50000};
      thrd_sleep(&pause, NULL);
    }
  }
}

hl_status_t hl_device_snapshot_queues(hl_device_t* device,
                                      hl_queue_t*** out_queues,
                                      uint32_t* out_count) {
  hl_device_lock(device);
  uint32_t count = device->queue_count;
  hl_queue_t** queues = count ? malloc(count * sizeof(*queues)) : NULL;
  if (count && !queues) {
    hl_device_unlock(device);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "snapshotting %u queues", count);
  }
  for (uint32_t i = 0; i < count; ++i) {
    queues[i] = device->queues[i];
    hl_queue_retain(queues[i]);
  }
  hl_device_unlock(device);
  *out_queues = queues;
  *out_count = count;
  return NULL;
}

hl_status_t hl_device_wait_idle(hl_device_t* device, int64_t deadline) {
  if (!device) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_device_wait_idle: device is NULL");
  }
  hl_queue_t** queues = NULL;
  uint32_t count = 0;
  HL_RETURN_IF_ERROR_PLAIN(hl_device_snapshot_queues(device, &queues, &count));
  hl_status_t st = NULL;
  // Every queue is waited for, even after one failed, so no work submitted
  // before this call runs after it returns; the first error is returned.
  for (uint32_t i = 0; i < count; ++i) {
    hl_status_t queue_st = hl_queue_wait_idle(queues[i], deadline);
    if (!st) {
      st = queue_st;
    } else {
      hl_status_free(queue_st);
    }
    hl_queue_release_internal(queues[i]);
  }
  free(queues);
  // Completions and deferred frees triggered by that work are queued by now;
  // let them run so statistics are settled when this returns.
  if (!st && !thrd_equal(thrd_current(), device->work_thread)) {
    hl_device_flush_work(device);
  }
  if (!st) hl_device_apply_release_threshold(device);
  return st;
}
