// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The fallback release (a root's last buffer goes without a dealloca) on the
// test backend (tests/test_util.h), in checked mode where the backend has it:
// escape tracking, the ORDERED default (a
// queue-ordered free after every recorded use, never early) with uses on
// several queues, an invocation on another queue, subviews and releases
// racing with in-flight work; DEVICE_SYNC drains on the releasing thread and
// never on the completion thread; HIPLINE_FALLBACK parsing.
//
// Every hazard test holds the last use back behind a gate on another queue,
// releases the buffer, then lets the use run and reads the data back: an
// early free would show in bytes_in_use and the release counts, and in
// checked mode also as a use-after-free (counted and failing the queue) and
// poisoned data.

#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "hipline/invocation.h"
#include "tests/memory_util.h"

#define KIB ((uint64_t)1024)
#define WORDS(bytes) ((size_t)((bytes) / 4))

// A device in checked mode where the backend has it (set_poison: the host
// backend); elsewhere (hip) it runs unchecked, and an early free shows only
// in the counts, bytes_in_use and the data read back.
static hl_device_t* fb_device(hl_fallback_mode_t mode) {
  mem_device_config_t cfg = {.fallback = mode, .checked = 1};
  hl_device_t* d = mem_device_create(&cfg);
  assert_int_equal(hl_device_fallback_mode(d), mode);
  assert_int_equal(hl_device_checked(d),
                   d->backend->vtable->set_poison != NULL);
  return d;
}

// Reads |b| back on |q| and checks every word is |pattern|.
static void fb_expect_pattern(hl_queue_t* q, hl_buffer_t* b, uint64_t bytes,
                              uint32_t pattern) {
  uint32_t* host = calloc(WORDS(bytes), sizeof(uint32_t));
  assert_non_null(host);
  hl_semaphore_t* s = hl_test_semaphore_create();
  hl_fence_t* sig = hl_test_fence(s, 1);
  HL_ASSERT_OK(hl_queue_read(q, NULL, sig, b, 0, host, bytes));
  mem_wait(s, 1);
  size_t bad = 0;
  for (size_t i = 0; i < WORDS(bytes); ++i) bad += host[i] != pattern;
  assert_int_equal(bad, 0);
  hl_fence_release(sig);
  hl_semaphore_release(s);
  free(host);
}

static void fb_expect_clean(hl_device_t* d) {
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  assert_true(hl_test_poll_bytes_in_use(d, 0, 10000));
  hl_memory_stats_t m = hl_test_memory_stats(d);
  assert_int_equal(m.use_after_free, 0);
}

//===----------------------------------------------------------------------===//
// Escape
//===----------------------------------------------------------------------===//

static void test_escape_is_sticky_and_counted(void** state) {
  (void)state;
  hl_device_t* d = fb_device(HL_FALLBACK_ORDERED);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  hl_buffer_t* b = mem_alloca(q, NULL, 0, s, 1, 4 * KIB);
  hl_buffer_t* view = NULL;
  HL_ASSERT_OK(hl_buffer_subview(b, 1024, 1024, &view));
  mem_wait(s, 1);
  assert_false(hl_buffer_is_escaped(b));
  assert_false(hl_buffer_is_escaped(view));
  assert_false(hl_buffer_is_escaped(NULL));
  // hipline operations keep the root un-escaped.
  HL_ASSERT_OK(hl_queue_fill(q, NULL, NULL, b, 0, 4 * KIB, 0x1234u));
  assert_false(hl_buffer_is_escaped(b));
  assert_int_equal(hl_test_memory_stats(d).escaped_roots, 0);

  // Handing the address of one view out escapes the root (every view).
  assert_non_null(hl_buffer_device_pointer(view));
  assert_true(hl_buffer_is_escaped(view));
  assert_true(hl_buffer_is_escaped(b));
  assert_non_null(hl_buffer_device_pointer(b));
  hl_memory_stats_t m = hl_test_memory_stats(d);
  assert_int_equal(m.escaped_roots, 1);  // Once per root.
  assert_int_equal(mem_queue_stats(q).escaped_roots, 1);

  // Released without a dealloca, the escaped root takes the frontier path.
  hl_buffer_release(view);
  hl_buffer_release(b);
  fb_expect_clean(d);
  m = hl_test_memory_stats(d);
  assert_int_equal(m.fallback_releases_frontier, 1);
  assert_int_equal(m.fallback_releases_ordered, 0);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(d);
}

