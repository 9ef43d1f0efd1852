// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hipline's own pool: a timeline-aware suballocator over backend slabs.
//
// Why these choices (PyTorch's caching allocator for comparison):
// - 256-byte rounding, not 512: HIP's allocation alignment is 256, and on
//   the traces most requests are small tensors where 512 wastes more.
// - Small (<= 1 MiB) and large requests live in separate slabs, so
//   long-lived small tensors seldom pin large slabs. Requests above 20 MiB
//   get a slab of their own, of their own size (no 2 MiB rounding: the
//   driver's stream-ordered pool suballocates it); when they are freed, the
//   slab's free space serves later large requests by splitting, and
//   coalesces back on free.
// - Free blocks are binned TLSF-style: 16 bins per power of two (a bin spans
//   at most 1/16 of its size), one bitmap per pool. A request scans its own
//   bin for the smallest usable block that fits, then takes the smallest
//   usable block of the next non-empty bin. That is best fit to within
//   6.25% with O(1) bin lookup, instead of PyTorch's ordered-set search.
// - Slabs target 2 MiB (small) and 40 MiB (large; requests up to 20 MiB
//   share them, the same half-a-slab rule as PyTorch's 10-of-20 MiB), but
//   they grow geometrically from 8 KiB / 2 MiB with what the pool holds.
//   A large slab holds a whole number of copies of the request that grew
//   it, the fewest that reach the target: tensors come in groups of one
//   size, and slabs they fill leave no tail (with fixed 40 MiB slabs, the
//   tails were half the bytes above live at the peak of the shared traces).
//   The bigger large slab lowers the share of each slab left over at the
//   peak; the growth keeps small workloads small. A small request takes a
//   free block of a large slab before asking the driver for a new small
//   slab. docs/memory.md has what these rules reserve on the shared traces
//   against an ideal best-fit arena and PyTorch's allocator.
// - Reuse across queues follows the timeline: a free block carries the
//   timepoint of its dealloca, and another queue may take it only once that
//   timepoint is reached (a non-blocking atomic read of the semaphore). We
//   never insert waits into the other queue: on the host backend the alloca
//   runs on the stream itself, where a wait would block the stream thread,
//   and on HIP it would serialise unrelated queues; growing instead costs at
//   most one slab per queue, and the block becomes reusable by everyone as
//   soon as the timeline moves on.
// - Whole free slabs go back at synchronization points when the slabs held
//   exceed the pool's release threshold, on trim, on out of memory, and
//   before the pool grows (an empty slab that could not serve the request
//   is idle memory). A free never releases its slab at once: alloc/free
//   loops would otherwise call the driver every time.

#include "runtime/memory/suballocator.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "runtime/base/faults.h"
#include "runtime/base/log.h"
#include "runtime/base/spin.h"
#include "runtime/base/trace.h"
#include "runtime/memory/suballocator_internal.h"
#include "runtime/timeline/timeline_internal.h"

//===----------------------------------------------------------------------===//
// Bins
//===----------------------------------------------------------------------===//

static void hl_sa_bin_insert(hl_suballocator_t* sa, hl_suballocation_t* b) {
  hl_sa_pool_t* pool = &sa->pools[b->slab->pool];
  uint32_t bin = hl_sa_bin(b->size);
  b->bin = bin;
  b->free_prev = NULL;
  b->free_next = pool->bins[bin];
  if (b->free_next) b->free_next->free_prev = b;
  pool->bins[bin] = b;
  pool->bitmap[bin / 64] |= (uint64_t)1 << (bin % 64);
}

static void hl_sa_bin_remove(hl_suballocator_t* sa, hl_suballocation_t* b) {
  hl_sa_pool_t* pool = &sa->pools[b->slab->pool];
  if (b->free_prev) {
    b->free_prev->free_next = b->free_next;
  } else {
    pool->bins[b->bin] = b->free_next;
  }
  if (b->free_next) b->free_next->free_prev = b->free_prev;
  b->free_prev = b->free_next = NULL;
  if (!pool->bins[b->bin]) {
    pool->bitmap[b->bin / 64] &= ~((uint64_t)1 << (b->bin % 64));
  }
}

// First non-empty bin >= |bin|, or HL_SA_BINS.
static uint32_t hl_sa_next_bin(const hl_sa_pool_t* pool, uint32_t bin) {
  uint32_t word = bin / 64;
  if (word >= HL_SA_BITMAP_WORDS) return HL_SA_BINS;
  uint64_t bits = pool->bitmap[word] & (~(uint64_t)0 << (bin % 64));
  while (!bits) {
    if (++word == HL_SA_BITMAP_WORDS) return HL_SA_BINS;
    bits = pool->bitmap[word];
  }
  return word * 64 + (uint32_t)__builtin_ctzll(bits);
}

//===----------------------------------------------------------------------===//
// Timepoints
//===----------------------------------------------------------------------===//

