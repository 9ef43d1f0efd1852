// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Buffers and the queue-ordered allocator.
//
// A root is one allocation: its device, its queue affinity, its origin
// (ASYNC from hl_queue_alloca, EXTERNAL from hl_buffer_wrap, PERSISTENT once
// registered as a global), an atomic reference count and a timeline
// resource (a mutation barrier and a use fence). A buffer is a view of a root
// (offset, length) and retains it; subviews of subviews resolve to the same
// root and share its timeline resource.
//
// Every queue operation that touches a buffer records its timepoint in the
// root's use fence (and, for writes, its mutation barrier), so
// hl_queue_dealloca can order the free after every use without the caller
// tracking them. Buffers are reference counted and thread-safe.
#ifndef HIPLINE_BUFFER_H_
#define HIPLINE_BUFFER_H_

#include <stdint.h>

#include "hipline/queue.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hl_buffer_t hl_buffer_t;

typedef enum hl_buffer_origin_e {
  HL_BUFFER_ORIGIN_ASYNC = 0,       // From hl_queue_alloca.
  HL_BUFFER_ORIGIN_EXTERNAL = 1,    // A wrapped foreign pointer.
  HL_BUFFER_ORIGIN_PERSISTENT = 2,  // Registered as a global.
} hl_buffer_origin_t;

// Returns "async", "external" or "persistent".
HL_API const char* hl_buffer_origin_name(hl_buffer_origin_t origin);

// Largest size hl_queue_alloca accepts (larger requests are OUT_OF_RANGE).
#define HL_BUFFER_MAX_SIZE (UINT64_C(1) << 48)

// Allocates |size| bytes in queue order: after |wait_fence|, on |queue|'s
// stream, signalling |signal_fence| once the memory is usable. Returns the
// buffer handle at once (caller owns it). Out of memory trims the pool,
// retries once, then fails |signal_fence| with RESOURCE_EXHAUSTED naming the
// size and the pool's used and reserved bytes. |size| 0 is
// INVALID_ARGUMENT. |flags| must be 0 (reserved).
HL_API hl_status_t hl_queue_alloca(hl_queue_t* queue,
                                   const hl_fence_t* wait_fence,
                                   const hl_fence_t* signal_fence,
                                   uint64_t size, uint32_t flags,
                                   hl_buffer_t** out_buffer);

// Frees |buffer|'s root in queue order, after |wait_fence| and every use
// recorded in the root's use fence, then signals |signal_fence|. A NULL
// |queue| means the root's origin queue (hl_buffer_affinity_queue); a root
// without one (wrapped) then is INVALID_ARGUMENT.
// - ASYNC roots are freed on |queue|'s stream.
// - Other roots: a barrier that keeps timeline order; the memory goes on the
//   last release.
// - If a wait fails, the dealloca is cancelled: nothing is freed, the buffer
//   stays valid, and |signal_fence| fails with that status.
// - A second dealloca of the same root is FAILED_PRECONDITION.
// The caller keeps its reference to |buffer| (release it as usual).
HL_API hl_status_t hl_queue_dealloca(hl_queue_t* queue,
                                     const hl_fence_t* wait_fence,
                                     const hl_fence_t* signal_fence,
                                     hl_buffer_t* buffer);

// Wraps |device_ptr| (|size| bytes, owned elsewhere) as an EXTERNAL root on
// |device|. |release_fn(user, device_ptr)| (may be NULL) runs once the last
// reference drops and the device no longer uses it. The address is known
// outside hipline, so the root is escaped from the start (see
// hl_buffer_device_pointer).
typedef void (*hl_buffer_release_fn_t)(void* user, void* device_ptr);
HL_API hl_status_t hl_buffer_wrap(hl_device_t* device, void* device_ptr,
                                  uint64_t size,
                                  hl_buffer_release_fn_t release_fn, void* user,
                                  hl_buffer_t** out_buffer);

// A view of |length| bytes at |offset| within |buffer| (caller owns it).
// Out-of-range views are OUT_OF_RANGE.
HL_API hl_status_t hl_buffer_subview(hl_buffer_t* buffer, uint64_t offset,
                                     uint64_t length, hl_buffer_t** out_view);

HL_API void hl_buffer_retain(hl_buffer_t* buffer);
HL_API void hl_buffer_release(hl_buffer_t* buffer);

