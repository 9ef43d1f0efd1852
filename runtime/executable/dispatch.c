// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Kernel dispatch on queues (hipline/dispatch.h).
//
// Every dispatch is one queue operation around a dispatch call
// (dispatch_call.h): hl_queue_dispatch is hl_queue_dispatch_executable with
// the built-in executable. At submit the op holds an op reference on every
// bound root, so the memory cannot go while the kernel may run and the
// invocation layer can still prove uniqueness. Once the submission has its
// timeline value, each binding is recorded in its root's timeline resource:
// reads in the use fence, writes in the mutation barrier too.
//
// It runs the same way on every backend, as stream work (see
// hl_stream_work_issue and transfer.c): it checks that every bound root is
// still live, failing the submission with FAILED_PRECONDITION instead (and
// the queue too in checked mode), then launches the call, which resolves
// the device pointers (root pointer plus offset). The backend's
// |stream_ordered_host_work| says when: with it (the host backend) when the
// stream gets there, so the check sees the moment the kernel would touch
// the memory and a submission that failed by then launches nothing;
// without it (hip) at issue.

#include "hipline/dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/recycler.h"
#include "runtime/base/trace.h"
#include "runtime/executable/dispatch_call.h"
#include "runtime/memory/memory_internal.h"

//===----------------------------------------------------------------------===//
// The dispatch op
//===----------------------------------------------------------------------===//

typedef struct hl_dispatch_op_t {
  hl_op_t base;
  uint32_t queue_id;
  uint64_t value;
  hl_stream_work_t work;  // Filled at issue.
  // The bound roots hold op references. The call's kernarg template is the
  // op's own segment: pointers are written into it when the kernel runs.
  hl_dispatch_call_t call;
} hl_dispatch_op_t;

static void hl_dispatch_on_submit(hl_op_t* base, hl_queue_t* queue,
                                  uint64_t value) {
  hl_dispatch_op_t* op = (hl_dispatch_op_t*)base;
  op->value = value;
  for (uint32_t i = 0; i < op->call.arg_count; ++i) {
    const hl_dispatch_binding_t* b = &op->call.bindings[i];
    if (b->root) {
      hl_root_record_use(b->root, queue, value,
                         (b->access & HL_ACCESS_WRITE) != 0);
    }
  }
}

// Checks every bound root. On a violation fails the submission (and, in
// checked mode, the queue) and returns false.
static bool hl_dispatch_check(hl_dispatch_op_t* op) {
  const hl_kernel_signature_t* sig = op->call.kernel.signature;
  for (uint32_t i = 0; i < op->call.arg_count; ++i) {
    hl_root_t* root = op->call.bindings[i].root;
    if (!root) continue;
    char what[224];
    snprintf(what, sizeof(what),
             "dispatch of %s on queue %u (submission %llu), %s %u (%s)",
             sig->name, op->queue_id, (unsigned long long)op->value,
             hl_dispatch_call_arg_word(&op->call), i, sig->args[i].name);
    if (!hl_root_check_use(root, what, op->work.submission, op->work.checked)) {
      return false;
    }
  }
  return true;
}

// The stream work: check the bindings, then launch.
static hl_status_t hl_dispatch_run(void* user) {
  hl_dispatch_op_t* op = (hl_dispatch_op_t*)user;
  if (!hl_dispatch_check(op)) return NULL;
  hl_backend_t* backend = op->work.backend;
  const hl_launch_config_t* c = &op->call.config;
  hl_status_t st = hl_dispatch_call_launch(backend, &op->call, op->call.kernarg,
                                           op->work.stream);
  if (st) {
    st = hl_status_annotate(
        st,
        "dispatching %s ('%s' object) on queue %u (grid %ux%ux%u, block "
        "%ux%ux%u)",
        op->call.kernel.signature->name, op->call.kernel.target, op->queue_id,
        c->grid.x, c->grid.y, c->grid.z, c->block.x, c->block.y, c->block.z);
  }
  // A kernel that did not run left its outputs unwritten.
  return hl_stream_work_write_failed(&op->work, st);
}

static hl_status_t hl_dispatch_issue(hl_op_t* base, hl_issue_ctx_t* ctx) {
  hl_dispatch_op_t* op = (hl_dispatch_op_t*)base;
  // A device would get the launch now; the stream may run it later.
  op->call.config.launch_ns = hl_time_now();
  hl_stream_work_bind(&op->work, ctx);
  return hl_stream_work_issue(ctx, &op->work.gate, hl_dispatch_run, op, false);
}

