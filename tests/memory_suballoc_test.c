// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hipline's suballocator (runtime/memory/suballocator.h): splitting,
// coalescing, timeline-aware reuse across queues, trim, out of memory and a
// randomized run against a reference model (unit tests against a host
// backend, whatever the test backend), and the allocator behind queue_alloca
// (HIPLINE_ALLOCATOR=hipline) on the test backend (tests/test_util.h) with
// fill/verify across queues, in checked mode where the backend has it.
// HIPLINE_HOST_MEMORY is the host backend's own setting, tested there.

#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "runtime/backend/host/host_internal.h"
#include "runtime/memory/suballocator.h"
#include "tests/memory_util.h"

#define KIB ((uint64_t)1024)
#define MIB (1024 * KIB)

typedef struct sa_fixture_t {
  hl_backend_t* backend;
  hl_backend_stream_t* stream;
  hl_suballocator_t* sa;
  hl_semaphore_t* timelines[3];  // Stand-ins for three queues' timelines.
  hl_spinlock_t sa_lock;         // The suballocator's (for _locked calls).
} sa_fixture_t;

static void sa_fixture_init(sa_fixture_t* f, uint64_t limit_bytes) {
  memset(f, 0, sizeof(*f));
  hl_spinlock_init(&f->sa_lock);
  HL_ASSERT_OK(hl_host_backend_create(0, hl_allocator_system(), &f->backend));
  if (limit_bytes) {
    hl_pool_attributes_t attrs;
    HL_ASSERT_OK(f->backend->vtable->pool_get_attributes(f->backend, &attrs));
    attrs.limit_bytes = limit_bytes;
    HL_ASSERT_OK(f->backend->vtable->pool_set_attributes(f->backend, &attrs));
  }
  HL_ASSERT_OK(f->backend->vtable->stream_create(f->backend, &f->stream));
  HL_ASSERT_OK(hl_suballocator_create(f->backend, UINT64_MAX, false,
                                      &f->sa_lock, &f->sa));
  for (int i = 0; i < 3; ++i) {
    HL_ASSERT_OK(
        hl_semaphore_create(0, hl_allocator_system(), &f->timelines[i]));
  }
}

static void sa_fixture_deinit(sa_fixture_t* f) {
  HL_ASSERT_OK(hl_suballocator_verify(f->sa));
  hl_suballocator_destroy(f->sa);
  f->backend->vtable->stream_destroy(f->backend, f->stream);
  HL_ASSERT_OK(f->backend->vtable->pool_trim(f->backend, 0));
  hl_backend_counts_t counts;
  f->backend->vtable->live_counts(f->backend, &counts);
  assert_int_equal(counts.live_blocks, 0);  // Every slab went back.
  assert_int_equal(counts.live_streams, 0);
  f->backend->vtable->destroy(f->backend);
  for (int i = 0; i < 3; ++i) hl_semaphore_release(f->timelines[i]);
}

static char* sa_alloc(sa_fixture_t* f, uint64_t size, uint32_t queue,
                      uint64_t value, hl_suballocation_t** out) {
  void* ptr = NULL;
  HL_ASSERT_OK(hl_suballocator_alloc(f->sa, size, f->stream, queue,
                                     f->timelines[queue], value, &ptr, out));
  assert_non_null(ptr);
  assert_int_equal((uintptr_t)ptr % 256, 0);
  return ptr;
}

static hl_suballocator_stats_t sa_stats(sa_fixture_t* f) {
  hl_suballocator_stats_t s;
  hl_suballocator_stats(f->sa, &s);
  return s;
}

static uint64_t account_sum(const hl_suballocator_account_t* a) {
  return a->requested_bytes + a->rounding_bytes + a->tail_bytes +
         a->fragment_bytes + a->free_slab_bytes;
}

// Blocks split off one slab in address order, and frees coalesce back into
// one block whatever the order.
static void test_split_and_coalesce(void** state) {
  (void)state;
  sa_fixture_t f;
  sa_fixture_init(&f, 0);
  hl_suballocation_t *a, *b, *c;
  char* pa = sa_alloc(&f, 2 * KIB, 0, 1, &a);
  char* pb = sa_alloc(&f, 2 * KIB - 100, 0, 2, &b);  // Rounds to 2 KiB.
  char* pc = sa_alloc(&f, 2 * KIB, 0, 3, &c);
  assert_ptr_equal(pb, pa + 2 * KIB);
  assert_ptr_equal(pc, pb + 2 * KIB);
  hl_suballocator_stats_t s = sa_stats(&f);
  assert_int_equal(s.slabs, 1);
  assert_int_equal(s.slab_allocs, 1);
  assert_int_equal(s.used_bytes, 6 * KIB);
  uint64_t slab = s.slab_bytes;
  assert_true(slab >= 6 * KIB);
  HL_ASSERT_OK(hl_suballocator_verify(f.sa));
  // Free the middle: a hole of 16 KiB between two live blocks.
  hl_suballocator_free(f.sa, b, f.stream, 0, NULL, 0);
  s = sa_stats(&f);
  assert_int_equal(s.free_bytes, slab - 4 * KIB);
  assert_int_equal(s.largest_free_block, slab - 6 * KIB);
  // The hole is reused exactly (best fit), with no backend call.
  hl_suballocation_t* b2;
  assert_ptr_equal(sa_alloc(&f, 2 * KIB, 0, 4, &b2), pb);
  assert_int_equal(sa_stats(&f).slab_allocs, 1);
  assert_true(sa_stats(&f).block_reuses >= 1);
  hl_suballocator_free(f.sa, b2, f.stream, 0, NULL, 0);
  hl_suballocator_free(f.sa, a, f.stream, 0, NULL, 0);
  HL_ASSERT_OK(hl_suballocator_verify(f.sa));
  // a and b merged: a 32 KiB block at pa serves a 32 KiB request.
  hl_suballocation_t* ab;
  assert_ptr_equal(sa_alloc(&f, 4 * KIB, 0, 5, &ab), pa);
  hl_suballocator_free(f.sa, ab, f.stream, 0, NULL, 0);
  hl_suballocator_free(f.sa, c, f.stream, 0, NULL, 0);
  s = sa_stats(&f);
  assert_int_equal(s.used_bytes, 0);
  assert_int_equal(s.largest_free_block, slab);  // One block again.
  HL_ASSERT_OK(hl_suballocator_verify(f.sa));
  sa_fixture_deinit(&f);
}

