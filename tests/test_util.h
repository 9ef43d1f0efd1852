// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Small helpers shared by the cmocka tests. Header-only; include it after the
// standard headers and before nothing else is needed: it pulls in cmocka.h
// itself (with the headers cmocka requires).
//
//   HL_ASSERT_OK(expr)            fails the test with the status text if not OK
//   HL_ASSERT_STATUS(expr, CODE)  expects HL_STATUS_CODE; frees the status
//   hl_test_host_device(&device)  a device on the host backend (ordinal 0)
//   hl_test_skip_if_no_gpu()      skip() unless the hip backend has a device
//   hl_test_cpu_ns()              CPU time (user+sys) of the calling thread
//                                 (RUSAGE_THREAD; the process where the
//                                 platform lacks it, which only overcounts)
//   hl_test_sanitized()           true under ASan/TSan or HIPLINE_TSAN=1
//   hl_test_scale(n, divisor)     n, or n / divisor (at least 1) when sanitized
//   hl_test_sleep_ms(ms)
//
// RUSAGE_THREAD needs _GNU_SOURCE: tests that use hl_test_cpu_ns define it on
// the command line (see tests/timeline.cmake).
#ifndef HIPLINE_TESTS_TEST_UTIL_H_
#define HIPLINE_TESTS_TEST_UTIL_H_

#include <dirent.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

// cmocka.h must follow the headers above.
#include <cmocka.h>

#include "hipline/device.h"
#include "hipline/status.h"

