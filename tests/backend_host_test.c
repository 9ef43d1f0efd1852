// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Conformance tests of the host backend (runtime/backend/host/), called
// through the backend vtable exactly as the timeline and memory layers do:
// stream-ordered pool reuse rules, release threshold and trim, limits and
// invalid frees, events across streams, host function order, copies, fills,
// kernel launches (also from a host function on their own stream), live-object
// counts, HIPLINE_HOST_DEVICES and fault injection.

#include <stdatomic.h>
#include <threads.h>

#include "runtime/backend/backend.h"
#include "runtime/base/faults.h"
// C11 threads on pthreads under TSan (see tests/test_util.h).
#define HL_TEST_C11_THREADS_SHIM 1
#include "tests/test_util.h"

#define KIB ((size_t)1024)
#define MIB ((size_t)1024 * 1024)

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

typedef struct test_backend_t {
  hl_backend_t* b;
  const hl_backend_vtable_t* v;
} test_backend_t;

static test_backend_t backend_create(void) {
  test_backend_t t = {NULL, NULL};
  HL_ASSERT_OK(hl_host_backend_create(0, hl_allocator_system(), &t.b));
  t.v = t.b->vtable;
  return t;
}

// Trims the pool and checks that nothing is left alive, then destroys.
static void backend_destroy_checked(test_backend_t* t) {
  HL_ASSERT_OK(t->v->pool_trim(t->b, 0));
  hl_backend_counts_t counts;
  t->v->live_counts(t->b, &counts);
  assert_int_equal(counts.live_streams, 0);
  assert_int_equal(counts.live_events, 0);
  assert_int_equal(counts.live_blocks, 0);
  assert_int_equal(counts.live_modules, 0);
  hl_backend_pool_stats_t stats;
  HL_ASSERT_OK(t->v->pool_stats(t->b, &stats));
  assert_int_equal(stats.reserved_bytes, 0);
  assert_int_equal(stats.used_bytes, 0);
  t->v->destroy(t->b);
}

static hl_backend_stream_t* stream_create(test_backend_t* t) {
  hl_backend_stream_t* s = NULL;
  HL_ASSERT_OK(t->v->stream_create(t->b, &s));
  return s;
}

static hl_backend_event_t* event_create(test_backend_t* t) {
  hl_backend_event_t* e = NULL;
  HL_ASSERT_OK(t->v->event_create(t->b, &e));
  return e;
}

static void set_reuse_flags(test_backend_t* t, uint32_t flags) {
  hl_pool_attributes_t attrs;
  HL_ASSERT_OK(t->v->pool_get_attributes(t->b, &attrs));
  attrs.reuse_flags = flags;
  HL_ASSERT_OK(t->v->pool_set_attributes(t->b, &attrs));
}

static void* malloc_on(test_backend_t* t, size_t size, hl_backend_stream_t* s) {
  void* p = NULL;
  HL_ASSERT_OK(t->v->malloc_async(t->b, size, s, &p));
  assert_non_null(p);
  return p;
}

// A host function that blocks its stream until the gate opens, then marks
// |passed|.
typedef struct gate_t {
  mtx_t mutex;
  cnd_t cond;
  bool open;
  atomic_int passed;
} gate_t;

static void gate_init(gate_t* g) {
  assert_int_equal(mtx_init(&g->mutex, mtx_plain), thrd_success);
  assert_int_equal(cnd_init(&g->cond), thrd_success);
  g->open = false;
  atomic_init(&g->passed, 0);
}

static void gate_open(gate_t* g) {
  mtx_lock(&g->mutex);
  g->open = true;
  cnd_broadcast(&g->cond);
  mtx_unlock(&g->mutex);
}

static void gate_deinit(gate_t* g) {
  mtx_destroy(&g->mutex);
  cnd_destroy(&g->cond);
}

static void gate_fn(void* user) {
  gate_t* g = (gate_t*)user;
  mtx_lock(&g->mutex);
  while (!g->open) cnd_wait(&g->cond, &g->mutex);
  mtx_unlock(&g->mutex);
  atomic_store(&g->passed, 1);
}

// Reads the gate's |passed| flag into |observed| when it runs.
typedef struct probe_t {
  gate_t* gate;
  atomic_int ran;
  atomic_int observed;
} probe_t;

static void probe_fn(void* user) {
  probe_t* p = (probe_t*)user;
  atomic_store(&p->observed, atomic_load(&p->gate->passed));
  atomic_store(&p->ran, 1);
}

//===----------------------------------------------------------------------===//
// Pool reuse
//===----------------------------------------------------------------------===//

// A block freed on a stream is reused by that stream at once, even while the
// stream is still busy.
static void test_same_stream_reuse_immediate(void** state) {
  test_backend_t t = backend_create();
  set_reuse_flags(&t, 0);  // Same-stream reuse needs no flag.
  hl_backend_stream_t* a = stream_create(&t);
  gate_t gate;
  gate_init(&gate);
  HL_ASSERT_OK(t.v->launch_host_func(t.b, a, gate_fn, &gate));
  void* p = malloc_on(&t, 1000, a);
  HL_ASSERT_OK(t.v->free_async(t.b, p, a));
  void* q = malloc_on(&t, 1000, a);
  assert_ptr_equal(p, q);
  assert_int_equal(atomic_load(&gate.passed), 0);  // Still busy.
  hl_backend_pool_stats_t stats;
  HL_ASSERT_OK(t.v->pool_stats(t.b, &stats));
  assert_int_equal(stats.reuse_count, 1);
  assert_int_equal(stats.alloc_count, 2);
  assert_int_equal(stats.free_count, 1);
  gate_open(&gate);
  HL_ASSERT_OK(t.v->free_async(t.b, q, a));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, a));
  t.v->stream_destroy(t.b, a);
  gate_deinit(&gate);
  backend_destroy_checked(&t);
}

// FOLLOW_EVENT_DEPENDENCIES: another stream may reuse a block only after it
// waits on an event recorded after the free.
static void test_cross_stream_event_dependency(void** state) {
  test_backend_t t = backend_create();
  set_reuse_flags(&t, HL_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES);
  hl_backend_stream_t* a = stream_create(&t);
  hl_backend_stream_t* b = stream_create(&t);
  gate_t gate;
  gate_init(&gate);
  HL_ASSERT_OK(t.v->launch_host_func(t.b, a, gate_fn, &gate));
  void* p = malloc_on(&t, 4096, a);
  HL_ASSERT_OK(t.v->free_async(t.b, p, a));
  // The free has not run and B knows nothing of A: no reuse.
  void* q = malloc_on(&t, 4096, b);
  assert_ptr_not_equal(p, q);
  // An event after the free, waited by B: now B may take the block.
  hl_backend_event_t* e = event_create(&t);
  HL_ASSERT_OK(t.v->event_record(t.b, e, a));
  HL_ASSERT_OK(t.v->stream_wait_event(t.b, b, e));
  void* r = malloc_on(&t, 4096, b);
  assert_ptr_equal(p, r);
  // B's later work runs only after A passed the free.
  probe_t probe = {&gate, 0, 0};
  atomic_init(&probe.ran, 0);
  atomic_init(&probe.observed, 0);
  HL_ASSERT_OK(t.v->launch_host_func(t.b, b, probe_fn, &probe));
  hl_test_sleep_ms(10);
  assert_int_equal(atomic_load(&probe.ran), 0);
  gate_open(&gate);
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, b));
  assert_int_equal(atomic_load(&probe.ran), 1);
  assert_int_equal(atomic_load(&probe.observed), 1);
  HL_ASSERT_OK(t.v->free_async(t.b, q, b));
  HL_ASSERT_OK(t.v->free_async(t.b, r, b));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, a));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, b));
  t.v->event_destroy(t.b, e);
  t.v->stream_destroy(t.b, a);
  t.v->stream_destroy(t.b, b);
  gate_deinit(&gate);
  backend_destroy_checked(&t);
}