// A block freed by queue 0 at timepoint 5 is reused by queue 0 at once, by
// queue 1 only after queue 0's timeline reaches 5.
static void test_cross_queue_reuse_waits_for_timepoint(void** state) {
  (void)state;
  sa_fixture_t f;
  sa_fixture_init(&f, 0);
  // A 64 KiB request gets a 64 KiB first slab: one block fills it.
  hl_suballocation_t *x, *y, *z;
  char* px = sa_alloc(&f, 64 * KIB, 0, 1, &x);
  assert_int_equal(sa_stats(&f).slab_bytes, 64 * KIB);
  hl_suballocator_free(f.sa, x, f.stream, 0, f.timelines[0], 5);
  assert_int_equal(sa_stats(&f).pending_free_blocks, 1);
  // Queue 1: the free is not reached, so it must not get px.
  char* py = sa_alloc(&f, 64 * KIB, 1, 1, &y);
  assert_ptr_not_equal(py, px);
  hl_suballocator_stats_t s = sa_stats(&f);
  assert_int_equal(s.slabs, 2);
  assert_true(s.pending_skips >= 1);
  // Queue 0 itself reuses it at once (stream order).
  char* pz = sa_alloc(&f, 64 * KIB, 0, 6, &z);
  assert_ptr_equal(pz, px);
  hl_suballocator_free(f.sa, z, f.stream, 0, f.timelines[0], 7);
  // Still not reached at 6.
  HL_ASSERT_OK(hl_semaphore_signal(f.timelines[0], 6));
  hl_suballocation_t* w;
  char* pw = sa_alloc(&f, 64 * KIB, 1, 2, &w);
  assert_ptr_not_equal(pw, px);
  // Reached: queue 1 takes it.
  HL_ASSERT_OK(hl_semaphore_signal(f.timelines[0], 7));
  hl_suballocation_t* v;
  assert_ptr_equal(sa_alloc(&f, 64 * KIB, 1, 3, &v), px);
  assert_true(sa_stats(&f).cross_queue_reuses >= 1);
  assert_int_equal(sa_stats(&f).pending_free_blocks, 0);
  hl_suballocator_free(f.sa, v, f.stream, 1, NULL, 0);
  hl_suballocator_free(f.sa, w, f.stream, 1, NULL, 0);
  hl_suballocator_free(f.sa, y, f.stream, 1, NULL, 0);
  sa_fixture_deinit(&f);
}

static char* sa_alloc_covered(sa_fixture_t* f, uint64_t size, uint32_t queue,
                              uint64_t value, const hl_timepoint_id_t* cover,
                              hl_suballocation_t** out) {
  void* ptr = NULL;
  hl_suballoc_cover_t c = {cover, 1};
  HL_ASSERT_OK(hl_suballocator_alloc_covered(f->sa, size, f->stream, queue,
                                             f->timelines[queue], value, &c,
                                             &ptr, out));
  assert_non_null(ptr);
  return ptr;
}

static void sa_free_signalled(sa_fixture_t* f, hl_suballocation_t* b,
                              uint32_t queue, uint64_t value,
                              hl_semaphore_t* signal, uint64_t signal_value) {
  hl_suballocator_poison(f->sa, b);
  hl_spinlock_lock(&f->sa_lock);
  hl_suballocator_free_signalled_locked(f->sa, b, f->stream, queue,
                                        f->timelines[queue], value, signal->id,
                                        signal_value);
  hl_spinlock_unlock(&f->sa_lock);
}

// Reuse behind the wait frontier: queue 1 takes a block queue 0 freed (not
// yet reached) when its cover names the free's signal or queue 0's timeline
// at the free, and not for anything less. Two neighbours freed by queue 0
// merge into one block that needs the later free: covering only the
// earlier one's signal is not enough.
static void test_covered_reuse_needs_the_later_free(void** state) {
  (void)state;
  sa_fixture_t f;
  sa_fixture_init(&f, 0);
  hl_semaphore_t* early = hl_test_semaphore_create();
  hl_semaphore_t* late = hl_test_semaphore_create();
  hl_suballocation_t *a, *b, *guard, *y;
  char* pa = sa_alloc(&f, 2 * KIB, 0, 1, &a);
  char* pb = sa_alloc(&f, 2 * KIB, 0, 2, &b);
  assert_ptr_equal(pb, pa + 2 * KIB);
  sa_alloc(&f, 2 * KIB, 0, 3, &guard);
  HL_ASSERT_OK(hl_semaphore_signal(f.timelines[0], 3));
  sa_free_signalled(&f, a, 0, 5, early, 1);
  sa_free_signalled(&f, b, 0, 7, late, 1);
  // Covers a's free only: the merged block is not reusable.
  hl_timepoint_id_t cover = {early->id, 1};
  char* py = sa_alloc_covered(&f, 4 * KIB, 1, 1, &cover, &y);
  assert_ptr_not_equal(py, pa);
  hl_suballocator_free(f.sa, y, f.stream, 1, NULL, 0);
  cover = (hl_timepoint_id_t){f.timelines[0]->id, 6};
  assert_ptr_not_equal(sa_alloc_covered(&f, 4 * KIB, 1, 2, &cover, &y), pa);
  hl_suballocator_free(f.sa, y, f.stream, 1, NULL, 0);
  // Covers the later free, by its signal or by queue 0's timeline.
  cover = (hl_timepoint_id_t){late->id, 1};
  assert_ptr_equal(sa_alloc_covered(&f, 4 * KIB, 1, 3, &cover, &y), pa);
  sa_free_signalled(&f, y, 1, 4, late, 2);
  cover = (hl_timepoint_id_t){f.timelines[1]->id, 4};
  assert_ptr_equal(sa_alloc_covered(&f, 4 * KIB, 2, 1, &cover, &y), pa);
  assert_int_equal(hl_semaphore_value(f.timelines[0]), 3);  // Never reached.
  hl_suballocator_free(f.sa, y, f.stream, 2, NULL, 0);
  hl_suballocator_free(f.sa, guard, f.stream, 0, NULL, 0);
  hl_semaphore_release(early);
  hl_semaphore_release(late);
  sa_fixture_deinit(&f);
}

// A fresh slab's tail carries the creating alloca's timepoint: the driver
// made the slab valid for that stream only.
static void test_fresh_slab_tail_is_stream_ordered(void** state) {
  (void)state;
  sa_fixture_t f;
  sa_fixture_init(&f, 0);
  hl_suballocation_t *a, *b, *c;
  char* pa = sa_alloc(&f, 4 * KIB, 0, 3, &a);  // 8 KiB slab, tail pending.
  uint64_t slab = sa_stats(&f).slab_bytes;
  assert_true(slab > 4 * KIB);
  char* pb = sa_alloc(&f, 4 * KIB, 1, 1, &b);
  assert_true(pb < pa || pb >= pa + slab);  // Not from queue 0's slab.
  HL_ASSERT_OK(hl_semaphore_signal(f.timelines[0], 3));
  char* pc = sa_alloc(&f, 4 * KIB, 2, 1, &c);
  assert_true(pc >= pa && pc < pa + slab);
  hl_suballocator_free(f.sa, a, f.stream, 0, NULL, 0);
  hl_suballocator_free(f.sa, b, f.stream, 1, NULL, 0);
  hl_suballocator_free(f.sa, c, f.stream, 2, NULL, 0);
  sa_fixture_deinit(&f);
}

