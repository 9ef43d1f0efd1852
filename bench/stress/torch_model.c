// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A model of PyTorch's CUDA caching allocator; see torch_model.h for the rules
// and where each comes from in c10/cuda/CUDACachingAllocator.cpp.

#include "bench/stress/torch_model.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define TORCH_MODEL_MAX_ID ((uint32_t)1 << 31)

// A block: a range of one segment, free or allocated. The blocks of a
// segment form a list in address order (PyTorch's Block::prev/next).
typedef struct torch_block_t {
  uint64_t addr;
  uint64_t size;
  struct torch_block_t* prev;
  struct torch_block_t* next;
  bool small;      // The pool it belongs to.
  bool allocated;  // Handed out (else it is in its pool's free set).
} torch_block_t;

// A pool's free blocks, sorted by (size, addr): PyTorch's BlockPool of one
// stream, whose comparator orders by stream, size, then address.
typedef struct torch_pool_t {
  torch_block_t** blocks;
  size_t count;
  size_t capacity;
} torch_pool_t;

struct hl_torch_model_t {
  uint64_t device_limit;  // 0: unlimited.
  uint64_t next_addr;     // Where the next segment is placed.
  torch_pool_t small;
  torch_pool_t large;
  torch_block_t** live;  // By id.
  uint32_t live_capacity;
  hl_torch_model_stats_t stats;
};

// First index whose block is not less than (size, addr).
static size_t torch_pool_lower_bound(const torch_pool_t* pool, uint64_t size,
                                     uint64_t addr) {
  size_t lo = 0, hi = pool->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const torch_block_t* b = pool->blocks[mid];
    if (b->size < size || (b->size == size && b->addr < addr)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Makes room for one more free block, so that an insert cannot fail.
static hl_status_t torch_pool_grow(torch_pool_t* pool) {
  if (pool->count < pool->capacity) return hl_ok_status();
  size_t capacity = pool->capacity ? pool->capacity * 2 : 64;
  torch_block_t** blocks = realloc(pool->blocks, capacity * sizeof(*blocks));
  if (!blocks) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "growing the model's free set to %zu blocks",
                          capacity);
  }
  pool->blocks = blocks;
  pool->capacity = capacity;
  return hl_ok_status();
}

// Inserts |block|; torch_pool_grow made room first.
static void torch_pool_insert(torch_pool_t* pool, torch_block_t* block) {
  size_t at = torch_pool_lower_bound(pool, block->size, block->addr);
  memmove(&pool->blocks[at + 1], &pool->blocks[at],
          (pool->count - at) * sizeof(*pool->blocks));
  pool->blocks[at] = block;
  ++pool->count;
}

static void torch_pool_erase(torch_pool_t* pool, const torch_block_t* block) {
  size_t at = torch_pool_lower_bound(pool, block->size, block->addr);
  // The block is in the set: (size, addr) is unique.
  memmove(&pool->blocks[at], &pool->blocks[at + 1],
          (pool->count - at - 1) * sizeof(*pool->blocks));
  --pool->count;
}

static torch_pool_t* torch_model_pool(hl_torch_model_t* model, bool small) {
  return small ? &model->small : &model->large;
}

// round_size: at least kMinBlockSize, else a multiple of it.
static uint64_t torch_round_size(uint64_t size) {
  if (size < HL_TORCH_MODEL_MIN_BLOCK_SIZE)
    return HL_TORCH_MODEL_MIN_BLOCK_SIZE;
  return (size + HL_TORCH_MODEL_MIN_BLOCK_SIZE - 1) /
         HL_TORCH_MODEL_MIN_BLOCK_SIZE * HL_TORCH_MODEL_MIN_BLOCK_SIZE;
}

// get_allocation_size: the segment reserved for a (rounded) request.
static uint64_t torch_allocation_size(uint64_t size) {
  if (size <= HL_TORCH_MODEL_SMALL_SIZE) return HL_TORCH_MODEL_SMALL_BUFFER;
  if (size < HL_TORCH_MODEL_MIN_LARGE_ALLOC) return HL_TORCH_MODEL_LARGE_BUFFER;
  return (size + HL_TORCH_MODEL_ROUND_LARGE - 1) / HL_TORCH_MODEL_ROUND_LARGE *
         HL_TORCH_MODEL_ROUND_LARGE;
}

// should_split (max_split_size unlimited): small blocks split when at least
// kMinBlockSize remains, large ones when more than kSmallSize remains.
static bool torch_should_split(const torch_block_t* block, uint64_t size) {
  uint64_t remaining = block->size - size;
  return block->small ? remaining >= HL_TORCH_MODEL_MIN_BLOCK_SIZE
                      : remaining > HL_TORCH_MODEL_SMALL_SIZE;
}