// Dispatch ops are recycled (base/recycler.h).
static hl_recycler_t hl_dispatch_op_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_dispatch_op_t), 1024, "a dispatch");

static void hl_dispatch_release(hl_op_t* base, hl_status_t status) {
  (void)status;
  hl_dispatch_op_t* op = (hl_dispatch_op_t*)base;
  for (uint32_t i = 0; i < op->call.arg_count; ++i) {
    hl_root_t* root = op->call.bindings[i].root;
    if (root) hl_root_release_for_op(root);
  }
  hl_dispatch_call_deinitialize(&op->call);
  hl_recycler_free(&hl_dispatch_op_recycler_, op);
}

// hl_dispatch_release where neither a root nor the executable loses its
// last reference (see hl_op_vtable_t.release_light).
static bool hl_dispatch_release_light(hl_op_t* base, hl_status_t status) {
  (void)status;
  hl_dispatch_op_t* op = (hl_dispatch_op_t*)base;
  if (!hl_executable_release_unless_last(op->call.executable)) return false;
  op->call.executable = NULL;
  for (uint32_t i = 0; i < op->call.arg_count; ++i) {
    hl_root_t* root = op->call.bindings[i].root;
    if (!root) continue;
    if (!hl_root_release_for_op_unless_last(root)) {
      // The roots before |i| are released: clear them, so that
      // hl_dispatch_release (run by the completion thread instead) releases
      // only this one and those after it.
      for (uint32_t j = 0; j < i; ++j) op->call.bindings[j].root = NULL;
      return false;
    }
  }
  hl_dispatch_call_deinitialize(&op->call);
  hl_recycler_free(&hl_dispatch_op_recycler_, op);
  return true;
}

static const hl_op_vtable_t hl_dispatch_vtable = {
    .issue = hl_dispatch_issue,
    .release = hl_dispatch_release,
    .release_light = hl_dispatch_release_light,
    .on_submit = hl_dispatch_on_submit,
};

static hl_status_t hl_dispatch_submit(
    hl_queue_t* queue, const hl_fence_t* wait_fence,
    const hl_fence_t* signal_fence, hl_executable_t* executable,
    const char* kernel_name, const hl_dispatch_config_t* config,
    size_t arg_count, const hl_kernel_arg_t* args) {
  char owner[32];
  snprintf(owner, sizeof(owner), "queue %u", hl_queue_id(queue));
  hl_dispatch_op_t* op = NULL;
  HL_RETURN_IF_ERROR(
      hl_recycler_alloc_default(&hl_dispatch_op_recycler_, (void**)&op),
      "a dispatch of '%s'", kernel_name);
  hl_status_t st = hl_dispatch_call_initialize(
      &op->call, hl_queue_device(queue), owner, true, executable, kernel_name,
      config, arg_count, args);
  if (st) {
    hl_recycler_free(&hl_dispatch_op_recycler_, op);
    return st;
  }
  op->base.vtable = &hl_dispatch_vtable;
  op->queue_id = hl_queue_id(queue);
  for (uint32_t i = 0; i < op->call.arg_count; ++i) {
    hl_root_t* root = op->call.bindings[i].root;
    if (root) hl_root_retain_for_op(root);
  }
  return hl_queue_submit(queue, wait_fence, signal_fence, &op->base, NULL);
}

hl_status_t hl_queue_dispatch(hl_queue_t* queue, const hl_fence_t* wait_fence,
                              const hl_fence_t* signal_fence,
                              const char* kernel_name,
                              const hl_dispatch_config_t* config,
                              size_t arg_count, const hl_kernel_arg_t* args) {
  if (!queue || !kernel_name) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_dispatch: queue or kernel_name is NULL");
  }
  HL_TRACE_ZONE_BEGIN(zone, "hl_queue_dispatch");
  hl_status_t st = hl_dispatch_submit(queue, wait_fence, signal_fence,
                                      hl_executable_builtin(), kernel_name,
                                      config, arg_count, args);
  HL_TRACE_ZONE_END(zone);
  return st;
}

hl_status_t hl_queue_dispatch_executable(
    hl_queue_t* queue, const hl_fence_t* wait_fence,
    const hl_fence_t* signal_fence, hl_executable_t* executable,
    const char* kernel_name, const hl_dispatch_config_t* config,
    size_t arg_count, const hl_kernel_arg_t* args) {
  if (!queue || !executable || !kernel_name) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_dispatch_executable: queue, executable "
                          "or kernel_name is NULL");
  }
  HL_TRACE_ZONE_BEGIN(zone, "hl_queue_dispatch_executable");
  hl_status_t st =
      hl_dispatch_submit(queue, wait_fence, signal_fence, executable,
                         kernel_name, config, arg_count, args);
  HL_TRACE_ZONE_END(zone);
  return st;
}

