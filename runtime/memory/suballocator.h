// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hipline's own pool: a timeline-aware suballocator over slabs that come from
// the backend's stream-ordered pool (malloc_async/free_async).
//
// Policy (see suballocator.c for the reasons):
// - sizes round up to 256 bytes; requests up to 1 MiB come from small slabs
//   (up to 2 MiB), requests up to 20 MiB from large slabs (a whole number of
//   copies of the request that grew the slab, about 40 MiB), bigger ones get
//   a slab of their own size whose free space later serves others; slabs
//   grow geometrically with what the pool holds;
// - free blocks sit in TLSF-style bins (16 per power of two) and a request
//   takes the smallest usable block of the first bin that has one; blocks
//   split on allocation and coalesce with free neighbours on free;
// - every free block remembers the timepoint (queue, value) of the dealloca
//   that freed it. The same queue reuses it at once (stream order); another
//   queue only once that queue's timeline has reached the value. A fresh
//   slab's unused tail carries the timepoint of the alloca that created it,
//   because the driver makes the slab valid for its stream only;
// - each queue keeps the block it freed last out of the bins, for its next
//   allocation of the same rounded size; any other request bins every such
//   block first, as do trim, synchronization points and statistics;
// - whole free slabs go back to the backend (free_async) on trim, at
//   synchronization points above the release threshold, and when an
//   allocation runs out of memory (trim, then retry once).
//
// Thread-safe: one spin lock (its own or the creator's), never held across a
// backend call (growing and giving slabs back call malloc_async and free_async
// between two holds; destroy excepted). It never calls the timeline but to
// read a semaphore's value. hl_suballocator_try_alloc_locked and
// hl_suballocator_free make no backend call, so callers may hold a queue's
// lock around them. On backends with stream_ordered_host_work it may be
// called from a host function running on |stream| (the alloca and dealloca
// run as stream work there).
#ifndef HIPLINE_RUNTIME_MEMORY_SUBALLOCATOR_H_
#define HIPLINE_RUNTIME_MEMORY_SUBALLOCATOR_H_

#include <stdbool.h>
#include <stdint.h>

#include "hipline/semaphore.h"
#include "runtime/backend/backend.h"
#include "runtime/base/spin.h"
#include "runtime/timeline/timeline_internal.h"

typedef struct hl_suballocator_t hl_suballocator_t;
typedef struct hl_suballocation_t hl_suballocation_t;

#define HL_SUBALLOC_NO_QUEUE UINT32_MAX

// Where the slab bytes went at one moment: every slab byte is in exactly one
// of the parts, so requested + rounding + tail + fragment + free_slab ==
// slab_bytes.
typedef struct hl_suballocator_account_t {
  uint64_t slab_bytes;       // Slabs held.
  uint64_t requested_bytes;  // Asked for by the live suballocations.
  uint64_t rounding_bytes;   // Handed out beyond the request (256 B granule).
  // Free bytes of slabs that hold a live suballocation: the free block that
  // ends such a slab (a tail), and the other free blocks (fragments).
  uint64_t tail_bytes;
  uint64_t fragment_bytes;
  uint64_t free_slab_bytes;  // Slabs with no live suballocation.
} hl_suballocator_account_t;

typedef struct hl_suballocator_stats_t {
  uint64_t slabs;                // Slabs held now.
  uint64_t slab_bytes;           // Bytes of those slabs (reserved).
  uint64_t slab_bytes_peak;      // Peak of slab_bytes.
  uint64_t used_bytes;           // Bytes handed out (after rounding).
  uint64_t used_bytes_peak;      // Peak of used_bytes.
  uint64_t free_bytes;           // slab_bytes - used_bytes.
  uint64_t largest_free_block;   // Largest free block (any timepoint).
  uint64_t pending_free_blocks;  // Free blocks whose free is not yet reached.
  uint64_t slab_allocs;          // Backend malloc_async calls made.
  uint64_t slab_releases;        // Slabs given back with free_async.
  uint64_t block_reuses;         // Allocations served without the backend.
  uint64_t cross_queue_reuses;   // Of those, blocks freed by another queue.
  uint64_t pending_skips;        // Blocks passed over: free not yet reached.
  // The account taken when slab_bytes last reached a new peak (with the
  // allocation that grew it in place).
  hl_suballocator_account_t peak_account;
} hl_suballocator_stats_t;

// Creates a suballocator over |backend|'s pool. Whole free slabs beyond
// |release_threshold| bytes go back at synchronization points (UINT64_MAX
// keeps them). |poison| fills freed blocks with 0xDB (checked mode on
// backends with stream_ordered_host_work, where frees run in execution
// order). |lock| (NULL: one of its own) is the lock it takes; a caller that
// shares it may do its own bookkeeping in the same critical section as an
// allocation or a free (the _locked calls below).
hl_status_t hl_suballocator_create(hl_backend_t* backend,
                                   uint64_t release_threshold, bool poison,
                                   hl_spinlock_t* lock,
                                   hl_suballocator_t** out_suballocator);

// Gives every slab back and frees the suballocator. Every suballocation must
// have been freed and all work using them completed.
void hl_suballocator_destroy(hl_suballocator_t* suballocator);

