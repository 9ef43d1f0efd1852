// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The fast path's allocation-free steady state (issue 11): once warm, a
// serving-like loop of queue operations makes no heap allocation in
// hipline's code. malloc, calloc and realloc are wrapped at link time
// (-Wl,--wrap, tests/memory.cmake): every call from the statically linked
// runtime (and from this file) is counted, from any thread.
//
// AddressSanitizer builds keep no recycled object (runtime/base/recycler.h)
// so that a use after free is still caught; there the test skips.

#include <stdatomic.h>

#include "tests/memory_util.h"  // cmocka, through tests/test_util.h.

void* __real_malloc(size_t size);
void* __real_calloc(size_t count, size_t size);
void* __real_realloc(void* ptr, size_t size);
void* __wrap_malloc(size_t size);
void* __wrap_calloc(size_t count, size_t size);
void* __wrap_realloc(void* ptr, size_t size);

static atomic_bool counting_;
static atomic_uint_least64_t allocations_;

void* __wrap_malloc(size_t size) {
  if (atomic_load_explicit(&counting_, memory_order_relaxed)) {
    atomic_fetch_add_explicit(&allocations_, 1, memory_order_relaxed);
  }
  return __real_malloc(size);
}

void* __wrap_calloc(size_t count, size_t size) {
  if (atomic_load_explicit(&counting_, memory_order_relaxed)) {
    atomic_fetch_add_explicit(&allocations_, 1, memory_order_relaxed);
  }
  return __real_calloc(count, size);
}

void* __wrap_realloc(void* ptr, size_t size) {
  if (atomic_load_explicit(&counting_, memory_order_relaxed)) {
    atomic_fetch_add_explicit(&allocations_, 1, memory_order_relaxed);
  }
  return __real_realloc(ptr, size);
}

static void host_step_fn(void* user) {
  atomic_fetch_add((atomic_uint_least64_t*)user, 1);
}

// One serving-like step on |q|: alloca, fill after it is ready, a host
// call after the fill, dealloca after both, and a barrier that signals
// |done|@|value|. Fences are made and dropped per step, as a caller would.
static void step(hl_queue_t* q, hl_semaphore_t* done, uint64_t value,
                 atomic_uint_least64_t* calls) {
  hl_buffer_t* buffer = NULL;
  HL_ASSERT_OK(hl_queue_alloca(q, NULL, NULL, 64 * 1024, 0, &buffer));
  HL_ASSERT_OK(hl_queue_fill(q, NULL, NULL, buffer, 0, 64 * 1024, 0x3F800000u));
  HL_ASSERT_OK(hl_queue_host_call(q, NULL, NULL, host_step_fn, calls));
  HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, buffer));
  hl_buffer_release(buffer);
  hl_fence_t* signal = hl_test_fence(done, value);
  HL_ASSERT_OK(hl_queue_barrier(q, NULL, signal));
  hl_fence_release(signal);
}

static void run_steps(hl_queue_t* q, hl_semaphore_t* done, uint64_t* value,
                      int steps, atomic_uint_least64_t* calls) {
  for (int i = 0; i < steps; ++i) {
    step(q, done, ++*value, calls);
    // Keep a few steps in flight, as a serving loop waits for older work.
    if (*value > 4) mem_wait(done, *value - 4);
  }
  mem_wait(done, *value);
}

static void test_steady_state_makes_no_heap_allocation(void** state) {
  (void)state;
#if defined(__SANITIZE_ADDRESS__)
  (void)run_steps;  // Used only where recyclers keep objects.
  skip();           // Not reached: main exits 77 first.
#else
  hl_device_t* device = mem_device_create(NULL);
  hl_queue_t* q = NULL;
  HL_ASSERT_OK(hl_queue_create(device, &q));
  hl_semaphore_t* done = NULL;
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &done));
  atomic_uint_least64_t calls;
  atomic_init(&calls, 0);
  uint64_t value = 0;
  // Warm-up: the recyclers and pools grow to the loop's working set.
  run_steps(q, done, &value, 4000, &calls);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));

  // Counted in windows: a recycler grows when the objects in flight reach a
  // new peak (finished submissions wait for the work thread in batches, and
  // each thread parks up to 63 objects of a kind in its cache), which
  // depends on timing. On a loaded machine one window can see a few hundred
  // (977 in 5,000 steps was seen under two other stress tests), but a peak,
  // once reached, is kept: most windows see none. An allocation made per
  // operation shows in every window, at least one per step (the transfer
  // op did before it was recycled: 2,018 in 2,000 steps).
  enum { kWindows = 10, kWindowSteps = 500 };
  uint64_t counts[kWindows];
  for (int w = 0; w < kWindows; ++w) {
    atomic_store(&allocations_, 0);
    atomic_store(&counting_, true);
    run_steps(q, done, &value, kWindowSteps, &calls);
    HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
    atomic_store(&counting_, false);
    counts[w] = atomic_load(&allocations_);
  }
  uint64_t total = 0;
  for (int w = 0; w < kWindows; ++w) total += counts[w];
  print_message(
      "%llu heap allocations in %d steady steps (5 submissions each), per "
      "window of %d:",
      (unsigned long long)total, kWindows * kWindowSteps, kWindowSteps);
  for (int w = 0; w < kWindows; ++w) {
    print_message(" %llu", (unsigned long long)counts[w]);
  }
  print_message("\n");
  assert_int_equal(atomic_load(&calls), 4000 + kWindows * kWindowSteps);
  // The median window (insertion sort of ten numbers).
  for (int i = 1; i < kWindows; ++i) {
    for (int j = i; j > 0 && counts[j - 1] > counts[j]; --j) {
      uint64_t t = counts[j];
      counts[j] = counts[j - 1];
      counts[j - 1] = t;
    }
  }
  assert_true(counts[kWindows / 2] < kWindowSteps / 10);

  hl_semaphore_release(done);
  hl_queue_release(q);
  hl_device_release(device);
#endif
}

int main(void) {
#if defined(__SANITIZE_ADDRESS__)
  // ctest reports exit code 77 as skipped (tests/CMakeLists.txt).
  fprintf(stderr, "skipped: AddressSanitizer builds keep no recycled object\n");
  return 77;
#endif
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_steady_state_makes_no_heap_allocation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
