// Queues and submissions: in-order issue over one backend stream, with
// wait-before-signal parking, wait elision and failure propagation.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/faults.h"
#include "runtime/base/log.h"
#include "runtime/base/recycler.h"
#include "runtime/base/time_util.h"
#include "runtime/base/trace.h"
#include "runtime/timeline/timeline_internal.h"

#define HL_FRONTIER_CAPACITY 32

typedef struct hl_frontier_entry_t {
  uint64_t semaphore_id;
  uint64_t value;
} hl_frontier_entry_t;

// Watches one wait of a parked submission.
typedef struct hl_park_waiter_t {
  hl_waiter_t base;
  hl_submission_t* submission;
} hl_park_waiter_t;

#define HL_ISSUE_INLINE_WAITS 8
#define HL_SUBMISSION_INLINE_ENTRIES 4

// hl_queue_plan_issue_locked sets every field (a new one needs a line there).
typedef struct hl_issue_plan_t {
  hl_shared_event_t* inline_waits[HL_ISSUE_INLINE_WAITS];
  hl_shared_event_t** waits;  // Device timepoints to wait on (held).
  size_t wait_count;
  hl_backend_event_t* event;  // From the pool; NULL to create one.
  bool waits_settled;
  hl_status_t completion_failure;  // launch_host_func of the completion.
  hl_status_t event_failure;       // No device timepoint for the signals.
  // The completion ran inside its launch (runtime work on an idle host
  // stream) and left publishing to step 3: no device timepoint is needed.
  bool completed_at_issue;
} hl_issue_plan_t;

struct hl_submission_t {
  hl_submission_t* next;
  hl_queue_t* queue;  // Retained (unless |borrowed|).
  uint64_t value;     // On the queue's timeline.
  hl_fence_entry_t* waits;
  size_t wait_count;
  hl_fence_entry_t* signals;
  size_t signal_count;
  hl_op_t* ops;
  _Atomic(hl_status_t) failure;
  atomic_bool fail_queue;
  bool parked_once;
  // The queue and the semaphores of |waits| and |signals| are the
  // submitter's references, not retained: the submission is being issued
  // by the thread inside hl_queue_submit, which holds them, and it is
  // finished before that call returns (runtime work on an idle stream).
  // Before anything could let it outlive the call (parking, a completion
  // that does not run at once, a host step, a clean-up left to the
  // completion thread) hl_submission_own_refs takes the references. Saves
  // a retain and a release per semaphore and for the queue.
  bool borrowed;
  // One per wait, allocated when the submission first parks: every wait not
  // yet reached is watched, so a failure of any of them releases it.
  hl_park_waiter_t* parks;
  hl_work_t work;
  hl_gated_t gate;
  // Issuing runs outside the queue's lock, so the completion callback may
  // publish (and finish with) the submission while its issuer still reads
  // it: each holds a reference, and the last one enqueues the destroy.
  atomic_int refs;
  atomic_bool completion_reserved;  // The completion reserved the work.
  // Issuing state, kept here because issuing may stop at a host step and
  // go on later on the queue's completer thread.
  hl_issue_plan_t plan;
  bool issue_started;   // Waits (and the gate) are issued.
  hl_op_t* issue_next;  // The next op to issue.
  // On the queue's completer list (queues completed by events):
  hl_submission_t* completer_next;
  hl_gated_t* host_step;               // Set: run it, then go on issuing.
  hl_backend_event_t* step_event;      // Marks the host step; NULL: sync.
  hl_shared_event_t* completer_event;  // Held; NULL: synchronize the stream.
  // Waits and signals fit here in the common case (|waits| points here).
  hl_fence_entry_t inline_entries[HL_SUBMISSION_INLINE_ENTRIES];
};

// Submissions are recycled (base/recycler.h): a steady stream of them makes
// no heap allocation.
static hl_recycler_t hl_submission_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_submission_t), 4096, "a submission");

struct hl_queue_t {
  atomic_int ref_count;
  hl_device_t* device;  // Retained.
  uint32_t id;
  hl_backend_stream_t* stream;
  hl_semaphore_t* timeline;
  // Internal: reaches N once the Nth submission has finished on the stream,
  // completed or failed (never fails itself). wait_idle waits for it.
  hl_semaphore_t* done;
  // Set with |failure|; read by gated work on the stream without the lock.
  atomic_bool failed;
  // Written under |lock|; read without it by hl_queue_submitted_value (a
  // dealloca's check of its own timeline).
  _Atomic uint64_t next_value;
  // Issuers between their plan and the end of their publish step (the
  // pending device work of hl_device_wait_issuers): per queue, so that
  // threads issuing on different queues of one device share no counter.
  atomic_uint issuers;
  // A pump is scheduled (set by any thread, with atomics only: waiter
  // notifications run under a semaphore's lock; cleared under |lock| by
  // the pump that runs).
  atomic_bool pump_scheduled;
  // The queue's lock (timeline_internal.h) for everything below: a spin
  // lock (base/spin.h). Its sections are short and never wait for other
  // work; a submitter that must wait for room sleeps on |space_cond|, not
  // under it.
  hl_spinlock_t lock;
  hl_submission_t* pending_head;
  hl_submission_t* pending_tail;
  // Backpressure: issued and not completed, and not yet issued.
  uint32_t in_flight;
  uint64_t pending_count;
  bool head_parked;        // The head waits for a signal not yet submitted.
  uint32_t space_waiters;  // Submitters blocked on the depth limit.
  // Where they sleep. |space_mutex| is a leaf. |space_wakeups| counts the
  // wake-ups; it is written holding both locks, read holding either.
  mtx_t space_mutex;
  cnd_t space_cond;
  uint32_t space_wakeups;
  // A thread is issuing this queue's submissions (outside the lock); other
  // pumps leave the queue to it, so the stream sees submissions in order.
  bool issuing;
  hl_work_t pump_work;
  // Completion by events (backends with host_functions_serialized, that is
  // HIP, where every host function would run on the driver's one callback
  // thread and hold its stream): instead of a host function per submission,
  // the queue's own completer thread waits for each issued submission's
  // event in order and publishes it, and runs the queue's host work (host
  // calls) in stream order, so no hipline code runs on HIP's thread.
  bool by_events;
  thrd_t completer;
  mtx_t completer_mutex;  // Leaf: taken under the queue's lock.
  cnd_t completer_cond;
  hl_submission_t* completer_head;
  hl_submission_t* completer_tail;
  bool completer_stop;
  bool completer_sleeping;         // In cnd_wait: a push must signal.
  atomic_size_t completer_pushed;  // Pushes so far (the completer spins on it).
  hl_frontier_entry_t frontier[HL_FRONTIER_CAPACITY];
  uint32_t frontier_count;
  uint32_t frontier_next_evict;
  hl_status_t failure;
  hl_queue_stats_t stats;
};

//===----------------------------------------------------------------------===//
// Frontier
//===----------------------------------------------------------------------===//

static uint64_t hl_frontier_get(const hl_queue_t* q, uint64_t id) {
  for (uint32_t i = 0; i < q->frontier_count; ++i) {
    if (q->frontier[i].semaphore_id == id) return q->frontier[i].value;
  }
  return 0;
}

