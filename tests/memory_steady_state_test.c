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
  skip();  // Not reached: main exits 77 first.
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

  const int kSteps = 5000;
  atomic_store(&allocations_, 0);
  atomic_store(&counting_, true);
  run_steps(q, done, &value, kSteps, &calls);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  atomic_store(&counting_, false);
  uint64_t n = atomic_load(&allocations_);
  print_message(
      "%llu heap allocations in %d steady steps (5 submissions each)\n",
      (unsigned long long)n, kSteps);
  assert_int_equal(atomic_load(&calls), 4000 + kSteps);
  // Recyclers still grow now and then: finished submissions wait for the
  // work thread in batches and each thread parks up to 63 objects of a kind
  // in its cache, so the population follows the peak, which depends on
  // timing (0 to a few hundred in 5,000 steps, not growing with the step
  // count). Any allocation made per operation would make at least one per
  // step (the transfer op did before it was recycled: 2,018 in 2,000).
  assert_true(n < (uint64_t)kSteps / 5);

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
