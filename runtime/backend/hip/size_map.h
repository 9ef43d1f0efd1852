// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A small thread-safe map from device pointers to allocation sizes.
//
// The hip backend needs each live block's size at free time (for its own
// used-bytes accounting and the pool limit), and HIP does not report it.
// Open addressing with linear probing and backward-shift deletion, under
// one mutex; the table doubles when it is more than half full.
#ifndef HIPLINE_RUNTIME_BACKEND_HIP_SIZE_MAP_H_
#define HIPLINE_RUNTIME_BACKEND_HIP_SIZE_MAP_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <threads.h>

#include "hipline/allocator.h"
#include "hipline/status.h"

typedef struct hl_hip_size_map_entry_t {
  uintptr_t key;  // 0 marks an empty slot (NULL is never inserted).
  uint64_t size;
  void* owner;  // The stream that allocated the block; NULL when gone.
} hl_hip_size_map_entry_t;

typedef struct hl_hip_size_map_t {
  hl_allocator_t allocator;
  mtx_t mutex;
  hl_hip_size_map_entry_t* entries;
  size_t capacity;  // A power of two, or 0 before the first insert.
  size_t count;
} hl_hip_size_map_t;

// Initializes an empty map in place; entries are allocated with |allocator|.
hl_status_t hl_hip_size_map_initialize(hl_allocator_t allocator,
                                       hl_hip_size_map_t* out_map);

// Frees the table. The map must not be used afterwards.
void hl_hip_size_map_deinitialize(hl_hip_size_map_t* map);

// Records |size| for |ptr| (non-NULL, not already present). Fails only when
// the table cannot grow (RESOURCE_EXHAUSTED).
hl_status_t hl_hip_size_map_insert(hl_hip_size_map_t* map, const void* ptr,
                                   uint64_t size);

// Removes |ptr| and stores its size in *out_size. Returns false (and leaves
// *out_size alone) when |ptr| is not in the map.
bool hl_hip_size_map_remove(hl_hip_size_map_t* map, const void* ptr,
                            uint64_t* out_size);

// As insert and remove, with the block's owner (its allocating stream).
hl_status_t hl_hip_size_map_insert_owned(hl_hip_size_map_t* map,
                                         const void* ptr, uint64_t size,
                                         void* owner);
bool hl_hip_size_map_remove_owned(hl_hip_size_map_t* map, const void* ptr,
                                  uint64_t* out_size, void** out_owner);

// Whether [ptr, ptr + size) lies inside one live block. A scan of the whole
// table: O(capacity).
bool hl_hip_size_map_contains_range(hl_hip_size_map_t* map, const void* ptr,
                                    size_t size);

// Sets the owner of every block owned by |owner| to NULL.
void hl_hip_size_map_clear_owner(hl_hip_size_map_t* map, const void* owner);

// Returns the number of entries.
size_t hl_hip_size_map_count(hl_hip_size_map_t* map);

#endif  // HIPLINE_RUNTIME_BACKEND_HIP_SIZE_MAP_H_
