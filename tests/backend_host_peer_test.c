// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Peers on the host backend through the backend vtable: HIPLINE_HOST_PEERS
// (which devices reach each other), peer_enable, memcpy_peer_async refusing
// a device it was not enabled for, and a stream waiting on another
// device's event (a cross-device wait), which must not count as a
// dependency of this device's pool.

#include <stdatomic.h>
#include <stdlib.h>
#include <threads.h>

#include "runtime/backend/backend.h"
// C11 threads on pthreads under TSan (see tests/test_util.h).
#define HL_TEST_C11_THREADS_SHIM 1
#include "tests/test_util.h"

typedef struct gate_t {
  mtx_t mutex;
  cnd_t cond;
  bool open;
} gate_t;

static void gate_fn(void* user) {
  gate_t* g = user;
  mtx_lock(&g->mutex);
  while (!g->open) cnd_wait(&g->cond, &g->mutex);
  mtx_unlock(&g->mutex);
}

static void nothing_fn(void* user) { (void)user; }

static hl_backend_t* make_backend(int ordinal) {
  hl_backend_t* b = NULL;
  HL_ASSERT_OK(hl_host_backend_create(ordinal, hl_allocator_system(), &b));
  return b;
}

static hl_backend_stream_t* make_stream(hl_backend_t* b) {
  hl_backend_stream_t* s = NULL;
  HL_ASSERT_OK(b->vtable->stream_create(b, &s));
  return s;
}

static bool can_access(hl_backend_t* a, hl_backend_t* b) {
  bool can = false;
  HL_ASSERT_OK(a->vtable->peer_can_access(a, b, &can));
  return can;
}

static void test_peers_env(void** state) {
  (void)state;
  hl_backend_t* b[3] = {make_backend(0), make_backend(1), make_backend(2)};
  unsetenv("HIPLINE_HOST_PEERS");
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) assert_true(can_access(b[i], b[j]));
  }
  setenv("HIPLINE_HOST_PEERS", "0-2=off", 1);
  assert_false(can_access(b[0], b[2]));
  assert_false(can_access(b[2], b[0]));
  assert_true(can_access(b[0], b[1]));
  assert_true(can_access(b[1], b[2]));
  setenv("HIPLINE_HOST_PEERS", "all=off,1-2=on", 1);
  assert_false(can_access(b[0], b[1]));
  assert_true(can_access(b[2], b[1]));
  assert_true(can_access(b[0], b[0]));  // A device reaches itself.
  static const char* const kBad[] = {"0-0=off",  "x=off", "0-1=maybe",
                                     "0-64=off", "0-1",   "0-1=off,0-1=on",
                                     "0+1=off"};
  for (size_t i = 0; i < sizeof(kBad) / sizeof(*kBad); ++i) {
    setenv("HIPLINE_HOST_PEERS", kBad[i], 1);
    bool can = true;
    hl_status_t st = b[0]->vtable->peer_can_access(b[0], b[1], &can);
    if (hl_status_code(st) != HL_STATUS_INVALID_ARGUMENT ||
        !strstr(hl_status_message(st), "HIPLINE_HOST_PEERS")) {
      fail_msg("'%s': %s", kBad[i], st ? hl_status_message(st) : "OK");
    }
    hl_status_free(st);
    assert_false(can);
  }
  unsetenv("HIPLINE_HOST_PEERS");
  for (int i = 0; i < 3; ++i) b[i]->vtable->destroy(b[i]);
}

