// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Native-stream interop (hl_queue_native_call) on the backend
// tests/test_util.h picks: the call runs in the queue's timeline order (a
// test that fails if it runs before earlier work or its waits), its
// bindings are recorded as uses, a failed wait or a freed binding skips it,
// and its own failure fails the submission (and the queue when it writes).
// The function writes 7s to its binding: directly on the host backend, with
// hipMemsetD32Async on the native stream on hip.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hipline/buffer.h"
#include "hipline/dispatch.h"
#include "hipline/fence.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "hipline/time.h"
#include "tests/test_util.h"

#define MS ((hl_duration_t)1000000)
#define DEADLINE() hl_deadline_after(20000 * MS)
#define WORDS 64

typedef struct call_ctx_t {
  atomic_int calls;
  atomic_int saw_ones;  // Host backend: the binding held 1s when it ran.
  hl_status_t fail_with;
} call_ctx_t;

typedef int (*memset_d32_async_fn)(void*, int, size_t, void*);

static hl_status_t write_sevens(void* user, void* stream, void* const* ptrs,
                                size_t count) {
  call_ctx_t* ctx = user;
  atomic_fetch_add(&ctx->calls, 1);
  if (ctx->fail_with) {
    hl_status_t st = ctx->fail_with;
    ctx->fail_with = NULL;
    return st;
  }
  assert_int_equal(count, 1);
  if (hl_test_backend_kind() == HL_BACKEND_HOST) {
    uint32_t* words = ptrs[0];
    int ones = 1;
    for (int i = 0; i < WORDS; ++i) ones &= words[i] == 1;
    atomic_store(&ctx->saw_ones, ones);
    for (int i = 0; i < WORDS; ++i) words[i] = 7;
    return NULL;
  }
  memset_d32_async_fn memset_async = NULL;
  void* symbol = hl_test_hip_symbol_("hipMemsetD32Async");
  memcpy(&memset_async, &symbol, sizeof(symbol));
  int rc = memset_async(ptrs[0], 7, WORDS, stream);
  if (rc != 0) {
    return HL_MAKE_STATUS(HL_STATUS_INTERNAL, "hipMemsetD32Async: %d", rc);
  }
  return NULL;
}

typedef struct fixture_t {
  hl_device_t* device;
  hl_queue_t* queue;
  hl_semaphore_t* sem;
  uint64_t value;
} fixture_t;

static hl_fence_t* fence_of(hl_semaphore_t* sem, uint64_t value) {
  hl_fence_t* f = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &f));
  HL_ASSERT_OK(hl_fence_insert(f, sem, value));
  return f;
}

static hl_fence_t* step(fixture_t* f) { return fence_of(f->sem, ++f->value); }

static void wait_last(fixture_t* f) {
  HL_ASSERT_OK(hl_semaphore_wait(f->sem, f->value, DEADLINE()));
}

static hl_device_t* make_device(int checked) {
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = hl_test_backend_kind();
  o.checked = checked;
  hl_device_t* d = NULL;
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  return d;
}

static int setup_checked(void** state, int checked) {
  fixture_t* f = calloc(1, sizeof(*f));
  f->device = make_device(checked);
  HL_ASSERT_OK(hl_queue_create(f->device, &f->queue));
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &f->sem));
  *state = f;
  return 0;
}
static int setup(void** state) { return setup_checked(state, 0); }
static int setup_checked_mode(void** state) { return setup_checked(state, 1); }

static int teardown(void** state) {
  fixture_t* f = *state;
  hl_status_ignore(hl_queue_wait_idle(f->queue, DEADLINE()));
  hl_queue_release(f->queue);
  hl_semaphore_release(f->sem);
  hl_device_release(f->device);
  free(f);
  return 0;
}

static hl_buffer_t* alloc_sync(fixture_t* f) {
  hl_fence_t* s = step(f);
  hl_buffer_t* b = NULL;
  HL_ASSERT_OK(hl_queue_alloca(f->queue, NULL, s, WORDS * 4, 0, &b));
  wait_last(f);
  hl_fence_release(s);
  return b;
}

static void read_words(fixture_t* f, hl_buffer_t* b, uint32_t* out) {
  hl_fence_t* s = step(f);
  HL_ASSERT_OK(hl_queue_read(f->queue, NULL, s, b, 0, out, WORDS * 4));
  wait_last(f);
  hl_fence_release(s);
}

