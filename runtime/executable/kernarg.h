// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Kernarg segment helpers shared by the dispatch call (dispatch_call.c) and
// the hip test runtime's host twins: the values of the hidden arguments a
// ROCm runtime writes after a kernel's explicit ones.
#ifndef HIPLINE_RUNTIME_EXECUTABLE_KERNARG_H_
#define HIPLINE_RUNTIME_EXECUTABLE_KERNARG_H_

#include <stdint.h>
#include <string.h>

#include "hipline/executable.h"

// Writes the hidden argument of |kind| (|size| bytes at |slot|) for a launch
// of |grid| blocks of |block| threads with |shared_bytes| of dynamic shared
// memory. Kinds without a value here (printf buffer, hostcall, queue
// pointers, ...) are zeroed: hipline's kernels cannot use those services.
static inline void hl_kernarg_fill_hidden(hl_kernel_value_kind_t kind,
                                          void* slot, uint32_t size,
                                          const uint32_t grid[3],
                                          const uint32_t block[3],
                                          uint32_t shared_bytes) {
  uint64_t value = 0;
  switch (kind) {
    case HL_KERNEL_VALUE_HIDDEN_BLOCK_COUNT_X:
    case HL_KERNEL_VALUE_HIDDEN_BLOCK_COUNT_Y:
    case HL_KERNEL_VALUE_HIDDEN_BLOCK_COUNT_Z:
      value = grid[kind - HL_KERNEL_VALUE_HIDDEN_BLOCK_COUNT_X];
      break;
    case HL_KERNEL_VALUE_HIDDEN_GROUP_SIZE_X:
    case HL_KERNEL_VALUE_HIDDEN_GROUP_SIZE_Y:
    case HL_KERNEL_VALUE_HIDDEN_GROUP_SIZE_Z:
      value = block[kind - HL_KERNEL_VALUE_HIDDEN_GROUP_SIZE_X];
      break;
    case HL_KERNEL_VALUE_HIDDEN_GRID_DIMS:
      value = grid[2] > 1 ? 3 : grid[1] > 1 ? 2 : 1;
      break;
    case HL_KERNEL_VALUE_HIDDEN_DYNAMIC_LDS_SIZE:
      value = shared_bytes;
      break;
    default:  // Global offsets and remainders are 0 for whole blocks.
      break;
  }
  memset(slot, 0, size);
  memcpy(slot, &value, size < sizeof(value) ? size : sizeof(value));
}

#endif  // HIPLINE_RUNTIME_EXECUTABLE_KERNARG_H_