// Allocates |size| bytes for the alloca at |timeline|@|value| of queue
// |queue_id| on |stream|. Out of memory (after trimming and retrying) is
// RESOURCE_EXHAUSTED with the sizes.
hl_status_t hl_suballocator_alloc(hl_suballocator_t* suballocator,
                                  uint64_t size, hl_backend_stream_t* stream,
                                  uint32_t queue_id, hl_semaphore_t* timeline,
                                  uint64_t value, void** out_ptr,
                                  hl_suballocation_t** out_allocation);

// What an allocation is ordered after beyond its own queue: for each
// semaphore (by id), the highest value its queue has waited for or knows is
// reached before the allocation runs (the queue's wait frontier). A block
// freed on another queue whose free is covered (through that queue's
// timeline, or the signal the free was stamped with) is reusable at once:
// IREE's reuse "behind the death frontier".
typedef struct hl_suballoc_cover_t {
  const hl_timepoint_id_t* entries;
  size_t count;
} hl_suballoc_cover_t;

// hl_suballocator_alloc that also reuses blocks whose free |cover| (NULL:
// none) orders the allocation after.
hl_status_t hl_suballocator_alloc_covered(
    hl_suballocator_t* suballocator, uint64_t size, hl_backend_stream_t* stream,
    uint32_t queue_id, hl_semaphore_t* timeline, uint64_t value,
    const hl_suballoc_cover_t* cover, void** out_ptr,
    hl_suballocation_t** out_allocation);

// hl_suballocator_alloc where free space serves the request, with the
// suballocator's lock held by the caller: no slab is asked for and no
// backend is called (so a caller may hold a queue's lock too). Returns
// false, changing nothing, when the request would need a new slab.
bool hl_suballocator_try_alloc_locked(hl_suballocator_t* suballocator,
                                      uint64_t size, uint32_t queue_id,
                                      void** out_ptr,
                                      hl_suballocation_t** out_allocation);

// Frees |allocation| by the dealloca at |timeline|@|value| of queue
// |queue_id| running on |stream|. A NULL |timeline| means every use is
// already complete (any queue may reuse the block at once).
void hl_suballocator_free(hl_suballocator_t* suballocator,
                          hl_suballocation_t* allocation,
                          hl_backend_stream_t* stream, uint32_t queue_id,
                          hl_semaphore_t* timeline, uint64_t value);
// hl_suballocator_free in two steps, for a caller that holds the lock:
// poison the block (checked mode) before taking it, then free it.
void hl_suballocator_poison(hl_suballocator_t* suballocator,
                            hl_suballocation_t* allocation);
void hl_suballocator_free_locked(hl_suballocator_t* suballocator,
                                 hl_suballocation_t* allocation,
                                 hl_backend_stream_t* stream, uint32_t queue_id,
                                 hl_semaphore_t* timeline, uint64_t value);

// hl_suballocator_free_locked for a dealloca with a signal: |signal_id|
// (0: none) @ |signal_value| is one of the semaphores its submission
// signals, so an allocation whose queue waited for it reuses the block at
// once (hl_suballoc_cover_t).
void hl_suballocator_free_signalled_locked(
    hl_suballocator_t* suballocator, hl_suballocation_t* allocation,
    hl_backend_stream_t* stream, uint32_t queue_id, hl_semaphore_t* timeline,
    uint64_t value, uint64_t signal_id, uint64_t signal_value);

// Gives whole free slabs back until at most |min_bytes_to_keep| slab bytes
// stay. |stream| (may be NULL) is the stream of queue |queue_id| when called
// from its work: slabs last freed by that queue can go back on it too.
// Returns the number of slabs released.
uint64_t hl_suballocator_trim(hl_suballocator_t* suballocator,
                              uint64_t min_bytes_to_keep,
                              hl_backend_stream_t* stream, uint32_t queue_id);

// The release threshold given at creation.
uint64_t hl_suballocator_release_threshold(hl_suballocator_t* suballocator);

void hl_suballocator_stats(hl_suballocator_t* suballocator,
                           hl_suballocator_stats_t* out_stats);
// Bytes of the slabs held from the driver; the lock is held by the caller.
uint64_t hl_suballocator_slab_bytes_locked(hl_suballocator_t* suballocator);
// Sets the peaks of the statistics to the current values (takes the lock).
void hl_suballocator_reset_peaks(hl_suballocator_t* suballocator);

// Fills |out_account| with where the slab bytes are now.
void hl_suballocator_account(hl_suballocator_t* suballocator,
                             hl_suballocator_account_t* out_account);

// Blocks held in the queues' caches now (each queue keeps the block it
// freed last for its next allocation of that size). For tests.
uint32_t hl_suballocator_cached_blocks(hl_suballocator_t* suballocator);

// Checks the internal invariants (address order, coalescing, byte counts,
// bins); returns a status naming the first violation. For tests.
hl_status_t hl_suballocator_verify(hl_suballocator_t* suballocator);

#endif  // HIPLINE_RUNTIME_MEMORY_SUBALLOCATOR_H_