// hl_sa_register_timeline's first time for |queue_id| (or a failure).
static __attribute__((noinline)) bool hl_sa_register_timeline_slow(
    hl_suballocator_t* sa, uint32_t queue_id, hl_semaphore_t* timeline) {
  if (queue_id >= sa->queue_capacity) {
    uint32_t capacity = sa->queue_capacity ? sa->queue_capacity : 8;
    while (capacity <= queue_id) capacity *= 2;
    hl_sa_queue_t* table = realloc(sa->queues, capacity * sizeof(*table));
    if (!table) return false;
    memset(table + sa->queue_capacity, 0,
           (capacity - sa->queue_capacity) * sizeof(*table));
    sa->queues = table;
    sa->queue_capacity = capacity;
  }
  hl_sa_queue_t* q = &sa->queues[queue_id];
  if (!q->timeline) {
    hl_semaphore_retain(timeline);
    q->timeline = timeline;
  }
  return q->timeline == timeline;
}

// Remembers |timeline| as queue |queue_id|'s; false when it cannot (the
// block's timepoint then never counts as reached: reuse stays same-queue).
static inline bool hl_sa_register_timeline(hl_suballocator_t* sa,
                                           uint32_t queue_id,
                                           hl_semaphore_t* timeline) {
  // Every free of a queue after its first finds its timeline there.
  if (HL_LIKELY(queue_id < sa->queue_capacity &&
                sa->queues[queue_id].timeline == timeline)) {
    return true;
  }
  return hl_sa_register_timeline_slow(sa, queue_id, timeline);
}

// The value of semaphore |id| the allocation is ordered after (0: none).
static uint64_t hl_sa_covered_value(const hl_suballoc_cover_t* cover,
                                    uint64_t id) {
  for (size_t i = 0; cover && id && i < cover->count; ++i) {
    if (cover->entries[i].semaphore_id == id) return cover->entries[i].value;
  }
  return 0;
}

// Whether the allocation being served is ordered after |b|'s free (its
// queue's wait frontier covers the free's signal or timeline value).
static bool hl_sa_covered(hl_suballocator_t* sa, const hl_suballocation_t* b) {
  const hl_suballoc_cover_t* cover = sa->cover;
  uint32_t q = b->free_queue;
  bool by_timeline = q < sa->queue_capacity && sa->queues[q].timeline &&
                     b->free_value != UINT64_MAX;
  return (b->free_signal_id && hl_sa_covered_value(cover, b->free_signal_id) >=
                                   b->free_signal_value) ||
         (by_timeline &&
          hl_sa_covered_value(cover, sa->queues[q].timeline->id) >=
              b->free_value);
}

static bool hl_sa_usable(hl_suballocator_t* sa, hl_suballocation_t* b,
                         uint32_t queue_id) {
  if (b->free_queue == HL_SUBALLOC_NO_QUEUE || b->free_queue == queue_id) {
    return true;
  }
  hl_sa_refresh(sa, b);
  return b->free_queue == HL_SUBALLOC_NO_QUEUE || hl_sa_covered(sa, b);
}

// Whether free neighbours |a| and |b| may merge: the merged block must be
// described by one timepoint.
static bool hl_sa_compatible(hl_suballocator_t* sa, hl_suballocation_t* a,
                             hl_suballocation_t* b) {
  hl_sa_refresh(sa, a);
  hl_sa_refresh(sa, b);
  return a->free_queue == HL_SUBALLOC_NO_QUEUE ||
         b->free_queue == HL_SUBALLOC_NO_QUEUE ||
         a->free_queue == b->free_queue;
}

//===----------------------------------------------------------------------===//
// Blocks and slabs
//===----------------------------------------------------------------------===//

static hl_suballocation_t* hl_sa_block_new(hl_suballocator_t* sa) {
  hl_suballocation_t* b = sa->spare;
  if (b) {
    sa->spare = b->next;
  } else {
    b = malloc(sizeof(*b));
    if (!b) return NULL;
  }
  memset(b, 0, sizeof(*b));
  b->free_queue = HL_SUBALLOC_NO_QUEUE;
  b->freed_by = HL_SUBALLOC_NO_QUEUE;
  return b;
}

static void hl_sa_block_recycle(hl_suballocator_t* sa, hl_suballocation_t* b) {
  b->next = sa->spare;
  sa->spare = b;
}

// Merges free |b| into free |a| (its left neighbour); |b| is not binned.
static void hl_sa_merge_into(hl_suballocator_t* sa, hl_suballocation_t* a,
                             hl_suballocation_t* b) {
  // The merged block keeps the later timepoint, and the signal of that free.
  if (a->free_queue == HL_SUBALLOC_NO_QUEUE ||
      (b->free_queue == a->free_queue && b->free_value > a->free_value)) {
    a->free_queue = b->free_queue;
    a->free_value = b->free_value;
    a->free_signal_id = b->free_signal_id;
    a->free_signal_value = b->free_signal_value;
  }
  a->size += b->size;
  a->next = b->next;
  if (b->next) b->next->prev = a;
  hl_sa_block_recycle(sa, b);
}

