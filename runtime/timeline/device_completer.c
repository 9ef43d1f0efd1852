// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The completer of queues completed by events (HIP): one thread per device
// that waits for the issued submissions of every such queue and publishes
// them in order, and the step threads that run a queue's host steps.
//
// Each pass takes what the queues pushed since the last one and looks, per
// queue, at the newest point it needs: the last entry before a host step,
// or the host step's mark. That point is an event when the entry has one
// (a lazy timepoint someone materialized, or a host step's mark), else the
// queue's stream (everything enqueued before the wait or the query). One
// driver call then covers every entry up to it:
// - one queue with entries, or submitters idle since the last pass: a
//   blocking wait (event or stream synchronization) on that point;
// - several queues while submitters push: a query per queue, then a sleep
//   that doubles from HL_COMPLETER_POLL_MIN_NS to HL_COMPLETER_POLL_MAX_NS
//   while nothing completes. A blocking wait would hold up the other
//   queues' completions behind this one's device time. HIPLINE_COMPLETER=
//   block makes it wait on one queue at a time there too.
// A submission whose waits were device-side event waits is published only
// once every semaphore it waited on has been published (so a failed
// producer fails it too); its producer may be another queue of this very
// thread, so that is checked, never waited for: the queue stays put until
// a later pass.

#include <stdlib.h>

#include "runtime/base/env.h"
#include "runtime/base/log.h"
#include "runtime/base/spin.h"
#include "runtime/base/time_util.h"
#include "runtime/base/trace.h"
#include "runtime/timeline/queue_internal.h"
#include "runtime/timeline/timeline_internal.h"

#define HL_COMPLETER_POLL_MIN_NS 20000    // 20 us.
#define HL_COMPLETER_POLL_MAX_NS 1000000  // 1 ms.

struct hl_completer_t {
  hl_device_t* device;
  // A leaf: taken under a queue's lock by pushes.
  mtx_t mutex;
  cnd_t cond;          // The thread sleeps (or backs off) on it.
  cnd_t removed;       // hl_queue_stop_completer waits on it.
  hl_queue_t* active;  // Queues with entries (hl_queue_t.completer_link).
  bool sleeping;       // In cnd_wait: a push must signal.
  bool poll;           // HIPLINE_COMPLETER=poll (the default).
  bool stop;
  atomic_size_t pushed;  // Pushes so far (the thread spins on it).
  atomic_uint step_threads;
  thrd_t thread;
};

// Set on completer and step threads: like the device's work thread, they
// never block on a queue's depth (they are what makes room).
_Thread_local bool hl_on_completer_thread_;

bool hl_device_on_runtime_thread(hl_device_t* device) {
  return hl_on_completer_thread_ ||
         thrd_equal(thrd_current(), device->work_thread);
}

void hl_queue_completer_push(hl_queue_t* queue, hl_submission_t* sub) {
  hl_completer_t* c = queue->completer;
  sub->completer_next = NULL;
  sub->completer_reached = false;
  mtx_lock(&c->mutex);
  if (queue->completer_tail) {
    queue->completer_tail->completer_next = sub;
  } else {
    queue->completer_head = sub;
  }
  queue->completer_tail = sub;
  if (!queue->completer_active) {
    queue->completer_active = true;
    queue->completer_link = c->active;
    c->active = queue;
  }
  atomic_fetch_add(&c->pushed, 1);
  if (c->sleeping) cnd_signal(&c->cond);
  mtx_unlock(&c->mutex);
}

//===----------------------------------------------------------------------===//
// Entries
//===----------------------------------------------------------------------===//

// Whether every semaphore |sub| waited on (other than its own queue's
// timeline) has been published as reached or failed. Its waits were issued
// as device-side event waits, so once the stream passed |sub| their
// producers' events completed too; only their publication may lag.
static bool hl_submission_producers_published(hl_queue_t* queue,
                                              hl_submission_t* sub) {
  if (atomic_load(&sub->failure)) return true;
  for (size_t i = 0; i < sub->wait_count; ++i) {
    hl_semaphore_t* s = sub->waits[i].semaphore;
    if (s == queue->timeline) continue;
    if (hl_semaphore_value(s) < sub->waits[i].value &&
        !hl_semaphore_failure(s)) {
      return false;
    }
  }
  return true;
}

