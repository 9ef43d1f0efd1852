// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Dispatch calls (dispatch_call.h).
#include "runtime/executable/dispatch_call.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/executable/builtin_kernels.h"
#include "runtime/executable/kernarg.h"
#include "runtime/memory/memory_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kernel scalar arguments are stored little-endian"
#endif

//===----------------------------------------------------------------------===//
// Validation of user kernels' arguments
//===----------------------------------------------------------------------===//

static hl_status_t hl_user_arg_check(hl_device_t* device, const char* owner,
                                     bool peers,
                                     const hl_kernel_signature_t* sig,
                                     uint32_t i, const hl_kernel_arg_t* a) {
  const hl_kernel_arg_desc_t* d = &sig->args[i];
  switch (d->kind) {
    case HL_KERNEL_VALUE_GLOBAL_BUFFER:
      if (a->kind != HL_KERNEL_ARG_BUFFER || d->size != sizeof(void*)) {
        return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                              "kernel '%s' argument %u (%s) is a "
                              "global_buffer and needs a BUFFER argument",
                              sig->name, i, d->name);
      }
      break;
    case HL_KERNEL_VALUE_BY_VALUE:
      if (a->kind != HL_KERNEL_ARG_SCALAR) {
        return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                              "kernel '%s' argument %u (%s) is a %u-byte "
                              "by_value and needs a SCALAR argument",
                              sig->name, i, d->name, d->size);
      }
      if (d->size > 8) {
        return HL_MAKE_STATUS(HL_STATUS_UNIMPLEMENTED,
                              "kernel '%s' argument %u (%s): by_value "
                              "arguments of %u bytes (over 8) are not "
                              "supported",
                              sig->name, i, d->name, d->size);
      }
      if (a->size != d->size) {
        return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                              "kernel '%s' argument %u (%s) is %u bytes; the "
                              "argument has %u",
                              sig->name, i, d->name, d->size, a->size);
      }
      return NULL;
    default:
      return HL_MAKE_STATUS(HL_STATUS_UNIMPLEMENTED,
                            "kernel '%s' argument %u (%s): value kind %s is "
                            "not supported",
                            sig->name, i, d->name,
                            hl_kernel_value_kind_name(d->kind));
  }
  if (!a->buffer) return NULL;
  if (a->access != HL_ACCESS_READ && a->access != HL_ACCESS_WRITE &&
      a->access != HL_ACCESS_READ_WRITE) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "kernel '%s' argument %u (%s): access %d is not a "
                          "hl_access_t",
                          sig->name, i, d->name, (int)a->access);
  }
  const hl_root_t* root = a->buffer->root;
  if (root->device != device &&
      (!peers || !hl_device_reaches(device, root->device))) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "kernel '%s' argument %u (%s): buffer (root %llu) "
                          "belongs to another device than %s%s",
                          sig->name, i, d->name, (unsigned long long)root->id,
                          owner,
                          peers ? ", which does not reach it (see "
                                  "hl_device_enable_peer_access)"
                                : "");
  }
  uint64_t length = a->buffer->length;
  if (a->offset > length || a->length > length - a->offset) {
    return HL_MAKE_STATUS(HL_STATUS_OUT_OF_RANGE,
                          "kernel '%s' argument %u (%s): range [%llu, +%llu) "
                          "exceeds the %llu-byte buffer",
                          sig->name, i, d->name, (unsigned long long)a->offset,
                          (unsigned long long)a->length,
                          (unsigned long long)length);
  }
  return NULL;
}

static hl_status_t hl_user_args_check(hl_device_t* device, const char* owner,
                                      bool peers,
                                      const hl_kernel_signature_t* sig,
                                      size_t arg_count,
                                      const hl_kernel_arg_t* args) {
  if (arg_count != sig->explicit_count) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "kernel '%s' takes %u arguments; %zu were given",
                          sig->name, sig->explicit_count, arg_count);
  }
  if (arg_count && !args) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "kernel '%s': args is NULL", sig->name);
  }
  for (uint32_t i = 0; i < sig->explicit_count; ++i) {
    HL_RETURN_IF_ERROR_PLAIN(
        hl_user_arg_check(device, owner, peers, sig, i, &args[i]));
  }
  return NULL;
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

static hl_launch_config_t hl_dispatch_launch_config(
    const hl_dispatch_config_t* config) {
  hl_dispatch_config_t shape = {{1, 1, 1}, {1, 1, 1}, 0};
  if (config) shape = *config;
  hl_launch_config_t c = {0};
  c.grid.x = shape.grid[0] ? shape.grid[0] : 1;
  c.grid.y = shape.grid[1] ? shape.grid[1] : 1;
  c.grid.z = shape.grid[2] ? shape.grid[2] : 1;
  c.block.x = shape.block[0] ? shape.block[0] : 1;
  c.block.y = shape.block[1] ? shape.block[1] : 1;
  c.block.z = shape.block[2] ? shape.block[2] : 1;
  c.shared_bytes = shape.shared_bytes;
  return c;
}

// Points |call|'s bindings and kernarg at inline storage or one allocation.
static hl_status_t hl_dispatch_call_storage(hl_dispatch_call_t* call,
                                            const char* kernel_name) {
  const hl_kernel_signature_t* sig = call->kernel.signature;
  call->arg_count = sig->explicit_count;
  call->kernarg_size = (sig->kernarg_size + 15u) & ~15u;
  if (call->arg_count <= HL_DISPATCH_INLINE_ARGS &&
      call->kernarg_size <= HL_DISPATCH_INLINE_KERNARG) {
    call->bindings = call->inline_bindings;
    call->kernarg = call->inline_kernarg;
    return NULL;
  }
  size_t bindings =
      ((size_t)call->arg_count * sizeof(*call->bindings) + 15u) & ~(size_t)15u;
  size_t total = bindings + call->kernarg_size;
  call->heap = aligned_alloc(16, total ? total : 16);
  if (!call->heap) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "a dispatch of '%s' (%u arguments, %u-byte kernarg)",
                          kernel_name, call->arg_count, call->kernarg_size);
  }
  memset(call->heap, 0, total ? total : 16);
  call->bindings = call->heap;
  call->kernarg = (unsigned char*)call->heap + bindings;
  return NULL;
}

