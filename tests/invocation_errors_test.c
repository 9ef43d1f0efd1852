// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Bad input and failure paths of functions, invocations and the function
// registry: NULL handles, wrong argument counts, taking a result twice,
// invoking twice, functions that fail (before and after storing results),
// results and arguments on the wrong device, registry misuse.
#define HL_TEST_C11_THREADS_SHIM
#include "tests/invocation_util.h"

#define SIZE ((uint64_t)1024)

static hl_status_t fn_noop(void* user, hl_queue_t* queue,
                           hl_buffer_t* const* args, size_t nargs,
                           const hl_fence_t* wait, const hl_fence_t* signal,
                           hl_buffer_t** results, size_t nresults) {
  (void)user;
  (void)args;
  (void)nargs;
  (void)results;
  (void)nresults;
  return hl_queue_barrier(queue, wait, signal);
}

static void test_function_create_bad_input(void** state) {
  (void)state;
  hl_function_signature_t sig = {0, 1, NULL};
  hl_function_t* f = (hl_function_t*)0x1;
  HL_ASSERT_STATUS(
      hl_function_create("x", &sig, fn_noop, NULL, hl_allocator_system(), NULL),
      INVALID_ARGUMENT);
  HL_ASSERT_STATUS(
      hl_function_create(NULL, &sig, fn_noop, NULL, hl_allocator_system(), &f),
      INVALID_ARGUMENT);
  assert_null(f);
  HL_ASSERT_STATUS(
      hl_function_create("", &sig, fn_noop, NULL, hl_allocator_system(), &f),
      INVALID_ARGUMENT);
  HL_ASSERT_STATUS(
      hl_function_create("x", NULL, fn_noop, NULL, hl_allocator_system(), &f),
      INVALID_ARGUMENT);
  HL_ASSERT_STATUS(
      hl_function_create("x", &sig, NULL, NULL, hl_allocator_system(), &f),
      INVALID_ARGUMENT);
  char long_name[128];
  memset(long_name, 'n', sizeof(long_name) - 1);
  long_name[sizeof(long_name) - 1] = 0;
  HL_ASSERT_STATUS(hl_function_create(long_name, &sig, fn_noop, NULL,
                                      hl_allocator_system(), &f),
                   INVALID_ARGUMENT);
  hl_function_signature_t too_many = {HL_FUNCTION_MAX_ARGUMENTS + 1, 0, NULL};
  hl_access_t access[HL_FUNCTION_MAX_ARGUMENTS + 1];
  for (int i = 0; i <= HL_FUNCTION_MAX_ARGUMENTS; ++i) {
    access[i] = HL_ACCESS_READ;
  }
  too_many.argument_access = access;
  HL_ASSERT_STATUS(hl_function_create("x", &too_many, fn_noop, NULL,
                                      hl_allocator_system(), &f),
                   OUT_OF_RANGE);
  hl_function_signature_t too_many_results = {0, HL_FUNCTION_MAX_RESULTS + 1,
                                              NULL};
  HL_ASSERT_STATUS(hl_function_create("x", &too_many_results, fn_noop, NULL,
                                      hl_allocator_system(), &f),
                   OUT_OF_RANGE);
  hl_function_signature_t no_access = {1, 0, NULL};
  HL_ASSERT_STATUS(hl_function_create("x", &no_access, fn_noop, NULL,
                                      hl_allocator_system(), &f),
                   INVALID_ARGUMENT);
  hl_access_t bad_access[1] = {(hl_access_t)9};
  hl_function_signature_t bad = {1, 0, bad_access};
  hl_test_assert_status_has(hl_function_create("bad_access", &bad, fn_noop,
                                               NULL, hl_allocator_system(), &f),
                            HL_STATUS_INVALID_ARGUMENT, "bad_access", NULL);
  assert_null(f);

  // The name and the access list are copied.
  char name[16] = "copied";
  hl_access_t one[1] = {HL_ACCESS_WRITE};
  hl_function_signature_t ok = {1, 0, one};
  HL_ASSERT_OK(
      hl_function_create(name, &ok, fn_noop, NULL, hl_allocator_system(), &f));
  name[0] = 'X';
  one[0] = (hl_access_t)9;
  assert_string_equal(hl_function_name(f), "copied");
  assert_string_equal(hl_function_name(NULL), "");
  // NULL is accepted by retain and release.
  hl_function_retain(NULL);
  hl_function_release(NULL);
  hl_function_release(f);
}