// The device point that covers |sub|: its host step's mark, its event, or
// (NULL) the stream.
static hl_backend_event_t* hl_completer_point(hl_submission_t* sub) {
  if (sub->host_step) return sub->step_event;
  return sub->completer_event ? sub->completer_event->event : NULL;
}

// Waits (blocking) for |sub| alone and fails it when the wait fails: the
// path after a batch's wait or query failed, so that each failure is
// reported where it belongs.
static void hl_completer_wait_entry(hl_queue_t* queue, hl_submission_t* sub) {
  hl_backend_t* backend = queue->device->backend;
  hl_backend_event_t* event = hl_completer_point(sub);
  hl_status_t st =
      event ? backend->vtable->event_synchronize(backend, event)
            : backend->vtable->stream_synchronize(backend, queue->stream);
  if (st) {
    // The stream is broken: the submission fails, and so does the queue.
    hl_submission_fail(
        sub,
        hl_status_annotate(st, "waiting for queue %u submission %llu",
                           queue->id, (unsigned long long)sub->value),
        true);
  }
  sub->completer_reached = true;
}

static void hl_queue_step_post(hl_queue_t* queue, hl_submission_t* sub);

// Publishes the reached entries at the head of |queue|'s taken list, in
// order, until one whose producers are not published yet. A host step goes
// to the queue's step thread (nothing follows it: the issuer stopped
// there). Returns whether anything was published or handed on.
static bool hl_completer_publish_reached(hl_queue_t* queue) {
  bool progress = false;
  while (queue->taken_head && queue->taken_head->completer_reached) {
    hl_submission_t* sub = queue->taken_head;
    if (!hl_submission_producers_published(queue, sub)) break;
    queue->taken_head = sub->completer_next;
    if (!queue->taken_head) queue->taken_tail = NULL;
    sub->completer_next = NULL;
    progress = true;
    if (sub->host_step) {
      hl_queue_step_post(queue, sub);
      continue;
    }
    hl_shared_event_t* held = sub->completer_event;
    sub->completer_event = NULL;
    hl_submission_complete_dropping(sub, held);
  }
  return progress;
}

// The last entry one wait covers: the first host step, or the tail.
static hl_submission_t* hl_completer_run_end(hl_queue_t* queue) {
  hl_submission_t* p = queue->taken_head;
  while (p->completer_next && !p->host_step) p = p->completer_next;
  return p;
}

static void hl_completer_mark_reached(hl_queue_t* queue, hl_submission_t* end) {
  for (hl_submission_t* p = queue->taken_head; p; p = p->completer_next) {
    p->completer_reached = true;
    if (p == end) break;
  }
}

// Waits for or (|poll|) queries the point of |queue|'s run. Marks the run
// reached when it is; on a failed wait or query, waits for each entry of
// the run alone. Returns whether the run is reached.
static bool hl_completer_settle_run(hl_queue_t* queue, bool poll) {
  hl_backend_t* backend = queue->device->backend;
  hl_submission_t* end = hl_completer_run_end(queue);
  if (end->completer_reached) return true;
  hl_backend_event_t* event = hl_completer_point(end);
  bool reached = false;
  hl_status_t st = NULL;
  HL_TRACE_ZONE_BEGIN(zone, "hl_queue_completer_wait");
  if (poll && event) {
    st = backend->vtable->event_query(backend, event, &reached);
  } else if (poll && backend->vtable->stream_query) {
    st = backend->vtable->stream_query(backend, queue->stream, &reached);
  } else {
    st = event ? backend->vtable->event_synchronize(backend, event)
               : backend->vtable->stream_synchronize(backend, queue->stream);
    reached = true;
  }
  HL_TRACE_ZONE_END(zone);
  if (st) {
    hl_status_ignore(st);  // Each entry waits again and reports it.
    for (hl_submission_t* p = queue->taken_head; p; p = p->completer_next) {
      if (!p->completer_reached) hl_completer_wait_entry(queue, p);
      if (p == end) break;
    }
    return true;
  }
  if (reached) hl_completer_mark_reached(queue, end);
  return reached;
}

