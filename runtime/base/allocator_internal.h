// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What the runtime knows of host allocators beyond the public API.
#ifndef HIPLINE_RUNTIME_BASE_ALLOCATOR_INTERNAL_H_
#define HIPLINE_RUNTIME_BASE_ALLOCATOR_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>

#include "hipline/allocator.h"

// The functions of hl_allocator_system().
void* hl_allocator_system_alloc_(void* self, size_t size);
void hl_allocator_system_free_(void* self, void* ptr);

// Whether |a| is hl_allocator_system() (without building that struct: the
// recyclers ask at every allocation and free).
static inline bool hl_allocator_is_system(hl_allocator_t a) {
  return !a.self && a.alloc == hl_allocator_system_alloc_ &&
         a.free == hl_allocator_system_free_;
}

#endif  // HIPLINE_RUNTIME_BASE_ALLOCATOR_INTERNAL_H_