static atomic_int fb_wrap_released_;
static void fb_wrap_release(void* user, void* ptr) {
  (void)ptr;
  free(user);
  atomic_fetch_add(&fb_wrap_released_, 1);
}

static void test_wrap_is_escaped(void** state) {
  (void)state;
  hl_device_t* d = fb_device(HL_FALLBACK_ORDERED);
  void* memory = calloc(1, 4 * KIB);
  hl_buffer_t* b = NULL;
  atomic_store(&fb_wrap_released_, 0);
  HL_ASSERT_OK(hl_buffer_wrap(d, memory, 4 * KIB, fb_wrap_release, memory, &b));
  assert_true(hl_buffer_is_escaped(b));
  assert_int_equal(hl_test_memory_stats(d).escaped_roots, 1);
  hl_buffer_release(b);
  assert_true(mem_poll_atomic(&fb_wrap_released_, 1, 10000));
  hl_memory_stats_t m = hl_test_memory_stats(d);
  assert_int_equal(m.fallback_releases_frontier, 1);
  assert_int_equal(m.fallback_releases_ordered, 0);
  hl_device_release(d);
}

// A NULL address (alloca not issued yet) hands nothing out.
static void test_pending_pointer_does_not_escape(void** state) {
  (void)state;
  hl_device_t* d = fb_device(HL_FALLBACK_ORDERED);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* h = hl_test_semaphore_create();
  hl_buffer_t* b = mem_alloca(q, h, 1, NULL, 0, 4 * KIB);
  assert_null(hl_buffer_device_pointer(b));
  assert_false(hl_buffer_is_escaped(b));
  HL_ASSERT_OK(hl_semaphore_signal(h, 1));
  hl_buffer_release(b);
  fb_expect_clean(d);
  hl_memory_stats_t m = hl_test_memory_stats(d);
  assert_int_equal(m.escaped_roots, 0);
  assert_int_equal(m.fallback_releases_ordered, 1);
  hl_semaphore_release(h);
  hl_queue_release(q);
  hl_device_release(d);
}

//===----------------------------------------------------------------------===//
// Ordered: never early
//===----------------------------------------------------------------------===//

// The root is used on its own queue and, behind a held gate, by a copy on a
// second queue; the last buffer goes while that copy waits. The release must
// not block (the gate is held), and the free must wait for the copy.
static void ordered_in_flight_case(bool use_subview, bool escape) {
  hl_device_t* d = fb_device(HL_FALLBACK_ORDERED);
  assert_int_equal(hl_device_fallback_mode(d), HL_FALLBACK_ORDERED);
  hl_queue_t* q0 = hl_test_queue_create(d);
  hl_queue_t* q1 = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  const uint64_t bytes = 16 * KIB;

  hl_buffer_t* src = mem_alloca(q0, NULL, 0, NULL, 0, bytes);
  hl_fence_t* filled = hl_test_fence(s, 1);
  HL_ASSERT_OK(hl_queue_fill(q0, NULL, filled, src, 0, bytes, 0xC0FFEE00u + 7));
  hl_buffer_t* dst = mem_alloca(q1, NULL, 0, NULL, 0, bytes);
  mem_gate_t gate;
  mem_gate_init(&gate, 0);
  mem_gate_submit(q1, &gate);
  hl_buffer_t* used = src;
  if (escape) {
    mem_wait(s, 1);  // Issued: the address exists.
    assert_non_null(hl_buffer_device_pointer(src));
  }
  if (use_subview) {
    // Only a subview is left when the copy is submitted.
    HL_ASSERT_OK(hl_buffer_subview(src, 0, bytes, &used));
    hl_buffer_release(src);
  }
  HL_ASSERT_OK(hl_queue_copy(q1, filled, NULL, used, 0, dst, 0, bytes));
  hl_fence_release(filled);
  // More work on the source's own queue after the copy was submitted.
  mem_gate_t gate0;
  mem_gate_init(&gate0, 0);
  mem_gate_submit(q0, &gate0);

  uint64_t in_use = hl_test_memory_stats(d).bytes_in_use;
  hl_buffer_release(used);  // The last buffer: copy and gates in flight.
  hl_memory_stats_t m = hl_test_memory_stats(d);
  // An escaped root takes the frontier path; neither frees early.
  assert_int_equal(m.fallback_releases_ordered, escape ? 0 : 1);
  assert_int_equal(m.fallback_releases_frontier, escape ? 1 : 0);
  assert_int_equal(m.bytes_in_use, in_use);  // Not freed yet.
  assert_false(atomic_load(&gate.done));     // Nobody waited for the gate.

  mem_gate_open(&gate0);
  mem_gate_open(&gate);
  fb_expect_pattern(q1, dst, bytes, 0xC0FFEE00u + 7);
  assert_false(atomic_load(&gate.timed_out));
  assert_false(atomic_load(&gate0.timed_out));
  HL_ASSERT_OK(hl_queue_status(q0));
  HL_ASSERT_OK(hl_queue_status(q1));
  hl_buffer_release(dst);
  fb_expect_clean(d);
  m = hl_test_memory_stats(d);
  assert_int_equal(m.fallback_releases_ordered, escape ? 1 : 2);
  assert_int_equal(m.deallocas, escape ? 1 : 2);
  hl_semaphore_release(s);
  hl_queue_release(q0);
  hl_queue_release(q1);
  hl_device_release(d);
}