static void test_invocation_bad_input(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  const hl_access_t access[1] = {HL_ACCESS_READ};
  hl_function_t* f = inv_function("one_arg", 1, access, 0, fn_noop, NULL);
  hl_invocation_t* inv = (hl_invocation_t*)0x1;
  HL_ASSERT_STATUS(hl_invocation_create(NULL, q, &inv), INVALID_ARGUMENT);
  assert_null(inv);
  HL_ASSERT_STATUS(hl_invocation_create(f, NULL, &inv), INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_invocation_create(f, q, NULL), INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_invocation_invoke(NULL), INVALID_ARGUMENT);
  hl_buffer_t* b = NULL;
  HL_ASSERT_STATUS(hl_invocation_take_result(NULL, 0, &b), INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_invocation_add_argument(NULL, NULL), INVALID_ARGUMENT);
  hl_semaphore_t* s = hl_test_semaphore_create();
  HL_ASSERT_STATUS(hl_invocation_add_wait(NULL, s, 1), INVALID_ARGUMENT);
  bool value = false;
  HL_ASSERT_STATUS(hl_invocation_effective_assume_no_alias(NULL, &value, NULL),
                   INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_device_invocation_stats(NULL, NULL), INVALID_ARGUMENT);
  hl_invocation_stats_t stats;
  HL_ASSERT_STATUS(hl_device_invocation_stats(NULL, &stats), INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_device_invocation_stats(d, NULL), INVALID_ARGUMENT);
  hl_invocation_stats_global(NULL);
  assert_null(hl_invocation_signal_fence(NULL));
  assert_int_equal(hl_invocation_result_count(NULL), 0);
  hl_invocation_release(NULL);
  hl_invocation_set_assume_no_alias(NULL, false);

  HL_ASSERT_OK(hl_invocation_create(f, q, &inv));
  HL_ASSERT_STATUS(hl_invocation_add_argument(inv, NULL), INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_invocation_add_wait(inv, NULL, 1), INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_invocation_effective_assume_no_alias(inv, NULL, NULL),
                   INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_invocation_take_result(inv, 0, NULL), INVALID_ARGUMENT);
  // Nothing invoked yet: no results.
  HL_ASSERT_STATUS(hl_invocation_take_result(inv, 0, &b), OUT_OF_RANGE);
  hl_invocation_release(inv);

  hl_semaphore_release(s);
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

static void test_wrong_argument_count(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  const hl_access_t access[2] = {HL_ACCESS_READ, HL_ACCESS_WRITE};
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0);
  hl_function_t* f = inv_function("two_args", 2, access, 0, fn_noop, &c);
  hl_buffer_t* b = NULL;
  HL_ASSERT_OK(inv_fresh_filled(q, NULL, NULL, SIZE, 3, &b));

  hl_invocation_t* inv = NULL;
  HL_ASSERT_OK(hl_invocation_create(f, q, &inv));
  hl_test_assert_status_has(hl_invocation_invoke(inv),
                            HL_STATUS_INVALID_ARGUMENT, "two_args", NULL);
  HL_ASSERT_OK(hl_invocation_add_argument(inv, b));
  hl_test_assert_status_has(hl_invocation_invoke(inv),
                            HL_STATUS_INVALID_ARGUMENT, "two_args", NULL);
  HL_ASSERT_OK(hl_invocation_add_argument(inv, b));
  HL_ASSERT_STATUS(hl_invocation_add_argument(inv, b), OUT_OF_RANGE);
  // A refused invoke left nothing behind: with the right count it runs.
  assert_int_equal(inv_stats(d).invocations, 0);
  HL_ASSERT_OK(hl_invocation_invoke(inv));
  inv_wait_signal(inv);
  assert_int_equal(inv_stats(d).invocations, 1);
  assert_int_equal(hl_invocation_result_count(inv), 0);

  // Invoked once only; no arguments afterwards.
  hl_test_assert_status_has(hl_invocation_invoke(inv),
                            HL_STATUS_FAILED_PRECONDITION, "already invoked",
                            NULL);
  HL_ASSERT_STATUS(hl_invocation_add_argument(inv, b), FAILED_PRECONDITION);
  assert_int_equal(inv_stats(d).invocations, 1);
  hl_invocation_release(inv);
  hl_buffer_release(b);
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

static void test_take_result_twice(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0x42424242u);
  hl_function_t* f = inv_function("fresh", 0, NULL, 1, inv_fn_fresh, &c);
  hl_invocation_t* inv = inv_invoke(f, q, NULL, 0, true);
  assert_int_equal(hl_invocation_result_count(inv), 1);
  hl_buffer_t* r = inv_take(inv, 0);
  hl_buffer_t* again = (hl_buffer_t*)0x1;
  hl_test_assert_status_has(hl_invocation_take_result(inv, 0, &again),
                            HL_STATUS_FAILED_PRECONDITION, "already taken",
                            NULL);
  assert_null(again);
  HL_ASSERT_STATUS(hl_invocation_take_result(inv, 1, &again), OUT_OF_RANGE);
  inv_wait_signal(inv);
  inv_expect_fill(q, NULL, r, c.pattern);
  hl_invocation_release(inv);
  hl_buffer_release(r);
  inv_wait_idle(d);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

//===----------------------------------------------------------------------===//
// Functions that fail
//===----------------------------------------------------------------------===//

typedef struct fail_config_t {
  int stored;  // Results to store before failing.
  atomic_int calls;
} fail_config_t;

static hl_status_t fn_fail(void* user, hl_queue_t* queue,
                           hl_buffer_t* const* args, size_t nargs,
                           const hl_fence_t* wait, const hl_fence_t* signal,
                           hl_buffer_t** results, size_t nresults) {
  (void)args;
  (void)nargs;
  (void)signal;
  (void)nresults;
  fail_config_t* c = (fail_config_t*)user;
  atomic_fetch_add(&c->calls, 1);
  for (int i = 0; i < c->stored; ++i) {
    HL_RETURN_IF_ERROR_PLAIN(
        inv_fresh_filled(queue, wait, NULL, SIZE, 5, &results[i]));
  }
  return HL_MAKE_STATUS(HL_STATUS_UNAVAILABLE, "the model shard is offline");
}

static void function_error_case(int stored) {
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  fail_config_t c = {stored, 0};
  hl_function_t* f = inv_function("failing", 0, NULL, 2, fn_fail, &c);
  hl_invocation_t* inv = NULL;
  HL_ASSERT_OK(hl_invocation_create(f, q, &inv));
  hl_test_assert_status_has(hl_invocation_invoke(inv), HL_STATUS_UNAVAILABLE,
                            "shard is offline", "failing");
  assert_int_equal(atomic_load(&c.calls), 1);
  // The signal fence fails with the function's status.
  hl_test_assert_status_has(
      hl_fence_wait(hl_invocation_signal_fence(inv), INV_DEADLINE()),
      HL_STATUS_UNAVAILABLE, "shard is offline", NULL);
  bool reached = true;
  HL_ASSERT_STATUS(
      hl_fence_is_reached(hl_invocation_signal_fence(inv), &reached),
      UNAVAILABLE);
  // No results to take; whatever was stored is released.
  hl_buffer_t* r = NULL;
  HL_ASSERT_STATUS(hl_invocation_take_result(inv, 0, &r), OUT_OF_RANGE);
  assert_null(r);
  assert_int_equal(hl_invocation_result_count(inv), 0);
  HL_ASSERT_STATUS(hl_invocation_invoke(inv), FAILED_PRECONDITION);
  hl_invocation_stats_t s = inv_stats(d);
  assert_int_equal(s.async_imports + s.sync_imports, 0);

  // A later invocation that depends on the failed one fails too.
  inv_fn_config_t fc;
  inv_fn_config_init(&fc, SIZE, 9);
  hl_function_t* fresh = inv_function("after", 0, NULL, 1, inv_fn_fresh, &fc);
  hl_invocation_t* next = NULL;
  HL_ASSERT_OK(hl_invocation_create(fresh, q, &next));
  hl_semaphore_t* sem = NULL;
  uint64_t value = 0;
  hl_fence_entry(hl_invocation_signal_fence(inv), 0, &sem, &value);
  HL_ASSERT_OK(hl_invocation_add_wait(next, sem, value));
  HL_ASSERT_OK(hl_invocation_invoke(next));
  HL_ASSERT_STATUS(
      hl_fence_wait(hl_invocation_signal_fence(next), INV_DEADLINE()),
      UNAVAILABLE);
  hl_invocation_release(next);
  hl_invocation_release(inv);
  inv_wait_idle(d);
  assert_true(hl_test_poll_bytes_in_use(d, 0, 10000));
  assert_int_equal(hl_test_memory_stats(d).use_after_free, 0);
  hl_function_release(fresh);
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

static void test_function_error_no_results(void** state) {
  (void)state;
  function_error_case(0);
}

static void test_function_error_after_storing_results(void** state) {
  (void)state;
  function_error_case(2);
}

//===----------------------------------------------------------------------===//
// A failed write inside a function fails the readers of its result
//===----------------------------------------------------------------------===//

// Result = a fresh alloca whose fill waits on |user| (a semaphore the test
// failed): the alloca succeeds, the fill is cancelled, and the invocation's
// signal fails. The result is live and was never written.
static hl_status_t fn_fill_after_failed(void* user, hl_queue_t* queue,
                                        hl_buffer_t* const* args, size_t nargs,
                                        const hl_fence_t* wait,
                                        const hl_fence_t* signal,
                                        hl_buffer_t** results,
                                        size_t nresults) {
  (void)args;
  (void)nargs;
  (void)nresults;
  hl_buffer_t* r = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_queue_alloca(queue, wait, NULL, SIZE, 0, &r));
  hl_fence_t* waits = NULL;
  hl_status_t st = hl_fence_create(hl_allocator_system(), &waits);
  if (!st) st = hl_fence_join(waits, wait);
  if (!st) st = hl_fence_insert(waits, (hl_semaphore_t*)user, 1);
  if (!st) st = hl_queue_fill(queue, waits, signal, r, 0, SIZE, 0x5eedu);
  hl_fence_release(waits);
  if (st) {
    hl_status_ignore(hl_queue_dealloca(queue, NULL, NULL, r));
    hl_buffer_release(r);
    return st;
  }
  results[0] = r;
  return NULL;
}

// Result = a fresh alloca holding a copy of the argument (read access).
static hl_status_t fn_copy_of(void* user, hl_queue_t* queue,
                              hl_buffer_t* const* args, size_t nargs,
                              const hl_fence_t* wait, const hl_fence_t* signal,
                              hl_buffer_t** results, size_t nresults) {
  (void)user;
  (void)nargs;
  (void)nresults;
  hl_buffer_t* r = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_queue_alloca(queue, wait, NULL, SIZE, 0, &r));
  hl_status_t st = hl_queue_copy(queue, wait, signal, args[0], 0, r, 0, SIZE);
  if (st) {
    hl_status_ignore(hl_queue_dealloca(queue, NULL, NULL, r));
    hl_buffer_release(r);
    return st;
  }
  results[0] = r;
  return NULL;
}

