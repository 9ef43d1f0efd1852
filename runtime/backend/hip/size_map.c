// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Pointer-to-size map with linear probing.

#include "runtime/backend/hip/size_map.h"

#include <string.h>

// Fibonacci hashing spreads aligned pointers (whose low bits are zero) over
// the whole table.
static size_t hl_hip_size_map_slot(uintptr_t key, size_t capacity) {
  uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ull;
  return (size_t)(h >> 32) & (capacity - 1);
}

hl_status_t hl_hip_size_map_initialize(hl_allocator_t allocator,
                                       hl_hip_size_map_t* out_map) {
  memset(out_map, 0, sizeof(*out_map));
  out_map->allocator = allocator;
  if (mtx_init(&out_map->mutex, mtx_plain) != thrd_success) {
    return HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                          "mtx_init failed for the hip size map");
  }
  return hl_ok_status();
}

void hl_hip_size_map_deinitialize(hl_hip_size_map_t* map) {
  hl_allocator_free(map->allocator, map->entries);
  map->entries = NULL;
  map->capacity = map->count = 0;
  mtx_destroy(&map->mutex);
}

// Places |key| in |entries| (which has room and does not hold it).
static void hl_hip_size_map_place(hl_hip_size_map_entry_t* entries,
                                  size_t capacity,
                                  hl_hip_size_map_entry_t entry) {
  size_t i = hl_hip_size_map_slot(entry.key, capacity);
  while (entries[i].key) i = (i + 1) & (capacity - 1);
  entries[i] = entry;
}

// Doubles the table (or creates it). Called with the mutex held.
static hl_status_t hl_hip_size_map_grow(hl_hip_size_map_t* map) {
  size_t capacity = map->capacity ? map->capacity * 2 : 64;
  void* memory = NULL;
  HL_RETURN_IF_ERROR(
      hl_allocator_calloc(map->allocator, capacity * sizeof(*map->entries),
                          &memory),
      "growing the hip size map to %zu entries", capacity);
  hl_hip_size_map_entry_t* entries = memory;
  for (size_t i = 0; i < map->capacity; ++i) {
    if (map->entries[i].key) {
      hl_hip_size_map_place(entries, capacity, map->entries[i]);
    }
  }
  hl_allocator_free(map->allocator, map->entries);
  map->entries = entries;
  map->capacity = capacity;
  return hl_ok_status();
}

hl_status_t hl_hip_size_map_insert(hl_hip_size_map_t* map, const void* ptr,
                                   uint64_t size) {
  return hl_hip_size_map_insert_owned(map, ptr, size, NULL);
}

hl_status_t hl_hip_size_map_insert_owned(hl_hip_size_map_t* map,
                                         const void* ptr, uint64_t size,
                                         void* owner) {
  hl_status_t status = hl_ok_status();
  mtx_lock(&map->mutex);
  if ((map->count + 1) * 2 > map->capacity) status = hl_hip_size_map_grow(map);
  if (hl_status_is_ok(status)) {
    hl_hip_size_map_entry_t entry = {(uintptr_t)ptr, size, owner};
    hl_hip_size_map_place(map->entries, map->capacity, entry);
    ++map->count;
  }
  mtx_unlock(&map->mutex);
  return status;
}

bool hl_hip_size_map_remove(hl_hip_size_map_t* map, const void* ptr,
                            uint64_t* out_size) {
  void* owner = NULL;
  return hl_hip_size_map_remove_owned(map, ptr, out_size, &owner);
}

bool hl_hip_size_map_remove_owned(hl_hip_size_map_t* map, const void* ptr,
                                  uint64_t* out_size, void** out_owner) {
  uintptr_t key = (uintptr_t)ptr;
  bool found = false;
  mtx_lock(&map->mutex);
  if (map->capacity && key) {
    size_t mask = map->capacity - 1;
    size_t i = hl_hip_size_map_slot(key, map->capacity);
    while (map->entries[i].key && map->entries[i].key != key) {
      i = (i + 1) & mask;
    }
    if (map->entries[i].key == key) {
      found = true;
      *out_size = map->entries[i].size;
      *out_owner = map->entries[i].owner;
      // Backward-shift deletion: pull later entries of the probe run into
      // the hole when their home slot does not lie between the hole and
      // their current slot, so lookups never need tombstones.
      size_t hole = i;
      size_t j = i;
      for (;;) {
        j = (j + 1) & mask;
        if (!map->entries[j].key) break;
        size_t home = hl_hip_size_map_slot(map->entries[j].key, map->capacity);
        bool home_in_range =
            hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!home_in_range) {
          map->entries[hole] = map->entries[j];
          hole = j;
        }
      }
      map->entries[hole].key = 0;
      map->entries[hole].size = 0;
      map->entries[hole].owner = NULL;
      --map->count;
    }
  }
  mtx_unlock(&map->mutex);
  return found;
}

size_t hl_hip_size_map_count(hl_hip_size_map_t* map) {
  mtx_lock(&map->mutex);
  size_t count = map->count;
  mtx_unlock(&map->mutex);
  return count;
}

bool hl_hip_size_map_contains_range(hl_hip_size_map_t* map, const void* ptr,
                                    size_t size) {
  uintptr_t p = (uintptr_t)ptr;
  bool found = false;
  mtx_lock(&map->mutex);
  for (size_t i = 0; i < map->capacity && !found; ++i) {
    uintptr_t key = map->entries[i].key;
    found = key && p >= key && p - key <= map->entries[i].size &&
            size <= map->entries[i].size - (p - key);
  }
  mtx_unlock(&map->mutex);
  return found;
}

void hl_hip_size_map_clear_owner(hl_hip_size_map_t* map, const void* owner) {
  mtx_lock(&map->mutex);
  for (size_t i = 0; i < map->capacity; ++i) {
    if (map->entries[i].key && map->entries[i].owner == owner) {
      map->entries[i].owner = NULL;
    }
  }
  mtx_unlock(&map->mutex);
}
