// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Timeline semaphores.

#include <stdlib.h>
#include <string.h>

#include "runtime/base/recycler.h"
#include "runtime/base/spin.h"
#include "runtime/base/time_util.h"
#include "runtime/timeline/timeline_internal.h"

// Semaphores come and go with every invocation.
static hl_recycler_t hl_semaphore_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_semaphore_t), 1024, "a semaphore");

// Timepoints come and go with every device signal.
static hl_recycler_t hl_timepoint_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_timepoint_t), 4096, "a timepoint");

static atomic_uint_least64_t hl_next_semaphore_id_ = 1;

hl_status_t hl_semaphore_create(uint64_t initial_value,
                                hl_allocator_t host_allocator,
                                hl_semaphore_t** out_semaphore) {
  if (!out_semaphore) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_semaphore_create: out_semaphore is NULL");
  }
  *out_semaphore = NULL;
  hl_semaphore_t* s = NULL;
  HL_RETURN_IF_ERROR(
      hl_recycler_alloc(&hl_semaphore_recycler_, host_allocator, (void**)&s),
      "creating a semaphore");
  hl_spinlock_init(&s->lock);
  atomic_init(&s->ref_count, 1);
  s->id = atomic_fetch_add(&hl_next_semaphore_id_, 1);
  atomic_init(&s->value, initial_value);
  atomic_init(&s->failure, NULL);
  atomic_init(&s->issued_value, initial_value);
  *out_semaphore = s;
  return NULL;
}

void hl_semaphore_retain(hl_semaphore_t* semaphore) {
  if (semaphore)
    atomic_fetch_add_explicit(&semaphore->ref_count, 1, memory_order_relaxed);
}

static void hl_semaphore_drop_timepoints_locked(hl_semaphore_t* s,
                                                uint64_t upto) {
  while (s->timepoints && s->timepoints->value <= upto) {
    hl_timepoint_t* tp = s->timepoints;
    s->timepoints = tp->next;
    if (s->timepoints) s->timepoints->prev = NULL;
    atomic_fetch_sub_explicit(&s->timepoint_count, 1, memory_order_relaxed);
    hl_shared_event_drop(tp->shared);
    hl_recycler_free(&hl_timepoint_recycler_, tp);
  }
  if (!s->timepoints) s->timepoints_tail = NULL;
}

bool hl_semaphore_release_unless_last(hl_semaphore_t* semaphore) {
  if (!semaphore) return true;
  return hl_ref_drop_unless_last(&semaphore->ref_count);
}

void hl_semaphore_release(hl_semaphore_t* semaphore) {
  if (!semaphore) return;
  if (atomic_fetch_sub_explicit(&semaphore->ref_count, 1,
                                memory_order_acq_rel) != 1) {
    return;
  }
  // Nobody else holds it, so no lock: work signalling this semaphore may
  // still be in flight, but its completion holds no reference; recycle the
  // events now, nobody can wait on them.
  hl_semaphore_drop_timepoints_locked(semaphore, UINT64_MAX);
  hl_status_free(atomic_load(&semaphore->failure));
  hl_recycler_free(&hl_semaphore_recycler_, semaphore);
}

void hl_semaphore_add_waiter_locked(hl_semaphore_t* semaphore,
                                    hl_waiter_t* waiter) {
  waiter->semaphore = semaphore;
  waiter->registered = true;
  waiter->next = semaphore->waiters;
  semaphore->waiters = waiter;
  // Before the caller looks at the value (see hl_semaphore_signal_owned):
  // this increment and that load (hl_semaphore_value) are sequentially
  // consistent, like the signaller's store of the value and load of the
  // count, so one of the two sides sees the other.
  atomic_fetch_add_explicit(&semaphore->waiter_count, 1, memory_order_seq_cst);
}

void hl_waiter_unregister(hl_waiter_t* waiter) {
  hl_semaphore_t* s = waiter->semaphore;
  if (!s) return;
  hl_semaphore_lock(s);
  hl_semaphore_remove_waiter_locked(waiter);
  hl_semaphore_unlock(s);
}