// Coalesces free |b| (not binned) with compatible free neighbours and bins
// the result.
static void hl_sa_coalesce_and_bin(hl_suballocator_t* sa,
                                   hl_suballocation_t* b) {
  hl_suballocation_t* next = b->next;
  if (next && next->free && !next->cached && hl_sa_compatible(sa, b, next)) {
    hl_sa_bin_remove(sa, next);
    hl_sa_merge_into(sa, b, next);
  }
  hl_suballocation_t* prev = b->prev;
  if (prev && prev->free && !prev->cached && hl_sa_compatible(sa, prev, b)) {
    hl_sa_bin_remove(sa, prev);
    hl_sa_merge_into(sa, prev, b);
    b = prev;
  }
  hl_sa_bin_insert(sa, b);
}

// Merges neighbours whose timepoints have been reached since they were
// freed. Returns true when anything merged.
static bool hl_sa_coalesce_slab(hl_suballocator_t* sa, hl_sa_slab_t* slab) {
  bool merged = false;
  for (hl_suballocation_t* b = slab->first; b && b->next;) {
    hl_suballocation_t* next = b->next;
    if (b->free && next->free && !b->cached && !next->cached &&
        hl_sa_compatible(sa, b, next)) {
      hl_sa_bin_remove(sa, b);
      hl_sa_bin_remove(sa, next);
      hl_sa_merge_into(sa, b, next);
      hl_sa_bin_insert(sa, b);
      merged = true;
    } else {
      b = next;
    }
  }
  return merged;
}

// Marks |b| (binned, free, at least |size|) allocated, splitting off the
// rest as a free block with the same timepoint (the caller then sets
// |b->requested|, which shares the timepoint's storage).
static void hl_sa_take(hl_suballocator_t* sa, hl_suballocation_t* b,
                       uint64_t size, hl_suballocation_t* spare) {
  hl_sa_bin_remove(sa, b);
  if (b->size > size && spare) {
    hl_suballocation_t* rest = spare;
    rest->slab = b->slab;
    rest->offset = b->offset + size;
    rest->size = b->size - size;
    rest->free = true;
    rest->free_queue = b->free_queue;
    rest->free_value = b->free_value;
    rest->free_signal_id = b->free_signal_id;
    rest->free_signal_value = b->free_signal_value;
    rest->freed_by = b->freed_by;
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    hl_sa_bin_insert(sa, rest);
  } else if (spare) {
    hl_sa_block_recycle(sa, spare);
  }
  b->free = false;
  sa->stats.used_bytes += b->size;
  if (sa->stats.used_bytes > sa->stats.used_bytes_peak) {
    sa->stats.used_bytes_peak = sa->stats.used_bytes;
  }
}

// The best usable free block of at least |size| in |pool| for |queue_id|.
static hl_suballocation_t* hl_sa_find(hl_suballocator_t* sa,
                                      uint32_t pool_index, uint64_t size,
                                      uint32_t queue_id) {
  hl_sa_pool_t* pool = &sa->pools[pool_index];
  int scanned = 0;
  for (uint32_t bin = hl_sa_next_bin(pool, hl_sa_bin(size)); bin < HL_SA_BINS;
       bin = hl_sa_next_bin(pool, bin + 1)) {
    hl_suballocation_t* best = NULL;
    for (hl_suballocation_t* b = pool->bins[bin]; b; b = b->free_next) {
      if (++scanned > HL_SA_SCAN_LIMIT) return best;
      if (b->size < size || (best && b->size >= best->size)) continue;
      if (!hl_sa_usable(sa, b, queue_id)) {
        ++sa->stats.pending_skips;
        continue;
      }
      best = b;
      if (b->size == size) break;
    }
    if (best) return best;
  }
  return NULL;
}

//===----------------------------------------------------------------------===//
// Per-queue caches (hl_sa_queue_t.cached)
//===----------------------------------------------------------------------===//

// Bins the block of |q|'s cache.
static void hl_sa_uncache(hl_suballocator_t* sa, hl_sa_queue_t* q) {
  hl_suballocation_t* b = q->cached;
  q->cached = NULL;
  b->cached = false;
  --sa->cached_blocks;
  hl_sa_coalesce_and_bin(sa, b);
}

// Bins every cached block, merging it with its free neighbours: what is
// binned is then exactly what it would be without the caches.
static void hl_sa_flush_locked(hl_suballocator_t* sa) {
  for (uint32_t i = 0; sa->cached_blocks && i < sa->queue_capacity; ++i) {
    if (sa->queues[i].cached) hl_sa_uncache(sa, &sa->queues[i]);
  }
}

// Keeps free |b| (stamped with queue |queue_id|'s timepoint, which is
// registered) in that queue's cache; the block it held goes to the bins.
static void hl_sa_cache_put(hl_suballocator_t* sa, uint32_t queue_id,
                            hl_suballocation_t* b) {
  hl_sa_queue_t* q = &sa->queues[queue_id];
  b->cached = true;  // First: binning the older block must not merge |b|.
  if (q->cached) hl_sa_uncache(sa, q);
  q->cached = b;
  ++sa->cached_blocks;
}

