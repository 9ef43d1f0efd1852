// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A small user kernel set for the user-executable tests and the example:
// built with a plain clang for the GPU targets (-nogpulib -nogpuinc, as the
// built-in kernels are) and mirrored by user_kernels_host.c, its host twin.
#include "kernels/device_api.h"

// c[i] = a[i] + b[i] for i < n (grid-stride).
extern "C" __global__ void vector_add(const float* a, const float* b, float* c,
                                      uint32_t n) {
  uint32_t stride = blockDim.x * gridDim.x;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    c[i] = a[i] + b[i];
  }
}

// out[r][:] = softmax(in[r][:]) for each of |rows| rows of |cols| floats, one
// row per thread (grid-stride over rows).
extern "C" __global__ void row_softmax(const float* in, float* out,
                                       uint32_t rows, uint32_t cols) {
  uint32_t stride = blockDim.x * gridDim.x;
  for (uint32_t r = blockIdx.x * blockDim.x + threadIdx.x; r < rows;
       r += stride) {
    const float* x = in + (uint64_t)r * cols;
    float* y = out + (uint64_t)r * cols;
    float m = x[0];
    for (uint32_t c = 1; c < cols; ++c) m = x[c] > m ? x[c] : m;
    float sum = 0.0f;
    for (uint32_t c = 0; c < cols; ++c) {
      y[c] = __builtin_expf(x[c] - m);
      sum += y[c];
    }
    for (uint32_t c = 0; c < cols; ++c) y[c] /= sum;
  }
}

// Adds |value| (a 64-bit scalar) to each of the |n| uint64 words at p.
extern "C" __global__ void add_u64(uint64_t* p, uint64_t value, uint32_t n) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += value;
}

// out[i] = wa*a[i] + wb*b[i] + wc*c[i] + wd*d[i] for i < n (grid-stride): ten
// explicit arguments, more than any built-in kernel has.
extern "C" __global__ void weighted_sum4(float* out, const float* a,
                                         const float* b, const float* c,
                                         const float* d, float wa, float wb,
                                         float wc, float wd, uint32_t n) {
  uint32_t stride = blockDim.x * gridDim.x;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = wa * a[i] + wb * b[i] + wc * c[i] + wd * d[i];
  }
}
