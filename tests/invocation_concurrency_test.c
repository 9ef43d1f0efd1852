// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Concurrent invocations: four threads invoke a mix of functions (unique
// results, one root shared by two results, an argument returned, a hidden
// reference with the flag off, a registered global) on two shared queues with
// the flag on and off, verify every result's data, and the counters balance
// at the end.
#define HL_TEST_C11_THREADS_SHIM
#include <threads.h>

#include "tests/invocation_util.h"

#define SIZE ((uint64_t)2048)
#define THREADS 4
#define KINDS 5

enum {
  KIND_FRESH = 0,
  KIND_TWO_VIEWS = 1,
  KIND_ARGUMENT = 2,
  KIND_HIDDEN = 3,
  KIND_GLOBAL = 4,
};

typedef struct shared_t {
  hl_device_t* device;
  hl_queue_t* queues[2];
  hl_function_t* fresh;      // Shared by every thread.
  hl_function_t* two_views;  // Shared by every thread.
  inv_fn_config_t fresh_config;
  inv_fn_config_t two_views_config;
  int iterations;
} shared_t;

typedef struct worker_t {
  shared_t* shared;
  int index;
  int counts[KINDS];
  char error[512];  // First failure; cmocka asserts only on the main thread.
} worker_t;

static bool worker_fail(worker_t* w, const char* what, hl_status_t st) {
  if (!w->error[0]) {
    char text[384];
    hl_status_format(st, text, sizeof(text));
    snprintf(w->error, sizeof(w->error), "thread %d: %s: %s", w->index, what,
             text);
  }
  hl_status_free(st);
  return false;
}

#define WORKER_CHECK(w, expr, what)                \
  do {                                             \
    hl_status_t st_ = (expr);                      \
    if (st_) return worker_fail((w), (what), st_); \
  } while (0)

// Reads |buffer| after |wait| and checks every word is |pattern|.
static bool worker_expect_fill(worker_t* w, hl_queue_t* q,
                               const hl_fence_t* wait, hl_buffer_t* buffer,
                               uint32_t pattern) {
  uint32_t words[SIZE / 4];
  uint64_t length = hl_buffer_length(buffer);
  if (length > SIZE) length = SIZE;
  memset(words, 0, sizeof(words));
  WORKER_CHECK(w, inv_read_status(q, wait, buffer, words, length), "read");
  for (uint64_t i = 0; i < length / 4; ++i) {
    if (words[i] != pattern) {
      snprintf(w->error, sizeof(w->error),
               "thread %d: word %llu is 0x%08x, expected 0x%08x", w->index,
               (unsigned long long)i, words[i], pattern);
      return false;
    }
  }
  return true;
}

static bool worker_take(worker_t* w, hl_invocation_t* inv, size_t index,
                        hl_buffer_t** out) {
  WORKER_CHECK(w, hl_invocation_take_result(inv, index, out), "take_result");
  return true;
}