// Serves a |rounded|-byte request of queue |queue_id| from its cache. On a
// miss every cache goes to the bins, so the search that follows sees what
// it would see without them (another queue's block too, when reached or
// covered).
static inline bool hl_sa_take_cached_locked(
    hl_suballocator_t* sa, uint32_t queue_id, uint64_t rounded,
    uint64_t requested, void** out_ptr, hl_suballocation_t** out_allocation) {
  hl_sa_queue_t* q =
      queue_id < sa->queue_capacity ? &sa->queues[queue_id] : NULL;
  hl_suballocation_t* b = q ? q->cached : NULL;
  if (!b || b->size != rounded) {
    hl_sa_flush_locked(sa);
    return false;
  }
  q->cached = NULL;
  --sa->cached_blocks;
  b->cached = false;
  b->free = false;
  b->requested = requested;
  ++sa->stats.block_reuses;
  sa->stats.used_bytes += b->size;
  if (sa->stats.used_bytes > sa->stats.used_bytes_peak) {
    sa->stats.used_bytes_peak = sa->stats.used_bytes;
  }
  *out_ptr = b->slab->base + b->offset;
  *out_allocation = b;
  return true;
}

static uint64_t hl_sa_pow2_ceil(uint64_t v) {
  return v <= 1 ? 1 : (uint64_t)1 << (64 - __builtin_clzll(v - 1));
}

// Slabs grow geometrically with what the pool already holds (a quarter of
// it, as a power of two, from 8 KiB / 2 MiB up to 2 MiB / 40 MiB), so a
// small workload does not reserve a 40 MiB slab for a 2 MiB tensor, and a
// large one soon gets full-size slabs. A large slab holds a whole number of
// copies of the request that grew it (the fewest that reach the target):
// tensors of one size come in groups, and a slab they fill leaves no tail.
// A request above 20 MiB gets a slab of its own size.
static uint64_t hl_sa_slab_size(const hl_suballocator_t* sa, uint32_t pool,
                                uint64_t size) {
  if (pool == 1 && size > HL_SA_LARGE_MAX) return size;
  uint64_t min = pool ? HL_SA_LARGE_MIN_SLAB : HL_SA_SMALL_MIN_SLAB;
  uint64_t max = pool ? HL_SA_LARGE_SLAB : HL_SA_SMALL_SLAB;
  uint64_t target = hl_sa_pow2_ceil(sa->pool_bytes[pool] / 4);
  target = target < min ? min : target > max ? max : target;
  if (pool == 1) return (target + size - 1) / size * size;
  uint64_t need = hl_sa_pow2_ceil(size);
  return need > target ? need : target;
}

// Gets |slab_size| bytes from the backend on |stream| for a new slab (no
// lock held).
static hl_status_t hl_sa_slab_new(hl_suballocator_t* sa, uint64_t slab_size,
                                  hl_backend_stream_t* stream,
                                  hl_sa_slab_t** out_slab) {
  *out_slab = NULL;
  hl_sa_slab_t* slab = calloc(1, sizeof(*slab));
  if (!slab) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating suballocator metadata");
  }
  void* ptr = NULL;
  // Injected allocation failures (HIPLINE_FAULTS) count suballocations, not
  // the slabs behind them (hl_memory_pool_alloc).
  hl_faults_exempt_begin();
  hl_status_t st = sa->backend->vtable->malloc_async(
      sa->backend, (size_t)slab_size, stream, &ptr);
  hl_faults_exempt_end();
  if (st) {
    free(slab);
    return hl_status_annotate(st, "allocating a %llu-byte slab",
                              (unsigned long long)slab_size);
  }
  slab->base = ptr;
  slab->size = slab_size;
  *out_slab = slab;
  return NULL;
}

// Puts |slab| (one block, |b|, which it takes over) into the pool. A new
// slab's free block carries the alloca's timepoint (the driver made it valid
// for the alloca's stream); a slab put back keeps its block's.
static void hl_sa_attach_locked(hl_suballocator_t* sa, hl_sa_slab_t* slab,
                                hl_suballocation_t* b) {
  slab->first = b;
  slab->prev = NULL;
  slab->next = sa->slabs;
  if (sa->slabs) sa->slabs->prev = slab;
  sa->slabs = slab;
  b->slab = slab;
  b->offset = 0;
  b->size = slab->size;
  b->prev = b->next = NULL;
  b->free = true;
  hl_sa_bin_insert(sa, b);
  ++sa->stats.slabs;
  sa->pool_bytes[slab->pool] += slab->size;
  sa->stats.slab_bytes += slab->size;
  if (sa->stats.slab_bytes > sa->stats.slab_bytes_peak) {
    sa->stats.slab_bytes_peak = sa->stats.slab_bytes;
  }
}