// ALLOW_OPPORTUNISTIC: another stream may reuse a block once the free has
// completed on its stream, without any dependency.
static void test_cross_stream_opportunistic(void** state) {
  test_backend_t t = backend_create();
  set_reuse_flags(&t, HL_POOL_REUSE_ALLOW_OPPORTUNISTIC);
  hl_backend_stream_t* a = stream_create(&t);
  hl_backend_stream_t* b = stream_create(&t);
  gate_t gate;
  gate_init(&gate);
  HL_ASSERT_OK(t.v->launch_host_func(t.b, a, gate_fn, &gate));
  void* p = malloc_on(&t, 4096, a);
  HL_ASSERT_OK(t.v->free_async(t.b, p, a));
  void* q = malloc_on(&t, 4096, b);
  assert_ptr_not_equal(p, q);
  // An event dependency does not count under this flag alone.
  hl_backend_event_t* e = event_create(&t);
  HL_ASSERT_OK(t.v->event_record(t.b, e, a));
  hl_backend_stream_t* c = stream_create(&t);
  HL_ASSERT_OK(t.v->stream_wait_event(t.b, c, e));
  void* r = malloc_on(&t, 4096, c);
  assert_ptr_not_equal(p, r);
  gate_open(&gate);
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, a));
  void* s = malloc_on(&t, 4096, b);  // A drained: the free is done.
  assert_ptr_equal(p, s);
  HL_ASSERT_OK(t.v->free_async(t.b, q, b));
  HL_ASSERT_OK(t.v->free_async(t.b, s, b));
  HL_ASSERT_OK(t.v->free_async(t.b, r, c));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, b));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, c));
  t.v->event_destroy(t.b, e);
  t.v->stream_destroy(t.b, a);
  t.v->stream_destroy(t.b, b);
  t.v->stream_destroy(t.b, c);
  gate_deinit(&gate);
  backend_destroy_checked(&t);
}

// No flags: only the freeing stream ever reuses a block.
static void test_cross_stream_no_flags(void** state) {
  test_backend_t t = backend_create();
  set_reuse_flags(&t, 0);
  hl_backend_stream_t* a = stream_create(&t);
  hl_backend_stream_t* b = stream_create(&t);
  void* p = malloc_on(&t, 4096, a);
  HL_ASSERT_OK(t.v->free_async(t.b, p, a));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, a));
  void* q = malloc_on(&t, 4096, b);  // Free completed: still not B's.
  assert_ptr_not_equal(p, q);
  hl_backend_event_t* e = event_create(&t);
  HL_ASSERT_OK(t.v->event_record(t.b, e, a));
  HL_ASSERT_OK(t.v->stream_wait_event(t.b, b, e));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, b));
  void* r = malloc_on(&t, 4096, b);  // Even with a dependency.
  assert_ptr_not_equal(p, r);
  void* s = malloc_on(&t, 4096, a);  // The freeing stream may.
  assert_ptr_equal(p, s);
  HL_ASSERT_OK(t.v->free_async(t.b, q, b));
  HL_ASSERT_OK(t.v->free_async(t.b, r, b));
  HL_ASSERT_OK(t.v->free_async(t.b, s, a));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, a));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, b));
  t.v->event_destroy(t.b, e);
  t.v->stream_destroy(t.b, a);
  t.v->stream_destroy(t.b, b);
  backend_destroy_checked(&t);
}

// ALLOW_INTERNAL_DEPENDENCIES: B reuses at once, and the pool makes B's later
// work wait for A's free.
static void test_cross_stream_internal_dependency(void** state) {
  test_backend_t t = backend_create();
  set_reuse_flags(&t, HL_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES);
  hl_backend_stream_t* a = stream_create(&t);
  hl_backend_stream_t* b = stream_create(&t);
  gate_t gate;
  gate_init(&gate);
  HL_ASSERT_OK(t.v->launch_host_func(t.b, a, gate_fn, &gate));
  void* p = malloc_on(&t, 4096, a);
  HL_ASSERT_OK(t.v->free_async(t.b, p, a));
  void* q = malloc_on(&t, 4096, b);
  assert_ptr_equal(p, q);
  probe_t probe = {&gate, 0, 0};
  atomic_init(&probe.ran, 0);
  atomic_init(&probe.observed, 0);
  HL_ASSERT_OK(t.v->launch_host_func(t.b, b, probe_fn, &probe));
  hl_test_sleep_ms(20);
  assert_int_equal(atomic_load(&probe.ran), 0);  // Held behind A's free.
  gate_open(&gate);
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, b));
  assert_int_equal(atomic_load(&probe.ran), 1);
  assert_int_equal(atomic_load(&probe.observed), 1);
  HL_ASSERT_OK(t.v->free_async(t.b, q, b));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, a));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, b));
  t.v->stream_destroy(t.b, a);
  t.v->stream_destroy(t.b, b);
  gate_deinit(&gate);
  backend_destroy_checked(&t);
}

//===----------------------------------------------------------------------===//
// Release threshold, trim, limits
//===----------------------------------------------------------------------===//

static hl_backend_pool_stats_t stats_of(test_backend_t* t) {
  hl_backend_pool_stats_t stats;
  HL_ASSERT_OK(t->v->pool_stats(t->b, &stats));
  return stats;
}