static hl_buffer_binding_t binding(hl_buffer_t* b, hl_access_t access) {
  hl_buffer_binding_t x = {b, 0, WORDS * 4, access};
  return x;
}

// Earlier work parked behind a gate: the call must not run before it (on
// the host backend it sees the 1s the write left; on hip its memset lands
// after the write), and the value read afterwards is the call's.
static void test_runs_in_timeline_order(void** state) {
  fixture_t* f = *state;
  hl_buffer_t* b = alloc_sync(f);
  hl_semaphore_t* gate = NULL;
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &gate));
  hl_fence_t* open = fence_of(gate, 1);
  static uint32_t ones[WORDS];
  for (int i = 0; i < WORDS; ++i) ones[i] = 1;
  hl_fence_t* written = step(f);
  HL_ASSERT_OK(
      hl_queue_write(f->queue, open, written, ones, b, 0, sizeof(ones)));
  call_ctx_t ctx = {0};
  hl_buffer_binding_t bind = binding(b, HL_ACCESS_READ_WRITE);
  hl_fence_t* called = step(f);
  HL_ASSERT_OK(hl_queue_native_call(f->queue, NULL, called, write_sevens, &ctx,
                                    1, &bind));
  // The call's write is the buffer's mutation barrier, not reached while
  // the gate is closed.
  hl_fence_t* barrier = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &barrier));
  HL_ASSERT_OK(hl_buffer_mutation_barrier(b, barrier));
  bool reached = true;
  HL_ASSERT_OK(hl_fence_is_reached(barrier, &reached));
  assert_false(reached);
  if (hl_test_backend_kind() == HL_BACKEND_HOST) {
    assert_int_equal(atomic_load(&ctx.calls), 0);
  }
  HL_ASSERT_OK(hl_semaphore_signal(gate, 1));
  wait_last(f);
  HL_ASSERT_OK(hl_fence_wait(barrier, DEADLINE()));
  assert_int_equal(atomic_load(&ctx.calls), 1);
  if (hl_test_backend_kind() == HL_BACKEND_HOST) {
    assert_int_equal(atomic_load(&ctx.saw_ones), 1);
  }
  uint32_t got[WORDS];
  read_words(f, b, got);
  for (int i = 0; i < WORDS; ++i) assert_int_equal(got[i], 7);
  hl_fence_release(barrier);
  hl_fence_release(written);
  hl_fence_release(called);
  hl_fence_release(open);
  hl_semaphore_release(gate);
  hl_buffer_release(b);
}

// A failed wait skips the call and fails its signal with the wait's status.
static void test_failed_wait_skips_call(void** state) {
  fixture_t* f = *state;
  hl_buffer_t* b = alloc_sync(f);
  hl_semaphore_t* upstream = NULL;
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &upstream));
  HL_ASSERT_OK(hl_semaphore_fail(
      upstream, HL_MAKE_STATUS(HL_STATUS_ABORTED, "upstream failed")));
  hl_fence_t* wait = fence_of(upstream, 1);
  call_ctx_t ctx = {0};
  hl_buffer_binding_t bind = binding(b, HL_ACCESS_WRITE);
  hl_fence_t* called = step(f);
  HL_ASSERT_OK(hl_queue_native_call(f->queue, wait, called, write_sevens, &ctx,
                                    1, &bind));
  hl_status_t st = hl_semaphore_wait(f->sem, f->value, DEADLINE());
  assert_int_equal(hl_status_code(st), HL_STATUS_ABORTED);
  hl_status_free(st);
  assert_int_equal(atomic_load(&ctx.calls), 0);
  hl_fence_release(wait);
  hl_fence_release(called);
  hl_semaphore_release(upstream);
  hl_buffer_release(b);
}