// Takes the new |slab| of |pool| into the pool with block record |b|;
// returns the slab's free block.
static hl_suballocation_t* hl_sa_attach_new_locked(
    hl_suballocator_t* sa, hl_sa_slab_t* slab, hl_suballocation_t* b,
    uint32_t pool, uint32_t queue_id, hl_semaphore_t* timeline,
    uint64_t value) {
  slab->pool = pool;
  if (timeline && hl_sa_register_timeline(sa, queue_id, timeline)) {
    b->free_queue = queue_id;
    b->free_value = value;
  } else if (timeline) {
    b->free_queue = queue_id;
    b->free_value = UINT64_MAX;  // Cannot be read: same queue only.
  }
  hl_sa_attach_locked(sa, slab, b);
  ++sa->stats.slab_allocs;
  return b;
}

static void hl_sa_wait_own(hl_suballocator_t* sa, hl_backend_stream_t* own) {
  hl_status_t st = sa->backend->vtable->stream_synchronize(sa->backend, own);
  if (st) {
    HL_LOG_ERROR("suballocator: waiting for a slab's free failed: %s",
                 hl_status_message(st));
    hl_status_free(st);
  }
}

static bool hl_sa_slab_empty(const hl_sa_slab_t* slab) {
  return slab->first->free && !slab->first->next;
}

// Takes whole free slabs out of the pool, while it holds more than |keep|
// bytes, to be given back by hl_sa_release (the caller lets go of the lock
// first). Returns them linked by |next|.
static hl_sa_slab_t* hl_sa_detach_empty_locked(hl_suballocator_t* sa,
                                               uint64_t keep,
                                               hl_backend_stream_t* stream,
                                               uint32_t queue_id) {
  hl_sa_slab_t* detached = NULL;
  // A cached block may be all that is left of a slab.
  hl_sa_flush_locked(sa);
  for (hl_sa_slab_t* slab = sa->slabs; slab && sa->stats.slab_bytes > keep;) {
    hl_sa_slab_t* next = slab->next;
    hl_sa_coalesce_slab(sa, slab);
    if (hl_sa_slab_empty(slab)) {
      hl_suballocation_t* b = slab->first;
      hl_sa_refresh(sa, b);
      // With stream_ordered_host_work the alloca that trims runs as stream
      // work when |stream| gets there, so all earlier work of |stream| is
      // done; at issue (without it) the slab goes back behind this queue's
      // work in stream order. A slab still awaiting another queue's free
      // stays.
      bool own_queue = stream && b->free_queue == queue_id;
      if (own_queue || b->free_queue == HL_SUBALLOC_NO_QUEUE) {
        hl_sa_bin_remove(sa, b);
        if (slab->prev) {
          slab->prev->next = slab->next;
        } else {
          sa->slabs = slab->next;
        }
        if (slab->next) slab->next->prev = slab->prev;
        --sa->stats.slabs;
        sa->pool_bytes[slab->pool] -= slab->size;
        sa->stats.slab_bytes -= slab->size;
        slab->release_on_own =
            !own_queue || sa->backend->stream_ordered_host_work;
        slab->prev = NULL;
        slab->next = detached;
        detached = slab;
      }
    }
    slab = next;
  }
  return detached;
}

// Gives the |detached| slabs back to the backend (no lock held); a slab the
// backend does not take goes back into the pool. Returns how many went.
static uint64_t hl_sa_release(hl_suballocator_t* sa, hl_sa_slab_t* detached,
                              hl_backend_stream_t* stream) {
  if (!detached) return 0;
  hl_backend_stream_t* own = NULL;
  bool own_failed = false;
  hl_sa_slab_t* released = NULL;
  hl_sa_slab_t* kept = NULL;
  while (detached) {
    hl_sa_slab_t* slab = detached;
    detached = slab->next;
    hl_backend_stream_t* on = stream;
    if (slab->release_on_own) {
      // Every use is complete: a stream of our own, idle, lets the driver
      // reuse or trim the slab at once.
      if (!own && !own_failed) {
        hl_status_t st = sa->backend->vtable->stream_create(sa->backend, &own);
        if (st) {
          hl_status_free(st);
          own = NULL;
          own_failed = true;
        }
      }
      on = own;
    }
    hl_status_t st =
        on ? sa->backend->vtable->free_async(sa->backend, slab->base, on)
           : NULL;
    if (!on || st) {
      if (st) {
        HL_LOG_ERROR("suballocator: giving back a %llu-byte slab failed: %s",
                     (unsigned long long)slab->size, hl_status_message(st));
        hl_status_free(st);
      }
      slab->next = kept;
      kept = slab;
      continue;
    }
    // A slab given back on |own| is trimmable only once its free has
    // executed (a driver keeps a block whose free is pending, and the
    // caller trims the pool next). |own| holds nothing else, so this waits
    // for that free only, and keeps |own| idle for the next slab: a free
    // from an idle stream needs no ordering (backend.h).
    if (on == own) hl_sa_wait_own(sa, own);
    slab->next = released;
    released = slab;
  }
  if (own) sa->backend->vtable->stream_destroy(sa->backend, own);
  uint64_t count = 0;
  hl_spinlock_lock(sa->lock);
  while (kept) {
    hl_sa_slab_t* slab = kept;
    kept = slab->next;
    hl_sa_attach_locked(sa, slab, slab->first);
  }
  for (hl_sa_slab_t* slab = released; slab; slab = slab->next) {
    hl_sa_block_recycle(sa, slab->first);
    ++sa->stats.slab_releases;
    ++count;
  }
  hl_spinlock_unlock(sa->lock);
  while (released) {
    hl_sa_slab_t* slab = released;
    released = slab->next;
    free(slab);
  }
  return count;
}

