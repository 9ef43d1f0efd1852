// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The host backend's stream-ordered pool.
//
// Semantics follow HIP's memory pools:
// - a block freed on stream S may be reused by S at once (FIFO order makes
//   the free precede the new use);
// - another stream T may reuse it once S has completed the free
//   (ALLOW_OPPORTUNISTIC), once T has waited on an event of S recorded after
//   the free (FOLLOW_EVENT_DEPENDENCIES), or by having the pool insert that
//   wait into T (ALLOW_INTERNAL_DEPENDENCIES);
// - reserved memory above the release threshold goes back to the system at
//   synchronization points, and trim releases it on request.
// Block sizes are rounded to classes with four steps per power of two, so
// waste stays under 25%.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend/host/host_item.h"
#include "runtime/base/faults.h"
#include "runtime/base/log.h"

#define HL_HOST_POOL_ALIGNMENT 256u
#define HL_HOST_POOL_BINS 256u
#define HL_HOST_POOL_SCAN 32

struct hl_host_block_t {
  hl_host_block_t* next;  // Bin list (free) or hash chain (live).
  void* ptr;
  size_t capacity;
  uint32_t bin;
  hl_backend_stream_t* free_stream;  // Not retained; cleared on destroy.
  uint64_t free_seq;
};

static unsigned hl_log2_floor(uint64_t v) {
  return 63u - (unsigned)__builtin_clzll(v);
}

// Rounds |size| up to its class capacity and returns the class index.
static uint32_t hl_host_size_class(size_t size, size_t* out_capacity) {
  if (size <= HL_HOST_POOL_ALIGNMENT) {
    *out_capacity = HL_HOST_POOL_ALIGNMENT;
    return 0;
  }
  unsigned e = hl_log2_floor((uint64_t)size - 1);  // size - 1 < 2^(e+1).
  uint64_t step = 1ull << (e - 2);
  uint64_t capacity = (((uint64_t)size + step - 1) / step) * step;
  unsigned ce = hl_log2_floor(capacity);
  uint32_t index = ce * 4u + (uint32_t)(capacity >> (ce - 2)) - 4u;
  *out_capacity = (size_t)capacity;
  return index - 32u;  // Class 0 is 256 bytes (2^8, step index 4).
}

static size_t hl_live_bucket(const hl_host_pool_t* pool, const void* ptr) {
  uint64_t key = (uint64_t)(uintptr_t)ptr >> 8;
  key *= 0x9e3779b97f4a7c15ull;
  return (size_t)(key >> 32) & (pool->live_capacity - 1);
}

static bool hl_live_grow(hl_host_pool_t* pool) {
  size_t capacity = pool->live_capacity ? pool->live_capacity * 2 : 256;
  hl_host_block_t** table = calloc(capacity, sizeof(*table));
  if (!table) return false;
  hl_host_block_t** old = pool->live;
  size_t old_capacity = pool->live_capacity;
  pool->live = table;
  pool->live_capacity = capacity;
  for (size_t i = 0; i < old_capacity; ++i) {
    hl_host_block_t* b = old[i];
    while (b) {
      hl_host_block_t* next = b->next;
      size_t k = hl_live_bucket(pool, b->ptr);
      b->next = table[k];
      table[k] = b;
      b = next;
    }
  }
  free(old);
  return true;
}

static hl_host_block_t* hl_live_remove(hl_host_pool_t* pool, const void* ptr) {
  if (!pool->live_capacity) return NULL;
  hl_host_block_t** link = &pool->live[hl_live_bucket(pool, ptr)];
  for (; *link; link = &(*link)->next) {
    if ((*link)->ptr == ptr) {
      hl_host_block_t* b = *link;
      *link = b->next;
      b->next = NULL;
      --pool->live_count;
      return b;
    }
  }
  return NULL;
}

static bool hl_live_insert(hl_host_pool_t* pool, hl_host_block_t* b) {
  if (pool->live_count + 1 > pool->live_capacity && !hl_live_grow(pool)) {
    return false;
  }
  size_t k = hl_live_bucket(pool, b->ptr);
  b->next = pool->live[k];
  pool->live[k] = b;
  ++pool->live_count;
  return true;
}

hl_status_t hl_host_pool_initialize(hl_host_backend_t* device) {
  hl_host_pool_t* pool = &device->pool;
  memset(pool, 0, sizeof(*pool));
  hl_spinlock_init(&pool->lock);
  pool->bins = calloc(HL_HOST_POOL_BINS, sizeof(*pool->bins));
  if (!pool->bins || !hl_live_grow(pool)) {
    free(pool->bins);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating the pool's tables");
  }
  pool->bin_count = HL_HOST_POOL_BINS;
  // hipline's defaults: keep everything reserved (HIP's threshold default is
  // 0, which returns memory at every sync and defeats the pool), reuse across
  // streams only where it adds no hidden dependency.
  pool->attrs.release_threshold = UINT64_MAX;
  pool->attrs.reuse_flags = HL_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES |
                            HL_POOL_REUSE_ALLOW_OPPORTUNISTIC;
  pool->attrs.limit_bytes = device->memory_bytes;
  return NULL;
}

