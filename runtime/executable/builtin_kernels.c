// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The built-in kernels' parameter descriptions, their validation and
// their signatures (builtin_kernels.h), and the public queries over them
// (hl_dispatch_kernel_count, hl_dispatch_kernel_name, hl_pattern_value).
//
// Arguments are validated against kernels/kernel_table.h before anything is
// queued: count, kinds and scalar sizes (INVALID_ARGUMENT naming the
// parameter), declared access against what the kernel does, alignment, and
// that the bytes the kernel will touch (derived from its size parameters)
// lie within the declared range and the buffer (OUT_OF_RANGE).
#include "runtime/executable/builtin_kernels.h"

#include <stdio.h>
#include <string.h>
#include <threads.h>

#include "kernels/pattern.h"
#include "runtime/executable/executable_module.h"
#include "runtime/memory/memory_internal.h"

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
static hl_status_t hl_builtin_validate(hl_device_t* device, const char* owner,
                                       bool peers, const hl_kernel_desc_t* desc,
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
    if (root->device != device &&
        (!peers || !hl_device_reaches(device, root->device))) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "kernel '%s' parameter %u (%s): buffer (root "
                            "%llu) belongs to another device than %s%s",
                            desc->name, i, p->name,
                            (unsigned long long)root->id, owner,
                            peers ? ", which does not reach it (see "
                                    "hl_device_enable_peer_access)"
                                  : "");
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
hl_status_t hl_builtin_kernel_lookup(const char* kernel_name,
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

//===----------------------------------------------------------------------===//
// Signatures
//===----------------------------------------------------------------------===//

static hl_kernel_signature_t hl_builtin_signatures_[HL_KERNEL_COUNT];
static once_flag hl_builtin_signatures_once_ = ONCE_FLAG_INIT;

// One 8-byte slot per parameter: kernelParams point at the slots, and the
// host kernels and hipModuleLaunchKernel read each parameter's size from its
// slot (little-endian, so a scalar's low bytes come first).
static void hl_builtin_signatures_init(void) {
  for (int k = 0; k < HL_KERNEL_COUNT; ++k) {
    const hl_kernel_desc_t* desc = &kKernels[k];
    hl_kernel_signature_t* sig = &hl_builtin_signatures_[k];
    snprintf(sig->name, sizeof(sig->name), "%s", desc->name);
    sig->kernarg_size = 8 * desc->param_count;
    sig->kernarg_align = 8;
    sig->arg_count = desc->param_count;
    sig->explicit_count = desc->param_count;
    for (uint32_t i = 0; i < desc->param_count; ++i) {
      hl_kernel_arg_desc_t* arg = &sig->args[i];
      snprintf(arg->name, sizeof(arg->name), "%s", desc->params[i].name);
      arg->offset = 8 * i;
      arg->size = desc->param_sizes[i];
      arg->kind = desc->params[i].pointer ? HL_KERNEL_VALUE_GLOBAL_BUFFER
                                          : HL_KERNEL_VALUE_BY_VALUE;
      arg->is_const =
          desc->params[i].pointer && desc->params[i].access == HL_ACCESS_READ;
    }
  }
}

const hl_kernel_signature_t* hl_builtin_kernel_signature(hl_kernel_id_t id) {
  call_once(&hl_builtin_signatures_once_, hl_builtin_signatures_init);
  return &hl_builtin_signatures_[id];
}

hl_status_t hl_builtin_kernel_validate(hl_kernel_id_t id, hl_device_t* device,
                                       const char* owner, bool peers,
                                       size_t arg_count,
                                       const hl_kernel_arg_t* args,
                                       uint64_t* out_extents) {
  return hl_builtin_validate(device, owner, peers, &kKernels[id], arg_count,
                             args, out_extents);
}