void hl_semaphore_remove_waiter_locked(hl_waiter_t* waiter) {
  if (!waiter->registered) return;
  hl_waiter_t** link = &waiter->semaphore->waiters;
  for (; *link; link = &(*link)->next) {
    if (*link == waiter) {
      *link = waiter->next;
      atomic_fetch_sub_explicit(&waiter->semaphore->waiter_count, 1,
                                memory_order_relaxed);
      break;
    }
  }
  waiter->registered = false;
  waiter->next = NULL;
}

// Notifies and unregisters every waiter for which |ready| holds.
static void hl_semaphore_notify_locked(hl_semaphore_t* s, bool all,
                                       uint64_t reached, uint64_t issued) {
  hl_waiter_t** link = &s->waiters;
  while (*link) {
    hl_waiter_t* w = *link;
    bool ready =
        all || w->value <= reached || (w->on_issue && w->value <= issued);
    if (!ready) {
      link = &w->next;
      continue;
    }
    *link = w->next;
    w->next = NULL;
    w->registered = false;
    atomic_fetch_sub_explicit(&s->waiter_count, 1, memory_order_relaxed);
    w->notify(w);
  }
}

// Raises the value to |value| unless it is there already; returns whether
// this call raised it. A fast signal may raise it without the lock.
static bool hl_semaphore_raise_value(hl_semaphore_t* s, uint64_t value) {
  uint64_t current = hl_semaphore_value(s);
  do {
    if (value <= current) return false;
  } while (!atomic_compare_exchange_weak_explicit(
      &s->value, &current, value, memory_order_seq_cst, memory_order_relaxed));
  return true;
}

// Drops the timepoints the value has reached and wakes the waiters it
// satisfies. The lock held.
static void hl_semaphore_settle_locked(hl_semaphore_t* s) {
  uint64_t value = hl_semaphore_value(s);
  if (atomic_load_explicit(&s->issued_value, memory_order_relaxed) < value) {
    atomic_store_explicit(&s->issued_value, value, memory_order_release);
  }
  hl_semaphore_drop_timepoints_locked(s, value);
  hl_semaphore_notify_locked(s, false, value, hl_semaphore_issued_value(s));
}

void hl_semaphore_signal_locked(hl_semaphore_t* s, uint64_t value) {
  if (hl_semaphore_failure(s) || !hl_semaphore_raise_value(s, value)) return;
  hl_semaphore_settle_locked(s);
}

void hl_semaphore_fail_locked(hl_semaphore_t* s, hl_status_t status) {
  if (!status) {
    status =
        HL_MAKE_STATUS(HL_STATUS_INTERNAL, "semaphore failed without a status");
  }
  hl_status_t expected = NULL;
  if (!atomic_compare_exchange_strong(&s->failure, &expected, status)) {
    hl_status_free(status);  // The first failure is kept.
    return;
  }
  hl_semaphore_drop_timepoints_locked(s, UINT64_MAX);
  hl_semaphore_notify_locked(s, true, 0, 0);
}

void hl_semaphore_signal_owned(hl_semaphore_t* s, uint64_t value) {
  if (value <= hl_semaphore_value(s) || hl_semaphore_failure(s)) return;
  if (s->timepoints) {
    hl_semaphore_signal_unlocked(s, value);
    return;
  }
  // Nothing to drop, and no other thread writes the value, the issued value
  // or the failure (the owning queue's lock is held): no semaphore lock,
  // unless someone is registered. A waiter registers under the lock, then
  // looks at the value; this stores the value, then looks at the count.
  // Both sequentially consistent: either this sees the waiter, or the
  // waiter sees the value.
  if (hl_semaphore_issued_value(s) < value) {
    atomic_store_explicit(&s->issued_value, value, memory_order_release);
  }
  atomic_store_explicit(&s->value, value, memory_order_seq_cst);
  if (!atomic_load_explicit(&s->waiter_count, memory_order_seq_cst)) return;
  hl_semaphore_lock(s);
  hl_semaphore_notify_locked(s, false, value, hl_semaphore_issued_value(s));
  hl_semaphore_unlock(s);
}

// hl_semaphore_signal_owned's raise when nothing is attached: the issued
// value, then the value, released; the caller fences before it looks at the
// waiter count.
static bool hl_semaphore_raise_owned(hl_semaphore_t* s, uint64_t value) {
  if (value <= hl_semaphore_value(s) || hl_semaphore_failure(s)) return false;
  if (hl_semaphore_issued_value(s) < value) {
    atomic_store_explicit(&s->issued_value, value, memory_order_release);
  }
  atomic_store_explicit(&s->value, value, memory_order_release);
  return true;
}

