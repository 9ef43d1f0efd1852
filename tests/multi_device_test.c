// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Several devices in one process (backend-independent: 4 host devices, or
// 2+ devices of the hip test runtime): peer access, copies between devices
// (peer and staged), dispatches over another device's buffer, and the
// lifetime of a root used by another device's queue (a dealloca, an
// ordered fallback release and the reuse of its block wait for that use).

#include <stdatomic.h>
#include <stdlib.h>

#include "hipline/hipline.h"
// C11 threads on pthreads under TSan (see tests/test_util.h).
#define HL_TEST_C11_THREADS_SHIM 1
#include "tests/test_util.h"

#define DEADLINE() hl_deadline_after(20000 * HL_TEST_MS)
#define MAX_DEVICES 4
#define BYTES 4096

static int device_count(void) {
  hl_backend_info_t info;
  HL_ASSERT_OK(hl_backend_query(hl_test_backend_kind(), &info));
  return info.device_count < MAX_DEVICES ? info.device_count : MAX_DEVICES;
}

static void require_two_devices(void) {
  if (device_count() < 2) {
    print_message("skipped: needs 2 devices\n");
    skip();
  }
}

// The fallback mode of the devices make_device makes (DEFAULT: ordered).
static hl_fallback_mode_t fallback_mode_ = HL_FALLBACK_DEFAULT;

static hl_device_t* make_device(int ordinal, int checked) {
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = hl_test_backend_kind();
  o.ordinal = ordinal;
  o.checked = checked;
  o.fallback = fallback_mode_;
  hl_device_t* d = NULL;
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  return d;
}

static hl_buffer_t* alloc_sync(hl_queue_t* q, uint64_t size) {
  hl_buffer_t* b = NULL;
  HL_ASSERT_OK(hl_queue_alloca(q, NULL, NULL, size, 0, &b));
  HL_ASSERT_OK(hl_queue_wait_idle(q, DEADLINE()));
  return b;
}

// Mismatches of |b| against the pattern of |seed|, counted on |q|.
static uint32_t mismatches(hl_queue_t* q, hl_buffer_t* b, uint32_t seed) {
  hl_buffer_t* counter = alloc_sync(q, 4);
  HL_ASSERT_OK(hl_queue_fill(q, NULL, NULL, counter, 0, 4, 0));
  HL_ASSERT_OK(hl_queue_verify_pattern(q, NULL, NULL, b, seed, counter));
  uint32_t n = UINT32_MAX;
  HL_ASSERT_OK(hl_queue_read(q, NULL, NULL, counter, 0, &n, 4));
  HL_ASSERT_OK(hl_queue_wait_idle(q, DEADLINE()));
  hl_buffer_release(counter);
  return n;
}

typedef struct group_t {
  int count;
  hl_device_t* d[MAX_DEVICES];
  hl_queue_t* q[MAX_DEVICES];
} group_t;

static void group_init(group_t* g, int checked) {
  g->count = device_count();
  for (int i = 0; i < g->count; ++i) {
    g->d[i] = make_device(i, checked);
    g->q[i] = hl_test_queue_create(g->d[i]);
  }
}

static void group_enable(group_t* g) {
  HL_ASSERT_OK(hl_device_enable_peer_access(g->d, (size_t)g->count));
}

static void group_deinit(group_t* g) {
  for (int i = 0; i < g->count; ++i) {
    HL_ASSERT_OK(hl_queue_wait_idle(g->q[i], DEADLINE()));
    HL_ASSERT_OK(hl_queue_status(g->q[i]));
    hl_queue_release(g->q[i]);
  }
  for (int i = 0; i < g->count; ++i) hl_device_release(g->d[i]);
}

static hl_device_peer_stats_t peer_stats(hl_device_t* d) {
  hl_device_peer_stats_t s;
  hl_device_peer_stats(d, &s);
  return s;
}

