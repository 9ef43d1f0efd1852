// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hl_device_reset_peak_memory_stats: the peaks of the memory statistics
// start again from the current values (PyTorch's
// torch.cuda.reset_peak_memory_stats).

#include <string.h>

#include "hipline/buffer.h"
#include "runtime/memory/memory_internal.h"
#include "runtime/memory/suballocator.h"

hl_status_t hl_device_reset_peak_memory_stats(hl_device_t* device) {
  if (!device) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_device_reset_peak_memory_stats: NULL device");
  }
  hl_memory_state_t* state = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_memory_state(device, &state));
  hl_backend_pool_stats_t pool;
  memset(&pool, 0, sizeof(pool));
  HL_RETURN_IF_ERROR_PLAIN(
      device->backend->vtable->pool_stats(device->backend, &pool));
  hl_suballocator_t* sa = atomic_load(&state->suballocator);
  if (sa) hl_suballocator_reset_peaks(sa);  // Takes |stats_lock| itself.
  hl_spinlock_lock(&state->stats_lock);
  state->stats.bytes_in_use_peak = state->stats.bytes_in_use;
  for (uint32_t i = 0; i < state->per_queue_capacity; ++i) {
    state->per_queue[i].bytes_in_use_peak = state->per_queue[i].bytes_in_use;
  }
  state->reserved_peak_reset = true;
  state->reserved_high_at_reset = pool.reserved_high_bytes;
  state->reserved_seen = pool.reserved_bytes;
  hl_spinlock_unlock(&state->stats_lock);
  return NULL;
}