// Result = the registered global |user| after a barrier (aliased result).
static hl_status_t fn_pass_global(void* user, hl_queue_t* queue,
                                  hl_buffer_t* const* args, size_t nargs,
                                  const hl_fence_t* wait,
                                  const hl_fence_t* signal,
                                  hl_buffer_t** results, size_t nresults) {
  (void)args;
  (void)nargs;
  (void)nresults;
  HL_RETURN_IF_ERROR_PLAIN(hl_queue_barrier(queue, wait, signal));
  hl_buffer_retain((hl_buffer_t*)user);
  results[0] = (hl_buffer_t*)user;
  return NULL;
}

// Regression (soak "bad words"): a function whose write failed returns a
// live buffer that was never written. The next invocation that reads it used
// to wait only on the last write's queue timepoint (which a failed
// submission still reaches), so it copied the garbage and succeeded: the
// failure was laundered into data. A result's last write is the producing
// invocation, so reading it waits on that invocation's signal and fails.
static void test_reading_a_failed_result_fails(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create_mode(HL_FALLBACK_ORDERED);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_queue_t* other = hl_test_queue_create(d);
  hl_semaphore_t* broken = hl_test_semaphore_create();
  HL_ASSERT_OK(hl_semaphore_fail(
      broken, HL_MAKE_STATUS(HL_STATUS_DATA_LOSS, "upstream shard lost")));
  static const hl_access_t read[1] = {HL_ACCESS_READ};
  hl_function_t* produce =
      inv_function("produce", 0, NULL, 1, fn_fill_after_failed, broken);
  hl_function_t* consume =
      inv_function("consume", 1, read, 1, fn_copy_of, NULL);

  hl_invocation_t* first = NULL;
  HL_ASSERT_OK(hl_invocation_create(produce, q, &first));
  HL_ASSERT_OK(hl_invocation_invoke(first));
  hl_buffer_t* garbage = NULL;
  HL_ASSERT_OK(hl_invocation_take_result(first, 0, &garbage));
  HL_ASSERT_STATUS(
      hl_fence_wait(hl_invocation_signal_fence(first), INV_DEADLINE()),
      DATA_LOSS);

  // Consumed on the same queue and on another one: both fail with the
  // producer's status instead of copying bytes nobody wrote.
  hl_queue_t* queues[2] = {q, other};
  for (int i = 0; i < 2; ++i) {
    hl_invocation_t* next = NULL;
    HL_ASSERT_OK(hl_invocation_create(consume, queues[i], &next));
    HL_ASSERT_OK(hl_invocation_add_argument(next, garbage));
    HL_ASSERT_OK(hl_invocation_invoke(next));
    hl_buffer_t* copy = NULL;
    HL_ASSERT_OK(hl_invocation_take_result(next, 0, &copy));
    hl_test_assert_status_has(
        hl_fence_wait(hl_invocation_signal_fence(next), INV_DEADLINE()),
        HL_STATUS_DATA_LOSS, "upstream shard lost", NULL);
    hl_buffer_release(copy);
    hl_invocation_release(next);
  }
  // A function handing a global back after reading the garbage fails too;
  // the global keeps its data, and its failed use does not keep it from
  // being freed at the end.
  hl_buffer_t* global = NULL;
  HL_ASSERT_OK(inv_fresh_filled(q, NULL, NULL, SIZE, 3, &global));
  HL_ASSERT_OK(hl_buffer_register_global(global));
  hl_function_t* pass =
      inv_function("pass", 1, read, 1, fn_pass_global, global);
  hl_invocation_t* aliased = NULL;
  HL_ASSERT_OK(hl_invocation_create(pass, q, &aliased));
  HL_ASSERT_OK(hl_invocation_add_argument(aliased, garbage));
  HL_ASSERT_OK(hl_invocation_invoke(aliased));
  hl_buffer_t* same = NULL;
  HL_ASSERT_OK(hl_invocation_take_result(aliased, 0, &same));
  assert_ptr_equal(same, global);
  HL_ASSERT_STATUS(
      hl_fence_wait(hl_invocation_signal_fence(aliased), INV_DEADLINE()),
      DATA_LOSS);
  inv_expect_fill(q, NULL, global, 3);
  hl_buffer_release(same);
  hl_invocation_release(aliased);
  HL_ASSERT_OK(hl_buffer_unregister_global(global));
  HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, global));
  hl_buffer_release(global);
  hl_function_release(pass);

  hl_buffer_release(garbage);
  hl_invocation_release(first);
  inv_wait_idle(d);
  // Everything is freed all the same (the cancelled deallocas fall back).
  assert_true(hl_test_poll_bytes_in_use(d, 0, 10000));
  assert_int_equal(hl_test_memory_stats(d).use_after_free, 0);
  hl_semaphore_release(broken);
  hl_function_release(consume);
  hl_function_release(produce);
  hl_queue_release(other);
  hl_queue_release(q);
  hl_device_release(d);
}