static void test_peer_query_and_enable(void** state) {
  (void)state;
  require_two_devices();
  group_t g;
  group_init(&g, 0);
  bool can = false;
  HL_ASSERT_OK(hl_device_can_access_peer(g.d[0], g.d[0], &can));
  assert_true(can);
  assert_true(hl_device_peer_access_enabled(g.d[0], g.d[0]));
  HL_ASSERT_OK(hl_device_can_access_peer(g.d[0], g.d[1], &can));
  assert_true(can);  // Every pair, unless the environment says otherwise.
  assert_false(hl_device_peer_access_enabled(g.d[0], g.d[1]));
  HL_ASSERT_STATUS(hl_device_can_access_peer(NULL, g.d[1], &can),
                   INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_device_can_access_peer(g.d[0], g.d[1], NULL),
                   INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_device_enable_peer_access(NULL, 2), INVALID_ARGUMENT);
  hl_device_t* with_null[2] = {g.d[0], NULL};
  HL_ASSERT_STATUS(hl_device_enable_peer_access(with_null, 2),
                   INVALID_ARGUMENT);
  HL_ASSERT_OK(hl_device_enable_peer_access(g.d, 1));  // One device: nothing.
  assert_false(hl_device_peer_access_enabled(g.d[0], g.d[1]));
  group_enable(&g);
  group_enable(&g);  // Twice changes nothing.
  for (int i = 0; i < g.count; ++i) {
    for (int j = 0; j < g.count; ++j) {
      assert_true(hl_device_peer_access_enabled(g.d[i], g.d[j]));
    }
  }
  hl_device_peer_stats_t s = peer_stats(g.d[0]);
  assert_int_equal(s.peer_copies + s.staged_copies, 0);
  group_deinit(&g);
}

// A copy on device |to|'s queue from a buffer of |from| into one of |to|,
// and back into a fresh buffer of |from|: both directions, checked on each
// device's own queue.
static void copy_round_trip(group_t* g, int from, int to, uint32_t seed) {
  hl_buffer_t* a = alloc_sync(g->q[from], BYTES);
  hl_buffer_t* b = alloc_sync(g->q[to], BYTES);
  hl_buffer_t* back = alloc_sync(g->q[from], BYTES);
  HL_ASSERT_OK(hl_queue_fill_pattern(g->q[from], NULL, NULL, a, seed));
  HL_ASSERT_OK(hl_queue_wait_idle(g->q[from], DEADLINE()));
  HL_ASSERT_OK(hl_queue_copy(g->q[to], NULL, NULL, a, 0, b, 0, BYTES));
  HL_ASSERT_OK(hl_queue_copy(g->q[to], NULL, NULL, b, 0, back, 0, BYTES));
  HL_ASSERT_OK(hl_queue_wait_idle(g->q[to], DEADLINE()));
  assert_int_equal(mismatches(g->q[to], b, seed), 0);
  assert_int_equal(mismatches(g->q[from], back, seed), 0);
  hl_buffer_release(a);
  hl_buffer_release(b);
  hl_buffer_release(back);
}

static void test_copy_between_peers(void** state) {
  (void)state;
  require_two_devices();
  group_t g;
  group_init(&g, 0);
  group_enable(&g);
  for (int to = 1; to < g.count; ++to) copy_round_trip(&g, 0, to, 7u + to);
  for (int to = 1; to < g.count; ++to) {
    hl_device_peer_stats_t s = peer_stats(g.d[to]);
    assert_int_equal(s.peer_copies, 2);
    assert_int_equal(s.peer_bytes, 2 * BYTES);
    assert_int_equal(s.staged_copies, 0);
  }
  group_deinit(&g);
}

