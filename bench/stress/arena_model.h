// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// An ideal best-fit arena: the least a non-moving allocator could reserve
// for an allocation stream, so that a replay can show how far hipline's
// pool is from it (and PyTorch's, torch_model.h).
//
// The rules:
// - One address space that grows upward from 0; what it reserves is its top
//   (the end of the highest block in use), and its peak is the top's peak.
// - A request is rounded up to a multiple of 256 bytes (HIP's allocation
//   alignment and hipline's pool granule), at least 256 bytes; a zero-byte
//   request takes one granule, as hipline's replay allocates it as 1 byte.
// - The smallest free block that fits is taken, ties broken by the lower
//   address; it splits, the remainder stays free. With none, the request
//   goes at the top.
// - A freed block merges with every free neighbour at once; free space that
//   reaches the top lowers the top.
// - No segments, slabs, streams or timepoints: every free is reusable by the
//   next request.
//
// Benchmark-side code: no device is involved, only bookkeeping.
#ifndef HIPLINE_BENCH_STRESS_ARENA_MODEL_H_
#define HIPLINE_BENCH_STRESS_ARENA_MODEL_H_

#include <stdint.h>

#include "bench/replay_log.h"
#include "hipline/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HL_ARENA_MODEL_GRANULE ((uint64_t)256)

typedef struct hl_arena_model_t hl_arena_model_t;

typedef struct hl_arena_model_stats_t {
  // The top of the address space now and at most.
  uint64_t reserved_bytes;
  uint64_t peak_reserved_bytes;
  // Bytes of live blocks (rounded sizes) now and at most.
  uint64_t allocated_bytes;
  uint64_t peak_allocated_bytes;
  // Free blocks below the top now.
  uint64_t free_blocks;
  // Allocations served.
  uint64_t alloc_count;
} hl_arena_model_stats_t;

// Creates an empty arena. INVALID_ARGUMENT for a null |out_model|.
hl_status_t hl_arena_model_create(hl_arena_model_t** out_model);

// Frees |model| and everything it tracks. Accepts NULL.
void hl_arena_model_destroy(hl_arena_model_t* model);

// Allocates |size| bytes under the caller's handle |id| (below 2^31; ids may
// be reused once freed). INVALID_ARGUMENT for a size above 2^48 or an id out
// of range; ALREADY_EXISTS when |id| is live.
hl_status_t hl_arena_model_alloc(hl_arena_model_t* model, uint32_t id,
                                 uint64_t size);

// Frees the allocation under |id|. NOT_FOUND when |id| is not live.
hl_status_t hl_arena_model_free(hl_arena_model_t* model, uint32_t id);

// The address of the live allocation |id|, or UINT64_MAX when it is not live.
uint64_t hl_arena_model_address(const hl_arena_model_t* model, uint32_t id);

void hl_arena_model_query_stats(const hl_arena_model_t* model,
                                hl_arena_model_stats_t* out_stats);

// Runs every event of |log| in order through a fresh arena (the log's ids are
// the handles) and fills |out_stats|.
hl_status_t hl_arena_model_replay(const hl_replay_log_t* log,
                                  hl_arena_model_stats_t* out_stats);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_BENCH_STRESS_ARENA_MODEL_H_