// Fails the current test with the status text when |expr| is not OK.
#define HL_ASSERT_OK(expr)                                               \
  do {                                                                   \
    hl_status_t hl_test_st_ = (expr);                                    \
    if (hl_test_st_) {                                                   \
      char hl_test_buf_[1024];                                           \
      hl_status_format(hl_test_st_, hl_test_buf_, sizeof(hl_test_buf_)); \
      hl_status_free(hl_test_st_);                                       \
      fail_msg("%s: %s", #expr, hl_test_buf_);                           \
    }                                                                    \
  } while (0)

// Expects |expr| to fail with HL_STATUS_<code>; the status is freed.
#define HL_ASSERT_STATUS(expr, code)                                     \
  do {                                                                   \
    hl_status_t hl_test_st_ = (expr);                                    \
    hl_status_code_t hl_test_code_ = hl_status_code(hl_test_st_);        \
    if (hl_test_code_ != HL_STATUS_##code) {                             \
      char hl_test_buf_[1024];                                           \
      hl_status_format(hl_test_st_, hl_test_buf_, sizeof(hl_test_buf_)); \
      hl_status_free(hl_test_st_);                                       \
      fail_msg("%s: expected %s, got %s", #expr, #code, hl_test_buf_);   \
    }                                                                    \
    hl_status_free(hl_test_st_);                                         \
  } while (0)

// The backend a backend-independent (conformance) test runs on: the host
// backend, or the hip backend when HIPLINE_TEST_BACKEND=hip (on a GPU, or on
// the hip test runtime, tests/hip_test_runtime/). Without a HIP device the
// process exits 77, which ctest reports as skipped.
static inline hl_backend_kind_t hl_test_backend_kind(void) {
  const char* want = getenv("HIPLINE_TEST_BACKEND");
  if (!want || !*want || strcmp(want, "host") == 0) return HL_BACKEND_HOST;
  if (strcmp(want, "hip") != 0) {
    fprintf(stderr, "HIPLINE_TEST_BACKEND=\"%s\": expected host or hip\n",
            want);
    exit(1);
  }
  hl_backend_info_t info;
  HL_ASSERT_OK(hl_backend_query(HL_BACKEND_HIP, &info));
  if (!info.available || info.device_count < 1) {
    fprintf(stderr, "skipped: no HIP device (%s)\n", info.reason);
    exit(77);
  }
  return HL_BACKEND_HIP;
}

// Creates a device for a backend-independent test on hl_test_backend_kind().
static inline void hl_test_host_device(hl_device_t** out_device) {
  hl_device_options_t options;
  hl_device_options_initialize(&options);
  options.backend = hl_test_backend_kind();
  HL_ASSERT_OK(hl_device_create(&options, hl_allocator_system(), out_device));
}

// Capability checks for the conformance tests: a test that relies on what
// only some backends can do says so here, and is skipped (with the reason)
// on a backend without it. The capabilities are the backend contract's
// (runtime/backend/backend.h), never its kind.
// Call right after creating |device|: on a skip it releases the device.
#define hl_test_require_(device, cond, why)      \
  do {                                           \
    if (!(cond)) {                               \
      print_message("skipped: needs %s\n", why); \
      hl_device_release(device);                 \
      skip();                                    \
    }                                            \
  } while (0)

// Checked mode (use-after-free detection, poisoning) inspects buffers from
// host functions: it needs host-visible device memory.
#define hl_test_require_checked(device)               \
  hl_test_require_(device, hl_device_checked(device), \
                   "checked mode (host_visible_memory)")

// Host memory used as device memory (external buffers made with malloc).
#define hl_test_require_host_visible(device)                       \
  hl_test_require_(device, (device)->backend->host_visible_memory, \
                   "host-visible device memory (host_visible_memory)")

// Counting HIPLINE_FAULTS stream delays and allocation failures.
#define hl_test_require_fault_injection(device)               \
  hl_test_require_(device, (device)->backend->injects_faults, \
                   "HIPLINE_FAULTS injection (injects_faults)")

// Work on a stream checked and cancelled when the stream gets there, not at
// issue: an operation whose wait failed after it was issued does nothing,
// and the failure it carries is the wait's.
#define hl_test_require_stream_ordered_host_work(device)                \
  hl_test_require_(device, (device)->backend->stream_ordered_host_work, \
                   "cancellation at execution (stream_ordered_host_work)")

// Host memory that the test backend's device can address, for external
// buffers whose contents the test reads on the host: calloc on the host
// backend; on the hip backend pinned memory from hipHostMalloc (a GPU reaches
// pageable memory only through HMM, which a test must not assume), taken
// from the libamdhip64 the hip backend loaded. Free with
// hl_test_device_visible_free. Call after creating a device.
typedef int (*hl_test_hip_host_malloc_fn)(void**, size_t, unsigned int);
typedef int (*hl_test_hip_host_free_fn)(void*);
static inline void* hl_test_hip_symbol_(const char* name) {
  static const char* const libraries[] = {"libamdhip64.so", "libamdhip64.so.5",
                                          "libamdhip64.so.6"};
  for (size_t i = 0; i < sizeof(libraries) / sizeof(libraries[0]); ++i) {
    void* library = dlopen(libraries[i], RTLD_NOW | RTLD_NOLOAD);
    if (!library) continue;
    void* symbol = dlsym(library, name);
    dlclose(library);  // The hip backend's own handle keeps it loaded.
    if (symbol) return symbol;
  }
  fail_msg("%s: no loaded libamdhip64 exports it", name);
  return NULL;
}
static inline void* hl_test_device_visible_calloc(size_t bytes) {
  void* memory = NULL;
  if (hl_test_backend_kind() == HL_BACKEND_HOST) {
    memory = calloc(1, bytes);
  } else {
    hl_test_hip_host_malloc_fn host_malloc = NULL;
    void* symbol = hl_test_hip_symbol_("hipHostMalloc");
    memcpy(&host_malloc, &symbol, sizeof(symbol));
    assert_int_equal(host_malloc(&memory, bytes, 0), 0);
    if (memory) memset(memory, 0, bytes);
  }
  assert_non_null(memory);
  return memory;
}
static inline void hl_test_device_visible_free(void* memory) {
  if (hl_test_backend_kind() == HL_BACKEND_HOST) {
    free(memory);
    return;
  }
  hl_test_hip_host_free_fn host_free = NULL;
  void* symbol = hl_test_hip_symbol_("hipHostFree");
  memcpy(&host_free, &symbol, sizeof(symbol));
  assert_int_equal(host_free(memory), 0);
}

// Skips the current test unless the hip backend reports a device.
#define hl_test_skip_if_no_gpu()                                            \
  do {                                                                      \
    hl_backend_info_t hl_test_info_;                                        \
    HL_ASSERT_OK(hl_backend_query(HL_BACKEND_HIP, &hl_test_info_));         \
    if (!hl_test_info_.available || hl_test_info_.device_count < 1) {       \
      print_message("skipped: no HIP device (%s)\n", hl_test_info_.reason); \
      skip();                                                               \
    }                                                                       \
  } while (0)

static inline int64_t hl_test_timeval_ns(struct timeval tv) {
  return (int64_t)tv.tv_sec * 1000000000 + (int64_t)tv.tv_usec * 1000;
}

// User plus system CPU time of the calling thread, in ns.
static inline int64_t hl_test_cpu_ns(void) {
  struct rusage usage;
#if defined(RUSAGE_THREAD)
  getrusage(RUSAGE_THREAD, &usage);
#else
  getrusage(RUSAGE_SELF, &usage);
#endif
  return hl_test_timeval_ns(usage.ru_utime) +
         hl_test_timeval_ns(usage.ru_stime);
}

// User plus system CPU time of the whole process, in ns.
static inline int64_t hl_test_process_cpu_ns(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return hl_test_timeval_ns(usage.ru_utime) +
         hl_test_timeval_ns(usage.ru_stime);
}

// CPU time per thread (/proc/self/task/*/schedstat: nanoseconds on a CPU
// since the thread started). hl_test_runtime_cpu_ns sums the calling
// process's main thread and hipline's own threads (named "hl-*"), leaving
// out threads a driver starts in the process (CUDA's "cuda-EvtHandlr" spent
// 79 ms of CPU during a 200 ms wait on an H200 shared by eight test
// processes): hipline's CPU-use promises cover hipline. With |print|, each
// thread is listed with its name and time. -1 without /proc.
static inline int64_t hl_test_threads_cpu_ns_(bool print) {
  DIR* tasks = opendir("/proc/self/task");
  if (!tasks) return -1;
  char main_tid[32];
  snprintf(main_tid, sizeof(main_tid), "%ld", (long)getpid());
  int64_t total = 0;
  for (struct dirent* e = readdir(tasks); e; e = readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    char path[320], name[64] = "?";
    unsigned long long ns = 0;
    snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
    FILE* f = fopen(path, "r");
    if (f) {
      if (fgets(name, sizeof(name), f)) name[strcspn(name, "\n")] = 0;
      fclose(f);
    }
    snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", e->d_name);
    f = fopen(path, "r");
    if (f) {
      if (fscanf(f, "%llu", &ns) != 1) ns = 0;
      fclose(f);
    }
    bool counted =
        strncmp(name, "hl-", 3) == 0 || strcmp(e->d_name, main_tid) == 0;
    if (counted) total += (int64_t)ns;
    if (print) {
      print_message("thread %s (%s): %.3f ms on a CPU%s\n", e->d_name, name,
                    ns / 1e6, counted ? "" : " (not hipline's)");
    }
  }
  closedir(tasks);
  return total;
}
static inline int64_t hl_test_runtime_cpu_ns(void) {
  int64_t ns = hl_test_threads_cpu_ns_(false);
  return ns >= 0 ? ns : hl_test_process_cpu_ns();
}
static inline void hl_test_print_thread_cpu(void) {
  (void)hl_test_threads_cpu_ns_(true);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HL_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HL_TEST_SANITIZED 1
#endif
#endif
#ifndef HL_TEST_SANITIZED
#define HL_TEST_SANITIZED 0
#endif

// True in sanitizer builds, or when HIPLINE_TSAN is set to anything but "0".
static inline bool hl_test_sanitized(void) {
  const char* v = getenv("HIPLINE_TSAN");
  return HL_TEST_SANITIZED || (v && v[0] && strcmp(v, "0") != 0);
}

// Iteration counts: |n| normally, |n| / |divisor| (at least 1) when sanitized.
static inline uint64_t hl_test_scale(uint64_t n, uint64_t divisor) {
  if (!hl_test_sanitized() || divisor <= 1) return n;
  return n / divisor ? n / divisor : 1;
}

static inline void hl_test_sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

//===----------------------------------------------------------------------===//
// Object helpers shared by the per-layer test utilities
//===----------------------------------------------------------------------===//

#include "hipline/buffer.h"

#define HL_TEST_MS ((hl_duration_t)1000000)

static inline hl_queue_t* hl_test_queue_create(hl_device_t* device) {
  hl_queue_t* q = NULL;
  HL_ASSERT_OK(hl_queue_create(device, &q));
  return q;
}

static inline hl_semaphore_t* hl_test_semaphore_create(void) {
  hl_semaphore_t* s = NULL;
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &s));
  return s;
}

// A fence holding |s|@|v|, or an empty one when |s| is NULL (caller
// releases it).
static inline hl_fence_t* hl_test_fence(hl_semaphore_t* s, uint64_t v) {
  hl_fence_t* f = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &f));
  if (s) HL_ASSERT_OK(hl_fence_insert(f, s, v));
  return f;
}

