// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The suballocator's per-queue caches (hl_sa_queue_t.cached): a queue takes
// back the block it freed last without a bin search; no other queue takes
// it before its free is reached or covered; trim, synchronization points
// and statistics bin it; statistics and the account stay what they are
// without the caches; checked mode still catches a use after free of a
// block that came back through a cache; and many queues at once (TSan).

#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "runtime/backend/host/host_internal.h"
#include "runtime/memory/memory_internal.h"
#include "runtime/memory/suballocator.h"
#include "tests/memory_util.h"

#define KIB ((uint64_t)1024)

//===----------------------------------------------------------------------===//
// The suballocator alone, over a host backend
//===----------------------------------------------------------------------===//

typedef struct cache_fixture_t {
  hl_backend_t* backend;
  hl_backend_stream_t* stream;
  hl_suballocator_t* sa;
  hl_semaphore_t* timelines[2];  // Stand-ins for two queues' timelines.
} cache_fixture_t;

static void fixture_init(cache_fixture_t* f) {
  memset(f, 0, sizeof(*f));
  HL_ASSERT_OK(hl_host_backend_create(0, hl_allocator_system(), &f->backend));
  HL_ASSERT_OK(f->backend->vtable->stream_create(f->backend, &f->stream));
  HL_ASSERT_OK(
      hl_suballocator_create(f->backend, UINT64_MAX, false, NULL, &f->sa));
  for (int i = 0; i < 2; ++i) {
    HL_ASSERT_OK(
        hl_semaphore_create(0, hl_allocator_system(), &f->timelines[i]));
  }
}

static void fixture_deinit(cache_fixture_t* f) {
  HL_ASSERT_OK(hl_suballocator_verify(f->sa));
  hl_suballocator_destroy(f->sa);
  f->backend->vtable->stream_destroy(f->backend, f->stream);
  HL_ASSERT_OK(f->backend->vtable->pool_trim(f->backend, 0));
  hl_backend_counts_t counts;
  f->backend->vtable->live_counts(f->backend, &counts);
  assert_int_equal(counts.live_blocks, 0);
  f->backend->vtable->destroy(f->backend);
  for (int i = 0; i < 2; ++i) hl_semaphore_release(f->timelines[i]);
}

static char* fx_alloc(cache_fixture_t* f, uint64_t size, uint32_t queue,
                      uint64_t value, hl_suballocation_t** out) {
  void* ptr = NULL;
  HL_ASSERT_OK(hl_suballocator_alloc(f->sa, size, f->stream, queue,
                                     f->timelines[queue], value, &ptr, out));
  assert_non_null(ptr);
  return ptr;
}

static void fx_free(cache_fixture_t* f, hl_suballocation_t* b, uint32_t queue,
                    uint64_t value) {
  hl_suballocator_free(f->sa, b, f->stream, queue, f->timelines[queue], value);
}

static hl_suballocator_stats_t fx_stats(cache_fixture_t* f) {
  hl_suballocator_stats_t s;
  hl_suballocator_stats(f->sa, &s);
  return s;
}

// A block its queue freed comes back to that queue's next request of the
// same rounded size (its free not yet reached: stream order covers it), and
// the suballocator's invariants hold while it is cached.
static void test_same_queue_takes_its_cached_block(void** state) {
  (void)state;
  cache_fixture_t f;
  fixture_init(&f);
  hl_suballocation_t *a, *guard, *again;
  char* pa = fx_alloc(&f, 4 * KIB, 0, 1, &a);
  fx_alloc(&f, 4 * KIB, 0, 2, &guard);
  uint64_t reuses = fx_stats(&f).block_reuses;
  fx_free(&f, a, 0, 5);  // Queue 0's timeline is at 0: not reached.
  assert_int_equal(hl_suballocator_cached_blocks(f.sa), 1);
  HL_ASSERT_OK(hl_suballocator_verify(f.sa));
  // 4 KiB - 100 rounds to the same 4 KiB.
  assert_ptr_equal(fx_alloc(&f, 4 * KIB - 100, 0, 6, &again), pa);
  assert_int_equal(hl_suballocator_cached_blocks(f.sa), 0);
  hl_suballocator_stats_t s = fx_stats(&f);
  assert_int_equal(s.block_reuses, reuses + 1);
  assert_int_equal(s.cross_queue_reuses, 0);
  assert_int_equal(s.used_bytes, 8 * KIB);
  hl_suballocator_account_t account;
  hl_suballocator_account(f.sa, &account);
  assert_int_equal(account.requested_bytes, 8 * KIB - 100);
  assert_int_equal(account.rounding_bytes, 100);
  fx_free(&f, again, 0, 7);
  fx_free(&f, guard, 0, 8);
  fixture_deinit(&f);
}

