// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Your own kernels, start to finish: load an executable from the code
// objects a build produced (one AMDGPU ELF per GPU target, plus the host
// shared object twin for the host backend), run a kernel inside an
// invocation whose result is allocated and freed in queue order, and hand
// the queue's native stream to your own code in timeline order.
//
// Usage: example_user_kernels DIR TARGETS HOST_SO
//   DIR      where user_kernels_<target>.co lie (tests/user_kernels/ builds
//            them with clang-19 -x hip --offload-arch=<target> -nogpulib)
//   TARGETS  the GPU targets, comma-separated ("gfx90a,gfx1100")
//   HOST_SO  the host twin (user_kernels_host.so)
#include <stdint.h>
#include <string.h>

#include "examples/example.h"

enum { kN = 1024 };

// The invocation's function: c = a + b into a fresh buffer allocated on the
// invocation's queue.
static hl_status_t add_vectors(void* user, hl_queue_t* queue,
                               hl_buffer_t* const* args, size_t arg_count,
                               const hl_fence_t* wait, const hl_fence_t* signal,
                               hl_buffer_t** results, size_t result_count) {
  (void)arg_count, (void)result_count;
  hl_executable_t* executable = user;
  hl_semaphore_t* step = NULL;
  hl_fence_t* allocated = NULL;
  hl_status_t st = hl_semaphore_create(0, hl_allocator_system(), &step);
  if (!st) st = hl_fence_create(hl_allocator_system(), &allocated);
  if (!st) st = hl_fence_insert(allocated, step, 1);
  if (!st) {
    st = hl_queue_alloca(queue, wait, allocated, kN * sizeof(float), 0,
                         &results[0]);
  }
  if (!st) {
    hl_kernel_arg_t kargs[4] = {
        {.kind = HL_KERNEL_ARG_BUFFER,
         .buffer = args[0],
         .length = kN * sizeof(float),
         .access = HL_ACCESS_READ},
        {.kind = HL_KERNEL_ARG_BUFFER,
         .buffer = args[1],
         .length = kN * sizeof(float),
         .access = HL_ACCESS_READ},
        {.kind = HL_KERNEL_ARG_BUFFER,
         .buffer = results[0],
         .length = kN * sizeof(float),
         .access = HL_ACCESS_WRITE},
        {.kind = HL_KERNEL_ARG_SCALAR, .scalar = kN, .size = 4}};
    hl_dispatch_config_t shape = {{kN / 256, 1, 1}, {256, 1, 1}, 0};
    st = hl_queue_dispatch_executable(queue, allocated, signal, executable,
                                      "vector_add", &shape, 4, kargs);
  }
  hl_fence_release(allocated);
  hl_semaphore_release(step);
  return st;
}

