// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The suballocator's reports: its statistics, the account of its slab bytes
// (docs/memory.md) and the check of its invariants. suballocator.c takes
// the lock (and bins the caches) around the first two.

#include <string.h>

#include "runtime/memory/suballocator_internal.h"

//===----------------------------------------------------------------------===//
// Account
//===----------------------------------------------------------------------===//

// Adds |slab|'s bytes to |out| (see hl_suballocator_account_t).
static void hl_sa_account_slab(const hl_sa_slab_t* slab,
                               hl_suballocator_account_t* out) {
  bool live = false;
  for (const hl_suballocation_t* b = slab->first; b; b = b->next) {
    if (b->free) continue;
    live = true;
    out->requested_bytes += b->requested;
    out->rounding_bytes += b->size - b->requested;
  }
  if (!live) {
    out->free_slab_bytes += slab->size;
    return;
  }
  for (const hl_suballocation_t* b = slab->first; b; b = b->next) {
    if (!b->free) continue;
    if (b->next) {
      out->fragment_bytes += b->size;
    } else {
      out->tail_bytes += b->size;
    }
  }
}

void hl_sa_account_locked(const hl_suballocator_t* sa,
                          hl_suballocator_account_t* out) {
  memset(out, 0, sizeof(*out));
  out->slab_bytes = sa->stats.slab_bytes;
  for (const hl_sa_slab_t* s = sa->slabs; s; s = s->next) {
    hl_sa_account_slab(s, out);
  }
}

//===----------------------------------------------------------------------===//
void hl_sa_stats_locked(hl_suballocator_t* sa,
                        hl_suballocator_stats_t* out_stats) {
  *out_stats = sa->stats;
  out_stats->free_bytes = sa->stats.slab_bytes - sa->stats.used_bytes;
  out_stats->largest_free_block = 0;
  out_stats->pending_free_blocks = 0;
  for (hl_sa_slab_t* s = sa->slabs; s; s = s->next) {
    for (hl_suballocation_t* b = s->first; b; b = b->next) {
      if (!b->free) continue;
      if (b->size > out_stats->largest_free_block) {
        out_stats->largest_free_block = b->size;
      }
      hl_sa_refresh(sa, b);
      if (b->free_queue != HL_SUBALLOC_NO_QUEUE) {
        ++out_stats->pending_free_blocks;
      }
    }
  }
}

uint32_t hl_suballocator_cached_blocks(hl_suballocator_t* sa) {
  hl_spinlock_lock(sa->lock);
  uint32_t count = sa->cached_blocks;
  hl_spinlock_unlock(sa->lock);
  return count;
}

hl_status_t hl_suballocator_verify(hl_suballocator_t* sa) {
  hl_status_t st = NULL;
  hl_spinlock_lock(sa->lock);
  uint64_t used = 0, slab_bytes = 0, slabs = 0, free_blocks = 0, cached = 0;
  for (hl_sa_slab_t* s = sa->slabs; s && !st; s = s->next) {
    ++slabs;
    slab_bytes += s->size;
    uint64_t offset = 0;
    hl_suballocation_t* prev = NULL;
    for (hl_suballocation_t* b = s->first; b && !st; b = b->next) {
      if (b->slab != s || b->prev != prev || b->offset != offset ||
          b->size == 0 || b->size % HL_SA_ALIGNMENT) {
        st = HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                            "suballocator: block at offset %llu of a "
                            "%llu-byte slab is out of order",
                            (unsigned long long)b->offset,
                            (unsigned long long)s->size);
        break;
      }
      if (b->free && b->cached) {
        ++cached;
        if (b->free_queue >= sa->queue_capacity ||
            sa->queues[b->free_queue].cached != b) {
          st = HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                              "suballocator: cached block of %llu bytes is "
                              "not its queue's (%u)",
                              (unsigned long long)b->size, b->free_queue);
        }
      } else if (b->free) {
        ++free_blocks;
        if (b->bin != hl_sa_bin(b->size)) {
          st = HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                              "suballocator: free block of %llu bytes in "
                              "bin %u",
                              (unsigned long long)b->size, b->bin);
        }
      } else {
        used += b->size;
      }
      offset += b->size;
      prev = b;
    }
    if (!st && offset != s->size) {
      st = HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                          "suballocator: blocks cover %llu of a %llu-byte "
                          "slab",
                          (unsigned long long)offset,
                          (unsigned long long)s->size);
    }
  }
  uint64_t binned = 0;
  for (uint32_t p = 0; p < 2 && !st; ++p) {
    for (uint32_t bin = 0; bin < HL_SA_BINS; ++bin) {
      bool bit = (sa->pools[p].bitmap[bin / 64] >> (bin % 64)) & 1;
      if (bit != (sa->pools[p].bins[bin] != NULL)) {
        st = HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                            "suballocator: bitmap disagrees with bin %u", bin);
        break;
      }
      for (hl_suballocation_t* b = sa->pools[p].bins[bin]; b;
           b = b->free_next) {
        ++binned;
      }
    }
  }
  if (!st && (used != sa->stats.used_bytes ||
              slab_bytes != sa->stats.slab_bytes || slabs != sa->stats.slabs ||
              binned != free_blocks || cached != sa->cached_blocks)) {
    st = HL_MAKE_STATUS(
        HL_STATUS_INTERNAL,
        "suballocator: counts disagree (used %llu vs %llu, slab bytes %llu "
        "vs %llu, slabs %llu vs %llu, binned %llu vs free %llu, cached %llu "
        "vs %u)",
        (unsigned long long)used, (unsigned long long)sa->stats.used_bytes,
        (unsigned long long)slab_bytes,
        (unsigned long long)sa->stats.slab_bytes, (unsigned long long)slabs,
        (unsigned long long)sa->stats.slabs, (unsigned long long)binned,
        (unsigned long long)free_blocks, (unsigned long long)cached,
        sa->cached_blocks);
  }
  hl_spinlock_unlock(sa->lock);
  return st;
}
