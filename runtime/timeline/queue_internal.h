// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What the files of the queue share (queue.c, submit.c, completer.c): the
// queue and submission objects and the functions one file calls in another.
// Only those files include it; the rest of the runtime sees the queue
// through timeline_internal.h.

#ifndef HIPLINE_RUNTIME_TIMELINE_QUEUE_INTERNAL_H_
#define HIPLINE_RUNTIME_TIMELINE_QUEUE_INTERNAL_H_

#include "runtime/base/recycler.h"
#include "runtime/timeline/timeline_internal.h"

#define HL_FRONTIER_CAPACITY HL_QUEUE_FRONTIER_CAPACITY

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
  // go on later on the queue's step thread.
  hl_issue_plan_t plan;
  bool issue_started;   // Waits (and the gate) are issued.
  hl_op_t* issue_next;  // The next op to issue.
  // On the queue's completer list (queues completed by events):
  // completer_next and completer_reached belong to the device's completer.
  hl_submission_t* completer_next;
  hl_gated_t* host_step;               // Set: run it, then go on issuing.
  hl_backend_event_t* step_event;      // Marks the host step; NULL: sync.
  hl_shared_event_t* completer_event;  // Held; NULL: synchronize the stream.
  bool completer_reached;  // The stream has passed it (the completer's).
  // Waits and signals fit here in the common case (|waits| points here).
  hl_fence_entry_t inline_entries[HL_SUBMISSION_INLINE_ENTRIES];
};

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
  // the device's completer thread (device_completer.c) waits for the
  // queue's issued submissions in order and publishes them; the queue's
  // host steps (host calls) run in stream order on the queue's own step
  // thread, started at the first one, so no hipline code runs on HIP's
  // thread and a host call that blocks holds up no other queue.
  bool by_events;
  hl_completer_t* completer;  // The device's (not retained).
  // Pushed and not yet taken by the completer. |completer->mutex|.
  hl_submission_t* completer_head;
  hl_submission_t* completer_tail;
  // On the completer's list of queues with entries (|completer->mutex|);
  // a queue is destroyed only once it is off that list.
  bool completer_active;
  hl_queue_t* completer_link;
  // Taken by the completer thread, in order (that thread only).
  hl_submission_t* taken_head;
  hl_submission_t* taken_tail;
  // The step thread: runs one host step at a time (|step_mutex|, a leaf).
  bool step_started;
  bool step_stop;
  thrd_t step_thread;
  mtx_t step_mutex;
  cnd_t step_cond;
  hl_submission_t* step_sub;
  hl_frontier_entry_t frontier[HL_FRONTIER_CAPACITY];
  uint32_t frontier_count;
  uint32_t frontier_next_evict;
  hl_status_t failure;
  hl_queue_stats_t stats;
  uint64_t quiet_submissions;  // Completed by hl_queue_submit_quiet.
};

static inline void hl_queue_lock(hl_queue_t* queue) {
  hl_spinlock_lock(&queue->lock);
}
static inline void hl_queue_unlock(hl_queue_t* queue) {
  hl_spinlock_unlock(&queue->lock);
}

typedef enum hl_park_result_e {
  HL_PARKED,      // Watching: a signal or failure schedules the pump.
  HL_PARK_RETRY,  // Became issuable (or failed) meanwhile: look again.
  HL_PARK_FAILED  // Out of memory: the submission is failed.
} hl_park_result_t;

// Shared between the files of the queue.
extern hl_recycler_t hl_submission_recycler_;
void hl_submission_fail_waited(hl_submission_t* sub, hl_status_t failure);
void hl_submission_own_refs(hl_submission_t* sub);
void hl_submission_destroy(hl_work_t* work);
bool hl_submission_destroy_light(hl_submission_t* sub);
hl_status_t hl_submission_gate_check(void* user);
void hl_queue_issuer_begin_locked(hl_queue_t* queue);
void hl_queue_issuer_end_locked(hl_queue_t* queue);
void hl_queue_wake_submitters_locked(hl_queue_t* queue);
void hl_queue_note_completion_locked(hl_queue_t* queue);
void hl_queue_fail_locked(hl_queue_t* queue, hl_status_t status);
void hl_submission_publish_outcome_locked(hl_submission_t* sub,
                                          hl_shared_event_t* held);