static void test_ordered_waits_for_other_queue(void** state) {
  (void)state;
  ordered_in_flight_case(false, false);
}

static void test_escaped_root_waits_for_other_queue(void** state) {
  (void)state;
  ordered_in_flight_case(false, true);
}

static void test_ordered_waits_for_subview_use(void** state) {
  (void)state;
  ordered_in_flight_case(true, false);
}

// The default mode (no option, no HIPLINE_FALLBACK) is ordered.
static void test_ordered_is_default(void** state) {
  (void)state;
  unsetenv("HIPLINE_FALLBACK");
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = hl_test_backend_kind();
  hl_device_t* d = NULL;
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  assert_int_equal(hl_device_fallback_mode(d), HL_FALLBACK_ORDERED);
  assert_string_equal(hl_fallback_mode_name(HL_FALLBACK_ORDERED), "ordered");
  hl_device_release(d);
}

static void test_env_fallback_values(void** state) {
  (void)state;
  static const struct {
    const char* value;
    hl_fallback_mode_t mode;
  } kCases[] = {{"ordered", HL_FALLBACK_ORDERED},
                {"frontier", HL_FALLBACK_FRONTIER},
                {"device-sync", HL_FALLBACK_DEVICE_SYNC}};
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = hl_test_backend_kind();
  for (size_t i = 0; i < sizeof(kCases) / sizeof(kCases[0]); ++i) {
    setenv("HIPLINE_FALLBACK", kCases[i].value, 1);
    hl_device_t* d = NULL;
    HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
    assert_int_equal(hl_device_fallback_mode(d), kCases[i].mode);
    hl_device_release(d);
  }
  static const char* const kBad[] = {"order", "ordered ", "2",
                                     "frontier,ordered"};
  for (size_t i = 0; i < sizeof(kBad) / sizeof(kBad[0]); ++i) {
    setenv("HIPLINE_FALLBACK", kBad[i], 1);
    hl_device_t* d = NULL;
    hl_status_t st = hl_device_create(&o, hl_allocator_system(), &d);
    assert_null(d);
    hl_test_assert_status_has(st, HL_STATUS_INVALID_ARGUMENT,
                              "HIPLINE_FALLBACK", "ordered");
  }
  unsetenv("HIPLINE_FALLBACK");
  o.fallback = (hl_fallback_mode_t)4;
  hl_device_t* d = NULL;
  hl_test_assert_status_has(hl_device_create(&o, hl_allocator_system(), &d),
                            HL_STATUS_INVALID_ARGUMENT, "ordered", NULL);
  assert_null(d);
}

