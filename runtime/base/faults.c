// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "runtime/base/faults.h"

#include <stdatomic.h>
#include <string.h>
#include <threads.h>

#include "runtime/base/env.h"

static const char kFaultKeys[] =
    "alloc_fail_every|stream_delay_us|fail_submission|fail_submission_every|"
    "seed";

static hl_status_t hl_faults_kv(void* user, const char* key,
                                const char* value) {
  hl_faults_t* f = (hl_faults_t*)user;
  uint64_t* slot = NULL;
  uint64_t max = UINT64_MAX;
  if (strcmp(key, "alloc_fail_every") == 0) {
    slot = &f->alloc_fail_every;
  } else if (strcmp(key, "stream_delay_us") == 0) {
    slot = &f->stream_delay_us;
    max = 1000000;  // One second per item is already absurd.
  } else if (strcmp(key, "fail_submission") == 0) {
    slot = &f->fail_submission;
  } else if (strcmp(key, "fail_submission_every") == 0) {
    slot = &f->fail_submission_every;
  } else if (strcmp(key, "seed") == 0) {
    slot = &f->seed;
  } else {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "unknown key '%s'; accepted keys: %s", key,
                          kFaultKeys);
  }
  return hl_parse_u64(key, value, 0, max, slot);
}

hl_status_t hl_faults_parse(const char* spec, hl_faults_t* out) {
  hl_faults_t f;
  memset(&f, 0, sizeof(f));
  f.seed = 1;
  if (spec && spec[0]) {
    HL_RETURN_IF_ERROR_PLAIN(
        hl_parse_kv_list("HIPLINE_FAULTS", spec, hl_faults_kv, &f));
  }
  *out = f;
  return NULL;
}

hl_status_t hl_faults_from_env(hl_faults_t* out) {
  return hl_faults_parse(hl_env_read_text(HL_ENV_FAULTS), out);
}

static once_flag hl_faults_once_ = ONCE_FLAG_INIT;
static mtx_t hl_faults_mutex_;
static hl_faults_t hl_faults_;
static atomic_uint_least64_t hl_alloc_counter_, hl_submission_counter_;
static atomic_uint_least64_t hl_allocs_failed_, hl_submissions_failed_,
    hl_delays_;
atomic_int hl_faults_state_;

// Publishes whether anything is injected (|hl_faults_mutex_| held, or once).
static void hl_faults_publish_any(const hl_faults_t* f) {
  bool any = f->alloc_fail_every || f->stream_delay_us || f->fail_submission ||
             f->fail_submission_every;
  atomic_store(&hl_faults_state_, any ? HL_FAULTS_ACTIVE : HL_FAULTS_NONE);
}

static bool hl_faults_active(void) {
  return atomic_load_explicit(&hl_faults_state_, memory_order_relaxed) ==
         HL_FAULTS_ACTIVE;
}

static void hl_faults_init(void) {
  mtx_init(&hl_faults_mutex_, mtx_plain);
  hl_faults_t f;
  hl_status_t st = hl_faults_from_env(&f);
  if (st) {
    // Device creation reports the error; until then nothing is injected.
    hl_status_free(st);
    memset(&f, 0, sizeof(f));
  }
  hl_faults_ = f;
  hl_faults_publish_any(&f);
}

hl_faults_t hl_faults_snapshot(void) {
  call_once(&hl_faults_once_, hl_faults_init);
  mtx_lock(&hl_faults_mutex_);
  hl_faults_t copy = hl_faults_;
  mtx_unlock(&hl_faults_mutex_);
  return copy;
}

hl_faults_t hl_faults_set(const hl_faults_t* faults) {
  call_once(&hl_faults_once_, hl_faults_init);
  mtx_lock(&hl_faults_mutex_);
  hl_faults_t previous = hl_faults_;
  if (faults) {
    hl_faults_ = *faults;
  } else {
    memset(&hl_faults_, 0, sizeof(hl_faults_));
  }
  atomic_store(&hl_alloc_counter_, 0);
  atomic_store(&hl_submission_counter_, 0);
  hl_faults_publish_any(&hl_faults_);
  mtx_unlock(&hl_faults_mutex_);
  return previous;
}

// Nesting depth of hl_faults_exempt_begin on this thread.
static _Thread_local int hl_faults_exempt_;

void hl_faults_exempt_begin(void) { ++hl_faults_exempt_; }
void hl_faults_exempt_end(void) { --hl_faults_exempt_; }

bool hl_faults_should_fail_alloc_configured(void) {
  call_once(&hl_faults_once_, hl_faults_init);
  if (HL_LIKELY(!hl_faults_active()) || hl_faults_exempt_) {
    return false;
  }
  mtx_lock(&hl_faults_mutex_);
  uint64_t every = hl_faults_.alloc_fail_every;
  mtx_unlock(&hl_faults_mutex_);
  if (!every) return false;
  uint64_t n = atomic_fetch_add(&hl_alloc_counter_, 1) + 1;
  if (n % every != 0) return false;
  atomic_fetch_add(&hl_allocs_failed_, 1);
  return true;
}

bool hl_faults_should_fail_submission_configured(void) {
  call_once(&hl_faults_once_, hl_faults_init);
  if (HL_LIKELY(!hl_faults_active())) {
    return false;
  }
  mtx_lock(&hl_faults_mutex_);
  uint64_t at = hl_faults_.fail_submission;
  uint64_t every = hl_faults_.fail_submission_every;
  mtx_unlock(&hl_faults_mutex_);
  if (!at && !every) return false;
  uint64_t n = atomic_fetch_add(&hl_submission_counter_, 1) + 1;
  bool fail = (at && n == at) || (every && n % every == 0);
  if (fail) atomic_fetch_add(&hl_submissions_failed_, 1);
  return fail;
}

void hl_faults_count_delay(void) { atomic_fetch_add(&hl_delays_, 1); }

void hl_faults_counts(hl_fault_counts_t* out) {
  out->allocs_failed = atomic_load(&hl_allocs_failed_);
  out->submissions_failed = atomic_load(&hl_submissions_failed_);
  out->delays_injected = atomic_load(&hl_delays_);
}
