// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Chaining invocations across two queues: each step's result is the next
// step's argument, with no host wait inside the chain; the caller releases
// each step's input right after invoking the next (before it has run). The
// data must survive the whole chain and memory must stay flat.
#define HL_TEST_C11_THREADS_SHIM
#include "tests/invocation_util.h"

#define SIZE ((uint64_t)4096)
#define STEPS 100

// () -> (fresh buffer written from the host array |user|, SIZE bytes).
static hl_status_t fn_write(void* user, hl_queue_t* queue,
                            hl_buffer_t* const* args, size_t nargs,
                            const hl_fence_t* wait, const hl_fence_t* signal,
                            hl_buffer_t** results, size_t nresults) {
  (void)args;
  (void)nargs;
  (void)nresults;
  hl_buffer_t* b = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_queue_alloca(queue, wait, NULL, SIZE, 0, &b));
  hl_status_t st = hl_queue_write(queue, wait, signal, user, b, 0, SIZE);
  if (st) {
    hl_buffer_release(b);
    return st;
  }
  results[0] = b;
  return NULL;
}

// Runs the chain. |gated|: the first step waits on a host semaphore that is
// signalled only once every step is invoked and every intermediate result
// released, so all of it happens before any work runs. |step_waits|: the
// caller waits for each step before invoking the next (a diagnostic variant:
// issue cannot run ahead of execution). |check_flat|: assert the peak of
// bytes in use stays at a few buffers.
static void chain_case(bool gated, bool step_waits, bool check_flat) {
  hl_device_t* d = inv_device_create();
  hl_queue_t* q[2] = {hl_test_queue_create(d), hl_test_queue_create(d)};
  const uint32_t seed = gated ? 77u : 41u;
  uint32_t* data = malloc(SIZE);
  assert_non_null(data);
  for (uint64_t i = 0; i < SIZE / 4; ++i) data[i] = inv_word(seed, i);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0);
  const hl_access_t read[1] = {HL_ACCESS_READ};
  hl_function_t* init = inv_function("chain_init", 0, NULL, 1, fn_write, data);
  hl_function_t* copy = inv_function("chain_copy", 1, read, 1, inv_fn_copy, &c);

  hl_semaphore_t* gate = hl_test_semaphore_create();
  hl_invocation_t* prev_inv = NULL;
  HL_ASSERT_OK(hl_invocation_create(init, q[0], &prev_inv));
  if (gated) HL_ASSERT_OK(hl_invocation_add_wait(prev_inv, gate, 1));
  HL_ASSERT_OK(hl_invocation_invoke(prev_inv));
  hl_buffer_t* prev = inv_take(prev_inv, 0);
  for (int i = 1; i < STEPS; ++i) {
    // The flag does not matter for unique results: alternate it.
    if (step_waits) inv_wait_signal(prev_inv);
    hl_invocation_t* inv = inv_invoke(copy, q[i & 1], &prev, 1, (i & 2) != 0);
    hl_buffer_t* cur = inv_take(inv, 0);
    hl_buffer_release(prev);
    hl_invocation_release(prev_inv);
    prev = cur;
    prev_inv = inv;
  }
  assert_int_equal(atomic_load(&c.calls), STEPS - 1);
  hl_invocation_stats_t s = inv_stats(d);
  assert_int_equal(s.invocations, STEPS);
  assert_int_equal(s.async_imports, STEPS);
  assert_int_equal(s.sync_imports, 0);
  assert_int_equal(s.alias_detected, 0);
  // The last invocation still holds its argument (the second-to-last
  // result); every earlier result is scheduled for its free.
  assert_int_equal(s.async_deallocs, STEPS - 2);
  if (gated) {
    // Nothing has run yet: no memory exists.
    assert_int_equal(hl_test_memory_stats(d).allocas, 0);
    HL_ASSERT_OK(hl_semaphore_signal(gate, 1));
  }

  // The only host wait.
  inv_wait_signal(prev_inv);
  inv_expect_words(q[(STEPS - 1) & 1], hl_invocation_signal_fence(prev_inv),
                   prev, seed);
  hl_buffer_release(prev);
  hl_invocation_release(prev_inv);
  inv_wait_idle(d);

  s = inv_stats(d);
  assert_int_equal(s.async_deallocs, STEPS);
  assert_int_equal(s.fallback_releases_frontier, 0);
  assert_int_equal(s.fallback_releases_device_sync, 0);
  hl_memory_stats_t m = hl_test_memory_stats(d);
  print_message(
      "chain (%s): in use peak %llu, reserved peak %llu (%llu-byte "
      "steps)\n",
      step_waits ? "host wait per step" : (gated ? "gated" : "free-running"),
      (unsigned long long)m.bytes_in_use_peak,
      (unsigned long long)m.bytes_reserved_peak, (unsigned long long)SIZE);
  assert_int_equal(m.allocas, STEPS);
  assert_int_equal(m.bytes_in_use, 0);
  assert_int_equal(m.use_after_free, 0);
  // Each step's input is freed on its queue right after the next step read
  // it, ahead of that queue's next alloca: a few buffers at most, not one
  // per step.
  HL_ASSERT_OK(hl_queue_status(q[0]));
  HL_ASSERT_OK(hl_queue_status(q[1]));

  hl_semaphore_release(gate);
  hl_function_release(copy);
  hl_function_release(init);
  free(data);
  hl_queue_release(q[1]);
  hl_queue_release(q[0]);
  hl_device_release(d);
  if (check_flat) assert_true(m.bytes_in_use_peak <= 4 * SIZE);
}

static void test_chain_free_running(void** state) {
  (void)state;
  chain_case(false, false, false);
}

static void test_chain_gated(void** state) {
  (void)state;
  chain_case(true, false, false);
}

static void test_chain_memory_flat_with_step_waits(void** state) {
  (void)state;
  chain_case(false, true, true);
}

// Each step's input is deallocated on its queue ahead of that queue's next
// alloca, so stream-ordered reuse (as HIP's pool does it) keeps the chain at a
// few buffers however far issue runs ahead of execution.
static void test_chain_memory_flat_free_running(void** state) {
  (void)state;
  chain_case(false, false, true);
}

static void test_chain_memory_flat_gated(void** state) {
  (void)state;
  chain_case(true, false, true);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain_free_running),
      cmocka_unit_test(test_chain_gated),
      cmocka_unit_test(test_chain_memory_flat_with_step_waits),
      cmocka_unit_test(test_chain_memory_flat_free_running),
      cmocka_unit_test(test_chain_memory_flat_gated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