// A large slab holds a whole number of copies of the request that grew it
// (the fewest that reach the geometric target), and a request above 20 MiB
// gets a slab of exactly its rounded size: no tail left by a fixed slab size
// or by 2 MiB rounding.
static void test_slabs_fit_the_request_that_grew_them(void** state) {
  (void)state;
  sa_fixture_t f;
  sa_fixture_init(&f, 0);
  hl_suballocation_t *a, *b, *big, *c, *d;
  // Empty pool: target 2 MiB; 1.5 MiB twice makes a 3 MiB slab, full.
  char* pa = sa_alloc(&f, 1536 * KIB, 0, 1, &a);
  char* pb = sa_alloc(&f, 1536 * KIB, 0, 2, &b);
  assert_ptr_equal(pb, pa + 1536 * KIB);
  hl_suballocator_stats_t s = sa_stats(&f);
  assert_int_equal(s.slabs, 1);
  assert_int_equal(s.slab_bytes, 3 * MIB);
  // 200 MiB + 100 B: a slab of its own, rounded to 256 B only.
  sa_alloc(&f, 200 * MIB + 100, 0, 3, &big);
  s = sa_stats(&f);
  assert_int_equal(s.slabs, 2);
  assert_int_equal(s.slab_bytes, 3 * MIB + 200 * MIB + 256);
  // The pool holds over 128 MiB: the target is 40 MiB, and a 6 MiB request
  // gets 7 copies (42 MiB); 3 MiB more fits in the same slab.
  sa_alloc(&f, 6 * MIB, 0, 4, &c);
  s = sa_stats(&f);
  assert_int_equal(s.slab_bytes, 3 * MIB + 200 * MIB + 256 + 42 * MIB);
  sa_alloc(&f, 3 * MIB, 0, 5, &d);
  assert_int_equal(sa_stats(&f).slabs, 3);
  hl_suballocation_t* all[] = {a, b, big, c, d};
  for (int i = 0; i < 5; ++i) {
    hl_suballocator_free(f.sa, all[i], f.stream, 0, NULL, 0);
  }
  sa_fixture_deinit(&f);
}

// The account puts every slab byte in one part: requested, rounding, the
// free end of a slab in use, other free blocks of slabs in use, and slabs
// with nothing live; the peak account is the one taken when the slab bytes
// last reached a new peak.
static void test_account_parts_sum_to_the_slabs(void** state) {
  (void)state;
  sa_fixture_t f;
  sa_fixture_init(&f, 0);
  hl_suballocation_t *a, *b, *c, *d;
  // An 8 KiB small slab: a (1000 B -> 1 KiB), b, c (2 KiB each).
  sa_alloc(&f, 1000, 0, 1, &a);
  hl_suballocator_account_t peak = sa_stats(&f).peak_account;
  assert_int_equal(peak.slab_bytes, 8 * KIB);
  assert_int_equal(peak.requested_bytes, 1000);
  assert_int_equal(peak.rounding_bytes, 24);
  assert_int_equal(peak.tail_bytes, 7 * KIB);
  assert_int_equal(account_sum(&peak), peak.slab_bytes);
  sa_alloc(&f, 2 * KIB, 0, 2, &b);
  sa_alloc(&f, 2 * KIB, 0, 3, &c);
  hl_suballocator_free(f.sa, b, f.stream, 0, NULL, 0);
  // A 1.5 MiB request grows a 3 MiB large slab: a new peak.
  sa_alloc(&f, 1536 * KIB, 0, 4, &d);
  peak = sa_stats(&f).peak_account;
  assert_int_equal(peak.slab_bytes, 8 * KIB + 3 * MIB);
  assert_int_equal(peak.requested_bytes, 1000 + 2 * KIB + 1536 * KIB);
  assert_int_equal(peak.rounding_bytes, 24);
  assert_int_equal(peak.tail_bytes, 3 * KIB + 1536 * KIB);
  assert_int_equal(peak.fragment_bytes, 2 * KIB);
  assert_int_equal(peak.free_slab_bytes, 0);
  assert_int_equal(account_sum(&peak), peak.slab_bytes);
  // Freed, the large slab is held whole until trimmed.
  hl_suballocator_free(f.sa, d, f.stream, 0, NULL, 0);
  hl_suballocator_account_t now;
  hl_suballocator_account(f.sa, &now);
  assert_int_equal(now.slab_bytes, 8 * KIB + 3 * MIB);
  assert_int_equal(now.free_slab_bytes, 3 * MIB);
  assert_int_equal(now.fragment_bytes, 2 * KIB);
  assert_int_equal(now.tail_bytes, 3 * KIB);
  assert_int_equal(account_sum(&now), now.slab_bytes);
  // The peak account stays the peak's.
  assert_int_equal(sa_stats(&f).peak_account.free_slab_bytes, 0);
  hl_suballocator_free(f.sa, a, f.stream, 0, NULL, 0);
  hl_suballocator_free(f.sa, c, f.stream, 0, NULL, 0);
  hl_suballocator_account(f.sa, &now);
  assert_int_equal(now.free_slab_bytes, now.slab_bytes);
  assert_int_equal(account_sum(&now), now.slab_bytes);
  sa_fixture_deinit(&f);
}

// Trim gives whole free slabs back (only those), down to what is asked.
static void test_trim_releases_whole_free_slabs(void** state) {
  (void)state;
  sa_fixture_t f;
  sa_fixture_init(&f, 0);
  hl_suballocation_t* big[3];
  for (int i = 0; i < 3; ++i) sa_alloc(&f, 24 * MIB, 0, 1, &big[i]);
  hl_suballocator_stats_t s = sa_stats(&f);
  assert_int_equal(s.slabs, 3);  // Above 20 MiB: a slab each.
  assert_int_equal(s.slab_bytes, 3 * 24 * MIB);
  hl_suballocator_free(f.sa, big[0], f.stream, 0, NULL, 0);
  hl_suballocator_free(f.sa, big[1], f.stream, 0, f.timelines[0], 9);
  // Keep 48 MiB: one free slab goes; the one pending on queue 0 stays when
  // trimming from outside its stream.
  assert_int_equal(hl_suballocator_trim(f.sa, 0, NULL, HL_SUBALLOC_NO_QUEUE),
                   1);
  s = sa_stats(&f);
  assert_int_equal(s.slabs, 2);
  assert_int_equal(s.slab_releases, 1);
  // Queue 0's own stream may give it back.
  assert_int_equal(hl_suballocator_trim(f.sa, 0, f.stream, 0), 1);
  assert_int_equal(sa_stats(&f).slabs, 1);
  // Live memory is never trimmed.
  assert_int_equal(hl_suballocator_trim(f.sa, 0, f.stream, 0), 0);
  hl_suballocator_free(f.sa, big[2], f.stream, 0, NULL, 0);
  assert_int_equal(hl_suballocator_trim(f.sa, 0, NULL, HL_SUBALLOC_NO_QUEUE),
                   1);
  s = sa_stats(&f);
  assert_int_equal(s.slabs, 0);
  assert_int_equal(s.slab_bytes, 0);
  assert_int_equal(s.slab_bytes_peak, 3 * 24 * MIB);
  sa_fixture_deinit(&f);
}

