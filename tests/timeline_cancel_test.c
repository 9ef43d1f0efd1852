// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Conformance: work whose wait chain failed is never issued, on every
// backend. A chain of queues hangs off a head semaphore that fails before
// the chain is submitted, or while it is parked (submitted, not issued);
// the tail is a barrier, a fill, a copy, a write, a dispatch or a dealloca,
// waits on the chain alone or with other waits that succeed, and must leave
// its buffer as it was (a cancelled dealloca leaves it valid). The failure
// window that remains (a failure that becomes known after a device-side wait
// was issued) is described in include/hipline/queue.h.
//
// Also: a released, idle queue gives its stream back before
// hl_queue_release returns, so a create/release loop never runs into the
// backend's stream limit.

#include <string.h>

#include "hipline/dispatch.h"
#include "tests/memory_util.h"

#define BYTES ((uint64_t)4096)
#define KEEP ((uint32_t)0x5A5A5A5Au)

typedef enum tail_e {
  TAIL_BARRIER,
  TAIL_FILL,
  TAIL_COPY,
  TAIL_WRITE,
  TAIL_DISPATCH,
  TAIL_DEALLOCA,
  TAIL_COUNT
} tail_t;

static const char* const tail_names[TAIL_COUNT] = {
    "barrier", "fill", "copy", "write", "dispatch", "dealloca"};

typedef enum when_e {
  WHEN_BEFORE_SUBMIT,  // The head fails before anything is submitted.
  WHEN_PARKED,         // The chain is submitted (parked), then the head fails.
} when_t;

typedef struct chain_t {
  hl_device_t* device;
  hl_queue_t* q[4];  // q[0..2]: the chain; q[3]: setup and checks.
  hl_semaphore_t* head;
  hl_semaphore_t* links[3];
  hl_semaphore_t* ok;    // Reached by a successful barrier.
  hl_semaphore_t* done;  // Setup and checks on q[3].
  uint64_t done_value;
  hl_buffer_t* target;  // Holds KEEP.
  hl_buffer_t* source;  // Holds something else (copies).
} chain_t;

static void chain_sync(chain_t* c) { mem_wait(c->done, c->done_value); }

static hl_fence_t* next_done(chain_t* c) {
  return hl_test_fence(c->done, ++c->done_value);
}

static void fill_on_setup(chain_t* c, hl_buffer_t* b, uint32_t pattern) {
  hl_fence_t* s = next_done(c);
  HL_ASSERT_OK(hl_queue_fill(c->q[3], NULL, s, b, 0, BYTES, pattern));
  hl_fence_release(s);
  chain_sync(c);
}

static void chain_init(chain_t* c) {
  memset(c, 0, sizeof(*c));
  c->device = mem_device_create(NULL);
  for (int i = 0; i < 4; ++i) c->q[i] = hl_test_queue_create(c->device);
  c->head = hl_test_semaphore_create();
  for (int i = 0; i < 3; ++i) c->links[i] = hl_test_semaphore_create();
  c->ok = hl_test_semaphore_create();
  c->done = hl_test_semaphore_create();
  c->target = mem_alloca(c->q[3], NULL, 0, NULL, 0, BYTES);
  c->source = mem_alloca(c->q[3], NULL, 0, NULL, 0, BYTES);
  fill_on_setup(c, c->target, KEEP);
  fill_on_setup(c, c->source, 0x11111111u);
}

static void chain_deinit(chain_t* c) {
  for (int i = 0; i < 4; ++i) {
    HL_ASSERT_OK(hl_queue_wait_idle(c->q[i], MEM_DEADLINE()));
  }
  mem_dealloca(c->q[3], NULL, 0, NULL, 0, c->source);
  if (!hl_buffer_is_freed(c->target)) {
    mem_dealloca(c->q[3], NULL, 0, NULL, 0, c->target);
  }
  hl_buffer_release(c->source);
  hl_buffer_release(c->target);
  HL_ASSERT_OK(hl_queue_wait_idle(c->q[3], MEM_DEADLINE()));
  assert_int_equal(hl_test_memory_stats(c->device).bytes_in_use, 0);
  for (int i = 0; i < 4; ++i) hl_queue_release(c->q[i]);
  hl_semaphore_release(c->head);
  for (int i = 0; i < 3; ++i) hl_semaphore_release(c->links[i]);
  hl_semaphore_release(c->ok);
  hl_semaphore_release(c->done);
  hl_device_release(c->device);
}

static void fail_head(chain_t* c) {
  hl_semaphore_fail(c->head,
                    HL_MAKE_STATUS(HL_STATUS_UNAVAILABLE, "head op failed"));
}

