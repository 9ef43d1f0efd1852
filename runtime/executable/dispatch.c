// Kernel dispatch on queues (hipline/dispatch.h).
//
// A dispatch is one queue operation. At submit it holds an op reference on
// every bound root, so the memory cannot go while the kernel may run and the
// invocation layer can still prove uniqueness. Once the submission has its
// timeline value, each binding is recorded in its root's timeline resource:
// reads in the use fence, writes in the mutation barrier too.
//
// It runs the same way on every backend, as stream work (see
// hl_stream_work_issue and transfer.c): it checks that every bound root is
// still live, failing the submission with FAILED_PRECONDITION instead (and
// the queue too in checked mode), resolves the device pointers (root
// pointer plus offset) and launches the device's module function through
// the backend's launch_kernel. The backend's |stream_ordered_host_work|
// says when: with it (the host backend) when the stream gets there, so the
// check sees the moment the kernel would touch the memory and a submission
// that failed by then launches nothing; without it (hip) at issue.
//
// Arguments are validated against kernels/kernel_table.h before anything is
// queued: count, kinds and scalar sizes (INVALID_ARGUMENT naming the
// parameter), declared access against what the kernel does, alignment, and
// that the bytes the kernel will touch (derived from its size parameters)
// lie within the declared range and the buffer (OUT_OF_RANGE).

#include "hipline/dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/pattern.h"
#include "runtime/base/recycler.h"
#include "runtime/base/trace.h"
#include "runtime/executable/dispatch_internal.h"
#include "runtime/executable/executable_cache.h"
#include "runtime/memory/memory_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kernel scalar arguments are stored little-endian"
#endif

//===----------------------------------------------------------------------===//
// Parameter descriptions
//===----------------------------------------------------------------------===//

// What the dispatch layer needs to know about one kernel parameter beyond
// its size (which comes from HL_KERNEL_TABLE).
typedef struct hl_param_desc_t {
  const char* name;
  bool pointer;
  // Pointers only:
  hl_access_t access;     // What the kernel does through it.
  bool nullable;          // A BUFFER argument without a buffer passes NULL.
  uint32_t element_size;  // Required alignment and extent unit.
  // Index of the scalar holding the element count the kernel touches, or
  // -1 for exactly one element.
  int extent_param;
} hl_param_desc_t;

#define HL_SCALAR_(n) \
  { .name = (n) }
#define HL_POINTER_(n, acc, elem, extent)                                  \
  {                                                                        \
    .name = (n), .pointer = true, .access = (acc), .element_size = (elem), \
    .extent_param = (extent)                                               \
  }

// One row per kernel, in id order; the static asserts below keep the counts
// in step with HL_KERNEL_TABLE.
static const hl_param_desc_t kFillPatternParams[] = {
    HL_POINTER_("buf", HL_ACCESS_WRITE, 4, 1), HL_SCALAR_("words"),
    HL_SCALAR_("seed")};
static const hl_param_desc_t kVerifyPatternParams[] = {
    HL_POINTER_("buf", HL_ACCESS_READ, 4, 1), HL_SCALAR_("words"),
    HL_SCALAR_("seed"),
    HL_POINTER_("out_mismatches", HL_ACCESS_READ_WRITE, 4, -1)};
static const hl_param_desc_t kCopyParams[] = {
    HL_POINTER_("dst", HL_ACCESS_WRITE, 1, 2),
    HL_POINTER_("src", HL_ACCESS_READ, 1, 2), HL_SCALAR_("bytes")};
static const hl_param_desc_t kSpinParams[] = {HL_SCALAR_("cycles"),
                                              {.name = "out_blocks_done",
                                               .pointer = true,
                                               .access = HL_ACCESS_READ_WRITE,
                                               .nullable = true,
                                               .element_size = 4,
                                               .extent_param = -1}};
static const hl_param_desc_t kAxpyParams[] = {
    HL_SCALAR_("a"), HL_POINTER_("x", HL_ACCESS_READ, 4, 3),
    HL_POINTER_("y", HL_ACCESS_READ_WRITE, 4, 3), HL_SCALAR_("n")};

