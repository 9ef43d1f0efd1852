// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Memory counter tracks in traces: after an alloca's or a free's statistics
// change, a recording trace gets a sample of the device's bytes in use and
// reserved (hl_trace_memory), so Perfetto draws memory over time next to the
// zones. One track per device, numbered in creation order.

#include <stdatomic.h>
#include <string.h>

#include "runtime/base/trace.h"
#include "runtime/memory/memory_internal.h"
#include "runtime/memory/suballocator.h"

static atomic_uint hl_memory_next_track_ = 1;

uint32_t hl_memory_trace_track_next(void) {
  return atomic_fetch_add(&hl_memory_next_track_, 1);
}

static const char* hl_memory_trace_pool_name(const hl_memory_state_t* state) {
  return hl_pool_mode_name(state->device->pool_mode);
}

void hl_memory_trace_sample_locked(hl_memory_state_t* state) {
  hl_suballocator_t* sa = atomic_load(&state->suballocator);
  if (!sa) return;  // The driver's pool: sampled by hl_memory_trace_sample.
  hl_trace_memory(state->trace_track, hl_memory_trace_pool_name(state),
                  (int64_t)state->stats.bytes_in_use,
                  (int64_t)hl_suballocator_slab_bytes_locked(sa));
}

void hl_memory_trace_sample(hl_memory_state_t* state) {
  hl_suballocator_t* sa = atomic_load(&state->suballocator);
  hl_spinlock_lock(&state->stats_lock);
  uint64_t in_use = state->stats.bytes_in_use;
  uint64_t reserved = sa ? hl_suballocator_slab_bytes_locked(sa) : 0;
  hl_spinlock_unlock(&state->stats_lock);
  if (state->device->pool_mode != HL_POOL_MODE_HIPLINE) {
    hl_backend_t* backend = state->device->backend;
    hl_backend_pool_stats_t pool;
    memset(&pool, 0, sizeof(pool));
    hl_status_t st = backend->vtable->pool_stats(backend, &pool);
    if (st) {
      hl_status_free(st);  // A sample only: the trace goes without it.
      return;
    }
    reserved = pool.reserved_bytes;
  }
  hl_trace_memory(state->trace_track, hl_memory_trace_pool_name(state),
                  (int64_t)in_use, (int64_t)reserved);
}
