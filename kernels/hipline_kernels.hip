// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Device kernels, compiled into one code object per GPU target, by clang
// (-nogpulib -nogpuinc) or by ROCm's hipcc --genco (kernels/CMakeLists.txt).
// Parameter lists and semantics are in kernel_table.h, which also declares
// every kernel below: a definition whose parameter types differ from the table
// does not compile (two extern "C" functions of one name).
#include <stdint.h>

#include "kernels/device_api.h"
#include "kernels/kernel_table.h"
#include "kernels/pattern.h"

#define HL_DECLARE_KERNEL_(ID, name, count, types) \
  extern "C" __global__ void name types;
HL_KERNEL_TABLE(HL_DECLARE_KERNEL_)
#undef HL_DECLARE_KERNEL_

// The first global thread index and the grid-wide stride of a 1-D launch.
static __device__ inline uint64_t hl_global_index(void) {
  return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
}
static __device__ inline uint64_t hl_global_stride(void) {
  return (uint64_t)gridDim.x * blockDim.x;
}

extern "C" __global__ void fill_pattern(uint32_t* buf, uint64_t words,
                                        uint32_t seed) {
  for (uint64_t i = hl_global_index(); i < words; i += hl_global_stride()) {
    buf[i] = hl_pattern_word(seed, i);
  }
}

extern "C" __global__ void verify_pattern(const uint32_t* buf, uint64_t words,
                                          uint32_t seed,
                                          uint32_t* out_mismatches) {
  // Count locally and publish once per thread so an all-wrong buffer does not
  // serialise every thread on one atomic.
  uint32_t mismatches = 0;
  for (uint64_t i = hl_global_index(); i < words; i += hl_global_stride()) {
    mismatches += buf[i] != hl_pattern_word(seed, i) ? 1u : 0u;
  }
  if (mismatches != 0) atomicAdd(out_mismatches, mismatches);
}

extern "C" __global__ void copy(void* dst, const void* src, uint64_t bytes) {
  uint8_t* d = (uint8_t*)dst;
  const uint8_t* s = (const uint8_t*)src;
  const uint64_t begin = hl_global_index();
  const uint64_t stride = hl_global_stride();
  // Word copies when both ends share 4-byte alignment; bytes otherwise and
  // for the unaligned head and the odd tail.
  uint64_t head = 0;
  if ((((uintptr_t)d ^ (uintptr_t)s) & 3u) == 0) {
    head = (4u - ((uintptr_t)d & 3u)) & 3u;
    if (head > bytes) head = bytes;
    const uint64_t words = (bytes - head) / 4;
    uint32_t* dw = (uint32_t*)(d + head);
    const uint32_t* sw = (const uint32_t*)(s + head);
    for (uint64_t i = begin; i < words; i += stride) dw[i] = sw[i];
    const uint64_t tail_begin = head + words * 4;
    for (uint64_t i = begin; i < bytes - tail_begin; i += stride) {
      d[tail_begin + i] = s[tail_begin + i];
    }
    for (uint64_t i = begin; i < head; i += stride) d[i] = s[i];
  } else {
    for (uint64_t i = begin; i < bytes; i += stride) d[i] = s[i];
  }
}

extern "C" __global__ void spin(uint64_t cycles, uint32_t* out_blocks_done) {
  const uint64_t start = (uint64_t)clock64();
  while ((uint64_t)clock64() - start < cycles) {
  }
  // Every thread of the block must have finished spinning before the block
  // counts as done.
  __syncthreads();
  if (out_blocks_done != NULL && threadIdx.x == 0 && threadIdx.y == 0 &&
      threadIdx.z == 0) {
    atomicAdd(out_blocks_done, 1u);
  }
}

extern "C" __global__ void axpy(float a, const float* x, float* y, uint64_t n) {
  // Keep the product and the sum separately rounded, like the host oracle.
#pragma clang fp contract(off)
  for (uint64_t i = hl_global_index(); i < n; i += hl_global_stride()) {
    y[i] = a * x[i] + y[i];
  }
}
