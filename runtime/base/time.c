// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#if defined(__linux__)
#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <unistd.h>
#endif

#include "runtime/base/time_util.h"

hl_time_t hl_time_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (hl_time_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

hl_time_t hl_deadline_after(hl_duration_t timeout_ns) {
  if (timeout_ns <= 0)
    return timeout_ns == 0 ? hl_time_now() : HL_IMMEDIATE_PAST;
  hl_time_t now = hl_time_now();
  if (timeout_ns >= HL_INFINITE_FUTURE - now) return HL_INFINITE_FUTURE;
  return now + timeout_ns;
}

bool hl_deadline_to_timespec(hl_time_t deadline, struct timespec* out) {
  if (deadline == HL_INFINITE_FUTURE) return false;
  hl_time_t remaining = deadline - hl_time_now();
  if (remaining < 0) remaining = 0;
  // cnd_timedwait measures against TIME_UTC; translate the monotonic deadline.
  timespec_get(out, TIME_UTC);
  int64_t ns = (int64_t)out->tv_nsec + remaining % 1000000000ll;
  out->tv_sec += (time_t)(remaining / 1000000000ll + ns / 1000000000ll);
  out->tv_nsec = (long)(ns % 1000000000ll);
  return true;
}

int hl_cnd_wait_until(cnd_t* cnd, mtx_t* mtx, hl_time_t deadline) {
  struct timespec ts;
  if (!hl_deadline_to_timespec(deadline, &ts)) return cnd_wait(cnd, mtx);
  return cnd_timedwait(cnd, mtx, &ts);
}

void hl_sleep_ns(hl_duration_t ns) {
  if (ns <= 0) return;
  struct timespec ts = {(time_t)(ns / 1000000000ll), (long)(ns % 1000000000ll)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

void hl_sleep_until(hl_time_t deadline) {
  if (deadline == HL_INFINITE_FUTURE) deadline = hl_time_now();
  struct timespec ts = {(time_t)(deadline / 1000000000ll),
                        (long)(deadline % 1000000000ll)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

void hl_thread_set_precise_sleep(void) {
#if defined(__linux__) && defined(PR_SET_TIMERSLACK)
  // Failure only keeps the default slack.
  (void)prctl(PR_SET_TIMERSLACK, 1ul, 0ul, 0ul, 0ul);
#endif
}

#if defined(__linux__)
// Each thread keeps its schedstat descriptor in a thread-specific slot
// (descriptor + 1; -1 once opening failed); the slot's destructor closes it
// when the thread ends, so stream threads that come and go leak nothing.
// A child of fork() is a new task whose one thread inherited the slot of
// the thread that forked, naming that thread's file in the parent: the
// child drops it and opens its own at the next read.
static once_flag hl_run_delay_once_ = ONCE_FLAG_INIT;
static tss_t hl_run_delay_key_;
static bool hl_run_delay_key_ok_;

static void hl_run_delay_close(void* slot) {
  intptr_t fd_plus_one = (intptr_t)slot;
  if (fd_plus_one > 0) close((int)(fd_plus_one - 1));
}

static void hl_run_delay_forget_in_child(void) {
  hl_run_delay_close(tss_get(hl_run_delay_key_));
  (void)tss_set(hl_run_delay_key_, NULL);
}

static void hl_run_delay_init(void) {
  hl_run_delay_key_ok_ =
      tss_create(&hl_run_delay_key_, hl_run_delay_close) == thrd_success &&
      pthread_atfork(NULL, NULL, hl_run_delay_forget_in_child) == 0;
}

int64_t hl_thread_run_delay_ns(void) {
  call_once(&hl_run_delay_once_, hl_run_delay_init);
  if (!hl_run_delay_key_ok_) return -1;
  intptr_t slot = (intptr_t)tss_get(hl_run_delay_key_);
  if (slot == 0) {
    int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    slot = fd >= 0 ? (intptr_t)fd + 1 : -1;
    if (tss_set(hl_run_delay_key_, (void*)slot) != thrd_success) {
      if (fd >= 0) close(fd);
      return -1;
    }
  }
  if (slot < 0) return -1;
  // "<ns on a core> <ns waiting for one> <time slices>\n"
  char text[96];
  ssize_t n = pread((int)(slot - 1), text, sizeof(text) - 1, 0);
  if (n <= 0) return -1;
  text[n] = '\0';
  char* end = NULL;
  (void)strtoull(text, &end, 10);
  if (end == text || *end != ' ') return -1;
  char* field = end + 1;
  unsigned long long waited = strtoull(field, &end, 10);
  if (end == field || waited > (unsigned long long)INT64_MAX) return -1;
  return (int64_t)waited;
}
#else
int64_t hl_thread_run_delay_ns(void) { return -1; }
#endif

void hl_thread_set_name(const char* name) {
#if defined(__linux__) && defined(PR_SET_NAME)
  // At most 15 characters are kept; failure keeps the inherited name.
  (void)prctl(PR_SET_NAME, (unsigned long)name, 0ul, 0ul, 0ul);
#else
  (void)name;
#endif
}
