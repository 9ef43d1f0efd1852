// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Time and deadlines. Times are nanoseconds on the monotonic clock.
#ifndef HIPLINE_TIME_H_
#define HIPLINE_TIME_H_

#include <stdint.h>

#include "hipline/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int64_t hl_time_t;      // Absolute monotonic time, ns.
typedef int64_t hl_duration_t;  // Relative time, ns.

#define HL_INFINITE_FUTURE INT64_MAX
#define HL_IMMEDIATE_PAST INT64_MIN

// Returns the current monotonic time in nanoseconds.
HL_API hl_time_t hl_time_now(void);

// Returns now + |timeout_ns|, saturating to HL_INFINITE_FUTURE.
HL_API hl_time_t hl_deadline_after(hl_duration_t timeout_ns);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_TIME_H_