// Registers |buffer|'s root as a global (PERSISTENT): the invocation layer
// never frees it in queue order. Registering twice is ALREADY_EXISTS.
// The registry holds the root, and the root its device: unregister while a
// handle is left. A global whose every handle is released can no longer be
// unregistered; its memory and its device then live until the process exits
// (hl_device_live_count keeps counting that device).
HL_API hl_status_t hl_buffer_register_global(hl_buffer_t* buffer);
// Undoes hl_buffer_register_global (NOT_FOUND if not registered).
HL_API hl_status_t hl_buffer_unregister_global(hl_buffer_t* buffer);

// Accessors (borrowed results; never fail for a live buffer).
HL_API uint64_t hl_buffer_length(const hl_buffer_t* buffer);
HL_API uint64_t hl_buffer_offset(const hl_buffer_t* buffer);
HL_API hl_buffer_origin_t hl_buffer_origin(const hl_buffer_t* buffer);
HL_API hl_device_t* hl_buffer_device(const hl_buffer_t* buffer);
// A process-unique id of the buffer's root (equal for views of one root).
HL_API uint64_t hl_buffer_root_id(const hl_buffer_t* buffer);
// The device address of the view, or NULL until the alloca is issued.
//
// Escape: a non-NULL address lets code use the memory without hipline
// recording it, so the root is marked *escaped* (sticky, for every view of
// the root, counted in hl_memory_stats_t.escaped_roots). hipline can then no
// longer prove when the memory is idle from its use fence alone: if its last
// buffer goes without a dealloca, the ORDERED fallback frees it the
// conservative FRONTIER way instead of in queue order. Roots from
// hl_buffer_wrap are escaped from the start. Prefer hipline operations
// (fill, copy, read, write, dispatch, invocations), which keep the root
// un-escaped, or free explicitly with hl_queue_dealloca.
HL_API void* hl_buffer_device_pointer(const hl_buffer_t* buffer);
// True once |buffer|'s root has escaped (see hl_buffer_device_pointer).
HL_API bool hl_buffer_is_escaped(const hl_buffer_t* buffer);
// True once the root's memory has been freed (a later use is a
// use-after-free).
HL_API bool hl_buffer_is_freed(const hl_buffer_t* buffer);

// Joins the root's use fence (every recorded use) into |fence|.
HL_API hl_status_t hl_buffer_use_fence(const hl_buffer_t* buffer,
                                       hl_fence_t* fence);
// Joins the root's mutation barrier (the last recorded write) into |fence|.
HL_API hl_status_t hl_buffer_mutation_barrier(const hl_buffer_t* buffer,
                                              hl_fence_t* fence);

//===----------------------------------------------------------------------===//
// Queue operations on buffers
//===----------------------------------------------------------------------===//
// Each takes a wait and a signal fence like any submission, retains its
// buffers until it completes, and records its uses in the roots' timeline
// resources. Offsets and lengths are checked (OUT_OF_RANGE).

// Fills |length| bytes at |offset| with the 32-bit |pattern| (offset and
// length must be multiples of 4).
HL_API hl_status_t hl_queue_fill(hl_queue_t* queue,
                                 const hl_fence_t* wait_fence,
                                 const hl_fence_t* signal_fence,
                                 hl_buffer_t* buffer, uint64_t offset,
                                 uint64_t length, uint32_t pattern);

// Copies |length| bytes from |source|+|source_offset| to
// |target|+|target_offset|.
HL_API hl_status_t hl_queue_copy(hl_queue_t* queue,
                                 const hl_fence_t* wait_fence,
                                 const hl_fence_t* signal_fence,
                                 hl_buffer_t* source, uint64_t source_offset,
                                 hl_buffer_t* target, uint64_t target_offset,
                                 uint64_t length);

// Copies device data to host memory |host_target|, which must stay valid
// until |signal_fence| is reached.
HL_API hl_status_t hl_queue_read(hl_queue_t* queue,
                                 const hl_fence_t* wait_fence,
                                 const hl_fence_t* signal_fence,
                                 hl_buffer_t* source, uint64_t source_offset,
                                 void* host_target, uint64_t length);

// Copies host memory |host_source| (valid until |signal_fence|) to the
// device.
HL_API hl_status_t hl_queue_write(hl_queue_t* queue,
                                  const hl_fence_t* wait_fence,
                                  const hl_fence_t* signal_fence,
                                  const void* host_source, hl_buffer_t* target,
                                  uint64_t target_offset, uint64_t length);

