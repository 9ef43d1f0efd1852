// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// C11 threads on intercepted pthread calls, for ThreadSanitizer builds only.
//
// glibc (2.34 and later) implements thrd_create, mtx_lock, cnd_wait and
// call_once on internal pthread entry points that the sanitizer runtime never
// sees: threads it did not create crash it, and C11 locks are not
// synchronization points to it, so every report would be noise. In a TSan
// build these definitions replace glibc's for the whole program (the library
// is linked before libc) and go through the public pthread functions, which
// TSan intercepts. glibc's C11 types are unions the size of the pthread
// types, so the casts below are layout-compatible. Other builds compile this
// file to nothing.

#if defined(__SANITIZE_THREAD__)

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

_Static_assert(sizeof(mtx_t) >= sizeof(pthread_mutex_t), "mtx_t layout");
_Static_assert(sizeof(cnd_t) >= sizeof(pthread_cond_t), "cnd_t layout");
_Static_assert(sizeof(once_flag) >= sizeof(pthread_once_t), "once_flag layout");

static int hl_thrd_code(int rc) {
  if (rc == 0) return thrd_success;
  if (rc == ETIMEDOUT) return thrd_timedout;
  if (rc == EBUSY) return thrd_busy;
  if (rc == ENOMEM || rc == EAGAIN) return thrd_nomem;
  return thrd_error;
}

typedef struct hl_thrd_start_t {
  thrd_start_t fn;
  void* arg;
} hl_thrd_start_t;

static void* hl_thrd_entry(void* p) {
  hl_thrd_start_t start = *(hl_thrd_start_t*)p;
  free(p);
  return (void*)(intptr_t)start.fn(start.arg);
}

int thrd_create(thrd_t* thr, thrd_start_t fn, void* arg) {
  hl_thrd_start_t* start = malloc(sizeof(*start));
  if (!start) return thrd_nomem;
  start->fn = fn;
  start->arg = arg;
  int rc = pthread_create((pthread_t*)thr, NULL, hl_thrd_entry, start);
  if (rc) free(start);
  return hl_thrd_code(rc);
}

int thrd_join(thrd_t thr, int* res) {
  void* value = NULL;
  int rc = pthread_join((pthread_t)thr, &value);
  if (!rc && res) *res = (int)(intptr_t)value;
  return hl_thrd_code(rc);
}

int thrd_detach(thrd_t thr) {
  return hl_thrd_code(pthread_detach((pthread_t)thr));
}

int mtx_init(mtx_t* mtx, int type) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  if (type & mtx_recursive) {
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  }
  int rc = pthread_mutex_init((pthread_mutex_t*)mtx, &attr);
  pthread_mutexattr_destroy(&attr);
  return hl_thrd_code(rc);
}

int mtx_lock(mtx_t* mtx) {
  return hl_thrd_code(pthread_mutex_lock((pthread_mutex_t*)mtx));
}

int mtx_trylock(mtx_t* mtx) {
  return hl_thrd_code(pthread_mutex_trylock((pthread_mutex_t*)mtx));
}

int mtx_timedlock(mtx_t* restrict mtx, const struct timespec* restrict ts) {
  return hl_thrd_code(pthread_mutex_timedlock((pthread_mutex_t*)mtx, ts));
}

int mtx_unlock(mtx_t* mtx) {
  return hl_thrd_code(pthread_mutex_unlock((pthread_mutex_t*)mtx));
}

void mtx_destroy(mtx_t* mtx) { pthread_mutex_destroy((pthread_mutex_t*)mtx); }

int cnd_init(cnd_t* cond) {
  return hl_thrd_code(pthread_cond_init((pthread_cond_t*)cond, NULL));
}

int cnd_signal(cnd_t* cond) {
  return hl_thrd_code(pthread_cond_signal((pthread_cond_t*)cond));
}

int cnd_broadcast(cnd_t* cond) {
  return hl_thrd_code(pthread_cond_broadcast((pthread_cond_t*)cond));
}

int cnd_wait(cnd_t* cond, mtx_t* mtx) {
  return hl_thrd_code(
      pthread_cond_wait((pthread_cond_t*)cond, (pthread_mutex_t*)mtx));
}

int cnd_timedwait(cnd_t* restrict cond, mtx_t* restrict mtx,
                  const struct timespec* restrict ts) {
  return hl_thrd_code(
      pthread_cond_timedwait((pthread_cond_t*)cond, (pthread_mutex_t*)mtx, ts));
}

void cnd_destroy(cnd_t* cond) { pthread_cond_destroy((pthread_cond_t*)cond); }

void call_once(once_flag* flag, void (*fn)(void)) {
  pthread_once((pthread_once_t*)flag, fn);
}

#else
// ISO C forbids an empty translation unit.
typedef int hl_tsan_threads_unused_t;
#endif