// Gives empty slabs back and, if any went, lets the backend's pool drop
// its cache down to what is in use (no lock held).
static void hl_sa_release_and_trim_pool(hl_suballocator_t* sa,
                                        hl_sa_slab_t* detached,
                                        hl_backend_stream_t* stream,
                                        bool everything) {
  if (!hl_sa_release(sa, detached, stream) && !everything) return;
  uint64_t keep = 0;
  if (!everything) {
    hl_backend_pool_stats_t pool_stats;
    hl_status_t st = sa->backend->vtable->pool_stats(sa->backend, &pool_stats);
    if (st) {
      hl_status_free(st);
      return;
    }
    keep = pool_stats.used_bytes;
  }
  hl_status_ignore(sa->backend->vtable->pool_trim(sa->backend, keep));
}

// API
//===----------------------------------------------------------------------===//

hl_status_t hl_suballocator_create(hl_backend_t* backend,
                                   uint64_t release_threshold, bool poison,
                                   hl_spinlock_t* lock,
                                   hl_suballocator_t** out_suballocator) {
  *out_suballocator = NULL;
  hl_suballocator_t* sa = calloc(1, sizeof(*sa));
  if (!sa) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating the suballocator");
  }
  hl_spinlock_init(&sa->own_lock);
  sa->lock = lock ? lock : &sa->own_lock;
  sa->backend = backend;
  sa->release_threshold = release_threshold;
  sa->poison = poison;
  *out_suballocator = sa;
  return NULL;
}

void hl_suballocator_destroy(hl_suballocator_t* sa) {
  if (!sa) return;
  hl_spinlock_lock(sa->lock);
  if (sa->slabs) {
    // Every queue is gone and drained: timepoints no longer matter.
    hl_backend_stream_t* stream = NULL;
    hl_status_t st = sa->backend->vtable->stream_create(sa->backend, &stream);
    if (st) {
      HL_LOG_ERROR("suballocator: cannot give slabs back: %s",
                   hl_status_message(st));
      hl_status_free(st);
    }
    for (hl_sa_slab_t* slab = sa->slabs; slab;) {
      hl_sa_slab_t* next = slab->next;
      if (stream) {
        hl_status_ignore(
            sa->backend->vtable->free_async(sa->backend, slab->base, stream));
      }
      for (hl_suballocation_t* b = slab->first; b;) {
        hl_suballocation_t* bn = b->next;
        if (!b->free) {
          HL_LOG_WARN("suballocator destroyed with %llu bytes in use",
                      (unsigned long long)b->size);
        }
        free(b);
        b = bn;
      }
      free(slab);
      slab = next;
    }
    if (stream) sa->backend->vtable->stream_destroy(sa->backend, stream);
  }
  while (sa->spare) {
    hl_suballocation_t* b = sa->spare;
    sa->spare = b->next;
    free(b);
  }
  hl_spinlock_unlock(sa->lock);
  for (uint32_t i = 0; i < sa->queue_capacity; ++i) {
    hl_semaphore_release(sa->queues[i].timeline);
  }
  free(sa->queues);
  free(sa);
}

// Serves a |rounded|-byte request of queue |queue_id| from free space, if
// any is usable, splitting with |spare| (consumed only then). |lock| held.
static bool hl_sa_take_free_locked(hl_suballocator_t* sa, uint32_t pool,
                                   uint64_t rounded, uint64_t requested,
                                   uint32_t queue_id, hl_suballocation_t* spare,
                                   void** out_ptr,
                                   hl_suballocation_t** out_allocation) {
  hl_suballocation_t* b = hl_sa_find(sa, pool, rounded, queue_id);
  // Memory already held beats asking the driver: a small request may take
  // a free block of a large slab (PyTorch never does; its reserved memory
  // then holds idle large blocks while small slabs grow).
  if (!b && pool == 0) b = hl_sa_find(sa, 1, rounded, queue_id);
  if (!b) {
    // Blocks freed by other queues may have been reached since: merge them
    // and look again before asking the driver.
    bool merged = false;
    for (hl_sa_slab_t* s = sa->slabs; s; s = s->next) {
      if (s->pool == pool) merged |= hl_sa_coalesce_slab(sa, s);
    }
    if (merged) b = hl_sa_find(sa, pool, rounded, queue_id);
    if (merged && !b && pool == 0) b = hl_sa_find(sa, 1, rounded, queue_id);
  }
  if (!b) return false;
  ++sa->stats.block_reuses;
  if (b->freed_by != HL_SUBALLOC_NO_QUEUE && b->freed_by != queue_id) {
    ++sa->stats.cross_queue_reuses;
  }
  hl_sa_take(sa, b, rounded, spare);
  b->requested = requested;
  *out_ptr = b->slab->base + b->offset;
  *out_allocation = b;
  return true;
}