// Out of memory: trim and retry with an exact-size slab, then
// RESOURCE_EXHAUSTED naming the sizes.
static void test_oom_trims_then_fails_with_sizes(void** state) {
  (void)state;
  sa_fixture_t f;
  sa_fixture_init(&f, 1 * MIB);
  hl_suballocation_t *a, *b;
  sa_alloc(&f, 256 * KIB, 0, 1, &a);
  hl_suballocator_free(f.sa, a, f.stream, 0, NULL, 0);
  // 900 KiB would get a 1 MiB slab, which does not fit next to the free
  // 256 KiB slab: trim gives that back, and an exact-size slab fits.
  sa_alloc(&f, 900 * KIB, 0, 2, &b);
  hl_suballocator_stats_t s = sa_stats(&f);
  assert_int_equal(s.slabs, 1);
  assert_int_equal(s.slab_releases, 1);
  void* ptr = NULL;
  hl_suballocation_t* c = NULL;
  hl_status_t st = hl_suballocator_alloc(f.sa, 512 * KIB, f.stream, 0,
                                         f.timelines[0], 3, &ptr, &c);
  hl_test_assert_status_has(st, HL_STATUS_RESOURCE_EXHAUSTED, "524288",
                            "after trim and retry");
  assert_null(ptr);
  assert_null(c);
  HL_ASSERT_STATUS(
      hl_suballocator_alloc(f.sa, 0, f.stream, 0, NULL, 0, &ptr, &c),
      INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_suballocator_alloc(f.sa, ((uint64_t)1 << 48) + 1,
                                         f.stream, 0, NULL, 0, &ptr, &c),
                   INVALID_ARGUMENT);
  hl_suballocator_free(f.sa, b, f.stream, 0, NULL, 0);
  sa_fixture_deinit(&f);
}

//===----------------------------------------------------------------------===//
// Randomized against a reference model
//===----------------------------------------------------------------------===//

typedef struct model_live_t {
  hl_suballocation_t* allocation;
  char* ptr;
  uint64_t size;  // Rounded.
  uint32_t queue;
} model_live_t;

typedef struct model_free_t {
  char* ptr;
  uint64_t size;
  uint32_t queue;
  uint64_t value;
} model_free_t;

