// The scheduler: the process-wide timeline lock and each device's work
// thread (the "completion thread"), which runs deferred work in order, never
// on a stream callback, so the work may call into the backend and release
// objects.

#include <stdlib.h>

#include "runtime/base/time_util.h"
#include "runtime/timeline/timeline_internal.h"

//===----------------------------------------------------------------------===//
// Scheduler lock
//===----------------------------------------------------------------------===//

static mtx_t hl_timeline_mutex_;
static once_flag hl_timeline_once_ = ONCE_FLAG_INIT;

static void hl_timeline_init(void) { mtx_init(&hl_timeline_mutex_, mtx_plain); }

void hl_timeline_lock(void) {
  call_once(&hl_timeline_once_, hl_timeline_init);
  mtx_lock(&hl_timeline_mutex_);
}

void hl_timeline_unlock(void) { mtx_unlock(&hl_timeline_mutex_); }

int hl_timeline_cond_wait(cnd_t* cond, hl_time_t deadline) {
  return hl_cnd_wait_until(cond, &hl_timeline_mutex_, deadline);
}

//===----------------------------------------------------------------------===//
// Work thread
//===----------------------------------------------------------------------===//

int hl_device_work_main(void* arg) {
  hl_device_t* device = (hl_device_t*)arg;
  mtx_lock(&device->work_mutex);
  for (;;) {
    while (!device->work_head && !device->work_stop) {
      cnd_wait(&device->work_cond, &device->work_mutex);
    }
    hl_work_t* work = device->work_head;
    if (!work) break;  // Stopped and drained.
    device->work_head = work->next;
    if (!device->work_head) device->work_tail = NULL;
    mtx_unlock(&device->work_mutex);
    work->fn(work);
    mtx_lock(&device->work_mutex);
    --device->work_pending;
    cnd_broadcast(&device->work_cond);
  }
  mtx_unlock(&device->work_mutex);
  return 0;
}

static void hl_device_push_work(hl_device_t* device, hl_work_t* work,
                                bool reserved) {
  work->next = NULL;
  mtx_lock(&device->work_mutex);
  if (device->work_tail) {
    device->work_tail->next = work;
  } else {
    device->work_head = work;
  }
  device->work_tail = work;
  if (!reserved) ++device->work_pending;
  cnd_broadcast(&device->work_cond);
  mtx_unlock(&device->work_mutex);
}

void hl_device_enqueue_work(hl_device_t* device, hl_work_t* work) {
  hl_device_push_work(device, work, false);
}

void hl_device_reserve_work(hl_device_t* device) {
  mtx_lock(&device->work_mutex);
  ++device->work_pending;
  mtx_unlock(&device->work_mutex);
}

void hl_device_enqueue_reserved_work(hl_device_t* device, hl_work_t* work) {
  hl_device_push_work(device, work, true);
}

void hl_device_unreserve_work(hl_device_t* device) {
  mtx_lock(&device->work_mutex);
  if (--device->work_pending == 0) cnd_broadcast(&device->work_cond);
  mtx_unlock(&device->work_mutex);
}

void hl_device_flush_work(hl_device_t* device) {
  mtx_lock(&device->work_mutex);
  while (device->work_pending)
    cnd_wait(&device->work_cond, &device->work_mutex);
  mtx_unlock(&device->work_mutex);
}
