// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Command buffers (hipline/command_buffer.h): lifetime and recording.
//
// Layering: this layer sits above executable (dispatch calls), memory (roots,
// timeline resources) and timeline (queue submissions). The elision pass and
// finalize are in command_finalize.c, execution in command_execute.c.
//
// Recording appends commands whose ranges are resolved to offsets from the
// start of each buffer's root, so views of one allocation share one entry in
// |roots|.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/command/command_buffer_internal.h"

static atomic_uint_fast64_t hl_next_command_buffer_id_ = 1;

//===----------------------------------------------------------------------===//
// Lifetime
//===----------------------------------------------------------------------===//

hl_status_t hl_command_buffer_create(hl_device_t* device, uint32_t flags,
                                     hl_command_buffer_t** out_cb) {
  if (!device || !out_cb) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_command_buffer_create: NULL device or out_cb");
  }
  *out_cb = NULL;
  if (flags & ~(uint32_t)HL_COMMAND_BUFFER_FLAG_NO_ELISION) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_command_buffer_create: unknown flags 0x%x",
                          flags & ~(uint32_t)HL_COMMAND_BUFFER_FLAG_NO_ELISION);
  }
  hl_command_buffer_t* cb = calloc(1, sizeof(*cb));
  if (!cb) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating a command buffer");
  }
  if (mtx_init(&cb->graph_mutex, mtx_plain) != thrd_success) {
    free(cb);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "creating a command buffer's mutex");
  }
  atomic_init(&cb->ref_count, 1);
  hl_device_retain(device);
  cb->device = device;
  cb->flags = flags;
  cb->id = atomic_fetch_add(&hl_next_command_buffer_id_, 1);
  *out_cb = cb;
  return NULL;
}

void hl_command_buffer_retain(hl_command_buffer_t* cb) {
  if (cb) atomic_fetch_add(&cb->ref_count, 1);
}

void hl_command_buffer_release(hl_command_buffer_t* cb) {
  if (!cb || atomic_fetch_sub(&cb->ref_count, 1) != 1) return;
  for (uint32_t i = 0; i < cb->buffer_count; ++i) {
    hl_buffer_release(cb->buffers[i]);
  }
  free(cb->buffers);
  free(cb->roots);
  free(cb->root_writes);
  free(cb->commands);
  for (uint32_t i = 0; i < cb->call_count; ++i) {
    hl_command_call_destroy(cb->calls[i]);
  }
  free(cb->calls);
  free(cb->data);
  free(cb->steps);
  hl_device_t* device = cb->device;
  if (cb->graph) {
    hl_backend_t* backend = device->backend;
    backend->vtable->graph_destroy(backend, cb->graph);
  }
  mtx_destroy(&cb->graph_mutex);
  free(cb);
  hl_device_release(device);
}

//===----------------------------------------------------------------------===//
// Recording
//===----------------------------------------------------------------------===//

bool hl_command_grow(void** items, size_t size, size_t* capacity,
                     size_t needed) {
  if (needed <= *capacity) return true;
  size_t next = *capacity ? *capacity * 2 : 16;
  while (next < needed) next *= 2;
  void* grown = realloc(*items, next * size);
  if (!grown) return false;
  *items = grown;
  *capacity = next;
  return true;
}

hl_status_t hl_command_check_open(const hl_command_buffer_t* cb,
                                  const char* what) {
  if (!cb) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "%s: command buffer is NULL", what);
  }
  if (cb->finalized) {
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "%s: command buffer %llu is finalized; record before "
                          "hl_command_buffer_finalize",
                          what, (unsigned long long)cb->id);
  }
  return NULL;
}

// Checks |buffer| [offset, +length) for a command |what|.
static hl_status_t hl_command_check_range(const hl_command_buffer_t* cb,
                                          const char* what,
                                          const hl_buffer_t* buffer,
                                          uint64_t offset, uint64_t length) {
  if (!buffer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "%s: buffer is NULL",
                          what);
  }
  if (buffer->root->device != cb->device) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "%s: buffer (root %llu) belongs to another device "
                          "than command buffer %llu",
                          what, (unsigned long long)buffer->root->id,
                          (unsigned long long)cb->id);
  }
  if (length == 0) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "%s: length is 0", what);
  }
  if (offset > buffer->length || length > buffer->length - offset) {
    return HL_MAKE_STATUS(
        HL_STATUS_OUT_OF_RANGE,
        "%s: range [%llu, +%llu) exceeds the %llu-byte buffer", what,
        (unsigned long long)offset, (unsigned long long)length,
        (unsigned long long)buffer->length);
  }
  return NULL;
}