static uint64_t rng_next(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static bool overlaps(const char* a, uint64_t an, const char* b, uint64_t bn) {
  return a < b + bn && b < a + an;
}

static void test_randomized_against_model(void** state) {
  (void)state;
  sa_fixture_t f;
  sa_fixture_init(&f, 0);
  enum { kLive = 64, kFrees = 256 };
  model_live_t live[kLive];
  model_free_t frees[kFrees];
  int live_count = 0, free_count = 0;
  uint64_t next_value[3] = {1, 1, 1};
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  const int steps = (int)hl_test_scale(20000, 4);
  for (int step = 0; step < steps; ++step) {
    uint64_t r = rng_next(&seed);
    uint32_t q = (uint32_t)(r % 3);
    int action = (int)((r >> 8) % 10);
    if (action < 5 && live_count < kLive) {
      uint64_t size;
      uint64_t k = (r >> 16) % 100;
      if (k < 70) {
        size = 1 + (r >> 24) % (64 * KIB);
      } else if (k < 97) {
        size = 1 + (r >> 24) % (4 * MIB);
      } else {
        size = 1 + (r >> 24) % (30 * MIB);
      }
      hl_suballocation_t* a = NULL;
      char* p = sa_alloc(&f, size, q, next_value[q]++, &a);
      uint64_t rounded = (size + 255) & ~(uint64_t)255;
      for (int i = 0; i < live_count; ++i) {
        if (overlaps(p, rounded, live[i].ptr, live[i].size)) {
          fail_msg("step %d: [%p,+%llu) overlaps a live block", step, p,
                   (unsigned long long)rounded);
        }
      }
      for (int i = 0; i < free_count;) {
        if (!overlaps(p, rounded, frees[i].ptr, frees[i].size)) {
          ++i;
          continue;
        }
        uint64_t reached = 0;
        HL_ASSERT_OK(hl_semaphore_query(f.timelines[frees[i].queue], &reached));
        if (frees[i].queue != q && reached < frees[i].value) {
          fail_msg(
              "step %d: queue %u got memory queue %u freed at %llu, "
              "reached only %llu",
              step, q, frees[i].queue, (unsigned long long)frees[i].value,
              (unsigned long long)reached);
        }
        frees[i] = frees[--free_count];  // Superseded by the new owner.
      }
      live[live_count++] = (model_live_t){a, p, rounded, q};
    } else if (action < 8 && live_count > 0) {
      int i = (int)((r >> 16) % (uint64_t)live_count);
      model_live_t l = live[i];
      live[i] = live[--live_count];
      bool stamped = ((r >> 40) & 3) != 0;
      uint64_t value = next_value[l.queue]++;
      hl_suballocator_free(f.sa, l.allocation, f.stream, l.queue,
                           stamped ? f.timelines[l.queue] : NULL, value);
      if (stamped) {
        if (free_count == kFrees) frees[0] = frees[--free_count];
        frees[free_count++] = (model_free_t){l.ptr, l.size, l.queue, value};
      }
    } else {
      // A queue's timeline moves on to some of what was submitted.
      uint64_t current = 0;
      HL_ASSERT_OK(hl_semaphore_query(f.timelines[q], &current));
      uint64_t target = current + 1 + (r >> 16) % 8;
      if (target < next_value[q]) {
        HL_ASSERT_OK(hl_semaphore_signal(f.timelines[q], target));
      }
    }
    if (step % 64 == 0) HL_ASSERT_OK(hl_suballocator_verify(f.sa));
    if (step % 1000 == 999) {
      hl_suballocator_trim(f.sa, 0, NULL, HL_SUBALLOC_NO_QUEUE);
    }
    uint64_t used = 0;
    for (int i = 0; i < live_count; ++i) used += live[i].size;
    hl_suballocator_stats_t now = sa_stats(&f);
    assert_int_equal(now.used_bytes, used);
    if (step % 64 == 0) {
      // The account's parts sum to the slabs, now and at the peak.
      hl_suballocator_account_t a;
      hl_suballocator_account(f.sa, &a);
      assert_int_equal(a.slab_bytes, now.slab_bytes);
      assert_int_equal(a.requested_bytes + a.rounding_bytes, used);
      assert_int_equal(account_sum(&a), a.slab_bytes);
      assert_int_equal(now.peak_account.slab_bytes, now.slab_bytes_peak);
      assert_int_equal(account_sum(&now.peak_account),
                       now.peak_account.slab_bytes);
    }
  }
  for (int i = 0; i < live_count; ++i) {
    hl_suballocator_free(f.sa, live[i].allocation, f.stream, live[i].queue,
                         NULL, 0);
  }
  HL_ASSERT_OK(hl_suballocator_verify(f.sa));
  hl_suballocator_stats_t s = sa_stats(&f);
  print_message(
      "random: %llu slab allocs, %llu reuses (%llu cross-queue), "
      "%llu skips, peak %llu slab bytes for %llu used\n",
      (unsigned long long)s.slab_allocs, (unsigned long long)s.block_reuses,
      (unsigned long long)s.cross_queue_reuses,
      (unsigned long long)s.pending_skips,
      (unsigned long long)s.slab_bytes_peak,
      (unsigned long long)s.used_bytes_peak);
  assert_true(s.block_reuses > s.slab_allocs);
  assert_true(s.cross_queue_reuses > 0);
  assert_true(s.pending_skips > 0);
  assert_int_equal(s.used_bytes, 0);
  // Frees not yet reached keep their slabs from outside the stream...
  hl_suballocator_trim(f.sa, 0, NULL, HL_SUBALLOC_NO_QUEUE);
  assert_true(sa_stats(&f).pending_free_blocks > 0);
  assert_true(sa_stats(&f).slabs > 0);
  // ...until every timeline reaches its last free: then all of it goes.
  for (int k = 0; k < 3; ++k) {
    uint64_t current = 0;
    HL_ASSERT_OK(hl_semaphore_query(f.timelines[k], &current));
    if (current < next_value[k]) {
      HL_ASSERT_OK(hl_semaphore_signal(f.timelines[k], next_value[k]));
    }
  }
  hl_suballocator_trim(f.sa, 0, NULL, HL_SUBALLOC_NO_QUEUE);
  assert_int_equal(sa_stats(&f).slabs, 0);
  sa_fixture_deinit(&f);
}

//===----------------------------------------------------------------------===//
// Through queue_alloca (HIPLINE_ALLOCATOR=hipline)
//===----------------------------------------------------------------------===//

static hl_device_t* hipline_device_on(hl_backend_kind_t backend, int checked,
                                      uint64_t limit_bytes) {
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = backend;
  o.checked = checked;
  o.fallback = HL_FALLBACK_FRONTIER;
  o.pool_mode = HL_POOL_MODE_HIPLINE;
  o.pool.limit_bytes = limit_bytes;
  hl_device_t* d = NULL;
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  assert_int_equal(hl_device_pool_mode(d), HL_POOL_MODE_HIPLINE);
  return d;
}

// A device on the test backend with the suballocator.
static hl_device_t* hipline_device(int checked, uint64_t limit_bytes) {
  return hipline_device_on(hl_test_backend_kind(), checked, limit_bytes);
}

// Two queues, each a chain alloca -> fill -> read -> dealloca with no host
// waits, plus a chain that hands buffers between them. In checked mode freed
// memory is poisoned: a block handed out while another queue still used it
// would read back poison or the other queue's pattern. Without checked mode
// (hip) only the other queue's pattern shows a block handed out early.
// Unchecked, allocas and deallocas on a quiet queue run at once
// (hl_op_vtable_t.run_at_once), the others on the stream: both kinds mix.
static void fill_verify_across_queues(int checked) {
  hl_device_t* d = hipline_device(checked, 0);
  if (checked) {
    assert_int_equal(hl_device_checked(d),
                     d->backend->vtable->set_poison != NULL);
  }
  hl_queue_t* q[2] = {hl_test_queue_create(d), hl_test_queue_create(d)};
  hl_semaphore_t* s[2] = {hl_test_semaphore_create(),
                          hl_test_semaphore_create()};
  const uint64_t steps = hl_test_scale(400, 4);
  const uint64_t size = 8 * KIB;
  uint32_t* seen = calloc(2 * steps * 2, sizeof(uint32_t));
  uint64_t v[2] = {0, 0};
  for (uint64_t i = 0; i < steps; ++i) {
    for (int k = 0; k < 2; ++k) {
      // Queue k's own chain; the other queue's chain reads it too every
      // fourth step (cross-queue use before the free).
      hl_queue_t* user = (i % 4 == 3) ? q[1 - k] : q[k];
      uint32_t pattern = (uint32_t)(i * 2 + (uint64_t)k) * 2654435761u + 1;
      hl_buffer_t* b =
          mem_alloca(q[k], v[k] ? s[k] : NULL, v[k], s[k], v[k] + 1, size);
      hl_fence_t* w = hl_test_fence(s[k], v[k] + 1);
      hl_fence_t* sig = hl_test_fence(s[k], v[k] + 2);
      HL_ASSERT_OK(hl_queue_fill(q[k], w, sig, b, 0, size, pattern));
      hl_fence_release(w);
      hl_fence_release(sig);
      w = hl_test_fence(s[k], v[k] + 2);
      sig = hl_test_fence(s[k], v[k] + 3);
      uint32_t* out = &seen[(i * 2 + (uint64_t)k) * 2];
      HL_ASSERT_OK(hl_queue_read(user, w, sig, b, 0, &out[0], 4));
      hl_fence_release(w);
      hl_fence_release(sig);
      w = hl_test_fence(s[k], v[k] + 3);
      sig = hl_test_fence(s[k], v[k] + 4);
      HL_ASSERT_OK(hl_queue_read(q[k], w, sig, b, size - 4, &out[1], 4));
      hl_fence_release(w);
      hl_fence_release(sig);
      mem_dealloca(q[k], s[k], v[k] + 4, s[k], v[k] + 5, b);
      hl_buffer_release(b);
      v[k] += 5;
    }
  }
  mem_wait(s[0], v[0]);
  mem_wait(s[1], v[1]);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  for (uint64_t i = 0; i < steps; ++i) {
    for (uint64_t k = 0; k < 2; ++k) {
      uint32_t pattern = (uint32_t)(i * 2 + k) * 2654435761u + 1;
      uint32_t* out = &seen[(i * 2 + k) * 2];
      if (out[0] != pattern || out[1] != pattern) {
        fail_msg("queue %llu step %llu read %08x/%08x, wrote %08x",
                 (unsigned long long)k, (unsigned long long)i, out[0], out[1],
                 pattern);
      }
    }
  }
  hl_memory_stats_t st = hl_test_memory_stats(d);
  print_message(
      "fill/verify: %llu slabs (%llu allocs), %llu reuses, "
      "%llu cross-queue, reserved peak %llu\n",
      (unsigned long long)st.pool_slabs,
      (unsigned long long)st.pool_slab_allocs,
      (unsigned long long)st.pool_block_reuses,
      (unsigned long long)st.pool_cross_queue_reuses,
      (unsigned long long)st.bytes_reserved_peak);
  assert_int_equal(st.use_after_free, 0);
  assert_int_equal(st.bytes_in_use, 0);
  assert_int_equal(st.pool_used_bytes, 0);
  assert_true(st.pool_block_reuses > st.pool_slab_allocs);
  assert_true(st.pool_slab_bytes > 0);
  // trim gives every slab back.
  HL_ASSERT_OK(hl_device_trim(d, 0));
  st = hl_test_memory_stats(d);
  assert_int_equal(st.pool_slabs, 0);
  assert_int_equal(st.bytes_reserved, 0);
  free(seen);
  for (int k = 0; k < 2; ++k) {
    hl_semaphore_release(s[k]);
    hl_queue_release(q[k]);
  }
  hl_device_release(d);
}

static void test_fill_verify_across_queues_checked(void** state) {
  (void)state;
  fill_verify_across_queues(1);
}

static void test_fill_verify_across_queues_unchecked(void** state) {
  (void)state;
  fill_verify_across_queues(0);
}

// On a quiet queue an alloca that the suballocator serves from free space,
// and its dealloca, need no stream (hl_op_vtable_t.run_at_once): a steady
// run of pairs puts nothing on the queue's stream and asks the backend for
// nothing, and still counts, reuses and returns its memory, with the
// queue's timeline at each submission's value when its call returns.
static void test_quiet_pairs_run_without_stream_work(void** state) {
  (void)state;
  hl_device_t* d = hipline_device(0, 0);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* timeline = hl_queue_timeline(q);
  // The first alloca grows the pool: a slab from the backend, on the stream.
  hl_buffer_t* warm = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
  mem_dealloca(q, NULL, 0, NULL, 0, warm);
  hl_buffer_release(warm);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  bool host = hl_test_backend_kind() == HL_BACKEND_HOST;
  hl_backend_stream_t* stream = hl_queue_stream(q);
  uint64_t pushed = host ? hl_host_stream_submitted(stream) : 0;
  hl_memory_stats_t before = hl_test_memory_stats(d);
  const uint64_t pairs = 100;
  for (uint64_t i = 0; i < pairs; ++i) {
    hl_buffer_t* b = NULL;
    HL_ASSERT_OK(hl_queue_alloca(q, NULL, NULL, (i % 4 + 1) * KIB, 0, &b));
    assert_int_equal(hl_semaphore_value(timeline), hl_queue_submitted_value(q));
    HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, b));
    assert_int_equal(hl_semaphore_value(timeline), hl_queue_submitted_value(q));
    hl_buffer_release(b);
  }
  if (host) assert_int_equal(hl_host_stream_submitted(stream), pushed);
  hl_memory_stats_t after = hl_test_memory_stats(d);
  assert_int_equal(after.allocas - before.allocas, pairs);
  assert_int_equal(after.deallocas - before.deallocas, pairs);
  assert_int_equal(after.pool_block_reuses - before.pool_block_reuses, pairs);
  assert_int_equal(after.pool_slab_allocs, before.pool_slab_allocs);
  assert_int_equal(after.bytes_in_use, 0);
  assert_int_equal(after.pool_used_bytes, 0);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  hl_queue_release(q);
  hl_device_release(d);
}

