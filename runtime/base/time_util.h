// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Internal time helpers: deadlines for C11 condition variables.
#ifndef HIPLINE_RUNTIME_BASE_TIME_UTIL_H_
#define HIPLINE_RUNTIME_BASE_TIME_UTIL_H_

#include <stdbool.h>
#include <stdint.h>
#include <threads.h>
#include <time.h>

#include "hipline/time.h"

// Converts a monotonic |deadline| to an absolute TIME_UTC timespec. Returns
// false for HL_INFINITE_FUTURE (wait forever).
bool hl_deadline_to_timespec(hl_time_t deadline, struct timespec* out);

// cnd_wait/cnd_timedwait until |deadline|; returns thrd_success,
// thrd_timedout or thrd_error.
int hl_cnd_wait_until(cnd_t* cnd, mtx_t* mtx, hl_time_t deadline);

// Sleeps for |ns| nanoseconds (no-op for <= 0).
void hl_sleep_ns(hl_duration_t ns);

// Sleeps until the monotonic clock reaches |deadline| (returns at once when
// it has). Unlike a busy wait it leaves the core to other threads.
void hl_sleep_until(hl_time_t deadline);

// Asks the kernel to wake the calling thread's timed sleeps as close to
// their deadline as it can (Linux timer slack of 1 ns instead of the default
// 50 us); a no-op elsewhere. For threads that model device time by sleeping.
void hl_thread_set_precise_sleep(void);

// Nanoseconds the calling thread has spent runnable but waiting for a core
// since it started (Linux: the second field of /proc/thread-self/schedstat,
// read through a descriptor kept per thread), or -1 where that is unknown.
// The host backend's spin kernel leaves this time out of its device clock.
int64_t hl_thread_run_delay_ns(void);

// Names the calling thread for debuggers, top and perf (Linux; a no-op
// elsewhere): hipline's threads are "hl-stream", "hl-work", "hl-completer"
// and "hl-destroy". Each names itself first thing, before any backend call:
// the hip test runtime's call counter tells hipline's threads from the
// embedder's by the "hl-" prefix.
void hl_thread_set_name(const char* name);

#endif  // HIPLINE_RUNTIME_BASE_TIME_UTIL_H_
