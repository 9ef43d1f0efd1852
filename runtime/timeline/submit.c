// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Submitting to a queue: check, plan, issue, park and publish, in order over
// one backend stream, with wait-before-signal parking, wait elision and
// failure propagation.

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

//===----------------------------------------------------------------------===//
// Frontier
//===----------------------------------------------------------------------===//

static uint64_t hl_frontier_get(const hl_queue_t* q, uint64_t id) {
  for (uint32_t i = 0; i < q->frontier_count; ++i) {
    if (q->frontier[i].semaphore_id == id) return q->frontier[i].value;
  }
  return 0;
}

void hl_frontier_raise(hl_queue_t* q, uint64_t id, uint64_t value) {
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

size_t hl_queue_frontier_snapshot(hl_queue_t* queue, hl_timepoint_id_t* out) {
  hl_queue_lock(queue);
  size_t count = queue->frontier_count;
  for (size_t i = 0; i < count; ++i) {
    out[i].semaphore_id = queue->frontier[i].semaphore_id;
    out[i].value = queue->frontier[i].value;
  }
  hl_queue_unlock(queue);
  return count;
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

void hl_gated_thunk(void* user) {
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
    // A host step: the issuer stops after this op, and the queue's step
    // thread runs |fn| once the stream has reached this point (the device's
    // completer sees to that), then goes on issuing
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
void hl_queue_plan_issue_locked(hl_queue_t* queue, hl_submission_t* sub,
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
        // Known reached: the queue's work from here on is ordered after it
        // (the pool reuses memory freed behind it, hl_queue_frontier_snapshot).
        hl_frontier_raise(queue, s->id, v);
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
      // A lazy timepoint gets its event now, while the semaphore's lock
      // keeps the producer from publishing past it (and its stream alive).
      hl_backend_event_t* event = NULL;
      hl_status_t st = hl_shared_event_materialize(shared, &event);
      if (st) {
        hl_semaphore_unlock(s);
        hl_submission_fail(sub,
                           hl_status_annotate(st, "queue %u: waiting for %llu",
                                              queue->id, (unsigned long long)v),
                           true);
        break;
      }
      // Held until the wait is issued.
      atomic_fetch_add_explicit(&shared->refs, 1, memory_order_relaxed);
      hl_semaphore_unlock(s);
      plan->waits[plan->wait_count++] = shared;
      ++queue->stats.waits_issued;
      if (shared->device != queue->device) {
        // A stream waits for another device's event (hl_device_peer_stats).
        atomic_fetch_add_explicit(&queue->device->cross_device_waits, 1,
                                  memory_order_relaxed);
      }
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

// Stops issuing |sub| at a host step (queues completed by events): marks the
// point on the stream and hands the rest of the issue, with the issuer's
// role and reference, to the device's completer (which hands the step to
// the queue's step thread). No lock held.
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
bool hl_queue_issue_unlocked(hl_queue_t* queue, hl_submission_t* sub,
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
  } else {
    // No event: nothing needs this point of the stream yet. The completer
    // closes each batch with one wait on the stream, and a queue that waits
    // on one of the signals records an event then (lazy timepoints,
    // hl_shared_event_materialize). A host step's mark has been passed.
    if (plan->event) hl_device_recycle_event(device, plan->event);
    plan->event = NULL;
    return false;
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
  if (!st) {
    st = hl_shared_event_create(device, plan->event, queue->stream, &shared);
  }
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
    // Its one reference is held while the timepoints are attached. A
    // submission that failed by now issued nothing and will fail its
    // signals: no other queue may wait for them on the device (the event
    // would let its work run); they park until the failure is published.
    // The queue's timeline still reaches its value (unless the queue fails).
    bool failed = atomic_load(&sub->failure) != NULL;
    size_t first = failed ? sub->signal_count : 0;
    if (failed && atomic_load(&sub->fail_queue)) first = sub->signal_count + 1;
    for (size_t i = first; i <= sub->signal_count; ++i) {
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
      if (plan->event) {
        // The completer's, until it has waited on the event.
        atomic_fetch_add_explicit(&shared->refs, 1, memory_order_relaxed);
        sub->completer_event = shared;
      }
      hl_queue_completer_push(queue, sub);
    }
    hl_shared_event_drop(shared);
  }
}

// Records that |sub|'s signals are issued on |queue| (its frontier): later
// waits on them are covered by queue order. Not those of a failed
// submission: a later one on this queue that waits on them must see the
// failure, not be ordered after work that never ran. The queue's lock held.
static void hl_queue_raise_frontier_locked(hl_queue_t* queue,
                                           hl_submission_t* sub) {
  if (atomic_load(&sub->failure)) return;
  for (size_t i = 0; i < sub->signal_count; ++i) {
    hl_frontier_raise(queue, sub->signals[i].semaphore->id,
                      sub->signals[i].value);
  }
}

// Step 3. The queue's lock held. Drops the issuer's reference to |sub|.
void hl_queue_publish_issue_locked(hl_queue_t* queue, hl_submission_t* sub,
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
bool hl_queue_complete_at_once_locked(hl_queue_t* queue, hl_submission_t* sub) {
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
    if (!op->vtable->run_at_once(op, queue, sub->value, &st)) return false;
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
void hl_submission_unpark_locked(hl_submission_t* sub) {
  if (!sub->parks) return;
  for (size_t i = 0; i < sub->wait_count; ++i) {
    hl_waiter_unregister(&sub->parks[i].base);
  }
}

// Whether wait |i| of |sub| lets it issue now: reached, covered by the queue,
// or backed by an issued device signal.
bool hl_submission_wait_issuable(hl_queue_t* queue, hl_submission_t* sub,
                                 size_t i) {
  hl_semaphore_t* s = sub->waits[i].semaphore;
  uint64_t v = sub->waits[i].value;
  return hl_semaphore_value(s) >= v || s == queue->timeline ||
         hl_frontier_get(queue, s->id) >= v ||
         hl_semaphore_issued_value(s) >= v;
}

// Parks |sub| (the head of |queue|): watches each wait not yet reached, for
// its signal to be issued or, when it is already issued, for a failure.
// Each wait is looked at again under its semaphore's lock as it is
// registered, so a signal issued since the pump looked is not missed. The
// queue's lock held.
hl_park_result_t hl_submission_park_locked(hl_queue_t* queue,
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

// Whether a new submission must wait for room: the queue can make progress
// on its own (its head is not parked on a signal nobody has submitted, which
// only another submission can provide) and holds |depth| submissions that
// are issued or ready to issue. The queue's lock held.
bool hl_queue_full_locked(const hl_queue_t* queue) {
  return !queue->head_parked &&
         (uint64_t)queue->in_flight + queue->pending_count >=
             queue->device->queue_depth;
}

// Waits (the queue's lock is released meanwhile) until the queue has room,
// fails, or |deadline| passes. Returns false on the deadline.
bool hl_queue_wait_space_locked(hl_queue_t* queue, hl_time_t deadline) {
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

// Checks a submission's fences against |queue|; the caller releases its ops
// on failure.
static hl_status_t hl_queue_submit_check(hl_queue_t* queue,
                                         const hl_fence_t* wait_fence,
                                         const hl_fence_t* signal_fence) {
  if (!queue) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "queue submission: queue is NULL");
  }
  size_t waits = hl_fence_count(wait_fence),
         signals = hl_fence_count(signal_fence);
  for (size_t i = 0; i < signals; ++i) {
    // A queue's timeline is signalled by its queue only, in order (and
    // under that queue's lock, which its fast path relies on).
    if (signal_fence->entries[i].semaphore->queue_owned) {
      return HL_MAKE_STATUS(
          HL_STATUS_INVALID_ARGUMENT,
          "queue %u: a submission may not signal %s timeline", queue->id,
          signal_fence->entries[i].semaphore == queue->timeline
              ? "the queue's own"
              : "another queue's");
    }
  }
  for (size_t i = 0; i < waits; ++i) {
    if (wait_fence->entries[i].semaphore != queue->timeline) continue;
    // Only the queue advances its timeline, in order: a value it has not
    // submitted would never come (and this submission would wait on itself).
    uint64_t v = wait_fence->entries[i].value;
    uint64_t submitted = hl_queue_submitted_value(queue);
    if (v > submitted) {
      return HL_MAKE_STATUS(
          HL_STATUS_INVALID_ARGUMENT,
          "queue %u: a wait on the queue's own timeline at %llu, which it "
          "has not submitted (last submitted value %llu)",
          queue->id, (unsigned long long)v, (unsigned long long)submitted);
    }
  }
  return NULL;
}

// A submission of |ops| with copies of the fences' pairs, not yet set up
// further (hl_queue_submit does that).
static hl_status_t hl_submission_new(hl_queue_t* queue,
                                     const hl_fence_t* wait_fence,
                                     const hl_fence_t* signal_fence,
                                     hl_op_t* ops, hl_submission_t** out) {
  size_t waits = hl_fence_count(wait_fence),
         signals = hl_fence_count(signal_fence);
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
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating a submission on queue %u", queue->id);
  }
  hl_copy_fence(wait_fence, waits, entries);
  hl_copy_fence(signal_fence, signals, entries + waits);
  sub->waits = entries;
  sub->wait_count = waits;
  sub->signals = entries + waits;
  sub->signal_count = signals;
  sub->ops = ops;
  *out = sub;
  return NULL;
}

// A host call that submits to its own queue while it is full would wait for
// itself: the call holds a slot, and nothing behind it completes before it
// returns. Refused instead of deadlocking.
static hl_status_t hl_queue_check_self_submit(hl_queue_t* queue) {
  // The runtime's own threads never block on depth (see hl_queue_submit).
  if (hl_host_call_queue_ != queue ||
      hl_device_on_runtime_thread(queue->device)) {
    return NULL;
  }
  hl_queue_lock(queue);
  bool full = !queue->failure && hl_queue_full_locked(queue);
  hl_queue_unlock(queue);
  if (!full) return NULL;
  return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                        "queue %u: a host call submitted to its own queue "
                        "while the queue is full (depth %u): it would wait "
                        "for itself",
                        queue->id, queue->device->queue_depth);
}

hl_status_t hl_queue_submit(hl_queue_t* queue, const hl_fence_t* wait_fence,
                            const hl_fence_t* signal_fence, hl_op_t* ops,
                            uint64_t* out_value) {
  HL_TRACE_ZONE_BEGIN(zone, "hl_queue_submit");
  // The quiet-queue path (submit_quiet.c: its predicate is documented
  // there) completes the submission here without a record; the rest below.
  if (hl_queue_submit_quiet(queue, wait_fence, signal_fence, ops, out_value)) {
    HL_TRACE_ZONE_END(zone);
    return NULL;
  }
  hl_submission_t* sub = NULL;
  hl_status_t st = hl_queue_submit_check(queue, wait_fence, signal_fence);
  if (!st) st = hl_queue_check_self_submit(queue);
  if (!st) st = hl_submission_new(queue, wait_fence, signal_fence, ops, &sub);
  if (st) {
    // The one failure exit: the ops are released with the status.
    hl_ops_release_all(ops, st);
    HL_TRACE_ZONE_END(zone);
    return st;
  }
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
    for (size_t i = 0; i < sub->signal_count; ++i) {
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