// Submits |tail| on |q| after |wait|, signalling |signal|.
static void submit_tail(chain_t* c, tail_t tail, hl_queue_t* q,
                        hl_fence_t* wait, hl_fence_t* signal,
                        uint32_t* host_source) {
  switch (tail) {
    case TAIL_BARRIER:
      HL_ASSERT_OK(hl_queue_barrier(q, wait, signal));
      break;
    case TAIL_FILL:
      HL_ASSERT_OK(hl_queue_fill(q, wait, signal, c->target, 0, BYTES, 0xBAD));
      break;
    case TAIL_COPY:
      HL_ASSERT_OK(
          hl_queue_copy(q, wait, signal, c->source, 0, c->target, 0, BYTES));
      break;
    case TAIL_WRITE:
      HL_ASSERT_OK(
          hl_queue_write(q, wait, signal, host_source, c->target, 0, BYTES));
      break;
    case TAIL_DISPATCH:
      HL_ASSERT_OK(hl_queue_fill_pattern(q, wait, signal, c->target, 7));
      break;
    case TAIL_DEALLOCA:
      HL_ASSERT_OK(hl_queue_dealloca(q, wait, signal, c->target));
      break;
    default:
      fail();
  }
}

static void expect_failed_with_head(hl_semaphore_t* s, uint64_t v) {
  hl_status_t st = hl_semaphore_wait(s, v, MEM_DEADLINE());
  bool ok = hl_status_code(st) == HL_STATUS_UNAVAILABLE &&
            strstr(hl_status_message(st), "head op failed");
  char text[512];
  hl_status_format(st, text, sizeof(text));
  hl_status_free(st);
  if (!ok) fail_msg("expected the head's failure, got '%s'", text);
}

// The target still holds KEEP everywhere, and is still allocated.
static void expect_target_kept(chain_t* c, tail_t tail) {
  assert_false(hl_buffer_is_freed(c->target));
  uint32_t words[BYTES / 4];
  memset(words, 0, sizeof(words));
  hl_fence_t* s = next_done(c);
  HL_ASSERT_OK(hl_queue_read(c->q[3], NULL, s, c->target, 0, words, BYTES));
  hl_fence_release(s);
  chain_sync(c);
  for (size_t i = 0; i < BYTES / 4; ++i) {
    if (words[i] != KEEP) {
      fail_msg("%s: word %zu of the target is 0x%x after a cancelled chain",
               tail_names[tail], i, words[i]);
    }
  }
}

// q0 spins after the head, q1 (and q2 when |length| is 3) pass it on with a
// barrier, the last queue runs |tail|, with the ok semaphore as a second wait
// when |with_ok|.
static void run_chain(when_t when, tail_t tail, int length, bool with_ok) {
  chain_t c;
  chain_init(&c);
  uint32_t* host_source = calloc(BYTES / 4, sizeof(uint32_t));
  assert_non_null(host_source);
  memset(host_source, 0x33, BYTES);
  if (when == WHEN_BEFORE_SUBMIT) fail_head(&c);
  if (with_ok) {
    hl_fence_t* s = hl_test_fence(c.ok, 1);
    HL_ASSERT_OK(hl_queue_barrier(c.q[3], NULL, s));
    hl_fence_release(s);
  }
  hl_fence_t* w = hl_test_fence(c.head, 1);
  hl_fence_t* s = hl_test_fence(c.links[0], 1);
  HL_ASSERT_OK(hl_queue_spin(c.q[0], w, s, 1000));
  hl_fence_release(w);
  hl_fence_release(s);
  for (int i = 1; i < length - 1; ++i) {
    w = hl_test_fence(c.links[i - 1], 1);
    s = hl_test_fence(c.links[i], 1);
    HL_ASSERT_OK(hl_queue_barrier(c.q[i], w, s));
    hl_fence_release(w);
    hl_fence_release(s);
  }
  w = hl_test_fence(c.links[length - 2], 1);
  if (with_ok) HL_ASSERT_OK(hl_fence_insert(w, c.ok, 1));
  s = hl_test_fence(c.links[2], 1);
  submit_tail(&c, tail, c.q[length - 1], w, s, host_source);
  hl_fence_release(w);
  hl_fence_release(s);
  if (when == WHEN_PARKED) {
    hl_test_sleep_ms(2);  // Let the pumps park the chain.
    fail_head(&c);
  }
  for (int i = 0; i < length - 1; ++i) expect_failed_with_head(c.links[i], 1);
  expect_failed_with_head(c.links[2], 1);
  for (int i = 0; i < 3; ++i) {
    HL_ASSERT_OK(hl_queue_wait_idle(c.q[i], MEM_DEADLINE()));
  }
  expect_target_kept(&c, tail);
  if (tail == TAIL_DEALLOCA) {
    // Cancelled: the buffer is valid and may be deallocated again.
    hl_fence_t* d = next_done(&c);
    HL_ASSERT_OK(hl_queue_dealloca(c.q[3], NULL, d, c.target));
    hl_fence_release(d);
    chain_sync(&c);
    assert_true(hl_buffer_is_freed(c.target));
  }
  // A failed wait fails the submissions, not the queues.
  for (int i = 0; i < 4; ++i) {
    hl_status_t st = hl_queue_status(c.q[i]);
    assert_null(st);
    hl_status_free(st);
  }
  chain_deinit(&c);
  free(host_source);
}