// Without peer access every copy between devices is staged, in both
// directions, and counted; the bytes are the same.
static void test_copy_staged(void** state) {
  (void)state;
  require_two_devices();
  group_t g;
  group_init(&g, 0);
  copy_round_trip(&g, 0, 1, 11u);
  copy_round_trip(&g, 1, 0, 12u);
  for (int i = 0; i < 2; ++i) {
    hl_device_peer_stats_t s = peer_stats(g.d[i]);
    assert_int_equal(s.staged_copies, 2);
    assert_int_equal(s.staged_bytes, 2 * BYTES);
    assert_int_equal(s.peer_copies, 0);
  }
  if (g.count >= 3) {
    // Neither side is the copying queue's device: read on device 0, write
    // on device 1, device 2's queue signals when both are done.
    hl_buffer_t* x = alloc_sync(g.q[0], BYTES);
    hl_buffer_t* y = alloc_sync(g.q[1], BYTES);
    HL_ASSERT_OK(hl_queue_fill_pattern(g.q[0], NULL, NULL, x, 13u));
    HL_ASSERT_OK(hl_queue_wait_idle(g.q[0], DEADLINE()));
    HL_ASSERT_OK(hl_queue_copy(g.q[2], NULL, NULL, x, 0, y, 0, BYTES));
    HL_ASSERT_OK(hl_queue_wait_idle(g.q[2], DEADLINE()));
    assert_int_equal(mismatches(g.q[1], y, 13u), 0);
    assert_int_equal(peer_stats(g.d[2]).staged_copies, 1);
    hl_buffer_release(x);
    hl_buffer_release(y);
  }
  // The copy's signal fence is signalled on the copying queue's side.
  hl_buffer_t* a = alloc_sync(g.q[0], BYTES);
  hl_buffer_t* b = alloc_sync(g.q[1], BYTES);
  hl_semaphore_t* done = hl_test_semaphore_create();
  hl_fence_t* signal = hl_test_fence(done, 1);
  HL_ASSERT_OK(hl_queue_fill_pattern(g.q[1], NULL, NULL, b, 5u));
  HL_ASSERT_OK(hl_queue_copy(g.q[1], NULL, signal, b, 0, a, 0, BYTES));
  HL_ASSERT_OK(hl_semaphore_wait(done, 1, DEADLINE()));
  assert_int_equal(mismatches(g.q[0], a, 5u), 0);
  hl_fence_release(signal);
  hl_semaphore_release(done);
  hl_buffer_release(a);
  hl_buffer_release(b);
  group_deinit(&g);
}

// A staged copy whose wait fails: its signal fails with that status, the
// queues stay usable, nothing leaks (ASan). A wrapped buffer of an
// unreached device has no queue to stage on: FAILED_PRECONDITION.
static void test_staged_copy_failures(void** state) {
  (void)state;
  require_two_devices();
  group_t g;
  group_init(&g, 0);
  hl_buffer_t* a = alloc_sync(g.q[0], BYTES);
  hl_buffer_t* b = alloc_sync(g.q[1], BYTES);
  hl_semaphore_t* doomed = hl_test_semaphore_create();
  hl_semaphore_t* done = hl_test_semaphore_create();
  hl_fence_t* wait = hl_test_fence(doomed, 1);
  hl_fence_t* signal = hl_test_fence(done, 1);
  HL_ASSERT_OK(hl_queue_copy(g.q[1], wait, signal, a, 0, b, 0, BYTES));
  HL_ASSERT_OK(hl_semaphore_fail(
      doomed, HL_MAKE_STATUS(HL_STATUS_ABORTED, "the producer gave up")));
  hl_test_assert_status_has(hl_semaphore_wait(done, 1, DEADLINE()),
                            HL_STATUS_ABORTED, "the producer gave up", NULL);
  assert_int_equal(peer_stats(g.d[1]).staged_copies, 1);
  // Still usable.
  HL_ASSERT_OK(hl_queue_fill_pattern(g.q[0], NULL, NULL, a, 2u));
  HL_ASSERT_OK(hl_queue_wait_idle(g.q[0], DEADLINE()));
  HL_ASSERT_OK(hl_queue_copy(g.q[1], NULL, NULL, a, 0, b, 0, BYTES));
  HL_ASSERT_OK(hl_queue_wait_idle(g.q[1], DEADLINE()));
  assert_int_equal(mismatches(g.q[1], b, 2u), 0);

  void* memory = hl_test_device_visible_calloc(BYTES);
  hl_buffer_t* wrapped = NULL;
  HL_ASSERT_OK(hl_buffer_wrap(g.d[0], memory, BYTES, NULL, NULL, &wrapped));
  hl_test_assert_status_has(
      hl_queue_copy(g.q[1], NULL, NULL, wrapped, 0, b, 0, BYTES),
      HL_STATUS_FAILED_PRECONDITION, "no affinity queue", "source");
  hl_buffer_release(wrapped);
  hl_fence_release(wait);
  hl_fence_release(signal);
  hl_semaphore_release(doomed);
  hl_semaphore_release(done);
  hl_buffer_release(a);
  hl_buffer_release(b);
  group_deinit(&g);
  hl_test_device_visible_free(memory);
}

