// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "kernels/host/host_kernels.h"

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "hipline/time.h"
#include "kernels/pattern.h"
#include "runtime/base/time_util.h"

_Static_assert(sizeof(void*) == 8,
               "kernel parameter sizes assume 8-byte pointers, as on amdgcn");

// Reads argument |index| of type |type| from a kernelParams array.
#define HL_PARAM(type, index) (*(type const*)params[(index)])

void hl_host_kernel_fill_pattern(void** params,
                                 const hl_launch_config_t* config) {
  uint32_t* buf = HL_PARAM(uint32_t*, 0);
  const uint64_t words = HL_PARAM(uint64_t, 1);
  const uint32_t seed = HL_PARAM(uint32_t, 2);
  for (uint64_t i = 0; i < words; ++i) buf[i] = hl_pattern_word(seed, i);
}

void hl_host_kernel_verify_pattern(void** params,
                                   const hl_launch_config_t* config) {
  const uint32_t* buf = HL_PARAM(const uint32_t*, 0);
  const uint64_t words = HL_PARAM(uint64_t, 1);
  const uint32_t seed = HL_PARAM(uint32_t, 2);
  uint32_t* out_mismatches = HL_PARAM(uint32_t*, 3);
  uint32_t mismatches = 0;
  for (uint64_t i = 0; i < words; ++i) {
    mismatches += buf[i] != hl_pattern_word(seed, i) ? 1u : 0u;
  }
  // Device atomics wrap at 2^32 too; keep the same arithmetic.
  *out_mismatches += mismatches;
}

void hl_host_kernel_copy(void** params, const hl_launch_config_t* config) {
  void* dst = HL_PARAM(void*, 0);
  const void* src = HL_PARAM(const void*, 1);
  const uint64_t bytes = HL_PARAM(uint64_t, 2);
  if (bytes != 0) memcpy(dst, src, (size_t)bytes);
}

// Host clock model: one device cycle is one nanosecond (a nominal 1 GHz
// clock), so spin(cycles) keeps the stream busy for |cycles| ns of monotonic
// time. It sleeps rather than burning a core: a GPU's spin occupies the
// device, not a host CPU, and a busy wait here would make several streams on
// a small machine measure the machine's core count instead of hipline's
// overlap of queues.
//
// A sleep overshoots, though, by far more than a spin's length on a virtual
// machine (a 20 us clock_nanosleep took 74 us on the 2-core development VM,
// even with the thread's timer slack at 1 ns), and spins that follow each
// other would add up the overshoots. So the stream keeps a device clock, as
// a GPU runs kernels back to back: a spin starts when it was launched
// (config->launch_ns) or when the previous spin on this stream ended,
// whichever is later, pushed back by the real work the stream did since that
// spin returned; it ends |cycles| later, and the thread sleeps until then
// (not at all when a late wake-up already passed it). One overshoot is paid
// per idle period, not one per spin. Every stream runs its kernels on one
// thread of its own (host backend and hip test runtime), so the clock is
// per thread.
//
// "The real work the stream did" is the wall time since that spin returned
// less the time the thread spent runnable but waiting for a core
// (hl_thread_run_delay_ns; wall time alone where that is unknown). A GPU
// does not slow down because the host is oversubscribed: with four stream
// threads and a submitter on two cores, counting the waits made four
// queues' spins take 1.4-1.6x as long as one queue's, which measured the
// machine's core count rather than hipline (docs/performance-log.md,
// 2026-11-28).
// Voluntary sleeps (a host function or a cross-stream wait that blocks,
// an injected delay) still count, as they would block a HIP stream.
static _Thread_local hl_time_t hl_spin_end_;   // Model end of the last spin.
static _Thread_local hl_time_t hl_spin_woke_;  // When it returned.
static _Thread_local int64_t hl_spin_woke_delay_;  // Run delay then, or -1.

// Wall time since the last spin returned, less the waits for a core.
static hl_duration_t hl_spin_worked_since_woke(hl_time_t now) {
  hl_duration_t worked = now - hl_spin_woke_;
  if (hl_spin_woke_delay_ < 0) return worked;
  int64_t delay = hl_thread_run_delay_ns();
  if (delay < hl_spin_woke_delay_) return worked;  // Unreadable now.
  hl_duration_t waited = (hl_duration_t)(delay - hl_spin_woke_delay_);
  return waited < worked ? worked - waited : 0;
}
void hl_host_kernel_spin(void** params, const hl_launch_config_t* config) {
  uint64_t cycles = HL_PARAM(uint64_t, 0);
  uint32_t* out_blocks_done = HL_PARAM(uint32_t*, 1);
  if (cycles > HL_HOST_SPIN_MAX_NS) cycles = HL_HOST_SPIN_MAX_NS;
  hl_time_t now = hl_time_now();
  hl_time_t start = now;
  if (config && config->launch_ns && config->launch_ns <= now) {
    start = config->launch_ns;
    if (hl_spin_end_) {
      hl_time_t busy = hl_spin_end_ + hl_spin_worked_since_woke(now);
      if (busy > start) start = busy;
    }
  }
  hl_time_t end = start + (hl_time_t)cycles;
  if (end > now) hl_sleep_until(end);
  hl_spin_end_ = end;
  // The read first: its own system call is the model's cost, not work the
  // stream did after this spin.
  hl_spin_woke_delay_ = hl_thread_run_delay_ns();
  hl_spin_woke_ = hl_time_now();
  if (out_blocks_done != NULL) {
    uint32_t blocks = 1;
    if (config != NULL) {
      blocks = config->grid.x * config->grid.y * config->grid.z;
    }
    // The counter may be shared with other launches running on other host
    // streams; _Atomic uint32_t has uint32_t's size and representation here.
    atomic_fetch_add((_Atomic uint32_t*)out_blocks_done, blocks);
  }
}

// Relies on ISO C mode (-std=c11), in which GCC and Clang do not contract
// a * x + y into a fused multiply-add, matching the device kernel's
// "fp contract(off)".
void hl_host_kernel_axpy(void** params, const hl_launch_config_t* config) {
  const float a = HL_PARAM(float, 0);
  const float* x = HL_PARAM(const float*, 1);
  float* y = HL_PARAM(float*, 2);
  const uint64_t n = HL_PARAM(uint64_t, 3);
  for (uint64_t i = 0; i < n; ++i) {
    const float product = a * x[i];
    y[i] = product + y[i];
  }
}

static const hl_host_kernel_t hl_host_kernels_[HL_KERNEL_COUNT] = {
#define HL_HOST_KERNEL_ENTRY_(ID, kname, count, types) \
  [HL_KERNEL_##ID] = {.name = #kname,                  \
                      .fn = hl_host_kernel_##kname,    \
                      .param_count = (count),          \
                      .param_sizes = HL_KERNEL_PARAM_SIZES(count, types)},
    HL_KERNEL_TABLE(HL_HOST_KERNEL_ENTRY_)
#undef HL_HOST_KERNEL_ENTRY_
};

const hl_host_code_object_t hl_host_kernels_code_object = {
    .magic = HL_HOST_CODE_OBJECT_MAGIC,
    .kernel_count = HL_KERNEL_COUNT,
    .kernels = hl_host_kernels_,
};