//===----------------------------------------------------------------------===//
// Statistics
//===----------------------------------------------------------------------===//

typedef struct hl_memory_stats_t {
  uint64_t bytes_in_use;  // Sizes of live allocas not yet freed.
  uint64_t bytes_in_use_peak;
  uint64_t bytes_reserved;  // Held by the pool (device-wide).
  uint64_t bytes_reserved_peak;
  uint64_t allocas;
  uint64_t deallocas;  // Queue-ordered frees performed.
  uint64_t deallocas_cancelled;
  uint64_t fallback_releases_frontier;
  uint64_t fallback_releases_device_sync;
  uint64_t ooms;
  uint64_t use_after_free;  // Checked-mode violations detected.
  // Command buffers (hipline/command_buffer.h), counted per execution:
  uint64_t command_buffer_executions;
  uint64_t fills_elided;       // Fill commands dropped whole.
  uint64_t fills_shrunk;       // Fill commands cut down to their gaps.
  uint64_t fill_bytes_elided;  // Bytes not filled by either.
  // Live backend objects of the device (device-wide in both queries), for
  // leak checks: timepoint events created and not destroyed, the part of
  // them idle in the device's event pool (hl_device_trim destroys those),
  // and backend streams.
  int64_t events_live;
  int64_t events_pooled;
  int64_t streams_live;
  // Fallback releases freed in queue order (ORDERED, un-escaped roots).
  uint64_t fallback_releases_ordered;
  // Roots whose device address escaped (hl_buffer_device_pointer, wrap).
  uint64_t escaped_roots;
  // DEVICE_SYNC releases made on hipline's completion thread, which never
  // drains: the drain is owed to the next host thread that allocates on the
  // device or releases through the fallback (it drains, then frees).
  uint64_t fallback_device_sync_owed;
  // hipline's suballocator (HIPLINE_ALLOCATOR=hipline), device-wide; zero
  // with the driver pool. There bytes_reserved is the slabs' bytes plus what
  // the driver caches beyond them, and bytes_reserved_peak the slabs' peak.
  uint64_t pool_slabs;               // Slabs held from the driver.
  uint64_t pool_slab_bytes;          // Bytes of those slabs.
  uint64_t pool_used_bytes;          // Handed out (rounded to 256 bytes).
  uint64_t pool_free_bytes;          // pool_slab_bytes - pool_used_bytes.
  uint64_t pool_largest_free_block;  // Bytes.
  // 1 - largest free block / free bytes: 0 when the free space is one block.
  double pool_fragmentation;
  uint64_t pool_pending_free_blocks;  // Freed; their free not yet reached.
  uint64_t pool_slab_allocs;          // Driver allocations (slow path).
  uint64_t pool_slab_releases;        // Slabs given back to the driver.
  uint64_t pool_block_reuses;         // Allocas served without the driver.
  uint64_t pool_cross_queue_reuses;   // Blocks reused by another queue.
  // Where the slab bytes were when they last reached a new peak (the
  // allocation that grew them included); every byte is in one part:
  // slab = requested + rounding + tail + fragment + free_slab.
  uint64_t pool_peak_slab_bytes;
  uint64_t pool_peak_requested_bytes;  // Asked for by live allocas.
  uint64_t pool_peak_rounding_bytes;   // Handed out beyond the request.
  uint64_t pool_peak_tail_bytes;       // Free ends of slabs in use.
  uint64_t pool_peak_fragment_bytes;   // Other free blocks of slabs in use.
  uint64_t pool_peak_free_slab_bytes;  // Slabs with no live alloca.
} hl_memory_stats_t;

// Device-wide statistics.
HL_API hl_status_t hl_device_memory_stats(hl_device_t* device,
                                          hl_memory_stats_t* out_stats);
// Statistics of allocas made on |queue| (bytes_reserved is device-wide).
HL_API hl_status_t hl_queue_memory_stats(hl_queue_t* queue,
                                         hl_memory_stats_t* out_stats);

// Starts the peaks (bytes_in_use_peak of the device and of each of its
// queues, bytes_reserved_peak) again from the current values, as PyTorch's
// torch.cuda.reset_peak_memory_stats does. With the driver's pool,
// bytes_reserved_peak afterwards is the driver's high-water mark once that
// passes its value at the reset, and until then the largest reservation seen
// by a statistics query since the reset.
HL_API hl_status_t hl_device_reset_peak_memory_stats(hl_device_t* device);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_BUFFER_H_