// A dispatch on device 1 over a buffer of device 0: refused until device 1
// reaches device 0, then it writes device 0's memory.
static void test_dispatch_over_peer_buffer(void** state) {
  (void)state;
  require_two_devices();
  group_t g;
  group_init(&g, 0);
  hl_buffer_t* a = alloc_sync(g.q[0], BYTES);
  hl_test_assert_status_has(hl_queue_fill_pattern(g.q[1], NULL, NULL, a, 3u),
                            HL_STATUS_INVALID_ARGUMENT, "another device",
                            "does not reach");
  group_enable(&g);
  HL_ASSERT_OK(hl_queue_fill_pattern(g.q[1], NULL, NULL, a, 3u));
  HL_ASSERT_OK(hl_queue_wait_idle(g.q[1], DEADLINE()));
  assert_int_equal(mismatches(g.q[0], a, 3u), 0);
  assert_int_equal(mismatches(g.q[1], a, 3u), 0);  // Read by the peer too.
  hl_buffer_release(a);
  group_deinit(&g);
}

typedef enum free_way_e {
  FREE_DEALLOCA,  // hl_queue_dealloca on the root's own queue.
  FREE_RELEASE,   // The last release, without a dealloca (fallback).
} free_way_t;

// Device 1's queue copies a buffer of device 0, held back by a host
// semaphore; meanwhile device 0 frees the buffer (|way|) and allocates and
// fills a block of the same size, which may reuse its memory. The copy
// must still see the original bytes: the free waited for device 1's use.
// In checked mode (host backend) a use after free would fail queue 1.
static void check_free_waits_for_peer(free_way_t way, bool staged,
                                      bool reuse_elsewhere) {
  require_two_devices();
  group_t g;
  group_init(&g, 1);
  // The block may be reused by another queue of device 0 (the
  // suballocator's cross-queue reuse) instead of the freeing one.
  hl_queue_t* reuser = reuse_elsewhere ? hl_test_queue_create(g.d[0]) : g.q[0];
  if (!staged) group_enable(&g);
  hl_buffer_t* a = alloc_sync(g.q[0], BYTES);
  hl_buffer_t* b = alloc_sync(g.q[1], BYTES);
  HL_ASSERT_OK(hl_queue_fill_pattern(g.q[0], NULL, NULL, a, 21u));
  HL_ASSERT_OK(hl_queue_wait_idle(g.q[0], DEADLINE()));
  hl_semaphore_t* gate = hl_test_semaphore_create();
  hl_fence_t* gate_fence = hl_test_fence(gate, 1);
  HL_ASSERT_OK(hl_queue_copy(g.q[1], gate_fence, NULL, a, 0, b, 0, BYTES));
  if (way == FREE_DEALLOCA) {
    HL_ASSERT_OK(hl_queue_dealloca(g.q[0], NULL, NULL, a));
  }
  hl_buffer_release(a);
  hl_buffer_t* reuse = NULL;
  HL_ASSERT_OK(hl_queue_alloca(reuser, NULL, NULL, BYTES, 0, &reuse));
  HL_ASSERT_OK(hl_queue_fill_pattern(reuser, NULL, NULL, reuse, 99u));
  hl_test_sleep_ms(5);  // Let anything that would run early run.
  HL_ASSERT_OK(hl_semaphore_signal(gate, 1));
  HL_ASSERT_OK(hl_queue_wait_idle(g.q[1], DEADLINE()));
  HL_ASSERT_OK(hl_queue_status(g.q[1]));
  HL_ASSERT_OK(hl_queue_wait_idle(g.q[0], DEADLINE()));
  HL_ASSERT_OK(hl_queue_wait_idle(reuser, DEADLINE()));
  HL_ASSERT_OK(hl_queue_status(reuser));
  assert_int_equal(mismatches(g.q[1], b, 21u), 0);
  assert_int_equal(mismatches(reuser, reuse, 99u), 0);
  for (int i = 0; i < 2; ++i) {
    assert_int_equal(hl_test_memory_stats(g.d[i]).use_after_free, 0);
  }
  hl_fence_release(gate_fence);
  hl_semaphore_release(gate);
  hl_buffer_release(b);
  hl_buffer_release(reuse);
  if (reuser != g.q[0]) hl_queue_release(reuser);
  group_deinit(&g);
}

