// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A model of PyTorch's CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp) that tracks only what it reserves from
// the device, so that a replay can show what PyTorch would hold on the same
// allocation stream next to hipline.
//
// It follows the allocator's documented rules with its default settings
// (no PYTORCH_CUDA_ALLOC_CONF: max_split_size unlimited, no
// roundup_power2_divisions, no garbage_collection_threshold, no expandable
// segments):
// - A request is rounded up to a multiple of 512 B (kMinBlockSize), at least
//   512 B (round_size).
// - Requests of at most 1 MiB (kSmallSize) use the small pool, larger ones
//   the large pool (get_pool).
// - The smallest free block of the pool that fits is taken, ties broken by
//   the lower address (BlockComparator; get_free_block).
// - With none, a new segment is reserved: 2 MiB (kSmallBuffer) for a small
//   request, 20 MiB (kLargeBuffer) for a large one under 10 MiB
//   (kMinLargeAlloc), else the request rounded up to 2 MiB (kRoundLarge)
//   (get_allocation_size).
// - The block found or made is split when the remainder is at least 512 B in
//   the small pool, or more than 1 MiB in the large pool (should_split).
// - A freed block merges with its free neighbours inside its segment
//   (free_block / try_merge_blocks). Segments are never given back, except
//   when reserving one would pass the device limit: then every cached segment
//   that is whole and free is released and the reservation retried
//   (release_cached_blocks); if that fails too, the request fails (an OOM).
//
// Only one stream is modelled: a log with several streams is modelled as if
// all were one, where PyTorch would keep a pool per stream (and so usually
// hold more). The shared traces use one stream each. Addresses are modelled as
// segments placed one after another in reservation order; on a real device
// cudaMalloc may place them otherwise, which changes only how equal-sized
// free blocks are ordered.
//
// Benchmark-side code: no device is involved, only bookkeeping.
#ifndef HIPLINE_BENCH_STRESS_TORCH_MODEL_H_
#define HIPLINE_BENCH_STRESS_TORCH_MODEL_H_

#include <stdint.h>

#include "bench/replay_log.h"
#include "hipline/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// The allocator's constants (c10/cuda/CUDACachingAllocator.cpp).
#define HL_TORCH_MODEL_MIN_BLOCK_SIZE ((uint64_t)512)        // kMinBlockSize
#define HL_TORCH_MODEL_SMALL_SIZE ((uint64_t)1 << 20)        // kSmallSize
#define HL_TORCH_MODEL_SMALL_BUFFER ((uint64_t)2 << 20)      // kSmallBuffer
#define HL_TORCH_MODEL_LARGE_BUFFER ((uint64_t)20 << 20)     // kLargeBuffer
#define HL_TORCH_MODEL_MIN_LARGE_ALLOC ((uint64_t)10 << 20)  // kMinLargeAlloc
#define HL_TORCH_MODEL_ROUND_LARGE ((uint64_t)2 << 20)       // kRoundLarge

typedef struct hl_torch_model_t hl_torch_model_t;

typedef struct hl_torch_model_stats_t {
  // Bytes in segments now and at most (PyTorch's reserved_bytes).
  uint64_t reserved_bytes;
  uint64_t peak_reserved_bytes;
  // Bytes in blocks handed out (rounded sizes, unsplit remainders included;
  // PyTorch's allocated_bytes) now and at most.
  uint64_t allocated_bytes;
  uint64_t peak_allocated_bytes;
  // Segments now, and segments reserved and released in all.
  uint64_t segment_count;
  uint64_t segment_allocs;
  uint64_t segment_frees;
  // Allocations served, and allocations that failed at the device limit.
  uint64_t alloc_count;
  uint64_t oom_count;
} hl_torch_model_stats_t;

// Creates an empty model. |device_limit| is the device's memory in bytes
// (0: unlimited). Fails with INVALID_ARGUMENT for a null |out_model|.
hl_status_t hl_torch_model_create(uint64_t device_limit,
                                  hl_torch_model_t** out_model);

// Frees |model| and everything it tracks. Accepts NULL.
void hl_torch_model_destroy(hl_torch_model_t* model);

// Allocates |size| bytes under the caller's handle |id| (any value below
// 2^31; ids may be reused once freed). INVALID_ARGUMENT for a zero size
// (PyTorch reserves nothing for it), a size that cannot be rounded, or an id
// out of range; ALREADY_EXISTS when |id| is live; RESOURCE_EXHAUSTED (counted
// in oom_count) when the device limit is reached even after releasing the
// cache.
hl_status_t hl_torch_model_alloc(hl_torch_model_t* model, uint32_t id,
                                 uint64_t size);

// Frees the allocation under |id|. NOT_FOUND when |id| is not live (never
// allocated, or freed already).
hl_status_t hl_torch_model_free(hl_torch_model_t* model, uint32_t id);

void hl_torch_model_query_stats(const hl_torch_model_t* model,
                                hl_torch_model_stats_t* out_stats);

// Runs every event of |log| in order through a fresh model (the log's ids are
// the handles; zero-byte allocations are skipped, as PyTorch takes nothing for
// them) and fills |out_stats|.
hl_status_t hl_torch_model_replay(const hl_replay_log_t* log,
                                  uint64_t device_limit,
                                  hl_torch_model_stats_t* out_stats);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_BENCH_STRESS_TORCH_MODEL_H_