//===----------------------------------------------------------------------===//
// The thread
//===----------------------------------------------------------------------===//

// Moves what |queue| pushed to its taken list. |c->mutex| held.
static void hl_completer_take_locked(hl_queue_t* queue) {
  if (!queue->completer_head) return;
  if (queue->taken_tail) {
    queue->taken_tail->completer_next = queue->completer_head;
  } else {
    queue->taken_head = queue->completer_head;
  }
  queue->taken_tail = queue->completer_tail;
  queue->completer_head = NULL;
  queue->completer_tail = NULL;
}

// Unlinks the queues with nothing left and lets their stoppers go on.
// |c->mutex| held.
static void hl_completer_prune_locked(hl_completer_t* c) {
  bool removed = false;
  for (hl_queue_t** link = &c->active; *link;) {
    hl_queue_t* queue = *link;
    if (queue->completer_head || queue->taken_head) {
      link = &queue->completer_link;
      continue;
    }
    *link = queue->completer_link;
    queue->completer_link = NULL;
    queue->completer_active = false;
    removed = true;
  }
  if (removed) cnd_broadcast(&c->removed);
}

// One pass over the queues taken from |list| (linked by completer_link;
// only this thread unlinks, pushes only prepend to c->active). Returns
// whether anything was published.
static bool hl_completer_pass(hl_completer_t* c, hl_queue_t* list,
                              bool submitters_active) {
  uint32_t waiting = 0;
  for (hl_queue_t* q = list; q; q = q->completer_link) {
    if (q->taken_head) ++waiting;
  }
  bool poll = waiting > 1 && submitters_active && c->poll;
  bool progress = false;
  bool blocked_once = false;
  for (hl_queue_t* q = list; q; q = q->completer_link) {
    if (!q->taken_head) continue;
    // Entries reached by an earlier pass, held back by their producers.
    progress |= hl_completer_publish_reached(q);
    if (!q->taken_head) continue;
    if (q->taken_head->completer_reached) continue;  // Still held back.
    // Without polling, one blocking wait per pass: the other queues are
    // looked at again right after it.
    if (!poll && blocked_once) continue;
    if (!poll) blocked_once = true;
    if (hl_completer_settle_run(q, poll)) {
      progress |= hl_completer_publish_reached(q);
    }
  }
  return progress;
}

// The completer's spin: a push since |seen|.
typedef struct hl_completer_spin_t {
  const hl_completer_t* completer;
  size_t seen;
} hl_completer_spin_t;

static bool hl_completer_pushed_since(const void* arg) {
  const hl_completer_spin_t* spin = (const hl_completer_spin_t*)arg;
  return atomic_load(&spin->completer->pushed) != spin->seen;
}

// Sleeps while nothing is active; returns false once stopped and drained.
// |c->mutex| held (released while spinning and sleeping).
static bool hl_completer_await_work_locked(hl_completer_t* c) {
  if (!c->active && !c->stop) {
    // Spin before sleeping (runtime/base/spin.h): while queues are busy the
    // next push comes within the spin, and the submitter makes no futex
    // call to wake this thread (on an H200 through the HIP-on-CUDA bridge,
    // a submission cost about 4 us beyond its driver calls).
    hl_completer_spin_t spin = {c, atomic_load(&c->pushed)};
    mtx_unlock(&c->mutex);
    hl_spin_until(hl_completer_pushed_since, &spin);
    mtx_lock(&c->mutex);
  }
  while (!c->active && !c->stop) {
    c->sleeping = true;
    cnd_wait(&c->cond, &c->mutex);
    c->sleeping = false;
  }
  return c->active != NULL;
}

// Sleeps |ns|, or until stopped. A push does not wake it: new entries come
// after the pending ones in their queue, and a poll per push would cost
// the driver calls in proportion to the submitters' rate, not the work's.
static void hl_completer_back_off_locked(hl_completer_t* c, int64_t ns) {
  struct timespec deadline;
  timespec_get(&deadline, TIME_UTC);
  deadline.tv_nsec += (long)ns;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec += deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
  }
  if (!c->stop) cnd_timedwait(&c->cond, &c->mutex, &deadline);
}