static void test_dealloca_waits_for_peer_use(void** state) {
  (void)state;
  check_free_waits_for_peer(FREE_DEALLOCA, false, false);
}

static void test_dealloca_waits_for_staged_use(void** state) {
  (void)state;
  check_free_waits_for_peer(FREE_DEALLOCA, true, false);
}

static void test_reuse_on_another_queue_waits_for_peer_use(void** state) {
  (void)state;
  check_free_waits_for_peer(FREE_DEALLOCA, false, true);
}

// The last release without a dealloca, in each fallback mode.
static void test_fallback_release_waits_for_peer_use(void** state) {
  (void)state;
  const hl_fallback_mode_t modes[3] = {
      HL_FALLBACK_ORDERED, HL_FALLBACK_FRONTIER, HL_FALLBACK_DEVICE_SYNC};
  for (int m = 0; m < 3; ++m) {
    fallback_mode_ = modes[m];
    check_free_waits_for_peer(FREE_RELEASE, false, false);
    check_free_waits_for_peer(FREE_RELEASE, false, true);
  }
  fallback_mode_ = HL_FALLBACK_DEFAULT;
}

// A queue of device 1 waits for a signal of device 0's queue that is not
// reached when it issues: the wait is a device-side cross-device wait. On
// the host backend a host call holds device 0's stream until the wait was
// issued; where host calls do not hold a stream (hip), device 0 spins.
typedef struct latch_t {
  atomic_int open;
} latch_t;

static void latch_wait_fn(void* user) {
  latch_t* l = user;
  while (!atomic_load(&l->open)) hl_test_sleep_ms(1);
}

