// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Host allocator hooks. Every hipline object records the allocator it was
// created with and frees itself through it.
#ifndef HIPLINE_ALLOCATOR_H_
#define HIPLINE_ALLOCATOR_H_

#include <stddef.h>

#include "hipline/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// A host allocator: |alloc| returns |size| bytes aligned for any type or NULL;
// |free| accepts NULL. Both must be thread-safe. |self| is passed back to each.
typedef struct hl_allocator_t {
  void* self;
  void* (*alloc)(void* self, size_t size);
  void (*free)(void* self, void* ptr);
} hl_allocator_t;

// Returns the C library allocator (malloc/free).
HL_API hl_allocator_t hl_allocator_system(void);

// Allocates |size| zeroed bytes with |allocator| into |*out_ptr|. Returns
// RESOURCE_EXHAUSTED naming the size when the allocator returns NULL and
// INVALID_ARGUMENT for a zero size.
HL_API hl_status_t hl_allocator_calloc(hl_allocator_t allocator, size_t size,
                                       void** out_ptr);

// Frees |ptr| (may be NULL) with |allocator|.
HL_API void hl_allocator_free(hl_allocator_t allocator, void* ptr);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_ALLOCATOR_H_