static void test_release_threshold_and_trim(void** state) {
  test_backend_t t = backend_create();
  hl_backend_stream_t* s = stream_create(&t);
  hl_pool_attributes_t attrs;
  HL_ASSERT_OK(t.v->pool_get_attributes(t.b, &attrs));
  assert_int_equal(attrs.release_threshold, UINT64_MAX);  // Documented default.

  void* p[4];
  for (int i = 0; i < 4; ++i) p[i] = malloc_on(&t, MIB, s);
  assert_int_equal(stats_of(&t).reserved_bytes, 4 * MIB);
  assert_int_equal(stats_of(&t).used_bytes, 4 * MIB);
  for (int i = 0; i < 4; ++i) HL_ASSERT_OK(t.v->free_async(t.b, p[i], s));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  // Threshold "keep everything": nothing goes back at the sync.
  assert_int_equal(stats_of(&t).reserved_bytes, 4 * MIB);
  assert_int_equal(stats_of(&t).used_bytes, 0);

  // A threshold of 2 MiB applies at the next stream synchronize.
  for (int i = 0; i < 4; ++i) p[i] = malloc_on(&t, MIB, s);
  attrs.release_threshold = 2 * MIB;
  HL_ASSERT_OK(t.v->pool_set_attributes(t.b, &attrs));
  assert_int_equal(stats_of(&t).reserved_bytes, 4 * MIB);  // All in use.
  for (int i = 0; i < 4; ++i) HL_ASSERT_OK(t.v->free_async(t.b, p[i], s));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  assert_int_equal(stats_of(&t).reserved_bytes, 2 * MIB);
  assert_int_equal(stats_of(&t).reserved_high_bytes, 4 * MIB);

  // And at an event synchronize.
  for (int i = 0; i < 4; ++i) p[i] = malloc_on(&t, MIB, s);
  assert_int_equal(stats_of(&t).reserved_bytes, 4 * MIB);
  for (int i = 0; i < 4; ++i) HL_ASSERT_OK(t.v->free_async(t.b, p[i], s));
  hl_backend_event_t* e = event_create(&t);
  HL_ASSERT_OK(t.v->event_record(t.b, e, s));
  HL_ASSERT_OK(t.v->event_synchronize(t.b, e));
  assert_int_equal(stats_of(&t).reserved_bytes, 2 * MIB);

  // Trim to N keeps at most N.
  attrs.release_threshold = UINT64_MAX;
  HL_ASSERT_OK(t.v->pool_set_attributes(t.b, &attrs));
  for (int i = 0; i < 4; ++i) p[i] = malloc_on(&t, MIB, s);
  for (int i = 0; i < 4; ++i) HL_ASSERT_OK(t.v->free_async(t.b, p[i], s));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  assert_int_equal(stats_of(&t).reserved_bytes, 4 * MIB);
  uint64_t trims_before = stats_of(&t).trim_count;
  HL_ASSERT_OK(t.v->pool_trim(t.b, MIB + MIB / 2));
  assert_true(stats_of(&t).reserved_bytes <= MIB + MIB / 2);
  assert_int_equal(stats_of(&t).reserved_bytes, MIB);
  assert_int_equal(stats_of(&t).trim_count, trims_before + 3);
  HL_ASSERT_OK(t.v->pool_trim(t.b, 0));
  assert_int_equal(stats_of(&t).reserved_bytes, 0);
  hl_backend_counts_t counts;
  t.v->live_counts(t.b, &counts);
  assert_int_equal(counts.live_blocks, 0);

  t.v->event_destroy(t.b, e);
  t.v->stream_destroy(t.b, s);
  backend_destroy_checked(&t);
}

// Trim keeps blocks whose free has not completed yet.
static void test_trim_keeps_pending_frees(void** state) {
  test_backend_t t = backend_create();
  hl_backend_stream_t* s = stream_create(&t);
  gate_t gate;
  gate_init(&gate);
  HL_ASSERT_OK(t.v->launch_host_func(t.b, s, gate_fn, &gate));
  void* p = malloc_on(&t, MIB, s);
  HL_ASSERT_OK(t.v->free_async(t.b, p, s));
  HL_ASSERT_OK(t.v->pool_trim(t.b, 0));
  assert_int_equal(stats_of(&t).reserved_bytes, MIB);
  gate_open(&gate);
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  HL_ASSERT_OK(t.v->pool_trim(t.b, 0));
  assert_int_equal(stats_of(&t).reserved_bytes, 0);
  t.v->stream_destroy(t.b, s);
  gate_deinit(&gate);
  backend_destroy_checked(&t);
}

static void test_limit_and_invalid_frees(void** state) {
  test_backend_t t = backend_create();
  hl_backend_stream_t* s = stream_create(&t);
  hl_pool_attributes_t attrs;
  HL_ASSERT_OK(t.v->pool_get_attributes(t.b, &attrs));
  attrs.limit_bytes = MIB;
  HL_ASSERT_OK(t.v->pool_set_attributes(t.b, &attrs));

  void* p = malloc_on(&t, 512 * KIB, s);
  void* q = NULL;
  hl_status_t st = t.v->malloc_async(t.b, 768 * KIB, s, &q);
  assert_int_equal(hl_status_code(st), HL_STATUS_RESOURCE_EXHAUSTED);
  assert_null(q);
  const char* message = hl_status_message(st);
  assert_non_null(strstr(message, "786432"));   // The request.
  assert_non_null(strstr(message, "1048576"));  // The limit.
  assert_non_null(strstr(message, "524288"));   // What is in use.
  hl_status_free(st);
  assert_int_equal(stats_of(&t).fail_count, 1);

  // Free, then the retry makes room from the cached block.
  HL_ASSERT_OK(t.v->free_async(t.b, p, s));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  q = malloc_on(&t, 768 * KIB, s);
  assert_true(stats_of(&t).reserved_bytes <= MIB);

  void* z = (void*)&attrs;
  HL_ASSERT_STATUS(t.v->malloc_async(t.b, 0, s, &z), INVALID_ARGUMENT);
  int foreign = 0;
  HL_ASSERT_STATUS(t.v->free_async(t.b, &foreign, s), INVALID_ARGUMENT);
  HL_ASSERT_OK(t.v->free_async(t.b, q, s));
  HL_ASSERT_STATUS(t.v->free_async(t.b, q, s), INVALID_ARGUMENT);  // Double.
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  t.v->stream_destroy(t.b, s);
  backend_destroy_checked(&t);
}

//===----------------------------------------------------------------------===//
// Events, host functions, copies, kernels
//===----------------------------------------------------------------------===//

typedef struct sleeper_t {
  atomic_int x;
  atomic_int seen;
} sleeper_t;

static void sleep_then_set(void* user) {
  sleeper_t* s = (sleeper_t*)user;
  hl_test_sleep_ms(20);
  atomic_store(&s->x, 1);
}

static void read_x(void* user) {
  sleeper_t* s = (sleeper_t*)user;
  atomic_store(&s->seen, atomic_load(&s->x) == 1 ? 1 : -1);
}