#define HL_COUNT_OF_(a) (sizeof(a) / sizeof((a)[0]))
#define HL_CHECK_COUNT_(ID, name, count, types)            \
  _Static_assert(HL_COUNT_OF_(k##ID##_PARAMS_) == (count), \
                 "dispatch parameter list of " #name " is stale");
#define kFILL_PATTERN_PARAMS_ kFillPatternParams
#define kVERIFY_PATTERN_PARAMS_ kVerifyPatternParams
#define kCOPY_PARAMS_ kCopyParams
#define kSPIN_PARAMS_ kSpinParams
#define kAXPY_PARAMS_ kAxpyParams
HL_KERNEL_TABLE(HL_CHECK_COUNT_)
#undef HL_CHECK_COUNT_

typedef struct hl_kernel_desc_t {
  const char* name;
  uint32_t param_count;
  uint32_t param_sizes[HL_KERNEL_MAX_PARAMS];
  const hl_param_desc_t* params;
} hl_kernel_desc_t;

static const hl_kernel_desc_t kKernels[HL_KERNEL_COUNT] = {
#define HL_KERNEL_DESC_(ID, kname, count, types)                          \
  [HL_KERNEL_##ID] = {.name = #kname,                                     \
                      .param_count = (count),                             \
                      .param_sizes = HL_KERNEL_PARAM_SIZES(count, types), \
                      .params = k##ID##_PARAMS_},
    HL_KERNEL_TABLE(HL_KERNEL_DESC_)
#undef HL_KERNEL_DESC_
};

size_t hl_dispatch_kernel_count(void) { return HL_KERNEL_COUNT; }

const char* hl_dispatch_kernel_name(size_t index) {
  return index < HL_KERNEL_COUNT ? kKernels[index].name : NULL;
}

uint32_t hl_pattern_value(uint32_t seed, uint64_t index) {
  return hl_pattern_word(seed, index);
}

//===----------------------------------------------------------------------===//
// The dispatch op
//===----------------------------------------------------------------------===//

// One kernelParams slot: the bytes the kernel reads for a parameter.
typedef union hl_param_slot_t {
  uint64_t bits;
  void* pointer;
} hl_param_slot_t;

typedef struct hl_dispatch_op_t {
  hl_op_t base;
  hl_kernel_id_t kernel;
  const hl_kernel_desc_t* desc;
  hl_backend_function_t* function;  // Owned by the device's module.
  hl_launch_config_t config;
  // Per parameter: the bound root (op reference; NULL for scalars and NULL
  // pointers), its offset from the root's start, and whether the binding
  // writes. Scalars are in |slots| from the start; pointers are resolved
  // when the kernel runs.
  hl_root_t* roots[HL_KERNEL_MAX_PARAMS];
  uint64_t offsets[HL_KERNEL_MAX_PARAMS];
  bool writes[HL_KERNEL_MAX_PARAMS];
  hl_param_slot_t slots[HL_KERNEL_MAX_PARAMS];
  void* params[HL_KERNEL_MAX_PARAMS];
  uint32_t queue_id;
  uint64_t value;
  hl_stream_work_t work;  // Filled at issue.
} hl_dispatch_op_t;

static void hl_dispatch_on_submit(hl_op_t* base, hl_queue_t* queue,
                                  uint64_t value) {
  hl_dispatch_op_t* op = (hl_dispatch_op_t*)base;
  op->value = value;
  for (uint32_t i = 0; i < op->desc->param_count; ++i) {
    if (op->roots[i]) {
      hl_root_record_use(op->roots[i], queue, value, op->writes[i]);
    }
  }
}

// Checks every bound root and resolves the pointer slots. On a violation
// fails the submission (and, in checked mode, the queue) and returns false.
static bool hl_dispatch_resolve(hl_dispatch_op_t* op) {
  for (uint32_t i = 0; i < op->desc->param_count; ++i) {
    if (!op->roots[i]) continue;
    char what[160];
    snprintf(what, sizeof(what),
             "dispatch of %s on queue %u (submission %llu), parameter %u (%s)",
             op->desc->name, op->queue_id, (unsigned long long)op->value, i,
             op->desc->params[i].name);
    if (!hl_root_check_use(op->roots[i], what, op->work.submission,
                           op->work.checked)) {
      return false;
    }
    op->slots[i].pointer =
        (char*)atomic_load(&op->roots[i]->ptr) + op->offsets[i];
  }
  return true;
}

// The stream work: check and resolve the bindings, then launch.
static hl_status_t hl_dispatch_run(void* user) {
  hl_dispatch_op_t* op = (hl_dispatch_op_t*)user;
  if (!hl_dispatch_resolve(op)) return NULL;
  hl_backend_t* backend = op->work.backend;
  hl_status_t st = backend->vtable->launch_kernel(
      backend, op->function, &op->config, op->params, op->work.stream);
  if (st) {
    st = hl_status_annotate(
        st, "dispatching %s on queue %u (grid %ux%ux%u, block %ux%ux%u)",
        op->desc->name, op->queue_id, op->config.grid.x, op->config.grid.y,
        op->config.grid.z, op->config.block.x, op->config.block.y,
        op->config.block.z);
  }
  // A kernel that did not run left its outputs unwritten.
  return hl_stream_work_write_failed(&op->work, st);
}

static hl_status_t hl_dispatch_issue(hl_op_t* base, hl_issue_ctx_t* ctx) {
  hl_dispatch_op_t* op = (hl_dispatch_op_t*)base;
  // A device would get the launch now; the stream may run it later.
  op->config.launch_ns = hl_time_now();
  hl_stream_work_bind(&op->work, ctx);
  return hl_stream_work_issue(ctx, &op->work.gate, hl_dispatch_run, op, false);
}

// Dispatch ops are recycled (base/recycler.h).
static hl_recycler_t hl_dispatch_op_recycler_ =
    HL_RECYCLER_INITIALIZER(sizeof(hl_dispatch_op_t), 1024, "a dispatch");

static void hl_dispatch_release(hl_op_t* base, hl_status_t status) {
  (void)status;
  hl_dispatch_op_t* op = (hl_dispatch_op_t*)base;
  for (uint32_t i = 0; i < op->desc->param_count; ++i) {
    if (op->roots[i]) hl_root_release_for_op(op->roots[i]);
  }
  hl_recycler_free(&hl_dispatch_op_recycler_, op);
}

// hl_dispatch_release where no root loses its last reference (see
// hl_op_vtable_t.release_light).
static bool hl_dispatch_release_light(hl_op_t* base, hl_status_t status) {
  (void)status;
  hl_dispatch_op_t* op = (hl_dispatch_op_t*)base;
  for (uint32_t i = 0; i < op->desc->param_count; ++i) {
    if (!op->roots[i]) continue;
    if (!hl_root_release_for_op_unless_last(op->roots[i])) {
      // The roots before |i| are released: clear them, so that
      // hl_dispatch_release (run by the completion thread instead) releases
      // only this one and those after it.
      for (uint32_t j = 0; j < i; ++j) op->roots[j] = NULL;
      return false;
    }
  }
  hl_recycler_free(&hl_dispatch_op_recycler_, op);
  return true;
}

static const hl_op_vtable_t hl_dispatch_vtable = {
    .issue = hl_dispatch_issue,
    .release = hl_dispatch_release,
    .release_light = hl_dispatch_release_light,
    .on_submit = hl_dispatch_on_submit,
};

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

static const char* hl_access_name(hl_access_t access) {
  switch (access) {
    case HL_ACCESS_READ:
      return "read";
    case HL_ACCESS_WRITE:
      return "write";
    case HL_ACCESS_READ_WRITE:
      return "read-write";
  }
  return "invalid";
}

// The value of scalar argument |arg| as the kernel sees it.
static uint64_t hl_scalar_value(const hl_kernel_arg_t* arg) {
  return arg->size >= 8 ? arg->scalar
                        : arg->scalar & ((UINT64_C(1) << (8 * arg->size)) - 1);
}

// The bytes a pointer parameter touches, given the (validated) scalars.
static hl_status_t hl_param_extent(const hl_kernel_desc_t* desc, uint32_t i,
                                   const hl_kernel_arg_t* args,
                                   uint64_t* out_bytes) {
  const hl_param_desc_t* p = &desc->params[i];
  uint64_t count =
      p->extent_param < 0 ? 1 : hl_scalar_value(&args[p->extent_param]);
  if (count > UINT64_MAX / p->element_size) {
    return HL_MAKE_STATUS(HL_STATUS_OUT_OF_RANGE,
                          "kernel '%s' parameter %u (%s): %s = %llu elements "
                          "of %u bytes overflows",
                          desc->name, i, p->name,
                          desc->params[p->extent_param].name,
                          (unsigned long long)count, p->element_size);
  }
  *out_bytes = count * p->element_size;
  return NULL;
}

// |owner| names what the work is recorded for ("queue 3", "command buffer")
// in messages; buffers must belong to |device|.
static hl_status_t hl_dispatch_validate(hl_device_t* device, const char* owner,
                                        const hl_kernel_desc_t* desc,
                                        size_t arg_count,
                                        const hl_kernel_arg_t* args,
                                        uint64_t* extents) {
  if (arg_count != desc->param_count) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "kernel '%s' takes %u parameters; %zu arguments "
                          "were given",
                          desc->name, desc->param_count, arg_count);
  }
  if (arg_count && !args) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "kernel '%s': args is NULL", desc->name);
  }
  // Kinds and sizes first: the extents below read the scalars.
  for (uint32_t i = 0; i < desc->param_count; ++i) {
    const hl_param_desc_t* p = &desc->params[i];
    const hl_kernel_arg_t* a = &args[i];
    if (p->pointer && a->kind != HL_KERNEL_ARG_BUFFER) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "kernel '%s' parameter %u (%s) is a pointer and "
                            "needs a BUFFER argument",
                            desc->name, i, p->name);
    }
    if (!p->pointer && a->kind != HL_KERNEL_ARG_SCALAR) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "kernel '%s' parameter %u (%s) is a %u-byte scalar "
                            "and needs a SCALAR argument",
                            desc->name, i, p->name, desc->param_sizes[i]);
    }
    if (!p->pointer && a->size != desc->param_sizes[i]) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "kernel '%s' parameter %u (%s) is %u bytes; the "
                            "argument has %u",
                            desc->name, i, p->name, desc->param_sizes[i],
                            a->size);
    }
  }
  for (uint32_t i = 0; i < desc->param_count; ++i) {
    const hl_param_desc_t* p = &desc->params[i];
    const hl_kernel_arg_t* a = &args[i];
    extents[i] = 0;
    if (!p->pointer) continue;
    if (!a->buffer) {
      if (p->nullable) continue;
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "kernel '%s' parameter %u (%s): buffer is NULL",
                            desc->name, i, p->name);
    }
    if (a->access != HL_ACCESS_READ && a->access != HL_ACCESS_WRITE &&
        a->access != HL_ACCESS_READ_WRITE) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "kernel '%s' parameter %u (%s): access %d is not "
                            "a hl_access_t",
                            desc->name, i, p->name, (int)a->access);
    }
    if ((a->access & p->access) != p->access) {
      // An undeclared write would leave the mutation barrier behind.
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "kernel '%s' parameter %u (%s): the kernel does "
                            "%s access; the argument declares %s",
                            desc->name, i, p->name, hl_access_name(p->access),
                            hl_access_name(a->access));
    }
    const hl_root_t* root = a->buffer->root;
    if (root->device != device) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "kernel '%s' parameter %u (%s): buffer (root "
                            "%llu) belongs to another device than %s",
                            desc->name, i, p->name,
                            (unsigned long long)root->id, owner);
    }
    uint64_t length = a->buffer->length;
    if (a->offset > length || a->length > length - a->offset) {
      return HL_MAKE_STATUS(
          HL_STATUS_OUT_OF_RANGE,
          "kernel '%s' parameter %u (%s): range [%llu, "
          "+%llu) exceeds the %llu-byte buffer",
          desc->name, i, p->name, (unsigned long long)a->offset,
          (unsigned long long)a->length, (unsigned long long)length);
    }
    if ((a->buffer->offset + a->offset) % p->element_size) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "kernel '%s' parameter %u (%s): offset %llu in "
                            "the allocation is not a multiple of %u",
                            desc->name, i, p->name,
                            (unsigned long long)(a->buffer->offset + a->offset),
                            p->element_size);
    }
    HL_RETURN_IF_ERROR_PLAIN(hl_param_extent(desc, i, args, &extents[i]));
    if (extents[i] > a->length) {
      return HL_MAKE_STATUS(
          HL_STATUS_OUT_OF_RANGE,
          "kernel '%s' parameter %u (%s): the kernel touches %llu bytes; the "
          "argument's range is %llu bytes",
          desc->name, i, p->name, (unsigned long long)extents[i],
          (unsigned long long)a->length);
    }
  }
  // A written range must not overlap any other touched range of the same
  // allocation: the kernels assume that (copy requires it, and a racing
  // write would make the result depend on the launch shape).
  for (uint32_t i = 0; i < desc->param_count; ++i) {
    if (!desc->params[i].pointer || !args[i].buffer || !extents[i]) continue;
    if (!(desc->params[i].access & HL_ACCESS_WRITE)) continue;
    const hl_root_t* root = args[i].buffer->root;
    uint64_t begin = args[i].buffer->offset + args[i].offset;
    for (uint32_t j = 0; j < desc->param_count; ++j) {
      if (j == i || !desc->params[j].pointer || !args[j].buffer ||
          !extents[j] || args[j].buffer->root != root) {
        continue;
      }
      uint64_t other = args[j].buffer->offset + args[j].offset;
      if (begin < other + extents[j] && other < begin + extents[i]) {
        return HL_MAKE_STATUS(
            HL_STATUS_INVALID_ARGUMENT,
            "kernel '%s' parameter %u (%s) writes [%llu, +%llu) of root %llu, "
            "which overlaps parameter %u (%s) at [%llu, +%llu)",
            desc->name, i, desc->params[i].name, (unsigned long long)begin,
            (unsigned long long)extents[i], (unsigned long long)root->id, j,
            desc->params[j].name, (unsigned long long)other,
            (unsigned long long)extents[j]);
      }
    }
  }
  return NULL;
}

