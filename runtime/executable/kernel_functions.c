// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The kernel-backed functions of hl_kernels_register_functions
// (hipline/dispatch.h): invocation callbacks that enqueue dispatches with the
// coarse-fences convention.
#include <string.h>

#include "hipline/dispatch.h"
#include "hipline/semaphore.h"

static hl_status_t hl_fn_fill_pattern(void* user, hl_queue_t* queue,
                                      hl_buffer_t* const* arguments,
                                      size_t argument_count,
                                      const hl_fence_t* wait_fence,
                                      const hl_fence_t* signal_fence,
                                      hl_buffer_t** out_results,
                                      size_t result_count) {
  (void)user, (void)argument_count, (void)out_results, (void)result_count;
  return hl_queue_fill_pattern(queue, wait_fence, signal_fence, arguments[0],
                               (uint32_t)hl_buffer_root_id(arguments[0]));
}

// Enqueues the copy kernel: all of |source| to the start of |target|.
static hl_status_t hl_enqueue_copy(hl_queue_t* queue,
                                   const hl_fence_t* wait_fence,
                                   const hl_fence_t* signal_fence,
                                   hl_buffer_t* source, hl_buffer_t* target) {
  uint64_t bytes = hl_buffer_length(source);
  hl_kernel_arg_t args[3] = {
      {.kind = HL_KERNEL_ARG_BUFFER,
       .buffer = target,
       .length = hl_buffer_length(target),
       .access = HL_ACCESS_WRITE},
      {.kind = HL_KERNEL_ARG_BUFFER,
       .buffer = source,
       .length = bytes,
       .access = HL_ACCESS_READ},
      {.kind = HL_KERNEL_ARG_SCALAR, .scalar = bytes, .size = 8},
  };
  uint64_t blocks = (bytes / 16 + 255) / 256;
  hl_dispatch_config_t config = {{blocks < 1      ? 1
                                  : blocks > 1024 ? 1024
                                                  : (uint32_t)blocks,
                                  1, 1},
                                 {256, 1, 1},
                                 0};
  return hl_queue_dispatch(queue, wait_fence, signal_fence, "copy", &config, 3,
                           args);
}

static hl_status_t hl_fn_copy(void* user, hl_queue_t* queue,
                              hl_buffer_t* const* arguments,
                              size_t argument_count,
                              const hl_fence_t* wait_fence,
                              const hl_fence_t* signal_fence,
                              hl_buffer_t** out_results, size_t result_count) {
  (void)user, (void)argument_count, (void)out_results, (void)result_count;
  return hl_enqueue_copy(queue, wait_fence, signal_fence, arguments[0],
                         arguments[1]);
}

static hl_status_t hl_fn_clone(void* user, hl_queue_t* queue,
                               hl_buffer_t* const* arguments,
                               size_t argument_count,
                               const hl_fence_t* wait_fence,
                               const hl_fence_t* signal_fence,
                               hl_buffer_t** out_results, size_t result_count) {
  (void)user, (void)argument_count, (void)result_count;
  hl_buffer_t* source = arguments[0];
  // The alloca and the copy chain through a private semaphore rather than
  // queue order alone, so a failed alloca fails the copy (and the signal
  // fence) with its own status instead of a use of missing memory.
  hl_semaphore_t* step = NULL;
  hl_fence_t* step_fence = NULL;
  hl_buffer_t* result = NULL;
  hl_status_t st = hl_semaphore_create(0, hl_allocator_system(), &step);
  if (!st) st = hl_fence_create(hl_allocator_system(), &step_fence);
  if (!st) st = hl_fence_insert(step_fence, step, 1);
  if (!st) {
    st = hl_queue_alloca(queue, wait_fence, step_fence,
                         hl_buffer_length(source), 0, &result);
  }
  if (!st) {
    st = hl_enqueue_copy(queue, step_fence, signal_fence, source, result);
  }
  hl_fence_release(step_fence);
  hl_semaphore_release(step);
  if (st) {
    hl_buffer_release(result);
    return hl_status_annotate(st, "cloning %llu bytes of root %llu",
                              (unsigned long long)hl_buffer_length(source),
                              (unsigned long long)hl_buffer_root_id(source));
  }
  out_results[0] = result;
  return NULL;
}

