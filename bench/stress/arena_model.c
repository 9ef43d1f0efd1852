// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// An ideal best-fit arena; see arena_model.h for the rules.

#include "bench/stress/arena_model.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_MODEL_MAX_ID ((uint32_t)1 << 31)
#define ARENA_MODEL_MAX_SIZE ((uint64_t)1 << 48)

// A block of the address space below the top, free or allocated, linked in
// address order.
typedef struct arena_block_t {
  uint64_t addr;
  uint64_t size;
  struct arena_block_t* prev;
  struct arena_block_t* next;
  bool allocated;
} arena_block_t;

struct hl_arena_model_t {
  arena_block_t* last;  // The highest block (allocated: free ones merge
                        // into the top).
  // Free blocks sorted by (size, addr).
  arena_block_t** free_set;
  size_t free_count;
  size_t free_capacity;
  arena_block_t** live;  // By id.
  uint32_t live_capacity;
  hl_arena_model_stats_t stats;
};

// First index whose block is not less than (size, addr).
static size_t arena_lower_bound(const hl_arena_model_t* m, uint64_t size,
                                uint64_t addr) {
  size_t lo = 0, hi = m->free_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const arena_block_t* b = m->free_set[mid];
    if (b->size < size || (b->size == size && b->addr < addr)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Makes room for one more free block, so that an insert cannot fail.
static hl_status_t arena_free_set_grow(hl_arena_model_t* m) {
  if (m->free_count < m->free_capacity) return hl_ok_status();
  size_t capacity = m->free_capacity ? m->free_capacity * 2 : 64;
  arena_block_t** set = realloc(m->free_set, capacity * sizeof(*set));
  if (!set) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "growing the arena's free set to %zu blocks",
                          capacity);
  }
  m->free_set = set;
  m->free_capacity = capacity;
  return hl_ok_status();
}

static void arena_free_insert(hl_arena_model_t* m, arena_block_t* b) {
  size_t at = arena_lower_bound(m, b->size, b->addr);
  memmove(&m->free_set[at + 1], &m->free_set[at],
          (m->free_count - at) * sizeof(*m->free_set));
  m->free_set[at] = b;
  ++m->free_count;
}

static void arena_free_erase(hl_arena_model_t* m, const arena_block_t* b) {
  size_t at = arena_lower_bound(m, b->size, b->addr);
  memmove(&m->free_set[at], &m->free_set[at + 1],
          (m->free_count - at - 1) * sizeof(*m->free_set));
  --m->free_count;
}

hl_status_t hl_arena_model_create(hl_arena_model_t** out_model) {
  if (!out_model) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "out_model is NULL");
  }
  *out_model = calloc(1, sizeof(**out_model));
  if (!*out_model) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating the arena model");
  }
  return hl_ok_status();
}

void hl_arena_model_destroy(hl_arena_model_t* model) {
  if (!model) return;
  for (arena_block_t* b = model->last; b;) {
    arena_block_t* prev = b->prev;
    free(b);
    b = prev;
  }
  free(model->free_set);
  free(model->live);
  free(model);
}

static hl_status_t arena_reserve_live(hl_arena_model_t* m, uint32_t id) {
  if (id < m->live_capacity) return hl_ok_status();
  uint32_t capacity = m->live_capacity ? m->live_capacity : 1024;
  while (capacity <= id) capacity *= 2;
  arena_block_t** live = realloc(m->live, capacity * sizeof(*live));
  if (!live) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "growing the arena's id table to %u", capacity);
  }
  memset(&live[m->live_capacity], 0,
         (capacity - m->live_capacity) * sizeof(*live));
  m->live = live;
  m->live_capacity = capacity;
  return hl_ok_status();
}

// A new block of |size| at the top.
static arena_block_t* arena_push_top(hl_arena_model_t* m, uint64_t size) {
  arena_block_t* b = calloc(1, sizeof(*b));
  if (!b) return NULL;
  b->addr = m->stats.reserved_bytes;
  b->size = size;
  b->prev = m->last;
  if (m->last) m->last->next = b;
  m->last = b;
  m->stats.reserved_bytes += size;
  if (m->stats.reserved_bytes > m->stats.peak_reserved_bytes) {
    m->stats.peak_reserved_bytes = m->stats.reserved_bytes;
  }
  return b;
}

// Splits |b| (free, out of the set) to |size|; the rest goes back free.
static hl_status_t arena_split(hl_arena_model_t* m, arena_block_t* b,
                               uint64_t size) {
  if (b->size == size) return hl_ok_status();
  arena_block_t* rest = calloc(1, sizeof(*rest));
  if (!rest) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating an arena block");
  }
  rest->addr = b->addr + size;
  rest->size = b->size - size;
  rest->prev = b;
  rest->next = b->next;
  if (b->next) b->next->prev = rest;
  b->next = rest;
  b->size = size;
  arena_free_insert(m, rest);  // Room made by the caller.
  return hl_ok_status();
}