// Another queue does not take a cached block before its free is reached:
// it misses its own cache, which bins every cached block, and the bins then
// keep the block to its timepoint, as they do for any block.
static void test_other_queue_waits_for_the_cached_free(void** state) {
  (void)state;
  cache_fixture_t f;
  fixture_init(&f);
  hl_suballocation_t *a, *guard, *b, *c;
  char* pa = fx_alloc(&f, 4 * KIB, 0, 1, &a);
  fx_alloc(&f, 4 * KIB, 0, 2, &guard);
  HL_ASSERT_OK(hl_semaphore_signal(f.timelines[0], 2));
  fx_free(&f, a, 0, 5);
  assert_int_equal(hl_suballocator_cached_blocks(f.sa), 1);
  // 8 KiB: a slab of its own size, with no tail to serve 4 KiB later.
  char* pb = fx_alloc(&f, 8 * KIB, 1, 1, &b);
  assert_ptr_not_equal(pb, pa);
  assert_int_equal(hl_suballocator_cached_blocks(f.sa), 0);  // Binned.
  HL_ASSERT_OK(hl_semaphore_signal(f.timelines[0], 5));
  assert_ptr_equal(fx_alloc(&f, 4 * KIB, 1, 2, &c), pa);
  assert_int_equal(fx_stats(&f).cross_queue_reuses, 1);
  fx_free(&f, b, 1, 3);
  fx_free(&f, c, 1, 4);
  fx_free(&f, guard, 0, 6);
  fixture_deinit(&f);
}

// A request of another size bins the cached block first: it merges with
// its free neighbours and serves the request as it would without a cache.
static void test_other_size_bins_the_cached_block(void** state) {
  (void)state;
  cache_fixture_t f;
  fixture_init(&f);
  hl_suballocation_t *a, *b, *c;
  char* pa = fx_alloc(&f, 4 * KIB, 0, 1, &a);
  char* pb = fx_alloc(&f, 4 * KIB, 0, 2, &b);
  assert_ptr_equal(pb, pa + 4 * KIB);
  uint64_t slabs = fx_stats(&f).slab_allocs;
  fx_free(&f, a, 0, 3);
  fx_free(&f, b, 0, 4);  // a leaves the cache for the bins, b takes its place.
  assert_int_equal(hl_suballocator_cached_blocks(f.sa), 1);
  HL_ASSERT_OK(hl_suballocator_verify(f.sa));
  // 8 KiB: b is binned, merges with a (and the tail), and the merged block
  // serves it from the slab's start.
  assert_ptr_equal(fx_alloc(&f, 8 * KIB, 0, 5, &c), pa);
  assert_int_equal(hl_suballocator_cached_blocks(f.sa), 0);
  assert_int_equal(fx_stats(&f).slab_allocs, slabs);
  fx_free(&f, c, 0, 6);
  fixture_deinit(&f);
}