static void test_events_order_streams(void** state) {
  test_backend_t t = backend_create();
  hl_backend_stream_t* a = stream_create(&t);
  hl_backend_stream_t* b = stream_create(&t);
  hl_backend_event_t* start = event_create(&t);
  hl_backend_event_t* e = event_create(&t);
  bool done = false;
  // Never recorded: complete. Events are untimed, as on hip.
  HL_ASSERT_OK(t.v->event_query(t.b, e, &done));
  assert_true(done);
  assert_true(t.b->events_untimed);
  float ms = 1.0f;
  HL_ASSERT_STATUS(t.v->event_elapsed_ms(t.b, start, e, &ms), UNIMPLEMENTED);
  assert_true(ms == 0.0f);

  gate_t gate;
  gate_init(&gate);
  sleeper_t sl;
  atomic_init(&sl.x, 0);
  atomic_init(&sl.seen, 0);
  HL_ASSERT_OK(t.v->launch_host_func(t.b, a, gate_fn, &gate));
  HL_ASSERT_OK(t.v->event_record(t.b, start, a));
  HL_ASSERT_OK(t.v->launch_host_func(t.b, a, sleep_then_set, &sl));
  HL_ASSERT_OK(t.v->event_record(t.b, e, a));
  HL_ASSERT_OK(t.v->stream_wait_event(t.b, b, e));
  HL_ASSERT_OK(t.v->launch_host_func(t.b, b, read_x, &sl));
  HL_ASSERT_OK(t.v->event_query(t.b, e, &done));
  assert_false(done);
  // A record on a busy stream is no item: |start| completes with the gate.
  HL_ASSERT_OK(t.v->event_query(t.b, start, &done));
  assert_false(done);
  gate_open(&gate);
  HL_ASSERT_OK(t.v->event_synchronize(t.b, e));
  HL_ASSERT_OK(t.v->event_query(t.b, e, &done));
  assert_true(done);
  assert_int_equal(atomic_load(&sl.x), 1);
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, b));
  assert_int_equal(atomic_load(&sl.seen), 1);
  HL_ASSERT_OK(t.v->event_query(t.b, start, &done));
  assert_true(done);

  t.v->event_destroy(t.b, start);
  t.v->event_destroy(t.b, e);
  t.v->stream_destroy(t.b, a);
  t.v->stream_destroy(t.b, b);
  gate_deinit(&gate);
  backend_destroy_checked(&t);
}

// A wait captures the record current at the wait; re-recording later does
// not change what the waiting stream waits for.
static void test_wait_captures_record(void** state) {
  test_backend_t t = backend_create();
  hl_backend_stream_t* a = stream_create(&t);
  hl_backend_stream_t* b = stream_create(&t);
  hl_backend_event_t* e = event_create(&t);
  gate_t gate;
  gate_init(&gate);
  HL_ASSERT_OK(t.v->event_record(t.b, e, a));  // Before the gate.
  HL_ASSERT_OK(t.v->stream_wait_event(t.b, b, e));
  HL_ASSERT_OK(t.v->launch_host_func(t.b, a, gate_fn, &gate));
  HL_ASSERT_OK(t.v->event_record(t.b, e, a));  // After the gate.
  probe_t probe;
  probe.gate = &gate;
  atomic_init(&probe.ran, 0);
  atomic_init(&probe.observed, 0);
  HL_ASSERT_OK(t.v->launch_host_func(t.b, b, probe_fn, &probe));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, b));  // Must not hang.
  assert_int_equal(atomic_load(&probe.ran), 1);
  assert_int_equal(atomic_load(&probe.observed), 0);
  gate_open(&gate);
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, a));
  t.v->event_destroy(t.b, e);
  t.v->stream_destroy(t.b, a);
  t.v->stream_destroy(t.b, b);
  gate_deinit(&gate);
  backend_destroy_checked(&t);
}

#define CALLBACKS 1000

typedef struct order_log_t {
  int values[CALLBACKS];
  atomic_int count;  // Only the stream's worker writes; read after sync.
} order_log_t;

typedef struct order_item_t {
  order_log_t* log;
  int value;
} order_item_t;

static void append_fn(void* user) {
  order_item_t* item = (order_item_t*)user;
  int i = atomic_load(&item->log->count);
  if (i < CALLBACKS) item->log->values[i] = item->value;
  atomic_store(&item->log->count, i + 1);
}

static void test_host_callbacks_in_order(void** state) {
  test_backend_t t = backend_create();
  hl_backend_stream_t* s = stream_create(&t);
  static order_log_t log;
  static order_item_t items[CALLBACKS];
  atomic_init(&log.count, 0);
  for (int i = 0; i < CALLBACKS; ++i) {
    items[i].log = &log;
    items[i].value = i;
    HL_ASSERT_OK(t.v->launch_host_func(t.b, s, append_fn, &items[i]));
  }
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  assert_int_equal(atomic_load(&log.count), CALLBACKS);
  for (int i = 0; i < CALLBACKS; ++i) assert_int_equal(log.values[i], i);
  HL_ASSERT_STATUS(t.v->launch_host_func(t.b, s, NULL, NULL), INVALID_ARGUMENT);
  t.v->stream_destroy(t.b, s);
  backend_destroy_checked(&t);
}

// A host kernel: dst[i] = dst[i] * scale + add for i < n over the grid.
static void scale_add_kernel(void** params, const hl_launch_config_t* config) {
  uint32_t* dst = *(uint32_t**)params[0];
  uint32_t n = *(uint32_t*)params[1];
  uint32_t scale = *(uint32_t*)params[2];
  uint64_t add = *(uint64_t*)params[3];
  uint32_t threads = config->grid.x * config->block.x;
  for (uint32_t i = 0; i < threads && i < n; ++i) {
    dst[i] = dst[i] * scale + (uint32_t)add;
  }
}

static const hl_host_kernel_t kTestKernels[] = {
    {"scale_add", scale_add_kernel, 4, {sizeof(void*), 4, 4, 8}},
};
static const hl_host_code_object_t kTestCode = {HL_HOST_CODE_OBJECT_MAGIC, 1,
                                                kTestKernels};

static void test_copies_fills_kernels(void** state) {
  test_backend_t t = backend_create();
  hl_backend_stream_t* s = stream_create(&t);
  enum { N = 1000 };
  uint32_t* src = malloc_on(&t, N * sizeof(uint32_t), s);
  uint32_t* dst = malloc_on(&t, N * sizeof(uint32_t), s);
  HL_ASSERT_OK(t.v->memset32_async(t.b, src, 0xA5A5A5A5u, N, s));
  HL_ASSERT_OK(t.v->memset32_async(t.b, dst, 7u, N, s));
  HL_ASSERT_OK(
      t.v->memcpy_async(t.b, dst + 10, src, 100 * sizeof(uint32_t), s));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  for (int i = 0; i < N; ++i) {
    assert_int_equal(src[i], 0xA5A5A5A5u);
    assert_int_equal(dst[i], (i >= 10 && i < 110) ? 0xA5A5A5A5u : 7u);
  }
  HL_ASSERT_STATUS(t.v->memset32_async(t.b, (char*)dst + 1, 0, 4, s),
                   INVALID_ARGUMENT);
  HL_ASSERT_STATUS(t.v->memcpy_async(t.b, NULL, src, 4, s), INVALID_ARGUMENT);

  hl_backend_module_t* module = NULL;
  HL_ASSERT_STATUS(t.v->module_load(t.b, &kTestCode, 3, &module),
                   INVALID_ARGUMENT);
  HL_ASSERT_OK(t.v->module_load(t.b, &kTestCode, sizeof(kTestCode), &module));
  hl_backend_function_t* fn = NULL;
  HL_ASSERT_STATUS(t.v->module_get_function(t.b, module, "missing", &fn),
                   NOT_FOUND);
  HL_ASSERT_OK(t.v->module_get_function(t.b, module, "scale_add", &fn));
  HL_ASSERT_OK(t.v->memset32_async(t.b, dst, 3u, N, s));
  uint32_t* arg_dst = dst;
  uint32_t arg_n = 500, arg_scale = 5;
  uint64_t arg_add = 2;
  void* params[4] = {&arg_dst, &arg_n, &arg_scale, &arg_add};
  hl_launch_config_t config = {{4, 1, 1}, {256, 1, 1}, 0, 0};
  gate_t gate;
  gate_init(&gate);
  HL_ASSERT_OK(t.v->launch_host_func(t.b, s, gate_fn, &gate));
  HL_ASSERT_OK(t.v->launch_kernel(t.b, fn, &config, params, s));
  arg_n = 0;  // Arguments are copied at launch.
  arg_add = 1000;
  gate_open(&gate);
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  for (int i = 0; i < N; ++i) {
    assert_int_equal(dst[i], i < 500 ? 17u : 3u);
  }
  hl_backend_counts_t counts;
  t.v->live_counts(t.b, &counts);
  assert_int_equal(counts.live_modules, 1);
  t.v->module_unload(t.b, module);

  HL_ASSERT_OK(t.v->free_async(t.b, src, s));
  HL_ASSERT_OK(t.v->free_async(t.b, dst, s));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  t.v->stream_destroy(t.b, s);
  gate_deinit(&gate);
  backend_destroy_checked(&t);
}

