// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Import of invocation results on the host backend in checked mode: which
// roots are imported async (queue-ordered free) or sync (refcount fallback),
// the safety net for arguments and registered globals, and the hazard that
// assume_no_alias exists for (a reference the runtime cannot see).
#define HL_TEST_C11_THREADS_SHIM
#include "tests/invocation_util.h"

#define SIZE ((uint64_t)4096)

// Asserts the counters moved by exactly the given deltas since |before|.
static void expect_delta(const hl_invocation_stats_t* before,
                         const hl_invocation_stats_t* after,
                         uint64_t invocations, uint64_t async_imports,
                         uint64_t sync_imports, uint64_t alias_detected,
                         uint64_t async_deallocs) {
  assert_int_equal(after->invocations - before->invocations, invocations);
  assert_int_equal(after->async_imports - before->async_imports, async_imports);
  assert_int_equal(after->sync_imports - before->sync_imports, sync_imports);
  assert_int_equal(after->alias_detected - before->alias_detected,
                   alias_detected);
  assert_int_equal(after->async_deallocs - before->async_deallocs,
                   async_deallocs);
}

static void expect_no_fallback(hl_device_t* d) {
  hl_invocation_stats_t s = inv_stats(d);
  assert_int_equal(s.fallback_releases_frontier, 0);
  assert_int_equal(s.fallback_releases_device_sync, 0);
  hl_memory_stats_t m = hl_test_memory_stats(d);
  assert_int_equal(m.fallback_releases_frontier, 0);
  assert_int_equal(m.fallback_releases_device_sync, 0);
  assert_int_equal(m.fallback_releases_ordered, 0);
}

//===----------------------------------------------------------------------===//
// Unique result
//===----------------------------------------------------------------------===//

static void unique_result_case(bool no_alias) {
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0xA5A5F00Du);
  hl_function_t* f = inv_function("unique", 0, NULL, 1, inv_fn_fresh, &c);

  hl_invocation_stats_t s0 = inv_stats(d);
  hl_invocation_t* inv = inv_invoke(f, q, NULL, 0, no_alias);
  hl_invocation_stats_t s1 = inv_stats(d);
  expect_delta(&s0, &s1, 1, 1, 0, 0, 0);
  assert_int_equal(atomic_load(&c.calls), 1);
  assert_int_equal(hl_invocation_result_count(inv), 1);

  bool effective = !no_alias;
  hl_setting_source_t source = HL_SETTING_SOURCE_API;
  HL_ASSERT_OK(
      hl_invocation_effective_assume_no_alias(inv, &effective, &source));
  assert_int_equal(effective, no_alias);
  assert_int_equal(source, HL_SETTING_SOURCE_INVOCATION);

  hl_buffer_t* r = inv_take(inv, 0);
  assert_int_equal(hl_buffer_origin(r), HL_BUFFER_ORIGIN_ASYNC);
  assert_int_equal(hl_buffer_length(r), SIZE);
  inv_wait_signal(inv);
  inv_expect_fill(q, hl_invocation_signal_fence(inv), r, c.pattern);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, SIZE);

  // The invocation going first changes nothing: the caller holds the result.
  hl_invocation_release(inv);
  inv_wait_idle(d);
  assert_int_equal(inv_stats(d).async_deallocs, s0.async_deallocs);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, SIZE);
  assert_false(hl_buffer_is_freed(r));

  uint64_t deallocas = hl_test_memory_stats(d).deallocas;
  hl_buffer_release(r);
  hl_invocation_stats_t s2 = inv_stats(d);
  expect_delta(&s0, &s2, 1, 1, 0, 0, 1);
  inv_wait_idle(d);
  hl_memory_stats_t m = hl_test_memory_stats(d);
  assert_int_equal(m.bytes_in_use, 0);
  assert_int_equal(m.deallocas, deallocas + 1);
  assert_int_equal(m.use_after_free, 0);
  expect_no_fallback(d);

  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

static void test_unique_result_flag_on(void** state) {
  (void)state;
  unique_result_case(true);
}

static void test_unique_result_flag_off(void** state) {
  (void)state;
  unique_result_case(false);
}