// Finds kernel |kernel_name|; NOT_FOUND names the kernels there are.
static hl_status_t hl_dispatch_lookup(const char* kernel_name,
                                      hl_kernel_id_t* out_id) {
  hl_kernel_id_t id = hl_kernel_id_from_name(kernel_name);
  if (id == HL_KERNEL_COUNT) {
    char names[256];
    size_t used = 0;
    names[0] = '\0';
    for (int i = 0; i < HL_KERNEL_COUNT && used < sizeof(names); ++i) {
      int n = snprintf(names + used, sizeof(names) - used, "%s%s",
                       i ? ", " : "", kKernels[i].name);
      used += n > 0 ? (size_t)n : 0;
    }
    return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                          "no kernel named '%s' (kernels: %s)", kernel_name,
                          names);
  }
  *out_id = id;
  return NULL;
}

static hl_status_t hl_queue_dispatch_impl(hl_queue_t* queue,
                                          const hl_fence_t* wait_fence,
                                          const hl_fence_t* signal_fence,
                                          const char* kernel_name,
                                          const hl_dispatch_config_t* config,
                                          size_t arg_count,
                                          const hl_kernel_arg_t* args) {
  if (!queue || !kernel_name) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_dispatch: queue or kernel_name is NULL");
  }
  hl_kernel_id_t id = HL_KERNEL_COUNT;
  HL_RETURN_IF_ERROR_PLAIN(hl_dispatch_lookup(kernel_name, &id));
  const hl_kernel_desc_t* desc = &kKernels[id];
  uint64_t extents[HL_KERNEL_MAX_PARAMS];
  char owner[32];
  snprintf(owner, sizeof(owner), "queue %u", hl_queue_id(queue));
  HL_RETURN_IF_ERROR_PLAIN(hl_dispatch_validate(
      hl_queue_device(queue), owner, desc, arg_count, args, extents));

  hl_device_t* device = hl_queue_device(queue);
  const hl_executable_module_t* module = NULL;
  HL_RETURN_IF_ERROR(hl_executable_device_module(device, &module),
                     "dispatching '%s' on queue %u", desc->name,
                     hl_queue_id(queue));

  hl_dispatch_op_t* op = NULL;
  HL_RETURN_IF_ERROR(
      hl_recycler_alloc_default(&hl_dispatch_op_recycler_, (void**)&op),
      "a dispatch of '%s'", desc->name);
  op->base.vtable = &hl_dispatch_vtable;
  op->kernel = id;
  op->desc = desc;
  op->function = module->functions[id];
  op->queue_id = hl_queue_id(queue);
  hl_dispatch_config_t shape = {{1, 1, 1}, {1, 1, 1}, 0};
  if (config) shape = *config;
  op->config.grid.x = shape.grid[0] ? shape.grid[0] : 1;
  op->config.grid.y = shape.grid[1] ? shape.grid[1] : 1;
  op->config.grid.z = shape.grid[2] ? shape.grid[2] : 1;
  op->config.block.x = shape.block[0] ? shape.block[0] : 1;
  op->config.block.y = shape.block[1] ? shape.block[1] : 1;
  op->config.block.z = shape.block[2] ? shape.block[2] : 1;
  op->config.shared_bytes = shape.shared_bytes;
  for (uint32_t i = 0; i < desc->param_count; ++i) {
    op->params[i] = &op->slots[i];
    if (!desc->params[i].pointer) {
      op->slots[i].bits = hl_scalar_value(&args[i]);
    } else if (args[i].buffer) {
      op->roots[i] = args[i].buffer->root;
      op->offsets[i] = args[i].buffer->offset + args[i].offset;
      op->writes[i] = (args[i].access & HL_ACCESS_WRITE) != 0;
      hl_root_retain_for_op(op->roots[i]);
    }
  }
  return hl_queue_submit(queue, wait_fence, signal_fence, &op->base, NULL);
}