static int hl_completer_main(void* arg) {
  hl_completer_t* c = (hl_completer_t*)arg;
  hl_on_completer_thread_ = true;
  hl_thread_set_name("hl-completer");
  size_t seen = atomic_load(&c->pushed);
  int64_t back_off = HL_COMPLETER_POLL_MIN_NS;
  mtx_lock(&c->mutex);
  for (;;) {
    if (!hl_completer_await_work_locked(c)) break;  // Stopped and drained.
    for (hl_queue_t* q = c->active; q; q = q->completer_link) {
      hl_completer_take_locked(q);
    }
    hl_queue_t* list = c->active;
    size_t pushed = atomic_load(&c->pushed);
    bool submitters_active = pushed != seen;
    seen = pushed;
    mtx_unlock(&c->mutex);
    bool progress = hl_completer_pass(c, list, submitters_active);
    mtx_lock(&c->mutex);
    hl_completer_prune_locked(c);
    if (progress || !c->active) {
      back_off = HL_COMPLETER_POLL_MIN_NS;
    } else {
      // Nothing reached: polled points still pending, or entries held back
      // by producers whose publication is on its way.
      hl_completer_back_off_locked(c, back_off);
      if (back_off < HL_COMPLETER_POLL_MAX_NS) back_off *= 2;
    }
  }
  mtx_unlock(&c->mutex);
  return 0;
}

//===----------------------------------------------------------------------===//
// Step threads (a queue's host steps)
//===----------------------------------------------------------------------===//

// Runs |sub|'s host step (the stream has run everything before it and
// waits for nothing after it: the rest is not issued yet), then takes the
// issuer's role back up where it stopped.
static void hl_queue_step_run(hl_queue_t* queue, hl_submission_t* sub) {
  hl_gated_t* step = sub->host_step;
  sub->host_step = NULL;
  sub->step_event = NULL;
  hl_gated_thunk(step);
  hl_queue_lock(queue);
  hl_queue_issuer_begin_locked(queue);
  hl_queue_unlock(queue);
  if (hl_queue_issue_unlocked(queue, sub, &sub->plan)) return;
  hl_queue_lock(queue);
  hl_queue_publish_issue_locked(queue, sub, &sub->plan);
  if (!hl_queue_pump_issue_locked(queue)) queue->issuing = false;
  hl_queue_unlock(queue);
}

static int hl_queue_step_main(void* arg) {
  hl_queue_t* queue = (hl_queue_t*)arg;
  hl_on_completer_thread_ = true;
  hl_thread_set_name("hl-host-step");
  mtx_lock(&queue->step_mutex);
  for (;;) {
    while (!queue->step_sub && !queue->step_stop) {
      cnd_wait(&queue->step_cond, &queue->step_mutex);
    }
    hl_submission_t* sub = queue->step_sub;
    if (!sub) break;
    queue->step_sub = NULL;
    mtx_unlock(&queue->step_mutex);
    hl_queue_step_run(queue, sub);
    mtx_lock(&queue->step_mutex);
  }
  mtx_unlock(&queue->step_mutex);
  return 0;
}

// Hands |sub|'s host step to |queue|'s step thread, starting it the first
// time. Completer thread only. A step thread that cannot start leaves the
// step to this thread (a host step that blocks on another queue of the
// device then holds up its completion until it returns).
static void hl_queue_step_post(hl_queue_t* queue, hl_submission_t* sub) {
  if (!queue->step_started) {
    if (mtx_init(&queue->step_mutex, mtx_plain) != thrd_success) {
      hl_queue_step_run(queue, sub);
      return;
    }
    if (cnd_init(&queue->step_cond) != thrd_success) {
      mtx_destroy(&queue->step_mutex);
      hl_queue_step_run(queue, sub);
      return;
    }
    queue->step_stop = false;
    queue->step_sub = NULL;
    if (thrd_create(&queue->step_thread, hl_queue_step_main, queue) !=
        thrd_success) {
      HL_LOG_WARN(
          "queue %u: no step thread; its host step runs on the "
          "device's completer",
          queue->id);
      cnd_destroy(&queue->step_cond);
      mtx_destroy(&queue->step_mutex);
      hl_queue_step_run(queue, sub);
      return;
    }
    queue->step_started = true;
    atomic_fetch_add(&queue->completer->step_threads, 1);
  }
  mtx_lock(&queue->step_mutex);
  queue->step_sub = sub;
  cnd_signal(&queue->step_cond);
  mtx_unlock(&queue->step_mutex);
}

