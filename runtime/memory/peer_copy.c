// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hl_queue_copy, and how a copy between buffers of two devices goes.
//
// A copy within the queue's device is one transfer op (transfer.c). When the
// queue's device reaches both roots' devices (the same device or an enabled
// peer, device.h) and the backend has memcpy_peer_async, the copy is one
// transfer op on the queue's stream (hl_queue_copy_direct). Otherwise it is
// staged through host memory:
// - the read into the staging block runs on the queue when the source is
//   its device's, else on the source root's affinity queue, after the
//   copy's waits;
// - the write from it runs on the queue when the target is its device's,
//   else on the target root's affinity queue, after the read has completed
//   on the host: a host call between them holds the write back, since a
//   backend without |stream_ordered_host_work| takes a write's host bytes
//   when the write is issued, and a device-side wait for the read would let
//   it be issued before the bytes are there;
// - when the write ran elsewhere, a barrier on the queue waits for it (a
//   cross-device wait) and signals the copy's signal fence, so the copy
//   completes on the queue's timeline as a local one does.
// Each half records its use on its root as a local read or write does.
// The staging block is freed once the write completed or failed.

#include <stdlib.h>

#include "runtime/base/log.h"
#include "runtime/memory/memory_internal.h"

static bool hl_peer_copy_direct(hl_queue_t* queue, const hl_buffer_t* source,
                                const hl_buffer_t* target) {
  hl_device_t* device = hl_queue_device(queue);
  return device->backend->vtable->memcpy_peer_async &&
         hl_device_reaches(device, source->root->device) &&
         hl_device_reaches(device, target->root->device);
}

static void hl_peer_copy_count(hl_device_t* device, uint64_t bytes,
                               bool staged) {
  atomic_fetch_add_explicit(
      staged ? &device->staged_copies : &device->peer_copies, 1,
      memory_order_relaxed);
  atomic_fetch_add_explicit(
      staged ? &device->staged_bytes : &device->peer_bytes, bytes,
      memory_order_relaxed);
}

static void hl_peer_copy_nothing(void* user) { (void)user; }

static void hl_peer_copy_free_staging(void* user, hl_status_t status) {
  (void)status;  // Freed whether the halves completed or failed.
  free(user);
}

// The queue that runs the half of a staged copy touching |buffer|: |queue|
// for its own device's buffers, else the buffer's affinity queue.
static hl_status_t hl_peer_copy_side_queue(hl_queue_t* queue,
                                           const hl_buffer_t* buffer,
                                           const char* side,
                                           hl_queue_t** out_queue) {
  if (buffer->root->device == hl_queue_device(queue)) {
    *out_queue = queue;
    return NULL;
  }
  *out_queue = buffer->root->affinity_queue;
  if (*out_queue) return NULL;
  return HL_MAKE_STATUS(
      HL_STATUS_FAILED_PRECONDITION,
      "hl_queue_copy on queue %u: the %s (root %llu) is on a device this "
      "queue's device does not reach and has no affinity queue to stage "
      "through (enable peer access, or copy on a queue of its device)",
      hl_queue_id(queue), side, (unsigned long long)buffer->root->id);
}

// A fence of one pair (NULL on failure, with |*st| set).
static hl_fence_t* hl_peer_copy_fence(hl_semaphore_t* semaphore, uint64_t value,
                                      hl_status_t* st) {
  hl_fence_t* fence = NULL;
  if (!*st) *st = hl_fence_create(hl_allocator_system(), &fence);
  if (!*st) *st = hl_fence_insert(fence, semaphore, value);
  return fence;
}