hl_status_t hl_queue_dispatch(hl_queue_t* queue, const hl_fence_t* wait_fence,
                              const hl_fence_t* signal_fence,
                              const char* kernel_name,
                              const hl_dispatch_config_t* config,
                              size_t arg_count, const hl_kernel_arg_t* args) {
  HL_TRACE_ZONE_BEGIN(zone, "hl_queue_dispatch");
  hl_status_t st = hl_queue_dispatch_impl(queue, wait_fence, signal_fence,
                                          kernel_name, config, arg_count, args);
  HL_TRACE_ZONE_END(zone);
  return st;
}

//===----------------------------------------------------------------------===//
// Dispatch calls (for command buffers)
//===----------------------------------------------------------------------===//

hl_status_t hl_dispatch_call_init(hl_device_t* device, const char* owner,
                                  const char* kernel_name,
                                  const hl_dispatch_config_t* config,
                                  size_t arg_count, const hl_kernel_arg_t* args,
                                  hl_dispatch_call_t* out_call) {
  if (!device || !kernel_name || !out_call) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "%s: dispatch kernel_name is NULL", owner);
  }
  hl_kernel_id_t id = HL_KERNEL_COUNT;
  HL_RETURN_IF_ERROR_PLAIN(hl_dispatch_lookup(kernel_name, &id));
  const hl_kernel_desc_t* desc = &kKernels[id];
  memset(out_call, 0, sizeof(*out_call));
  HL_RETURN_IF_ERROR_PLAIN(hl_dispatch_validate(device, owner, desc, arg_count,
                                                args, out_call->extents));
  const hl_executable_module_t* module = NULL;
  HL_RETURN_IF_ERROR(hl_executable_device_module(device, &module),
                     "recording a dispatch of '%s' in %s", desc->name, owner);
  out_call->kernel_name = desc->name;
  out_call->param_count = desc->param_count;
  out_call->function = module->functions[id];
  hl_dispatch_config_t shape = {{1, 1, 1}, {1, 1, 1}, 0};
  if (config) shape = *config;
  out_call->config.grid.x = shape.grid[0] ? shape.grid[0] : 1;
  out_call->config.grid.y = shape.grid[1] ? shape.grid[1] : 1;
  out_call->config.grid.z = shape.grid[2] ? shape.grid[2] : 1;
  out_call->config.block.x = shape.block[0] ? shape.block[0] : 1;
  out_call->config.block.y = shape.block[1] ? shape.block[1] : 1;
  out_call->config.block.z = shape.block[2] ? shape.block[2] : 1;
  out_call->config.shared_bytes = shape.shared_bytes;
  for (uint32_t i = 0; i < desc->param_count; ++i) {
    out_call->param_names[i] = desc->params[i].name;
    if (!desc->params[i].pointer) {
      out_call->scalars[i] = hl_scalar_value(&args[i]);
    } else if (args[i].buffer) {
      out_call->roots[i] = args[i].buffer->root;
      out_call->offsets[i] = args[i].buffer->offset + args[i].offset;
      out_call->lengths[i] = args[i].length;
      out_call->access[i] = args[i].access;
    }
  }
  return NULL;
}

// Fills |slots| and |params| for |call| with the roots' current pointers.
static void hl_dispatch_call_resolve(const hl_dispatch_call_t* call,
                                     hl_param_slot_t* slots, void** params) {
  for (uint32_t i = 0; i < call->param_count; ++i) {
    params[i] = &slots[i];
    if (call->roots[i]) {
      slots[i].pointer =
          (char*)atomic_load(&call->roots[i]->ptr) + call->offsets[i];
    } else {
      slots[i].bits = call->scalars[i];
    }
  }
}

hl_status_t hl_dispatch_call_launch(hl_backend_t* backend,
                                    const hl_dispatch_call_t* call,
                                    hl_backend_stream_t* stream) {
  hl_param_slot_t slots[HL_KERNEL_MAX_PARAMS];
  void* params[HL_KERNEL_MAX_PARAMS];
  hl_dispatch_call_resolve(call, slots, params);
  hl_launch_config_t config = call->config;
  HL_RETURN_IF_ERROR(backend->vtable->launch_kernel(backend, call->function,
                                                    &config, params, stream),
                     "dispatching %s from a command buffer", call->kernel_name);
  return NULL;
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
