// Dispatch of user executables (hl_queue_dispatch_executable).
//
// The op works as the built-in dispatch does (dispatch.c): op references on
// the bound roots from submit, uses recorded in the roots' timelines once
// the submission has its value, and stream work that checks every root is
// live before it resolves pointers and launches. What differs is where the
// signature comes from (the object's metadata) and the launch: the op lays
// out the kernel's whole kernarg segment (explicit arguments at their
// metadata offsets, hidden ones filled by kernarg.h); a GPU object is
// launched with kernelParams pointing into it (the HIP runtime lays out
// and fills the hidden arguments itself, from the same metadata), a host
// object through the host backend's trampoline with the segment's address.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipline/dispatch.h"
#include "runtime/base/trace.h"
#include "runtime/executable/kernarg.h"
#include "runtime/executable/user_executable.h"
#include "runtime/memory/memory_internal.h"

typedef struct hl_user_dispatch_op_t {
  hl_op_t base;
  hl_executable_t* executable;  // Retained.
  hl_user_kernel_t kernel;
  hl_launch_config_t config;
  uint32_t queue_id;
  uint64_t value;
  uint32_t arg_count;  // Explicit arguments.
  // Per explicit argument: the bound root (op reference; NULL for scalars
  // and null pointers), its offset from the root's start and whether the
  // binding writes.
  hl_root_t* roots[HL_KERNEL_SIGNATURE_MAX_ARGS];
  uint64_t offsets[HL_KERNEL_SIGNATURE_MAX_ARGS];
  bool writes[HL_KERNEL_SIGNATURE_MAX_ARGS];
  void* params[HL_KERNEL_SIGNATURE_MAX_ARGS];
  hl_stream_work_t work;
  unsigned char* kernarg;  // kernarg_size bytes, 16-byte aligned.
} hl_user_dispatch_op_t;

static void hl_user_dispatch_on_submit(hl_op_t* base, hl_queue_t* queue,
                                       uint64_t value) {
  hl_user_dispatch_op_t* op = (hl_user_dispatch_op_t*)base;
  op->value = value;
  for (uint32_t i = 0; i < op->arg_count; ++i) {
    if (op->roots[i]) {
      hl_root_record_use(op->roots[i], queue, value, op->writes[i]);
    }
  }
}

// Checks every bound root and writes the pointers into the kernarg segment.
static bool hl_user_dispatch_resolve(hl_user_dispatch_op_t* op) {
  const hl_kernel_signature_t* sig = op->kernel.signature;
  for (uint32_t i = 0; i < op->arg_count; ++i) {
    if (!op->roots[i]) continue;
    char what[224];
    snprintf(what, sizeof(what),
             "dispatch of %s on queue %u (submission %llu), argument %u (%s)",
             sig->name, op->queue_id, (unsigned long long)op->value, i,
             sig->args[i].name);
    if (!hl_root_check_use(op->roots[i], what, op->work.submission,
                           op->work.checked)) {
      return false;
    }
    void* pointer = (char*)atomic_load(&op->roots[i]->ptr) + op->offsets[i];
    memcpy(op->kernarg + sig->args[i].offset, &pointer, sizeof(pointer));
  }
  return true;
}

static hl_status_t hl_user_dispatch_run(void* user) {
  hl_user_dispatch_op_t* op = user;
  if (!hl_user_dispatch_resolve(op)) return NULL;
  hl_backend_t* backend = op->work.backend;
  void* host_params[2];
  void** params = op->params;
  if (op->kernel.host_entry) {
    host_params[0] = &op->kernel.host_entry;
    host_params[1] = &op->kernarg;
    params = host_params;
  }
  hl_status_t st = backend->vtable->launch_kernel(
      backend, op->kernel.function, &op->config, params, op->work.stream);
  if (st) {
    st = hl_status_annotate(
        st,
        "dispatching %s ('%s' object) on queue %u (grid %ux%ux%u, block "
        "%ux%ux%u)",
        op->kernel.signature->name, op->kernel.target, op->queue_id,
        op->config.grid.x, op->config.grid.y, op->config.grid.z,
        op->config.block.x, op->config.block.y, op->config.block.z);
  }
  return hl_stream_work_write_failed(&op->work, st);
}

static hl_status_t hl_user_dispatch_issue(hl_op_t* base, hl_issue_ctx_t* ctx) {
  hl_user_dispatch_op_t* op = (hl_user_dispatch_op_t*)base;
  op->config.launch_ns = hl_time_now();
  hl_stream_work_bind(&op->work, ctx);
  return hl_stream_work_issue(ctx, &op->work.gate, hl_user_dispatch_run, op,
                              false);
}

static void hl_user_dispatch_free(hl_user_dispatch_op_t* op) {
  for (uint32_t i = 0; i < op->arg_count; ++i) {
    if (op->roots[i]) hl_root_release_for_op(op->roots[i]);
  }
  hl_executable_release(op->executable);
  free(op->kernarg);
  free(op);
}