static void hl_host_block_release(hl_host_pool_t* pool, hl_host_block_t* b) {
  pool->stats.reserved_bytes -= b->capacity;
  --pool->block_count;
  free(b->ptr);
  free(b);
}

void hl_host_pool_deinitialize(hl_host_backend_t* device) {
  hl_host_pool_t* pool = &device->pool;
  for (uint32_t i = 0; i < pool->bin_count; ++i) {
    while (pool->bins[i]) {
      hl_host_block_t* b = pool->bins[i];
      pool->bins[i] = b->next;
      hl_host_block_release(pool, b);
    }
  }
  size_t leaked = 0;
  for (size_t i = 0; i < pool->live_capacity; ++i) {
    while (pool->live[i]) {
      hl_host_block_t* b = pool->live[i];
      pool->live[i] = b->next;
      ++leaked;
      hl_host_block_release(pool, b);
    }
  }
  if (leaked) {
    HL_LOG_WARN("host device %d destroyed with %zu allocation(s) never freed",
                device->ordinal, leaked);
  }
  free(pool->bins);
  free(pool->live);
}

// Whether the free of |b| has completed on its stream.
static bool hl_host_block_free_done(const hl_host_block_t* b) {
  return !b->free_stream ||
         hl_host_stream_completed(b->free_stream) >= b->free_seq;
}

// Whether |stream| may take |b| now; may ask for an internal dependency.
static bool hl_host_block_usable(const hl_host_pool_t* pool,
                                 const hl_host_block_t* b,
                                 hl_backend_stream_t* stream,
                                 bool* out_needs_wait) {
  *out_needs_wait = false;
  if (!b->free_stream) return true;
  if (b->free_stream == stream) {
    // Enqueued after the free, a new use runs after it. Called from the
    // stream's own work, the free must already have run: it may have been
    // queued behind the item running now.
    return !hl_host_stream_is_current(stream) || hl_host_block_free_done(b);
  }
  uint32_t flags = pool->attrs.reuse_flags;
  // Dependencies are recorded when a wait is enqueued; work already running
  // on |stream| may precede that wait, so they only count at enqueue time.
  if ((flags & HL_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES) &&
      !hl_host_stream_is_current(stream) &&
      b->free_stream->id < stream->deps_capacity &&
      stream->deps[b->free_stream->id] >= b->free_seq) {
    return true;
  }
  if ((flags & HL_POOL_REUSE_ALLOW_OPPORTUNISTIC) &&
      hl_host_block_free_done(b)) {
    return true;
  }
  if (flags & HL_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES) {
    // Runtime work running inline on its caller must not block on another
    // stream (the caller may be that stream's worker, or a thread it waits
    // for): it takes a fresh block instead.
    if (hl_host_stream_running_inline(stream)) return false;
    *out_needs_wait = true;
    return true;
  }
  return false;
}

// Releases cached blocks whose free completed until reserved <= |target|.
// Returns the number released.
static uint64_t hl_host_pool_release_locked(hl_host_pool_t* pool,
                                            uint64_t target) {
  uint64_t released = 0;
  for (uint32_t i = pool->bin_count;
       i-- > 0 && pool->stats.reserved_bytes > target;) {
    hl_host_block_t** link = &pool->bins[i];
    while (*link && pool->stats.reserved_bytes > target) {
      hl_host_block_t* b = *link;
      if (!hl_host_block_free_done(b)) {
        link = &b->next;
        continue;
      }
      *link = b->next;
      hl_host_block_release(pool, b);
      ++released;
    }
  }
  return released;
}