static bool worker_run(worker_t* w) {
  shared_t* s = w->shared;
  // Per-thread functions for the kinds that keep a reference in their
  // configuration.
  inv_fn_config_t arg_config, hidden_config, global_config;
  uint32_t base = 0x10000000u * (uint32_t)(w->index + 1);
  inv_fn_config_init(&arg_config, SIZE, base | 0x0A);
  inv_fn_config_init(&hidden_config, SIZE, base | 0x0B);
  inv_fn_config_init(&global_config, SIZE, base | 0x0C);
  const hl_access_t rw[1] = {HL_ACCESS_READ_WRITE};
  hl_function_signature_t arg_sig = {1, 1, rw};
  hl_function_signature_t none_sig = {0, 1, NULL};
  hl_function_t* f_arg = NULL;
  hl_function_t* f_arg_view = NULL;
  hl_function_t* f_hidden = NULL;
  hl_function_t* f_global = NULL;
  hl_buffer_t* arg = NULL;
  bool ok = false;
  hl_status_t st =
      hl_function_create("arg", &arg_sig, inv_fn_return_arg, &arg_config,
                         hl_allocator_system(), &f_arg);
  if (!st) {
    st = hl_function_create("arg_view", &arg_sig, inv_fn_return_arg_view,
                            &arg_config, hl_allocator_system(), &f_arg_view);
  }
  if (!st) {
    st = hl_function_create("hidden", &none_sig, inv_fn_hidden, &hidden_config,
                            hl_allocator_system(), &f_hidden);
  }
  if (!st) {
    st = hl_function_create("global", &none_sig, inv_fn_global, &global_config,
                            hl_allocator_system(), &f_global);
  }
  if (!st) {
    st = inv_fresh_filled(s->queues[w->index & 1], NULL, NULL, 2 * SIZE, 0,
                          &arg);
  }
  if (st) {
    worker_fail(w, "setup", st);
    goto done;
  }

  for (int i = 0; i < s->iterations; ++i) {
    int kind = (i + w->index) % KINDS;
    bool flag = ((i / KINDS) + w->index) % 2 == 0;
    hl_queue_t* q = s->queues[(i + w->index) & 1];
    hl_function_t* f = NULL;
    uint32_t pattern = 0;
    switch (kind) {
      case KIND_FRESH:
        f = s->fresh;
        pattern = s->fresh_config.pattern;
        break;
      case KIND_TWO_VIEWS:
        f = s->two_views;
        pattern = s->two_views_config.pattern;
        break;
      case KIND_ARGUMENT:
        f = (i / KINDS) % 2 ? f_arg_view : f_arg;
        pattern = arg_config.pattern;
        break;
      case KIND_HIDDEN:
        f = f_hidden;
        pattern = hidden_config.pattern;
        flag = false;  // With the flag on this is a use after free.
        break;
      case KIND_GLOBAL:
        f = f_global;
        pattern = global_config.pattern;
        break;
    }
    hl_invocation_t* inv = NULL;
    st = hl_invocation_create(f, q, &inv);
    if (!st && kind == KIND_ARGUMENT) {
      st = hl_invocation_add_argument(inv, arg);
    }
    if (!st) {
      hl_invocation_set_assume_no_alias(inv, flag);
      st = hl_invocation_invoke(inv);
    }
    if (st) {
      hl_invocation_release(inv);
      worker_fail(w, "invoke", st);
      goto done;
    }
    ++w->counts[kind];
    const hl_fence_t* signal = hl_invocation_signal_fence(inv);
    hl_buffer_t* r0 = NULL;
    hl_buffer_t* r1 = NULL;
    bool good = worker_take(w, inv, 0, &r0);
    if (good && kind == KIND_TWO_VIEWS) good = worker_take(w, inv, 1, &r1);
    // Read on the other queue half of the time: ordered by the signal alone.
    hl_queue_t* rq = s->queues[(i / 2 + w->index) & 1];
    if (good) good = worker_expect_fill(w, rq, signal, r0, pattern);
    if (good && r1) good = worker_expect_fill(w, rq, signal, r1, ~pattern);
    hl_buffer_release(r0);
    hl_buffer_release(r1);
    hl_invocation_release(inv);
    if (good && kind == KIND_HIDDEN) {
      // The hidden reference outlives the caller's.
      good = worker_expect_fill(w, q, NULL, hidden_config.kept, pattern);
    }
    if (good && kind == KIND_GLOBAL) {
      good = worker_expect_fill(w, q, NULL, global_config.kept, pattern);
      st = hl_buffer_unregister_global(global_config.kept);
      if (st) good = worker_fail(w, "unregister", st);
      hl_buffer_release(global_config.kept);
      global_config.kept = NULL;
    }
    if (!good) goto done;
  }
  ok = true;

done:
  hl_buffer_release(hidden_config.kept);
  hl_buffer_release(global_config.kept);
  hl_buffer_release(arg);
  hl_function_release(f_global);
  hl_function_release(f_hidden);
  hl_function_release(f_arg_view);
  hl_function_release(f_arg);
  return ok;
}

static int worker_main(void* user) {
  worker_t* w = (worker_t*)user;
  return worker_run(w) ? 0 : 1;
}