// A function that fills its argument on the invocation's queue, after the
// invocation's wait fence (held back by a gate on that queue).
static hl_status_t fb_fill_fn(void* user, hl_queue_t* queue,
                              hl_buffer_t* const* arguments,
                              size_t argument_count,
                              const hl_fence_t* wait_fence,
                              const hl_fence_t* signal_fence,
                              hl_buffer_t** out_results, size_t result_count) {
  (void)user;
  (void)argument_count;
  (void)out_results;
  (void)result_count;
  return hl_queue_fill(queue, wait_fence, signal_fence, arguments[0], 0,
                       hl_buffer_length(arguments[0]), 0xABCD0123u);
}

// The root's last use is an invocation on another queue; the caller drops
// every reference (buffer and invocation) before the invocation runs.
static void test_ordered_waits_for_invocation_on_other_queue(void** state) {
  (void)state;
  hl_device_t* d = fb_device(HL_FALLBACK_ORDERED);
  hl_queue_t* q0 = hl_test_queue_create(d);
  hl_queue_t* q1 = hl_test_queue_create(d);
  const uint64_t bytes = 8 * KIB;
  static const hl_access_t kAccess[] = {HL_ACCESS_READ_WRITE};
  hl_function_signature_t sig = {1, 0, kAccess};
  hl_function_t* f = NULL;
  HL_ASSERT_OK(hl_function_create("fallback.fill", &sig, fb_fill_fn, NULL,
                                  hl_allocator_system(), &f));
  hl_buffer_t* b = mem_alloca(q0, NULL, 0, NULL, 0, bytes);
  hl_buffer_t* keep = mem_alloca(q1, NULL, 0, NULL, 0, bytes);

  mem_gate_t gate;
  mem_gate_init(&gate, 0);
  mem_gate_submit(q1, &gate);
  hl_invocation_t* inv = NULL;
  HL_ASSERT_OK(hl_invocation_create(f, q1, &inv));
  HL_ASSERT_OK(hl_invocation_add_argument(inv, b));
  HL_ASSERT_OK(hl_invocation_invoke(inv));
  // Copy the result out on q1 after the invocation (in queue order).
  HL_ASSERT_OK(hl_queue_copy(q1, NULL, NULL, b, 0, keep, 0, bytes));
  hl_invocation_release(inv);
  hl_buffer_release(b);  // The last buffer; the invocation has not run.
  assert_int_equal(hl_test_memory_stats(d).fallback_releases_ordered, 1);
  assert_false(atomic_load(&gate.done));

  mem_gate_open(&gate);
  fb_expect_pattern(q1, keep, bytes, 0xABCD0123u);
  HL_ASSERT_OK(hl_queue_status(q0));
  HL_ASSERT_OK(hl_queue_status(q1));
  hl_buffer_release(keep);
  fb_expect_clean(d);
  hl_function_release(f);
  hl_queue_release(q0);
  hl_queue_release(q1);
  hl_device_release(d);
}

// A dealloca scheduled explicitly leaves nothing for the fallback.
static void test_ordered_skips_scheduled_dealloca(void** state) {
  (void)state;
  hl_device_t* d = fb_device(HL_FALLBACK_ORDERED);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
  mem_dealloca(q, NULL, 0, NULL, 0, b);
  hl_buffer_release(b);
  fb_expect_clean(d);
  hl_memory_stats_t m = hl_test_memory_stats(d);
  assert_int_equal(m.fallback_releases_ordered, 0);
  assert_int_equal(m.fallback_releases_frontier, 0);
  assert_int_equal(m.deallocas, 1);
  hl_queue_release(q);
  hl_device_release(d);
}

// The ordered free waits for a use that failed: it is cancelled, and the
// root, left with no reference, is freed the conservative way.
static void test_ordered_with_failed_use(void** state) {
  (void)state;
  hl_device_t* d = fb_device(HL_FALLBACK_ORDERED);
  hl_queue_t* q0 = hl_test_queue_create(d);
  hl_queue_t* q1 = hl_test_queue_create(d);
  hl_semaphore_t* h = hl_test_semaphore_create();
  hl_buffer_t* b = mem_alloca(q0, NULL, 0, NULL, 0, 4 * KIB);
  hl_fence_t* w = hl_test_fence(h, 1);
  HL_ASSERT_OK(hl_queue_fill(q1, w, NULL, b, 0, 4 * KIB, 1u));
  hl_fence_release(w);
  hl_buffer_release(b);
  assert_int_equal(hl_test_memory_stats(d).fallback_releases_ordered, 1);
  hl_semaphore_fail(h, HL_MAKE_STATUS(HL_STATUS_ABORTED, "test failure"));
  assert_true(hl_test_poll_bytes_in_use(d, 0, 10000));
  hl_memory_stats_t m = hl_test_memory_stats(d);
  // Either the failure reached the ordered free's wait (cancelled, then the
  // orphan's frontier release) or the failed fill's queue moved on.
  assert_int_equal(m.fallback_releases_frontier, m.deallocas_cancelled);
  assert_int_equal(m.use_after_free, 0);
  hl_semaphore_release(h);
  hl_queue_release(q0);
  hl_queue_release(q1);
  hl_device_release(d);
}