// Space for one more command, and for |buffers| (|count| of them, NULLs
// skipped) among the retained buffers and their roots, without changing
// anything visible: a later failure leaves the command buffer as it was.
static hl_status_t hl_command_reserve(hl_command_buffer_t* cb,
                                      hl_buffer_t* const* buffers,
                                      uint32_t count) {
  bool ok = hl_command_grow((void**)&cb->commands, sizeof(*cb->commands),
                            &cb->command_capacity, cb->command_count + 1);
  ok = ok &&
       hl_command_grow((void**)&cb->buffers, sizeof(*cb->buffers),
                       &cb->buffer_capacity, (size_t)cb->buffer_count + count);
  ok =
      ok && hl_command_grow((void**)&cb->roots, sizeof(*cb->roots),
                            &cb->root_capacity, (size_t)cb->root_count + count);
  ok = ok && hl_command_grow((void**)&cb->root_writes, sizeof(*cb->root_writes),
                             &cb->root_writes_capacity,
                             (size_t)cb->root_count + count);
  if (!ok) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "growing command buffer %llu",
                          (unsigned long long)cb->id);
  }
  return NULL;
}

// Adds |buffer| to the retained set (space reserved) and returns its root's
// index; |write| marks the root written.
static uint32_t hl_command_track(hl_command_buffer_t* cb, hl_buffer_t* buffer,
                                 bool write) {
  bool known = false;
  for (uint32_t i = cb->buffer_count; i-- > 0 && !known;) {
    known = cb->buffers[i] == buffer;
  }
  if (!known) {
    hl_buffer_retain(buffer);
    cb->buffers[cb->buffer_count++] = buffer;
  }
  uint32_t index = 0;
  while (index < cb->root_count && cb->roots[index] != buffer->root) ++index;
  if (index == cb->root_count) {
    cb->roots[cb->root_count] = buffer->root;
    cb->root_writes[cb->root_count] = false;
    ++cb->root_count;
  }
  cb->root_writes[index] |= write;
  return index;
}

static hl_command_t* hl_command_append(hl_command_buffer_t* cb,
                                       hl_command_kind_t kind) {
  hl_command_t* command = &cb->commands[cb->command_count++];
  memset(command, 0, sizeof(*command));
  command->kind = kind;
  ++cb->info.commands;
  return command;
}

hl_status_t hl_command_buffer_fill(hl_command_buffer_t* cb, hl_buffer_t* buffer,
                                   uint64_t offset, uint64_t length,
                                   uint32_t pattern) {
  static const char kWhat[] = "hl_command_buffer_fill";
  HL_RETURN_IF_ERROR_PLAIN(hl_command_check_open(cb, kWhat));
  HL_RETURN_IF_ERROR_PLAIN(
      hl_command_check_range(cb, kWhat, buffer, offset, length));
  if (((buffer->offset + offset) | length) & 3u) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "%s: offset %llu and length %llu must be multiples "
                          "of 4",
                          kWhat, (unsigned long long)(buffer->offset + offset),
                          (unsigned long long)length);
  }
  HL_RETURN_IF_ERROR_PLAIN(hl_command_reserve(cb, &buffer, 1));
  uint32_t root = hl_command_track(cb, buffer, true);
  hl_command_t* command = hl_command_append(cb, HL_COMMAND_FILL);
  command->target = root;
  command->target_offset = buffer->offset + offset;
  command->length = length;
  command->pattern = pattern;
  ++cb->info.fills;
  return NULL;
}

hl_status_t hl_command_buffer_update(hl_command_buffer_t* cb,
                                     const void* host_source,
                                     hl_buffer_t* buffer, uint64_t offset,
                                     uint64_t length) {
  static const char kWhat[] = "hl_command_buffer_update";
  HL_RETURN_IF_ERROR_PLAIN(hl_command_check_open(cb, kWhat));
  if (!host_source) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "%s: host_source is NULL",
                          kWhat);
  }
  HL_RETURN_IF_ERROR_PLAIN(
      hl_command_check_range(cb, kWhat, buffer, offset, length));
  if (length > HL_COMMAND_BUFFER_MAX_UPDATE_SIZE) {
    return HL_MAKE_STATUS(
        HL_STATUS_OUT_OF_RANGE,
        "%s: %llu bytes exceed the %llu-byte update limit "
        "(use hl_queue_write or a copy for more)",
        kWhat, (unsigned long long)length,
        (unsigned long long)HL_COMMAND_BUFFER_MAX_UPDATE_SIZE);
  }
  HL_RETURN_IF_ERROR_PLAIN(hl_command_reserve(cb, &buffer, 1));
  if (!hl_command_grow((void**)&cb->data, 1, &cb->data_capacity,
                       cb->data_size + (size_t)length)) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "%s: holding %llu bytes", kWhat,
                          (unsigned long long)length);
  }
  memcpy(cb->data + cb->data_size, host_source, (size_t)length);
  uint32_t root = hl_command_track(cb, buffer, true);
  hl_command_t* command = hl_command_append(cb, HL_COMMAND_UPDATE);
  command->target = root;
  command->target_offset = buffer->offset + offset;
  command->length = length;
  command->data_offset = cb->data_size;
  cb->data_size += (size_t)length;
  cb->info.update_bytes += length;
  ++cb->info.updates;
  return NULL;
}

