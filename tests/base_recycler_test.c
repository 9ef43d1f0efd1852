// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// runtime/base/recycler: objects come back zeroed, a thread's cache goes to
// the global list when the thread exits, the global list never holds more
// than its capacity, objects of a caller's allocator are never kept, and a
// producer/consumer pair of threads (the submitter/stream-worker shape)
// never sees an object handed out twice while it is live. Also the spin
// lock (runtime/base/spin.h) that guards the recyclers' global lists, the
// roots, the memory statistics and the host pool: it excludes, and a waiter
// gets it from a holder that sleeps (the yield path).
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <threads.h>

#include "runtime/base/recycler.h"
#include "runtime/base/spin.h"
#include "tests/test_util.h"

typedef struct object_t {
  uint64_t id;
  uint64_t check;
  uint8_t bytes[104];
} object_t;

#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer builds keep nothing (recycler.c): every free frees.
#define KEEPS 0
#else
#define KEEPS 1
#endif

static void* alloc_object(hl_recycler_t* r) {
  void* p = NULL;
  HL_ASSERT_OK(hl_recycler_alloc(r, hl_allocator_system(), &p));
  assert_non_null(p);
  return p;
}

static void test_objects_come_back_zeroed(void** state) {
  (void)state;
  static hl_recycler_t r =
      HL_RECYCLER_INITIALIZER(sizeof(object_t), 64, "a test object");
  object_t* a = alloc_object(&r);
  for (size_t i = 0; i < sizeof(*a); ++i) assert_int_equal(((uint8_t*)a)[i], 0);
  memset(a, 0xA5, sizeof(*a));
  hl_recycler_free(&r, a);
  object_t* b = alloc_object(&r);
  if (KEEPS) assert_ptr_equal(a, b);  // The thread's cache, last in first out.
  for (size_t i = 0; i < sizeof(*b); ++i) assert_int_equal(((uint8_t*)b)[i], 0);
  hl_recycler_free(&r, b);
  hl_recycler_free(&r, NULL);  // Nothing to do.
}

typedef struct churn_t {
  hl_recycler_t* r;
  int count;
} churn_t;

// Allocates |count| objects, frees them all, and exits.
static int churn_main(void* arg) {
  churn_t* c = (churn_t*)arg;
  void* objects[256];
  for (int i = 0; i < c->count; ++i) objects[i] = alloc_object(c->r);
  for (int i = 0; i < c->count; ++i) hl_recycler_free(c->r, objects[i]);
  return 0;
}

static void run_churn_thread(hl_recycler_t* r, int count) {
  churn_t c = {r, count};
  thrd_t t;
  assert_int_equal(thrd_create(&t, churn_main, &c), thrd_success);
  assert_int_equal(thrd_join(t, NULL), thrd_success);
}

static void test_thread_exit_returns_its_cache(void** state) {
  (void)state;
  static hl_recycler_t r =
      HL_RECYCLER_INITIALIZER(sizeof(object_t), 4096, "a test object");
  // 100 objects: some went to the global list in batches while the thread
  // ran, the rest sat in its cache until it exited.
  run_churn_thread(&r, 100);
  assert_int_equal(r.count, KEEPS ? 100 : 0);
  // Another thread takes them back before it allocates anything new.
  run_churn_thread(&r, 100);
  assert_int_equal(r.count, KEEPS ? 100 : 0);
}

static void test_capacity_bounds_the_global_list(void** state) {
  (void)state;
  static hl_recycler_t r =
      HL_RECYCLER_INITIALIZER(sizeof(object_t), 40, "a test object");
  for (int i = 0; i < 5; ++i) {
    run_churn_thread(&r, 200);
    assert_true(r.count <= 40);
  }
  if (KEEPS) assert_true(r.count > 0);
}

typedef struct counting_allocator_t {
  atomic_int allocs;
  atomic_int frees;
} counting_allocator_t;

static void* counting_alloc(void* self, size_t size) {
  atomic_fetch_add(&((counting_allocator_t*)self)->allocs, 1);
  return malloc(size);
}

static void counting_free(void* self, void* ptr) {
  atomic_fetch_add(&((counting_allocator_t*)self)->frees, 1);
  free(ptr);
}

static void test_caller_allocator_objects_are_not_kept(void** state) {
  (void)state;
  static hl_recycler_t r =
      HL_RECYCLER_INITIALIZER(sizeof(object_t), 64, "a test object");
  counting_allocator_t counts;
  atomic_init(&counts.allocs, 0);
  atomic_init(&counts.frees, 0);
  hl_allocator_t a = {&counts, counting_alloc, counting_free};
  for (int i = 0; i < 10; ++i) {
    void* p = NULL;
    HL_ASSERT_OK(hl_recycler_alloc(&r, a, &p));
    hl_recycler_free(&r, p);
  }
  // The hook saw every allocation and free; nothing stayed behind.
  assert_int_equal(atomic_load(&counts.allocs), 10);
  assert_int_equal(atomic_load(&counts.frees), 10);
  assert_int_equal(r.count, 0);
}