static void hl_user_dispatch_release(hl_op_t* base, hl_status_t status) {
  (void)status;
  hl_user_dispatch_free((hl_user_dispatch_op_t*)base);
}

static const hl_op_vtable_t hl_user_dispatch_vtable = {
    .issue = hl_user_dispatch_issue,
    .release = hl_user_dispatch_release,
    .on_submit = hl_user_dispatch_on_submit,
};

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

static hl_status_t hl_user_arg_check(hl_device_t* device,
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
  if (root->device != device) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "kernel '%s' argument %u (%s): buffer (root %llu) "
                          "belongs to another device than the queue's",
                          sig->name, i, d->name, (unsigned long long)root->id);
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

static hl_status_t hl_user_args_check(hl_device_t* device,
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
    HL_RETURN_IF_ERROR_PLAIN(hl_user_arg_check(device, sig, i, &args[i]));
  }
  return NULL;
}

//===----------------------------------------------------------------------===//
// Submission
//===----------------------------------------------------------------------===//

static hl_launch_config_t hl_user_launch_config(
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

// Fills the op's kernarg segment: scalars and hidden arguments now,
// pointers when the work runs.
static void hl_user_dispatch_layout(hl_user_dispatch_op_t* op,
                                    const hl_kernel_arg_t* args) {
  const hl_kernel_signature_t* sig = op->kernel.signature;
  const hl_launch_config_t* c = &op->config;
  uint32_t grid[3] = {c->grid.x, c->grid.y, c->grid.z};
  uint32_t block[3] = {c->block.x, c->block.y, c->block.z};
  for (uint32_t i = 0; i < sig->arg_count; ++i) {
    const hl_kernel_arg_desc_t* d = &sig->args[i];
    unsigned char* slot = op->kernarg + d->offset;
    if (i >= sig->explicit_count) {
      hl_kernarg_fill_hidden(d->kind, slot, d->size, grid, block,
                             c->shared_bytes);
      continue;
    }
    op->params[i] = slot;
    if (d->kind == HL_KERNEL_VALUE_BY_VALUE) {
      memcpy(slot, &args[i].scalar, d->size);
    } else if (args[i].buffer) {
      op->roots[i] = args[i].buffer->root;
      op->offsets[i] = args[i].buffer->offset + args[i].offset;
      op->writes[i] = (args[i].access & HL_ACCESS_WRITE) != 0;
      hl_root_retain_for_op(op->roots[i]);
    }
  }
}

static hl_status_t hl_user_dispatch_impl(
    hl_queue_t* queue, const hl_fence_t* wait_fence,
    const hl_fence_t* signal_fence, hl_executable_t* executable,
    const char* kernel_name, const hl_dispatch_config_t* config,
    size_t arg_count, const hl_kernel_arg_t* args) {
  if (!queue || !executable || !kernel_name) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_dispatch_executable: queue, executable "
                          "or kernel_name is NULL");
  }
  hl_device_t* device = hl_queue_device(queue);
  hl_user_kernel_t kernel;
  HL_RETURN_IF_ERROR(
      hl_user_executable_kernel(executable, device, kernel_name, &kernel),
      "dispatching '%s' on queue %u", kernel_name, hl_queue_id(queue));
  HL_RETURN_IF_ERROR_PLAIN(
      hl_user_args_check(device, kernel.signature, arg_count, args));
  hl_user_dispatch_op_t* op = calloc(1, sizeof(*op));
  size_t kernarg_size = (kernel.signature->kernarg_size + 15u) & ~15u;
  unsigned char* kernarg =
      op ? aligned_alloc(16, kernarg_size ? kernarg_size : 16) : NULL;
  if (!kernarg) {
    free(op);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "a dispatch of '%s'",
                          kernel_name);
  }
  memset(kernarg, 0, kernarg_size ? kernarg_size : 16);
  op->base.vtable = &hl_user_dispatch_vtable;
  op->kernarg = kernarg;
  op->kernel = kernel;
  op->executable = executable;
  hl_executable_retain(executable);
  op->queue_id = hl_queue_id(queue);
  op->arg_count = kernel.signature->explicit_count;
  op->config = hl_user_launch_config(config);
  hl_user_dispatch_layout(op, args);
  return hl_queue_submit(queue, wait_fence, signal_fence, &op->base, NULL);
}

hl_status_t hl_queue_dispatch_executable(
    hl_queue_t* queue, const hl_fence_t* wait_fence,
    const hl_fence_t* signal_fence, hl_executable_t* executable,
    const char* kernel_name, const hl_dispatch_config_t* config,
    size_t arg_count, const hl_kernel_arg_t* args) {
  HL_TRACE_ZONE_BEGIN(zone, "hl_queue_dispatch_executable");
  hl_status_t st =
      hl_user_dispatch_impl(queue, wait_fence, signal_fence, executable,
                            kernel_name, config, arg_count, args);
  HL_TRACE_ZONE_END(zone);
  return st;
}