// A peer copy between devices this one was not enabled for is refused;
// once enabled it copies; an unreachable pair cannot be enabled.
static void test_memcpy_peer_needs_enable(void** state) {
  (void)state;
  setenv("HIPLINE_HOST_PEERS", "0-2=off", 1);
  hl_backend_t* b[3] = {make_backend(0), make_backend(1), make_backend(2)};
  const hl_backend_vtable_t* v = b[0]->vtable;
  hl_backend_stream_t* s = make_stream(b[0]);
  hl_backend_stream_t* s1 = make_stream(b[1]);
  void* mine = NULL;
  void* theirs = NULL;
  HL_ASSERT_OK(v->malloc_async(b[0], 64, s, &mine));
  HL_ASSERT_OK(b[1]->vtable->malloc_async(b[1], 64, s1, &theirs));
  HL_ASSERT_OK(b[1]->vtable->stream_synchronize(b[1], s1));
  memset(theirs, 0x5a, 64);
  HL_ASSERT_STATUS(v->memcpy_peer_async(b[0], mine, b[0], theirs, b[1], 64, s),
                   FAILED_PRECONDITION);
  HL_ASSERT_OK(v->peer_enable(b[0], b[1]));
  HL_ASSERT_OK(v->peer_enable(b[0], b[1]));  // Twice is fine.
  HL_ASSERT_OK(v->memcpy_peer_async(b[0], mine, b[0], theirs, b[1], 64, s));
  HL_ASSERT_OK(v->stream_synchronize(b[0], s));
  assert_int_equal(((unsigned char*)mine)[63], 0x5a);
  // Enabled one way only: device 1 still does not reach device 0.
  HL_ASSERT_STATUS(
      b[1]->vtable->memcpy_peer_async(b[1], theirs, b[1], mine, b[0], 64, s1),
      FAILED_PRECONDITION);
  HL_ASSERT_STATUS(v->peer_enable(b[0], b[2]), FAILED_PRECONDITION);
  HL_ASSERT_OK(v->free_async(b[0], mine, s));
  HL_ASSERT_OK(b[1]->vtable->free_async(b[1], theirs, s1));
  HL_ASSERT_OK(v->stream_synchronize(b[0], s));
  HL_ASSERT_OK(b[1]->vtable->stream_synchronize(b[1], s1));
  v->stream_destroy(b[0], s);
  b[1]->vtable->stream_destroy(b[1], s1);
  unsetenv("HIPLINE_HOST_PEERS");
  for (int i = 0; i < 3; ++i) b[i]->vtable->destroy(b[i]);
}

// Streams a (id 0) and b (id 1) of device 0, x and y (ids 0 and 1) of
// device 1. A block freed on b behind a closed gate; a waits on an event of
// y recorded after more items than b has: a knows nothing of b, so a must
// not reuse the block (it did, taking y's sequence for b's, before).
static void test_cross_device_wait_is_no_pool_dependency(void** state) {
  (void)state;
  hl_backend_t* d0 = make_backend(0);
  hl_backend_t* d1 = make_backend(1);
  const hl_backend_vtable_t* v = d0->vtable;
  hl_pool_attributes_t attrs;
  HL_ASSERT_OK(v->pool_get_attributes(d0, &attrs));
  attrs.reuse_flags = HL_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES;
  HL_ASSERT_OK(v->pool_set_attributes(d0, &attrs));
  hl_backend_stream_t* a = make_stream(d0);
  hl_backend_stream_t* b = make_stream(d0);
  hl_backend_stream_t* x = make_stream(d1);
  hl_backend_stream_t* y = make_stream(d1);
  gate_t gate = {.open = false};
  mtx_init(&gate.mutex, mtx_plain);
  cnd_init(&gate.cond);
  HL_ASSERT_OK(v->launch_host_func(d0, b, gate_fn, &gate));
  void* p = NULL;
  HL_ASSERT_OK(v->malloc_async(d0, 4096, b, &p));
  HL_ASSERT_OK(v->free_async(d0, p, b));
  for (int i = 0; i < 8; ++i) {
    HL_ASSERT_OK(d1->vtable->launch_host_func(d1, y, nothing_fn, NULL));
  }
  hl_backend_event_t* e = NULL;
  HL_ASSERT_OK(d1->vtable->event_create(d1, &e));
  HL_ASSERT_OK(d1->vtable->event_record(d1, e, y));
  HL_ASSERT_OK(v->stream_wait_event(d0, a, e));
  void* q = NULL;
  HL_ASSERT_OK(v->malloc_async(d0, 4096, a, &q));
  assert_ptr_not_equal(p, q);
  mtx_lock(&gate.mutex);
  gate.open = true;
  cnd_broadcast(&gate.cond);
  mtx_unlock(&gate.mutex);
  HL_ASSERT_OK(v->free_async(d0, q, a));
  HL_ASSERT_OK(v->stream_synchronize(d0, a));
  HL_ASSERT_OK(v->stream_synchronize(d0, b));
  d1->vtable->event_destroy(d1, e);
  v->stream_destroy(d0, a);
  v->stream_destroy(d0, b);
  d1->vtable->stream_destroy(d1, x);
  d1->vtable->stream_destroy(d1, y);
  mtx_destroy(&gate.mutex);
  cnd_destroy(&gate.cond);
  d0->vtable->destroy(d0);
  d1->vtable->destroy(d1);
}

int main(void) {
  setenv("HIPLINE_HOST_DEVICES", "3", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_peers_env),
      cmocka_unit_test(test_memcpy_peer_needs_enable),
      cmocka_unit_test(test_cross_device_wait_is_no_pool_dependency),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
