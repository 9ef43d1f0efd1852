// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Failure and misuse of the queue-ordered allocator on the host backend:
// use after free (checked and unchecked), a dealloca whose wait fails (early
// and late), double dealloca, and deallocas of wrapped external buffers.

#include "tests/memory_util.h"

#define KIB ((uint64_t)1024)

static void test_use_after_free_checked_fails_queue(void** state) {
  (void)state;
  mem_device_config_t cfg = {.checked = 1};
  hl_device_t* d = mem_device_create(&cfg);
  hl_test_require_checked(d);
  assert_true(hl_device_checked(d));
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();

  hl_buffer_t* b = mem_alloca(q, NULL, 0, s, 1, 4 * KIB);
  mem_dealloca(q, s, 1, s, 2, b);
  hl_fence_t* w = hl_test_fence(s, 2);
  hl_fence_t* sig = hl_test_fence(s, 3);
  HL_ASSERT_OK(hl_queue_fill(q, w, sig, b, 0, 4 * KIB, 0xDEADBEEFu));
  hl_fence_release(w);
  hl_fence_release(sig);

  char root_name[64];
  snprintf(root_name, sizeof(root_name), "root %llu",
           (unsigned long long)hl_buffer_root_id(b));
  hl_status_t st = hl_semaphore_wait(s, 3, MEM_DEADLINE());
  char text[1024];
  hl_status_format(st, text, sizeof(text));
  print_message("use after free: %s\n", text);
  // Names the dealloca that freed it, with its queue and submission (the
  // description is formatted only when a use after free is reported).
  char freed_by[96];
  snprintf(freed_by, sizeof(freed_by),
           "freed by queue_dealloca on queue %u (submission 2)",
           hl_queue_id(q));
  assert_non_null(strstr(text, freed_by));
  hl_test_assert_status_has(st, HL_STATUS_FAILED_PRECONDITION, root_name, NULL);
  assert_true(hl_buffer_is_freed(b));
  assert_true(hl_test_memory_stats(d).use_after_free >= 1);

  // Checked mode fails the queue, and later submissions with it.
  hl_test_assert_status_has(hl_queue_status(q), HL_STATUS_FAILED_PRECONDITION,
                            root_name, NULL);
  hl_semaphore_t* s2 = hl_test_semaphore_create();
  hl_fence_t* sig2 = hl_test_fence(s2, 1);
  hl_status_t later = hl_queue_barrier(q, NULL, sig2);
  if (!later) later = hl_semaphore_wait(s2, 1, MEM_DEADLINE());
  hl_fence_release(sig2);
  hl_test_assert_status_has(later, HL_STATUS_FAILED_PRECONDITION, NULL, NULL);

  hl_buffer_release(b);
  hl_semaphore_release(s2);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(d);
}

// Unchecked mode still refuses to touch freed memory on the host backend,
// failing only the submission.
static void test_use_after_free_unchecked_fails_submission(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
  mem_dealloca(q, NULL, 0, s, 1, b);
  mem_wait(s, 1);
  hl_fence_t* sig = hl_test_fence(s, 2);
  HL_ASSERT_OK(hl_queue_fill(q, NULL, sig, b, 0, 4, 0));
  hl_fence_release(sig);
  hl_test_assert_status_has(hl_semaphore_wait(s, 2, MEM_DEADLINE()),
                            HL_STATUS_FAILED_PRECONDITION, "queue_dealloca",
                            NULL);
  HL_ASSERT_OK(hl_queue_status(q));
  hl_buffer_release(b);
  // The queue still works.
  hl_buffer_t* c = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
  HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, c));
  hl_buffer_release(c);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(d);
}