void hl_semaphore_signal_owned_two(hl_semaphore_t* a, uint64_t a_value,
                                   hl_semaphore_t* b, uint64_t b_value) {
  if (a->timepoints || b->timepoints) {
    hl_semaphore_signal_owned(a, a_value);
    hl_semaphore_signal_owned(b, b_value);
    return;
  }
  bool raised_a = hl_semaphore_raise_owned(a, a_value);
  bool raised_b = hl_semaphore_raise_owned(b, b_value);
  // One full barrier for both (hl_semaphore_signal_owned stores each value
  // sequentially consistent instead): a waiter counts itself, then reads the
  // value; this stores both values, fences, then reads both counts. Either
  // it sees the waiter, or the waiter sees the value.
  atomic_thread_fence(memory_order_seq_cst);
  if (raised_a &&
      atomic_load_explicit(&a->waiter_count, memory_order_relaxed)) {
    hl_semaphore_lock(a);
    hl_semaphore_notify_locked(a, false, a_value, hl_semaphore_issued_value(a));
    hl_semaphore_unlock(a);
  }
  if (raised_b &&
      atomic_load_explicit(&b->waiter_count, memory_order_relaxed)) {
    hl_semaphore_lock(b);
    hl_semaphore_notify_locked(b, false, b_value, hl_semaphore_issued_value(b));
    hl_semaphore_unlock(b);
  }
}

// Wakes the waiters of |s| (owned by a queue whose lock is held) that its
// new |value| satisfies, if any registered; the caller has stored the value
// and fenced.
static inline void hl_semaphore_notify_owned(hl_semaphore_t* s,
                                             uint64_t value) {
  if (!atomic_load_explicit(&s->waiter_count, memory_order_relaxed)) return;
  hl_semaphore_lock(s);
  hl_semaphore_notify_locked(s, false, value, hl_semaphore_issued_value(s));
  hl_semaphore_unlock(s);
}

void hl_semaphore_signal_owned_next(hl_semaphore_t* timeline,
                                    hl_semaphore_t* done, uint64_t value) {
  if (timeline->timepoints || done->timepoints ||
      hl_semaphore_failure(timeline)) {
    // Rare; not hl_semaphore_signal_owned_two, which stays inlined into its
    // one caller, the general path's publish.
    hl_semaphore_signal_owned(timeline, value);
    hl_semaphore_signal_owned(done, value);
    return;
  }
  // Above every value and issued value of both (the queue assigns them in
  // order): no comparison needed.
  atomic_store_explicit(&timeline->issued_value, value, memory_order_release);
  atomic_store_explicit(&timeline->value, value, memory_order_release);
  atomic_store_explicit(&done->issued_value, value, memory_order_release);
  atomic_store_explicit(&done->value, value, memory_order_release);
  // As in hl_semaphore_signal_owned_two: one full barrier, then the counts.
  atomic_thread_fence(memory_order_seq_cst);
  hl_semaphore_notify_owned(timeline, value);
  hl_semaphore_notify_owned(done, value);
}

void hl_semaphore_signal_unlocked(hl_semaphore_t* s, uint64_t value) {
  if (!s->queue_owned &&
      !atomic_load_explicit(&s->waiter_count, memory_order_seq_cst) &&
      !atomic_load_explicit(&s->timepoint_count, memory_order_seq_cst)) {
    // Nobody to wake and nothing to drop: no lock. The raise and the loads
    // below are sequentially consistent, like a registration's increment
    // and its look at the value, so either this sees the registration or
    // the registration sees the value.
    if (hl_semaphore_failure(s) || !hl_semaphore_raise_value(s, value)) return;
    if (!atomic_load_explicit(&s->waiter_count, memory_order_seq_cst) &&
        !atomic_load_explicit(&s->timepoint_count, memory_order_seq_cst)) {
      return;
    }
    hl_semaphore_lock(s);
    hl_semaphore_settle_locked(s);
    hl_semaphore_unlock(s);
    return;
  }
  hl_semaphore_lock(s);
  hl_semaphore_signal_locked(s, value);
  hl_semaphore_unlock(s);
}