hl_status_t hl_torch_model_create(uint64_t device_limit,
                                  hl_torch_model_t** out_model) {
  if (!out_model) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "out_model is NULL");
  }
  *out_model = NULL;
  hl_torch_model_t* model = calloc(1, sizeof(*model));
  if (!model) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating the PyTorch allocator model");
  }
  model->device_limit = device_limit;
  *out_model = model;
  return hl_ok_status();
}

static void torch_pool_deinitialize(torch_pool_t* pool) {
  for (size_t i = 0; i < pool->count; ++i) free(pool->blocks[i]);
  free(pool->blocks);
  memset(pool, 0, sizeof(*pool));
}

void hl_torch_model_destroy(hl_torch_model_t* model) {
  if (!model) return;
  // Every block is either free (in a pool) or live (under an id).
  torch_pool_deinitialize(&model->small);
  torch_pool_deinitialize(&model->large);
  for (uint32_t i = 0; i < model->live_capacity; ++i) free(model->live[i]);
  free(model->live);
  free(model);
}

// release_cached_blocks: gives back every free segment that is whole.
static void torch_model_release_cached(hl_torch_model_t* model) {
  for (int p = 0; p < 2; ++p) {
    torch_pool_t* pool = torch_model_pool(model, p == 0);
    size_t kept = 0;
    for (size_t i = 0; i < pool->count; ++i) {
      torch_block_t* b = pool->blocks[i];
      if (!b->prev && !b->next) {
        model->stats.reserved_bytes -= b->size;
        --model->stats.segment_count;
        ++model->stats.segment_frees;
        free(b);
      } else {
        pool->blocks[kept++] = b;
      }
    }
    pool->count = kept;
  }
}

// alloc_block: reserves a segment of |bytes|, or returns NULL at the limit.
static torch_block_t* torch_model_reserve(hl_torch_model_t* model,
                                          uint64_t bytes, bool small) {
  if (model->device_limit &&
      (bytes > model->device_limit ||
       model->stats.reserved_bytes > model->device_limit - bytes)) {
    return NULL;
  }
  torch_block_t* b = calloc(1, sizeof(*b));
  if (!b) return NULL;
  b->addr = model->next_addr;
  b->size = bytes;
  b->small = small;
  model->next_addr += bytes;
  model->stats.reserved_bytes += bytes;
  if (model->stats.reserved_bytes > model->stats.peak_reserved_bytes) {
    model->stats.peak_reserved_bytes = model->stats.reserved_bytes;
  }
  ++model->stats.segment_count;
  ++model->stats.segment_allocs;
  return b;
}

static hl_status_t torch_model_reserve_live(hl_torch_model_t* model,
                                            uint32_t id) {
  if (id < model->live_capacity) return hl_ok_status();
  uint32_t capacity = model->live_capacity ? model->live_capacity : 1024;
  while (capacity <= id) capacity *= 2;
  torch_block_t** live = realloc(model->live, capacity * sizeof(*live));
  if (!live) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "growing the model's id table to %u", capacity);
  }
  memset(&live[model->live_capacity], 0,
         (capacity - model->live_capacity) * sizeof(*live));
  model->live = live;
  model->live_capacity = capacity;
  return hl_ok_status();
}

