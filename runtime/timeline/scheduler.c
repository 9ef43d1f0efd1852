// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The scheduler: each device's work thread (the "completion thread"), which
// runs deferred work in order, never on a stream callback, so the work may
// call into the backend and release objects.

#include <stdlib.h>

#include "runtime/base/spin.h"
#include "runtime/base/time_util.h"
#include "runtime/timeline/timeline_internal.h"

//===----------------------------------------------------------------------===//
// Work thread
//===----------------------------------------------------------------------===//

// Clean-ups (hl_device_enqueue_cleanup) wait for a batch of this many, or
// this long, or a flush, before the work thread is woken for them.
#define HL_WORK_LAZY_BATCH 32
#define HL_WORK_LAZY_NS ((hl_duration_t)1000000)

// device->work_pending packs three things into one word, so that finishing
// work takes no lock in the common case:
//   bits 0-47   work reserved or enqueued and not finished;
//   bits 48-61  hand-offs: finishers that brought the count to zero while a
//               flusher waited, and have yet to wake it;
//   bit 62      at least one flusher waits (set and cleared under
//               work_mutex by the flushers).
// Flushers wait until both the count and the hand-offs are zero: a finisher
// that must wake them still holds the device (it takes work_mutex to
// broadcast), and a flusher that returns may go on to destroy it.
#define HL_WORK_COUNT_MASK ((UINT64_C(1) << 48) - 1)
#define HL_WORK_HANDOFF_ONE (UINT64_C(1) << 48)
#define HL_WORK_HANDOFF_MASK (((UINT64_C(1) << 14) - 1) << 48)
#define HL_WORK_FLUSHERS (UINT64_C(1) << 62)

// Drops |count| finished items from the pending count. A finisher that
// brings it to zero while a flusher waits takes a hand-off in the same
// step and then wakes the flushers under work_mutex; any other finisher
// touches the device no more after its one atomic step.
static void hl_device_finish_work(hl_device_t* device, uint64_t count) {
  uint64_t word = atomic_load(&device->work_pending);
  uint64_t next;
  bool handoff;
  do {
    handoff =
        (word & HL_WORK_COUNT_MASK) == count && (word & HL_WORK_FLUSHERS) != 0;
    next = word - count + (handoff ? HL_WORK_HANDOFF_ONE : 0);
  } while (!atomic_compare_exchange_weak(&device->work_pending, &word, next));
  if (!handoff) return;
  hl_mutex_lock(&device->work_mutex);
  atomic_fetch_sub(&device->work_pending, HL_WORK_HANDOFF_ONE);
  cnd_broadcast(&device->idle_cond);
  mtx_unlock(&device->work_mutex);
}

int hl_device_work_main(void* arg) {
  hl_device_t* device = (hl_device_t*)arg;
  hl_thread_set_name("hl-work");
  for (;;) {
    // No spin: most submissions finish on the stream's worker
    // (hl_submission_destroy_light), so this thread is off the fast path,
    // and a core spent spinning here is one the submitter and the stream
    // workers lack (2-core machines).
    hl_mutex_lock(&device->work_mutex);
    for (;;) {
      if (device->work_stop) break;
      if (device->work_head && (device->work_urgent || device->flush_waiters ||
                                device->work_lazy >= HL_WORK_LAZY_BATCH)) {
        break;
      }
      // Nothing, or only clean-ups queued: gather those for a while (one
      // wake-up per batch, not per submission), unless someone flushes.
      device->work_sleeping = true;
      int rc = device->work_head
                   ? hl_cnd_wait_until(&device->work_cond, &device->work_mutex,
                                       device->work_lazy_deadline)
                   : cnd_wait(&device->work_cond, &device->work_mutex);
      device->work_sleeping = false;
      if (rc == thrd_timedout) break;  // The gathering period is over.
    }
    hl_work_t* work = device->work_head;
    if (!work) break;  // Stopped and drained.
    device->work_head = device->work_tail = NULL;
    device->work_urgent = false;
    device->work_lazy = 0;
    mtx_unlock(&device->work_mutex);
    uint64_t count = 0;
    while (work) {
      hl_work_t* next = work->next;
      work->fn(work);  // May free |work|.
      work = next;
      ++count;
    }
    hl_device_finish_work(device, count);
  }
  mtx_unlock(&device->work_mutex);
  return 0;
}

static void hl_device_push_work(hl_device_t* device, hl_work_t* work,
                                bool reserved, bool lazy) {
  work->next = NULL;
  hl_mutex_lock(&device->work_mutex);
  if (device->work_tail) {
    device->work_tail->next = work;
  } else {
    device->work_head = work;
  }
  device->work_tail = work;
  if (!reserved) atomic_fetch_add(&device->work_pending, 1);
  bool wake = true;
  if (lazy) {
    // The first clean-up starts the gathering period (the worker goes from
    // an untimed wait to a timed one); later ones wake it only for a full
    // batch.
    if (++device->work_lazy == 1) {
      device->work_lazy_deadline = hl_deadline_after(HL_WORK_LAZY_NS);
    } else {
      wake = device->work_lazy >= HL_WORK_LAZY_BATCH;
    }
  } else {
    device->work_urgent = true;
  }
  if (device->flush_waiters) wake = true;
  if (wake && device->work_sleeping) cnd_signal(&device->work_cond);
  mtx_unlock(&device->work_mutex);
}

void hl_device_enqueue_work(hl_device_t* device, hl_work_t* work) {
  hl_device_push_work(device, work, false, false);
}

void hl_device_enqueue_cleanup(hl_device_t* device, hl_work_t* work,
                               bool reserved) {
  hl_device_push_work(device, work, reserved, true);
}

void hl_device_reserve_work(hl_device_t* device) {
  atomic_fetch_add(&device->work_pending, 1);
}

void hl_device_unreserve_work(hl_device_t* device) {
  hl_device_finish_work(device, 1);
}

void hl_device_stop_work(hl_device_t* device) {
  mtx_lock(&device->work_mutex);
  device->work_stop = true;
  cnd_signal(&device->work_cond);
  mtx_unlock(&device->work_mutex);
  thrd_join(device->work_thread, NULL);
}

void hl_device_flush_work(hl_device_t* device) {
  // Issuers first: their publish step may queue work (a clean-up). Work
  // queued after that does not start issuers the count misses: a pump runs
  // as pending work itself.
  hl_device_wait_issuers(device);
  // Always under the mutex (see hl_device_finish_work).
  hl_mutex_lock(&device->work_mutex);
  if (++device->flush_waiters == 1) {
    atomic_fetch_or(&device->work_pending, HL_WORK_FLUSHERS);
  }
  // Clean-ups being gathered run now.
  if (device->work_sleeping) cnd_signal(&device->work_cond);
  while (atomic_load(&device->work_pending) &
         (HL_WORK_COUNT_MASK | HL_WORK_HANDOFF_MASK)) {
    cnd_wait(&device->idle_cond, &device->work_mutex);
  }
  if (--device->flush_waiters == 0) {
    atomic_fetch_and(&device->work_pending, ~HL_WORK_FLUSHERS);
  }
  mtx_unlock(&device->work_mutex);
}