// A buffer whose alloca failed (out of memory) or was cancelled (its wait
// failed) fails its users with the producer's status, naming both: a
// consumer reports why the memory never came, not only that it is missing.
static void test_use_of_failed_alloca_reports_its_failure(void** state) {
  (void)state;
  mem_device_config_t cfg = {.limit_bytes = 1024 * KIB};
  hl_device_t* d = mem_device_create(&cfg);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();

  // Out of memory: the fill behind it, in queue order, fails with it.
  hl_buffer_t* big = mem_alloca(q, NULL, 0, NULL, 0, 2048 * KIB);
  hl_fence_t* sig = hl_test_fence(s, 1);
  HL_ASSERT_OK(hl_queue_fill(q, NULL, sig, big, 0, 4, 0));
  hl_fence_release(sig);
  hl_status_t st = hl_semaphore_wait(s, 1, MEM_DEADLINE());
  hl_test_assert_status_has(st, HL_STATUS_RESOURCE_EXHAUSTED, "2097152",
                            "whose allocation failed");
  hl_buffer_release(big);
  hl_semaphore_release(s);

  // Cancelled: the alloca waits on a producer that fails.
  s = hl_test_semaphore_create();
  hl_semaphore_t* upstream = hl_test_semaphore_create();
  hl_buffer_t* b = mem_alloca(q, upstream, 1, NULL, 0, 4 * KIB);
  sig = hl_test_fence(s, 1);
  HL_ASSERT_OK(hl_queue_fill(q, NULL, sig, b, 0, 4, 0));
  hl_fence_release(sig);
  HL_ASSERT_OK(hl_semaphore_fail(
      upstream, HL_MAKE_STATUS(HL_STATUS_ABORTED, "upstream producer gone")));
  st = hl_semaphore_wait(s, 1, MEM_DEADLINE());
  hl_test_assert_status_has(st, HL_STATUS_ABORTED, "upstream producer gone",
                            "whose allocation failed");
  HL_ASSERT_OK(hl_queue_status(q));  // Only the submissions failed.
  hl_buffer_release(b);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  hl_semaphore_release(upstream);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(d);
}

static void wait_cancelled(hl_device_t* d, uint64_t count) {
  hl_time_t deadline = hl_deadline_after(5000 * MEM_MS);
  while (hl_test_memory_stats(d).deallocas_cancelled < count &&
         hl_time_now() < deadline) {
    hl_test_sleep_ms(1);
  }
  assert_int_equal(hl_test_memory_stats(d).deallocas_cancelled, count);
}

// Fills |b| with |pattern|, reads it back and checks every word.
static void fill_and_verify(hl_queue_t* q, hl_buffer_t* b, uint32_t pattern) {
  uint64_t n = hl_buffer_length(b);
  uint32_t* host = calloc(1, n);
  HL_ASSERT_OK(hl_queue_fill(q, NULL, NULL, b, 0, n, pattern));
  HL_ASSERT_OK(hl_queue_read(q, NULL, NULL, b, 0, host, n));
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  for (uint64_t i = 0; i < n / 4; ++i) assert_int_equal(host[i], pattern);
  free(host);
}

// The wait fails while the dealloca is parked (before issue).
static void test_dealloca_wait_fails_early(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  hl_semaphore_t* w = hl_test_semaphore_create();
  hl_buffer_t* b = mem_alloca(q, NULL, 0, s, 1, 16 * KIB);
  mem_wait(s, 1);
  void* ptr = hl_buffer_device_pointer(b);

  mem_dealloca(q, w, 1, s, 2, b);
  hl_semaphore_fail(w, HL_MAKE_STATUS(HL_STATUS_ABORTED, "producer gave up"));
  hl_test_assert_status_has(hl_semaphore_wait(s, 2, MEM_DEADLINE()),
                            HL_STATUS_ABORTED, "producer gave up", NULL);
  wait_cancelled(d, 1);
  assert_false(hl_buffer_is_freed(b));
  assert_ptr_equal(hl_buffer_device_pointer(b), ptr);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 16 * KIB);
  fill_and_verify(q, b, 0x12345678u);

  // A second dealloca is allowed and frees.
  HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, b));
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_true(hl_buffer_is_freed(b));
  hl_buffer_release(b);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  assert_int_equal(hl_test_memory_stats(d).fallback_releases_frontier, 0);
  hl_semaphore_release(w);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(d);
}

// The wait fails after the dealloca was issued behind a device wait (the
// free is gated in stream order).
static void test_dealloca_wait_fails_late(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  // The free is gated in stream order only where host functions can run
  // the memory layer's commands (host-visible memory).
  hl_test_require_host_visible(d);
  hl_queue_t* qa = hl_test_queue_create(d);
  hl_queue_t* qb = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  hl_semaphore_t* w = hl_test_semaphore_create();
  hl_buffer_t* b = mem_alloca(qa, NULL, 0, s, 1, 16 * KIB);
  mem_wait(s, 1);

  mem_gate_t gate;
  mem_gate_init(&gate, 0);
  hl_fence_t* wsig = hl_test_fence(w, 1);
  HL_ASSERT_OK(hl_queue_host_call(qb, NULL, wsig, mem_gate_fn, &gate));
  hl_fence_release(wsig);
  assert_true(mem_poll_atomic(&gate.started, 1, 10000));
  mem_dealloca(qa, w, 1, s, 2, b);
  hl_test_sleep_ms(10);
  assert_false(hl_buffer_is_freed(b));
  hl_semaphore_fail(w, HL_MAKE_STATUS(HL_STATUS_CANCELLED, "late failure"));
  mem_gate_open(&gate);
  hl_test_assert_status_has(hl_semaphore_wait(s, 2, MEM_DEADLINE()),
                            HL_STATUS_CANCELLED, "late failure", NULL);
  hl_status_ignore(hl_device_wait_idle(d, MEM_DEADLINE()));  // qa failed one.
  wait_cancelled(d, 1);
  assert_false(hl_buffer_is_freed(b));
  fill_and_verify(qa, b, 0xCAFEF00Du);
  HL_ASSERT_OK(hl_queue_dealloca(qa, NULL, NULL, b));
  HL_ASSERT_OK(hl_queue_wait_idle(qa, MEM_DEADLINE()));
  assert_true(hl_buffer_is_freed(b));
  hl_buffer_release(b);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  assert_int_equal(atomic_load(&gate.timed_out), 0);
  hl_semaphore_release(w);
  hl_semaphore_release(s);
  hl_queue_release(qa);
  hl_queue_release(qb);
  hl_device_release(d);
}