// Results never taken are the invocation's; its release frees them in queue
// order all the same.
static void test_untaken_result_freed_with_invocation(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0x01020304u);
  hl_function_t* f = inv_function("untaken", 0, NULL, 1, inv_fn_fresh, &c);
  for (int flag = 0; flag < 2; ++flag) {
    hl_invocation_stats_t s0 = inv_stats(d);
    hl_invocation_t* inv = inv_invoke(f, q, NULL, 0, flag != 0);
    // Released before its work has necessarily run.
    hl_invocation_release(inv);
    hl_invocation_stats_t s1 = inv_stats(d);
    expect_delta(&s0, &s1, 1, 1, 0, 0, 1);
  }
  inv_wait_idle(d);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  assert_int_equal(hl_test_memory_stats(d).use_after_free, 0);
  expect_no_fallback(d);
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

// Releasing the result before the function's work completes is safe: the
// free waits for every recorded use, and a read queued before the release
// still sees the data.
static void test_result_released_before_completion(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  hl_queue_t* q2 = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0xCAFEF00Du);
  hl_function_t* f = inv_function("early", 0, NULL, 1, inv_fn_fresh, &c);

  // Hold the invocation's queue until the release has happened.
  hl_semaphore_t* gate = hl_test_semaphore_create();
  hl_fence_t* gate_fence = hl_test_fence(gate, 1);
  hl_invocation_t* inv = NULL;
  HL_ASSERT_OK(hl_invocation_create(f, q, &inv));
  HL_ASSERT_OK(hl_invocation_add_wait(inv, gate, 1));
  HL_ASSERT_OK(hl_invocation_invoke(inv));
  hl_buffer_t* r = inv_take(inv, 0);

  // A read on another queue, ordered after the function by its signal.
  uint32_t* words = calloc(SIZE / 4, 4);
  assert_non_null(words);
  hl_semaphore_t* read_done = hl_test_semaphore_create();
  hl_fence_t* read_fence = hl_test_fence(read_done, 1);
  HL_ASSERT_OK(hl_queue_read(q2, hl_invocation_signal_fence(inv), read_fence, r,
                             0, words, SIZE));
  hl_buffer_release(r);
  hl_invocation_release(inv);
  assert_int_equal(inv_stats(d).async_deallocs, 1);

  HL_ASSERT_OK(hl_semaphore_signal(gate, 1));
  HL_ASSERT_OK(hl_semaphore_wait(read_done, 1, INV_DEADLINE()));
  for (uint64_t i = 0; i < SIZE / 4; ++i) {
    assert_int_equal(words[i], c.pattern);
  }
  inv_wait_idle(d);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  assert_int_equal(hl_test_memory_stats(d).use_after_free, 0);
  HL_ASSERT_OK(hl_queue_status(q));
  HL_ASSERT_OK(hl_queue_status(q2));
  expect_no_fallback(d);

  free(words);
  hl_fence_release(read_fence);
  hl_semaphore_release(read_done);
  hl_fence_release(gate_fence);
  hl_semaphore_release(gate);
  hl_function_release(f);
  hl_queue_release(q2);
  hl_queue_release(q);
  hl_device_release(d);
}

//===----------------------------------------------------------------------===//
// Sharing results
//===----------------------------------------------------------------------===//

static void two_views_case(bool no_alias) {
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0x5A5A0F0Fu);
  hl_function_t* f =
      inv_function("two_views", 0, NULL, 2, inv_fn_two_views, &c);
  hl_invocation_stats_t s0 = inv_stats(d);
  hl_invocation_t* inv = inv_invoke(f, q, NULL, 0, no_alias);
  hl_invocation_stats_t s1 = inv_stats(d);
  // One root, imported once.
  expect_delta(&s0, &s1, 1, 1, 0, 0, 0);
  assert_int_equal(hl_invocation_result_count(inv), 2);
  hl_buffer_t* a = inv_take(inv, 0);
  hl_buffer_t* b = inv_take(inv, 1);
  assert_int_equal(hl_buffer_root_id(a), hl_buffer_root_id(b));
  assert_int_equal(hl_buffer_offset(a), 0);
  assert_int_equal(hl_buffer_offset(b), SIZE);
  inv_wait_signal(inv);
  hl_invocation_release(inv);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 2 * SIZE);

  hl_buffer_release(a);
  inv_wait_idle(d);
  assert_int_equal(inv_stats(d).async_deallocs, 0);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 2 * SIZE);
  assert_false(hl_buffer_is_freed(b));
  inv_expect_fill(q, NULL, b, ~c.pattern);

  hl_buffer_release(b);
  assert_int_equal(inv_stats(d).async_deallocs, 1);
  inv_wait_idle(d);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  assert_int_equal(hl_test_memory_stats(d).use_after_free, 0);
  expect_no_fallback(d);
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