// stream_ordered_host_work: a fill, copy or kernel made from a host function
// for its own stream runs at that point of the stream, before the call
// returns (the layers above run their stream work this way).
typedef struct nested_work_t {
  test_backend_t* t;
  hl_backend_stream_t* stream;
  hl_backend_function_t* kernel;
  uint32_t* src;
  uint32_t* dst;
  uint32_t seen_after_fill;  // dst[0] right after memset32_async returned.
  uint32_t seen_after_copy;  // dst[1] right after memcpy_async returned.
  uint32_t seen_after_kernel;
  hl_status_t status;
} nested_work_t;

static void nested_work_fn(void* user) {
  nested_work_t* w = (nested_work_t*)user;
  const hl_backend_vtable_t* v = w->t->v;
  hl_backend_t* b = w->t->b;
  hl_status_t st = v->memset32_async(b, w->dst, 9u, 4, w->stream);
  w->seen_after_fill = w->dst[0];
  if (!st) st = v->memcpy_async(b, w->dst + 1, w->src, 4, w->stream);
  w->seen_after_copy = w->dst[1];
  uint32_t* arg_dst = w->dst;
  uint32_t arg_n = 1, arg_scale = 2;
  uint64_t arg_add = 1;
  void* params[4] = {&arg_dst, &arg_n, &arg_scale, &arg_add};
  hl_launch_config_t config = {{1, 1, 1}, {1, 1, 1}, 0, 0};
  if (!st) st = v->launch_kernel(b, w->kernel, &config, params, w->stream);
  w->seen_after_kernel = w->dst[0];
  w->status = st;
}

static void test_stream_ordered_host_work(void** state) {
  test_backend_t t = backend_create();
  assert_true(t.b->stream_ordered_host_work);
  hl_backend_stream_t* s = stream_create(&t);
  uint32_t* src = malloc_on(&t, 4 * sizeof(uint32_t), s);
  uint32_t* dst = malloc_on(&t, 4 * sizeof(uint32_t), s);
  HL_ASSERT_OK(t.v->memset32_async(t.b, src, 0x5Au, 4, s));
  HL_ASSERT_OK(t.v->memset32_async(t.b, dst, 0u, 4, s));
  hl_backend_module_t* module = NULL;
  HL_ASSERT_OK(t.v->module_load(t.b, &kTestCode, sizeof(kTestCode), &module));
  nested_work_t w = {.t = &t, .stream = s, .src = src, .dst = dst};
  HL_ASSERT_OK(t.v->module_get_function(t.b, module, "scale_add", &w.kernel));
  HL_ASSERT_OK(t.v->launch_host_func(t.b, s, nested_work_fn, &w));
  // Work queued after the host function runs after what it made.
  HL_ASSERT_OK(t.v->memset32_async(t.b, dst + 3, 4u, 1, s));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  HL_ASSERT_OK(w.status);
  assert_int_equal(w.seen_after_fill, 9u);
  assert_int_equal(w.seen_after_copy, 0x5Au);
  assert_int_equal(w.seen_after_kernel, 19u);
  assert_int_equal(dst[0], 19u);
  assert_int_equal(dst[1], 0x5Au);
  assert_int_equal(dst[2], 9u);
  assert_int_equal(dst[3], 4u);
  t.v->module_unload(t.b, module);
  HL_ASSERT_OK(t.v->free_async(t.b, src, s));
  HL_ASSERT_OK(t.v->free_async(t.b, dst, s));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  t.v->stream_destroy(t.b, s);
  backend_destroy_checked(&t);
}

// Streams, events and blocks are counted and all go back to zero.
static void test_live_counts(void** state) {
  test_backend_t t = backend_create();
  hl_backend_stream_t* s[3];
  hl_backend_event_t* e[5];
  void* p[8];
  for (int i = 0; i < 3; ++i) s[i] = stream_create(&t);
  for (int i = 0; i < 5; ++i) e[i] = event_create(&t);
  for (int i = 0; i < 8; ++i)
    p[i] = malloc_on(&t, (size_t)(i + 1) * 1000, s[i % 3]);
  for (int i = 0; i < 5; ++i)
    HL_ASSERT_OK(t.v->event_record(t.b, e[i], s[i % 3]));
  HL_ASSERT_OK(t.v->stream_wait_event(t.b, s[0], e[4]));
  hl_backend_counts_t counts;
  t.v->live_counts(t.b, &counts);
  assert_int_equal(counts.live_streams, 3);
  assert_int_equal(counts.live_events, 5);
  assert_int_equal(counts.live_blocks, 8);
  for (int i = 0; i < 8; ++i)
    HL_ASSERT_OK(t.v->free_async(t.b, p[i], s[(i + 1) % 3]));
  // An event destroyed while its record is in flight stays valid for it.
  for (int i = 0; i < 5; ++i) t.v->event_destroy(t.b, e[i]);
  for (int i = 0; i < 3; ++i) t.v->stream_destroy(t.b, s[i]);
  t.v->live_counts(t.b, &counts);
  assert_int_equal(counts.live_streams, 0);
  assert_int_equal(counts.live_events, 0);
  assert_int_equal(counts.live_blocks, 8);  // Cached until trimmed.
  backend_destroy_checked(&t);
}

//===----------------------------------------------------------------------===//
// Environment and fault injection
//===----------------------------------------------------------------------===//