static void hl_frontier_raise(hl_queue_t* q, uint64_t id, uint64_t value) {
  for (uint32_t i = 0; i < q->frontier_count; ++i) {
    if (q->frontier[i].semaphore_id == id) {
      if (q->frontier[i].value < value) q->frontier[i].value = value;
      return;
    }
  }
  uint32_t slot = q->frontier_count;
  if (slot == HL_FRONTIER_CAPACITY) {
    // Forgetting an entry only costs a redundant wait later.
    slot = q->frontier_next_evict;
    q->frontier_next_evict = (slot + 1) % HL_FRONTIER_CAPACITY;
  } else {
    ++q->frontier_count;
  }
  q->frontier[slot].semaphore_id = id;
  q->frontier[slot].value = value;
}

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
static void hl_submission_fail_waited(hl_submission_t* sub,
                                      hl_status_t failure) {
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
static void hl_submission_own_refs(hl_submission_t* sub) {
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

static void hl_submission_destroy(hl_work_t* work) {
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
  hl_queue_release(queue);
}

// Finishes |sub| on the calling thread where that is cheap: releases the
// ops that can release anywhere and the semaphore and queue references that
// are not the last ones, and recycles the submission. Returns false when
// something is left for hl_submission_destroy on the completion thread
// (what was released is gone from |sub|). Any thread, any lock held.
static bool hl_submission_destroy_light(hl_submission_t* sub) {
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
static hl_status_t hl_submission_gate_check(void* user) {
  hl_submission_t* sub = (hl_submission_t*)user;
  for (size_t i = 0; i < sub->wait_count; ++i) {
    hl_status_t failure = hl_semaphore_failure(sub->waits[i].semaphore);
    if (failure) return hl_status_clone(failure);
  }
  return NULL;
}

static void hl_queue_lock(hl_queue_t* queue) { hl_spinlock_lock(&queue->lock); }
static void hl_queue_unlock(hl_queue_t* queue) {
  hl_spinlock_unlock(&queue->lock);
}

// An issuer's span (hl_queue_t.issuers), changed under the queue's lock
// (a load and a store, no read-modify-write: hl_device_wait_issuers only
// reads it). Its effects become visible (its signals are published) after
// the begin, so a thread that saw them and then flushes sees the count;
// the end comes after the issuer's last use of the device.
static void hl_queue_issuer_begin_locked(hl_queue_t* queue) {
  atomic_store_explicit(
      &queue->issuers,
      atomic_load_explicit(&queue->issuers, memory_order_relaxed) + 1,
      memory_order_relaxed);
}
static void hl_queue_issuer_end_locked(hl_queue_t* queue) {
  atomic_store_explicit(
      &queue->issuers,
      atomic_load_explicit(&queue->issuers, memory_order_relaxed) - 1,
      memory_order_release);
}

static void hl_queue_schedule_pump(hl_queue_t* queue);

// Wakes submitters blocked on the depth limit to look again. Never blocks
// (|space_mutex| is only held around a check and a wait).
static void hl_queue_wake_submitters_locked(hl_queue_t* queue) {
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
static void hl_queue_note_completion_locked(hl_queue_t* queue) {
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
static void hl_queue_fail_locked(hl_queue_t* queue, hl_status_t status) {
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

// Publishes the outcome of |sub|, which has finished on the stream. Runs on
// the stream (a backend host function) or on the queue's completer thread,
// which passes the reference it held on the submission's event in |held|
// (dropped before the queue's done value is signalled, so that once it is
// visible the event is back in the pool). The queue's lock held; each
// semaphore's lock is taken in turn.
static void hl_submission_publish_outcome_locked(hl_submission_t* sub,
                                                 hl_shared_event_t* held) {
  hl_queue_t* queue = sub->queue;
  if (!atomic_load(&sub->failure)) {
    hl_status_t late = hl_submission_gate_check(sub);
    if (late) hl_submission_fail(sub, late, false);
  }
  hl_status_t failure = atomic_load(&sub->failure);
  for (size_t i = 0; i < sub->signal_count; ++i) {
    if (failure) {
      hl_semaphore_fail_unlocked(sub->signals[i].semaphore,
                                 hl_status_clone(failure));
    } else {
      hl_semaphore_signal_unlocked(sub->signals[i].semaphore,
                                   sub->signals[i].value);
    }
  }
  if (failure) ++queue->stats.failed;
  bool fails_queue = failure && atomic_load(&sub->fail_queue);
  if (fails_queue) hl_queue_fail_locked(queue, hl_status_clone(failure));
  if (!fails_queue && !held) {
    // The common case: both values with one barrier.
    hl_semaphore_signal_owned_two(queue->timeline, sub->value, queue->done,
                                  sub->value);
  } else {
    if (!fails_queue) hl_semaphore_signal_owned(queue->timeline, sub->value);
    if (held) hl_shared_event_drop(held);
    hl_semaphore_signal_owned(queue->done, sub->value);
  }
  hl_queue_note_completion_locked(queue);
}

// The issuer whose completion launch is running right now on this thread
// (runtime work on an idle stream): that completion leaves its publication
// to the issuer's step 3, under the queue lock the issuer takes anyway.
static _Thread_local hl_submission_t* hl_issuing_completion_;

static void hl_submission_complete_dropping(hl_submission_t* sub,
                                            hl_shared_event_t* held) {
  hl_queue_t* queue = sub->queue;
  // The clean-up (which drops the submission's queue reference, and maybe
  // the device's) counts as pending before any signal is visible: a thread
  // that saw a signal and then releases its handles flushes it, so the last
  // release happens there and not on the completion thread later.
  hl_device_reserve_work(queue->device);
  hl_pump_sink_t sink;
  bool sink_owner = hl_pump_sink_open(&sink);
  hl_queue_lock(queue);
  hl_submission_publish_outcome_locked(sub, held);
  hl_queue_unlock(queue);
  atomic_store(&sub->completion_reserved, true);
  if (atomic_fetch_sub(&sub->refs, 1) == 1) {
    hl_device_t* device = queue->device;  // Held by |sub|'s queue until now.
    if (hl_submission_destroy_light(sub)) {
      hl_device_unreserve_work(device);
    } else {
      hl_device_enqueue_cleanup(device, &sub->work, true);
    }
  }
  if (sink_owner) hl_pump_sink_close(&sink);
}

static void hl_submission_complete(void* user) {
  hl_submission_t* sub = (hl_submission_t*)user;
  if (hl_issuing_completion_ == sub) {
    // Run by the launch itself: the submission's work is done, and no other
    // work can be enqueued on the stream before the issuer publishes.
    hl_issuing_completion_ = NULL;
    sub->plan.completed_at_issue = true;
    return;
  }
  hl_submission_complete_dropping(sub, NULL);
}

// Drops the issuer's reference (or the completion's, when no completion
// callback could be launched).
static void hl_submission_finish(hl_submission_t* sub);
static void hl_submission_unref(hl_submission_t* sub) {
  if (atomic_fetch_sub(&sub->refs, 1) != 1) return;
  hl_submission_finish(sub);
}

// Destroys |sub| (its last reference is gone), here where that is cheap.
static void hl_submission_finish(hl_submission_t* sub) {
  hl_device_t* device = sub->queue->device;
  bool reserved = atomic_load(&sub->completion_reserved);
  if (hl_submission_destroy_light(sub)) {
    if (reserved) hl_device_unreserve_work(device);
    return;
  }
  hl_submission_own_refs(sub);  // Its issuer is still in hl_queue_submit.
  hl_device_enqueue_cleanup(device, &sub->work, reserved);
}

// Runs |gate->fn| unless the submission or its queue has failed.
static void hl_gated_run(hl_gated_t* gate) {
  if (atomic_load(&gate->submission->failure)) return;
  hl_queue_t* queue = gate->submission->queue;
  if (atomic_load(&queue->failed)) {
    // A failed queue runs nothing more, including work issued before it
    // failed: the submission is cancelled with the queue's status.
    hl_queue_lock(queue);
    hl_status_t failure = hl_status_clone(queue->failure);
    hl_queue_unlock(queue);
    hl_submission_fail(gate->submission, failure, false);
    return;
  }
  // A wait issued as a device-side wait (an event) carries no failure: the
  // semaphore it stands for may have failed by the time the stream gets
  // here, and gated work must not run after a failed dependency.
  hl_status_t st = hl_submission_gate_check(gate->submission);
  if (st) {
    hl_submission_fail(gate->submission, st, false);
    return;
  }
  st = gate->fn(gate->user);
  if (st) hl_submission_fail(gate->submission, st, false);
}

static void hl_gated_thunk(void* user) {
  hl_gated_t* gate = (hl_gated_t*)user;
  hl_gated_run(gate);
  if (gate->after) gate->after(gate->after_user);
}

hl_status_t hl_issue_enqueue_gated(hl_issue_ctx_t* ctx, hl_gated_t* storage,
                                   hl_gated_fn_t fn, void* user,
                                   bool runtime_work) {
  storage->submission = ctx->submission;
  storage->fn = fn;
  storage->user = user;
  if (ctx->queue->by_events) {
    // A host step: the issuer stops after this op, and the queue's completer
    // runs |fn| once the stream has reached this point, then goes on issuing
    // (hl_queue_issue_unlocked).
    if (ctx->host_step) {
      return HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                            "queue %u: two host steps in one operation",
                            ctx->queue->id);
    }
    ctx->host_step = storage;
    return NULL;
  }
  if (runtime_work) {
    return hl_backend_launch_runtime_func(ctx->backend, ctx->stream,
                                          hl_gated_thunk, storage);
  }
  return ctx->backend->vtable->launch_host_func(ctx->backend, ctx->stream,
                                                hl_gated_thunk, storage);
}

// Fails |sub| when HIPLINE_FAULTS asks for it (once per submission, as it
// leaves the pending list).
static void hl_submission_maybe_inject_failure(hl_queue_t* queue,
                                               hl_submission_t* sub) {
  if (atomic_load(&sub->failure) || !hl_faults_should_fail_submission()) {
    return;
  }
  hl_submission_fail(
      sub,
      HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                     "submission %llu on queue %u failed: injected by "
                     "HIPLINE_FAULTS",
                     (unsigned long long)sub->value, queue->id),
      false);
}

// Issuing a submission takes three steps, so that no backend call runs
// under the queue's lock (a full HIP stream, or a slow driver, would stall
// the queue's completions otherwise):
//   1. plan (the queue's lock held): elide the waits that are covered, pick
//      the device timepoint of every other wait (its shared event is held,
//      taken under that semaphore's lock);
//   2. issue (no lock): stream waits, gate, ops, the completion callback and
//      (unless the completion already ran) a pooled event recorded for the
//      signals, in stream order; only this queue's issuer touches its
//      stream (hl_queue_t.issuing);
//   3. publish (the queue's lock held): release the held events, attach the
//      signals' device timepoints (which wakes queues parked on them) and
//      raise the frontier.
// No lock is held across a backend call; the backend's own locks (stream,
// pool, event) are leaves.
// Step 1. The queue's lock held.
static void hl_queue_plan_issue_locked(hl_queue_t* queue, hl_submission_t* sub,
                                       hl_issue_plan_t* plan) {
  // Every field but the inline wait slots (filled as they are counted).
  plan->waits = plan->inline_waits;
  plan->wait_count = 0;
  plan->event = NULL;
  plan->waits_settled = true;
  plan->completion_failure = NULL;
  plan->event_failure = NULL;
  plan->completed_at_issue = false;
  ++queue->in_flight;
  // Until it has published, the issuer counts on its queue: a thread that
  // flushes the device (after wait_idle, say) also waits for the issuer to
  // give its event back and drop its references (hl_device_wait_issuers).
  hl_queue_issuer_begin_locked(queue);
  atomic_init(&sub->refs, 2);  // The issuer's and the completion's.
  atomic_init(&sub->completion_reserved, false);

  hl_submission_maybe_inject_failure(queue, sub);
  if (!atomic_load(&sub->failure) && sub->wait_count > HL_ISSUE_INLINE_WAITS) {
    plan->waits = malloc(sub->wait_count * sizeof(*plan->waits));
    if (!plan->waits) {
      plan->waits = plan->inline_waits;
      hl_submission_fail(sub,
                         HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                                        "queue %u: planning %zu waits",
                                        queue->id, sub->wait_count),
                         false);
    }
  }
  if (!atomic_load(&sub->failure)) {
    for (size_t i = 0; i < sub->wait_count; ++i) {
      hl_semaphore_t* s = sub->waits[i].semaphore;
      uint64_t v = sub->waits[i].value;
      if (hl_semaphore_value(s) >= v) {
        ++queue->stats.waits_elided;
        continue;
      }
      if (s == queue->timeline) {
        // Queue order covers it, and a queue's own timeline only fails when
        // the whole queue does.
        ++queue->stats.waits_elided;
        continue;
      }
      plan->waits_settled = false;
      if (hl_frontier_get(queue, s->id) >= v) {
        ++queue->stats.waits_elided;
        continue;
      }
      // The pump saw this wait reached or issued without the semaphore's
      // lock; since then it may have been reached (its timepoints dropped)
      // or failed: look again under the lock.
      hl_semaphore_lock(s);
      hl_status_t failure = hl_semaphore_failure(s);
      if (failure) {
        hl_semaphore_unlock(s);
        hl_submission_fail_waited(sub, failure);
        break;
      }
      if (hl_semaphore_value(s) >= v) {
        hl_semaphore_unlock(s);
        ++queue->stats.waits_elided;
        continue;
      }
      hl_timepoint_t* tp = hl_semaphore_find_timepoint_locked(s, v);
      if (!tp) {
        hl_semaphore_unlock(s);
        // The pump only issues when every wait is reached or has a device
        // timepoint; anything else is a bug worth a loud status.
        hl_submission_fail(
            sub,
            HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                           "queue %u: wait for %llu has no timepoint",
                           queue->id, (unsigned long long)v),
            true);
        break;
      }
      hl_shared_event_t* shared = tp->shared;
      uint64_t reached = tp->value;
      // Held until the wait is issued.
      atomic_fetch_add_explicit(&shared->refs, 1, memory_order_relaxed);
      hl_semaphore_unlock(s);
      plan->waits[plan->wait_count++] = shared;
      ++queue->stats.waits_issued;
      hl_frontier_raise(queue, s->id, reached);
    }
  }
}

// The event that backs a submission's signals (or marks a host step): a
// pooled one, or a new one. No lock held.
static hl_status_t hl_issue_acquire_event(hl_device_t* device,
                                          hl_issue_plan_t* plan) {
  if (plan->event) return NULL;
  plan->event = hl_device_take_event(device);
  if (plan->event) return NULL;
  hl_backend_t* backend = device->backend;
  hl_status_t st = backend->vtable->event_create(backend, &plan->event);
  if (st) {
    plan->event = NULL;
    return st;
  }
  atomic_fetch_add(&device->live_events, 1);
  return NULL;
}

static void hl_queue_completer_push(hl_queue_t* queue, hl_submission_t* sub);

// Stops issuing |sub| at a host step (queues completed by events): marks the
// point on the stream and hands the rest of the issue, with the issuer's
// role and reference, to the queue's completer thread. No lock held.
static void hl_queue_suspend_issue_unlocked(hl_queue_t* queue,
                                            hl_submission_t* sub,
                                            hl_gated_t* step) {
  hl_device_t* device = queue->device;
  hl_backend_t* backend = device->backend;
  hl_issue_plan_t* plan = &sub->plan;
  hl_status_t st = NULL;
  hl_submission_own_refs(sub);  // The completer goes on with it.
  // The submission's own event marks the step; it is recorded again at the
  // end of the submission, after the completer has waited on it here.
  st = hl_issue_acquire_event(device, plan);
  if (!st)
    st = backend->vtable->event_record(backend, plan->event, queue->stream);
  sub->step_event = st ? NULL : plan->event;
  if (st) {
    // The completer synchronizes the whole stream instead: nothing is
    // enqueued after this point until the host step has run.
    HL_LOG_WARN("queue %u: no event for a host step: %s", queue->id,
                hl_status_message(st));
    hl_status_free(st);
  }
  sub->host_step = step;
  // A suspended issuer is not pending device work: the host step may wait
  // for a thread that flushes the device (a test opening a gate, say).
  hl_queue_lock(queue);
  hl_queue_issuer_end_locked(queue);
  hl_queue_unlock(queue);
  hl_queue_completer_push(queue, sub);
}

static bool hl_queue_issue_claimed(hl_queue_t* queue, hl_submission_t* sub,
                                   hl_issue_plan_t* plan, bool claimed);

// Step 2. No lock held. Returns true when issuing stopped at a host step
// (queues completed by events): the completer goes on with it later. On an
// idle stream of a backend that can, the stream is claimed for the whole
// step: the submission's runtime work (its ops' pool calls, its completion)
// then runs at the stream's point with one claim instead of one each.
static bool hl_queue_issue_unlocked(hl_queue_t* queue, hl_submission_t* sub,
                                    hl_issue_plan_t* plan) {
  hl_backend_t* backend = queue->device->backend;
  bool claimed = !queue->by_events && backend->vtable->stream_claim &&
                 backend->vtable->stream_claim(backend, queue->stream);
  bool suspended = hl_queue_issue_claimed(queue, sub, plan, claimed);
  if (claimed) backend->vtable->stream_unclaim(backend, queue->stream);
  return suspended;
}

static bool hl_queue_issue_claimed(hl_queue_t* queue, hl_submission_t* sub,
                                   hl_issue_plan_t* plan, bool claimed) {
  hl_device_t* device = queue->device;
  hl_backend_t* backend = device->backend;
  hl_issue_ctx_t ctx = {
      queue, device, backend, queue->stream, sub, plan->waits_settled, NULL};
  hl_status_t st = NULL;
  if (!sub->issue_started) {
    sub->issue_started = true;
    sub->issue_next = sub->ops;
    for (size_t i = 0; i < plan->wait_count && !st; ++i) {
      if (atomic_load(&sub->failure)) break;
      st = backend->vtable->stream_wait_event(backend, queue->stream,
                                              plan->waits[i]->event);
    }
    if (st) {
      hl_submission_fail(
          sub, hl_status_annotate(st, "issuing waits on queue %u", queue->id),
          true);
      st = NULL;
    }
    if (!atomic_load(&sub->failure) && backend->stream_ordered_host_work &&
        !ctx.waits_settled) {
      st = hl_issue_enqueue_gated(&ctx, &sub->gate, hl_submission_gate_check,
                                  sub, true);
      if (st) hl_submission_fail(sub, st, true);
    }
  }
  hl_op_t* op = sub->issue_next;
  for (; op && !atomic_load(&sub->failure); op = op->next) {
    st = op->vtable->issue(op, &ctx);
    if (st) hl_submission_fail(sub, st, false);
    if (ctx.host_step) {
      sub->issue_next = op->next;
      hl_queue_suspend_issue_unlocked(queue, sub, ctx.host_step);
      return true;
    }
  }
  sub->issue_next = NULL;
  for (; op; op = op->next) {
    if (op->vtable->on_cancel) {
      op->vtable->on_cancel(op, atomic_load(&sub->failure));
    }
  }
  // (A claim is never taken on queues completed by events.)
  if (sub->borrowed && claimed &&
      backend->vtable->stream_claim_intact(backend, queue->stream)) {
    // What launching the completion would do here: it would run at once,
    // at the stream's point, and leave publishing to step 3.
    plan->completed_at_issue = true;
    return false;
  }
  if (!queue->by_events) {
    hl_issuing_completion_ = sub;
    // A |borrowed| submission must be finished before its submitter's call
    // returns: its completion runs now, or it owns its references first.
    if (!sub->borrowed) {
      st = hl_backend_launch_runtime_func(backend, queue->stream,
                                          hl_submission_complete, sub);
    } else if (!hl_backend_run_runtime_func_now(backend, queue->stream,
                                                hl_submission_complete, sub)) {
      // The stream is busy: no second look for an idle moment.
      hl_submission_own_refs(sub);
      st = backend->vtable->launch_host_func(backend, queue->stream,
                                             hl_submission_complete, sub);
    }
    hl_issuing_completion_ = NULL;
    if (st) {
      plan->completion_failure = st;
      return false;
    }
    if (plan->completed_at_issue) return false;
  }
  plan->event_failure = hl_issue_acquire_event(device, plan);
  if (!plan->event_failure) {
    plan->event_failure =
        backend->vtable->event_record(backend, plan->event, queue->stream);
  }
  return false;
}

// Gives |sub|'s signals the device timepoint of its event, so other queues
// can wait for them on the device (part of step 3; the queue's lock held,
// each semaphore's taken in turn).
static void hl_queue_attach_signals_locked(hl_queue_t* queue,
                                           hl_submission_t* sub,
                                           hl_issue_plan_t* plan) {
  hl_device_t* device = queue->device;
  hl_shared_event_t* shared = NULL;
  hl_status_t st = plan->event_failure;
  if (!st) st = hl_shared_event_create(device, plan->event, &shared);
  if (st) {
    // Other queues will wait for these signals on the host side instead
    // (they park until the values are reached); correctness holds.
    if (plan->event) hl_device_recycle_event(device, plan->event);
    HL_LOG_WARN("queue %u: no device timepoint for submission %llu: %s",
                queue->id, (unsigned long long)sub->value,
                hl_status_message(st));
    hl_status_free(st);
    // The completer synchronizes the stream instead of an event.
    if (queue->by_events) hl_queue_completer_push(queue, sub);
  } else {
    // Its one reference is held while the timepoints are attached.
    for (size_t i = 0; i <= sub->signal_count; ++i) {
      hl_semaphore_t* s =
          i < sub->signal_count ? sub->signals[i].semaphore : queue->timeline;
      uint64_t v = i < sub->signal_count ? sub->signals[i].value : sub->value;
      hl_semaphore_lock(s);
      if (hl_semaphore_value(s) < v && !hl_semaphore_failure(s)) {
        // On failure the value is simply reached later on the host side.
        hl_status_ignore(hl_semaphore_add_timepoint_locked(s, v, shared));
      }
      hl_semaphore_unlock(s);
    }
    if (queue->by_events) {
      // The completer's, until it has waited on the event.
      atomic_fetch_add_explicit(&shared->refs, 1, memory_order_relaxed);
      sub->completer_event = shared;
      hl_queue_completer_push(queue, sub);
    }
    hl_shared_event_drop(shared);
  }
}

// Records that |sub|'s signals are issued on |queue| (its frontier): later
// waits on them are covered by queue order. The queue's lock held.
static void hl_queue_raise_frontier_locked(hl_queue_t* queue,
                                           hl_submission_t* sub) {
  for (size_t i = 0; i < sub->signal_count; ++i) {
    hl_frontier_raise(queue, sub->signals[i].semaphore->id,
                      sub->signals[i].value);
  }
}

// Step 3. The queue's lock held. Drops the issuer's reference to |sub|.
static void hl_queue_publish_issue_locked(hl_queue_t* queue,
                                          hl_submission_t* sub,
                                          hl_issue_plan_t* plan) {
  hl_device_t* device = queue->device;
  for (size_t i = 0; i < plan->wait_count; ++i) {
    hl_shared_event_drop(plan->waits[i]);
  }
  if (plan->waits != plan->inline_waits) free(plan->waits);
  hl_status_t st = plan->completion_failure;
  if (st) {
    // Without the completion callback nothing will publish this submission in
    // order: the queue is broken. Fail everything now.
    if (plan->event) hl_device_recycle_event(device, plan->event);
    hl_submission_fail(sub, hl_status_clone(st), true);
    for (size_t i = 0; i < sub->signal_count; ++i) {
      hl_semaphore_fail_unlocked(sub->signals[i].semaphore,
                                 hl_status_clone(st));
    }
    ++queue->stats.failed;
    hl_queue_fail_locked(queue, hl_status_annotate(st, "queue %u", queue->id));
    hl_semaphore_signal_owned(queue->done, sub->value);
    hl_queue_note_completion_locked(queue);
    hl_submission_unref(sub);  // The completion's: it will never run.
    hl_submission_unref(sub);
    hl_queue_issuer_end_locked(queue);
    return;
  }
  if (plan->completed_at_issue) {
    // The completion's part: the signals need no device timepoint.
    if (plan->event) hl_device_recycle_event(device, plan->event);
    hl_submission_publish_outcome_locked(sub, NULL);
  } else {
    hl_queue_attach_signals_locked(queue, sub, plan);
  }
  hl_queue_raise_frontier_locked(queue, sub);
  if (plan->completed_at_issue) {
    // Both references are the issuer's now (the completion returned without
    // touching them): no count to drop.
    hl_submission_finish(sub);
  } else {
    hl_submission_unref(sub);
  }
  hl_queue_issuer_end_locked(queue);
}

// Whether a submission of |ops| may complete at once by its shape: no ops,
// or one that can run here (hl_op_vtable_t.run_at_once).
static inline bool hl_ops_may_complete_at_once(const hl_op_t* ops) {
  return !ops || (!ops->next && ops->vtable->run_at_once);
}

// Completes |sub| (just taken off the head of |queue|, or about to be put
// there by hl_queue_submit) here and now if it needs nothing from the
// stream: it has no operations, or one that runs here
// (hl_op_vtable_t.run_at_once), every wait is reached (or on the queue's
// own timeline), and nothing of the queue is in flight, so every earlier
// submission has completed and published (on queues completed by events
// too: the completer publishes only after the stream has passed the
// submission's event). Its signals are published under the lock the caller
// already holds, with no backend call and no issue step. Returns false,
// changing nothing, otherwise. The queue's lock held.
static bool hl_queue_complete_at_once_locked(hl_queue_t* queue,
                                             hl_submission_t* sub) {
  hl_op_t* op = sub->ops;
  // A failed submission's op is cancelled, never run: the issue step does it.
  if (queue->in_flight || !hl_ops_may_complete_at_once(op) ||
      (op && (!hl_faults_none() || atomic_load(&sub->failure)))) {
    return false;
  }
  for (size_t i = 0; i < sub->wait_count; ++i) {
    hl_semaphore_t* s = sub->waits[i].semaphore;
    if (s != queue->timeline && hl_semaphore_value(s) < sub->waits[i].value) {
      return false;
    }
  }
  if (op) {
    // One op that can do its work here (hl_op_vtable_t.run_at_once).
    hl_status_t st = NULL;
    if (!op->vtable->run_at_once(op, queue, &st)) return false;
    if (st) hl_submission_fail(sub, st, false);
  }
  queue->stats.waits_elided += sub->wait_count;
  hl_submission_maybe_inject_failure(queue, sub);
  ++queue->in_flight;  // hl_queue_note_completion_locked takes it back.
  // Published with the issuer's count held, as an issue would be
  // (hl_device_wait_issuers): the references go before it ends.
  hl_queue_issuer_begin_locked(queue);
  atomic_init(&sub->completion_reserved, false);
  hl_submission_publish_outcome_locked(sub, NULL);
  hl_queue_raise_frontier_locked(queue, sub);
  hl_submission_finish(sub);
  hl_queue_issuer_end_locked(queue);
  return true;
}

// Whether none of |sub|'s waits is on a failed semaphore (a failed one is
// the pump's to handle: it fails the submission first).
static bool hl_submission_waits_unfailed(const hl_submission_t* sub) {
  for (size_t i = 0; i < sub->wait_count; ++i) {
    if (hl_semaphore_failure(sub->waits[i].semaphore)) return false;
  }
  return true;
}

// Under the semaphore's lock: atomics and the work queue only.
static void hl_submission_park_notify(hl_waiter_t* waiter) {
  hl_submission_t* sub = ((hl_park_waiter_t*)waiter)->submission;
  hl_queue_schedule_pump(sub->queue);
}

// The queue's lock held; takes each watched semaphore's lock in turn.
static void hl_submission_unpark_locked(hl_submission_t* sub) {
  if (!sub->parks) return;
  for (size_t i = 0; i < sub->wait_count; ++i) {
    hl_waiter_unregister(&sub->parks[i].base);
  }
}

// Whether wait |i| of |sub| lets it issue now: reached, covered by the queue,
// or backed by an issued device signal.
static bool hl_submission_wait_issuable(hl_queue_t* queue, hl_submission_t* sub,
                                        size_t i) {
  hl_semaphore_t* s = sub->waits[i].semaphore;
  uint64_t v = sub->waits[i].value;
  return hl_semaphore_value(s) >= v || s == queue->timeline ||
         hl_frontier_get(queue, s->id) >= v ||
         hl_semaphore_issued_value(s) >= v;
}

typedef enum hl_park_result_e {
  HL_PARKED,      // Watching: a signal or failure schedules the pump.
  HL_PARK_RETRY,  // Became issuable (or failed) meanwhile: look again.
  HL_PARK_FAILED  // Out of memory: the submission is failed.
} hl_park_result_t;

// Parks |sub| (the head of |queue|): watches each wait not yet reached, for
// its signal to be issued or, when it is already issued, for a failure.
// Each wait is looked at again under its semaphore's lock as it is
// registered, so a signal issued since the pump looked is not missed. The
// queue's lock held.
static hl_park_result_t hl_submission_park_locked(hl_queue_t* queue,
                                                  hl_submission_t* sub) {
  hl_submission_own_refs(sub);  // Others may issue it from now on.
  if (!sub->parks) {
    sub->parks = calloc(sub->wait_count, sizeof(*sub->parks));
    if (!sub->parks) {
      hl_submission_fail(
          sub,
          HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                         "queue %u submission %llu: parking on %zu waits",
                         queue->id, (unsigned long long)sub->value,
                         sub->wait_count),
          false);
      return HL_PARK_FAILED;
    }
  }
  bool blocked = false;
  for (size_t i = 0; i < sub->wait_count; ++i) {
    hl_semaphore_t* s = sub->waits[i].semaphore;
    uint64_t v = sub->waits[i].value;
    if (hl_semaphore_value(s) >= v || s == queue->timeline) continue;
    hl_park_waiter_t* w = &sub->parks[i];
    w->submission = sub;
    w->base.notify = hl_submission_park_notify;
    w->base.value = UINT64_MAX;
    w->base.on_issue = false;
    hl_semaphore_lock(s);
    // Registered first, then looked at (hl_semaphore_signal_owned); what
    // it watches is settled before the lock is let go, and notifications
    // only run under it.
    hl_semaphore_add_waiter_locked(s, &w->base);
    if (hl_semaphore_failure(s)) {
      hl_semaphore_remove_waiter_locked(&w->base);
      hl_semaphore_unlock(s);
      return HL_PARK_RETRY;  // The pump fails the submission.
    }
    if (!hl_submission_wait_issuable(queue, sub, i)) {
      w->base.value = v;
      w->base.on_issue = true;
      blocked = true;
    }
    // Else issued elsewhere: only its failure matters while parked.
    hl_semaphore_unlock(s);
  }
  return blocked ? HL_PARKED : HL_PARK_RETRY;
}

// Issues pending submissions of |queue| unless another thread is at it.
// The queue's lock held (released and retaken while issuing: callers must
// not keep state across the call).
static bool hl_queue_pump_issue_locked(hl_queue_t* queue);
static void hl_queue_pump_locked(hl_queue_t* queue) {
  // The issuer releases the lock while it issues; it picks up whatever is
  // submitted meanwhile before it stops. An issuer stopped at a host step
  // has passed the role to the queue's completer, which clears it.
  if (queue->issuing) return;
  queue->issuing = true;
  if (!hl_queue_pump_issue_locked(queue)) queue->issuing = false;
}

// Issues pending submissions in order until one must wait for a signal that
// has not been submitted. The queue's lock held; released while issuing.
// Returns true when issuing stopped at a host step: the queue's completer
// thread now holds the issuer's role.
static bool hl_queue_pump_issue_locked(hl_queue_t* queue) {
  while (queue->pending_head) {
    hl_submission_t* sub = queue->pending_head;
    hl_submission_unpark_locked(sub);
    if (!atomic_load(&sub->failure)) {
      bool issuable = true;
      for (size_t i = 0; i < sub->wait_count; ++i) {
        hl_status_t failure = hl_semaphore_failure(sub->waits[i].semaphore);
        if (failure) {
          hl_submission_fail_waited(sub, failure);
          issuable = true;
          break;
        }
        issuable &= hl_submission_wait_issuable(queue, sub, i);
      }
      // Wait-before-signal: park until every signal is issued (or one of the
      // waits fails). A submission that cannot park (out of memory) is
      // failed and issued as cancelled.
      hl_park_result_t parked =
          issuable ? HL_PARK_FAILED : hl_submission_park_locked(queue, sub);
      if (!issuable && parked == HL_PARK_RETRY) continue;  // Look again.
      if (!issuable && parked == HL_PARKED) {
        if (!sub->parked_once) {
          sub->parked_once = true;
          ++queue->stats.parked;
        }
        // The queue cannot move on its own now: blocked submitters must not
        // wait for it (the signal may come from one of them).
        queue->head_parked = true;
        hl_queue_wake_submitters_locked(queue);
        return false;
      }
    }
    queue->head_parked = false;
    queue->pending_head = sub->next;
    if (!queue->pending_head) queue->pending_tail = NULL;
    sub->next = NULL;
    --queue->pending_count;
    if (hl_queue_complete_at_once_locked(queue, sub)) continue;
    hl_queue_plan_issue_locked(queue, sub, &sub->plan);
    hl_queue_unlock(queue);
    bool suspended = hl_queue_issue_unlocked(queue, sub, &sub->plan);
    hl_queue_lock(queue);
    if (suspended) return true;
    hl_queue_publish_issue_locked(queue, sub, &sub->plan);
  }
  queue->head_parked = false;
  return false;
}

//===----------------------------------------------------------------------===//
// Completer (queues completed by events)
//===----------------------------------------------------------------------===//

// Set on completer threads: like the device's work thread, they never block
// on a queue's depth (they are what makes room).
static _Thread_local bool hl_on_completer_thread_;

bool hl_device_on_runtime_thread(hl_device_t* device) {
  return hl_on_completer_thread_ ||
         thrd_equal(thrd_current(), device->work_thread);
}

// Appends |sub| (a finished issue, or a host step) to the completer's list.
// Any lock may be held: the completer's mutex is a leaf.
static void hl_queue_completer_push(hl_queue_t* queue, hl_submission_t* sub) {
  sub->completer_next = NULL;
  mtx_lock(&queue->completer_mutex);
  if (queue->completer_tail) {
    queue->completer_tail->completer_next = sub;
  } else {
    queue->completer_head = sub;
  }
  queue->completer_tail = sub;
  atomic_fetch_add(&queue->completer_pushed, 1);
  if (queue->completer_sleeping) cnd_signal(&queue->completer_cond);
  mtx_unlock(&queue->completer_mutex);
}

// A submission whose waits were issued as device-side event waits has
// finished on the stream once its producers' events completed, but their
// completers may not have published yet (each queue has its own). Before
// |sub| publishes, or runs a host step, wait until every semaphore it waited
// on has reached its value or failed on the host side, so that a failed
// producer fails |sub| too (hl_submission_gate_check) and success never
// overtakes a failure. Bounded: each producer's event has completed.
static void hl_submission_await_producers(hl_queue_t* queue,
                                          hl_submission_t* sub) {
  if (atomic_load(&sub->failure)) return;
  for (size_t i = 0; i < sub->wait_count; ++i) {
    hl_semaphore_t* s = sub->waits[i].semaphore;
    if (s == queue->timeline) continue;
    hl_status_ignore(
        hl_semaphore_wait(s, sub->waits[i].value, HL_INFINITE_FUTURE));
  }
}

// Runs one entry of the completer's list: waits (blocking, on this thread
// only) until the stream has passed the entry's point, unless |reached|
// says a later point of the stream has been waited for already, then
// publishes the submission or runs its host step and goes on issuing.
static void hl_queue_completer_run(hl_queue_t* queue, hl_submission_t* sub,
                                   bool reached) {
  hl_backend_t* backend = queue->device->backend;
  hl_gated_t* step = sub->host_step;
  hl_shared_event_t* held = sub->completer_event;
  hl_backend_event_t* event = step   ? sub->step_event
                              : held ? held->event
                                     : NULL;
  hl_status_t st = NULL;
  if (!reached) {
    HL_TRACE_ZONE_BEGIN(zone, "hl_queue_completer_wait");
    st = event ? backend->vtable->event_synchronize(backend, event)
               : backend->vtable->stream_synchronize(backend, queue->stream);
    HL_TRACE_ZONE_END(zone);
  }
  if (st) {
    // The stream is broken: the submission fails, and so does the queue.
    hl_submission_fail(
        sub,
        hl_status_annotate(st, "waiting for queue %u submission %llu",
                           queue->id, (unsigned long long)sub->value),
        true);
  }
  hl_submission_await_producers(queue, sub);
  if (!step) {
    sub->completer_event = NULL;
    hl_submission_complete_dropping(sub, held);
    return;
  }
  // The host step: the stream has run everything before it and waits for
  // nothing after it (the rest is not issued yet).
  sub->host_step = NULL;
  sub->step_event = NULL;
  hl_gated_thunk(step);
  // Take the issuer's role back up where it stopped.
  hl_queue_lock(queue);
  hl_queue_issuer_begin_locked(queue);
  hl_queue_unlock(queue);
  if (hl_queue_issue_unlocked(queue, sub, &sub->plan)) return;
  hl_queue_lock(queue);
  hl_queue_publish_issue_locked(queue, sub, &sub->plan);
  if (!hl_queue_pump_issue_locked(queue)) queue->issuing = false;
  hl_queue_unlock(queue);
}

// Completes a batch the completer took from its list, in order. Entries
// that end in an event of the stream and run no host step form runs; one
// wait on the last event of a run covers the run (the stream passed every
// earlier point before it), so a completer that fell behind catches up with
// one driver call instead of one per submission. A failed wait falls back
// to waiting on each entry, so each failure is reported where it belongs.
static void hl_queue_completer_run_batch(hl_queue_t* queue,
                                         hl_submission_t* batch) {
  hl_backend_t* backend = queue->device->backend;
  while (batch) {
    hl_submission_t* last = NULL;
    size_t run = 0;
    for (hl_submission_t* p = batch;
         p && !p->host_step && p->completer_event && run < 64;
         p = p->completer_next) {
      last = p;
      ++run;
    }
    bool reached = false;
    if (run >= 2) {
      HL_TRACE_ZONE_BEGIN(zone, "hl_queue_completer_wait");
      hl_status_t st = backend->vtable->event_synchronize(
          backend, last->completer_event->event);
      HL_TRACE_ZONE_END(zone);
      reached = st == NULL;
      hl_status_ignore(st);  // Each entry waits again and reports it.
    } else {
      run = 1;
    }
    for (size_t i = 0; i < run; ++i) {
      hl_submission_t* sub = batch;
      batch = sub->completer_next;
      sub->completer_next = NULL;
      hl_queue_completer_run(queue, sub, reached);
    }
  }
}

// The completer's spin: a push since |seen|.
typedef struct hl_completer_spin_t {
  const hl_queue_t* queue;
  size_t seen;
} hl_completer_spin_t;

static bool hl_completer_pushed_since(const void* arg) {
  const hl_completer_spin_t* spin = (const hl_completer_spin_t*)arg;
  return atomic_load(&spin->queue->completer_pushed) != spin->seen;
}

static int hl_queue_completer_main(void* arg) {
  hl_queue_t* queue = (hl_queue_t*)arg;
  hl_on_completer_thread_ = true;
  hl_thread_set_name("hl-completer");
  mtx_lock(&queue->completer_mutex);
  for (;;) {
    if (!queue->completer_head && !queue->completer_stop) {
      // Spin before sleeping (runtime/base/spin.h): while the queue is busy
      // the next push comes within the spin, and the submitter makes no
      // futex call to wake this thread (on an H200 through the HIP-on-CUDA
      // bridge, a submission cost about 4 us beyond its driver calls).
      hl_completer_spin_t spin = {queue, atomic_load(&queue->completer_pushed)};
      mtx_unlock(&queue->completer_mutex);
      hl_spin_until(hl_completer_pushed_since, &spin);
      mtx_lock(&queue->completer_mutex);
    }
    while (!queue->completer_head && !queue->completer_stop) {
      queue->completer_sleeping = true;
      cnd_wait(&queue->completer_cond, &queue->completer_mutex);
      queue->completer_sleeping = false;
    }
    hl_submission_t* batch = queue->completer_head;
    if (!batch) break;  // Stopped and drained.
    queue->completer_head = NULL;
    queue->completer_tail = NULL;
    mtx_unlock(&queue->completer_mutex);
    hl_queue_completer_run_batch(queue, batch);
    mtx_lock(&queue->completer_mutex);
  }
  mtx_unlock(&queue->completer_mutex);
  return 0;
}

static void hl_queue_pump_work(hl_work_t* work) {
  hl_queue_t* queue =
      (hl_queue_t*)((char*)work - offsetof(hl_queue_t, pump_work));
  hl_queue_lock(queue);
  atomic_store(&queue->pump_scheduled, false);
  hl_queue_pump_locked(queue);
  hl_queue_unlock(queue);
  hl_queue_release(queue);
}

static void hl_queue_release_work(hl_work_t* work) {
  hl_queue_release(
      (hl_queue_t*)((char*)work - offsetof(hl_queue_t, pump_work)));
}

// Pump sinks (timeline_internal.h): pumps scheduled while this thread has
// a sink open go into it, reserved as device work so that flushes wait for
// them; a full sink, or a thread without one, hands pumps to the work
// thread.
#define HL_PUMP_SINK_BUDGET 64  // Pumps one drain runs before handing off.
static _Thread_local hl_pump_sink_t* hl_pump_sink_;

bool hl_pump_sink_open(hl_pump_sink_t* sink) {
  if (hl_pump_sink_) return false;
  sink->count = 0;
  hl_pump_sink_ = sink;
  return true;
}

// Runs a pump taken from a sink: like hl_queue_pump_work, except that the
// queue's last reference is never dropped here (this may be a stream's
// worker, which destroying the queue's stream would join): the work thread
// drops it.
static void hl_queue_run_sunk_pump(hl_queue_t* queue) {
  hl_device_t* device = queue->device;
  hl_queue_lock(queue);
  atomic_store(&queue->pump_scheduled, false);
  hl_queue_pump_locked(queue);
  hl_queue_unlock(queue);
  if (!hl_queue_release_unless_last(queue)) {
    // The last reference: nobody can schedule a pump on it any more, so its
    // pump work item is free to carry the release.
    queue->pump_work.fn = hl_queue_release_work;
    hl_device_enqueue_work(device, &queue->pump_work);
  }
  hl_device_unreserve_work(device);
}

void hl_pump_sink_close(hl_pump_sink_t* sink) {
  uint32_t budget = HL_PUMP_SINK_BUDGET;
  while (sink->count && budget) {
    hl_queue_t* queue = sink->queues[--sink->count];
    --budget;
    hl_queue_run_sunk_pump(queue);  // May add to |sink|.
  }
  hl_pump_sink_ = NULL;
  // Over budget: the rest goes to the work thread.
  while (sink->count) {
    hl_queue_t* queue = sink->queues[--sink->count];
    queue->pump_work.fn = hl_queue_pump_work;
    hl_device_enqueue_work(queue->device, &queue->pump_work);
    hl_device_unreserve_work(queue->device);
  }
}

// Any thread, any lock: atomics, this thread's sink and the work queue only
// (it runs in waiter notifications, under a semaphore's lock).
static void hl_queue_schedule_pump(hl_queue_t* queue) {
  if (atomic_exchange(&queue->pump_scheduled, true)) return;
  hl_queue_retain(queue);
  hl_pump_sink_t* sink = hl_pump_sink_;
  if (sink && sink->count < HL_PUMP_SINK_CAPACITY) {
    hl_device_reserve_work(queue->device);
    sink->queues[sink->count++] = queue;
    return;
  }
  queue->pump_work.fn = hl_queue_pump_work;
  hl_device_enqueue_work(queue->device, &queue->pump_work);
}

//===----------------------------------------------------------------------===//
// Queues
//===----------------------------------------------------------------------===//

static int hl_queue_completer_main(void* arg);

static hl_status_t hl_queue_start_completer(hl_queue_t* queue) {
  if (mtx_init(&queue->completer_mutex, mtx_plain) != thrd_success) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "creating queue %u's completer mutex", queue->id);
  }
  if (cnd_init(&queue->completer_cond) != thrd_success) {
    mtx_destroy(&queue->completer_mutex);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "creating queue %u's completer condition", queue->id);
  }
  if (thrd_create(&queue->completer, hl_queue_completer_main, queue) !=
      thrd_success) {
    cnd_destroy(&queue->completer_cond);
    mtx_destroy(&queue->completer_mutex);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "starting queue %u's completer thread", queue->id);
  }
  queue->by_events = true;
  return NULL;
}