void hl_semaphore_fail_unlocked(hl_semaphore_t* s, hl_status_t status) {
  hl_semaphore_lock(s);
  hl_semaphore_fail_locked(s, status);
  hl_semaphore_unlock(s);
}

hl_status_t hl_semaphore_add_timepoint_locked(hl_semaphore_t* s, uint64_t value,
                                              hl_shared_event_t* shared) {
  hl_timepoint_t* tp = NULL;
  HL_RETURN_IF_ERROR(
      hl_recycler_alloc_default(&hl_timepoint_recycler_, (void**)&tp),
      "a timepoint for value %llu", (unsigned long long)value);
  tp->value = value;
  // The device is not retained: it drains its queues before it goes, and
  // draining reaches (and so drops) every timepoint its events back.
  tp->shared = shared;
  atomic_fetch_add_explicit(&shared->refs, 1, memory_order_relaxed);
  if (!s->timepoints_tail || s->timepoints_tail->value <= value) {
    // The common case: each signal is larger than every pending one.
    tp->next = NULL;
    tp->prev = s->timepoints_tail;
    if (s->timepoints_tail) {
      s->timepoints_tail->next = tp;
    } else {
      s->timepoints = tp;
    }
    s->timepoints_tail = tp;
  } else {
    // Before the first timepoint with a larger value (the tail's is).
    hl_timepoint_t* after = s->timepoints;
    while (after->value < value) after = after->next;
    tp->next = after;
    tp->prev = after->prev;
    if (after->prev) {
      after->prev->next = tp;
    } else {
      s->timepoints = tp;
    }
    after->prev = tp;
  }
  // Counted, then the value looked at (see hl_semaphore_signal_unlocked):
  // a signal that raised it past |value| without the lock meanwhile did not
  // see this timepoint, so it is dropped here.
  atomic_fetch_add_explicit(&s->timepoint_count, 1, memory_order_seq_cst);
  if (hl_semaphore_value(s) >= value) {
    hl_semaphore_settle_locked(s);
    return NULL;
  }
  if (atomic_load_explicit(&s->issued_value, memory_order_relaxed) < value) {
    atomic_store_explicit(&s->issued_value, value, memory_order_release);
    hl_semaphore_notify_locked(s, false, hl_semaphore_value(s), value);
  }
  return NULL;
}

hl_timepoint_t* hl_semaphore_find_timepoint_locked(hl_semaphore_t* s,
                                                   uint64_t value) {
  // The first timepoint at or above |value|, searched from the tail: waits
  // are mostly on recent signals, and a producer far ahead of its consumer
  // (every round of a ping-pong submitted up front) keeps a long list, which
  // a search from the head walked under the lock for every wait.
  hl_timepoint_t* tp = s->timepoints_tail;
  if (!tp || tp->value < value) return NULL;
  while (tp->prev && tp->prev->value >= value) tp = tp->prev;
  return tp;
}

hl_status_t hl_semaphore_query(hl_semaphore_t* semaphore, uint64_t* out_value) {
  if (!semaphore || !out_value) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_semaphore_query: NULL semaphore or out_value");
  }
  *out_value = hl_semaphore_value(semaphore);
  hl_status_t failure = hl_semaphore_failure(semaphore);
  return failure ? hl_status_clone(failure) : NULL;
}

hl_status_t hl_semaphore_signal(hl_semaphore_t* semaphore, uint64_t value) {
  if (!semaphore) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_semaphore_signal: semaphore is NULL");
  }
  if (semaphore->queue_owned) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_semaphore_signal: a queue's own timeline is "
                          "signalled by its queue only");
  }
  hl_pump_sink_t sink;
  bool sink_owner = hl_pump_sink_open(&sink);
  hl_semaphore_lock(semaphore);
  hl_status_t failure = hl_semaphore_failure(semaphore);
  hl_status_t st = NULL;
  uint64_t current = hl_semaphore_value(semaphore);
  if (failure) {
    st = hl_status_annotate(hl_status_clone(failure),
                            "signalling a failed semaphore to %llu",
                            (unsigned long long)value);
  } else if (value <= current) {
    st = HL_MAKE_STATUS(HL_STATUS_OUT_OF_RANGE,
                        "semaphore signal to %llu must be greater than the "
                        "current value %llu",
                        (unsigned long long)value, (unsigned long long)current);
  } else {
    // Submissions parked on |value| are pumped on this thread (below).
    hl_semaphore_signal_locked(semaphore, value);
  }
  hl_semaphore_unlock(semaphore);
  if (sink_owner) hl_pump_sink_close(&sink);
  return st;
}

