// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "hipline/allocator.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/allocator_internal.h"

void* hl_allocator_system_alloc_(void* self, size_t size) {
  (void)self;
  return malloc(size);
}

void hl_allocator_system_free_(void* self, void* ptr) {
  (void)self;
  free(ptr);
}

hl_allocator_t hl_allocator_system(void) {
  hl_allocator_t a = {NULL, hl_allocator_system_alloc_,
                      hl_allocator_system_free_};
  return a;
}

hl_status_t hl_allocator_calloc(hl_allocator_t allocator, size_t size,
                                void** out_ptr) {
  if (!out_ptr)
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "out_ptr is NULL");
  *out_ptr = NULL;
  if (size == 0) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "host allocation of 0 bytes");
  }
  if (size > (size_t)PTRDIFF_MAX) {
    // No object can be this large; don't ask (sanitizers abort on it).
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "host allocation of %zu bytes exceeds PTRDIFF_MAX",
                          size);
  }
  if (!allocator.alloc) allocator = hl_allocator_system();
  void* p = allocator.alloc(allocator.self, size);
  if (!p) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "host allocation of %zu bytes failed", size);
  }
  memset(p, 0, size);
  *out_ptr = p;
  return NULL;
}

void hl_allocator_free(hl_allocator_t allocator, void* ptr) {
  if (!ptr) return;
  if (!allocator.free) allocator = hl_allocator_system();
  allocator.free(allocator.self, ptr);
}