// Statistics and the account describe the pool as it is without the
// caches: a cached block is free bytes, merged with its free neighbours.
static void test_statistics_see_cached_blocks_as_free(void** state) {
  (void)state;
  cache_fixture_t f;
  fixture_init(&f);
  hl_suballocation_t *a, *guard;
  fx_alloc(&f, 4 * KIB, 0, 1, &guard);
  fx_alloc(&f, 4 * KIB, 0, 2, &a);
  fx_free(&f, a, 0, 3);
  assert_int_equal(hl_suballocator_cached_blocks(f.sa), 1);
  hl_suballocator_stats_t s = fx_stats(&f);
  assert_int_equal(hl_suballocator_cached_blocks(f.sa), 0);
  assert_int_equal(s.slabs, 1);
  assert_int_equal(s.used_bytes, 4 * KIB);
  assert_int_equal(s.used_bytes_peak, 8 * KIB);
  assert_int_equal(s.free_bytes, s.slab_bytes - 4 * KIB);
  // a merged with the slab's tail: one free block after the guard.
  assert_int_equal(s.largest_free_block, s.slab_bytes - 4 * KIB);
  hl_suballocator_account_t account;
  fx_alloc(&f, 4 * KIB, 0, 4, &a);
  fx_free(&f, a, 0, 5);
  hl_suballocator_account(f.sa, &account);
  assert_int_equal(account.requested_bytes, 4 * KIB);
  assert_int_equal(account.tail_bytes, s.slab_bytes - 4 * KIB);
  assert_int_equal(account.fragment_bytes, 0);
  fx_free(&f, guard, 0, 6);
  fixture_deinit(&f);
}

// trim bins the caches first: a slab whose only free block was cached goes
// back.
static void test_trim_empties_the_caches(void** state) {
  (void)state;
  cache_fixture_t f;
  fixture_init(&f);
  hl_suballocation_t* a;
  fx_alloc(&f, 4 * KIB, 0, 1, &a);
  fx_free(&f, a, 0, 2);
  HL_ASSERT_OK(hl_semaphore_signal(f.timelines[0], 2));
  assert_int_equal(hl_suballocator_cached_blocks(f.sa), 1);
  assert_int_equal(hl_suballocator_trim(f.sa, 0, NULL, HL_SUBALLOC_NO_QUEUE),
                   1);
  assert_int_equal(hl_suballocator_cached_blocks(f.sa), 0);
  hl_suballocator_stats_t s = fx_stats(&f);
  assert_int_equal(s.slabs, 0);
  assert_int_equal(s.slab_bytes, 0);
  fixture_deinit(&f);
}

//===----------------------------------------------------------------------===//
// Through queue_alloca (HIPLINE_ALLOCATOR=hipline, host backend)
//===----------------------------------------------------------------------===//

static hl_device_t* cache_device(int checked) {
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = HL_BACKEND_HOST;
  o.checked = checked;
  o.fallback = HL_FALLBACK_FRONTIER;
  o.pool_mode = HL_POOL_MODE_HIPLINE;
  hl_device_t* d = NULL;
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  return d;
}

static uint32_t device_cached_blocks(hl_device_t* d) {
  return hl_suballocator_cached_blocks(hl_memory_pool_suballocator(d));
}