static void test_two_views_one_root_flag_on(void** state) {
  (void)state;
  two_views_case(true);
}

static void test_two_views_one_root_flag_off(void** state) {
  (void)state;
  two_views_case(false);
}

// () -> (b, b): one buffer object returned twice (two references) is still
// unique.
static hl_status_t fn_same_twice(void* user, hl_queue_t* queue,
                                 hl_buffer_t* const* args, size_t nargs,
                                 const hl_fence_t* wait,
                                 const hl_fence_t* signal,
                                 hl_buffer_t** results, size_t nresults) {
  (void)args;
  (void)nargs;
  (void)nresults;
  inv_fn_config_t* c = (inv_fn_config_t*)user;
  hl_buffer_t* b = NULL;
  HL_RETURN_IF_ERROR_PLAIN(
      inv_fresh_filled(queue, wait, signal, c->size, c->pattern, &b));
  hl_buffer_retain(b);
  results[0] = b;
  results[1] = b;
  return NULL;
}

static void test_same_buffer_twice(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0x77665544u);
  hl_function_t* f = inv_function("same_twice", 0, NULL, 2, fn_same_twice, &c);
  hl_invocation_stats_t s0 = inv_stats(d);
  hl_invocation_t* inv = inv_invoke(f, q, NULL, 0, false);
  hl_invocation_stats_t s1 = inv_stats(d);
  expect_delta(&s0, &s1, 1, 1, 0, 0, 0);
  hl_buffer_t* a = inv_take(inv, 0);
  hl_buffer_t* b = inv_take(inv, 1);
  assert_int_equal(hl_buffer_root_id(a), hl_buffer_root_id(b));
  inv_wait_signal(inv);
  hl_invocation_release(inv);
  hl_buffer_release(a);
  inv_wait_idle(d);
  assert_int_equal(inv_stats(d).async_deallocs, 0);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, SIZE);
  inv_expect_fill(q, NULL, b, c.pattern);
  hl_buffer_release(b);
  assert_int_equal(inv_stats(d).async_deallocs, 1);
  inv_wait_idle(d);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  assert_int_equal(hl_test_memory_stats(d).use_after_free, 0);
  expect_no_fallback(d);
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

// A result the function also registered as a global is imported sync and
// counted as alias_detected whatever the flag says; the global survives the
// caller's release.
static void global_case(bool no_alias) {
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0x13579BDFu);
  hl_function_t* f = inv_function("global", 0, NULL, 1, inv_fn_global, &c);
  hl_invocation_stats_t s0 = inv_stats(d);
  hl_invocation_t* inv = inv_invoke(f, q, NULL, 0, no_alias);
  hl_invocation_stats_t s1 = inv_stats(d);
  expect_delta(&s0, &s1, 1, 0, 1, 1, 0);
  hl_buffer_t* r = inv_take(inv, 0);
  assert_non_null(c.kept);
  assert_int_equal(hl_buffer_origin(r), HL_BUFFER_ORIGIN_PERSISTENT);
  assert_int_equal(hl_buffer_root_id(r), hl_buffer_root_id(c.kept));
  inv_wait_signal(inv);
  hl_buffer_release(r);
  hl_invocation_release(inv);
  inv_wait_idle(d);

  hl_invocation_stats_t s2 = inv_stats(d);
  expect_delta(&s0, &s2, 1, 0, 1, 1, 0);
  assert_false(hl_buffer_is_freed(c.kept));
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, SIZE);
  inv_expect_fill(q, NULL, c.kept, c.pattern);
  assert_int_equal(hl_test_memory_stats(d).use_after_free, 0);
  HL_ASSERT_OK(hl_queue_status(q));
  expect_no_fallback(d);

  // Unregistered and released, the root goes through the fallback.
  HL_ASSERT_OK(hl_buffer_unregister_global(c.kept));
  hl_buffer_release(c.kept);
  c.kept = NULL;
  assert_true(hl_test_poll_bytes_in_use(d, 0, 10000));
  assert_int_equal(inv_stats(d).fallback_releases_frontier, 1);
  assert_int_equal(inv_stats(d).async_deallocs, 0);
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

static void test_global_result_flag_off(void** state) {
  (void)state;
  global_case(false);
}

static void test_global_result_flag_on(void** state) {
  (void)state;
  global_case(true);
}

//===----------------------------------------------------------------------===//
// Arguments
//===----------------------------------------------------------------------===//