hl_status_t hl_semaphore_fail(hl_semaphore_t* semaphore, hl_status_t status) {
  if (!semaphore) {
    hl_status_free(status);
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_semaphore_fail: semaphore is NULL");
  }
  if (semaphore->queue_owned) {
    hl_status_free(status);
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_semaphore_fail: a queue's own timeline fails "
                          "only with its queue");
  }
  if (!status) {
    status = HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "hl_semaphore_fail called with an OK status");
  }
  hl_pump_sink_t sink;
  bool sink_owner = hl_pump_sink_open(&sink);
  hl_semaphore_lock(semaphore);
  hl_semaphore_fail_locked(semaphore, status);
  hl_semaphore_unlock(semaphore);
  if (sink_owner) hl_pump_sink_close(&sink);
  return NULL;
}

// A blocked host thread's wake-up: its own mutex and condition (a leaf
// lock), shared by the waiters it registered on each semaphore.
typedef struct hl_host_wake_t {
  mtx_t mutex;
  cnd_t cond;
  bool fired;  // |mutex|.
} hl_host_wake_t;

typedef struct hl_host_waiter_t {
  hl_waiter_t base;
  hl_host_wake_t* wake;
} hl_host_waiter_t;

static void hl_host_wake_fire(hl_host_wake_t* wake) {
  mtx_lock(&wake->mutex);
  wake->fired = true;
  cnd_signal(&wake->cond);
  mtx_unlock(&wake->mutex);
}

static void hl_host_waiter_notify(hl_waiter_t* waiter) {
  hl_host_wake_fire(((hl_host_waiter_t*)waiter)->wake);
}

hl_status_t hl_semaphore_wait(hl_semaphore_t* semaphore, uint64_t value,
                              hl_time_t deadline) {
  return hl_semaphore_wait_many(HL_WAIT_ALL, 1, &semaphore, &value, deadline,
                                NULL);
}

#define HL_WAIT_MANY_MAX 64

typedef struct hl_wait_spin_t {
  hl_wait_mode_t mode;
  size_t count;
  const hl_fence_entry_t* pairs;
} hl_wait_spin_t;

// Whether the wait is over (reached, or a semaphore failed): atomics only.
static bool hl_wait_settled(const void* arg) {
  const hl_wait_spin_t* w = (const hl_wait_spin_t*)arg;
  size_t reached = 0;
  for (size_t i = 0; i < w->count; ++i) {
    if (hl_semaphore_failure(w->pairs[i].semaphore)) return true;
    if (hl_semaphore_value(w->pairs[i].semaphore) >= w->pairs[i].value) {
      ++reached;
    }
  }
  return w->mode == HL_WAIT_ANY ? reached > 0 : reached == w->count;
}

