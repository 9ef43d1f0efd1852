// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Buffers: views of roots, wrapped and global buffers.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/log.h"
#include "runtime/base/recycler.h"
#include "runtime/base/trace.h"
#include "runtime/memory/memory_internal.h"

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

// A view of |root| that takes over one of its references (the caller's;
// on failure it stays the caller's).
hl_status_t hl_buffer_create_view_adopting(hl_root_t* root, uint64_t offset,
                                           uint64_t length,
                                           hl_buffer_token_t* token,
                                           hl_buffer_t** out_buffer) {
  hl_buffer_t* buffer = NULL;
  hl_status_t st = hl_recycler_alloc(
      &hl_buffer_recycler_, root->device->host_allocator, (void**)&buffer);
  if (st) return hl_status_annotate(st, "creating a buffer view");
  atomic_init(&buffer->ref_count, 1);
  buffer->root = root;
  buffer->offset = offset;
  buffer->length = length;
  if (token) atomic_fetch_add(&token->ref_count, 1);
  buffer->token = token;
  *out_buffer = buffer;
  return NULL;
}

hl_status_t hl_buffer_create_view(hl_root_t* root, uint64_t offset,
                                  uint64_t length, hl_buffer_token_t* token,
                                  hl_buffer_t** out_buffer) {
  hl_root_retain(root);
  hl_status_t st =
      hl_buffer_create_view_adopting(root, offset, length, token, out_buffer);
  if (st) hl_root_release(root);
  return st;
}

void hl_buffer_retain(hl_buffer_t* buffer) {
  if (buffer)
    atomic_fetch_add_explicit(&buffer->ref_count, 1, memory_order_relaxed);
}

void hl_buffer_release(hl_buffer_t* buffer) {
  if (!buffer) return;
  // The only reference (every retain starts from a held one, so none can
  // appear meanwhile) needs no read-modify-write; acquire orders the other
  // threads' releases before the destroy.
  if (atomic_load_explicit(&buffer->ref_count, memory_order_acquire) != 1 &&
      atomic_fetch_sub_explicit(&buffer->ref_count, 1, memory_order_acq_rel) !=
          1) {
    return;
  }
  hl_root_t* root = buffer->root;
  hl_buffer_token_t* token = buffer->token;
  hl_recycler_free(&hl_buffer_recycler_, buffer);
  if (token && atomic_fetch_sub(&token->ref_count, 1) == 1) {
    token->on_last_release(token);
  }
  hl_root_release(root);
}

hl_status_t hl_buffer_subview(hl_buffer_t* buffer, uint64_t offset,
                              uint64_t length, hl_buffer_t** out_view) {
  if (!buffer || !out_view) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_subview: NULL buffer or out_view");
  }
  *out_view = NULL;
  if (offset > buffer->length || length > buffer->length - offset) {
    return HL_MAKE_STATUS(HL_STATUS_OUT_OF_RANGE,
                          "subview [%llu, +%llu) exceeds the %llu-byte buffer",
                          (unsigned long long)offset,
                          (unsigned long long)length,
                          (unsigned long long)buffer->length);
  }
  // Views always point at the root, so a subview of a subview resolves to the
  // same root and timeline resource.
  return hl_buffer_create_view(buffer->root, buffer->offset + offset, length,
                               buffer->token, out_view);
}

hl_status_t hl_buffer_wrap(hl_device_t* device, void* device_ptr, uint64_t size,
                           hl_buffer_release_fn_t release_fn, void* user,
                           hl_buffer_t** out_buffer) {
  if (!device || !device_ptr || !out_buffer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_wrap: NULL device, pointer or out_buffer");
  }
  *out_buffer = NULL;
  if (size == 0 || size > HL_BUFFER_MAX_SIZE) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_wrap: size %llu must be in [1, 2^48]",
                          (unsigned long long)size);
  }
  // External memory has no queue affinity: it is never freed on a stream.
  hl_root_t* root = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_root_create(device, NULL, HL_ROOT_MEMORY_EXTERNAL,
                                          HL_BUFFER_ORIGIN_EXTERNAL, size, 1,
                                          &root));
  atomic_store(&root->ptr, device_ptr);
  atomic_store(&root->state, HL_ROOT_LIVE);
  // Its address is known outside hipline: escaped from the start.
  hl_root_mark_escaped(root);
  root->release_fn = release_fn;
  root->release_user = user;
  hl_status_t st = hl_buffer_create_view(root, 0, size, NULL, out_buffer);
  hl_root_release(root);
  return st;
}