static hl_status_t fn_null_result(void* user, hl_queue_t* queue,
                                  hl_buffer_t* const* args, size_t nargs,
                                  const hl_fence_t* wait,
                                  const hl_fence_t* signal,
                                  hl_buffer_t** results, size_t nresults) {
  (void)user;
  (void)args;
  (void)nargs;
  (void)nresults;
  // Result 0 stored, result 1 forgotten.
  return inv_fresh_filled(queue, wait, signal, SIZE, 1, &results[0]);
}

// The other device rides in |user|.
static hl_status_t fn_foreign_result(void* user, hl_queue_t* queue,
                                     hl_buffer_t* const* args, size_t nargs,
                                     const hl_fence_t* wait,
                                     const hl_fence_t* signal,
                                     hl_buffer_t** results, size_t nresults) {
  (void)args;
  (void)nargs;
  (void)nresults;
  hl_queue_t* other = (hl_queue_t*)user;
  HL_RETURN_IF_ERROR_PLAIN(hl_queue_barrier(queue, wait, signal));
  return inv_fresh_filled(other, NULL, NULL, SIZE, 1, &results[0]);
}

static void test_bad_results_and_arguments(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create();
  hl_device_t* d2 = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  hl_queue_t* q2 = hl_test_queue_create(d2);

  hl_function_t* f =
      inv_function("null_result", 0, NULL, 2, fn_null_result, NULL);
  hl_invocation_t* inv = NULL;
  HL_ASSERT_OK(hl_invocation_create(f, q, &inv));
  hl_test_assert_status_has(hl_invocation_invoke(inv), HL_STATUS_INTERNAL,
                            "null_result", "result 1");
  HL_ASSERT_STATUS(
      hl_fence_wait(hl_invocation_signal_fence(inv), INV_DEADLINE()), INTERNAL);
  assert_int_equal(hl_invocation_result_count(inv), 0);
  hl_invocation_release(inv);
  hl_function_release(f);

  f = inv_function("foreign_result", 0, NULL, 1, fn_foreign_result, q2);
  HL_ASSERT_OK(hl_invocation_create(f, q, &inv));
  hl_test_assert_status_has(hl_invocation_invoke(inv),
                            HL_STATUS_INVALID_ARGUMENT, "foreign_result",
                            "another device");
  hl_invocation_release(inv);
  hl_function_release(f);

  const hl_access_t access[1] = {HL_ACCESS_READ};
  f = inv_function("one_arg", 1, access, 0, fn_noop, NULL);
  hl_buffer_t* foreign = NULL;
  HL_ASSERT_OK(inv_fresh_filled(q2, NULL, NULL, SIZE, 1, &foreign));
  HL_ASSERT_OK(hl_invocation_create(f, q, &inv));
  hl_test_assert_status_has(hl_invocation_add_argument(inv, foreign),
                            HL_STATUS_INVALID_ARGUMENT, "another device", NULL);
  hl_invocation_release(inv);
  hl_buffer_release(foreign);
  hl_function_release(f);

  inv_wait_idle(d);
  inv_wait_idle(d2);
  assert_true(hl_test_poll_bytes_in_use(d, 0, 10000));
  assert_true(hl_test_poll_bytes_in_use(d2, 0, 10000));
  hl_queue_release(q2);
  hl_queue_release(q);
  hl_device_release(d2);
  hl_device_release(d);
}

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

