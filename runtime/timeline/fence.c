// Fences: small sets of semaphore@value pairs.

#include <stdlib.h>
#include <string.h>

#include "runtime/timeline/timeline_internal.h"

hl_status_t hl_fence_create(hl_allocator_t host_allocator,
                            hl_fence_t** out_fence) {
  if (!out_fence) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_fence_create: out_fence is NULL");
  }
  hl_fence_t* f = NULL;
  HL_RETURN_IF_ERROR(
      hl_allocator_calloc(host_allocator, sizeof(*f), (void**)&f),
      "creating a fence");
  atomic_init(&f->ref_count, 1);
  f->host_allocator = host_allocator;
  f->entries = f->inline_entries;
  f->capacity = sizeof(f->inline_entries) / sizeof(f->inline_entries[0]);
  *out_fence = f;
  return NULL;
}

void hl_fence_retain(hl_fence_t* fence) {
  if (fence)
    atomic_fetch_add_explicit(&fence->ref_count, 1, memory_order_relaxed);
}

void hl_fence_clear(hl_fence_t* fence) {
  if (!fence) return;
  for (size_t i = 0; i < fence->count; ++i) {
    hl_semaphore_release(fence->entries[i].semaphore);
  }
  fence->count = 0;
}

void hl_fence_release(hl_fence_t* fence) {
  if (!fence) return;
  if (atomic_fetch_sub_explicit(&fence->ref_count, 1, memory_order_acq_rel) !=
      1) {
    return;
  }
  hl_fence_clear(fence);
  if (fence->entries != fence->inline_entries) free(fence->entries);
  hl_allocator_free(fence->host_allocator, fence);
}

hl_status_t hl_fence_insert(hl_fence_t* fence, hl_semaphore_t* semaphore,
                            uint64_t value) {
  if (!fence || !semaphore) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_fence_insert: NULL fence or semaphore");
  }
  for (size_t i = 0; i < fence->count; ++i) {
    if (fence->entries[i].semaphore == semaphore) {
      if (fence->entries[i].value < value) fence->entries[i].value = value;
      return NULL;
    }
  }
  if (fence->count == fence->capacity) {
    size_t capacity = fence->capacity * 2;
    hl_fence_entry_t* entries = malloc(capacity * sizeof(*entries));
    if (!entries) {
      return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                            "growing a fence to %zu entries", capacity);
    }
    memcpy(entries, fence->entries, fence->count * sizeof(*entries));
    if (fence->entries != fence->inline_entries) free(fence->entries);
    fence->entries = entries;
    fence->capacity = capacity;
  }
  hl_semaphore_retain(semaphore);
  fence->entries[fence->count].semaphore = semaphore;
  fence->entries[fence->count].value = value;
  ++fence->count;
  return NULL;
}

hl_status_t hl_fence_join(hl_fence_t* fence, const hl_fence_t* source) {
  if (!fence) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_fence_join: fence is NULL");
  }
  if (!source) return NULL;
  for (size_t i = 0; i < source->count; ++i) {
    HL_RETURN_IF_ERROR_PLAIN(hl_fence_insert(
        fence, source->entries[i].semaphore, source->entries[i].value));
  }
  return NULL;
}

void hl_fence_prune_reached(hl_fence_t* fence) {
  size_t kept = 0;
  for (size_t i = 0; i < fence->count; ++i) {
    hl_fence_entry_t e = fence->entries[i];
    if (!hl_semaphore_failure(e.semaphore) &&
        hl_semaphore_value(e.semaphore) >= e.value) {
      hl_semaphore_release(e.semaphore);
      continue;
    }
    fence->entries[kept++] = e;
  }
  fence->count = kept;
}

size_t hl_fence_count(const hl_fence_t* fence) {
  return fence ? fence->count : 0;
}

void hl_fence_entry(const hl_fence_t* fence, size_t index,
                    hl_semaphore_t** out_semaphore, uint64_t* out_value) {
  if (!fence || index >= fence->count) {
    if (out_semaphore) *out_semaphore = NULL;
    if (out_value) *out_value = 0;
    return;
  }
  if (out_semaphore) *out_semaphore = fence->entries[index].semaphore;
  if (out_value) *out_value = fence->entries[index].value;
}