bool hl_suballocator_try_alloc_locked(hl_suballocator_t* sa, uint64_t size,
                                      uint32_t queue_id, void** out_ptr,
                                      hl_suballocation_t** out_allocation) {
  *out_ptr = NULL;
  *out_allocation = NULL;
  if (size == 0 || size > HL_SA_MAX_SIZE) return false;
  uint64_t rounded = (size + HL_SA_ALIGNMENT - 1) & ~(HL_SA_ALIGNMENT - 1);
  if (hl_sa_take_cached_locked(sa, queue_id, rounded, size, out_ptr,
                               out_allocation)) {
    return true;
  }
  uint32_t pool = rounded <= HL_SA_SMALL_MAX ? 0 : 1;
  hl_suballocation_t* spare = hl_sa_block_new(sa);
  bool taken =
      spare && hl_sa_take_free_locked(sa, pool, rounded, size, queue_id, spare,
                                      out_ptr, out_allocation);
  if (spare && !taken) hl_sa_block_recycle(sa, spare);
  return taken;
}

hl_status_t hl_suballocator_alloc(hl_suballocator_t* sa, uint64_t size,
                                  hl_backend_stream_t* stream,
                                  uint32_t queue_id, hl_semaphore_t* timeline,
                                  uint64_t value, void** out_ptr,
                                  hl_suballocation_t** out_allocation) {
  return hl_suballocator_alloc_covered(sa, size, stream, queue_id, timeline,
                                       value, NULL, out_ptr, out_allocation);
}

hl_status_t hl_suballocator_alloc_covered(
    hl_suballocator_t* sa, uint64_t size, hl_backend_stream_t* stream,
    uint32_t queue_id, hl_semaphore_t* timeline, uint64_t value,
    const hl_suballoc_cover_t* cover, void** out_ptr,
    hl_suballocation_t** out_allocation) {
  *out_ptr = NULL;
  *out_allocation = NULL;
  if (size == 0 || size > HL_SA_MAX_SIZE) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "suballocation of %llu bytes: size must be in "
                          "[1, 2^48]",
                          (unsigned long long)size);
  }
  uint64_t rounded = (size + HL_SA_ALIGNMENT - 1) & ~(HL_SA_ALIGNMENT - 1);
  uint32_t pool = rounded <= HL_SA_SMALL_MAX ? 0 : 1;
  hl_spinlock_lock(sa->lock);
  if (hl_sa_take_cached_locked(sa, queue_id, rounded, size, out_ptr,
                               out_allocation)) {
    hl_spinlock_unlock(sa->lock);
    return NULL;
  }
  hl_suballocation_t* spare = hl_sa_block_new(sa);
  if (!spare) {
    hl_spinlock_unlock(sa->lock);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating suballocator metadata");
  }
  sa->cover = cover;  // For this lookup only.
  bool taken = hl_sa_take_free_locked(sa, pool, rounded, size, queue_id, spare,
                                      out_ptr, out_allocation);
  sa->cover = NULL;
  if (taken) {
    hl_spinlock_unlock(sa->lock);
    return NULL;
  }
  // Growing calls the backend, without the lock (see hl_suballocator_t).
  hl_suballocation_t* first = hl_sa_block_new(sa);
  if (!first) {
    hl_sa_block_recycle(sa, spare);
    hl_spinlock_unlock(sa->lock);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating suballocator metadata");
  }
  // Before asking the driver for more, give back the empty slabs (none of
  // them could serve this request) and let the driver drop its cache of
  // them: reserved memory then follows live memory, where PyTorch keeps
  // idle segments until out of memory or empty_cache.
  hl_sa_slab_t* empty = hl_sa_detach_empty_locked(sa, 0, stream, queue_id);
  uint64_t slab_size = hl_sa_slab_size(sa, pool, rounded);
  hl_spinlock_unlock(sa->lock);
  hl_sa_release_and_trim_pool(sa, empty, stream, false);
  hl_sa_slab_t* slab = NULL;
  hl_status_t st = hl_sa_slab_new(sa, slab_size, stream, &slab);
  bool retried = st && hl_status_code(st) == HL_STATUS_RESOURCE_EXHAUSTED;
  if (retried) {
    // Out of memory: give back whole free slabs, then retry once with a
    // slab of exactly the request's size (the last bytes of the device).
    hl_status_free(st);
    hl_spinlock_lock(sa->lock);
    empty = hl_sa_detach_empty_locked(sa, 0, stream, queue_id);
    hl_spinlock_unlock(sa->lock);
    hl_sa_release_and_trim_pool(sa, empty, stream, true);
    st = hl_sa_slab_new(sa, rounded, stream, &slab);
  }
  hl_spinlock_lock(sa->lock);
  if (st) {
    if (retried) {
      st = hl_status_annotate(
          st,
          "suballocation of %llu bytes on queue %u after trim and retry "
          "(slabs %llu holding %llu bytes, %llu in use)",
          (unsigned long long)size, queue_id,
          (unsigned long long)sa->stats.slabs,
          (unsigned long long)sa->stats.slab_bytes,
          (unsigned long long)sa->stats.used_bytes);
    }
    hl_sa_block_recycle(sa, first);
    hl_sa_block_recycle(sa, spare);
    hl_spinlock_unlock(sa->lock);
    return st;
  }
  uint64_t peak = sa->stats.slab_bytes_peak;
  hl_suballocation_t* b =
      hl_sa_attach_new_locked(sa, slab, first, pool, queue_id, timeline, value);
  hl_sa_take(sa, b, rounded, spare);
  b->requested = size;
  // A new peak is reached on this slow path only: account for it.
  if (sa->stats.slab_bytes_peak > peak) {
    hl_sa_flush_locked(sa);  // Caches filled again while growing, unlocked.
    hl_sa_account_locked(sa, &sa->stats.peak_account);
  }
  *out_ptr = b->slab->base + b->offset;
  *out_allocation = b;
  hl_spinlock_unlock(sa->lock);
  return NULL;
}