// Lays out the kernarg template (scalars and hidden arguments) and the
// bindings; |extents| are the built-in kernels' (NULL for user kernels).
static void hl_dispatch_call_layout(hl_dispatch_call_t* call,
                                    const hl_kernel_arg_t* args,
                                    const uint64_t* extents) {
  const hl_kernel_signature_t* sig = call->kernel.signature;
  const hl_launch_config_t* c = &call->config;
  uint32_t grid[3] = {c->grid.x, c->grid.y, c->grid.z};
  uint32_t block[3] = {c->block.x, c->block.y, c->block.z};
  for (uint32_t i = 0; i < sig->arg_count; ++i) {
    const hl_kernel_arg_desc_t* d = &sig->args[i];
    unsigned char* slot = call->kernarg + d->offset;
    if (i >= sig->explicit_count) {
      hl_kernarg_fill_hidden(d->kind, slot, d->size, grid, block,
                             c->shared_bytes);
      continue;
    }
    if (d->kind == HL_KERNEL_VALUE_BY_VALUE) {
      memcpy(slot, &args[i].scalar, d->size);
    } else if (args[i].buffer) {
      hl_dispatch_binding_t* b = &call->bindings[i];
      b->root = args[i].buffer->root;
      b->offset = args[i].buffer->offset + args[i].offset;
      b->length = args[i].length;
      b->extent = extents ? extents[i] : args[i].length;
      b->access = args[i].access;
    }
  }
}

hl_status_t hl_dispatch_call_initialize(hl_dispatch_call_t* call,
                                        hl_device_t* device, const char* owner,
                                        bool peers, hl_executable_t* executable,
                                        const char* kernel_name,
                                        const hl_dispatch_config_t* config,
                                        size_t arg_count,
                                        const hl_kernel_arg_t* args) {
  memset(call, 0, offsetof(hl_dispatch_call_t, inline_bindings));
  uint64_t extents[HL_KERNEL_MAX_PARAMS];
  if (hl_executable_is_builtin(executable)) {
    // The arguments first: they do not depend on the device's object.
    hl_kernel_id_t id = HL_KERNEL_COUNT;
    HL_RETURN_IF_ERROR_PLAIN(hl_builtin_kernel_lookup(kernel_name, &id));
    HL_RETURN_IF_ERROR_PLAIN(hl_builtin_kernel_validate(
        id, device, owner, peers, arg_count, args, extents));
    HL_RETURN_IF_ERROR(hl_executable_kernel_resolve(executable, device,
                                                    kernel_name, &call->kernel),
                       "dispatching '%s' on %s", kernel_name, owner);
  } else {
    HL_RETURN_IF_ERROR(hl_executable_kernel_resolve(executable, device,
                                                    kernel_name, &call->kernel),
                       "dispatching '%s' on %s", kernel_name, owner);
    HL_RETURN_IF_ERROR_PLAIN(hl_user_args_check(
        device, owner, peers, call->kernel.signature, arg_count, args));
  }
  HL_RETURN_IF_ERROR_PLAIN(hl_dispatch_call_storage(call, kernel_name));
  memset(call->bindings, 0, call->arg_count * sizeof(*call->bindings));
  memset(call->kernarg, 0, call->kernarg_size);
  call->config = hl_dispatch_launch_config(config);
  hl_dispatch_call_layout(
      call, args, call->kernel.builtin != HL_KERNEL_COUNT ? extents : NULL);
  hl_executable_retain(executable);
  call->executable = executable;
  return NULL;
}

void hl_dispatch_call_deinitialize(hl_dispatch_call_t* call) {
  hl_executable_release(call->executable);
  free(call->heap);
  call->executable = NULL;
  call->heap = NULL;
}

const char* hl_dispatch_call_arg_word(const hl_dispatch_call_t* call) {
  return call->kernel.builtin != HL_KERNEL_COUNT ? "parameter" : "argument";
}

//===----------------------------------------------------------------------===//
// Launch
//===----------------------------------------------------------------------===//

hl_status_t hl_dispatch_call_launch(hl_backend_t* backend,
                                    const hl_dispatch_call_t* call,
                                    unsigned char* kernarg,
                                    hl_backend_stream_t* stream) {
  const hl_kernel_signature_t* sig = call->kernel.signature;
  if (kernarg != call->kernarg) {
    memcpy(kernarg, call->kernarg, call->kernarg_size);
  }
  void* params[HL_KERNEL_SIGNATURE_MAX_ARGS];
  for (uint32_t i = 0; i < call->arg_count; ++i) {
    const hl_dispatch_binding_t* b = &call->bindings[i];
    params[i] = kernarg + sig->args[i].offset;
    if (!b->root) continue;
    void* pointer = (char*)atomic_load(&b->root->ptr) + b->offset;
    memcpy(params[i], &pointer, sizeof(pointer));
  }
  void** launch_params = params;
  void* host_params[2];
  if (call->kernel.host_entry) {
    host_params[0] = (void*)&call->kernel.host_entry;
    host_params[1] = &kernarg;
    launch_params = host_params;
  }
  hl_launch_config_t config = call->config;
  return backend->vtable->launch_kernel(backend, call->kernel.function, &config,
                                        launch_params, stream);
}