// A dealloca that fails before it frees is cancelled, at once or not: here
// its wait was reached before its semaphore failed, so the pump fails the
// submission on a quiet queue where the dealloca could otherwise run at
// once. The buffer stays valid (its bytes intact) and may be deallocated
// again; an alloca in the same spot does not run either.
static void test_failed_submissions_do_not_run_at_once(void** state) {
  (void)state;
  hl_device_t* d = hipline_device(0, 0);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_buffer_t* warm = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
  mem_dealloca(q, NULL, 0, NULL, 0, warm);
  hl_buffer_release(warm);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));

  hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  hl_memory_stats_t before = hl_test_memory_stats(d);
  hl_semaphore_t* failed = hl_test_semaphore_create();
  HL_ASSERT_OK(hl_semaphore_signal(failed, 1));
  HL_ASSERT_OK(hl_semaphore_fail(
      failed, HL_MAKE_STATUS(HL_STATUS_ABORTED, "producer failed")));
  hl_semaphore_t* out = hl_test_semaphore_create();
  mem_dealloca(q, failed, 1, out, 1, b);
  hl_test_assert_status_has(hl_semaphore_wait(out, 1, MEM_DEADLINE()),
                            HL_STATUS_ABORTED, "producer failed", "failed");
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  hl_memory_stats_t after = hl_test_memory_stats(d);
  assert_int_equal(after.deallocas, before.deallocas);
  assert_int_equal(after.deallocas_cancelled, before.deallocas_cancelled + 1);
  assert_int_equal(after.bytes_in_use, before.bytes_in_use);
  assert_int_equal(after.use_after_free, 0);

  // The same for an alloca: it fails, and its memory never comes.
  hl_semaphore_t* out2 = hl_test_semaphore_create();
  hl_buffer_t* c = mem_alloca(q, failed, 1, out2, 1, 4 * KIB);
  hl_test_assert_status_has(hl_semaphore_wait(out2, 1, MEM_DEADLINE()),
                            HL_STATUS_ABORTED, "producer failed", "failed");
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(hl_test_memory_stats(d).allocas, after.allocas);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, after.bytes_in_use);
  hl_buffer_release(c);

  // The cancelled dealloca left |b| valid: it may be deallocated again.
  mem_dealloca(q, NULL, 0, NULL, 0, b);
  hl_buffer_release(b);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  assert_int_equal(hl_test_memory_stats(d).deallocas, after.deallocas + 1);
  hl_semaphore_release(out2);
  hl_semaphore_release(out);
  hl_semaphore_release(failed);
  hl_queue_release(q);
  hl_device_release(d);
}

// queue_alloca out of memory with the suballocator: RESOURCE_EXHAUSTED on
// the alloca's signal with the sizes; the queue stays usable.
static void test_queue_alloca_oom(void** state) {
  (void)state;
  hl_device_t* d = hipline_device(0, 1 * MIB);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  hl_buffer_t* big = mem_alloca(q, NULL, 0, s, 1, 2 * MIB);
  hl_test_assert_status_has(hl_semaphore_wait(s, 1, MEM_DEADLINE()),
                            HL_STATUS_RESOURCE_EXHAUSTED, "2097152",
                            "out of memory after trim and retry");
  hl_buffer_release(big);
  hl_semaphore_t* s2 = hl_test_semaphore_create();
  hl_buffer_t* a = mem_alloca(q, NULL, 0, s2, 1, 768 * KIB);
  mem_wait(s2, 1);
  assert_non_null(hl_buffer_device_pointer(a));
  HL_ASSERT_OK(hl_queue_status(q));
  assert_true(hl_test_memory_stats(d).ooms >= 1);
  mem_dealloca(q, NULL, 0, NULL, 0, a);
  hl_buffer_release(a);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  hl_semaphore_release(s2);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(d);
}