hl_status_t hl_semaphore_wait_pairs(hl_wait_mode_t mode, size_t count,
                                    const hl_fence_entry_t* pairs,
                                    hl_time_t deadline, size_t* out_index) {
  if (count == 0) return NULL;
  // A short spin before the lock and the condition variable (base/spin.h):
  // the signal of a short device step arrives within it, and the wake-up
  // costs more than the spin. Not for polls or deadlines nearer than it.
  hl_time_t now = hl_time_now();
  if (count <= HL_WAIT_MANY_MAX &&
      (deadline == HL_INFINITE_FUTURE ||
       (deadline > now && deadline - now > HL_SPIN_NS))) {
    hl_wait_spin_t spin = {mode, count, pairs};
    hl_spin_until(hl_wait_settled, &spin);
  }
  hl_host_wake_t wake;
  wake.fired = false;
  if (mtx_init(&wake.mutex, mtx_plain) != thrd_success) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "wait: creating a mutex");
  }
  if (cnd_init(&wake.cond) != thrd_success) {
    mtx_destroy(&wake.mutex);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "wait: creating a condition variable");
  }
  hl_host_waiter_t inline_waiters[HL_WAIT_MANY_MAX];
  hl_host_waiter_t* waiters = inline_waiters;
  if (count > HL_WAIT_MANY_MAX) {
    waiters = malloc(count * sizeof(*waiters));
    if (!waiters) {
      cnd_destroy(&wake.cond);
      mtx_destroy(&wake.mutex);
      return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                            "wait: allocating %zu waiters", count);
    }
  }
  memset(waiters, 0, sizeof(waiters[0]) * count);
  hl_status_t result = NULL;
  for (;;) {
    // Values and failures are atomics: no lock to look.
    size_t reached = 0;
    for (size_t i = 0; i < count; ++i) {
      hl_status_t failure = hl_semaphore_failure(pairs[i].semaphore);
      if (failure) {
        result = hl_status_annotate(hl_status_clone(failure),
                                    "waiting on semaphore %zu for %llu", i,
                                    (unsigned long long)pairs[i].value);
        goto done;
      }
      if (hl_semaphore_value(pairs[i].semaphore) >= pairs[i].value) {
        ++reached;
        if (mode == HL_WAIT_ANY) {
          if (out_index) *out_index = i;
          goto done;
        }
      }
    }
    if (reached == count) goto done;
    if (deadline != HL_INFINITE_FUTURE && hl_time_now() >= deadline) {
      result = HL_MAKE_STATUS(HL_STATUS_DEADLINE_EXCEEDED,
                              "wait on %zu semaphore(s) timed out (%s)", count,
                              mode == HL_WAIT_ALL ? "all" : "any");
      goto done;
    }
    // Register on every pair still pending, in both modes: any of them may
    // fail, and a failure ends the wait. (Waiters fire on failure too.) A
    // pair that moved since the look above fires the wake at once, under
    // its semaphore's lock, so no signal is missed.
    mtx_lock(&wake.mutex);
    wake.fired = false;
    mtx_unlock(&wake.mutex);
    for (size_t i = 0; i < count; ++i) {
      hl_semaphore_t* s = pairs[i].semaphore;
      waiters[i].base.value = pairs[i].value;
      waiters[i].base.notify = hl_host_waiter_notify;
      waiters[i].wake = &wake;
      hl_semaphore_lock(s);
      // Registered first, then looked at (hl_semaphore_signal_owned).
      hl_semaphore_add_waiter_locked(s, &waiters[i].base);
      if (hl_semaphore_failure(s) || hl_semaphore_value(s) >= pairs[i].value) {
        hl_semaphore_remove_waiter_locked(&waiters[i].base);
        hl_semaphore_unlock(s);
        hl_host_wake_fire(&wake);
        continue;
      }
      hl_semaphore_unlock(s);
    }
    mtx_lock(&wake.mutex);
    while (!wake.fired) {
      if (hl_cnd_wait_until(&wake.cond, &wake.mutex, deadline) ==
          thrd_timedout) {
        break;
      }
    }
    mtx_unlock(&wake.mutex);
    // Once unregistered under each semaphore's lock, no notification is
    // running on |waiters| or |wake| any more.
    for (size_t i = 0; i < count; ++i) hl_waiter_unregister(&waiters[i].base);
  }
done:
  // Nothing is registered here: each round unregisters before looking.
  cnd_destroy(&wake.cond);
  mtx_destroy(&wake.mutex);
  if (waiters != inline_waiters) free(waiters);
  return result;
}

hl_status_t hl_semaphore_wait_many(hl_wait_mode_t mode, size_t count,
                                   hl_semaphore_t* const* semaphores,
                                   const uint64_t* values, hl_time_t deadline,
                                   size_t* out_index) {
  if (count == 0) return NULL;
  if (!semaphores || !values) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "wait: NULL semaphore or value list");
  }
  if (count > HL_WAIT_MANY_MAX) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "wait on %zu semaphores; at most %d at once", count,
                          HL_WAIT_MANY_MAX);
  }
  for (size_t i = 0; i < count; ++i) {
    if (!semaphores[i]) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "wait: semaphore %zu is NULL", i);
    }
  }
  if (mode != HL_WAIT_ALL && mode != HL_WAIT_ANY) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "wait: unknown mode %d",
                          (int)mode);
  }
  hl_fence_entry_t pairs[HL_WAIT_MANY_MAX];
  for (size_t i = 0; i < count; ++i) {
    pairs[i].semaphore = semaphores[i];
    pairs[i].value = values[i];
  }
  return hl_semaphore_wait_pairs(mode, count, pairs, deadline, out_index);
}
