// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The quiet-queue path of hl_queue_submit.
//
// On a queue with nothing pending, in flight or being issued, a submission
// whose waits are all reached and that needs nothing from the stream (no
// operations, or one that does its whole work here: run_at_once) has
// nothing to wait for and nobody to order itself after. It is completed on
// the submitting thread as IREE's synchronous device does it: the waits are
// looked at, the op runs, the signals are raised. No submission record is
// made, no reference taken and given back, no fence copied; each wait is
// two loads (value and failure), each signal one compare-and-swap when
// nobody waits on it, plus the queue's lock and the publication of the
// queue's own timeline and done values (hl_semaphore_signal_owned_two).
// Everything else (parking, device waits, failures to propagate, fault
// injection, checked mode) takes the general path in queue.c, which keeps
// its own at-once completion for submissions that become quiet later.

#include "runtime/base/faults.h"
#include "runtime/timeline/queue_internal.h"

// hl_fence_count, here where it inlines without link-time optimization.
static inline size_t hl_quiet_fence_count(const hl_fence_t* fence) {
  return fence ? fence->count : 0;
}

// Whether nothing is injected (hl_faults_none), reading HIPLINE_FAULTS
// first if nothing has yet: a backend that never asks would otherwise keep
// the first submission of the process off the quiet path.
static bool hl_quiet_faults_none_slow(void) {
  if (atomic_load_explicit(&hl_faults_state_, memory_order_relaxed) !=
      HL_FAULTS_UNREAD) {
    return false;
  }
  (void)hl_faults_snapshot();
  return hl_faults_none();
}
static inline bool hl_quiet_faults_none(void) {
  return hl_faults_none() || hl_quiet_faults_none_slow();
}

// The quiet-path predicate. A submission takes the quiet path exactly when
// both halves hold: hl_quiet_eligible (facts about the submission that,
// once true, stay true: a reached value stays reached, and a failed
// semaphore is seen by the same load that the general path would make a
// moment later; looked at before the queue's lock) and
// hl_queue_quiet_locked (the queue's state, under its lock).
//
// hl_quiet_eligible:
// - a queue is given (argument errors are the general path's to report);
// - |ops| is empty, or one op with run_at_once (hl_op_vtable_t);
// - no fault injection (HIPLINE_FAULTS), so no injected failure or delay
//   is skipped;
// - not checked mode (HIPLINE_CHECKED): its bookkeeping lives on the
//   general path;
// - every wait is on the queue's own timeline at a value it has submitted
//   (queue order covers it) or reached and on a semaphore that has not
//   failed (a failed one is the general path's to report, naming the
//   submission);
// - no signal is of a queue's timeline (the general path rejects it);
// - the queue looks idle from its atomics: not failed, no pump scheduled,
//   and every submitted value done (a hint; the lock decides).
static inline bool hl_quiet_eligible(hl_queue_t* queue,
                                     const hl_fence_t* wait_fence,
                                     const hl_fence_t* signal_fence,
                                     const hl_op_t* ops) {
  if (!queue || !hl_ops_may_complete_at_once(ops) || !hl_quiet_faults_none() ||
      queue->device->checked ||
      atomic_load_explicit(&queue->failed, memory_order_relaxed) ||
      atomic_load_explicit(&queue->pump_scheduled, memory_order_relaxed) ||
      atomic_load_explicit(&queue->next_value, memory_order_relaxed) !=
          atomic_load_explicit(&queue->done->value, memory_order_relaxed)) {
    return false;
  }
  size_t waits = hl_quiet_fence_count(wait_fence);
  for (size_t i = 0; i < waits; ++i) {
    hl_semaphore_t* s = wait_fence->entries[i].semaphore;
    uint64_t v = wait_fence->entries[i].value;
    if (s == queue->timeline) {
      if (v > atomic_load_explicit(&queue->next_value, memory_order_relaxed)) {
        return false;
      }
    } else if (hl_semaphore_value(s) < v || hl_semaphore_failure(s)) {
      return false;
    }
  }
  size_t signals = hl_quiet_fence_count(signal_fence);
  for (size_t i = 0; i < signals; ++i) {
    if (signal_fence->entries[i].semaphore->queue_owned) return false;
  }
  return true;
}