static hl_status_t hl_peer_copy_staged(
    hl_queue_t* queue, const hl_fence_t* wait_fence,
    const hl_fence_t* signal_fence, hl_buffer_t* source, uint64_t source_offset,
    hl_buffer_t* target, uint64_t target_offset, uint64_t length) {
  hl_queue_t* reader = NULL;
  hl_queue_t* writer = NULL;
  HL_RETURN_IF_ERROR_PLAIN(
      hl_peer_copy_side_queue(queue, source, "source", &reader));
  HL_RETURN_IF_ERROR_PLAIN(
      hl_peer_copy_side_queue(queue, target, "target", &writer));
  void* staging = malloc(length ? (size_t)length : 1);
  if (!staging) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "hl_queue_copy on queue %u: %llu bytes of host "
                          "staging",
                          hl_queue_id(queue), (unsigned long long)length);
  }
  hl_semaphore_t* steps = NULL;
  hl_status_t st = hl_semaphore_create(0, hl_allocator_system(), &steps);
  hl_fence_t* read_done = hl_peer_copy_fence(steps, 1, &st);
  hl_fence_t* read_seen = hl_peer_copy_fence(steps, 2, &st);
  hl_fence_t* write_done = hl_peer_copy_fence(steps, 3, &st);
  hl_fence_t* write_signals = hl_peer_copy_fence(steps, 3, &st);
  if (!st && writer == queue) st = hl_fence_join(write_signals, signal_fence);
  bool read_submitted = false, write_submitted = false;
  if (!st) {
    st = hl_queue_read(reader, wait_fence, read_done, source, source_offset,
                       staging, length);
    read_submitted = !st;
  }
  if (!st) {
    st = hl_queue_host_call(writer, read_done, read_seen, hl_peer_copy_nothing,
                            NULL);
  }
  if (!st) {
    st = hl_queue_write(writer, read_seen, write_signals, staging, target,
                        target_offset, length);
    write_submitted = !st;
  }
  if (!st && writer != queue) {
    st = hl_queue_barrier(queue, write_done, signal_fence);
  }
  // The staging block goes once nothing can touch it any more: after the
  // write (or the read, when the write was never submitted).
  hl_status_t free_st = NULL;
  if (write_submitted || read_submitted) {
    free_st = hl_fence_call_when_reached(
        write_submitted ? write_done : read_done, hl_queue_device(queue),
        hl_peer_copy_free_staging, staging);
  } else {
    free(staging);
  }
  if (free_st) {
    // Cannot be told when it is safe: keep the block rather than free it
    // under a copy (a leak that is logged, not a use after free).
    HL_LOG_ERROR("hl_queue_copy: the %llu-byte staging block is kept: %s",
                 (unsigned long long)length, hl_status_message(free_st));
    hl_status_free(free_st);
  }
  hl_fence_release(read_done);
  hl_fence_release(read_seen);
  hl_fence_release(write_done);
  hl_fence_release(write_signals);
  hl_semaphore_release(steps);
  if (!st) hl_peer_copy_count(hl_queue_device(queue), length, true);
  return st;
}

hl_status_t hl_queue_copy(hl_queue_t* queue, const hl_fence_t* wait_fence,
                          const hl_fence_t* signal_fence, hl_buffer_t* source,
                          uint64_t source_offset, hl_buffer_t* target,
                          uint64_t target_offset, uint64_t length) {
  if (!queue)
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_copy: queue is NULL");
  HL_RETURN_IF_ERROR_PLAIN(hl_transfer_check_buffer(
      "hl_queue_copy source", queue, source, source_offset, length, true));
  HL_RETURN_IF_ERROR_PLAIN(hl_transfer_check_buffer(
      "hl_queue_copy target", queue, target, target_offset, length, true));
  hl_device_t* device = hl_queue_device(queue);
  bool local = source->root->device == device && target->root->device == device;
  if (local || hl_peer_copy_direct(queue, source, target)) {
    HL_RETURN_IF_ERROR_PLAIN(hl_queue_copy_direct(
        queue, wait_fence, signal_fence, source, source_offset, target,
        target_offset, length, !local));
    if (!local) hl_peer_copy_count(device, length, false);
    return NULL;
  }
  return hl_peer_copy_staged(queue, wait_fence, signal_fence, source,
                             source_offset, target, target_offset, length);
}