// A single-producer single-consumer ring of object pointers.
enum { kRing = 64 };
typedef struct pipe_t {
  hl_recycler_t* r;
  _Atomic(object_t*) slots[kRing];
  atomic_uint_least64_t head;  // Next slot to fill (producer).
  atomic_uint_least64_t tail;  // Next slot to drain (consumer).
  uint64_t total;
  atomic_int bad;
} pipe_t;

static int consumer_main(void* arg) {
  pipe_t* p = (pipe_t*)arg;
  for (uint64_t i = 0; i < p->total; ++i) {
    while (atomic_load(&p->head) == i) thrd_yield();
    object_t* o = atomic_load(&p->slots[i % kRing]);
    // The producer wrote id and check; an object handed out again while we
    // hold it would carry another id.
    if (o->id != i || o->check != ~i) atomic_fetch_add(&p->bad, 1);
    atomic_store(&p->tail, i + 1);
    hl_recycler_free(p->r, o);
  }
  return 0;
}

static void test_producer_consumer_never_shares_a_live_object(void** state) {
  (void)state;
  static hl_recycler_t r =
      HL_RECYCLER_INITIALIZER(sizeof(object_t), 256, "a test object");
  static pipe_t p;
  memset(&p, 0, sizeof(p));
  p.r = &r;
  p.total = hl_test_scale(200000, 20);
  thrd_t consumer;
  assert_int_equal(thrd_create(&consumer, consumer_main, &p), thrd_success);
  for (uint64_t i = 0; i < p.total; ++i) {
    while (i - atomic_load(&p.tail) >= kRing) thrd_yield();
    object_t* o = alloc_object(&r);
    if (o->id != 0 || o->check != 0) atomic_fetch_add(&p.bad, 1);  // Zeroed.
    o->id = i;
    o->check = ~i;
    atomic_store(&p.slots[i % kRing], o);
    atomic_store(&p.head, i + 1);
  }
  assert_int_equal(thrd_join(consumer, NULL), thrd_success);
  assert_int_equal(atomic_load(&p.bad), 0);
  assert_true(r.count <= 256);
}

typedef struct spin_counter_t {
  hl_spinlock_t lock;
  uint64_t value;  // Plain: only the lock orders the threads' updates.
  uint64_t rounds;
  atomic_int started;
} spin_counter_t;

static int spin_counter_main(void* arg) {
  spin_counter_t* c = arg;
  atomic_fetch_add(&c->started, 1);
  while (atomic_load(&c->started) < 4) thrd_yield();
  for (uint64_t i = 0; i < c->rounds; ++i) {
    hl_spinlock_lock(&c->lock);
    // Read, give the other threads a moment, write: without exclusion the
    // increments of the others are lost (and TSan reports the race).
    uint64_t v = c->value;
    if ((i & 63) == 0) thrd_yield();
    c->value = v + 1;
    hl_spinlock_unlock(&c->lock);
  }
  return 0;
}

static void test_spinlock_excludes(void** state) {
  (void)state;
  static spin_counter_t c;
  memset(&c, 0, sizeof(c));
  hl_spinlock_init(&c.lock);
  c.rounds = hl_test_scale(50000, 10);
  thrd_t threads[4];
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(thrd_create(&threads[i], spin_counter_main, &c),
                     thrd_success);
  }
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(thrd_join(threads[i], NULL), thrd_success);
  }
  assert_int_equal(c.value, 4 * c.rounds);
}

typedef struct spin_holder_t {
  hl_spinlock_t lock;
  atomic_bool held;
  atomic_bool released;
} spin_holder_t;

static int spin_holder_main(void* arg) {
  spin_holder_t* h = arg;
  hl_spinlock_lock(&h->lock);
  atomic_store(&h->held, true);
  // Long past the spinning phase: the waiter must be yielding by now.
  struct timespec ts = {0, 20 * 1000 * 1000};
  thrd_sleep(&ts, NULL);
  atomic_store(&h->released, true);
  hl_spinlock_unlock(&h->lock);
  return 0;
}

static void test_spinlock_waits_for_a_sleeping_holder(void** state) {
  (void)state;
  static spin_holder_t h;
  memset(&h, 0, sizeof(h));
  hl_spinlock_init(&h.lock);
  thrd_t holder;
  assert_int_equal(thrd_create(&holder, spin_holder_main, &h), thrd_success);
  while (!atomic_load(&h.held)) thrd_yield();
  hl_spinlock_lock(&h.lock);
  assert_true(atomic_load(&h.released));
  hl_spinlock_unlock(&h.lock);
  assert_int_equal(thrd_join(holder, NULL), thrd_success);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spinlock_excludes),
      cmocka_unit_test(test_spinlock_waits_for_a_sleeping_holder),
      cmocka_unit_test(test_objects_come_back_zeroed),
      cmocka_unit_test(test_thread_exit_returns_its_cache),
      cmocka_unit_test(test_capacity_bounds_the_global_list),
      cmocka_unit_test(test_caller_allocator_objects_are_not_kept),
      cmocka_unit_test(test_producer_consumer_never_shares_a_live_object),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