static void test_host_devices_env(void** state) {
  const char* saved = getenv("HIPLINE_HOST_DEVICES");
  char* copy = saved ? strdup(saved) : NULL;
  hl_backend_info_t info;
  assert_int_equal(setenv("HIPLINE_HOST_DEVICES", "3", 1), 0);
  HL_ASSERT_OK(hl_host_backend_query(&info));
  assert_true(info.available);
  assert_int_equal(info.device_count, 3);
  hl_device_properties_t props;
  HL_ASSERT_OK(hl_host_backend_device_properties(2, &props));
  HL_ASSERT_STATUS(hl_host_backend_device_properties(3, &props), OUT_OF_RANGE);

  static const char* const kBad[] = {"0", "abc", "65", "-1"};
  for (size_t i = 0; i < sizeof(kBad) / sizeof(kBad[0]); ++i) {
    assert_int_equal(setenv("HIPLINE_HOST_DEVICES", kBad[i], 1), 0);
    HL_ASSERT_OK(hl_host_backend_query(&info));
    assert_false(info.available);
    if (!strstr(info.reason, "HIPLINE_HOST_DEVICES")) {
      fail_msg("value '%s': reason '%s' does not name the variable", kBad[i],
               info.reason);
    }
    hl_backend_t* b = NULL;
    HL_ASSERT_STATUS(hl_host_backend_create(0, hl_allocator_system(), &b),
                     INVALID_ARGUMENT);
  }
  if (copy) {
    setenv("HIPLINE_HOST_DEVICES", copy, 1);
  } else {
    unsetenv("HIPLINE_HOST_DEVICES");
  }
  free(copy);
}

static void test_fault_alloc_fail_every(void** state) {
  test_backend_t t = backend_create();
  hl_backend_stream_t* s = stream_create(&t);
  hl_faults_t faults;
  memset(&faults, 0, sizeof(faults));
  faults.alloc_fail_every = 2;
  hl_faults_t previous = hl_faults_set(&faults);
  void* p[8];
  int ok = 0;
  for (int i = 1; i <= 8; ++i) {
    void* ptr = NULL;
    hl_status_t st = t.v->malloc_async(t.b, 4096, s, &ptr);
    if (i % 2 == 0) {
      assert_int_equal(hl_status_code(st), HL_STATUS_RESOURCE_EXHAUSTED);
      assert_null(ptr);
      hl_status_free(st);
    } else {
      HL_ASSERT_OK(st);
      p[ok++] = ptr;
    }
  }
  hl_faults_set(NULL);
  assert_int_equal(ok, 4);
  assert_int_equal(stats_of(&t).fail_count, 4);
  void* ptr = malloc_on(&t, 4096, s);  // Faults reset.
  p[ok++] = ptr;
  for (int i = 0; i < ok; ++i) HL_ASSERT_OK(t.v->free_async(t.b, p[i], s));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  hl_faults_set(&previous);
  if (!previous.alloc_fail_every && !previous.stream_delay_us &&
      !previous.fail_submission && !previous.fail_submission_every) {
    hl_faults_set(NULL);
  }
  t.v->stream_destroy(t.b, s);
  backend_destroy_checked(&t);
}

//===----------------------------------------------------------------------===//
// Runtime work on an idle stream (launch_runtime_func)
//===----------------------------------------------------------------------===//

// Forces HIPLINE_HOST_INLINE on for backends created until the returned
// copy of the previous value (or NULL) goes back with inline_env_restore.
static char* inline_env_force_on(void) {
  const char* v = getenv("HIPLINE_HOST_INLINE");
  char* previous = v ? strdup(v) : NULL;
  setenv("HIPLINE_HOST_INLINE", "1", 1);
  return previous;
}

static void inline_env_restore(char* previous) {
  if (previous) {
    setenv("HIPLINE_HOST_INLINE", previous, 1);
  } else {
    unsetenv("HIPLINE_HOST_INLINE");
  }
  free(previous);
}

// A host backend with inline runtime work on, whatever HIPLINE_HOST_INLINE
// says (the workers CI stage turns it off for everything else).
static test_backend_t backend_create_inline(void) {
  char* env = inline_env_force_on();
  test_backend_t t = backend_create();
  inline_env_restore(env);
  return t;
}

typedef struct inline_probe_t {
  thrd_t thread;
  atomic_int ran;
  // Set by nested_fn: it pushes a host function from inside runtime work,
  // then sleeps, so that function must wait for it.
  test_backend_t* t;
  hl_backend_stream_t* stream;
  probe_t* later;
  gate_t* done;
} inline_probe_t;

static void inline_probe_fn(void* user) {
  inline_probe_t* p = (inline_probe_t*)user;
  p->thread = thrd_current();
  atomic_store(&p->ran, 1);
}

static void nested_fn(void* user) {
  inline_probe_t* p = (inline_probe_t*)user;
  p->thread = thrd_current();
  HL_ASSERT_OK(
      p->t->v->launch_host_func(p->t->b, p->stream, probe_fn, p->later));
  struct timespec nap = {0, 20 * 1000 * 1000};
  thrd_sleep(&nap, NULL);
  atomic_store(&p->done->passed, 1);
  atomic_store(&p->ran, 1);
}

// On an idle stream, runtime work runs on the caller before the call
// returns, and an event recorded there is complete at once; on a busy
// stream both wait their turn; an item pushed while runtime work runs
// inline runs after it.
static void test_runtime_func_inline_when_idle(void** state) {
  test_backend_t t = backend_create_inline();
  hl_backend_stream_t* s = stream_create(&t);
  assert_non_null(t.v->launch_runtime_func);

  inline_probe_t idle;
  memset(&idle, 0, sizeof(idle));
  atomic_init(&idle.ran, 0);
  HL_ASSERT_OK(t.v->launch_runtime_func(t.b, s, inline_probe_fn, &idle));
  assert_int_equal(atomic_load(&idle.ran), 1);
  assert_true(thrd_equal(idle.thread, thrd_current()));
  hl_backend_event_t* e = event_create(&t);
  HL_ASSERT_OK(t.v->event_record(t.b, e, s));
  bool complete = false;
  HL_ASSERT_OK(t.v->event_query(t.b, e, &complete));
  assert_true(complete);

  // Busy: behind a closed gate, nothing runs inline, in order after it.
  gate_t gate;
  gate_init(&gate);
  HL_ASSERT_OK(t.v->launch_host_func(t.b, s, gate_fn, &gate));
  probe_t probe;
  probe.gate = &gate;
  atomic_init(&probe.ran, 0);
  atomic_init(&probe.observed, 0);
  HL_ASSERT_OK(t.v->launch_runtime_func(t.b, s, probe_fn, &probe));
  HL_ASSERT_OK(t.v->event_record(t.b, e, s));
  assert_int_equal(atomic_load(&probe.ran), 0);
  HL_ASSERT_OK(t.v->event_query(t.b, e, &complete));
  assert_false(complete);
  gate_open(&gate);
  HL_ASSERT_OK(t.v->event_synchronize(t.b, e));
  assert_int_equal(atomic_load(&probe.ran), 1);
  assert_int_equal(atomic_load(&probe.observed), 1);

  // Pushed from inside inline work: the worker waits for that work.
  gate_t done;
  gate_init(&done);
  probe_t later;
  later.gate = &done;
  atomic_init(&later.ran, 0);
  atomic_init(&later.observed, 0);
  inline_probe_t nested;
  memset(&nested, 0, sizeof(nested));
  atomic_init(&nested.ran, 0);
  nested.t = &t;
  nested.stream = s;
  nested.later = &later;
  nested.done = &done;
  HL_ASSERT_OK(t.v->launch_runtime_func(t.b, s, nested_fn, &nested));
  assert_int_equal(atomic_load(&nested.ran), 1);
  assert_true(thrd_equal(nested.thread, thrd_current()));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  assert_int_equal(atomic_load(&later.ran), 1);
  assert_int_equal(atomic_load(&later.observed), 1);

  gate_deinit(&gate);
  gate_deinit(&done);
  t.v->event_destroy(t.b, e);
  t.v->stream_destroy(t.b, s);
  backend_destroy_checked(&t);
}