hl_status_t hl_host_pool_malloc(hl_host_backend_t* device, size_t size,
                                hl_backend_stream_t* stream, void** out_ptr) {
  if (!out_ptr || !stream) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "malloc_async: NULL stream or out_ptr");
  }
  *out_ptr = NULL;
  if (size == 0) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "malloc_async of 0 bytes");
  }
  hl_host_pool_t* pool = &device->pool;
  if (size > ((size_t)1 << 62)) {
    hl_spinlock_lock(&pool->lock);
    ++pool->stats.fail_count;
    hl_spinlock_unlock(&pool->lock);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "malloc_async of %zu bytes exceeds any pool", size);
  }
  if (hl_faults_should_fail_alloc()) {
    hl_spinlock_lock(&pool->lock);
    ++pool->stats.fail_count;
    uint64_t used = pool->stats.used_bytes,
             reserved = pool->stats.reserved_bytes;
    hl_spinlock_unlock(&pool->lock);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "malloc_async of %zu bytes failed (injected by "
                          "HIPLINE_FAULTS alloc_fail_every); pool used %llu, "
                          "reserved %llu bytes",
                          size, (unsigned long long)used,
                          (unsigned long long)reserved);
  }
  size_t capacity = 0;
  uint32_t bin = hl_host_size_class(size, &capacity);

  hl_spinlock_lock(&pool->lock);
  hl_host_block_t* found = NULL;
  bool needs_wait = false;
  hl_host_block_t** link = &pool->bins[bin];
  for (int scanned = 0; *link && scanned < HL_HOST_POOL_SCAN; ++scanned) {
    if (hl_host_block_usable(pool, *link, stream, &needs_wait)) {
      found = *link;
      *link = found->next;
      break;
    }
    link = &(*link)->next;
  }
  hl_backend_stream_t* wait_stream = NULL;
  uint64_t wait_seq = 0;
  if (found) {
    ++pool->stats.reuse_count;
    if (needs_wait) {
      wait_stream = found->free_stream;
      wait_seq = found->free_seq;
      hl_host_stream_retain(wait_stream);
    }
  } else {
    if (pool->stats.reserved_bytes + capacity > pool->attrs.limit_bytes) {
      // Make room from cached blocks whose frees completed.
      uint64_t target = pool->attrs.limit_bytes > capacity
                            ? pool->attrs.limit_bytes - capacity
                            : 0;
      pool->stats.trim_count += hl_host_pool_release_locked(pool, target);
    }
    if (pool->stats.reserved_bytes + capacity > pool->attrs.limit_bytes) {
      ++pool->stats.fail_count;
      hl_backend_pool_stats_t s = pool->stats;
      uint64_t limit = pool->attrs.limit_bytes;
      hl_spinlock_unlock(&pool->lock);
      return HL_MAKE_STATUS(
          HL_STATUS_RESOURCE_EXHAUSTED,
          "malloc_async of %zu bytes (class %zu) does not fit: pool used %llu, "
          "reserved %llu, limit %llu bytes",
          size, capacity, (unsigned long long)s.used_bytes,
          (unsigned long long)s.reserved_bytes, (unsigned long long)limit);
    }
    found = calloc(1, sizeof(*found));
    // C11 wants the size to be a multiple of the alignment.
    size_t bytes = (capacity + HL_HOST_POOL_ALIGNMENT - 1) &
                   ~(size_t)(HL_HOST_POOL_ALIGNMENT - 1);
    void* ptr = found ? aligned_alloc(HL_HOST_POOL_ALIGNMENT, bytes) : NULL;
    if (!ptr) {
      free(found);
      ++pool->stats.fail_count;
      hl_spinlock_unlock(&pool->lock);
      return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                            "malloc_async of %zu bytes: the system is out of "
                            "memory",
                            size);
    }
    found->ptr = ptr;
    found->capacity = capacity;
    found->bin = bin;
    ++pool->block_count;
    pool->stats.reserved_bytes += capacity;
    if (pool->stats.reserved_bytes > pool->stats.reserved_high_bytes) {
      pool->stats.reserved_high_bytes = pool->stats.reserved_bytes;
    }
  }
  found->free_stream = NULL;
  found->free_seq = 0;
  if (!hl_live_insert(pool, found)) {
    // Put it back as a free block rather than lose it.
    found->next = pool->bins[bin];
    pool->bins[bin] = found;
    ++pool->stats.fail_count;
    hl_spinlock_unlock(&pool->lock);
    if (wait_stream) hl_host_stream_release(wait_stream);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "malloc_async: growing the live-block table failed");
  }
  pool->stats.used_bytes += found->capacity;
  if (pool->stats.used_bytes > pool->stats.used_high_bytes) {
    pool->stats.used_high_bytes = pool->stats.used_bytes;
  }
  ++pool->stats.alloc_count;
  *out_ptr = found->ptr;
  hl_spinlock_unlock(&pool->lock);

  if (wait_stream && hl_host_stream_is_current(stream)) {
    // Allocating from the stream's own work: the dependency is met by
    // waiting here, which is what the stream would do at this point.
    hl_host_stream_wait_seq(wait_stream, wait_seq);
    hl_host_stream_release(wait_stream);
    wait_stream = NULL;
  }
  if (wait_stream) {
    hl_status_t st = hl_host_stream_enqueue_wait(stream, wait_stream, wait_seq);
    hl_host_stream_release(wait_stream);
    if (st) {
      hl_status_ignore(hl_host_pool_free(device, *out_ptr, stream));
      *out_ptr = NULL;
      return st;
    }
  }
  return NULL;
}