hl_status_t hl_fence_is_reached(const hl_fence_t* fence, bool* out_reached) {
  if (!out_reached) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_fence_is_reached: out_reached is NULL");
  }
  *out_reached = true;
  if (!fence) return NULL;
  for (size_t i = 0; i < fence->count; ++i) {
    hl_semaphore_t* s = fence->entries[i].semaphore;
    hl_status_t failure = hl_semaphore_failure(s);
    if (failure) {
      *out_reached = false;
      return hl_status_clone(failure);
    }
    if (hl_semaphore_value(s) < fence->entries[i].value) *out_reached = false;
  }
  return NULL;
}

hl_status_t hl_fence_wait(const hl_fence_t* fence, hl_time_t deadline) {
  if (!fence || fence->count == 0) return NULL;
  // Wait in batches; all-mode waits re-check everything after each wake.
  for (size_t start = 0; start < fence->count; start += 64) {
    size_t n = fence->count - start < 64 ? fence->count - start : 64;
    hl_semaphore_t* sems[64];
    uint64_t values[64];
    for (size_t i = 0; i < n; ++i) {
      sems[i] = fence->entries[start + i].semaphore;
      values[i] = fence->entries[start + i].value;
    }
    HL_RETURN_IF_ERROR_PLAIN(
        hl_semaphore_wait_many(HL_WAIT_ALL, n, sems, values, deadline, NULL));
  }
  return NULL;
}

// Fence notification: waits for each pair in turn without blocking anyone.
typedef struct hl_fence_notify_t {
  hl_waiter_t waiter;
  hl_work_t work;
  hl_device_t* device;
  hl_fence_entry_t* entries;  // Retained semaphores.
  size_t count;
  size_t next;  // First pair not known to be reached.
  hl_status_t status;
  hl_fence_callback_t fn;
  void* user;
} hl_fence_notify_t;

static void hl_fence_notify_finish(hl_work_t* work) {
  hl_fence_notify_t* n =
      (hl_fence_notify_t*)((char*)work - offsetof(hl_fence_notify_t, work));
  n->fn(n->user, n->status);
  hl_status_free(n->status);
  for (size_t i = 0; i < n->count; ++i)
    hl_semaphore_release(n->entries[i].semaphore);
  hl_device_t* device = n->device;
  free(n->entries);
  free(n);
  hl_device_release(device);
}

// Advances past reached pairs; registers on the next pending one or queues
// the callback. Scheduler lock held.
static void hl_fence_notify_advance_locked(hl_fence_notify_t* n) {
  while (n->next < n->count) {
    hl_semaphore_t* s = n->entries[n->next].semaphore;
    hl_status_t failure = hl_semaphore_failure(s);
    if (failure) {
      n->status = hl_status_clone(failure);
      break;
    }
    if (hl_semaphore_value(s) < n->entries[n->next].value) {
      n->waiter.value = n->entries[n->next].value;
      hl_semaphore_add_waiter_locked(s, &n->waiter);
      return;
    }
    ++n->next;
  }
  hl_device_enqueue_work(n->device, &n->work);
}

static void hl_fence_notify_wake(hl_waiter_t* waiter) {
  hl_fence_notify_advance_locked((hl_fence_notify_t*)waiter);
}

hl_status_t hl_fence_notify(const hl_fence_t* fence, hl_device_t* device,
                            hl_fence_callback_t fn, void* user) {
  hl_fence_notify_t* n = calloc(1, sizeof(*n));
  size_t count = hl_fence_count(fence);
  if (n && count) n->entries = malloc(count * sizeof(*n->entries));
  if (!n || (count && !n->entries)) {
    free(n);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating a fence notification");
  }
  for (size_t i = 0; i < count; ++i) {
    n->entries[i] = fence->entries[i];
    hl_semaphore_retain(n->entries[i].semaphore);
  }
  n->count = count;
  n->device = device;
  hl_device_retain(device);
  n->fn = fn;
  n->user = user;
  n->waiter.notify = hl_fence_notify_wake;
  n->work.fn = hl_fence_notify_finish;
  hl_timeline_lock();
  hl_fence_notify_advance_locked(n);
  hl_timeline_unlock();
  return NULL;
}

hl_status_t hl_fence_call_when_reached(const hl_fence_t* fence,
                                       hl_device_t* device,
                                       hl_fence_reached_fn_t fn, void* user) {
  if (!device || !fn) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_fence_call_when_reached: %s is NULL",
                          !device ? "device" : "fn");
  }
  return hl_fence_notify(fence, device, fn, user);
}
