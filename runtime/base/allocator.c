#include "hipline/allocator.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/allocator_internal.h"

static void* hl_system_alloc(void* self, size_t size) {
  (void)self;
  return malloc(size);
}

static void hl_system_free(void* self, void* ptr) {
  (void)self;
  free(ptr);
}

bool hl_allocator_is_system(hl_allocator_t a) {
  return !a.self && a.alloc == hl_system_alloc && a.free == hl_system_free;
}

hl_allocator_t hl_allocator_system(void) {
  hl_allocator_t a = {NULL, hl_system_alloc, hl_system_free};
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