static void argument_case(hl_function_fn_t fn, bool no_alias, bool view) {
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0x2468ACE0u);
  const hl_access_t access[1] = {HL_ACCESS_READ_WRITE};
  hl_function_t* f = inv_function("ret_arg", 1, access, 1, fn, &c);

  hl_buffer_t* arg = NULL;
  HL_ASSERT_OK(inv_fresh_filled(q, NULL, NULL, 2 * SIZE, 0x11111111u, &arg));
  hl_invocation_stats_t s0 = inv_stats(d);
  hl_invocation_t* inv = inv_invoke(f, q, &arg, 1, no_alias);
  hl_invocation_stats_t s1 = inv_stats(d);
  expect_delta(&s0, &s1, 1, 0, 1, 1, 0);
  hl_buffer_t* r = inv_take(inv, 0);
  assert_int_equal(hl_buffer_root_id(r), hl_buffer_root_id(arg));
  assert_int_equal(hl_buffer_length(r), view ? SIZE : 2 * SIZE);
  inv_wait_signal(inv);
  inv_expect_fill(q, NULL, r, c.pattern);
  hl_buffer_release(r);
  hl_invocation_release(inv);
  inv_wait_idle(d);

  // The argument is untouched by the result's release.
  hl_invocation_stats_t s2 = inv_stats(d);
  expect_delta(&s0, &s2, 1, 0, 1, 1, 0);
  assert_false(hl_buffer_is_freed(arg));
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 2 * SIZE);
  uint32_t* words = calloc(2 * SIZE / 4, 4);
  assert_non_null(words);
  HL_ASSERT_OK(inv_read_status(q, NULL, arg, words, 2 * SIZE));
  for (uint64_t i = 0; i < 2 * SIZE / 4; ++i) {
    uint32_t expected = (view && i < SIZE / 4) ? 0x11111111u : c.pattern;
    assert_int_equal(words[i], expected);
  }
  free(words);
  assert_int_equal(hl_test_memory_stats(d).use_after_free, 0);
  expect_no_fallback(d);
  hl_buffer_release(arg);
  assert_true(hl_test_poll_bytes_in_use(d, 0, 10000));
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

static void test_argument_returned_flag_on(void** state) {
  (void)state;
  argument_case(inv_fn_return_arg, true, false);
}

static void test_argument_returned_flag_off(void** state) {
  (void)state;
  argument_case(inv_fn_return_arg, false, false);
}

static void test_argument_subview_returned_flag_on(void** state) {
  (void)state;
  argument_case(inv_fn_return_arg_view, true, true);
}

static void test_argument_subview_returned_flag_off(void** state) {
  (void)state;
  argument_case(inv_fn_return_arg_view, false, true);
}

//===----------------------------------------------------------------------===//
// The hazard: a reference the runtime cannot see
//===----------------------------------------------------------------------===//

// Flag off: the extra reference makes the result provably non-unique, so it
// is imported sync and nothing is freed early.
static void hidden_flag_off_case(hl_fallback_mode_t mode) {
  hl_device_t* d = inv_device_create_mode(mode);
  hl_queue_t* q = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0xDEADBEEFu);
  hl_function_t* f = inv_function("hidden", 0, NULL, 1, inv_fn_hidden, &c);
  hl_invocation_stats_t s0 = inv_stats(d);
  hl_invocation_t* inv = inv_invoke(f, q, NULL, 0, false);
  hl_invocation_stats_t s1 = inv_stats(d);
  expect_delta(&s0, &s1, 1, 0, 1, 0, 0);
  hl_buffer_t* r = inv_take(inv, 0);
  hl_buffer_release(r);
  hl_invocation_release(inv);
  inv_wait_idle(d);

  assert_false(hl_buffer_is_freed(c.kept));
  inv_expect_fill(q, NULL, c.kept, c.pattern);
  assert_int_equal(hl_test_memory_stats(d).use_after_free, 0);
  HL_ASSERT_OK(hl_queue_status(q));
  assert_int_equal(inv_stats(d).async_deallocs, 0);
  expect_no_fallback(d);

  hl_buffer_release(c.kept);
  c.kept = NULL;
  assert_true(hl_test_poll_bytes_in_use(d, 0, 10000));
  hl_invocation_stats_t s2 = inv_stats(d);
  if (mode == HL_FALLBACK_DEVICE_SYNC) {
    assert_int_equal(s2.fallback_releases_device_sync, 1);
    assert_int_equal(s2.fallback_releases_frontier, 0);
  } else if (mode == HL_FALLBACK_ORDERED) {
    // The kept root never escaped: a queue-ordered free.
    assert_int_equal(s2.fallback_releases_ordered, 1);
    assert_int_equal(s2.fallback_releases_frontier, 0);
    assert_int_equal(s2.fallback_releases_device_sync, 0);
  } else {
    assert_int_equal(s2.fallback_releases_frontier, 1);
    assert_int_equal(s2.fallback_releases_device_sync, 0);
  }
  assert_int_equal(hl_test_memory_stats(d).use_after_free, 0);
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