static void test_cross_device_wait(void** state) {
  (void)state;
  require_two_devices();
  group_t g;
  group_init(&g, 0);
  group_enable(&g);
  hl_buffer_t* a = alloc_sync(g.q[0], BYTES);
  hl_buffer_t* b = alloc_sync(g.q[1], BYTES);
  latch_t latch;
  atomic_init(&latch.open, 0);
  hl_fence_t* produced = hl_test_fence(hl_queue_timeline(g.q[0]), 0);
  bool host = hl_test_backend_kind() == HL_BACKEND_HOST;
  if (host) {
    HL_ASSERT_OK(hl_queue_host_call(g.q[0], NULL, NULL, latch_wait_fn, &latch));
  } else {
    HL_ASSERT_OK(hl_queue_spin(g.q[0], NULL, NULL, 100 * 1000 * 1000));
  }
  HL_ASSERT_OK(hl_queue_fill_pattern(g.q[0], NULL, NULL, a, 8u));
  hl_queue_stats_t qs;
  hl_queue_stats(g.q[0], &qs);
  hl_fence_clear(produced);
  HL_ASSERT_OK(
      hl_fence_insert(produced, hl_queue_timeline(g.q[0]), qs.submitted_value));
  HL_ASSERT_OK(hl_queue_copy(g.q[1], produced, NULL, a, 0, b, 0, BYTES));
  // The copy's wait is issued on device 1 before device 0 gets there.
  hl_time_t deadline = DEADLINE();
  for (; host;) {
    hl_queue_stats(g.q[1], &qs);
    if (qs.waits_issued > 0 || hl_time_now() > deadline) break;
    hl_test_sleep_ms(1);
  }
  atomic_store(&latch.open, 1);
  HL_ASSERT_OK(hl_queue_wait_idle(g.q[1], DEADLINE()));
  hl_queue_stats(g.q[1], &qs);
  uint64_t cross = peer_stats(g.d[1]).cross_device_waits;
  if (host) assert_true(cross > 0);
  assert_true(cross <= qs.waits_issued);
  assert_int_equal(peer_stats(g.d[0]).cross_device_waits, 0);
  assert_int_equal(mismatches(g.q[1], b, 8u), 0);
  hl_fence_release(produced);
  hl_buffer_release(a);
  hl_buffer_release(b);
  group_deinit(&g);
}

// A function invoked on device 1's queue that reads an argument of device
// 0 and returns a buffer of device 0 (allocated on device 0's queue): with
// peer access both are accepted, and the result is imported sync (its
// last release frees it on its own device after every use); without, the
// argument is refused.
typedef struct peer_fn_t {
  hl_queue_t* owner;  // Device 0's queue.
} peer_fn_t;

static hl_status_t peer_result_fn(void* user, hl_queue_t* queue,
                                  hl_buffer_t* const* arguments,
                                  size_t argument_count,
                                  const hl_fence_t* wait_fence,
                                  const hl_fence_t* signal_fence,
                                  hl_buffer_t** out_results,
                                  size_t result_count) {
  peer_fn_t* f = user;
  (void)argument_count;
  (void)result_count;
  hl_buffer_t* result = NULL;
  HL_RETURN_IF_ERROR_PLAIN(
      hl_queue_alloca(f->owner, NULL, NULL, BYTES, 0, &result));
  // Device 1's copy must come after device 0's alloca.
  hl_status_t st = hl_queue_wait_idle(f->owner, DEADLINE());
  if (!st)
    st = hl_queue_copy(queue, wait_fence, signal_fence, arguments[0], 0, result,
                       0, BYTES);
  if (st) {
    hl_buffer_release(result);
    return st;
  }
  out_results[0] = result;
  return NULL;
}

static void test_invocation_result_on_peer(void** state) {
  (void)state;
  require_two_devices();
  group_t g;
  group_init(&g, 1);
  hl_buffer_t* arg = alloc_sync(g.q[0], BYTES);
  HL_ASSERT_OK(hl_queue_fill_pattern(g.q[0], NULL, NULL, arg, 31u));
  HL_ASSERT_OK(hl_queue_wait_idle(g.q[0], DEADLINE()));
  peer_fn_t user = {g.q[0]};
  const hl_access_t access[1] = {HL_ACCESS_READ};
  hl_function_signature_t sig = {1, 1, access};
  hl_function_t* fn = NULL;
  HL_ASSERT_OK(hl_function_create("peer_result", &sig, peer_result_fn, &user,
                                  hl_allocator_system(), &fn));
  hl_invocation_t* inv = NULL;
  HL_ASSERT_OK(hl_invocation_create(fn, g.q[1], &inv));
  hl_test_assert_status_has(hl_invocation_add_argument(inv, arg),
                            HL_STATUS_INVALID_ARGUMENT, "another device",
                            "does not reach");
  hl_invocation_release(inv);
  group_enable(&g);
  hl_invocation_stats_t before;
  HL_ASSERT_OK(hl_device_invocation_stats(g.d[1], &before));
  HL_ASSERT_OK(hl_invocation_create(fn, g.q[1], &inv));
  HL_ASSERT_OK(hl_invocation_add_argument(inv, arg));
  HL_ASSERT_OK(hl_invocation_invoke(inv));
  HL_ASSERT_OK(hl_fence_wait(hl_invocation_signal_fence(inv), DEADLINE()));
  hl_buffer_t* result = NULL;
  HL_ASSERT_OK(hl_invocation_take_result(inv, 0, &result));
  hl_invocation_release(inv);
  hl_invocation_stats_t after;
  HL_ASSERT_OK(hl_device_invocation_stats(g.d[1], &after));
  assert_int_equal(after.sync_imports - before.sync_imports, 1);
  assert_int_equal(after.async_imports, before.async_imports);
  assert_int_equal(mismatches(g.q[0], result, 31u), 0);
  hl_buffer_release(result);  // Freed by device 0's fallback.
  hl_buffer_release(arg);
  hl_function_release(fn);
  group_deinit(&g);
}

