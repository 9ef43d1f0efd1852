// Internal time helpers: deadlines for C11 condition variables.
#ifndef HIPLINE_RUNTIME_BASE_TIME_UTIL_H_
#define HIPLINE_RUNTIME_BASE_TIME_UTIL_H_

#include <stdbool.h>
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

#endif  // HIPLINE_RUNTIME_BASE_TIME_UTIL_H_