static void test_hidden_reference_flag_off_frontier(void** state) {
  (void)state;
  hidden_flag_off_case(HL_FALLBACK_FRONTIER);
}

static void test_hidden_reference_flag_off_device_sync(void** state) {
  (void)state;
  hidden_flag_off_case(HL_FALLBACK_DEVICE_SYNC);
}

static void test_hidden_reference_flag_off_ordered(void** state) {
  (void)state;
  hidden_flag_off_case(HL_FALLBACK_ORDERED);
}

// Flag on: the caller's release frees the memory in queue order although the
// function still holds it; checked mode catches the next access.
static void hidden_flag_on_case(hl_fallback_mode_t mode) {
  hl_device_t* d = inv_device_create_mode(mode);
  hl_test_require_checked(d);
  hl_queue_t* q = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0xFEEDFACEu);
  hl_function_t* f = inv_function("hidden", 0, NULL, 1, inv_fn_hidden, &c);
  hl_invocation_stats_t s0 = inv_stats(d);
  hl_invocation_t* inv = inv_invoke(f, q, NULL, 0, true);
  hl_invocation_stats_t s1 = inv_stats(d);
  expect_delta(&s0, &s1, 1, 1, 0, 0, 0);
  hl_buffer_t* r = inv_take(inv, 0);
  inv_wait_signal(inv);
  inv_expect_fill(q, NULL, r, c.pattern);
  hl_buffer_release(r);
  hl_invocation_release(inv);
  assert_int_equal(inv_stats(d).async_deallocs, 1);
  assert_int_equal(hl_test_memory_stats(d).use_after_free, 0);

  uint32_t word = 0;
  hl_test_assert_status_has(inv_read_status(q, NULL, c.kept, &word, 4),
                            HL_STATUS_FAILED_PRECONDITION, "use after free",
                            NULL);
  assert_true(hl_buffer_is_freed(c.kept));
  assert_true(hl_test_memory_stats(d).use_after_free >= 1);
  hl_test_assert_status_has(hl_queue_status(q), HL_STATUS_FAILED_PRECONDITION,
                            "use after free", NULL);
  expect_no_fallback(d);

  hl_buffer_release(c.kept);
  c.kept = NULL;
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

static void test_hidden_reference_flag_on_use_after_free(void** state) {
  (void)state;
  hidden_flag_on_case(HL_FALLBACK_FRONTIER);
}

// The ordered fallback changes nothing for assume_no_alias=1: the hazard of
// an unregistered alias is still caught.
static void test_hidden_reference_flag_on_use_after_free_ordered(void** state) {
  (void)state;
  hidden_flag_on_case(HL_FALLBACK_ORDERED);
}

//===----------------------------------------------------------------------===//
// Ineligible roots, explicit deallocas, export ordering
//===----------------------------------------------------------------------===//

// () -> (fresh filled buffer allocated on the queue in |user|, not the
// invocation's): its affinity does not cover the invocation's queue.
static hl_status_t fn_other_queue(void* user, hl_queue_t* queue,
                                  hl_buffer_t* const* args, size_t nargs,
                                  const hl_fence_t* wait,
                                  const hl_fence_t* signal,
                                  hl_buffer_t** results, size_t nresults) {
  (void)args;
  (void)nargs;
  (void)nresults;
  hl_queue_t* other = (hl_queue_t*)user;
  hl_buffer_t* b = NULL;
  HL_RETURN_IF_ERROR_PLAIN(
      inv_fresh_filled(other, wait, signal, SIZE, 0x0DDBA11u, &b));
  results[0] = b;
  (void)queue;
  return NULL;
}

static void external_release(void* user, void* ptr) {
  (void)ptr;
  atomic_fetch_add((atomic_int*)user, 1);
}

typedef struct external_config_t {
  hl_device_t* device;
  void* memory;
  atomic_int released;
} external_config_t;

