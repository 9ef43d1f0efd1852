// What the runtime knows of host allocators beyond the public API.
#ifndef HIPLINE_RUNTIME_BASE_ALLOCATOR_INTERNAL_H_
#define HIPLINE_RUNTIME_BASE_ALLOCATOR_INTERNAL_H_

#include <stdbool.h>

#include "hipline/allocator.h"

// Whether |a| is hl_allocator_system() (without building that struct: the
// recyclers ask at every allocation and free).
bool hl_allocator_is_system(hl_allocator_t a);

#endif  // HIPLINE_RUNTIME_BASE_ALLOCATOR_INTERNAL_H_