void hl_suballocator_poison(hl_suballocator_t* sa, hl_suballocation_t* b) {
  if (sa->poison) memset(b->slab->base + b->offset, 0xDB, (size_t)b->size);
}

void hl_suballocator_free(hl_suballocator_t* sa, hl_suballocation_t* b,
                          hl_backend_stream_t* stream, uint32_t queue_id,
                          hl_semaphore_t* timeline, uint64_t value) {
  // The block is still the freer's: poisoned before the lock.
  hl_suballocator_poison(sa, b);
  hl_spinlock_lock(sa->lock);
  hl_suballocator_free_locked(sa, b, stream, queue_id, timeline, value);
  hl_spinlock_unlock(sa->lock);
}

void hl_suballocator_free_locked(hl_suballocator_t* sa, hl_suballocation_t* b,
                                 hl_backend_stream_t* stream, uint32_t queue_id,
                                 hl_semaphore_t* timeline, uint64_t value) {
  hl_suballocator_free_signalled_locked(sa, b, stream, queue_id, timeline,
                                        value, 0, 0);
}

void hl_suballocator_free_signalled_locked(
    hl_suballocator_t* sa, hl_suballocation_t* b, hl_backend_stream_t* stream,
    uint32_t queue_id, hl_semaphore_t* timeline, uint64_t value,
    uint64_t signal_id, uint64_t signal_value) {
  (void)stream;
  sa->stats.used_bytes -= b->size;
  b->free = true;
  b->freed_by = queue_id;
  b->free_queue = HL_SUBALLOC_NO_QUEUE;
  b->free_value = 0;
  b->free_signal_id = timeline ? signal_id : 0;
  b->free_signal_value = signal_value;
  if (timeline) {
    b->free_queue = queue_id;
    if (HL_LIKELY(hl_sa_register_timeline(sa, queue_id, timeline))) {
      b->free_value = value;
      if (b->size <= HL_SA_SMALL_MAX) {
        hl_sa_cache_put(sa, queue_id, b);
        return;
      }
    } else {
      b->free_value = UINT64_MAX;  // Cannot be read: same queue only.
    }
  }
  hl_sa_coalesce_and_bin(sa, b);
}

uint64_t hl_suballocator_trim(hl_suballocator_t* sa, uint64_t min_bytes_to_keep,
                              hl_backend_stream_t* stream, uint32_t queue_id) {
  hl_spinlock_lock(sa->lock);
  hl_sa_slab_t* empty =
      hl_sa_detach_empty_locked(sa, min_bytes_to_keep, stream, queue_id);
  hl_spinlock_unlock(sa->lock);
  return hl_sa_release(sa, empty, stream);
}

uint64_t hl_suballocator_slab_bytes_locked(hl_suballocator_t* sa) {
  return sa->stats.slab_bytes;
}

void hl_suballocator_reset_peaks(hl_suballocator_t* sa) {
  hl_spinlock_lock(sa->lock);
  sa->stats.slab_bytes_peak = sa->stats.slab_bytes;
  sa->stats.used_bytes_peak = sa->stats.used_bytes;
  hl_spinlock_unlock(sa->lock);
}

uint64_t hl_suballocator_release_threshold(hl_suballocator_t* sa) {
  return sa->release_threshold;
}

void hl_suballocator_stats(hl_suballocator_t* sa,
                           hl_suballocator_stats_t* out_stats) {
  hl_spinlock_lock(sa->lock);
  // Reports describe the bins as they are without the caches.
  hl_sa_flush_locked(sa);
  hl_sa_stats_locked(sa, out_stats);
  hl_spinlock_unlock(sa->lock);
}

void hl_suballocator_account(hl_suballocator_t* sa,
                             hl_suballocator_account_t* out_account) {
  hl_spinlock_lock(sa->lock);
  hl_sa_flush_locked(sa);
  hl_sa_account_locked(sa, out_account);
  hl_spinlock_unlock(sa->lock);
}
