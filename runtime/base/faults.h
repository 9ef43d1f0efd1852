// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Fault injection, configured by HIPLINE_FAULTS.
//
// The spec is a comma-separated key=value list, strictly parsed:
//   alloc_fail_every=N   every Nth device allocation fails (host backend)
//   stream_delay_us=MAX  random delay in [0, MAX] us before each stream item
//   fail_submission=K    the Kth queue submission (1-based, process-wide)
//                        fails with an injected INTERNAL status
//   fail_submission_every=N  every Nth queue submission fails
//   seed=S               seed for the delays (default 1)
// Unknown keys and malformed numbers are INVALID_ARGUMENT naming
// HIPLINE_FAULTS, the item and the accepted keys.
#ifndef HIPLINE_RUNTIME_BASE_FAULTS_H_
#define HIPLINE_RUNTIME_BASE_FAULTS_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hipline/status.h"

typedef struct hl_faults_t {
  uint64_t alloc_fail_every;
  uint64_t stream_delay_us;
  uint64_t fail_submission;
  uint64_t fail_submission_every;
  uint64_t seed;
} hl_faults_t;

// Parses |spec| (may be NULL: no faults) into |out|.
hl_status_t hl_faults_parse(const char* spec, hl_faults_t* out);

// Reads HIPLINE_FAULTS once per process; returns the parse error if any.
hl_status_t hl_faults_from_env(hl_faults_t* out);

// Replaces the process-wide fault configuration (tests use this); returns the
// previous one.
hl_faults_t hl_faults_set(const hl_faults_t* faults);

// A copy of the active configuration (HIPLINE_FAULTS at first use, unless
// set).
hl_faults_t hl_faults_snapshot(void);

// Decision points; each counts the faults it injects.
// alloc_fail_every counts the allocations of the pool that serves
// queue_alloca: the backend's (HIPLINE_ALLOCATOR=driver) or hipline's
// suballocator, whose own slab requests to the backend are not counted
// (they run between hl_faults_exempt_begin and _end on their thread).
// (Inline: every submission asks.)
enum { HL_FAULTS_UNREAD = 0, HL_FAULTS_NONE = 1, HL_FAULTS_ACTIVE = 2 };
extern atomic_int hl_faults_state_;
// Whether nothing is injected, known without reading HIPLINE_FAULTS again.
static inline bool hl_faults_none(void) {
  return HL_LIKELY(
      atomic_load_explicit(&hl_faults_state_, memory_order_relaxed) ==
      HL_FAULTS_NONE);
}
bool hl_faults_should_fail_alloc_configured(void);
bool hl_faults_should_fail_submission_configured(void);
static inline bool hl_faults_should_fail_alloc(void) {
  return !hl_faults_none() && hl_faults_should_fail_alloc_configured();
}
static inline bool hl_faults_should_fail_submission(void) {
  return !hl_faults_none() && hl_faults_should_fail_submission_configured();
}
void hl_faults_exempt_begin(void);
void hl_faults_exempt_end(void);

typedef struct hl_fault_counts_t {
  uint64_t allocs_failed;
  uint64_t submissions_failed;
  uint64_t delays_injected;
} hl_fault_counts_t;
void hl_faults_counts(hl_fault_counts_t* out);
void hl_faults_count_delay(void);

#endif  // HIPLINE_RUNTIME_BASE_FAULTS_H_