//===----------------------------------------------------------------------===//
// Releases racing with in-flight work (run under TSan and ASan)
//===----------------------------------------------------------------------===//

#define RACE_THREADS 4
#define RACE_ITERATIONS 150

typedef struct race_t {
  hl_device_t* device;
  hl_queue_t* queues[2];
  atomic_int failures;
} race_t;

typedef struct race_thread_t {
  race_t* race;
  int index;
} race_thread_t;

// Each round: alloca on one queue, fill there, copy on the other queue
// (through a subview half the time), drop the source's last buffer at once
// while the fill and the copy are in flight, then read the copy back.
static int race_main(void* arg) {
  race_thread_t* t = (race_thread_t*)arg;
  race_t* r = t->race;
  uint32_t rng = 0x9E3779B9u * (uint32_t)(t->index + 1);
  uint32_t host[256];
  hl_semaphore_t* s = hl_test_semaphore_create();
  uint64_t v = 0;
  for (int i = 0; i < RACE_ITERATIONS; ++i) {
    rng = rng * 1664525u + 1013904223u;
    int a = (rng >> 8) & 1;
    hl_queue_t* qa = r->queues[a];
    hl_queue_t* qb = r->queues[a ^ ((rng >> 9) & 1)];
    uint32_t pattern = rng | 1u;
    hl_buffer_t* src = NULL;
    hl_buffer_t* dst = NULL;
    hl_buffer_t* used = NULL;
    hl_fence_t* f1 = hl_test_fence(s, v + 1);
    hl_fence_t* f2 = hl_test_fence(s, v + 2);
    hl_fence_t* f3 = hl_test_fence(s, v + 3);
    v += 3;
    hl_status_t st = hl_queue_alloca(qa, NULL, NULL, sizeof(host), 0, &src);
    if (!st) st = hl_queue_alloca(qb, NULL, NULL, sizeof(host), 0, &dst);
    if (!st) st = hl_queue_fill(qa, NULL, f1, src, 0, sizeof(host), pattern);
    if (!st && (rng & 0x400)) {
      st = hl_buffer_subview(src, 0, sizeof(host), &used);
    } else if (!st) {
      hl_buffer_retain(src);
      used = src;
    }
    hl_buffer_release(src);
    if (!st) st = hl_queue_copy(qb, f1, f2, used, 0, dst, 0, sizeof(host));
    hl_buffer_release(used);  // The source's last buffer, work in flight.
    memset(host, 0, sizeof(host));
    if (!st) st = hl_queue_read(qb, f2, f3, dst, 0, host, sizeof(host));
    if (!st) st = hl_semaphore_wait(s, v, MEM_DEADLINE());
    for (size_t w = 0; !st && w < 256; ++w) {
      if (host[w] != pattern) {
        st = HL_MAKE_STATUS(HL_STATUS_DATA_LOSS, "word %zu", w);
      }
    }
    hl_buffer_release(dst);
    hl_fence_release(f1);
    hl_fence_release(f2);
    hl_fence_release(f3);
    if (st) {
      print_message("race thread %d round %d: %s\n", t->index, i,
                    hl_status_message(st));
      hl_status_free(st);
      atomic_fetch_add(&r->failures, 1);
      break;
    }
  }
  hl_semaphore_release(s);
  return 0;
}