// Contract (buffer.h): once a dealloca's wait has failed, "the buffer stays
// valid" and may be deallocated again. The flag that marks a dealloca as
// scheduled is only cleared when the op is released on the completion
// thread, after the signal has already been failed, so a caller that reacts
// to the failed signal races with it. 200 rounds make the race show.
static void test_dealloca_again_right_after_cancel(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  const int rounds = 200;
  int refused = 0;
  char first[512] = "";
  for (int i = 0; i < rounds; ++i) {
    hl_semaphore_t* s = hl_test_semaphore_create();
    hl_semaphore_t* w = hl_test_semaphore_create();
    hl_buffer_t* b = mem_alloca(q, NULL, 0, s, 1, 4 * KIB);
    mem_wait(s, 1);
    mem_dealloca(q, w, 1, s, 2, b);
    hl_semaphore_fail(w, HL_MAKE_STATUS(HL_STATUS_ABORTED, "gave up"));
    hl_test_assert_status_has(hl_semaphore_wait(s, 2, MEM_DEADLINE()),
                              HL_STATUS_ABORTED, NULL, NULL);
    hl_status_t again = hl_queue_dealloca(q, NULL, NULL, b);
    if (again) {
      if (!refused++) hl_status_format(again, first, sizeof(first));
      hl_status_free(again);
      wait_cancelled(d, (uint64_t)i + 1);
      HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, b));
    }
    HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
    wait_cancelled(d, (uint64_t)i + 1);
    assert_true(hl_buffer_is_freed(b));
    hl_buffer_release(b);
    hl_semaphore_release(w);
    hl_semaphore_release(s);
  }
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  hl_queue_release(q);
  hl_device_release(d);
  if (refused) {
    fail_msg(
        "%d of %d deallocas after an observed cancel were refused; "
        "first: %s",
        refused, rounds, first);
  }
}

static void test_double_dealloca(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_queue_t* q2 = hl_test_queue_create(d);
  hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
  hl_buffer_t* view = NULL;
  HL_ASSERT_OK(hl_buffer_subview(b, 0, 1 * KIB, &view));
  HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, b));
  // Pending: the same root through another handle or queue is refused.
  hl_test_assert_status_has(hl_queue_dealloca(q, NULL, NULL, b),
                            HL_STATUS_FAILED_PRECONDITION, "double dealloca",
                            NULL);
  HL_ASSERT_STATUS(hl_queue_dealloca(q2, NULL, NULL, view),
                   FAILED_PRECONDITION);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  // Done: still refused.
  HL_ASSERT_STATUS(hl_queue_dealloca(q, NULL, NULL, b), FAILED_PRECONDITION);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  HL_ASSERT_OK(hl_queue_status(q));
  hl_buffer_release(view);
  hl_buffer_release(b);
  hl_memory_stats_t st = hl_test_memory_stats(d);
  assert_int_equal(st.bytes_in_use, 0);
  assert_int_equal(st.allocas, 1);
  hl_queue_release(q2);
  hl_queue_release(q);
  hl_device_release(d);
}

typedef struct wrap_release_t {
  atomic_int calls;
  void* last_ptr;
} wrap_release_t;

static void wrap_release_fn(void* user, void* ptr) {
  wrap_release_t* r = (wrap_release_t*)user;
  r->last_ptr = ptr;
  atomic_fetch_add(&r->calls, 1);
}

