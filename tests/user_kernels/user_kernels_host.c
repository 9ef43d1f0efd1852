// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The host twin of user_kernels.hip: the same kernels under the host kernel
// ABI (hipline/executable.h), as a shared object. The explicit arguments sit
// at the offsets the AMDGPU metadata gives the GPU kernels (the executable
// tests check that against every GPU object), followed by two hidden
// arguments the kernels cross-check against the launch shape.
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hipline/executable.h"

#define HL_EXPORT __attribute__((visibility("default")))

// The kernels, under the host kernel ABI.
HL_EXPORT void vector_add(const void* kernarg, const hl_host_launch_t* launch);
HL_EXPORT void row_softmax(const void* kernarg, const hl_host_launch_t* launch);
HL_EXPORT void add_u64(const void* kernarg, const hl_host_launch_t* launch);
HL_EXPORT void weighted_sum4(const void* kernarg,
                             const hl_host_launch_t* launch);

// Reads the |T| at |offset| of the kernarg segment.
#define KARG(T, kernarg, offset)                                   \
  ({                                                               \
    T value_;                                                      \
    memcpy(&value_, (const char*)(kernarg) + (offset), sizeof(T)); \
    value_;                                                        \
  })

// True when the hidden block count and group size (x) match |launch|.
static int hidden_ok(const void* kernarg, uint32_t at,
                     const hl_host_launch_t* launch) {
  return KARG(uint32_t, kernarg, at) == launch->grid[0] &&
         KARG(uint16_t, kernarg, at + 4) == launch->block[0];
}

#define HIDDEN_ARGS(at)                                                      \
  {"hidden_block_count_x", (at), 4, HL_KERNEL_VALUE_HIDDEN_BLOCK_COUNT_X}, { \
    "hidden_group_size_x", (at) + 4, 2, HL_KERNEL_VALUE_HIDDEN_GROUP_SIZE_X  \
  }

HL_EXPORT void vector_add(const void* kernarg, const hl_host_launch_t* launch) {
  const float* a = KARG(const float*, kernarg, 0);
  const float* b = KARG(const float*, kernarg, 8);
  float* c = KARG(float*, kernarg, 16);
  uint32_t n = KARG(uint32_t, kernarg, 24);
  int ok = hidden_ok(kernarg, 32, launch);
  for (uint32_t i = 0; i < n; ++i) c[i] = ok ? a[i] + b[i] : NAN;
}

static const hl_host_kernel_arg_info_t kVectorAddArgs[] = {
    {"a", 0, 8, HL_KERNEL_VALUE_GLOBAL_BUFFER},
    {"b", 8, 8, HL_KERNEL_VALUE_GLOBAL_BUFFER},
    {"c", 16, 8, HL_KERNEL_VALUE_GLOBAL_BUFFER},
    {"n", 24, 4, HL_KERNEL_VALUE_BY_VALUE},
    HIDDEN_ARGS(32)};
HL_EXPORT const hl_host_kernel_info_t hipline_kernel_vector_add = {
    HL_HOST_KERNEL_ABI_VERSION, vector_add, 40, 6, kVectorAddArgs};

HL_EXPORT void row_softmax(const void* kernarg,
                           const hl_host_launch_t* launch) {
  const float* in = KARG(const float*, kernarg, 0);
  float* out = KARG(float*, kernarg, 8);
  uint32_t rows = KARG(uint32_t, kernarg, 16);
  uint32_t cols = KARG(uint32_t, kernarg, 20);
  int ok = hidden_ok(kernarg, 24, launch);
  for (uint32_t r = 0; r < rows; ++r) {
    const float* x = in + (uint64_t)r * cols;
    float* y = out + (uint64_t)r * cols;
    float m = x[0];
    for (uint32_t c = 1; c < cols; ++c) m = x[c] > m ? x[c] : m;
    float sum = 0.0f;
    for (uint32_t c = 0; c < cols; ++c) {
      y[c] = expf(x[c] - m);
      sum += y[c];
    }
    for (uint32_t c = 0; c < cols; ++c) y[c] = ok ? y[c] / sum : NAN;
  }
}