//===----------------------------------------------------------------------===//
// Conveniences
//===----------------------------------------------------------------------===//

// A launch shape for a grid-stride kernel over |items| elements: 256-thread
// blocks, enough of them to cover the items, at most 1024 (the loops cover
// the rest).
static hl_dispatch_config_t hl_dispatch_shape(uint64_t items) {
  uint64_t blocks = (items + 255) / 256;
  if (blocks < 1) blocks = 1;
  if (blocks > 1024) blocks = 1024;
  hl_dispatch_config_t config = {{(uint32_t)blocks, 1, 1}, {256, 1, 1}, 0};
  return config;
}

static hl_kernel_arg_t hl_buffer_arg(hl_buffer_t* buffer, uint64_t length,
                                     hl_access_t access) {
  hl_kernel_arg_t arg = {.kind = HL_KERNEL_ARG_BUFFER,
                         .buffer = buffer,
                         .offset = 0,
                         .length = length,
                         .access = access};
  return arg;
}

static hl_kernel_arg_t hl_scalar_arg(uint64_t value, uint32_t size) {
  hl_kernel_arg_t arg = {
      .kind = HL_KERNEL_ARG_SCALAR, .scalar = value, .size = size};
  return arg;
}

// Checks that |buffer| is a whole number of 32-bit words.
static hl_status_t hl_check_words(const char* what, const hl_buffer_t* buffer) {
  if (!buffer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "%s: buffer is NULL",
                          what);
  }
  if (buffer->length % 4) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "%s: the %llu-byte buffer is not a multiple of 4 "
                          "bytes",
                          what, (unsigned long long)buffer->length);
  }
  return NULL;
}

hl_status_t hl_queue_fill_pattern(hl_queue_t* queue,
                                  const hl_fence_t* wait_fence,
                                  const hl_fence_t* signal_fence,
                                  hl_buffer_t* buffer, uint32_t seed) {
  HL_RETURN_IF_ERROR_PLAIN(hl_check_words("hl_queue_fill_pattern", buffer));
  uint64_t words = buffer->length / 4;
  hl_kernel_arg_t args[3] = {
      hl_buffer_arg(buffer, buffer->length, HL_ACCESS_WRITE),
      hl_scalar_arg(words, 8), hl_scalar_arg(seed, 4)};
  hl_dispatch_config_t config = hl_dispatch_shape(words);
  return hl_queue_dispatch(queue, wait_fence, signal_fence, "fill_pattern",
                           &config, 3, args);
}

hl_status_t hl_queue_verify_pattern(hl_queue_t* queue,
                                    const hl_fence_t* wait_fence,
                                    const hl_fence_t* signal_fence,
                                    hl_buffer_t* buffer, uint32_t seed,
                                    hl_buffer_t* counter) {
  HL_RETURN_IF_ERROR_PLAIN(hl_check_words("hl_queue_verify_pattern", buffer));
  if (!counter) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_verify_pattern: counter is NULL");
  }
  uint64_t words = buffer->length / 4;
  hl_kernel_arg_t args[4] = {
      hl_buffer_arg(buffer, buffer->length, HL_ACCESS_READ),
      hl_scalar_arg(words, 8), hl_scalar_arg(seed, 4),
      hl_buffer_arg(counter, counter->length < 4 ? counter->length : 4,
                    HL_ACCESS_READ_WRITE)};
  hl_dispatch_config_t config = hl_dispatch_shape(words);
  return hl_queue_dispatch(queue, wait_fence, signal_fence, "verify_pattern",
                           &config, 4, args);
}

hl_status_t hl_queue_spin(hl_queue_t* queue, const hl_fence_t* wait_fence,
                          const hl_fence_t* signal_fence, uint64_t cycles) {
  hl_kernel_arg_t args[2] = {hl_scalar_arg(cycles, 8),
                             hl_buffer_arg(NULL, 0, HL_ACCESS_READ_WRITE)};
  hl_dispatch_config_t config = {{1, 1, 1}, {1, 1, 1}, 0};
  return hl_queue_dispatch(queue, wait_fence, signal_fence, "spin", &config, 2,
                           args);
}