// With a release threshold, synchronization points give whole free slabs
// back down to it, so reserved memory follows live memory.
static void test_release_threshold_at_sync_points(void** state) {
  (void)state;
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = hl_test_backend_kind();
  o.checked = 0;
  o.pool_mode = HL_POOL_MODE_HIPLINE;
  o.pool.release_threshold = 0;
  o.pool_release_threshold_set = true;
  hl_device_t* d = NULL;
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  hl_queue_t* q = hl_test_queue_create(d);
  hl_buffer_t* keep = mem_alloca(q, NULL, 0, NULL, 0, 24 * MIB);
  hl_buffer_t* b[3];
  for (int i = 0; i < 3; ++i) b[i] = mem_alloca(q, NULL, 0, NULL, 0, 24 * MIB);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(hl_test_memory_stats(d).pool_slabs, 4);
  for (int i = 0; i < 3; ++i) {
    mem_dealloca(q, NULL, 0, NULL, 0, b[i]);
    hl_buffer_release(b[i]);
  }
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  hl_memory_stats_t st = hl_test_memory_stats(d);
  assert_int_equal(st.pool_slabs, 1);  // Only the live one stays.
  assert_int_equal(st.pool_slab_releases, 3);
  assert_int_equal(st.bytes_reserved, mem_reserved_for(24 * MIB));
  assert_int_equal(st.bytes_reserved_peak, mem_reserved_for(4 * 24 * MIB));
  mem_dealloca(q, NULL, 0, NULL, 0, keep);
  hl_buffer_release(keep);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(hl_test_memory_stats(d).bytes_reserved, 0);
  hl_queue_release(q);
  hl_device_release(d);
}

// HIPLINE_HOST_MEMORY sets the host device's memory size and so the pool's
// limit; a bad value fails device creation naming it. A host backend
// setting: tested on the host backend whatever the test backend.
static void test_host_memory_setting(void** state) {
  (void)state;
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = HL_BACKEND_HOST;
  hl_device_t* d = NULL;
  setenv("HIPLINE_HOST_MEMORY", "lots", 1);
  hl_test_assert_status_has(hl_device_create(&o, hl_allocator_system(), &d),
                            HL_STATUS_INVALID_ARGUMENT, "HIPLINE_HOST_MEMORY",
                            "lots");
  setenv("HIPLINE_HOST_MEMORY", "100", 1);
  hl_test_assert_status_has(hl_device_create(&o, hl_allocator_system(), &d),
                            HL_STATUS_INVALID_ARGUMENT, "HIPLINE_HOST_MEMORY",
                            NULL);
  // Bigger than this machine: address ranges, committed only when written.
  setenv("HIPLINE_HOST_MEMORY", "256GiB", 1);
  o.pool_mode = HL_POOL_MODE_HIPLINE;
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  hl_device_properties_t props;
  HL_ASSERT_OK(hl_device_properties(d, &props));
  assert_int_equal(props.memory_bytes, (uint64_t)256 << 30);
  hl_pool_attributes_t attrs;
  HL_ASSERT_OK(hl_device_pool_attributes(d, &attrs));
  assert_int_equal(attrs.limit_bytes, (uint64_t)256 << 30);
  hl_device_release(d);
  setenv("HIPLINE_HOST_MEMORY", "2MiB", 1);
  d = hipline_device_on(HL_BACKEND_HOST, 0, 0);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  hl_buffer_t* b = mem_alloca(q, NULL, 0, s, 1, 3 * MIB);
  hl_test_assert_status_has(hl_semaphore_wait(s, 1, MEM_DEADLINE()),
                            HL_STATUS_RESOURCE_EXHAUSTED, "3145728", NULL);
  hl_buffer_release(b);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(d);
  unsetenv("HIPLINE_HOST_MEMORY");
}

// The switch: an option or HIPLINE_ALLOCATOR, strictly parsed; hipline's
// pool without either.
static void test_pool_mode_switch(void** state) {
  (void)state;
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = hl_test_backend_kind();
  hl_device_t* d = NULL;
  char* saved = getenv("HIPLINE_ALLOCATOR");
  saved = saved ? strdup(saved) : NULL;
  unsetenv("HIPLINE_ALLOCATOR");
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  assert_int_equal(hl_device_pool_mode(d), HL_POOL_MODE_HIPLINE);
  hl_device_release(d);
  d = NULL;
  o.pool_mode = (hl_pool_mode_t)7;
  HL_ASSERT_STATUS(hl_device_create(&o, hl_allocator_system(), &d),
                   INVALID_ARGUMENT);
  assert_null(d);
  o.pool_mode = HL_POOL_MODE_DEFAULT;
  setenv("HIPLINE_ALLOCATOR", "bogus", 1);
  hl_test_assert_status_has(hl_device_create(&o, hl_allocator_system(), &d),
                            HL_STATUS_INVALID_ARGUMENT, "HIPLINE_ALLOCATOR",
                            "bogus");
  setenv("HIPLINE_ALLOCATOR", "hipline", 1);
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  assert_int_equal(hl_device_pool_mode(d), HL_POOL_MODE_HIPLINE);
  hl_device_release(d);
  setenv("HIPLINE_ALLOCATOR", "driver", 1);
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  assert_int_equal(hl_device_pool_mode(d), HL_POOL_MODE_DRIVER);
  // Driver mode: no suballocator statistics.
  hl_queue_t* q = hl_test_queue_create(d);
  hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(hl_test_memory_stats(d).pool_slabs, 0);
  mem_dealloca(q, NULL, 0, NULL, 0, b);
  hl_buffer_release(b);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  hl_queue_release(q);
  hl_device_release(d);
  // An explicit option beats the environment.
  o.pool_mode = HL_POOL_MODE_HIPLINE;
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  assert_int_equal(hl_device_pool_mode(d), HL_POOL_MODE_HIPLINE);
  hl_device_release(d);
  unsetenv("HIPLINE_ALLOCATOR");
  if (saved) setenv("HIPLINE_ALLOCATOR", saved, 1);
  free(saved);
  assert_string_equal(hl_pool_mode_name(HL_POOL_MODE_HIPLINE), "hipline");
  assert_string_equal(hl_pool_mode_name(HL_POOL_MODE_DRIVER), "driver");
}

// A backend whose malloc_async waits at a gate: the host backend for
// everything the suballocator calls, forwarded.
typedef struct gated_backend_t {
  hl_backend_t base;  // First: the suballocator sees this.
  hl_backend_t* inner;
  hl_backend_vtable_t vtable;
  atomic_bool armed;    // The next malloc_async waits at the gate.
  atomic_bool entered;  // A malloc_async is waiting.
  atomic_bool open;
} gated_backend_t;

static hl_backend_t* gated_inner(hl_backend_t* b) {
  return ((gated_backend_t*)b)->inner;
}