static void run_wrap_dealloca(hl_fallback_mode_t mode) {
  mem_device_config_t cfg = {.fallback = mode};
  hl_device_t* d = mem_device_create(&cfg);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  const uint64_t n = 4 * KIB;
  uint32_t* memory = hl_test_device_visible_calloc(n);
  wrap_release_t rel = {.last_ptr = NULL};
  atomic_init(&rel.calls, 0);
  hl_buffer_t* b = NULL;
  HL_ASSERT_OK(hl_buffer_wrap(d, memory, n, wrap_release_fn, &rel, &b));
  assert_int_equal(hl_buffer_origin(b), HL_BUFFER_ORIGIN_EXTERNAL);
  assert_ptr_equal(hl_buffer_device_pointer(b), memory);

  // A fill held behind a gate, then the dealloca: a barrier, nothing freed.
  mem_gate_t gate;
  mem_gate_init(&gate, 0);
  mem_gate_submit(q, &gate);
  HL_ASSERT_OK(hl_queue_fill(q, NULL, NULL, b, 0, n, 0x5A5A5A5Au));
  mem_dealloca(q, NULL, 0, s, 1, b);
  mem_gate_open(&gate);
  mem_wait(s, 1);
  assert_int_equal(memory[n / 4 - 1], 0x5A5A5A5Au);
  assert_false(hl_buffer_is_freed(b));
  assert_int_equal(atomic_load(&rel.calls), 0);
  HL_ASSERT_STATUS(hl_queue_dealloca(q, NULL, NULL, b), FAILED_PRECONDITION);

  // Still usable through a view after the barrier.
  hl_buffer_t* view = NULL;
  HL_ASSERT_OK(hl_buffer_subview(b, 1 * KIB, 1 * KIB, &view));
  hl_buffer_release(b);
  HL_ASSERT_OK(hl_queue_fill(q, NULL, NULL, view, 0, 4, 0x11111111u));
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(memory[256], 0x11111111u);
  hl_test_sleep_ms(10);
  assert_int_equal(atomic_load(&rel.calls), 0);

  // The last release gives it back, once.
  hl_buffer_release(view);
  assert_true(mem_poll_atomic(&rel.calls, 1, 5000));
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  hl_test_sleep_ms(20);
  assert_int_equal(atomic_load(&rel.calls), 1);
  assert_ptr_equal(rel.last_ptr, memory);
  // External memory is never pool memory.
  hl_memory_stats_t st = hl_test_memory_stats(d);
  assert_int_equal(st.allocas, 0);
  assert_int_equal(st.bytes_in_use, 0);
  assert_int_equal(atomic_load(&gate.timed_out), 0);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(d);
  assert_int_equal(atomic_load(&rel.calls), 1);
  hl_test_device_visible_free(memory);
}

static void test_wrap_dealloca_frontier(void** state) {
  (void)state;
  run_wrap_dealloca(HL_FALLBACK_FRONTIER);
}

static void test_wrap_dealloca_device_sync(void** state) {
  (void)state;
  run_wrap_dealloca(HL_FALLBACK_DEVICE_SYNC);
}

// A write whose backend call fails when it is issued leaves its bytes
// unwritten, so the queue cannot go on as if it had run: later submissions
// fail with the write's status instead of reading what is not there. Here
// the host backend refuses the fill (its destination is not 4-byte
// aligned). Found on an H200 through the HIP-on-CUDA bridge: CUDA refused a
// fill of pageable memory, and the submissions behind it reported success.
static void test_failed_write_fails_the_queue(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_test_require_host_visible(d);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  uint32_t* storage = calloc(17, 4);
  hl_buffer_t* b = NULL;
  HL_ASSERT_OK(hl_buffer_wrap(d, (char*)storage + 1, 64, NULL, NULL, &b));
  HL_ASSERT_OK(hl_queue_fill(q, NULL, NULL, b, 0, 64, 0x5A5A5A5Au));
  uint32_t word = 0x11111111u;
  hl_fence_t* sig = hl_test_fence(s, 1);
  hl_status_t st = hl_queue_read(q, NULL, sig, b, 0, &word, 4);
  hl_fence_release(sig);
  if (hl_status_is_ok(st)) st = hl_semaphore_wait(s, 1, MEM_DEADLINE());
  hl_test_assert_status_has(st, HL_STATUS_INVALID_ARGUMENT, "memset32_async",
                            NULL);
  assert_int_equal(word, 0x11111111u);  // Nothing was read.
  hl_test_assert_status_has(hl_queue_status(q), HL_STATUS_INVALID_ARGUMENT,
                            "memset32_async", NULL);
  hl_buffer_release(b);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(d);
  free(storage);
}