// () -> (a wrapped EXTERNAL buffer).
static hl_status_t fn_external(void* user, hl_queue_t* queue,
                               hl_buffer_t* const* args, size_t nargs,
                               const hl_fence_t* wait, const hl_fence_t* signal,
                               hl_buffer_t** results, size_t nresults) {
  (void)args;
  (void)nargs;
  (void)nresults;
  external_config_t* c = (external_config_t*)user;
  HL_RETURN_IF_ERROR_PLAIN(hl_buffer_wrap(
      c->device, c->memory, SIZE, external_release, &c->released, &results[0]));
  return hl_queue_fill(queue, wait, signal, results[0], 0, SIZE, 0xE7E7E7E7u);
}

// Unique but ineligible roots (another queue's affinity, external memory) are
// imported sync without alias_detected, with either flag.
static void test_ineligible_roots_imported_sync(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create();
  // The external result is host memory from aligned_alloc.
  hl_test_require_host_visible(d);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_queue_t* q2 = hl_test_queue_create(d);
  hl_function_t* f =
      inv_function("other_queue", 0, NULL, 1, fn_other_queue, q2);
  external_config_t ext;
  ext.device = d;
  ext.memory = aligned_alloc(64, SIZE);
  assert_non_null(ext.memory);
  atomic_init(&ext.released, 0);
  hl_function_t* fe = inv_function("external", 0, NULL, 1, fn_external, &ext);
  for (int flag = 0; flag < 2; ++flag) {
    hl_invocation_stats_t s0 = inv_stats(d);
    hl_invocation_t* inv = inv_invoke(f, q, NULL, 0, flag != 0);
    hl_invocation_stats_t s1 = inv_stats(d);
    expect_delta(&s0, &s1, 1, 0, 1, 0, 0);
    hl_buffer_t* r = inv_take(inv, 0);
    inv_expect_fill(q, hl_invocation_signal_fence(inv), r, 0x0DDBA11u);
    hl_buffer_release(r);
    hl_invocation_release(inv);

    inv = inv_invoke(fe, q, NULL, 0, flag != 0);
    hl_invocation_stats_t s2 = inv_stats(d);
    expect_delta(&s1, &s2, 1, 0, 1, 0, 0);
    r = inv_take(inv, 0);
    assert_int_equal(hl_buffer_origin(r), HL_BUFFER_ORIGIN_EXTERNAL);
    inv_expect_fill(q, hl_invocation_signal_fence(inv), r, 0xE7E7E7E7u);
    hl_buffer_release(r);
    hl_invocation_release(inv);
  }
  assert_true(hl_test_poll_bytes_in_use(d, 0, 10000));
  inv_wait_idle(d);
  hl_time_t deadline = hl_deadline_after(10000 * INV_MS);
  while (atomic_load(&ext.released) < 2 && hl_time_now() < deadline) {
    hl_test_sleep_ms(2);
  }
  assert_int_equal(atomic_load(&ext.released), 2);
  assert_int_equal(inv_stats(d).async_deallocs, 0);
  assert_int_equal(hl_test_memory_stats(d).use_after_free, 0);
  free(ext.memory);
  hl_function_release(fe);
  hl_function_release(f);
  hl_queue_release(q2);
  hl_queue_release(q);
  hl_device_release(d);
}

// A caller that deallocates an async-imported result itself gets exactly one
// free: the import's own dealloca stands down.
static void test_explicit_dealloca_of_async_result(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0x31415926u);
  hl_function_t* f = inv_function("fresh", 0, NULL, 1, inv_fn_fresh, &c);
  hl_invocation_t* inv = inv_invoke(f, q, NULL, 0, true);
  hl_buffer_t* r = inv_take(inv, 0);
  hl_semaphore_t* s = hl_test_semaphore_create();
  hl_fence_t* done = hl_test_fence(s, 1);
  HL_ASSERT_OK(hl_queue_dealloca(q, hl_invocation_signal_fence(inv), done, r));
  HL_ASSERT_OK(hl_semaphore_wait(s, 1, INV_DEADLINE()));
  inv_wait_idle(d);
  assert_true(hl_buffer_is_freed(r));
  hl_buffer_release(r);
  hl_invocation_release(inv);
  inv_wait_idle(d);
  hl_memory_stats_t m = hl_test_memory_stats(d);
  assert_int_equal(m.deallocas, 1);
  assert_int_equal(m.bytes_in_use, 0);
  assert_int_equal(m.use_after_free, 0);
  assert_int_equal(inv_stats(d).async_deallocs, 0);
  HL_ASSERT_OK(hl_queue_status(q));
  expect_no_fallback(d);
  hl_fence_release(done);
  hl_semaphore_release(s);
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

