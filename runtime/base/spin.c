// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The slow paths of the spin primitives (spin.h): spinning before sleeping,
// the contended spin lock, and the mutex that spins before it blocks.

#include "runtime/base/spin.h"

#include <stdint.h>

#include "runtime/base/time_util.h"

// Spins in two phases: a few microseconds of pause instructions (the other
// thread is running on another core and about to deliver), then yields, so
// that a thread spinning on a core it shares with the thread it waits for
// (more runnable threads than cores) hands the core over instead of burning
// its time slice.
#define HL_SPIN_PAUSE_NS ((hl_duration_t)2000)

// One round of a spin that began at |start|; false once HL_SPIN_NS passed.
static bool hl_spin_round(hl_time_t start) {
  hl_time_t elapsed = hl_time_now() - start;
  if (elapsed >= HL_SPIN_NS) return false;
  if (elapsed < HL_SPIN_PAUSE_NS) {
    for (int k = 0; k < 16; ++k) hl_cpu_relax();
  } else {
    thrd_yield();
  }
  return true;
}

bool hl_spin_until(hl_spin_ready_fn_t ready, const void* arg) {
  hl_time_t start = hl_time_now();
  while (!ready(arg)) {
    if (!hl_spin_round(start)) return ready(arg);
  }
  return true;
}

void hl_spinlock_lock_contended(hl_spinlock_t* lock) {
  for (uint32_t i = 0;; ++i) {
    // Read until it looks free, then try: the exchange takes the line
    // exclusively, the loads share it with the holder.
    if (!atomic_load_explicit(&lock->held, memory_order_relaxed) &&
        !atomic_exchange_explicit(&lock->held, true, memory_order_acquire)) {
      return;
    }
    if (i < 256) {
      hl_cpu_relax();
    } else {
      thrd_yield();
    }
  }
}

void hl_mutex_lock(mtx_t* mutex) {
  if (mtx_trylock(mutex) == thrd_success) return;
  hl_time_t start = hl_time_now();
  while (hl_spin_round(start)) {
    if (mtx_trylock(mutex) == thrd_success) return;
  }
  mtx_lock(mutex);
}