hl_status_t hl_torch_model_alloc(hl_torch_model_t* model, uint32_t id,
                                 uint64_t size) {
  if (!model)
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "model is NULL");
  if (size == 0) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "allocation %u has size 0 (PyTorch reserves nothing "
                          "for it; do not model it)",
                          id);
  }
  if (size > UINT64_MAX - HL_TORCH_MODEL_LARGE_BUFFER) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "allocation %u of %llu bytes cannot be rounded", id,
                          (unsigned long long)size);
  }
  if (id >= TORCH_MODEL_MAX_ID) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "allocation id %u is out of range (< 2^31)", id);
  }
  HL_RETURN_IF_ERROR_PLAIN(torch_model_reserve_live(model, id));
  if (model->live[id]) {
    return HL_MAKE_STATUS(HL_STATUS_ALREADY_EXISTS,
                          "allocation id %u is live already", id);
  }

  uint64_t rounded = torch_round_size(size);
  bool small = rounded <= HL_TORCH_MODEL_SMALL_SIZE;
  torch_pool_t* pool = torch_model_pool(model, small);
  // At most one block more is free afterwards (a split's remainder).
  HL_RETURN_IF_ERROR_PLAIN(torch_pool_grow(pool));

  // get_free_block: the smallest free block that fits, lowest address first.
  torch_block_t* block = NULL;
  size_t at = torch_pool_lower_bound(pool, rounded, 0);
  if (at < pool->count) {
    block = pool->blocks[at];
    torch_pool_erase(pool, block);
  } else {
    uint64_t bytes = torch_allocation_size(rounded);
    block = torch_model_reserve(model, bytes, small);
    if (!block) {
      // Free all cached whole segments and retry once.
      torch_model_release_cached(model);
      block = torch_model_reserve(model, bytes, small);
    }
    if (!block) {
      ++model->stats.oom_count;
      return HL_MAKE_STATUS(
          HL_STATUS_RESOURCE_EXHAUSTED,
          "the model cannot reserve a %llu-byte segment for allocation %u "
          "(%llu bytes): %llu of %llu bytes reserved",
          (unsigned long long)bytes, id, (unsigned long long)size,
          (unsigned long long)model->stats.reserved_bytes,
          (unsigned long long)model->device_limit);
    }
  }

  // alloc_found_block: split off the remainder when should_split says so.
  if (torch_should_split(block, rounded)) {
    torch_block_t* rest = calloc(1, sizeof(*rest));
    if (!rest) {
      torch_pool_insert(pool, block);
      return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                            "allocating a model block");
    }
    rest->addr = block->addr + rounded;
    rest->size = block->size - rounded;
    rest->small = small;
    rest->prev = block;
    rest->next = block->next;
    if (block->next) block->next->prev = rest;
    block->next = rest;
    block->size = rounded;
    torch_pool_insert(pool, rest);
  }
  block->allocated = true;
  model->live[id] = block;
  model->stats.allocated_bytes += block->size;
  if (model->stats.allocated_bytes > model->stats.peak_allocated_bytes) {
    model->stats.peak_allocated_bytes = model->stats.allocated_bytes;
  }
  ++model->stats.alloc_count;
  return hl_ok_status();
}

hl_status_t hl_torch_model_free(hl_torch_model_t* model, uint32_t id) {
  if (!model)
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "model is NULL");
  if (id >= model->live_capacity || !model->live[id]) {
    return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                          "allocation id %u is not live (never allocated or "
                          "freed already)",
                          id);
  }
  torch_block_t* block = model->live[id];
  torch_pool_t* pool = torch_model_pool(model, block->small);
  HL_RETURN_IF_ERROR_PLAIN(torch_pool_grow(pool));
  model->live[id] = NULL;
  model->stats.allocated_bytes -= block->size;
  block->allocated = false;
  // free_block / try_merge_blocks: absorb free neighbours of the segment.
  torch_block_t* prev = block->prev;
  if (prev && !prev->allocated) {
    torch_pool_erase(pool, prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next) block->next->prev = prev;
    free(block);
    block = prev;
  }
  torch_block_t* next = block->next;
  if (next && !next->allocated) {
    torch_pool_erase(pool, next);
    block->size += next->size;
    block->next = next->next;
    if (next->next) next->next->prev = block;
    free(next);
  }
  torch_pool_insert(pool, block);
  return hl_ok_status();
}

void hl_torch_model_query_stats(const hl_torch_model_t* model,
                                hl_torch_model_stats_t* out_stats) {
  if (!out_stats) return;
  if (!model) {
    memset(out_stats, 0, sizeof(*out_stats));
    return;
  }
  *out_stats = model->stats;
}

hl_status_t hl_torch_model_replay(const hl_replay_log_t* log,
                                  uint64_t device_limit,
                                  hl_torch_model_stats_t* out_stats) {
  if (!log || !out_stats) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "log or out_stats is NULL");
  }
  memset(out_stats, 0, sizeof(*out_stats));
  hl_torch_model_t* model = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_torch_model_create(device_limit, &model));
  hl_status_t st = hl_ok_status();
  for (size_t i = 0; i < log->event_count && !st; ++i) {
    const hl_replay_event_t* e = &log->events[i];
    if (e->size == 0) continue;  // Allocation and free both carry the size.
    st = e->op == HL_REPLAY_OP_ALLOC
             ? hl_torch_model_alloc(model, e->id, e->size)
             : hl_torch_model_free(model, e->id);
    if (st) {
      st = hl_status_annotate(st, "modelling PyTorch's allocator at line %u",
                              e->line);
    }
  }
  hl_torch_model_query_stats(model, out_stats);
  hl_torch_model_destroy(model);
  return st;
}
