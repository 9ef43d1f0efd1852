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

// Drops |count| finished items from the pending count and wakes flushers
// when it reaches zero. Without a lock unless it may reach zero: then under
// work_mutex, which flushers hold while they look, so a flusher that sees
// zero (and may go on to destroy the device) only gets the mutex after this
// thread is done with it.
static void hl_device_finish_work(hl_device_t* device, uint64_t count) {
  uint64_t pending = atomic_load(&device->work_pending);
  while (pending > count) {
    if (atomic_compare_exchange_weak(&device->work_pending, &pending,
                                     pending - count)) {
      return;
    }
  }
  hl_mutex_lock(&device->work_mutex);
  if (atomic_fetch_sub(&device->work_pending, count) == count &&
      device->flush_waiters) {
    cnd_broadcast(&device->idle_cond);
  }
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
  // Always under the mutex (see hl_device_finish_work).
  hl_mutex_lock(&device->work_mutex);
  ++device->flush_waiters;
  // Clean-ups being gathered run now.
  if (device->work_sleeping) cnd_signal(&device->work_cond);
  while (atomic_load(&device->work_pending))
    cnd_wait(&device->idle_cond, &device->work_mutex);
  --device->flush_waiters;
  mtx_unlock(&device->work_mutex);
}