static void race_case(hl_fallback_mode_t mode) {
  race_t r;
  r.device = fb_device(mode);
  r.queues[0] = hl_test_queue_create(r.device);
  r.queues[1] = hl_test_queue_create(r.device);
  atomic_init(&r.failures, 0);
  thrd_t threads[RACE_THREADS];
  race_thread_t args[RACE_THREADS];
  for (int i = 0; i < RACE_THREADS; ++i) {
    args[i].race = &r;
    args[i].index = i;
    assert_int_equal(thrd_create(&threads[i], race_main, &args[i]),
                     thrd_success);
  }
  for (int i = 0; i < RACE_THREADS; ++i) thrd_join(threads[i], NULL);
  assert_int_equal(atomic_load(&r.failures), 0);
  HL_ASSERT_OK(hl_queue_status(r.queues[0]));
  HL_ASSERT_OK(hl_queue_status(r.queues[1]));
  fb_expect_clean(r.device);
  hl_memory_stats_t m = hl_test_memory_stats(r.device);
  uint64_t rounds = (uint64_t)RACE_THREADS * RACE_ITERATIONS;
  assert_int_equal(m.allocas, 2 * rounds);
  uint64_t fallbacks = m.fallback_releases_ordered +
                       m.fallback_releases_frontier +
                       m.fallback_releases_device_sync;
  assert_int_equal(fallbacks, 2 * rounds);
  if (mode == HL_FALLBACK_ORDERED) {
    assert_int_equal(m.fallback_releases_ordered, 2 * rounds);
  }
  hl_queue_release(r.queues[0]);
  hl_queue_release(r.queues[1]);
  hl_device_release(r.device);
}

static void test_release_races_in_flight_work_ordered(void** state) {
  (void)state;
  race_case(HL_FALLBACK_ORDERED);
}

static void test_release_races_in_flight_work_device_sync(void** state) {
  (void)state;
  race_case(HL_FALLBACK_DEVICE_SYNC);
}

static void test_release_races_in_flight_work_frontier(void** state) {
  (void)state;
  race_case(HL_FALLBACK_FRONTIER);
}

//===----------------------------------------------------------------------===//
// Device-sync
//===----------------------------------------------------------------------===//

static hl_buffer_t* fb_owed_victim_;
static atomic_int fb_owed_released_;

// Runs where the wrapped buffer is freed: on the completion thread here.
static void fb_owed_release_fn(void* user, void* ptr) {
  (void)ptr;
  hl_test_device_visible_free(user);
  hl_buffer_release(fb_owed_victim_);
  atomic_store(&fb_owed_released_, 1);
}