static void test_concurrent_invocations(void** state) {
  (void)state;
  shared_t s;
  memset(&s, 0, sizeof(s));
  s.device = inv_device_create();
  s.queues[0] = hl_test_queue_create(s.device);
  s.queues[1] = hl_test_queue_create(s.device);
  s.iterations = (int)hl_test_scale(1000, 4);
  inv_fn_config_init(&s.fresh_config, SIZE, 0x0F0F1234u);
  inv_fn_config_init(&s.two_views_config, SIZE, 0x33CC5AA5u);
  s.fresh = inv_function("fresh", 0, NULL, 1, inv_fn_fresh, &s.fresh_config);
  s.two_views = inv_function("two_views", 0, NULL, 2, inv_fn_two_views,
                             &s.two_views_config);
  hl_invocation_stats_t global_before;
  hl_invocation_stats_global(&global_before);

  worker_t workers[THREADS];
  thrd_t threads[THREADS];
  for (int t = 0; t < THREADS; ++t) {
    memset(&workers[t], 0, sizeof(workers[t]));
    workers[t].shared = &s;
    workers[t].index = t;
    assert_int_equal(thrd_create(&threads[t], worker_main, &workers[t]),
                     thrd_success);
  }
  int failed = 0;
  for (int t = 0; t < THREADS; ++t) {
    int rc = 0;
    assert_int_equal(thrd_join(threads[t], &rc), thrd_success);
    if (rc) {
      print_error("%s\n", workers[t].error);
      ++failed;
    }
  }
  assert_int_equal(failed, 0);

  uint64_t n[KINDS] = {0};
  uint64_t total = 0;
  for (int t = 0; t < THREADS; ++t) {
    for (int k = 0; k < KINDS; ++k) {
      n[k] += (uint64_t)workers[t].counts[k];
      total += (uint64_t)workers[t].counts[k];
    }
  }
  assert_int_equal(total, (uint64_t)THREADS * (uint64_t)s.iterations);
  inv_wait_idle(s.device);
  assert_true(hl_test_poll_bytes_in_use(s.device, 0, 10000));

  hl_invocation_stats_t st = inv_stats(s.device);
  assert_int_equal(st.invocations, total);
  assert_int_equal(st.async_imports, n[KIND_FRESH] + n[KIND_TWO_VIEWS]);
  assert_int_equal(st.sync_imports,
                   n[KIND_ARGUMENT] + n[KIND_HIDDEN] + n[KIND_GLOBAL]);
  assert_int_equal(st.alias_detected, n[KIND_ARGUMENT] + n[KIND_GLOBAL]);
  assert_int_equal(st.async_deallocs, st.async_imports);
  // Sync-imported roots and the threads' arguments go by the fallback.
  assert_int_equal(st.fallback_releases_frontier,
                   n[KIND_HIDDEN] + n[KIND_GLOBAL] + THREADS);
  assert_int_equal(st.fallback_releases_device_sync, 0);
  hl_memory_stats_t m = hl_test_memory_stats(s.device);
  assert_int_equal(m.use_after_free, 0);
  assert_int_equal(m.bytes_in_use, 0);
  assert_int_equal(m.allocas, n[KIND_FRESH] + n[KIND_TWO_VIEWS] +
                                  n[KIND_HIDDEN] + n[KIND_GLOBAL] + THREADS);
  assert_int_equal(m.deallocas, st.async_deallocs);
  HL_ASSERT_OK(hl_queue_status(s.queues[0]));
  HL_ASSERT_OK(hl_queue_status(s.queues[1]));

  // The process-wide counters saw the same (no other device is busy here).
  hl_invocation_stats_t global_after;
  hl_invocation_stats_global(&global_after);
  assert_int_equal(global_after.invocations - global_before.invocations,
                   st.invocations);
  assert_int_equal(global_after.async_imports - global_before.async_imports,
                   st.async_imports);
  assert_int_equal(global_after.sync_imports - global_before.sync_imports,
                   st.sync_imports);
  assert_int_equal(global_after.alias_detected - global_before.alias_detected,
                   st.alias_detected);
  assert_int_equal(global_after.async_deallocs - global_before.async_deallocs,
                   st.async_deallocs);

  hl_function_release(s.two_views);
  hl_function_release(s.fresh);
  hl_queue_release(s.queues[1]);
  hl_queue_release(s.queues[0]);
  hl_device_release(s.device);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_invocations),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
