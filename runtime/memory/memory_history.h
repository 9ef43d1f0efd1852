// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Memory history: every alloca's memory and every free of every device,
// recorded while hl_memory_history_begin is in effect and written as a
// PyTorch memory snapshot (include/hipline/trace.h).
#ifndef HIPLINE_RUNTIME_MEMORY_MEMORY_HISTORY_H_
#define HIPLINE_RUNTIME_MEMORY_MEMORY_HISTORY_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hipline/device.h"
#include "runtime/base/trace.h"

extern atomic_bool hl_memory_history_active_;

void hl_memory_history_record(hl_device_t* device, bool alloc, const void* ptr,
                              uint64_t size, uint32_t stream);

// An alloca's memory |ptr| of |size| bytes, on queue |stream| of |device|:
// recorded after the pool returned it.
static inline void hl_memory_history_alloc(hl_device_t* device, const void* ptr,
                                           uint64_t size, uint32_t stream) {
  if (HL_UNLIKELY(atomic_load_explicit(&hl_memory_history_active_,
                                       memory_order_relaxed))) {
    hl_memory_history_record(device, true, ptr, size, stream);
  }
}

// Its free: recorded before the pool takes it back, so that a reuse of the
// address is always recorded after the free.
static inline void hl_memory_history_free(hl_device_t* device, const void* ptr,
                                          uint64_t size, uint32_t stream) {
  if (HL_UNLIKELY(atomic_load_explicit(&hl_memory_history_active_,
                                       memory_order_relaxed))) {
    hl_memory_history_record(device, false, ptr, size, stream);
  }
}

#endif  // HIPLINE_RUNTIME_MEMORY_MEMORY_HISTORY_H_