static void run_every_tail(when_t when, int length, bool with_ok) {
  for (int t = 0; t < TAIL_COUNT; ++t) {
    run_chain(when, (tail_t)t, length, with_ok);
  }
}

static void test_head_failed_before_submit_three_queues(void** state) {
  (void)state;
  run_every_tail(WHEN_BEFORE_SUBMIT, 3, false);
}

static void test_head_failed_before_submit_two_queues(void** state) {
  (void)state;
  run_every_tail(WHEN_BEFORE_SUBMIT, 2, false);
}

static void test_head_failed_while_parked_three_queues(void** state) {
  (void)state;
  run_every_tail(WHEN_PARKED, 3, false);
}

static void test_head_failed_while_parked_two_queues(void** state) {
  (void)state;
  run_every_tail(WHEN_PARKED, 2, false);
}

// A fence with several waits, one of which fails: the others succeeding
// does not let the work run.
static void test_one_failed_wait_among_several(void** state) {
  (void)state;
  run_every_tail(WHEN_BEFORE_SUBMIT, 3, true);
  run_every_tail(WHEN_PARKED, 2, true);
}

// A submission whose own wait failed at submit (no chain) issues nothing
// either, and its signal, waited on device-side by nobody, fails.
static void test_failed_wait_on_same_queue_as_tail(void** state) {
  (void)state;
  chain_t c;
  chain_init(&c);
  fail_head(&c);
  hl_fence_t* w = hl_test_fence(c.head, 1);
  hl_fence_t* s = hl_test_fence(c.links[0], 1);
  HL_ASSERT_OK(hl_queue_spin(c.q[0], w, s, 1000));
  hl_fence_release(w);
  hl_fence_release(s);
  // Same queue, ordered after the failed one by the queue and by the fence.
  w = hl_test_fence(c.links[0], 1);
  s = hl_test_fence(c.links[2], 1);
  HL_ASSERT_OK(hl_queue_fill(c.q[0], w, s, c.target, 0, BYTES, 0xBAD));
  hl_fence_release(w);
  hl_fence_release(s);
  expect_failed_with_head(c.links[2], 1);
  HL_ASSERT_OK(hl_queue_wait_idle(c.q[0], MEM_DEADLINE()));
  expect_target_kept(&c, TAIL_FILL);
  chain_deinit(&c);
}

//===----------------------------------------------------------------------===//
// Released queues give their streams back
//===----------------------------------------------------------------------===//

static int64_t live_streams(hl_device_t* device) {
  hl_backend_counts_t counts;
  device->backend->vtable->live_counts(device->backend, &counts);
  return counts.live_streams;
}

// Each queue allocates, fills and frees a buffer whose handle the test drops
// at once (the last reference to it is the submissions', dropped by their
// clean-up), the test waits for the free's signal (not for the queue to be
// idle) and releases the queue: by then it is idle, and its stream must be
// gone when hl_queue_release returns. More iterations than the hip test
// runtime has streams (HL_HIP_TEST_RUNTIME_MAX_STREAMS in
// tests/timeline.cmake), so late streams would make hipStreamCreate fail.
static void test_released_queue_gives_stream_back(void** state) {
  (void)state;
  hl_device_t* device = mem_device_create(NULL);
  hl_semaphore_t* s = hl_test_semaphore_create();
  int64_t base = live_streams(device);
  for (uint64_t i = 1; i <= 96; ++i) {
    hl_queue_t* q = NULL;
    HL_ASSERT_OK(hl_queue_create(device, &q));
    assert_int_equal(live_streams(device), base + 1);
    hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, BYTES);
    HL_ASSERT_OK(hl_queue_fill(q, NULL, NULL, b, 0, BYTES, (uint32_t)i));
    mem_dealloca(q, NULL, 0, s, i, b);
    hl_buffer_release(b);
    mem_wait(s, i);
    hl_queue_release(q);
    assert_int_equal(live_streams(device), base);
  }
  hl_semaphore_release(s);
  hl_device_release(device);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_head_failed_before_submit_three_queues),
      cmocka_unit_test(test_head_failed_before_submit_two_queues),
      cmocka_unit_test(test_head_failed_while_parked_three_queues),
      cmocka_unit_test(test_head_failed_while_parked_two_queues),
      cmocka_unit_test(test_one_failed_wait_among_several),
      cmocka_unit_test(test_failed_wait_on_same_queue_as_tail),
      cmocka_unit_test(test_released_queue_gives_stream_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
