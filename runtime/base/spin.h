// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Spinning before sleeping.
//
// Every handoff between hipline's threads (a submitter pushing stream items,
// a stream worker completing submissions, the device's work thread) used to
// cost a futex system call when the other side slept or held a lock, and a
// system call costs about 1.2 us on the virtual machines hipline is built on
// (`bench` numbers, 2026-11-25), several times a whole submission's budget.
// A thread that would block first spins for a bounded time, the cost of a
// sleep and a wake-up: in steady state the other side shows up within it and
// nobody enters the kernel; when it does not, the thread sleeps as before,
// so an idle runtime burns no CPU.
#ifndef HIPLINE_RUNTIME_BASE_SPIN_H_
#define HIPLINE_RUNTIME_BASE_SPIN_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <threads.h>

#include "hipline/status.h"
#include "hipline/time.h"

// How long a thread spins before it blocks (ns).
#define HL_SPIN_NS ((hl_duration_t)20000)

static inline void hl_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

// mtx_lock that first retries mtx_trylock for up to HL_SPIN_NS: the
// critical sections behind hipline's locks are short, so a contended lock
// is usually free again long before a sleep and a wake-up would be over.
void hl_mutex_lock(mtx_t* mutex);

// Spins until |ready(arg)| is true or HL_SPIN_NS passed; returns its last
// value. |ready| must only read (atomics): no locks, no side effects.
typedef bool (*hl_spin_ready_fn_t)(const void* arg);
bool hl_spin_until(hl_spin_ready_fn_t ready, const void* arg);

// A lock for short critical sections that never wait for other work: no
// condition variable, no backend call that can wait for a stream, nothing
// that takes a lock whose holder could be waiting for this one. (Leaf locks
// and the C library's allocator are fine.) Taking it is one atomic exchange
// and giving it back a plain release store; a C11 mtx_t costs a second
// locked instruction (its unlock) and about sixty more instructions per
// acquisition, which on the alloca+dealloca path was a quarter of the time
// (docs/performance-log.md, 2026-11-27).
// A waiter spins, then yields its core (a holder that was preempted gets it
// back); it never sleeps in the kernel. All-zero memory is an unlocked lock.
typedef struct hl_spinlock_t {
  atomic_bool held;
} hl_spinlock_t;

#define HL_SPINLOCK_INITIALIZER \
  { false }

static inline void hl_spinlock_init(hl_spinlock_t* lock) {
  atomic_init(&lock->held, false);
}

// The contended part of hl_spinlock_lock.
void hl_spinlock_lock_contended(hl_spinlock_t* lock);

static inline void hl_spinlock_lock(hl_spinlock_t* lock) {
  if (HL_LIKELY(
          !atomic_exchange_explicit(&lock->held, true, memory_order_acquire))) {
    return;
  }
  hl_spinlock_lock_contended(lock);
}

static inline void hl_spinlock_unlock(hl_spinlock_t* lock) {
  atomic_store_explicit(&lock->held, false, memory_order_release);
}

#endif  // HIPLINE_RUNTIME_BASE_SPIN_H_
