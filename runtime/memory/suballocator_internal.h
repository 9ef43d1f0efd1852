// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The suballocator's records (blocks, slabs, bins) and the helpers its
// files share: suballocator.c (fit, caches, growth, giving back) uses
// suballocator_account.c (statistics, the account, the invariants), never
// the other way round.
#ifndef HIPLINE_RUNTIME_MEMORY_SUBALLOCATOR_INTERNAL_H_
#define HIPLINE_RUNTIME_MEMORY_SUBALLOCATOR_INTERNAL_H_

#include <stdbool.h>
#include <stdint.h>

#include "runtime/base/spin.h"
#include "runtime/memory/suballocator.h"

#define HL_SA_ALIGNMENT ((uint64_t)256)
#define HL_SA_SMALL_MAX ((uint64_t)1 << 20)
#define HL_SA_SMALL_SLAB ((uint64_t)2 << 20)
#define HL_SA_SMALL_MIN_SLAB ((uint64_t)8 << 10)
#define HL_SA_LARGE_MAX ((uint64_t)20 << 20)
#define HL_SA_LARGE_SLAB ((uint64_t)40 << 20)
#define HL_SA_LARGE_MIN_SLAB ((uint64_t)2 << 20)
#define HL_SA_MAX_SIZE ((uint64_t)1 << 48)
#define HL_SA_BINS 640u
#define HL_SA_BITMAP_WORDS (HL_SA_BINS / 64u)
// Blocks examined per request before growing instead.
#define HL_SA_SCAN_LIMIT 512

typedef struct hl_sa_slab_t hl_sa_slab_t;

struct hl_suballocation_t {
  hl_suballocation_t* prev;  // Address-ordered neighbours within the slab.
  hl_suballocation_t* next;
  hl_suballocation_t* free_prev;  // Bin list (free blocks only).
  hl_suballocation_t* free_next;
  hl_sa_slab_t* slab;
  uint64_t offset;
  uint64_t size;
  union {
    uint64_t free_value;  // Free: timepoint of the free on |free_queue|.
    uint64_t requested;   // Live: bytes asked for (the account).
  };
  // A signal of that free (semaphore id, value; id 0: none): an allocation
  // ordered after it is ordered after the free (hl_suballoc_cover_t).
  uint64_t free_signal_id;
  uint64_t free_signal_value;
  uint32_t free_queue;  // HL_SUBALLOC_NO_QUEUE: reusable by every queue.
  uint32_t freed_by;    // Queue of the last free (statistics).
  uint32_t bin;
  bool free;    // Free: binned, or cached (not binned, never merged).
  bool cached;  // Its freeing queue's cache (hl_sa_queue_t.cached).
};

struct hl_sa_slab_t {
  hl_sa_slab_t* prev;
  hl_sa_slab_t* next;  // Also links slabs taken out to be given back.
  char* base;
  uint64_t size;
  uint32_t pool;  // 0: small, 1: large.
  // Taken out to be given back: on a stream of the suballocator's own
  // (every use complete), else on the releasing queue's stream.
  bool release_on_own;
  hl_suballocation_t* first;
};

// What the suballocator keeps per queue id.
typedef struct hl_sa_queue_t {
  // The queue's timeline (retained until destroy, so a block's timepoint
  // stays readable after its queue is gone).
  hl_semaphore_t* timeline;
  // The block this queue freed last, kept out of the bins: its next
  // allocation of that rounded size takes it back without a bin search, a
  // split or a merge. Stream order makes that safe, as for any block a queue
  // reuses itself. Still a free block (statistics, the account); only its
  // queue can take it, until a flush bins it (hl_sa_flush_locked).
  hl_suballocation_t* cached;
} hl_sa_queue_t;

typedef struct hl_sa_pool_t {
  hl_suballocation_t* bins[HL_SA_BINS];
  uint64_t bitmap[HL_SA_BITMAP_WORDS];
} hl_sa_pool_t;

struct hl_suballocator_t {
  // Everything below: a spin lock (base/spin.h; an alloca and a dealloca
  // each take it once, where a mtx_t cost two locked instructions). Never
  // held across a backend call (but by destroy, which nothing runs beside):
  // growing and giving slabs back call the backend (which may wait for the
  // device on ROCm) between two holds, so other queues' allocas and frees
  // go on meanwhile. Under it: block and slab lists, bins, statistics, a
  // semaphore's value and failure (leaf), and the C library's allocator.
  hl_spinlock_t* lock;  // |own_lock|, or the caller's (create).
  hl_spinlock_t own_lock;
  hl_backend_t* backend;
  uint64_t release_threshold;
  bool poison;
  hl_sa_pool_t pools[2];
  hl_sa_slab_t* slabs;
  uint64_t pool_bytes[2];  // Slab bytes per pool.
  // The queues that freed blocks, by queue id.
  hl_sa_queue_t* queues;
  uint32_t queue_capacity;
  uint32_t cached_blocks;     // Blocks in the queues' caches.
  hl_suballocation_t* spare;  // Recycled block records.
  // What the allocation being served is ordered after (for one lookup).
  const hl_suballoc_cover_t* cover;
  hl_suballocator_stats_t stats;
};

// The bin of a free block of |size| bytes.
static inline uint32_t hl_sa_bin(uint64_t size) {
  uint64_t units = size / HL_SA_ALIGNMENT;
  if (units < 16) return (uint32_t)units;
  unsigned fl = 63u - (unsigned)__builtin_clzll(units);  // >= 4.
  uint32_t sl = (uint32_t)(units >> (fl - 4)) & 15u;
  uint32_t bin = 16u + (fl - 4u) * 16u + sl;
  return bin < HL_SA_BINS ? bin : HL_SA_BINS - 1;
}

// Clears |b|'s timepoint when its queue's timeline has reached it.
static inline void hl_sa_refresh(hl_suballocator_t* sa, hl_suballocation_t* b) {
  uint32_t q = b->free_queue;
  if (q == HL_SUBALLOC_NO_QUEUE || q >= sa->queue_capacity) return;
  hl_semaphore_t* timeline = sa->queues[q].timeline;
  if (!timeline || hl_semaphore_failure(timeline)) return;
  if (hl_semaphore_value(timeline) >= b->free_value) {
    b->free_queue = HL_SUBALLOC_NO_QUEUE;
  }
}

// The statistics (suballocator_account.c), with |sa|'s lock held and its
// caches binned.
void hl_sa_stats_locked(hl_suballocator_t* sa,
                        hl_suballocator_stats_t* out_stats);
// Fills |out| with where the slab bytes are now (|sa|'s lock held).
void hl_sa_account_locked(const hl_suballocator_t* sa,
                          hl_suballocator_account_t* out);

#endif  // HIPLINE_RUNTIME_MEMORY_SUBALLOCATOR_INTERNAL_H_
