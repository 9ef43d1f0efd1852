// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The kernel table: every kernel hipline ships, with its fixed parameter
// list. It is the one description shared by the device sources
// (hipline_kernels.hip, compiled as HIP C++), the host reference versions
// (host/host_kernels.c, C11) and the layers that launch kernels.
//
// Calling convention (both sides): a launch passes |params| as in
// hipModuleLaunchKernel's kernelParams, an array with one pointer per
// parameter; params[i] points to a value of the i-th type below. Pointers are
// 8 bytes on the host (x86-64/aarch64) and on amdgcn, so the byte sizes are
// the same on both sides.
//
// | kernel         | parameters (type, bytes)                                 |
// |----------------|----------------------------------------------------------|
// | fill_pattern   | uint32_t* buf 8, uint64_t words 8, uint32_t seed 4       |
// | verify_pattern | const uint32_t* buf 8, uint64_t words 8, uint32_t seed 4,|
// |                | uint32_t* out_mismatches 8                               |
// | copy           | void* dst 8, const void* src 8, uint64_t bytes 8         |
// | spin           | uint64_t cycles 8, uint32_t* out_blocks_done 8           |
// | axpy           | float a 4, const float* x 8, float* y 8, uint64_t n 8    |
//
// Semantics (the host versions are the oracles):
// - fill_pattern: buf[i] = hl_pattern_word(seed, i) for i < words.
// - verify_pattern: adds to *out_mismatches the number of i < words with
//   buf[i] != hl_pattern_word(seed, i). The caller zeroes the counter.
// - copy: copies |bytes| bytes from |src| to |dst|; any size and alignment;
//   the ranges must not overlap.
// - spin: every thread busy-waits about |cycles| device clock cycles
//   (clock64()); then the first thread of each block adds 1 to
//   *out_blocks_done (which may be NULL). The host version keeps its stream
//   busy for |cycles| nanoseconds of a per-stream device clock (a nominal
//   1 GHz clock; spins run back to back from their launch, see
//   host_kernels.c), capped at HL_HOST_SPIN_MAX_NS, sleeping rather than
//   burning a core, and adds the launch's block count.
// - axpy: y[i] = a * x[i] + y[i] for i < n, with the product and the sum each
//   rounded to float (no fused multiply-add), so host and device agree
//   bit for bit.
//
// Every device kernel uses grid-stride loops, so any grid of at least one
// block computes the full result; the host versions ignore the launch shape
// except where stated.
#ifndef HIPLINE_KERNELS_KERNEL_TABLE_H_
#define HIPLINE_KERNELS_KERNEL_TABLE_H_

#include <stdint.h>

// X(ID, name, param_count, (param types...)) for each kernel, in id order.
// |name| is the symbol in the code objects and the host code object.
#define HL_KERNEL_TABLE(X)                                          \
  X(FILL_PATTERN, fill_pattern, 3, (uint32_t*, uint64_t, uint32_t)) \
  X(VERIFY_PATTERN, verify_pattern, 4,                              \
    (const uint32_t*, uint64_t, uint32_t, uint32_t*))               \
  X(COPY, copy, 3, (void*, const void*, uint64_t))                  \
  X(SPIN, spin, 2, (uint64_t, uint32_t*))                           \
  X(AXPY, axpy, 4, (float, const float*, float*, uint64_t))

// Kernel ids: HL_KERNEL_FILL_PATTERN, ..., then HL_KERNEL_COUNT.
typedef enum hl_kernel_id_e {
#define HL_KERNEL_ID_(ID, name, count, types) HL_KERNEL_##ID,
  HL_KERNEL_TABLE(HL_KERNEL_ID_)
#undef HL_KERNEL_ID_
      HL_KERNEL_COUNT
} hl_kernel_id_t;

// The largest parameter count in the table.
#define HL_KERNEL_MAX_PARAMS 4

// Expands a parenthesised type list of |count| types to a brace list of their
// sizes: HL_KERNEL_PARAM_SIZES(2, (uint64_t, uint32_t*)) -> {8, 8}.
#define HL_KERNEL_PARAM_SIZES(count, types) \
  HL_KERNEL_PARAM_SIZES_CAT_(HL_KERNEL_PARAM_SIZES_, count) types
#define HL_KERNEL_PARAM_SIZES_CAT_(a, b) HL_KERNEL_PARAM_SIZES_CAT2_(a, b)
#define HL_KERNEL_PARAM_SIZES_CAT2_(a, b) a##b
#define HL_KERNEL_PARAM_SIZES_1(a) \
  { (uint32_t)sizeof(a) }
#define HL_KERNEL_PARAM_SIZES_2(a, b) \
  { (uint32_t)sizeof(a), (uint32_t)sizeof(b) }
#define HL_KERNEL_PARAM_SIZES_3(a, b, c) \
  { (uint32_t)sizeof(a), (uint32_t)sizeof(b), (uint32_t)sizeof(c) }
#define HL_KERNEL_PARAM_SIZES_4(a, b, c, d)                        \
  {                                                                \
    (uint32_t)sizeof(a), (uint32_t)sizeof(b), (uint32_t)sizeof(c), \
        (uint32_t)sizeof(d)                                        \
  }

#endif  // HIPLINE_KERNELS_KERNEL_TABLE_H_