hl_status_t hl_command_buffer_copy(hl_command_buffer_t* cb, hl_buffer_t* source,
                                   uint64_t source_offset, hl_buffer_t* target,
                                   uint64_t target_offset, uint64_t length) {
  HL_RETURN_IF_ERROR_PLAIN(hl_command_check_open(cb, "hl_command_buffer_copy"));
  HL_RETURN_IF_ERROR_PLAIN(hl_command_check_range(
      cb, "hl_command_buffer_copy source", source, source_offset, length));
  HL_RETURN_IF_ERROR_PLAIN(hl_command_check_range(
      cb, "hl_command_buffer_copy target", target, target_offset, length));
  hl_buffer_t* buffers[2] = {source, target};
  HL_RETURN_IF_ERROR_PLAIN(hl_command_reserve(cb, buffers, 2));
  uint32_t source_root = hl_command_track(cb, source, false);
  uint32_t target_root = hl_command_track(cb, target, true);
  hl_command_t* command = hl_command_append(cb, HL_COMMAND_COPY);
  command->source = source_root;
  command->source_offset = source->offset + source_offset;
  command->target = target_root;
  command->target_offset = target->offset + target_offset;
  command->length = length;
  ++cb->info.copies;
  return NULL;
}

// Checks the HL_COMMAND_ARG_* flags of |arg_flags| (may be NULL) against
// the arguments of |call|.
static hl_status_t hl_command_check_arg_flags(const char* what,
                                              const hl_dispatch_call_t* call,
                                              const uint32_t* arg_flags) {
  const hl_kernel_signature_t* sig = call->kernel.signature;
  for (uint32_t i = 0; arg_flags && i < call->arg_count; ++i) {
    uint32_t flags = arg_flags[i];
    const hl_dispatch_binding_t* b = &call->bindings[i];
    if (flags & ~(uint32_t)HL_COMMAND_ARG_WRITES_WHOLE_RANGE) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "%s: '%s' argument %u: unknown flags 0x%x", what,
                            sig->name, i, flags);
    }
    if (!flags) continue;
    if (!b->root || !(b->access & HL_ACCESS_WRITE)) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "%s: '%s' argument %u (%s) is flagged "
                            "WRITES_WHOLE_RANGE but is not a buffer with "
                            "write access",
                            what, sig->name, i, sig->args[i].name);
    }
    if (b->extent != b->length) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "%s: '%s' argument %u (%s) is flagged "
                            "WRITES_WHOLE_RANGE over %llu bytes but the kernel "
                            "writes %llu",
                            what, sig->name, i, sig->args[i].name,
                            (unsigned long long)b->length,
                            (unsigned long long)b->extent);
    }
  }
  return NULL;
}

// A recorded dispatch, validated; NULL on failure with |*out_status| set.
static hl_command_call_t* hl_command_call_create(
    hl_command_buffer_t* cb, const char* what, hl_executable_t* executable,
    const char* kernel_name, const hl_dispatch_config_t* config,
    size_t arg_count, const hl_kernel_arg_t* args, const uint32_t* arg_flags,
    hl_status_t* out_status) {
  char owner[48];
  snprintf(owner, sizeof(owner), "command buffer %llu",
           (unsigned long long)cb->id);
  // The argument count is the signature's once validated; size the arrays
  // for what was given until then.
  size_t slots = arg_count ? arg_count : 1;
  hl_command_call_t* recorded =
      calloc(1, sizeof(*recorded) + 2 * slots * sizeof(uint32_t));
  if (!recorded) {
    *out_status = HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                                 "%s: a dispatch of '%s' (%zu arguments)", what,
                                 kernel_name, arg_count);
    return NULL;
  }
  recorded->arg_roots = (uint32_t*)(recorded + 1);
  recorded->arg_flags = recorded->arg_roots + slots;
  hl_status_t st = hl_dispatch_call_initialize(
      &recorded->call, cb->device, owner, false, executable, kernel_name,
      config, arg_count, args);
  if (st) {
    free(recorded);
    *out_status = hl_status_annotate(st, "%s into %s", what, owner);
    return NULL;
  }
  st = hl_command_check_arg_flags(what, &recorded->call, arg_flags);
  if (st) {
    hl_dispatch_call_deinitialize(&recorded->call);
    free(recorded);
    *out_status = st;
    return NULL;
  }
  return recorded;
}

