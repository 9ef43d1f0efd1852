// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Logging to stderr with a level set by HIPLINE_LOG=off|error|warn|info|debug.
#ifndef HIPLINE_RUNTIME_BASE_LOG_H_
#define HIPLINE_RUNTIME_BASE_LOG_H_

#include "hipline/status.h"

typedef enum hl_log_level_e {
  HL_LOG_OFF = 0,
  HL_LOG_ERROR = 1,
  HL_LOG_WARN = 2,
  HL_LOG_INFO = 3,
  HL_LOG_DEBUG = 4,
} hl_log_level_t;

// Parses HIPLINE_LOG; the error names the variable and the accepted values.
hl_status_t hl_log_level_from_env(hl_log_level_t* out_level);

// Returns the active level (HIPLINE_LOG, read once; warn by default).
hl_log_level_t hl_log_level(void);

// Overrides the level for this process.
void hl_log_set_level(hl_log_level_t level);

void hl_log_write(hl_log_level_t level, const char* file, int line,
                  const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#define HL_LOG(level, ...)                                    \
  do {                                                        \
    if (HL_UNLIKELY((level) <= hl_log_level())) {             \
      hl_log_write((level), __FILE__, __LINE__, __VA_ARGS__); \
    }                                                         \
  } while (0)
#define HL_LOG_ERROR(...) HL_LOG(HL_LOG_ERROR, __VA_ARGS__)
#define HL_LOG_WARN(...) HL_LOG(HL_LOG_WARN, __VA_ARGS__)
#define HL_LOG_INFO(...) HL_LOG(HL_LOG_INFO, __VA_ARGS__)
#define HL_LOG_DEBUG(...) HL_LOG(HL_LOG_DEBUG, __VA_ARGS__)

#endif  // HIPLINE_RUNTIME_BASE_LOG_H_
