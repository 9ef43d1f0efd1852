// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Per-entry HIP call counts (see call_counts.h). TEST CODE ONLY.

#include "tests/hip_test_runtime/call_counts.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

static struct {
  once_flag once;
  bool enabled;
  char path[4096];
  atomic_llong calls[HL_CALL_COUNTS_MAX][2];  // [entry][0: caller, 1: runtime]
} hl_call_counts_ = {.once = ONCE_FLAG_INIT};

// Written at exit, or when the library is unloaded (atexit in a shared
// object runs at its dlclose).
static void hl_call_counts_write(void) {
  FILE* file = fopen(hl_call_counts_.path, "w");
  if (!file) {
    fprintf(stderr, "%s=%s: cannot open it for writing\n", HL_CALL_COUNTS_ENV,
            hl_call_counts_.path);
    return;
  }
  fprintf(file, "# NAME TOTAL CALLER RUNTIME\n");
  size_t count = hl_call_counts_name_count < HL_CALL_COUNTS_MAX
                     ? hl_call_counts_name_count
                     : HL_CALL_COUNTS_MAX;
  for (size_t i = 0; i < count; ++i) {
    long long caller = atomic_load(&hl_call_counts_.calls[i][0]);
    long long runtime = atomic_load(&hl_call_counts_.calls[i][1]);
    if (caller + runtime == 0) continue;
    fprintf(file, "%s %lld %lld %lld\n", hl_call_counts_names[i],
            caller + runtime, caller, runtime);
  }
  if (fclose(file) != 0) {
    fprintf(stderr, "%s=%s: writing failed\n", HL_CALL_COUNTS_ENV,
            hl_call_counts_.path);
  }
}

static void hl_call_counts_initialize(void) {
  const char* path = getenv(HL_CALL_COUNTS_ENV);
  if (!path || !*path) return;
  size_t length = strlen(path);
  if (length >= sizeof(hl_call_counts_.path)) {
    fprintf(stderr, "%s: the path is longer than %zu bytes\n",
            HL_CALL_COUNTS_ENV, sizeof(hl_call_counts_.path) - 1);
    abort();
  }
  memcpy(hl_call_counts_.path, path, length + 1);
  hl_call_counts_.enabled = true;
  atexit(hl_call_counts_write);
}

bool hl_call_counts_on_runtime_thread(void) {
  char name[17] = {0};
#if defined(__linux__) && defined(PR_GET_NAME)
  if (prctl(PR_GET_NAME, (unsigned long)name, 0ul, 0ul, 0ul) != 0) name[0] = 0;
#endif
  return strncmp(name, "hl-", 3) == 0 || hl_call_counts_library_thread(name);
}

void hl_call_counts_add(size_t index) {
  call_once(&hl_call_counts_.once, hl_call_counts_initialize);
  if (!hl_call_counts_.enabled || index >= HL_CALL_COUNTS_MAX) return;
  atomic_fetch_add_explicit(
      &hl_call_counts_.calls[index][hl_call_counts_on_runtime_thread() ? 1 : 0],
      1, memory_order_relaxed);
}