extern _Thread_local hl_submission_t* hl_issuing_completion_;
void hl_submission_complete(void* user);
void hl_submission_unref(hl_submission_t* sub);
void hl_submission_finish(hl_submission_t* sub);
void hl_gated_thunk(void* user);
void hl_queue_plan_issue_locked(hl_queue_t* queue, hl_submission_t* sub,
                                hl_issue_plan_t* plan);
bool hl_queue_issue_unlocked(hl_queue_t* queue, hl_submission_t* sub,
                             hl_issue_plan_t* plan);
void hl_queue_publish_issue_locked(hl_queue_t* queue, hl_submission_t* sub,
                                   hl_issue_plan_t* plan);
bool hl_queue_complete_at_once_locked(hl_queue_t* queue, hl_submission_t* sub);
void hl_submission_unpark_locked(hl_submission_t* sub);
bool hl_submission_wait_issuable(hl_queue_t* queue, hl_submission_t* sub,
                                 size_t i);
hl_park_result_t hl_submission_park_locked(hl_queue_t* queue,
                                           hl_submission_t* sub);
void hl_queue_pump_locked(hl_queue_t* queue);
extern _Thread_local bool hl_on_completer_thread_;
// The queue whose host call runs on this thread (NULL outside host calls).
extern _Thread_local hl_queue_t* hl_host_call_queue_;
void hl_queue_schedule_pump(hl_queue_t* queue);
void hl_submission_complete_dropping(hl_submission_t* sub,
                                     hl_shared_event_t* held);
// Issues pending submissions in order (completer.c); the queue's lock
// held. Returns true when issuing stopped at a host step.
bool hl_queue_pump_issue_locked(hl_queue_t* queue);

// The device's completer (device_completer.c), for queues completed by
// events. Appends |sub| (a finished issue, or a host step) to |queue|'s
// list; any lock may be held (the completer's mutex is a leaf).
void hl_queue_completer_push(hl_queue_t* queue, hl_submission_t* sub);
// Attaches |queue| to its device's completer, starting it with the first
// queue.
hl_status_t hl_queue_start_completer(hl_queue_t* queue);
// Waits until the completer has let go of |queue| (its list is drained:
// every submission holds its queue) and joins its step thread.
void hl_queue_stop_completer(hl_queue_t* queue);
bool hl_queue_full_locked(const hl_queue_t* queue);
bool hl_queue_wait_space_locked(hl_queue_t* queue, hl_time_t deadline);

// Records that |id| reached |value| on |queue|'s frontier (submit.c). The
// queue's lock held.
void hl_frontier_raise(hl_queue_t* queue, uint64_t id, uint64_t value);

// Whether a submission of |ops| may complete at once by its shape: no ops,
// or one that can run here (hl_op_vtable_t.run_at_once).
static inline bool hl_ops_may_complete_at_once(const hl_op_t* ops) {
  return !ops || (!ops->next && ops->vtable->run_at_once);
}

// This thread's open pump sink, or NULL (completer.c; see hl_pump_sink_open).
extern _Thread_local hl_pump_sink_t* hl_pump_sink_;

// The quiet-queue path of hl_queue_submit (submit_quiet.c). Completes the
// submission on the calling thread, with no submission record, when the
// queue is quiet (see hl_queue_quiet_locked there) and returns true;
// returns false, having changed nothing, when the general path must take
// it, which includes every submission that hl_queue_submit rejects.
bool hl_queue_submit_quiet(hl_queue_t* queue, const hl_fence_t* wait_fence,
                           const hl_fence_t* signal_fence, hl_op_t* ops,
                           uint64_t* out_value);

// Submissions that took the quiet path on |queue| (tests look).
uint64_t hl_queue_quiet_submissions(hl_queue_t* queue);

#endif  // HIPLINE_RUNTIME_TIMELINE_QUEUE_INTERNAL_H_