// The call's own failure fails its signal; with a written binding the
// queue fails too, with only reads it does not.
static void check_call_failure(fixture_t* f, hl_access_t access) {
  hl_buffer_t* b = alloc_sync(f);
  call_ctx_t ctx = {0};
  ctx.fail_with = HL_MAKE_STATUS(HL_STATUS_DATA_LOSS, "the library failed");
  hl_buffer_binding_t bind = binding(b, access);
  hl_fence_t* called = step(f);
  HL_ASSERT_OK(hl_queue_native_call(f->queue, NULL, called, write_sevens, &ctx,
                                    1, &bind));
  hl_status_t st = hl_semaphore_wait(f->sem, f->value, DEADLINE());
  char text[512];
  hl_status_format(st, text, sizeof(text));
  assert_int_equal(hl_status_code(st), HL_STATUS_DATA_LOSS);
  assert_non_null(strstr(text, "native call on queue"));
  hl_status_free(st);
  hl_status_t queue_status = hl_queue_status(f->queue);
  if (access & HL_ACCESS_WRITE) {
    assert_int_equal(hl_status_code(queue_status), HL_STATUS_DATA_LOSS);
  } else {
    assert_null(queue_status);
  }
  hl_status_free(queue_status);
  hl_fence_release(called);
  hl_buffer_release(b);
}

static void test_call_failure_read_only(void** state) {
  check_call_failure(*state, HL_ACCESS_READ);
}

static void test_call_failure_write(void** state) {
  check_call_failure(*state, HL_ACCESS_WRITE);
}

// A binding freed before the call runs: FAILED_PRECONDITION, no call.
static void test_use_after_free(void** state) {
  fixture_t* f = *state;
  hl_buffer_t* b = alloc_sync(f);
  hl_fence_t* freed = step(f);
  HL_ASSERT_OK(hl_queue_dealloca(f->queue, NULL, freed, b));
  call_ctx_t ctx = {0};
  hl_buffer_binding_t bind = binding(b, HL_ACCESS_WRITE);
  hl_fence_t* called = step(f);
  HL_ASSERT_OK(hl_queue_native_call(f->queue, freed, called, write_sevens, &ctx,
                                    1, &bind));
  hl_status_t st = hl_semaphore_wait(f->sem, f->value, DEADLINE());
  char text[512];
  hl_status_format(st, text, sizeof(text));
  assert_int_equal(hl_status_code(st), HL_STATUS_FAILED_PRECONDITION);
  assert_non_null(strstr(text, "use after free"));
  assert_non_null(strstr(text, "native call"));
  hl_status_free(st);
  assert_int_equal(atomic_load(&ctx.calls), 0);
  hl_fence_release(freed);
  hl_fence_release(called);
  hl_buffer_release(b);
}

static void test_bad_arguments(void** state) {
  fixture_t* f = *state;
  hl_buffer_t* b = alloc_sync(f);
  call_ctx_t ctx = {0};
  hl_buffer_binding_t bind = binding(b, HL_ACCESS_WRITE);
  HL_ASSERT_STATUS(
      hl_queue_native_call(f->queue, NULL, NULL, NULL, &ctx, 1, &bind),
      INVALID_ARGUMENT);
  bind.buffer = NULL;
  HL_ASSERT_STATUS(
      hl_queue_native_call(f->queue, NULL, NULL, write_sevens, &ctx, 1, &bind),
      INVALID_ARGUMENT);
  bind = binding(b, (hl_access_t)0);
  HL_ASSERT_STATUS(
      hl_queue_native_call(f->queue, NULL, NULL, write_sevens, &ctx, 1, &bind),
      INVALID_ARGUMENT);
  bind = binding(b, HL_ACCESS_READ);
  bind.offset = 8;
  HL_ASSERT_STATUS(
      hl_queue_native_call(f->queue, NULL, NULL, write_sevens, &ctx, 1, &bind),
      OUT_OF_RANGE);
  HL_ASSERT_STATUS(
      hl_queue_native_call(f->queue, NULL, NULL, write_sevens, &ctx,
                           HL_NATIVE_CALL_MAX_BINDINGS + 1, &bind),
      INVALID_ARGUMENT);
  assert_int_equal(atomic_load(&ctx.calls), 0);
  hl_buffer_release(b);
}

int main(void) {
  // Exits 77 (skipped) when the hip backend has no device.
  (void)hl_test_backend_kind();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_runs_in_timeline_order, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_failed_wait_skips_call, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_call_failure_read_only, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_call_failure_write, setup, teardown),
      cmocka_unit_test_setup_teardown(test_use_after_free, setup, teardown),
      cmocka_unit_test_setup_teardown(test_use_after_free, setup_checked_mode,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