// Two devices of different targets at once (the hip test runtime with
// HL_HIP_TEST_RUNTIME_TARGETS=gfx90a...,gfx1100): each dispatch loads its
// own device's code object (the runtime refuses another processor's with
// hipErrorNoBinaryForGpu), and each device checks the other's shard.
static void test_heterogeneous_group(void** state) {
  (void)state;
  require_two_devices();
  group_t g;
  group_init(&g, 0);
  hl_device_properties_t p0, p1;
  HL_ASSERT_OK(hl_device_properties(g.d[0], &p0));
  HL_ASSERT_OK(hl_device_properties(g.d[1], &p1));
  if (hl_target_id_equal(p0.target, p1.target)) {
    group_deinit(&g);
    print_message("skipped: devices 0 and 1 share target %s\n", p0.target);
    skip();
  }
  group_enable(&g);
  hl_buffer_t* shard[2];
  hl_buffer_t* copy[2];
  for (int i = 0; i < 2; ++i) {
    shard[i] = alloc_sync(g.q[i], BYTES);
    copy[i] = alloc_sync(g.q[i], BYTES);
    HL_ASSERT_OK(hl_queue_fill_pattern(g.q[i], NULL, NULL, shard[i], 40u + i));
  }
  for (int i = 0; i < 2; ++i) {
    HL_ASSERT_OK(hl_queue_wait_idle(g.q[i], DEADLINE()));
  }
  for (int i = 0; i < 2; ++i) {
    HL_ASSERT_OK(
        hl_queue_copy(g.q[i], NULL, NULL, shard[1 - i], 0, copy[i], 0, BYTES));
    assert_int_equal(mismatches(g.q[i], copy[i], 40u + (1 - i)), 0);
  }
  for (int i = 0; i < 2; ++i) {
    hl_buffer_release(shard[i]);
    hl_buffer_release(copy[i]);
  }
  group_deinit(&g);
}

int main(void) {
  // Exits 77 (skipped) when the hip backend has no device.
  (void)hl_test_backend_kind();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_peer_query_and_enable),
      cmocka_unit_test(test_copy_between_peers),
      cmocka_unit_test(test_copy_staged),
      cmocka_unit_test(test_staged_copy_failures),
      cmocka_unit_test(test_dispatch_over_peer_buffer),
      cmocka_unit_test(test_dealloca_waits_for_peer_use),
      cmocka_unit_test(test_dealloca_waits_for_staged_use),
      cmocka_unit_test(test_reuse_on_another_queue_waits_for_peer_use),
      cmocka_unit_test(test_fallback_release_waits_for_peer_use),
      cmocka_unit_test(test_cross_device_wait),
      cmocka_unit_test(test_invocation_result_on_peer),
      cmocka_unit_test(test_heterogeneous_group),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