hl_status_t hl_arena_model_alloc(hl_arena_model_t* model, uint32_t id,
                                 uint64_t size) {
  if (!model) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "model is NULL");
  }
  if (size > ARENA_MODEL_MAX_SIZE) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "allocation %u of %llu bytes: size must be at most "
                          "2^48",
                          id, (unsigned long long)size);
  }
  if (id >= ARENA_MODEL_MAX_ID) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "allocation id %u is out of range (< 2^31)", id);
  }
  HL_RETURN_IF_ERROR_PLAIN(arena_reserve_live(model, id));
  if (model->live[id]) {
    return HL_MAKE_STATUS(HL_STATUS_ALREADY_EXISTS,
                          "allocation id %u is live already", id);
  }
  HL_RETURN_IF_ERROR_PLAIN(arena_free_set_grow(model));
  uint64_t g = HL_ARENA_MODEL_GRANULE;
  uint64_t rounded = size ? (size + g - 1) / g * g : g;
  arena_block_t* b = NULL;
  size_t at = arena_lower_bound(model, rounded, 0);
  if (at < model->free_count) {
    b = model->free_set[at];
    arena_free_erase(model, b);
    hl_status_t st = arena_split(model, b, rounded);
    if (st) {
      arena_free_insert(model, b);
      return st;
    }
  } else {
    b = arena_push_top(model, rounded);
    if (!b) {
      return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                            "allocating an arena block");
    }
  }
  b->allocated = true;
  model->live[id] = b;
  model->stats.allocated_bytes += rounded;
  if (model->stats.allocated_bytes > model->stats.peak_allocated_bytes) {
    model->stats.peak_allocated_bytes = model->stats.allocated_bytes;
  }
  ++model->stats.alloc_count;
  model->stats.free_blocks = model->free_count;
  return hl_ok_status();
}

// Removes |b| (free, out of the set) from the address list and frees it.
static void arena_unlink(hl_arena_model_t* m, arena_block_t* b) {
  if (b->prev) b->prev->next = b->next;
  if (b->next) b->next->prev = b->prev;
  if (m->last == b) m->last = b->prev;
  free(b);
}

hl_status_t hl_arena_model_free(hl_arena_model_t* model, uint32_t id) {
  if (!model) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "model is NULL");
  }
  if (id >= model->live_capacity || !model->live[id]) {
    return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                          "allocation id %u is not live (never allocated or "
                          "freed already)",
                          id);
  }
  HL_RETURN_IF_ERROR_PLAIN(arena_free_set_grow(model));
  arena_block_t* b = model->live[id];
  model->live[id] = NULL;
  model->stats.allocated_bytes -= b->size;
  b->allocated = false;
  arena_block_t* prev = b->prev;
  if (prev && !prev->allocated) {
    arena_free_erase(model, prev);
    prev->size += b->size;
    arena_unlink(model, b);
    b = prev;
  }
  arena_block_t* next = b->next;
  if (next && !next->allocated) {
    arena_free_erase(model, next);
    b->size += next->size;
    arena_unlink(model, next);
  }
  if (b == model->last) {
    // Free space at the top lowers it.
    model->stats.reserved_bytes = b->addr;
    arena_unlink(model, b);
  } else {
    arena_free_insert(model, b);
  }
  model->stats.free_blocks = model->free_count;
  return hl_ok_status();
}

uint64_t hl_arena_model_address(const hl_arena_model_t* model, uint32_t id) {
  if (!model || id >= model->live_capacity || !model->live[id]) {
    return UINT64_MAX;
  }
  return model->live[id]->addr;
}

void hl_arena_model_query_stats(const hl_arena_model_t* model,
                                hl_arena_model_stats_t* out_stats) {
  if (!out_stats) return;
  if (!model) {
    memset(out_stats, 0, sizeof(*out_stats));
    return;
  }
  *out_stats = model->stats;
}

hl_status_t hl_arena_model_replay(const hl_replay_log_t* log,
                                  hl_arena_model_stats_t* out_stats) {
  if (!log || !out_stats) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "log or out_stats is NULL");
  }
  memset(out_stats, 0, sizeof(*out_stats));
  hl_arena_model_t* model = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_arena_model_create(&model));
  hl_status_t st = hl_ok_status();
  for (size_t i = 0; i < log->event_count && !st; ++i) {
    const hl_replay_event_t* e = &log->events[i];
    st = e->op == HL_REPLAY_OP_ALLOC
             ? hl_arena_model_alloc(model, e->id, e->size)
             : hl_arena_model_free(model, e->id);
    if (st) {
      st = hl_status_annotate(st, "modelling the ideal arena at line %u",
                              e->line);
    }
  }
  hl_arena_model_query_stats(model, out_stats);
  hl_arena_model_destroy(model);
  return st;
}
