// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Host twins of user kernels for the hip test runtime (trt_twins.h).
#include "tests/hip_test_runtime/trt_twins.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "runtime/executable/kernarg.h"

#define TRT_MAX_TWINS 8

static once_flag trt_twins_once = ONCE_FLAG_INIT;
static void* trt_twins[TRT_MAX_TWINS];
static int trt_twin_count;

static void trt_twins_open(void) {
  const char* list = getenv("HL_HIP_TEST_RUNTIME_TWINS");
  if (!list || !*list) return;
  char* copy = strdup(list);
  char* save = NULL;
  for (char* path = copy ? strtok_r(copy, ":", &save) : NULL;
       path && trt_twin_count < TRT_MAX_TWINS;
       path = strtok_r(NULL, ":", &save)) {
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      fprintf(stderr, "hip test runtime: HL_HIP_TEST_RUNTIME_TWINS: %s\n",
              dlerror());
      abort();
    }
    trt_twins[trt_twin_count++] = handle;
  }
  free(copy);
}

const hl_host_kernel_info_t* trt_twin_lookup(const char* name) {
  call_once(&trt_twins_once, trt_twins_open);
  char symbol[256];
  snprintf(symbol, sizeof(symbol), "hipline_kernel_%s", name);
  for (int i = 0; i < trt_twin_count; ++i) {
    const hl_host_kernel_info_t* info = dlsym(trt_twins[i], symbol);
    if (info && info->abi_version == HL_HOST_KERNEL_ABI_VERSION &&
        info->kernarg_size <= HL_HOST_KERNARG_MAX) {
      return info;
    }
  }
  return NULL;
}

unsigned char* trt_twin_kernarg(const hl_host_kernel_info_t* info,
                                void** kernel_params, const uint32_t grid[3],
                                const uint32_t block[3],
                                uint32_t shared_bytes) {
  unsigned char* kernarg =
      calloc(1, info->kernarg_size ? info->kernarg_size : 1);
  if (!kernarg) return NULL;
  uint32_t explicit_index = 0;
  for (uint32_t i = 0; i < info->arg_count; ++i) {
    const hl_host_kernel_arg_info_t* a = &info->args[i];
    unsigned char* slot = kernarg + a->offset;
    if (a->kind >= HL_KERNEL_VALUE_HIDDEN_FIRST) {
      hl_kernarg_fill_hidden(a->kind, slot, a->size, grid, block, shared_bytes);
    } else {
      memcpy(slot, kernel_params[explicit_index++], a->size);
    }
  }
  return kernarg;
}