// A device-sync release on hipline's completion thread must not drain there
// (it would stall every completion behind a busy queue): it owes the drain
// to the next host thread, and the memory still waits for its uses.
static void test_device_sync_never_drains_on_completion_thread(void** state) {
  (void)state;
  hl_device_t* d = fb_device(HL_FALLBACK_DEVICE_SYNC);
  hl_queue_t* q0 = hl_test_queue_create(d);
  hl_queue_t* q1 = hl_test_queue_create(d);
  hl_semaphore_t* h = hl_test_semaphore_create();
  atomic_store(&fb_owed_released_, 0);

  // W's last use waits on |h|: its device-sync release (this thread) drains,
  // finds that use not issued yet, and frees W once it has run, which
  // happens on the completion thread.
  // Memory the device can fill (pinned on hip: a GPU cannot fill pageable
  // memory, and that fill's failure would fail q0).
  void* memory = hl_test_device_visible_calloc(4 * KIB);
  hl_buffer_t* w = NULL;
  HL_ASSERT_OK(
      hl_buffer_wrap(d, memory, 4 * KIB, fb_owed_release_fn, memory, &w));
  hl_fence_t* wait_h = hl_test_fence(h, 1);
  HL_ASSERT_OK(hl_queue_fill(q0, wait_h, NULL, w, 0, 4 * KIB, 5u));
  hl_fence_release(wait_h);
  hl_buffer_release(w);
  assert_int_equal(atomic_load(&fb_owed_released_), 0);

  // B is busy on q1 behind a held gate; W's release callback drops B's last
  // buffer on the completion thread.
  // (q0 is held by W's fill: B lives on q2.)
  hl_queue_t* q2 = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  hl_buffer_t* b = mem_alloca(q2, NULL, 0, NULL, 0, 8 * KIB);
  hl_buffer_t* copy = mem_alloca(q1, NULL, 0, NULL, 0, 8 * KIB);
  hl_fence_t* filled = hl_test_fence(s, 1);
  HL_ASSERT_OK(hl_queue_fill(q2, NULL, filled, b, 0, 8 * KIB, 0x77777777u));
  mem_gate_t gate;
  mem_gate_init(&gate, 0);
  mem_gate_submit(q1, &gate);
  HL_ASSERT_OK(hl_queue_copy(q1, filled, NULL, b, 0, copy, 0, 8 * KIB));
  hl_fence_release(filled);
  fb_owed_victim_ = b;
  // Both allocas run when their streams get there: wait until they have, so
  // bytes_in_use below measures frees, not allocas still on the way.
  hl_time_t allocated_by = hl_deadline_after(10000 * MEM_MS);
  while (hl_test_memory_stats(d).bytes_in_use != 16 * KIB) {
    assert_true(hl_time_now() < allocated_by);
    hl_test_sleep_ms(1);
  }
  HL_ASSERT_OK(hl_semaphore_signal(h, 1));

  // Had the completion thread drained, it would sit behind the gate.
  assert_true(mem_poll_atomic(&fb_owed_released_, 1, 5000));
  hl_memory_stats_t m = hl_test_memory_stats(d);
  assert_int_equal(m.fallback_releases_device_sync, 2);
  assert_int_equal(m.fallback_device_sync_owed, 1);
  assert_int_equal(m.bytes_in_use, 16 * KIB);  // B is not freed early.

  mem_gate_open(&gate);
  // The next allocation on this thread pays the drain (or the backstop has
  // freed B already); either way B goes only after the copy.
  hl_buffer_t* next = mem_alloca(q2, NULL, 0, NULL, 0, 4 * KIB);
  fb_expect_pattern(q1, copy, 8 * KIB, 0x77777777u);
  assert_false(atomic_load(&gate.timed_out));
  HL_ASSERT_OK(hl_queue_status(q0));
  HL_ASSERT_OK(hl_queue_status(q1));
  HL_ASSERT_OK(hl_queue_status(q2));
  mem_dealloca(q2, NULL, 0, NULL, 0, next);
  hl_buffer_release(next);
  mem_dealloca(q1, NULL, 0, NULL, 0, copy);
  hl_buffer_release(copy);
  fb_expect_clean(d);
  hl_semaphore_release(h);
  hl_semaphore_release(s);
  hl_queue_release(q0);
  hl_queue_release(q1);
  hl_queue_release(q2);
  hl_device_release(d);
}

// A deferred release whose fence fails (a queue that used the memory
// failed) must not drain the device on the completion thread either: the
// failed queue's own stream says when it is done with the memory, and
// another queue held by the program is none of its business. Here q0's fill
// of W is refused (the host backend wants 4-byte alignment), which fails
// q0; q1, submitted to after the release, is held behind a gate that opens
// only after W's release is seen. Draining on the completion thread sat
// behind the gate (10 s); the release now waits for q0's stream only.
static atomic_int fb_failed_released_;
static void fb_failed_release_fn(void* user, void* ptr) {
  (void)user;
  (void)ptr;
  atomic_store(&fb_failed_released_, 1);
}