void hl_command_call_destroy(hl_command_call_t* recorded) {
  if (!recorded) return;
  hl_dispatch_call_deinitialize(&recorded->call);
  free(recorded);
}

static hl_status_t hl_command_record_dispatch(
    hl_command_buffer_t* cb, const char* what, hl_executable_t* executable,
    const char* kernel_name, const hl_dispatch_config_t* config,
    size_t arg_count, const hl_kernel_arg_t* args, const uint32_t* arg_flags) {
  hl_status_t st = NULL;
  hl_command_call_t* recorded =
      hl_command_call_create(cb, what, executable, kernel_name, config,
                             arg_count, args, arg_flags, &st);
  if (!recorded) return st;
  const hl_dispatch_call_t* call = &recorded->call;
  st = hl_command_reserve(cb, NULL, call->arg_count);
  if (!st && !hl_command_grow((void**)&cb->calls, sizeof(*cb->calls),
                              &cb->call_capacity, (size_t)cb->call_count + 1)) {
    st = HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                        "%s: growing command buffer %llu", what,
                        (unsigned long long)cb->id);
  }
  if (st) {
    hl_command_call_destroy(recorded);
    return st;
  }
  hl_command_t* command = hl_command_append(cb, HL_COMMAND_DISPATCH);
  command->call = cb->call_count;
  cb->calls[cb->call_count++] = recorded;
  for (uint32_t i = 0; i < call->arg_count; ++i) {
    if (!call->bindings[i].root) continue;
    recorded->arg_roots[i] =
        1 + hl_command_track(cb, args[i].buffer,
                             (call->bindings[i].access & HL_ACCESS_WRITE) != 0);
    recorded->arg_flags[i] = arg_flags ? arg_flags[i] : 0;
  }
  recorded->kernarg_at = cb->kernarg_total;
  cb->kernarg_total += call->kernarg_size;
  ++cb->info.dispatches;
  return NULL;
}

hl_status_t hl_command_buffer_dispatch(hl_command_buffer_t* cb,
                                       const char* kernel_name,
                                       const hl_dispatch_config_t* config,
                                       size_t arg_count,
                                       const hl_kernel_arg_t* args,
                                       const uint32_t* arg_flags) {
  static const char kWhat[] = "hl_command_buffer_dispatch";
  HL_RETURN_IF_ERROR_PLAIN(hl_command_check_open(cb, kWhat));
  if (!kernel_name) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "%s: kernel_name is NULL",
                          kWhat);
  }
  return hl_command_record_dispatch(cb, kWhat, hl_executable_builtin(),
                                    kernel_name, config, arg_count, args,
                                    arg_flags);
}

hl_status_t hl_command_buffer_dispatch_executable(
    hl_command_buffer_t* cb, hl_executable_t* executable,
    const char* kernel_name, const hl_dispatch_config_t* config,
    size_t arg_count, const hl_kernel_arg_t* args, const uint32_t* arg_flags) {
  static const char kWhat[] = "hl_command_buffer_dispatch_executable";
  HL_RETURN_IF_ERROR_PLAIN(hl_command_check_open(cb, kWhat));
  if (!executable || !kernel_name) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "%s: executable or kernel_name is NULL", kWhat);
  }
  return hl_command_record_dispatch(cb, kWhat, executable, kernel_name, config,
                                    arg_count, args, arg_flags);
}

hl_status_t hl_command_buffer_barrier(hl_command_buffer_t* cb) {
  HL_RETURN_IF_ERROR_PLAIN(
      hl_command_check_open(cb, "hl_command_buffer_barrier"));
  HL_RETURN_IF_ERROR_PLAIN(hl_command_reserve(cb, NULL, 0));
  hl_command_append(cb, HL_COMMAND_BARRIER);
  ++cb->info.barriers;
  return NULL;
}