// hl_queue_quiet_locked: the queue has not failed, nothing is pending,
// issued and not completed, or being issued, and no pump is scheduled, so
// every earlier submission has completed and published (on queues completed
// by events too: the completer publishes only after the stream has passed a
// submission's event). The queue's lock held.
static inline bool hl_queue_quiet_locked(hl_queue_t* queue) {
  return !queue->failure && !queue->pending_head && !queue->in_flight &&
         !queue->issuing &&
         !atomic_load_explicit(&queue->pump_scheduled, memory_order_relaxed);
}

// Publishes a quiet submission's outcome: |failure| (borrowed; set when its
// op failed) fails its signals, else they are raised, then the queue's
// timeline and done values. The queue's lock held, as on the general path.
static void hl_quiet_publish_locked(hl_queue_t* queue,
                                    const hl_fence_t* signal_fence,
                                    uint64_t value, hl_status_t failure) {
  size_t signals = hl_quiet_fence_count(signal_fence);
  for (size_t i = 0; i < signals; ++i) {
    hl_fence_entry_t e = signal_fence->entries[i];
    if (failure) {
      hl_semaphore_fail_unlocked(e.semaphore, hl_status_clone(failure));
    } else {
      hl_semaphore_signal_unlocked(e.semaphore, e.value);
    }
    hl_frontier_raise(queue, e.semaphore->id, e.value);
  }
  if (failure) ++queue->stats.failed;
  hl_semaphore_signal_owned_next(queue->timeline, queue->done, value);
}

// hl_pump_sink_open and hl_pump_sink_close, with their common cases inline:
// no sink open yet, and none of the signals released a parked submission.
static inline bool hl_quiet_sink_open(hl_pump_sink_t* sink) {
  if (hl_pump_sink_) return false;
  sink->count = 0;
  hl_pump_sink_ = sink;
  return true;
}
static inline void hl_quiet_sink_close(hl_pump_sink_t* sink) {
  if (sink->count) {
    hl_pump_sink_close(sink);
  } else {
    hl_pump_sink_ = NULL;
  }
}

bool hl_queue_submit_quiet(hl_queue_t* queue, const hl_fence_t* wait_fence,
                           const hl_fence_t* signal_fence, hl_op_t* ops,
                           uint64_t* out_value) {
  if (!hl_quiet_eligible(queue, wait_fence, signal_fence, ops)) return false;
  // A parked submission of another queue that a signal releases is pumped
  // here, once the lock is let go (as on the general path).
  hl_pump_sink_t sink;
  bool sink_owner = hl_quiet_sink_open(&sink);
  hl_queue_lock(queue);
  uint64_t value =
      atomic_load_explicit(&queue->next_value, memory_order_relaxed) + 1;
  hl_status_t failure = NULL;
  if (!hl_queue_quiet_locked(queue) ||
      (ops && !ops->vtable->run_at_once(ops, queue, value, &failure))) {
    hl_queue_unlock(queue);
    if (sink_owner) hl_quiet_sink_close(&sink);
    return false;
  }
  atomic_store_explicit(&queue->next_value, value, memory_order_release);
  if (ops && ops->vtable->on_submit) ops->vtable->on_submit(ops, queue, value);
  ++queue->stats.submissions;
  queue->stats.waits_elided += hl_quiet_fence_count(wait_fence);
  ++queue->quiet_submissions;
  // Published with the issuer's count held, as an issue would be
  // (hl_device_wait_issuers).
  hl_queue_issuer_begin_locked(queue);
  hl_quiet_publish_locked(queue, signal_fence, value, failure);
  hl_queue_issuer_end_locked(queue);
  hl_queue_unlock(queue);
  if (out_value) *out_value = value;
  if (ops && (!ops->vtable->release_light ||
              !ops->vtable->release_light(ops, failure))) {
    // No lock held, on the submitting thread: as the submit's own error
    // paths release ops.
    ops->vtable->release(ops, failure);
  }
  hl_status_free(failure);
  if (sink_owner) hl_quiet_sink_close(&sink);
  return true;
}

uint64_t hl_queue_quiet_submissions(hl_queue_t* queue) {
  hl_queue_lock(queue);
  uint64_t count = queue->quiet_submissions;
  hl_queue_unlock(queue);
  return count;
}
