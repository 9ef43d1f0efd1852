// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "runtime/base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>

#include "runtime/base/env.h"

static atomic_int hl_log_level_ = -1;

hl_status_t hl_log_level_from_env(hl_log_level_t* out_level) {
  int index = HL_LOG_WARN;
  bool set = false;
  hl_status_t st = hl_env_read_enum(HL_ENV_LOG, &index, &set);
  *out_level = (hl_log_level_t)index;
  return st;
}

hl_log_level_t hl_log_level(void) {
  int level = atomic_load_explicit(&hl_log_level_, memory_order_relaxed);
  if (HL_LIKELY(level >= 0)) return (hl_log_level_t)level;
  hl_log_level_t parsed = HL_LOG_WARN;
  hl_status_t st = hl_log_level_from_env(&parsed);
  int expected = -1;
  if (atomic_compare_exchange_strong(&hl_log_level_, &expected, (int)parsed) &&
      st) {
    // Device creation reports this as a status; here we can only say it once.
    hl_status_fprint(stderr, "hipline: ", st);
  }
  hl_status_free(st);
  return (hl_log_level_t)atomic_load(&hl_log_level_);
}

void hl_log_set_level(hl_log_level_t level) {
  atomic_store(&hl_log_level_, (int)level);
}

void hl_log_write(hl_log_level_t level, const char* file, int line,
                  const char* format, ...) {
  static const char kLetters[] = "-EWID";
  const char* base = strrchr(file, '/');
  char text[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  fprintf(stderr, "hipline %c %s:%d] %s\n", kLetters[level],
          base ? base + 1 : file, line, text);
}