static void test_wrap_bad_input(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  char memory[64];
  hl_buffer_t* b = NULL;
  HL_ASSERT_STATUS(hl_buffer_wrap(NULL, memory, 64, NULL, NULL, &b),
                   INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_buffer_wrap(d, NULL, 64, NULL, NULL, &b),
                   INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_buffer_wrap(d, memory, 0, NULL, NULL, &b),
                   INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_buffer_wrap(d, memory, 64, NULL, NULL, NULL),
                   INVALID_ARGUMENT);
  // A NULL release_fn is allowed.
  HL_ASSERT_OK(hl_buffer_wrap(d, memory, 64, NULL, NULL, &b));
  hl_buffer_release(b);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  hl_device_release(d);
}

// A root's mutation barrier (hl_buffer_mutation_barrier: what a reader
// waits for) keeps every queue's last write. Found by fuzz_api (CI,
// 2026-11-27): a write on queue 1 still parked on a gate, then a write on
// queue 2 that waits on a failed semaphore (cancelled, and not ordered after
// the first) cleared the barrier down to its own entry, so a read joined
// with the barrier ran before queue 1's fill and saw the old bytes.
static void test_racing_write_keeps_mutation_barrier(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q0 = hl_test_queue_create(d);
  hl_queue_t* q1 = hl_test_queue_create(d);
  hl_queue_t* q2 = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  hl_semaphore_t* gate = hl_test_semaphore_create();
  hl_semaphore_t* failed = hl_test_semaphore_create();
  hl_semaphore_t* r = hl_test_semaphore_create();
  const uint64_t size = 64;
  hl_buffer_t* b = mem_alloca(q0, NULL, 0, NULL, 0, size);
  hl_fence_t* f = hl_test_fence(s, 1);
  HL_ASSERT_OK(hl_queue_fill(q0, NULL, f, b, 0, size, 0x11111111u));
  hl_fence_release(f);
  mem_wait(s, 1);

  // Queue 1 overwrites it once the gate opens.
  hl_fence_t* w = hl_test_fence(gate, 1);
  HL_ASSERT_OK(hl_buffer_use_fence(b, w));
  HL_ASSERT_OK(hl_queue_fill(q1, w, NULL, b, 0, size, 0x22222222u));
  hl_fence_release(w);
  // Queue 2's write waits on a failed semaphore: cancelled.
  HL_ASSERT_OK(hl_semaphore_fail(
      failed, HL_MAKE_STATUS(HL_STATUS_ABORTED, "injected by the test")));
  w = hl_test_fence(failed, 1);
  HL_ASSERT_OK(hl_queue_fill(q2, w, NULL, b, 0, size, 0xdeadu));
  hl_fence_release(w);

  // A reader of the last write waits for queue 1's fill too.
  uint32_t host[16];
  memset(host, 0, sizeof(host));
  w = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &w));
  HL_ASSERT_OK(hl_buffer_mutation_barrier(b, w));
  f = hl_test_fence(r, 1);
  HL_ASSERT_OK(hl_queue_read(q0, w, f, b, 0, host, size));
  hl_fence_release(w);
  hl_fence_release(f);
  hl_test_assert_status_has(
      hl_semaphore_wait(r, 1, hl_deadline_after(100 * MEM_MS)),
      HL_STATUS_DEADLINE_EXCEEDED, NULL, NULL);
  HL_ASSERT_OK(hl_semaphore_signal(gate, 1));
  mem_wait(r, 1);
  for (int i = 0; i < 16; ++i) assert_int_equal(host[i], 0x22222222u);

  mem_dealloca(q0, NULL, 0, NULL, 0, b);
  hl_buffer_release(b);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  hl_semaphore_release(s);
  hl_semaphore_release(gate);
  hl_semaphore_release(failed);
  hl_semaphore_release(r);
  hl_queue_release(q0);
  hl_queue_release(q1);
  hl_queue_release(q2);
  hl_device_release(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_use_after_free_checked_fails_queue),
      cmocka_unit_test(test_use_after_free_unchecked_fails_submission),
      cmocka_unit_test(test_use_of_failed_alloca_reports_its_failure),
      cmocka_unit_test(test_dealloca_wait_fails_early),
      cmocka_unit_test(test_dealloca_wait_fails_late),
      cmocka_unit_test(test_dealloca_again_right_after_cancel),
      cmocka_unit_test(test_double_dealloca),
      cmocka_unit_test(test_wrap_dealloca_frontier),
      cmocka_unit_test(test_wrap_dealloca_device_sync),
      cmocka_unit_test(test_failed_write_fails_the_queue),
      cmocka_unit_test(test_wrap_bad_input),
      cmocka_unit_test(test_racing_write_keeps_mutation_barrier),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