static const hl_host_kernel_arg_info_t kRowSoftmaxArgs[] = {
    {"in", 0, 8, HL_KERNEL_VALUE_GLOBAL_BUFFER},
    {"out", 8, 8, HL_KERNEL_VALUE_GLOBAL_BUFFER},
    {"rows", 16, 4, HL_KERNEL_VALUE_BY_VALUE},
    {"cols", 20, 4, HL_KERNEL_VALUE_BY_VALUE},
    HIDDEN_ARGS(24)};
HL_EXPORT const hl_host_kernel_info_t hipline_kernel_row_softmax = {
    HL_HOST_KERNEL_ABI_VERSION, row_softmax, 32, 6, kRowSoftmaxArgs};

HL_EXPORT void add_u64(const void* kernarg, const hl_host_launch_t* launch) {
  uint64_t* p = KARG(uint64_t*, kernarg, 0);
  uint64_t value = KARG(uint64_t, kernarg, 8);
  uint32_t n = KARG(uint32_t, kernarg, 16);
  (void)launch;
  for (uint32_t i = 0; i < n; ++i) p[i] += value;
}

static const hl_host_kernel_arg_info_t kAddU64Args[] = {
    {"p", 0, 8, HL_KERNEL_VALUE_GLOBAL_BUFFER},
    {"value", 8, 8, HL_KERNEL_VALUE_BY_VALUE},
    {"n", 16, 4, HL_KERNEL_VALUE_BY_VALUE}};
HL_EXPORT const hl_host_kernel_info_t hipline_kernel_add_u64 = {
    HL_HOST_KERNEL_ABI_VERSION, add_u64, 24, 3, kAddU64Args};

HL_EXPORT void weighted_sum4(const void* kernarg,
                             const hl_host_launch_t* launch) {
  float* out = KARG(float*, kernarg, 0);
  const float* in[4];
  float w[4];
  for (int k = 0; k < 4; ++k) {
    in[k] = KARG(const float*, kernarg, 8 + 8 * k);
    w[k] = KARG(float, kernarg, 40 + 4 * k);
  }
  uint32_t n = KARG(uint32_t, kernarg, 56);
  int ok = hidden_ok(kernarg, 64, launch);
  for (uint32_t i = 0; i < n; ++i) {
    out[i] = ok ? w[0] * in[0][i] + w[1] * in[1][i] + w[2] * in[2][i] +
                      w[3] * in[3][i]
                : NAN;
  }
}

static const hl_host_kernel_arg_info_t kWeightedSum4Args[] = {
    {"out", 0, 8, HL_KERNEL_VALUE_GLOBAL_BUFFER},
    {"a", 8, 8, HL_KERNEL_VALUE_GLOBAL_BUFFER},
    {"b", 16, 8, HL_KERNEL_VALUE_GLOBAL_BUFFER},
    {"c", 24, 8, HL_KERNEL_VALUE_GLOBAL_BUFFER},
    {"d", 32, 8, HL_KERNEL_VALUE_GLOBAL_BUFFER},
    {"wa", 40, 4, HL_KERNEL_VALUE_BY_VALUE},
    {"wb", 44, 4, HL_KERNEL_VALUE_BY_VALUE},
    {"wc", 48, 4, HL_KERNEL_VALUE_BY_VALUE},
    {"wd", 52, 4, HL_KERNEL_VALUE_BY_VALUE},
    {"n", 56, 4, HL_KERNEL_VALUE_BY_VALUE},
    HIDDEN_ARGS(64)};
HL_EXPORT const hl_host_kernel_info_t hipline_kernel_weighted_sum4 = {
    HL_HOST_KERNEL_ABI_VERSION, weighted_sum4, 72, 12, kWeightedSum4Args};
