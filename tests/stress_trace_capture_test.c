// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Trace capture (runtime/base/trace.c, include/hipline/trace.h): the event
// array grows up to its limit, events beyond it are counted as dropped (in
// the file and by hl_trace_capture_dropped), several threads record while it
// grows, a second end writes nothing (it must not replace a trace with an
// empty one), and a failed write is an error naming the file.

// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <unistd.h>

#include "hipline/trace.h"
#include "runtime/base/trace.h"

static char* read_all(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* text = calloc(1, (size_t)n + 1);
  if (text && fread(text, 1, (size_t)n, f) != (size_t)n) {
    free(text);
    text = NULL;
  }
  fclose(f);
  return text;
}

// A plain scan (sanitizers' strstr measures the whole rest of the text on
// every call, which is quadratic over a trace).
static size_t count_of(const char* text, const char* needle) {
  size_t n = 0, length = strlen(needle);
  for (const char* p = text; *p; ++p) {
    if (*p == needle[0] && strncmp(p, needle, length) == 0) ++n;
  }
  return n;
}

static void temp_path(char* path, size_t capacity) {
  snprintf(path, capacity, "%s/hl-trace-test-%ld.json",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
}

#define EVENTS_PER_THREAD 20000
#define THREADS 4

static int record_events(void* arg) {
  (void)arg;
  for (int i = 0; i < EVENTS_PER_THREAD; ++i) {
    hl_trace_instant("test.event", (uint64_t)i);
  }
  return 0;
}

// Beyond the initial array: grows; beyond the limit: counted, written,
// reported.
static void test_grows_then_counts_drops(void** state) {
  (void)state;
  char path[256];
  temp_path(path, sizeof(path));
  const uint64_t limit = 50000;  // Above the first block, below the total.
  hl_trace_capture_begin(limit);
  thrd_t threads[THREADS];
  for (int i = 0; i < THREADS; ++i) {
    assert_int_equal(thrd_create(&threads[i], record_events, NULL),
                     thrd_success);
  }
  for (int i = 0; i < THREADS; ++i) thrd_join(threads[i], NULL);
  assert_int_equal(hl_trace_capture_count("test.event"), limit);
  assert_int_equal(hl_trace_capture_dropped(),
                   (uint64_t)THREADS * EVENTS_PER_THREAD - limit);
  assert_null(hl_trace_capture_end(path));
  // The count of the last capture stays readable after its end.
  assert_int_equal(hl_trace_capture_dropped(),
                   (uint64_t)THREADS * EVENTS_PER_THREAD - limit);
  char* text = read_all(path);
  assert_non_null(text);
  assert_int_equal(count_of(text, "\"test.event\""), limit);
  char expected[64];
  snprintf(expected, sizeof(expected), "\"dropped\":%llu",
           (unsigned long long)((uint64_t)THREADS * EVENTS_PER_THREAD - limit));
  assert_non_null(strstr(text, expected));
  free(text);

  // A second end has nothing to write: the trace stays as it is.
  assert_null(hl_trace_capture_end(path));
  text = read_all(path);
  assert_non_null(text);
  assert_int_equal(count_of(text, "\"test.event\""), limit);
  free(text);
  unlink(path);
}

// A write that fails (a full disk) is DATA_LOSS naming the file.
static void test_failed_write_is_an_error(void** state) {
  (void)state;
  if (access("/dev/full", W_OK) != 0) skip();
  hl_trace_capture_begin(0);
  for (int i = 0; i < 10000; ++i) hl_trace_instant("test.full", (uint64_t)i);
  hl_status_t st = hl_trace_capture_end("/dev/full");
  assert_non_null(st);
  assert_int_equal(hl_status_code(st), HL_STATUS_DATA_LOSS);
  assert_non_null(strstr(hl_status_message(st), "/dev/full"));
  hl_status_free(st);
  assert_false(hl_trace_capture_active());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grows_then_counts_drops),
      cmocka_unit_test(test_failed_write_is_an_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