// (arg: write) -> (): fills the argument with pattern.
static hl_status_t fn_write_arg(void* user, hl_queue_t* queue,
                                hl_buffer_t* const* args, size_t nargs,
                                const hl_fence_t* wait,
                                const hl_fence_t* signal, hl_buffer_t** results,
                                size_t nresults) {
  (void)nargs;
  (void)results;
  (void)nresults;
  inv_fn_config_t* c = (inv_fn_config_t*)user;
  return hl_queue_fill(queue, wait, signal, args[0], 0,
                       hl_buffer_length(args[0]), c->pattern);
}

// Export: a read argument waits for the last write, a write argument for
// every use; afterwards the argument's fences name the invocation.
static void test_export_orders_arguments(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  hl_queue_t* q2 = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0x99999999u);
  const hl_access_t read[1] = {HL_ACCESS_READ};
  const hl_access_t write[1] = {HL_ACCESS_WRITE};
  hl_function_t* copy = inv_function("copy", 1, read, 1, inv_fn_copy, &c);
  hl_function_t* writer = inv_function("writer", 1, write, 0, fn_write_arg, &c);
  hl_buffer_t* arg = NULL;
  HL_ASSERT_OK(inv_fresh_filled(q2, NULL, NULL, SIZE, 0x11111111u, &arg));
  inv_wait_idle(d);

  // A write on q2 held back by a gate: the reader must see it.
  hl_semaphore_t* gate = hl_test_semaphore_create();
  hl_fence_t* gate_fence = hl_test_fence(gate, 1);
  HL_ASSERT_OK(hl_queue_fill(q2, gate_fence, NULL, arg, 0, SIZE, 0x22222222u));
  hl_invocation_t* inv = inv_invoke(copy, q, &arg, 1, true);
  hl_buffer_t* r = inv_take(inv, 0);
  HL_ASSERT_OK(hl_semaphore_signal(gate, 1));
  inv_expect_fill(q, hl_invocation_signal_fence(inv), r, 0x22222222u);
  hl_buffer_release(r);
  hl_invocation_release(inv);

  // A read on q2 held back by a gate: the writer must not overtake it.
  hl_semaphore_t* gate2 = hl_test_semaphore_create();
  hl_fence_t* gate2_fence = hl_test_fence(gate2, 1);
  uint32_t* words = calloc(SIZE / 4, 4);
  assert_non_null(words);
  hl_semaphore_t* read_done = hl_test_semaphore_create();
  hl_fence_t* read_fence = hl_test_fence(read_done, 1);
  HL_ASSERT_OK(hl_queue_read(q2, gate2_fence, read_fence, arg, 0, words, SIZE));
  inv = inv_invoke(writer, q, &arg, 1, true);
  assert_int_equal(hl_invocation_result_count(inv), 0);
  // Afterwards the argument's use fence and mutation barrier include the
  // invocation's signal.
  hl_semaphore_t* signal_sem = NULL;
  uint64_t signal_value = 0;
  hl_fence_entry(hl_invocation_signal_fence(inv), 0, &signal_sem,
                 &signal_value);
  hl_fence_t* use = hl_test_fence(NULL, 0);
  hl_fence_t* barrier = hl_test_fence(NULL, 0);
  HL_ASSERT_OK(hl_buffer_use_fence(arg, use));
  HL_ASSERT_OK(hl_buffer_mutation_barrier(arg, barrier));
  bool in_use = false, in_barrier = false;
  for (size_t i = 0; i < hl_fence_count(use); ++i) {
    hl_semaphore_t* sem = NULL;
    uint64_t v = 0;
    hl_fence_entry(use, i, &sem, &v);
    in_use |= sem == signal_sem && v >= signal_value;
  }
  for (size_t i = 0; i < hl_fence_count(barrier); ++i) {
    hl_semaphore_t* sem = NULL;
    uint64_t v = 0;
    hl_fence_entry(barrier, i, &sem, &v);
    in_barrier |= sem == signal_sem && v >= signal_value;
  }
  assert_true(in_use);
  assert_true(in_barrier);
  // Give the writer every chance to run early before the gate opens.
  hl_test_sleep_ms(20);
  bool reached = true;
  HL_ASSERT_OK(hl_fence_is_reached(hl_invocation_signal_fence(inv), &reached));
  assert_false(reached);
  HL_ASSERT_OK(hl_semaphore_signal(gate2, 1));
  HL_ASSERT_OK(hl_semaphore_wait(read_done, 1, INV_DEADLINE()));
  for (uint64_t i = 0; i < SIZE / 4; ++i) {
    assert_int_equal(words[i], 0x22222222u);
  }
  inv_expect_fill(q2, hl_invocation_signal_fence(inv), arg, c.pattern);
  hl_invocation_release(inv);

  inv_wait_idle(d);
  assert_int_equal(hl_test_memory_stats(d).use_after_free, 0);
  HL_ASSERT_OK(hl_queue_status(q));
  HL_ASSERT_OK(hl_queue_status(q2));
  free(words);
  hl_fence_release(use);
  hl_fence_release(barrier);
  hl_fence_release(read_fence);
  hl_semaphore_release(read_done);
  hl_fence_release(gate2_fence);
  hl_semaphore_release(gate2);
  hl_fence_release(gate_fence);
  hl_semaphore_release(gate);
  hl_buffer_release(arg);
  hl_function_release(writer);
  hl_function_release(copy);
  hl_queue_release(q2);
  hl_queue_release(q);
  hl_device_release(d);
}