// Quiet pairs of one size on one queue reuse one block through the cache,
// and the device's statistics count every alloca and free exactly; a
// synchronization point (wait_idle) and hl_device_trim bin the cache.
static void test_quiet_pairs_reuse_through_the_cache(void** state) {
  (void)state;
  hl_device_t* d = cache_device(0);
  hl_queue_t* q = hl_test_queue_create(d);
  // A 16 KiB slab, which serves everything below.
  hl_buffer_t* warm = mem_alloca(q, NULL, 0, NULL, 0, 16 * KIB);
  mem_dealloca(q, NULL, 0, NULL, 0, warm);
  hl_buffer_release(warm);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(device_cached_blocks(d), 0);
  hl_memory_stats_t before = hl_test_memory_stats(d);
  hl_buffer_t* outer = mem_alloca(q, NULL, 0, NULL, 0, 8 * KIB);
  hl_buffer_t* first = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
  hl_root_t* root = hl_buffer_root(first);
  void* ptr = atomic_load(&root->ptr);
  mem_dealloca(q, NULL, 0, NULL, 0, first);
  hl_buffer_release(first);
  assert_int_equal(device_cached_blocks(d), 1);
  const int pairs = 50;
  for (int i = 0; i < pairs; ++i) {
    hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
    assert_ptr_equal(atomic_load(&hl_buffer_root(b)->ptr), ptr);
    assert_int_equal(device_cached_blocks(d), 0);
    mem_dealloca(q, NULL, 0, NULL, 0, b);
    hl_buffer_release(b);
    assert_int_equal(device_cached_blocks(d), 1);
  }
  hl_memory_stats_t after = hl_test_memory_stats(d);
  assert_int_equal(after.allocas - before.allocas, pairs + 2);
  assert_int_equal(after.deallocas - before.deallocas, pairs + 1);
  assert_int_equal(after.bytes_in_use, 8 * KIB);
  assert_int_equal(after.bytes_in_use_peak, 16 * KIB);  // warm's.
  assert_int_equal(after.pool_used_bytes, 8 * KIB);
  assert_int_equal(after.pool_slab_allocs, before.pool_slab_allocs);
  assert_int_equal(after.pool_block_reuses - before.pool_block_reuses,
                   pairs + 2);
  // Statistics binned the cache; a pair fills it again, wait_idle bins it.
  assert_int_equal(device_cached_blocks(d), 0);
  hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
  mem_dealloca(q, NULL, 0, NULL, 0, b);
  hl_buffer_release(b);
  assert_int_equal(device_cached_blocks(d), 1);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(device_cached_blocks(d), 0);
  b = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
  mem_dealloca(q, NULL, 0, NULL, 0, b);
  hl_buffer_release(b);
  mem_dealloca(q, NULL, 0, NULL, 0, outer);
  hl_buffer_release(outer);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  b = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
  mem_dealloca(q, NULL, 0, NULL, 0, b);
  hl_buffer_release(b);
  assert_int_equal(device_cached_blocks(d), 1);
  HL_ASSERT_OK(hl_device_trim(d, 0));
  assert_int_equal(device_cached_blocks(d), 0);
  hl_memory_stats_t trimmed = hl_test_memory_stats(d);
  assert_int_equal(trimmed.pool_slabs, 0);
  assert_int_equal(trimmed.bytes_in_use, 0);
  HL_ASSERT_OK(hl_suballocator_verify(hl_memory_pool_suballocator(d)));
  hl_queue_release(q);
  hl_device_release(d);
}

// In checked mode a block that came back through the cache to a new alloca
// is still the old buffer's to lose: a use of the freed buffer fails with a
// use after free and leaves the new buffer's bytes alone.
static void test_checked_use_after_free_through_the_cache(void** state) {
  (void)state;
  hl_device_t* d = cache_device(1);
  hl_test_require_checked(d);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  hl_buffer_t* old = mem_alloca(q, NULL, 0, s, 1, 4 * KIB);
  mem_dealloca(q, s, 1, s, 2, old);
  mem_wait(s, 2);
  hl_buffer_t* fresh = mem_alloca(q, s, 2, s, 3, 4 * KIB);
  mem_wait(s, 3);
  assert_ptr_equal(atomic_load(&hl_buffer_root(fresh)->ptr),
                   atomic_load(&hl_buffer_root(old)->ptr));
  hl_fence_t* w = hl_test_fence(s, 3);
  hl_fence_t* sig = hl_test_fence(s, 4);
  HL_ASSERT_OK(hl_queue_fill(q, w, sig, fresh, 0, 4 * KIB, 0x12345678u));
  hl_fence_release(w);
  hl_fence_release(sig);
  mem_wait(s, 4);
  // The freed buffer: a use after free, which fails the queue.
  w = hl_test_fence(s, 4);
  sig = hl_test_fence(s, 5);
  HL_ASSERT_OK(hl_queue_fill(q, w, sig, old, 0, 4 * KIB, 0xDEADBEEFu));
  hl_fence_release(w);
  hl_fence_release(sig);
  hl_status_t st = hl_semaphore_wait(s, 5, MEM_DEADLINE());
  hl_test_assert_status_has(st, HL_STATUS_FAILED_PRECONDITION, "use after free",
                            NULL);
  assert_true(hl_test_memory_stats(d).use_after_free >= 1);
  const uint32_t* words = atomic_load(&hl_buffer_root(fresh)->ptr);
  for (uint64_t i = 0; i < 4 * KIB / 4; ++i) {
    assert_int_equal(words[i], 0x12345678u);
  }
  hl_buffer_release(old);
  hl_buffer_release(fresh);  // The queue failed: the fallback frees it.
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(d);
}