// Stops and joins the completer once its list is drained (every submission
// holds its queue, so when the last reference goes the list is empty).
static void hl_queue_stop_completer(hl_queue_t* queue) {
  if (!queue->by_events) return;
  mtx_lock(&queue->completer_mutex);
  queue->completer_stop = true;
  cnd_signal(&queue->completer_cond);
  mtx_unlock(&queue->completer_mutex);
  if (thrd_equal(thrd_current(), queue->completer)) {
    // Unreachable while a submission holds the queue; never join oneself.
    HL_LOG_ERROR("queue %u released its last reference on its own completer",
                 queue->id);
    thrd_detach(queue->completer);
  } else {
    thrd_join(queue->completer, NULL);
  }
  cnd_destroy(&queue->completer_cond);
  mtx_destroy(&queue->completer_mutex);
  queue->by_events = false;
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
  atomic_init(&queue->completer_pushed, 0);
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

void hl_queue_release(hl_queue_t* queue) {
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

// Whether a new submission must wait for room: the queue can make progress
// on its own (its head is not parked on a signal nobody has submitted, which
// only another submission can provide) and holds |depth| submissions that
// are issued or ready to issue. The queue's lock held.
static bool hl_queue_full_locked(const hl_queue_t* queue) {
  return !queue->head_parked &&
         (uint64_t)queue->in_flight + queue->pending_count >=
             queue->device->queue_depth;
}

// Waits (the queue's lock is released meanwhile) until the queue has room,
// fails, or |deadline| passes. Returns false on the deadline.
static bool hl_queue_wait_space_locked(hl_queue_t* queue, hl_time_t deadline) {
  bool ok = true;
  ++queue->space_waiters;
  while (!queue->failure && hl_queue_full_locked(queue)) {
    // Read under the queue's lock: a wake-up after it is let go (they all
    // happen under it) moves the count, so the sleep below cannot miss it.
    uint32_t seen = queue->space_wakeups;
    hl_queue_unlock(queue);
    bool timed_out = false;
    mtx_lock(&queue->space_mutex);
    while (queue->space_wakeups == seen && !timed_out) {
      timed_out = hl_cnd_wait_until(&queue->space_cond, &queue->space_mutex,
                                    deadline) == thrd_timedout;
    }
    mtx_unlock(&queue->space_mutex);
    hl_queue_lock(queue);
    if (timed_out && !queue->failure && hl_queue_full_locked(queue)) {
      ok = false;
      break;
    }
  }
  --queue->space_waiters;
  return ok;
}

static void hl_ops_release_all(hl_op_t* ops, hl_status_t status) {
  while (ops) {
    hl_op_t* next = ops->next;
    ops->vtable->release(ops, status);
    ops = next;
  }
}

// Copies |fence|'s pairs into |entries| (the semaphores are not retained:
// see hl_submission_t.borrowed).
static void hl_copy_fence(const hl_fence_t* fence, size_t count,
                          hl_fence_entry_t* entries) {
  if (count) memcpy(entries, fence->entries, count * sizeof(*entries));
}

hl_status_t hl_queue_submit(hl_queue_t* queue, const hl_fence_t* wait_fence,
                            const hl_fence_t* signal_fence, hl_op_t* ops,
                            uint64_t* out_value) {
  if (!queue) {
    hl_status_t st = HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                                    "queue submission: queue is NULL");
    hl_ops_release_all(ops, st);
    return st;
  }
  HL_TRACE_ZONE_BEGIN(zone, "hl_queue_submit");
  size_t waits = hl_fence_count(wait_fence),
         signals = hl_fence_count(signal_fence);
  for (size_t i = 0; i < signals; ++i) {
    // A queue's timeline is signalled by its queue only, in order (and
    // under that queue's lock, which its fast path relies on).
    if (signal_fence->entries[i].semaphore->queue_owned) {
      hl_status_t st = HL_MAKE_STATUS(
          HL_STATUS_INVALID_ARGUMENT,
          "queue %u: a submission may not signal %s timeline", queue->id,
          signal_fence->entries[i].semaphore == queue->timeline
              ? "the queue's own"
              : "another queue's");
      hl_ops_release_all(ops, st);
      HL_TRACE_ZONE_END(zone);
      return st;
    }
  }
  for (size_t i = 0; i < waits; ++i) {
    if (wait_fence->entries[i].semaphore != queue->timeline) continue;
    // Only the queue advances its timeline, in order: a value it has not
    // submitted would never come (and this submission would wait on itself).
    uint64_t v = wait_fence->entries[i].value;
    uint64_t submitted = hl_queue_submitted_value(queue);
    if (v > submitted) {
      hl_status_t st = HL_MAKE_STATUS(
          HL_STATUS_INVALID_ARGUMENT,
          "queue %u: a wait on the queue's own timeline at %llu, which it "
          "has not submitted (last submitted value %llu)",
          queue->id, (unsigned long long)v, (unsigned long long)submitted);
      hl_ops_release_all(ops, st);
      HL_TRACE_ZONE_END(zone);
      return st;
    }
  }
  // Out of memory is reported below, with the queue named.
  hl_submission_t* sub = NULL;
  hl_status_t alloc_st =
      hl_recycler_alloc_default(&hl_submission_recycler_, (void**)&sub);
  if (alloc_st) hl_status_free(alloc_st);
  hl_fence_entry_t* entries = NULL;
  if (sub && waits + signals <= HL_SUBMISSION_INLINE_ENTRIES) {
    entries = sub->inline_entries;
  } else if (sub) {
    entries = malloc((waits + signals) * sizeof(*entries));
  }
  if (!sub || !entries) {
    hl_recycler_free(&hl_submission_recycler_, sub);
    hl_status_t st =
        HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                       "allocating a submission on queue %u", queue->id);
    hl_ops_release_all(ops, st);
    HL_TRACE_ZONE_END(zone);
    return st;
  }
  hl_copy_fence(wait_fence, waits, entries);
  hl_copy_fence(signal_fence, signals, entries + waits);
  sub->waits = entries;
  sub->wait_count = waits;
  sub->signals = entries + waits;
  sub->signal_count = signals;
  sub->ops = ops;
  sub->work.fn = hl_submission_destroy;
  atomic_init(&sub->failure, NULL);
  atomic_init(&sub->fail_queue, false);
  sub->queue = queue;
  sub->borrowed = true;  // Until the lock is taken, only this thread sees it.

  // Pumps this submission makes issuable (its publication signals parked
  // submissions) run here, once the lock is let go.
  hl_pump_sink_t sink;
  bool sink_owner = hl_pump_sink_open(&sink);
  hl_queue_lock(queue);
  if (!queue->failure && hl_queue_full_locked(queue) &&
      !hl_device_on_runtime_thread(queue->device)) {
    // Backpressure, as a full HIP stream blocks the host. The runtime's own
    // threads never block here (the pumps and completions they run are what
    // makes room).
    ++queue->stats.depth_stalls;
    HL_TRACE_ZONE_BEGIN(stall, "hl_queue_submit: queue full");
    hl_queue_wait_space_locked(queue, HL_INFINITE_FUTURE);
    HL_TRACE_ZONE_END(stall);
  }
  if (queue->failure) {
    // A failed queue runs nothing more; its signals fail with its status.
    hl_status_t failure = hl_status_clone(queue->failure);
    for (size_t i = 0; i < signals; ++i) {
      hl_semaphore_fail_unlocked(sub->signals[i].semaphore,
                                 hl_status_clone(failure));
    }
    hl_submission_fail(sub, hl_status_clone(failure), false);
    hl_submission_own_refs(sub);
    hl_device_enqueue_work(queue->device, &sub->work);
    hl_queue_unlock(queue);
    if (sink_owner) hl_pump_sink_close(&sink);
    HL_TRACE_ZONE_END(zone);
    return hl_status_annotate(failure, "queue %u has failed", queue->id);
  }
  // This thread issues |sub| right away (below) unless another issuer, a
  // scheduled pump or earlier submissions are ahead of it: then others may.
  // (A pump scheduled after this look finds |sub| issued, or gone.)
  bool pump_here = !atomic_load(&queue->pump_scheduled);
  if (!pump_here || queue->issuing || queue->pending_head || queue->by_events) {
    hl_submission_own_refs(sub);
  }
  sub->value =
      atomic_load_explicit(&queue->next_value, memory_order_relaxed) + 1;
  atomic_store_explicit(&queue->next_value, sub->value, memory_order_release);
  ++queue->stats.submissions;
  if (out_value) *out_value = sub->value;
  for (hl_op_t* op = ops; op; op = op->next) {
    if (op->vtable->on_submit) op->vtable->on_submit(op, queue, sub->value);
  }
  if (hl_ops_may_complete_at_once(ops) && pump_here && !queue->issuing &&
      !queue->pending_head && hl_submission_waits_unfailed(sub)) {
    // An empty submission, or one whose op can run here, on a quiet queue
    // completes here, without going through the pending list and the pump
    // (what they would do for it, but for the op's stream work).
    queue->issuing = true;
    bool completed = hl_queue_complete_at_once_locked(queue, sub);
    queue->issuing = false;
    if (completed) {
      hl_queue_unlock(queue);
      if (sink_owner) hl_pump_sink_close(&sink);
      HL_TRACE_ZONE_END(zone);
      return NULL;
    }
  }
  ++queue->pending_count;
  if (queue->pending_tail) {
    queue->pending_tail->next = sub;
  } else {
    queue->pending_head = sub;
  }
  queue->pending_tail = sub;
  if (pump_here) hl_queue_pump_locked(queue);
  hl_queue_unlock(queue);
  if (sink_owner) hl_pump_sink_close(&sink);
  HL_TRACE_ZONE_END(zone);
  return NULL;
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
  hl_gated_t gate;
} hl_host_call_op_t;

static void hl_host_call_trampoline(void* user) {
  hl_host_call_op_t* op = (hl_host_call_op_t*)user;
  op->fn(op->user);
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
    hl_queue_release(queues[i]);
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