//===----------------------------------------------------------------------===//
// Starting and stopping
//===----------------------------------------------------------------------===//

static void hl_completer_destroy(hl_completer_t* c) {
  cnd_destroy(&c->removed);
  cnd_destroy(&c->cond);
  mtx_destroy(&c->mutex);
  free(c);
}

static hl_status_t hl_completer_create(hl_device_t* device,
                                       hl_completer_t** out_completer) {
  int mode = 0;
  bool set = false;
  HL_RETURN_IF_ERROR_PLAIN(hl_env_read_enum(HL_ENV_COMPLETER, &mode, &set));
  hl_completer_t* c = calloc(1, sizeof(*c));
  if (!c) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating device %d's completer",
                          device->props.ordinal);
  }
  c->device = device;
  c->poll = !set || mode == 0;
  atomic_init(&c->pushed, 0);
  atomic_init(&c->step_threads, 0);
  bool mutex = mtx_init(&c->mutex, mtx_plain) == thrd_success;
  bool cond = mutex && cnd_init(&c->cond) == thrd_success;
  bool removed = cond && cnd_init(&c->removed) == thrd_success;
  if (!removed ||
      thrd_create(&c->thread, hl_completer_main, c) != thrd_success) {
    if (removed) cnd_destroy(&c->removed);
    if (cond) cnd_destroy(&c->cond);
    if (mutex) mtx_destroy(&c->mutex);
    free(c);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "starting device %d's completer thread",
                          device->props.ordinal);
  }
  *out_completer = c;
  return NULL;
}

static void hl_completer_stop(hl_completer_t* c) {
  mtx_lock(&c->mutex);
  c->stop = true;
  cnd_signal(&c->cond);
  mtx_unlock(&c->mutex);
  thrd_join(c->thread, NULL);
  hl_completer_destroy(c);
}

hl_status_t hl_queue_start_completer(hl_queue_t* queue) {
  hl_device_t* device = queue->device;
  hl_completer_t* c = atomic_load(&device->completer);
  if (!c) {
    HL_RETURN_IF_ERROR_PLAIN(hl_completer_create(device, &c));
    hl_completer_t* expected = NULL;
    if (!atomic_compare_exchange_strong(&device->completer, &expected, c)) {
      hl_completer_stop(c);  // Another queue's start won.
      c = expected;
    }
  }
  queue->completer = c;
  queue->by_events = true;
  return NULL;
}

void hl_queue_stop_completer(hl_queue_t* queue) {
  if (!queue->by_events) return;
  hl_completer_t* c = queue->completer;
  mtx_lock(&c->mutex);
  while (queue->completer_active) cnd_wait(&c->removed, &c->mutex);
  mtx_unlock(&c->mutex);
  if (queue->step_started) {
    mtx_lock(&queue->step_mutex);
    queue->step_stop = true;
    cnd_signal(&queue->step_cond);
    mtx_unlock(&queue->step_mutex);
    if (thrd_equal(thrd_current(), queue->step_thread)) {
      // Unreachable while a submission holds the queue; never join oneself.
      HL_LOG_ERROR("queue %u released its last reference on its step thread",
                   queue->id);
      thrd_detach(queue->step_thread);
    } else {
      thrd_join(queue->step_thread, NULL);
      cnd_destroy(&queue->step_cond);
      mtx_destroy(&queue->step_mutex);
    }
    queue->step_started = false;
    atomic_fetch_sub(&c->step_threads, 1);
  }
  queue->by_events = false;
}

void hl_device_stop_completer(hl_device_t* device) {
  hl_completer_t* c = atomic_exchange(&device->completer, NULL);
  if (c) hl_completer_stop(c);
}

void hl_device_completer_threads(hl_device_t* device, uint32_t* out_completers,
                                 uint32_t* out_step_threads) {
  hl_completer_t* c = atomic_load(&device->completer);
  *out_completers = c ? 1 : 0;
  *out_step_threads = c ? atomic_load(&c->step_threads) : 0;
}