static inline hl_memory_stats_t hl_test_memory_stats(hl_device_t* d) {
  hl_memory_stats_t s;
  HL_ASSERT_OK(hl_device_memory_stats(d, &s));
  return s;
}

// Polls until |d|'s bytes_in_use is |bytes| or |timeout_ms| passes (op
// releases and frontier frees finish on the completion thread).
static inline bool hl_test_poll_bytes_in_use(hl_device_t* d, uint64_t bytes,
                                             int timeout_ms) {
  hl_time_t deadline = hl_deadline_after(timeout_ms * HL_TEST_MS);
  for (;;) {
    if (hl_test_memory_stats(d).bytes_in_use == bytes) return true;
    if (hl_time_now() > deadline) return false;
    hl_test_sleep_ms(2);
  }
}

// Asserts |status| has |code| and its text contains each non-NULL needle;
// frees it.
static inline void hl_test_assert_status_has(hl_status_t status,
                                             hl_status_code_t code,
                                             const char* needle1,
                                             const char* needle2) {
  char text[2048];
  hl_status_format(status, text, sizeof(text));
  hl_status_code_t got = hl_status_code(status);
  hl_status_free(status);
  if (got != code) {
    fail_msg("expected %s, got \"%s\"", hl_status_code_name(code), text);
  }
  if (needle1 && !strstr(text, needle1)) {
    fail_msg("status \"%s\" does not mention \"%s\"", text, needle1);
  }
  if (needle2 && !strstr(text, needle2)) {
    fail_msg("status \"%s\" does not mention \"%s\"", text, needle2);
  }
}

// C11 threads under ThreadSanitizer: the runtime itself routes them through
// pthreads in TSan builds (runtime/base/tsan_threads.c), which also covers
// the tests' own threads. HL_TEST_C11_THREADS_SHIM is accepted and ignored.

#endif  // HIPLINE_TESTS_TEST_UTIL_H_
