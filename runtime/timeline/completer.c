// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The completion side of a queue: publishing a finished submission and the
// pumps that issue what became issuable. The completer thread of queues
// completed by events (HIP) is in device_completer.c.

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

// Publishes the outcome of |sub|, which has finished on the stream. Runs on
// the stream (a backend host function) or on the device's completer thread,
// which passes the reference it held on the submission's event in |held|
// (dropped before the queue's done value is signalled, so that once it is
// visible the event is back in the pool). The queue's lock held; each
// semaphore's lock is taken in turn.
void hl_submission_publish_outcome_locked(hl_submission_t* sub,
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
_Thread_local hl_submission_t* hl_issuing_completion_;

void hl_submission_complete_dropping(hl_submission_t* sub,
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

void hl_submission_complete(void* user) {
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
void hl_submission_unref(hl_submission_t* sub) {
  if (atomic_fetch_sub(&sub->refs, 1) != 1) return;
  hl_submission_finish(sub);
}

// Destroys |sub| (its last reference is gone), here where that is cheap.
void hl_submission_finish(hl_submission_t* sub) {
  hl_device_t* device = sub->queue->device;
  bool reserved = atomic_load(&sub->completion_reserved);
  if (hl_submission_destroy_light(sub)) {
    if (reserved) hl_device_unreserve_work(device);
    return;
  }
  hl_submission_own_refs(sub);  // Its issuer is still in hl_queue_submit.
  hl_device_enqueue_cleanup(device, &sub->work, reserved);
}

// Issues pending submissions of |queue| unless another thread is at it.
// The queue's lock held (released and retaken while issuing: callers must
// not keep state across the call).
void hl_queue_pump_locked(hl_queue_t* queue) {
  // The issuer releases the lock while it issues; it picks up whatever is
  // submitted meanwhile before it stops. An issuer stopped at a host step
  // has passed the role to the queue's step thread, which clears it.
  if (queue->issuing) return;
  queue->issuing = true;
  if (!hl_queue_pump_issue_locked(queue)) queue->issuing = false;
}

// Issues pending submissions in order until one must wait for a signal that
// has not been submitted. The queue's lock held; released while issuing.
// Returns true when issuing stopped at a host step: the queue's step thread
// will hold the issuer's role.
bool hl_queue_pump_issue_locked(hl_queue_t* queue) {
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

static void hl_queue_pump_work(hl_work_t* work) {
  hl_queue_t* queue =
      (hl_queue_t*)((char*)work - offsetof(hl_queue_t, pump_work));
  hl_queue_lock(queue);
  atomic_store(&queue->pump_scheduled, false);
  hl_queue_pump_locked(queue);
  hl_queue_unlock(queue);
  hl_queue_release_internal(queue);
}

static void hl_queue_release_work(hl_work_t* work) {
  hl_queue_release_internal(
      (hl_queue_t*)((char*)work - offsetof(hl_queue_t, pump_work)));
}

// Pump sinks (timeline_internal.h): pumps scheduled while this thread has
// a sink open go into it, reserved as device work so that flushes wait for
// them; a full sink, or a thread without one, hands pumps to the work
// thread.
#define HL_PUMP_SINK_BUDGET 64  // Pumps one drain runs before handing off.
_Thread_local hl_pump_sink_t* hl_pump_sink_;  // queue_internal.h

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
void hl_queue_schedule_pump(hl_queue_t* queue) {
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