static void test_registry(void** state) {
  (void)state;
  hl_function_t* f =
      inv_function("inv_test.registered", 0, NULL, 0, fn_noop, NULL);
  hl_function_t* twin =
      inv_function("inv_test.registered", 0, NULL, 0, fn_noop, NULL);
  HL_ASSERT_STATUS(hl_function_register(NULL), INVALID_ARGUMENT);
  HL_ASSERT_OK(hl_function_register(f));
  hl_test_assert_status_has(hl_function_register(f), HL_STATUS_ALREADY_EXISTS,
                            "inv_test.registered", NULL);
  hl_test_assert_status_has(hl_function_register(twin),
                            HL_STATUS_ALREADY_EXISTS, "inv_test.registered",
                            NULL);

  hl_function_t* found = NULL;
  HL_ASSERT_OK(hl_function_lookup("inv_test.registered", &found));
  assert_ptr_equal(found, f);
  // The registry holds its own reference: the creator's can go.
  hl_function_release(f);
  assert_string_equal(hl_function_name(found), "inv_test.registered");
  hl_function_release(found);

  found = (hl_function_t*)0x1;
  hl_test_assert_status_has(hl_function_lookup("inv_test.unknown", &found),
                            HL_STATUS_NOT_FOUND, "inv_test.unknown", NULL);
  assert_null(found);
  HL_ASSERT_STATUS(hl_function_lookup(NULL, &found), INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_function_lookup("inv_test.registered", NULL),
                   INVALID_ARGUMENT);

  HL_ASSERT_OK(hl_function_unregister("inv_test.registered"));
  hl_test_assert_status_has(hl_function_lookup("inv_test.registered", &found),
                            HL_STATUS_NOT_FOUND, "inv_test.registered", NULL);
  hl_test_assert_status_has(hl_function_unregister("inv_test.registered"),
                            HL_STATUS_NOT_FOUND, "inv_test.registered", NULL);
  HL_ASSERT_STATUS(hl_function_unregister(NULL), NOT_FOUND);
  // The name is free again.
  HL_ASSERT_OK(hl_function_register(twin));
  HL_ASSERT_OK(hl_function_unregister("inv_test.registered"));
  hl_function_release(twin);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_function_create_bad_input),
      cmocka_unit_test(test_invocation_bad_input),
      cmocka_unit_test(test_wrong_argument_count),
      cmocka_unit_test(test_take_result_twice),
      cmocka_unit_test(test_function_error_no_results),
      cmocka_unit_test(test_function_error_after_storing_results),
      cmocka_unit_test(test_bad_results_and_arguments),
      cmocka_unit_test(test_reading_a_failed_result_fails),
      cmocka_unit_test(test_registry),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