// Runs on the queue's native stream once everything before it in queue
// order is done (host backend) or enqueued ahead of it (hip); here it only
// notes that it ran and what it was given.
static hl_status_t on_native_stream(void* user, void* stream,
                                    void* const* pointers, size_t count) {
  int* ran = user;
  *ran = stream != NULL && count == 1 && pointers[0] != NULL;
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s DIR TARGETS HOST_SO\n", argv[0]);
    return 2;
  }
  // One code object per GPU target, plus the host twin.
  hl_code_object_t objects[17];
  char paths[16][512], targets[16][64];
  size_t count = 0;
  for (const char* t = argv[2]; *t && count < 16;) {
    size_t n = strcspn(t, ",");
    snprintf(targets[count], sizeof(targets[count]), "%.*s", (int)n, t);
    snprintf(paths[count], sizeof(paths[count]), "%s/user_kernels_%s.co",
             argv[1], targets[count]);
    objects[count] =
        (hl_code_object_t){.target = targets[count], .path = paths[count]};
    ++count;
    t += n + (t[n] == ',');
  }
  objects[count++] =
      (hl_code_object_t){.target = HL_TARGET_ID_HOST, .path = argv[3]};
  hl_executable_t* executable = NULL;
  CHECK_OK(hl_executable_create(count, objects, &executable));

  hl_device_t* device = NULL;
  hl_queue_t* queue = NULL;
  hl_semaphore_t* steps = NULL;
  CHECK_OK(hl_device_create(NULL, hl_allocator_system(), &device));
  CHECK_OK(hl_queue_create(device, &queue));
  CHECK_OK(hl_semaphore_create(0, hl_allocator_system(), &steps));
  size_t chosen = 0;
  CHECK_OK(hl_executable_select_for_device(executable, device, &chosen));
  printf("device runs the '%s' object\n",
         hl_executable_object_target(executable, chosen));

  // Inputs, written in queue order.
  static float a[kN], b[kN], c[kN];
  for (int i = 0; i < kN; ++i) {
    a[i] = (float)i;
    b[i] = 0.5f * (float)i;
  }
  hl_buffer_t *ba = NULL, *bb = NULL;
  hl_fence_t* ready = example_fence(steps, 1);
  CHECK_OK(hl_queue_alloca(queue, NULL, NULL, sizeof(a), 0, &ba));
  CHECK_OK(hl_queue_alloca(queue, NULL, NULL, sizeof(b), 0, &bb));
  CHECK_OK(hl_queue_write(queue, NULL, NULL, a, ba, 0, sizeof(a)));
  CHECK_OK(hl_queue_write(queue, NULL, ready, b, bb, 0, sizeof(b)));

  // The kernel inside an invocation; its result is a queue-ordered alloca.
  static const hl_access_t access[2] = {HL_ACCESS_READ, HL_ACCESS_READ};
  hl_function_signature_t signature = {2, 1, access};
  hl_function_t* function = NULL;
  CHECK_OK(hl_function_create("example.add_vectors", &signature, add_vectors,
                              executable, hl_allocator_system(), &function));
  hl_invocation_t* invocation = NULL;
  CHECK_OK(hl_invocation_create(function, queue, &invocation));
  CHECK_OK(hl_invocation_add_wait(invocation, steps, 1));
  CHECK_OK(hl_invocation_add_argument(invocation, ba));
  CHECK_OK(hl_invocation_add_argument(invocation, bb));
  CHECK_OK(hl_invocation_invoke(invocation));
  hl_buffer_t* sum = NULL;
  CHECK_OK(hl_invocation_take_result(invocation, 0, &sum));

  // Your own work on the native stream, after the kernel in queue order,
  // declaring that it reads the result.
  int ran = 0;
  hl_buffer_binding_t binding = {sum, 0, sizeof(c), HL_ACCESS_READ};
  CHECK_OK(hl_queue_native_call(queue, hl_invocation_signal_fence(invocation),
                                NULL, on_native_stream, &ran, 1, &binding));
  hl_fence_t* done = example_fence(steps, 2);
  CHECK_OK(hl_queue_read(queue, NULL, done, sum, 0, c, sizeof(c)));
  // Frees after every use above, in queue order.
  CHECK_OK(hl_queue_dealloca(queue, NULL, NULL, sum));
  CHECK_OK(hl_queue_dealloca(queue, NULL, NULL, ba));
  CHECK_OK(hl_queue_dealloca(queue, NULL, NULL, bb));
  CHECK_OK(hl_fence_wait(done, hl_deadline_after(INT64_C(20000000000))));
  CHECK_OK(hl_queue_wait_idle(queue, hl_deadline_after(INT64_C(20000000000))));
  for (int i = 0; i < kN; ++i) {
    CHECK_TRUE(c[i] == a[i] + b[i], "c[%d] = %g", i, c[i]);
  }
  CHECK_TRUE(ran, "the native call did not run");
  printf("vector_add: %d sums correct; native call ran in order\n", kN);

  hl_fence_release(ready);
  hl_fence_release(done);
  hl_invocation_release(invocation);
  hl_function_release(function);
  hl_buffer_release(sum);
  hl_buffer_release(ba);
  hl_buffer_release(bb);
  hl_semaphore_release(steps);
  hl_queue_release(queue);
  hl_device_release(device);
  hl_executable_release(executable);
  return 0;
}