// (arg: read) -> (): an empty submission that only orders the invocation.
static hl_status_t fn_read_barrier(void* user, hl_queue_t* queue,
                                   hl_buffer_t* const* args, size_t nargs,
                                   const hl_fence_t* wait,
                                   const hl_fence_t* signal,
                                   hl_buffer_t** results, size_t nresults) {
  (void)user;
  (void)args;
  (void)nargs;
  (void)results;
  (void)nresults;
  return hl_queue_barrier(queue, wait, signal);
}

// A long-lived argument (weights) read by many completed invocations: its use
// fence must not keep one entry (and one retained semaphore) per invocation
// forever, or memory grows without bound and every export and dealloca that
// joins the fence gets slower with the argument's age.
static void test_argument_use_fence_stays_bounded(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  const hl_access_t read[1] = {HL_ACCESS_READ};
  hl_function_t* f = inv_function("reader", 1, read, 0, fn_read_barrier, NULL);
  hl_buffer_t* weights = NULL;
  HL_ASSERT_OK(inv_fresh_filled(q, NULL, NULL, SIZE, 7, &weights));
  const int n = 1000;
  for (int i = 0; i < n; ++i) {
    hl_invocation_t* inv = inv_invoke(f, q, &weights, 1, true);
    inv_wait_signal(inv);
    hl_invocation_release(inv);
  }
  inv_wait_idle(d);
  hl_fence_t* use = hl_test_fence(NULL, 0);
  HL_ASSERT_OK(hl_buffer_use_fence(weights, use));
  size_t entries = hl_fence_count(use);
  print_message(
      "use fence of an argument read by %d completed invocations: "
      "%zu entries\n",
      n, entries);
  hl_fence_release(use);
  hl_buffer_release(weights);
  assert_true(hl_test_poll_bytes_in_use(d, 0, 10000));
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
  // Every one of those invocations is complete: a handful of entries (one
  // per queue) is all the fence needs.
  assert_true(entries <= 8);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unique_result_flag_on),
      cmocka_unit_test(test_unique_result_flag_off),
      cmocka_unit_test(test_untaken_result_freed_with_invocation),
      cmocka_unit_test(test_result_released_before_completion),
      cmocka_unit_test(test_two_views_one_root_flag_on),
      cmocka_unit_test(test_two_views_one_root_flag_off),
      cmocka_unit_test(test_same_buffer_twice),
      cmocka_unit_test(test_global_result_flag_off),
      cmocka_unit_test(test_global_result_flag_on),
      cmocka_unit_test(test_argument_returned_flag_on),
      cmocka_unit_test(test_argument_returned_flag_off),
      cmocka_unit_test(test_argument_subview_returned_flag_on),
      cmocka_unit_test(test_argument_subview_returned_flag_off),
      cmocka_unit_test(test_hidden_reference_flag_off_frontier),
      cmocka_unit_test(test_hidden_reference_flag_off_device_sync),
      cmocka_unit_test(test_hidden_reference_flag_off_ordered),
      cmocka_unit_test(test_hidden_reference_flag_on_use_after_free_ordered),
      cmocka_unit_test(test_hidden_reference_flag_on_use_after_free),
      cmocka_unit_test(test_ineligible_roots_imported_sync),
      cmocka_unit_test(test_explicit_dealloca_of_async_result),
      cmocka_unit_test(test_export_orders_arguments),
      cmocka_unit_test(test_argument_use_fence_stays_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