static hl_status_t gated_malloc_async(hl_backend_t* b, size_t size,
                                      hl_backend_stream_t* stream,
                                      void** out_ptr) {
  gated_backend_t* g = (gated_backend_t*)b;
  if (atomic_exchange(&g->armed, false)) {
    atomic_store(&g->entered, true);
    while (!atomic_load(&g->open)) thrd_yield();
  }
  return g->inner->vtable->malloc_async(g->inner, size, stream, out_ptr);
}
static hl_status_t gated_free_async(hl_backend_t* b, void* ptr,
                                    hl_backend_stream_t* stream) {
  return gated_inner(b)->vtable->free_async(gated_inner(b), ptr, stream);
}
static hl_status_t gated_stream_create(hl_backend_t* b,
                                       hl_backend_stream_t** out) {
  return gated_inner(b)->vtable->stream_create(gated_inner(b), out);
}
static void gated_stream_destroy(hl_backend_t* b, hl_backend_stream_t* s) {
  gated_inner(b)->vtable->stream_destroy(gated_inner(b), s);
}
static hl_status_t gated_stream_synchronize(hl_backend_t* b,
                                            hl_backend_stream_t* s) {
  return gated_inner(b)->vtable->stream_synchronize(gated_inner(b), s);
}
static hl_status_t gated_pool_trim(hl_backend_t* b, uint64_t keep) {
  return gated_inner(b)->vtable->pool_trim(gated_inner(b), keep);
}
static hl_status_t gated_pool_stats(hl_backend_t* b,
                                    hl_backend_pool_stats_t* out) {
  return gated_inner(b)->vtable->pool_stats(gated_inner(b), out);
}

typedef struct grow_call_t {
  hl_suballocator_t* sa;
  hl_backend_stream_t* stream;
  hl_suballocation_t* free_first;  // Freed (queue 1) before the alloca.
  uint64_t size;
  void* ptr;
  hl_suballocation_t* block;
  hl_status_t status;
  atomic_bool done;
} grow_call_t;

static int grow_call_main(void* arg) {
  grow_call_t* c = arg;
  if (c->free_first) {
    hl_suballocator_free(c->sa, c->free_first, c->stream, 1, NULL, 0);
  }
  c->status = hl_suballocator_alloc(c->sa, c->size, c->stream, 0, NULL, 0,
                                    &c->ptr, &c->block);
  atomic_store(&c->done, true);
  return 0;
}

// The suballocator calls the backend (a slab's malloc_async, which may wait
// for the device on ROCm) without its lock: while one queue's alloca grows
// the pool, other queues' allocas from free space and frees go on.
static void test_growth_does_not_block_other_queues(void** state) {
  (void)state;
  gated_backend_t g;
  memset(&g, 0, sizeof(g));
  HL_ASSERT_OK(hl_host_backend_create(0, hl_allocator_system(), &g.inner));
  g.base = *g.inner;
  g.vtable = *g.inner->vtable;
  g.vtable.malloc_async = gated_malloc_async;
  g.vtable.free_async = gated_free_async;
  g.vtable.stream_create = gated_stream_create;
  g.vtable.stream_destroy = gated_stream_destroy;
  g.vtable.stream_synchronize = gated_stream_synchronize;
  g.vtable.pool_trim = gated_pool_trim;
  g.vtable.pool_stats = gated_pool_stats;
  g.base.vtable = &g.vtable;
  hl_backend_t* backend = &g.base;
  hl_backend_stream_t* stream = NULL;
  HL_ASSERT_OK(backend->vtable->stream_create(backend, &stream));
  hl_suballocator_t* sa = NULL;
  HL_ASSERT_OK(hl_suballocator_create(backend, UINT64_MAX, false, NULL, &sa));
  // A small slab with a block that stays live (so the slab is not empty
  // and no trim gives it back) and free space beside it.
  void* kept_ptr = NULL;
  hl_suballocation_t* kept = NULL;
  HL_ASSERT_OK(
      hl_suballocator_alloc(sa, 4 * KIB, stream, 1, NULL, 0, &kept_ptr, &kept));
  void* other_ptr = NULL;
  hl_suballocation_t* other = NULL;
  HL_ASSERT_OK(hl_suballocator_alloc(sa, 4 * KIB, stream, 1, NULL, 0,
                                     &other_ptr, &other));

  // Queue 0 asks for more than any slab holds: it grows, and its
  // malloc_async waits at the gate.
  atomic_store(&g.armed, true);
  static grow_call_t grow;
  memset(&grow, 0, sizeof(grow));
  grow.sa = sa;
  grow.stream = stream;
  grow.size = 30 * MIB;
  thrd_t grower;
  assert_int_equal(thrd_create(&grower, grow_call_main, &grow), thrd_success);
  while (!atomic_load(&g.entered)) thrd_yield();

  // Meanwhile queue 1 frees a block and allocates from the free space, in a
  // thread of its own so that a blocked call is seen rather than hung on.
  static grow_call_t small;
  memset(&small, 0, sizeof(small));
  small.sa = sa;
  small.stream = stream;
  small.size = 8 * KIB;
  small.free_first = other;
  thrd_t smaller;
  assert_int_equal(thrd_create(&smaller, grow_call_main, &small), thrd_success);
  hl_time_t deadline = hl_time_now() + (hl_duration_t)5000000000LL;
  while (!atomic_load(&small.done) && hl_time_now() < deadline) thrd_yield();
  bool small_done_while_growing = atomic_load(&small.done);
  atomic_store(&g.open, true);
  assert_int_equal(thrd_join(grower, NULL), thrd_success);
  assert_int_equal(thrd_join(smaller, NULL), thrd_success);
  assert_true(small_done_while_growing);
  HL_ASSERT_OK(grow.status);
  HL_ASSERT_OK(small.status);
  HL_ASSERT_OK(hl_suballocator_verify(sa));
  hl_suballocator_free(sa, grow.block, stream, 0, NULL, 0);
  hl_suballocator_free(sa, small.block, stream, 1, NULL, 0);
  hl_suballocator_free(sa, kept, stream, 1, NULL, 0);
  HL_ASSERT_OK(hl_suballocator_verify(sa));
  hl_suballocator_destroy(sa);
  backend->vtable->stream_destroy(backend, stream);
  HL_ASSERT_OK(g.inner->vtable->pool_trim(g.inner, 0));
  g.inner->vtable->destroy(g.inner);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split_and_coalesce),
      cmocka_unit_test(test_cross_queue_reuse_waits_for_timepoint),
      cmocka_unit_test(test_covered_reuse_needs_the_later_free),
      cmocka_unit_test(test_fresh_slab_tail_is_stream_ordered),
      cmocka_unit_test(test_slabs_fit_the_request_that_grew_them),
      cmocka_unit_test(test_account_parts_sum_to_the_slabs),
      cmocka_unit_test(test_trim_releases_whole_free_slabs),
      cmocka_unit_test(test_oom_trims_then_fails_with_sizes),
      cmocka_unit_test(test_randomized_against_model),
      cmocka_unit_test(test_fill_verify_across_queues_checked),
      cmocka_unit_test(test_fill_verify_across_queues_unchecked),
      cmocka_unit_test(test_quiet_pairs_run_without_stream_work),
      cmocka_unit_test(test_failed_submissions_do_not_run_at_once),
      cmocka_unit_test(test_queue_alloca_oom),
      cmocka_unit_test(test_release_threshold_at_sync_points),
      cmocka_unit_test(test_host_memory_setting),
      cmocka_unit_test(test_pool_mode_switch),
      cmocka_unit_test(test_growth_does_not_block_other_queues),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