hl_status_t hl_buffer_register_global(hl_buffer_t* buffer) {
  if (!buffer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_register_global: buffer is NULL");
  }
  hl_root_t* root = buffer->root;
  hl_spinlock_lock(&root->lock);
  int origin = atomic_load(&root->origin);
  hl_status_t st = NULL;
  if (origin == HL_BUFFER_ORIGIN_PERSISTENT) {
    st = HL_MAKE_STATUS(HL_STATUS_ALREADY_EXISTS,
                        "root %llu is already registered as a global",
                        (unsigned long long)root->id);
  } else {
    atomic_store(&root->origin, HL_BUFFER_ORIGIN_PERSISTENT);
    hl_root_retain(root);  // The registry's reference.
  }
  hl_spinlock_unlock(&root->lock);
  return st;
}

hl_status_t hl_buffer_unregister_global(hl_buffer_t* buffer) {
  if (!buffer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_unregister_global: buffer is NULL");
  }
  hl_root_t* root = buffer->root;
  hl_spinlock_lock(&root->lock);
  bool registered = atomic_load(&root->origin) == HL_BUFFER_ORIGIN_PERSISTENT;
  if (registered) {
    atomic_store(&root->origin, root->memory == HL_ROOT_MEMORY_EXTERNAL
                                    ? HL_BUFFER_ORIGIN_EXTERNAL
                                    : HL_BUFFER_ORIGIN_ASYNC);
  }
  hl_spinlock_unlock(&root->lock);
  if (!registered) {
    return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                          "root %llu is not registered as a global",
                          (unsigned long long)root->id);
  }
  hl_root_release(root);
  return NULL;
}

uint64_t hl_buffer_length(const hl_buffer_t* buffer) {
  return buffer ? buffer->length : 0;
}

uint64_t hl_buffer_offset(const hl_buffer_t* buffer) {
  return buffer ? buffer->offset : 0;
}

hl_device_t* hl_buffer_device(const hl_buffer_t* buffer) {
  return buffer ? buffer->root->device : NULL;
}

uint64_t hl_buffer_root_id(const hl_buffer_t* buffer) {
  return buffer ? buffer->root->id : 0;
}

void* hl_buffer_device_pointer(const hl_buffer_t* buffer) {
  if (!buffer) return NULL;
  char* base = (char*)atomic_load(&buffer->root->ptr);
  if (!base) return NULL;
  // The address leaves hipline's sight: uses through it are not recorded.
  hl_root_mark_escaped(buffer->root);
  return base + buffer->offset;
}

bool hl_buffer_is_escaped(const hl_buffer_t* buffer) {
  return buffer && atomic_load(&buffer->root->escaped);
}

bool hl_buffer_is_freed(const hl_buffer_t* buffer) {
  return buffer && atomic_load(&buffer->root->state) == HL_ROOT_FREED;
}

hl_status_t hl_buffer_use_fence(const hl_buffer_t* buffer, hl_fence_t* fence) {
  if (!buffer || !fence) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_use_fence: NULL buffer or fence");
  }
  hl_spinlock_lock(&buffer->root->lock);
  hl_status_t st = hl_fence_join(fence, buffer->root->use_fence);
  hl_spinlock_unlock(&buffer->root->lock);
  return st;
}

hl_status_t hl_buffer_mutation_barrier(const hl_buffer_t* buffer,
                                       hl_fence_t* fence) {
  if (!buffer || !fence) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_buffer_mutation_barrier: NULL buffer or fence");
  }
  hl_spinlock_lock(&buffer->root->lock);
  hl_status_t st = hl_fence_join(fence, buffer->root->mutation_barrier);
  hl_spinlock_unlock(&buffer->root->lock);
  return st;
}

hl_status_t hl_root_create_async(hl_queue_t* queue, uint64_t size,
                                 hl_buffer_t** out_buffer) {
  // One reference, the buffer's (the alloca's op borrows it).
  hl_root_t* root = NULL;
  HL_RETURN_IF_ERROR_PLAIN(
      hl_root_create(hl_queue_device(queue), queue, HL_ROOT_MEMORY_POOL,
                     HL_BUFFER_ORIGIN_ASYNC, size, 1, &root));
  hl_status_t st =
      hl_buffer_create_view_adopting(root, 0, size, NULL, out_buffer);
  if (st) hl_root_destroy(root);  // Nobody else has seen it.
  return st;
}