static hl_status_t hl_fn_axpy2(void* user, hl_queue_t* queue,
                               hl_buffer_t* const* arguments,
                               size_t argument_count,
                               const hl_fence_t* wait_fence,
                               const hl_fence_t* signal_fence,
                               hl_buffer_t** out_results, size_t result_count) {
  (void)user, (void)argument_count, (void)out_results, (void)result_count;
  hl_buffer_t* x = arguments[0];
  hl_buffer_t* y = arguments[1];
  uint64_t n = hl_buffer_length(y) / 4;
  if (hl_buffer_length(y) % 4) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hipline.axpy2: y (%llu bytes) is not a whole "
                          "number of floats",
                          (unsigned long long)hl_buffer_length(y));
  }
  const float a = 2.0f;
  uint32_t a_bits = 0;
  memcpy(&a_bits, &a, sizeof(a_bits));
  hl_kernel_arg_t args[4] = {
      {.kind = HL_KERNEL_ARG_SCALAR, .scalar = a_bits, .size = 4},
      {.kind = HL_KERNEL_ARG_BUFFER,
       .buffer = x,
       .length = hl_buffer_length(x),
       .access = HL_ACCESS_READ},
      {.kind = HL_KERNEL_ARG_BUFFER,
       .buffer = y,
       .length = hl_buffer_length(y),
       .access = HL_ACCESS_READ_WRITE},
      {.kind = HL_KERNEL_ARG_SCALAR, .scalar = n, .size = 8},
  };
  uint64_t blocks = (n + 255) / 256;
  hl_dispatch_config_t config = {{blocks < 1      ? 1
                                  : blocks > 1024 ? 1024
                                                  : (uint32_t)blocks,
                                  1, 1},
                                 {256, 1, 1},
                                 0};
  return hl_queue_dispatch(queue, wait_fence, signal_fence, "axpy", &config, 4,
                           args);
}

typedef struct hl_kernel_function_t {
  const char* name;
  uint32_t argument_count;
  uint32_t result_count;
  hl_access_t access[2];
  hl_function_fn_t fn;
} hl_kernel_function_t;

static const hl_kernel_function_t kFunctions[] = {
    {"hipline.fill_pattern", 1, 0, {HL_ACCESS_WRITE}, hl_fn_fill_pattern},
    {"hipline.copy", 2, 0, {HL_ACCESS_READ, HL_ACCESS_WRITE}, hl_fn_copy},
    {"hipline.clone", 1, 1, {HL_ACCESS_READ}, hl_fn_clone},
    {"hipline.axpy2",
     2,
     0,
     {HL_ACCESS_READ, HL_ACCESS_READ_WRITE},
     hl_fn_axpy2},
};

hl_status_t hl_kernels_register_functions(void) {
  for (size_t i = 0; i < sizeof(kFunctions) / sizeof(kFunctions[0]); ++i) {
    const hl_kernel_function_t* k = &kFunctions[i];
    hl_function_signature_t signature = {.argument_count = k->argument_count,
                                         .result_count = k->result_count,
                                         .argument_access = k->access};
    hl_function_t* function = NULL;
    HL_RETURN_IF_ERROR(hl_function_create(k->name, &signature, k->fn, NULL,
                                          hl_allocator_system(), &function),
                       "registering the kernel-backed functions");
    hl_status_t st = hl_function_register(function);
    hl_function_release(function);
    if (hl_status_code(st) == HL_STATUS_ALREADY_EXISTS) {
      // Registered by an earlier call (or another thread's); idempotent.
      hl_status_free(st);
      st = NULL;
    }
    HL_RETURN_IF_ERROR(st, "registering the kernel-backed function '%s'",
                       k->name);
  }
  return NULL;
}