// A stream claimed for a thread (stream_claim) runs the runtime work that
// thread launches at once, in stream order: work launched from inside
// claimed work goes after it, and after anything pushed behind the claim
// (by this thread or another) runtime work is queued too. A busy stream,
// or a second claim by the same thread, is refused.
typedef struct claim_order_t {
  atomic_int next;
  int at[8];  // at[id]: 1 + position.
  test_backend_t* t;
  hl_backend_stream_t* stream;
} claim_order_t;

typedef struct claim_step_t {
  claim_order_t* order;
  int id;
  int nested_id;  // >= 0: launches that step as runtime work, from inside.
  struct claim_step_t* nested;
} claim_step_t;

static void claim_step_fn(void* user) {
  claim_step_t* step = (claim_step_t*)user;
  // Not from work at the claim's point (nor on the worker).
  assert_false(step->order->t->v->stream_claim_intact(step->order->t->b,
                                                      step->order->stream));
  step->order->at[step->id] = 1 + atomic_fetch_add(&step->order->next, 1);
  if (step->nested) {
    HL_ASSERT_OK(step->order->t->v->launch_runtime_func(
        step->order->t->b, step->order->stream, claim_step_fn, step->nested));
    assert_int_equal(step->order->at[step->nested->id], 0);  // Not yet.
  }
}

typedef struct claim_pusher_t {
  test_backend_t* t;
  hl_backend_stream_t* stream;
  claim_step_t* step;
} claim_pusher_t;

static int claim_pusher_main(void* arg) {
  claim_pusher_t* p = (claim_pusher_t*)arg;
  HL_ASSERT_OK(
      p->t->v->launch_host_func(p->t->b, p->stream, claim_step_fn, p->step));
  return 0;
}

static void test_stream_claim_keeps_stream_order(void** state) {
  test_backend_t t = backend_create_inline();
  hl_backend_stream_t* s = stream_create(&t);
  assert_non_null(t.v->stream_claim);
  claim_order_t order;
  memset(&order, 0, sizeof(order));
  atomic_init(&order.next, 0);
  order.t = &t;
  order.stream = s;
  claim_step_t steps[8];
  for (int i = 0; i < 8; ++i) {
    steps[i].order = &order;
    steps[i].id = i;
    steps[i].nested = NULL;
  }
  steps[1].nested = &steps[2];

  // 0 runs at once; 1 runs at once and launches 2, which waits for it and
  // for the claim; 3 comes after 2.
  assert_false(t.v->stream_claim_intact(t.b, s));  // No claim yet.
  assert_true(t.v->stream_claim(t.b, s));
  assert_false(t.v->stream_claim(t.b, s));  // One claim per thread.
  assert_true(t.v->stream_claim_intact(t.b, s));
  HL_ASSERT_OK(t.v->launch_runtime_func(t.b, s, claim_step_fn, &steps[0]));
  assert_int_equal(order.at[0], 1);
  assert_true(t.v->stream_claim_intact(t.b, s));  // It ran at once.
  HL_ASSERT_OK(t.v->launch_runtime_func(t.b, s, claim_step_fn, &steps[1]));
  assert_int_equal(order.at[1], 2);
  assert_false(t.v->stream_claim_intact(t.b, s));  // 2 is queued behind.
  HL_ASSERT_OK(t.v->launch_runtime_func(t.b, s, claim_step_fn, &steps[3]));
  t.v->stream_unclaim(t.b, s);
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  assert_int_equal(order.at[2], 3);
  assert_int_equal(order.at[3], 4);

  // Another thread pushes 4 behind this thread's claim: it waits for the
  // claim, and runtime work launched after it (5) runs after it.
  assert_true(t.v->stream_claim(t.b, s));
  claim_pusher_t pusher = {&t, s, &steps[4]};
  thrd_t thread;
  assert_int_equal(thrd_create(&thread, claim_pusher_main, &pusher),
                   thrd_success);
  thrd_join(thread, NULL);
  assert_false(t.v->stream_claim_intact(t.b, s));  // 4 is behind it.
  struct timespec nap = {0, 5 * 1000 * 1000};
  thrd_sleep(&nap, NULL);
  assert_int_equal(order.at[4], 0);  // Held by the claim.
  HL_ASSERT_OK(t.v->launch_runtime_func(t.b, s, claim_step_fn, &steps[5]));
  t.v->stream_unclaim(t.b, s);
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  assert_int_equal(order.at[4], 5);
  assert_int_equal(order.at[5], 6);

  // A busy stream is not claimed.
  gate_t gate;
  gate_init(&gate);
  HL_ASSERT_OK(t.v->launch_host_func(t.b, s, gate_fn, &gate));
  assert_false(t.v->stream_claim(t.b, s));
  gate_open(&gate);
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  gate_deinit(&gate);
  t.v->stream_destroy(t.b, s);
  backend_destroy_checked(&t);
}

// HIPLINE_HOST_INLINE=0 keeps runtime work on the stream's worker; a value
// that is not a boolean fails device creation with the variable named.
static void test_runtime_func_inline_env(void** state) {
  char* previous = inline_env_force_on();
  setenv("HIPLINE_HOST_INLINE", "0", 1);
  test_backend_t t = backend_create();
  hl_backend_stream_t* s = stream_create(&t);
  inline_probe_t probe;
  memset(&probe, 0, sizeof(probe));
  atomic_init(&probe.ran, 0);
  HL_ASSERT_OK(t.v->launch_runtime_func(t.b, s, inline_probe_fn, &probe));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, s));
  assert_int_equal(atomic_load(&probe.ran), 1);
  assert_false(thrd_equal(probe.thread, thrd_current()));
  t.v->stream_destroy(t.b, s);
  backend_destroy_checked(&t);

  setenv("HIPLINE_HOST_INLINE", "sometimes", 1);
  hl_backend_t* b = NULL;
  hl_status_t st = hl_host_backend_create(0, hl_allocator_system(), &b);
  assert_int_equal(hl_status_code(st), HL_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hl_status_message(st), "HIPLINE_HOST_INLINE"));
  assert_null(b);
  hl_status_free(st);
  inline_env_restore(previous);
}

// Threads mixing runtime work and host functions on one stream: each
// thread's items run in the order it launched them, none twice, none lost,
// with and without fault-injection delays (which make a coin decide each
// inline run).
#define MIX_THREADS 3
#define MIX_ITEMS 400
typedef struct mix_entry_t {
  struct mix_log_t* log;
  int thread;
  int index;
} mix_entry_t;
typedef struct mix_log_t {
  mtx_t mutex;
  int next[MIX_THREADS];  // The index each thread's next item must have.
  atomic_int errors;
  atomic_int count;
} mix_log_t;
typedef struct mix_thread_t {
  test_backend_t* t;
  hl_backend_stream_t* stream;
  mix_entry_t entries[MIX_ITEMS];
  atomic_int launch_errors;
} mix_thread_t;