hl_status_t hl_host_pool_free(hl_host_backend_t* device, void* ptr,
                              hl_backend_stream_t* stream) {
  if (!ptr || !stream) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "free_async: NULL pointer or stream");
  }
  hl_host_pool_t* pool = &device->pool;
  hl_spinlock_lock(&pool->lock);
  hl_host_block_t* b = hl_live_remove(pool, ptr);
  if (!b) {
    hl_spinlock_unlock(&pool->lock);
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "free_async: %p was not allocated by host device "
                          "%d's pool (foreign pointer or double free)",
                          ptr, device->ordinal);
  }
  uint64_t seq = 0;
  if (hl_host_stream_is_current(stream)) {
    // Called from the stream's own work (the memory layer frees in stream
    // order): the free happens now, and anything queued behind the running
    // item must not see the old bytes.
    if (pool->poison) memset(b->ptr, 0xDB, b->capacity);
    seq = hl_host_stream_completed(stream) + 1;
  } else if (pool->poison) {
    hl_host_item_t* item = NULL;
    hl_status_t st = hl_host_item_alloc(device, HL_HOST_ITEM_POISON, &item);
    if (!st) {
      item->poison.ptr = b->ptr;
      item->poison.size = b->capacity;
      hl_host_stream_push_item(stream, item, &seq);
    }
    hl_status_ignore(st);  // Poisoning is best effort; the free is not.
  }
  if (!seq) seq = hl_host_stream_submitted(stream);
  b->free_stream = stream;
  b->free_seq = seq;
  b->next = pool->bins[b->bin];
  pool->bins[b->bin] = b;
  pool->stats.used_bytes -= b->capacity;
  ++pool->stats.free_count;
  hl_spinlock_unlock(&pool->lock);
  return NULL;
}

hl_status_t hl_host_pool_trim(hl_host_backend_t* device,
                              uint64_t min_bytes_to_keep) {
  hl_host_pool_t* pool = &device->pool;
  hl_spinlock_lock(&pool->lock);
  pool->stats.trim_count +=
      hl_host_pool_release_locked(pool, min_bytes_to_keep);
  hl_spinlock_unlock(&pool->lock);
  return NULL;
}

void hl_host_pool_release_to_threshold(hl_host_backend_t* device) {
  hl_host_pool_t* pool = &device->pool;
  hl_spinlock_lock(&pool->lock);
  if (pool->stats.reserved_bytes > pool->attrs.release_threshold) {
    pool->stats.trim_count +=
        hl_host_pool_release_locked(pool, pool->attrs.release_threshold);
  }
  hl_spinlock_unlock(&pool->lock);
}

void hl_host_pool_note_dependency(hl_host_backend_t* device,
                                  hl_backend_stream_t* stream,
                                  hl_backend_stream_t* other, uint64_t seq) {
  hl_host_pool_t* pool = &device->pool;
  hl_spinlock_lock(&pool->lock);
  if (other->id >= stream->deps_capacity) {
    uint32_t capacity = stream->deps_capacity ? stream->deps_capacity : 8;
    while (capacity <= other->id) capacity *= 2;
    uint64_t* deps = realloc(stream->deps, capacity * sizeof(*deps));
    if (!deps) {
      // Without the table the pool just won't reuse through this edge.
      hl_spinlock_unlock(&pool->lock);
      return;
    }
    memset(deps + stream->deps_capacity, 0,
           (capacity - stream->deps_capacity) * sizeof(*deps));
    stream->deps = deps;
    stream->deps_capacity = capacity;
  }
  if (stream->deps[other->id] < seq) stream->deps[other->id] = seq;
  hl_spinlock_unlock(&pool->lock);
}

void hl_host_pool_forget_stream(hl_host_backend_t* device,
                                hl_backend_stream_t* stream) {
  hl_host_pool_t* pool = &device->pool;
  hl_spinlock_lock(&pool->lock);
  for (uint32_t i = 0; i < pool->bin_count; ++i) {
    for (hl_host_block_t* b = pool->bins[i]; b; b = b->next) {
      if (b->free_stream == stream) b->free_stream = NULL;
    }
  }
  hl_spinlock_unlock(&pool->lock);
}

void hl_host_backend_set_poison(hl_backend_t* backend, bool poison) {
  hl_host_backend_t* device = (hl_host_backend_t*)backend;
  hl_spinlock_lock(&device->pool.lock);
  device->pool.poison = poison;
  hl_spinlock_unlock(&device->pool.lock);
}