static void test_failed_use_release_does_not_drain_others(void** state) {
  (void)state;
  hl_fallback_mode_t modes[2] = {HL_FALLBACK_FRONTIER, HL_FALLBACK_DEVICE_SYNC};
  for (int m = 0; m < 2; ++m) {
    hl_device_t* d = fb_device(modes[m]);
    hl_test_require_host_visible(d);
    hl_queue_t* q0 = hl_test_queue_create(d);
    hl_queue_t* q1 = hl_test_queue_create(d);
    hl_semaphore_t* h = hl_test_semaphore_create();
    atomic_store(&fb_failed_released_, 0);
    uint32_t* storage = calloc(1025, 4);
    hl_buffer_t* w = NULL;
    HL_ASSERT_OK(hl_buffer_wrap(d, (char*)storage + 1, 4 * KIB,
                                fb_failed_release_fn, NULL, &w));
    // W's use waits on |h|, so the release defers (it cannot free yet).
    hl_fence_t* wait_h = hl_test_fence(h, 1);
    HL_ASSERT_OK(hl_queue_fill(q0, wait_h, NULL, w, 0, 4 * KIB, 5u));
    hl_fence_release(wait_h);
    hl_buffer_release(w);
    assert_int_equal(atomic_load(&fb_failed_released_), 0);
    // Held after the release: not part of what the release waits for.
    mem_gate_t gate;
    mem_gate_init(&gate, 0);
    mem_gate_submit(q1, &gate);
    HL_ASSERT_OK(hl_semaphore_signal(h, 1));  // The fill runs and fails q0.
    bool released = mem_poll_atomic(&fb_failed_released_, 1, 5000);
    mem_gate_open(&gate);
    assert_true(released);
    assert_false(atomic_load(&gate.timed_out));
    hl_test_assert_status_has(hl_queue_status(q0), HL_STATUS_INVALID_ARGUMENT,
                              "memset32_async", NULL);
    HL_ASSERT_OK(hl_queue_wait_idle(q1, MEM_DEADLINE()));
    HL_ASSERT_OK(hl_queue_status(q1));
    hl_semaphore_release(h);
    hl_queue_release(q0);
    hl_queue_release(q1);
    hl_device_release(d);
    free(storage);
  }
}

// On a host thread, device-sync drains every queue before it returns: the
// memory is free (and reusable) when hl_buffer_release returns.
static void test_device_sync_frees_before_release_returns(void** state) {
  (void)state;
  hl_device_t* d = fb_device(HL_FALLBACK_DEVICE_SYNC);
  hl_queue_t* q0 = hl_test_queue_create(d);
  hl_queue_t* q1 = hl_test_queue_create(d);
  hl_buffer_t* b = mem_alloca(q0, NULL, 0, NULL, 0, 8 * KIB);
  hl_buffer_t* copy = mem_alloca(q1, NULL, 0, NULL, 0, 8 * KIB);
  HL_ASSERT_OK(hl_queue_fill(q0, NULL, NULL, b, 0, 8 * KIB, 0x31u));
  mem_gate_t gate;
  mem_gate_init(&gate, 50);  // Busy for a while, then done.
  HL_ASSERT_OK(hl_queue_host_call(q1, NULL, NULL, mem_gate_fn, &gate));
  HL_ASSERT_OK(hl_queue_copy(q1, NULL, NULL, b, 0, copy, 0, 8 * KIB));
  hl_buffer_release(b);
  assert_true(atomic_load(&gate.done));  // The release drained q1.
  hl_memory_stats_t m = hl_test_memory_stats(d);
  assert_int_equal(m.bytes_in_use, 8 * KIB);  // Only |copy| is left.
  assert_int_equal(m.fallback_releases_device_sync, 1);
  assert_int_equal(m.fallback_device_sync_owed, 0);
  fb_expect_pattern(q1, copy, 8 * KIB, 0x31u);
  hl_buffer_release(copy);
  fb_expect_clean(d);
  hl_queue_release(q0);
  hl_queue_release(q1);
  hl_device_release(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_escape_is_sticky_and_counted),
      cmocka_unit_test(test_wrap_is_escaped),
      cmocka_unit_test(test_pending_pointer_does_not_escape),
      cmocka_unit_test(test_ordered_is_default),
      cmocka_unit_test(test_env_fallback_values),
      cmocka_unit_test(test_ordered_waits_for_other_queue),
      cmocka_unit_test(test_ordered_waits_for_subview_use),
      cmocka_unit_test(test_escaped_root_waits_for_other_queue),
      cmocka_unit_test(test_ordered_waits_for_invocation_on_other_queue),
      cmocka_unit_test(test_ordered_skips_scheduled_dealloca),
      cmocka_unit_test(test_ordered_with_failed_use),
      cmocka_unit_test(test_release_races_in_flight_work_ordered),
      cmocka_unit_test(test_release_races_in_flight_work_device_sync),
      cmocka_unit_test(test_release_races_in_flight_work_frontier),
      cmocka_unit_test(test_device_sync_never_drains_on_completion_thread),
      cmocka_unit_test(test_failed_use_release_does_not_drain_others),
      cmocka_unit_test(test_device_sync_frees_before_release_returns),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