static void mix_fn(void* user) {
  mix_entry_t* e = (mix_entry_t*)user;
  mix_log_t* log = e->log;
  mtx_lock(&log->mutex);
  if (log->next[e->thread] != e->index) atomic_fetch_add(&log->errors, 1);
  log->next[e->thread] = e->index + 1;
  mtx_unlock(&log->mutex);
  atomic_fetch_add(&log->count, 1);
}

static int mix_main(void* arg) {
  mix_thread_t* m = (mix_thread_t*)arg;
  for (int i = 0; i < MIX_ITEMS; ++i) {
    hl_status_t st = (i % 3) ? m->t->v->launch_runtime_func(
                                   m->t->b, m->stream, mix_fn, &m->entries[i])
                             : m->t->v->launch_host_func(
                                   m->t->b, m->stream, mix_fn, &m->entries[i]);
    if (st) {
      atomic_fetch_add(&m->launch_errors, 1);
      hl_status_free(st);
    }
  }
  return 0;
}

static void run_mix(test_backend_t* t, uint32_t delay_us) {
  hl_faults_t faults;
  memset(&faults, 0, sizeof(faults));
  faults.stream_delay_us = delay_us;
  faults.seed = 7;
  hl_faults_t previous = hl_faults_set(&faults);
  hl_backend_stream_t* s = stream_create(t);  // Delays are read here.
  hl_faults_set(&previous);
  static mix_log_t log;
  static mix_thread_t threads[MIX_THREADS];
  memset(&log, 0, sizeof(log));
  assert_int_equal(mtx_init(&log.mutex, mtx_plain), thrd_success);
  thrd_t ids[MIX_THREADS];
  for (int k = 0; k < MIX_THREADS; ++k) {
    threads[k].t = t;
    threads[k].stream = s;
    atomic_init(&threads[k].launch_errors, 0);
    for (int i = 0; i < MIX_ITEMS; ++i) {
      threads[k].entries[i] = (mix_entry_t){&log, k, i};
    }
    assert_int_equal(thrd_create(&ids[k], mix_main, &threads[k]), thrd_success);
  }
  for (int k = 0; k < MIX_THREADS; ++k) thrd_join(ids[k], NULL);
  HL_ASSERT_OK(t->v->stream_synchronize(t->b, s));
  for (int k = 0; k < MIX_THREADS; ++k) {
    assert_int_equal(atomic_load(&threads[k].launch_errors), 0);
    assert_int_equal(log.next[k], MIX_ITEMS);
  }
  assert_int_equal(atomic_load(&log.errors), 0);
  assert_int_equal(atomic_load(&log.count), MIX_THREADS * MIX_ITEMS);
  mtx_destroy(&log.mutex);
  t->v->stream_destroy(t->b, s);
}

static void test_runtime_func_order_across_threads(void** state) {
  test_backend_t t = backend_create();
  run_mix(&t, 0);
  run_mix(&t, 30);
  backend_destroy_checked(&t);
}

// Runtime work running inline never blocks on another stream: a pool
// allocation whose only reusable block waits for another stream's free
// (internal dependencies) would have the caller wait for that stream, and
// the caller may be what that stream waits for (here the thread that opens
// its gate; elsewhere its own worker). Inline, the pool takes a fresh block.
typedef struct inline_alloc_t {
  test_backend_t* t;
  hl_backend_stream_t* stream;
  void* ptr;
  atomic_int done;
} inline_alloc_t;

static void inline_alloc_fn(void* user) {
  inline_alloc_t* a = (inline_alloc_t*)user;
  HL_ASSERT_OK(a->t->v->malloc_async(a->t->b, 4096, a->stream, &a->ptr));
}

static int inline_alloc_main(void* arg) {
  inline_alloc_t* a = (inline_alloc_t*)arg;
  HL_ASSERT_OK(
      a->t->v->launch_runtime_func(a->t->b, a->stream, inline_alloc_fn, a));
  atomic_store(&a->done, 1);
  return 0;
}

static void test_runtime_func_never_waits_on_other_streams(void** state) {
  test_backend_t t = backend_create_inline();
  set_reuse_flags(&t, HL_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES);
  hl_backend_stream_t* a = stream_create(&t);
  hl_backend_stream_t* b = stream_create(&t);
  gate_t gate;
  gate_init(&gate);
  HL_ASSERT_OK(t.v->launch_host_func(t.b, a, gate_fn, &gate));
  void* p = malloc_on(&t, 4096, a);
  HL_ASSERT_OK(t.v->free_async(t.b, p, a));  // Done once the gate opens.
  inline_alloc_t alloc;
  memset(&alloc, 0, sizeof(alloc));
  alloc.t = &t;
  alloc.stream = b;
  atomic_init(&alloc.done, 0);
  thrd_t thread;
  assert_int_equal(thrd_create(&thread, inline_alloc_main, &alloc),
                   thrd_success);
  // The gate opens only after the allocation returned, or after 2 s.
  for (int i = 0; i < 2000 && !atomic_load(&alloc.done); ++i) {
    hl_test_sleep_ms(1);
  }
  bool returned = atomic_load(&alloc.done);
  gate_open(&gate);
  thrd_join(thread, NULL);
  assert_true(returned);
  assert_non_null(alloc.ptr);
  assert_ptr_not_equal(alloc.ptr, p);
  HL_ASSERT_OK(t.v->free_async(t.b, alloc.ptr, b));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, a));
  HL_ASSERT_OK(t.v->stream_synchronize(t.b, b));
  t.v->stream_destroy(t.b, a);
  t.v->stream_destroy(t.b, b);
  gate_deinit(&gate);
  backend_destroy_checked(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_stream_reuse_immediate),
      cmocka_unit_test(test_cross_stream_event_dependency),
      cmocka_unit_test(test_cross_stream_opportunistic),
      cmocka_unit_test(test_cross_stream_no_flags),
      cmocka_unit_test(test_cross_stream_internal_dependency),
      cmocka_unit_test(test_release_threshold_and_trim),
      cmocka_unit_test(test_trim_keeps_pending_frees),
      cmocka_unit_test(test_limit_and_invalid_frees),
      cmocka_unit_test(test_events_order_streams),
      cmocka_unit_test(test_wait_captures_record),
      cmocka_unit_test(test_host_callbacks_in_order),
      cmocka_unit_test(test_copies_fills_kernels),
      cmocka_unit_test(test_stream_ordered_host_work),
      cmocka_unit_test(test_live_counts),
      cmocka_unit_test(test_host_devices_env),
      cmocka_unit_test(test_fault_alloc_fail_every),
      cmocka_unit_test(test_runtime_func_inline_when_idle),
      cmocka_unit_test(test_stream_claim_keeps_stream_order),
      cmocka_unit_test(test_runtime_func_inline_env),
      cmocka_unit_test(test_runtime_func_order_across_threads),
      cmocka_unit_test(test_runtime_func_never_waits_on_other_streams),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