// Several queues, each on its own thread, run pairs of a few sizes (cache
// hits and misses that bin every queue's cache), while another thread reads
// statistics and trims: the invariants hold and every byte comes back.
typedef struct cache_worker_t {
  hl_device_t* device;
  int index;
} cache_worker_t;

static int cache_worker(void* user) {
  cache_worker_t* w = (cache_worker_t*)user;
  hl_queue_t* q = hl_test_queue_create(w->device);
  for (int i = 0; i < 2000; ++i) {
    uint64_t size = ((uint64_t)((i / 7 + w->index) % 3) + 1) * KIB;
    hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, size);
    mem_dealloca(q, NULL, 0, NULL, 0, b);
    hl_buffer_release(b);
    if (i % 500 == 499) HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  }
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  hl_queue_release(q);
  return 0;
}

typedef struct cache_observer_t {
  hl_device_t* device;
  atomic_int stop;
} cache_observer_t;

static int cache_observer(void* user) {
  cache_observer_t* o = (cache_observer_t*)user;
  while (!atomic_load(&o->stop)) {
    hl_memory_stats_t s = hl_test_memory_stats(o->device);
    assert_true(s.pool_used_bytes <= s.pool_slab_bytes);
    HL_ASSERT_OK(hl_device_trim(o->device, UINT64_MAX));
    thrd_yield();
  }
  return 0;
}

static void test_queues_at_once(void** state) {
  (void)state;
  hl_device_t* d = cache_device(0);
  enum { kWorkers = 3 };
  cache_worker_t workers[kWorkers];
  thrd_t threads[kWorkers];
  cache_observer_t observer = {d, 0};
  thrd_t observer_thread;
  assert_int_equal(thrd_create(&observer_thread, cache_observer, &observer),
                   thrd_success);
  for (int i = 0; i < kWorkers; ++i) {
    workers[i] = (cache_worker_t){d, i};
    assert_int_equal(thrd_create(&threads[i], cache_worker, &workers[i]),
                     thrd_success);
  }
  for (int i = 0; i < kWorkers; ++i) thrd_join(threads[i], NULL);
  atomic_store(&observer.stop, 1);
  thrd_join(observer_thread, NULL);
  HL_ASSERT_OK(hl_suballocator_verify(hl_memory_pool_suballocator(d)));
  hl_memory_stats_t s = hl_test_memory_stats(d);
  assert_int_equal(s.allocas, kWorkers * 2000);
  assert_int_equal(s.deallocas, kWorkers * 2000);
  assert_int_equal(s.bytes_in_use, 0);
  assert_int_equal(s.pool_used_bytes, 0);
  HL_ASSERT_OK(hl_device_trim(d, 0));
  assert_int_equal(hl_test_memory_stats(d).pool_slabs, 0);
  hl_device_release(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_queue_takes_its_cached_block),
      cmocka_unit_test(test_other_queue_waits_for_the_cached_free),
      cmocka_unit_test(test_other_size_bins_the_cached_block),
      cmocka_unit_test(test_statistics_see_cached_blocks_as_free),
      cmocka_unit_test(test_trim_empties_the_caches),
      cmocka_unit_test(test_quiet_pairs_reuse_through_the_cache),
      cmocka_unit_test(test_checked_use_after_free_through_the_cache),
      cmocka_unit_test(test_queues_at_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
