// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// queue_alloca and queue_dealloca on the host backend through the public
// API: the handle comes back at once, a parked alloca commits only after its
// wait, full alloca/write/fill/copy/read/dealloca cycles on one and two
// queues, a 1,000-step semaphore-only chain that leaves memory flat, and bad
// input.

#include "tests/memory_util.h"

#define KIB ((uint64_t)1024)

static void test_alloca_handle_then_usable(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();

  hl_buffer_t* b = mem_alloca(q, NULL, 0, s, 1, 4 * KIB);
  assert_int_equal(hl_buffer_length(b), 4 * KIB);
  assert_int_equal(hl_buffer_offset(b), 0);
  assert_int_equal(hl_buffer_origin(b), HL_BUFFER_ORIGIN_ASYNC);
  assert_ptr_equal(hl_buffer_device(b), d);
  assert_true(hl_buffer_root_id(b) != 0);
  mem_wait(s, 1);
  assert_non_null(hl_buffer_device_pointer(b));
  assert_false(hl_buffer_is_freed(b));
  hl_memory_stats_t st = hl_test_memory_stats(d);
  assert_int_equal(st.allocas, 1);
  assert_int_equal(st.bytes_in_use, 4 * KIB);

  // A subview shares the root and points inside it.
  hl_buffer_t* view = NULL;
  HL_ASSERT_OK(hl_buffer_subview(b, 256, 512, &view));
  assert_int_equal(hl_buffer_root_id(view), hl_buffer_root_id(b));
  assert_ptr_equal(hl_buffer_device_pointer(view),
                   (char*)hl_buffer_device_pointer(b) + 256);
  hl_buffer_t* view2 = NULL;
  HL_ASSERT_OK(hl_buffer_subview(view, 4, 8, &view2));
  assert_int_equal(hl_buffer_offset(view2), 260);
  assert_int_equal(hl_buffer_root_id(view2), hl_buffer_root_id(b));
  hl_buffer_release(view2);
  hl_buffer_release(view);

  mem_dealloca(q, NULL, 0, s, 2, b);
  mem_wait(s, 2);
  assert_true(hl_buffer_is_freed(b));
  hl_buffer_release(b);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);

  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(d);
}

static void test_alloca_parked_commits_after_signal(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* gate = hl_test_semaphore_create();
  hl_semaphore_t* s = hl_test_semaphore_create();

  hl_buffer_t* b = mem_alloca(q, gate, 1, s, 1, 64 * KIB);
  // Nothing may happen before the host signals |gate|.
  hl_test_sleep_ms(20);
  assert_null(hl_buffer_device_pointer(b));
  assert_int_equal(hl_test_memory_stats(d).allocas, 0);
  assert_int_equal(mem_queue_stats(q).allocas, 0);
  uint64_t value = 99;
  HL_ASSERT_OK(hl_semaphore_query(s, &value));
  assert_int_equal(value, 0);

  HL_ASSERT_OK(hl_semaphore_signal(gate, 1));
  mem_wait(s, 1);
  assert_non_null(hl_buffer_device_pointer(b));
  assert_int_equal(hl_test_memory_stats(d).allocas, 1);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 64 * KIB);

  mem_dealloca(q, NULL, 0, s, 2, b);
  hl_buffer_release(b);
  mem_wait(s, 2);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);

  hl_semaphore_release(s);
  hl_semaphore_release(gate);
  hl_queue_release(q);
  hl_device_release(d);
}

// write -> fill (part) -> copy -> read, all on one queue in queue order.
static void test_full_cycle_one_queue(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  const uint64_t n = 16 * KIB;
  uint8_t* src = malloc(n);
  uint8_t* dst = malloc(n);
  for (uint64_t i = 0; i < n; ++i) src[i] = (uint8_t)(i * 7 + 3);
  memset(dst, 0, n);

  hl_buffer_t* a = mem_alloca(q, NULL, 0, NULL, 0, n);
  hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, n);
  HL_ASSERT_OK(hl_queue_write(q, NULL, NULL, src, a, 0, n));
  HL_ASSERT_OK(hl_queue_fill(q, NULL, NULL, a, 4 * KIB, 4 * KIB, 0xA5A5A5A5u));
  HL_ASSERT_OK(hl_queue_copy(q, NULL, NULL, a, 0, b, 0, n));
  HL_ASSERT_OK(hl_queue_read(q, NULL, NULL, b, 0, dst, n));
  HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, a));
  HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, b));
  hl_buffer_release(a);
  hl_buffer_release(b);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));

  for (uint64_t i = 0; i < n; ++i) {
    uint8_t want = (i >= 4 * KIB && i < 8 * KIB) ? 0xA5 : src[i];
    if (dst[i] != want)
      fail_msg("byte %llu: %u != %u", (unsigned long long)i, dst[i], want);
  }
  hl_memory_stats_t st = hl_test_memory_stats(d);
  assert_int_equal(st.bytes_in_use, 0);
  assert_int_equal(st.allocas, 2);
  free(src);
  free(dst);
  hl_queue_release(q);
  hl_device_release(d);
}

// The same cycle spread over two queues, ordered by one semaphore only.
static void test_full_cycle_two_queues(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q0 = hl_test_queue_create(d);
  hl_queue_t* q1 = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  const uint64_t n = 8 * KIB;
  uint32_t* src = malloc(n);
  uint32_t* dst = malloc(n);
  for (uint64_t i = 0; i < n / 4; ++i) src[i] = (uint32_t)(i * 2654435761u);
  memset(dst, 0, n);

  hl_buffer_t* a = mem_alloca(q0, NULL, 0, s, 1, n);
  hl_buffer_t* b = mem_alloca(q1, s, 1, s, 2, n);
  hl_fence_t* w = hl_test_fence(s, 2);
  hl_fence_t* sig = hl_test_fence(s, 3);
  HL_ASSERT_OK(hl_queue_write(q1, w, sig, src, a, 0, n));
  hl_fence_release(w);
  hl_fence_release(sig);
  w = hl_test_fence(s, 3);
  sig = hl_test_fence(s, 4);
  HL_ASSERT_OK(hl_queue_fill(q0, w, sig, a, 0, 16, 0x01020304u));
  hl_fence_release(w);
  hl_fence_release(sig);
  w = hl_test_fence(s, 4);
  sig = hl_test_fence(s, 5);
  HL_ASSERT_OK(hl_queue_copy(q1, w, sig, a, 0, b, 0, n));
  hl_fence_release(w);
  hl_fence_release(sig);
  // Dealloca a on q0 right away: it must wait for the copy on q1 through the
  // root's use fence, not through anything the caller passed.
  mem_dealloca(q0, NULL, 0, NULL, 0, a);
  hl_buffer_release(a);
  w = hl_test_fence(s, 5);
  sig = hl_test_fence(s, 6);
  HL_ASSERT_OK(hl_queue_read(q0, w, sig, b, 0, dst, n));
  hl_fence_release(w);
  hl_fence_release(sig);
  mem_dealloca(q1, NULL, 0, s, 7, b);
  hl_buffer_release(b);
  mem_wait(s, 7);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));

  for (uint64_t i = 0; i < n / 4; ++i) {
    uint32_t want = i < 4 ? 0x01020304u : src[i];
    if (dst[i] != want)
      fail_msg("word %llu: %08x != %08x", (unsigned long long)i, dst[i], want);
  }
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  assert_int_equal(hl_test_memory_stats(d).deallocas, 2);
  free(src);
  free(dst);
  hl_semaphore_release(s);
  hl_queue_release(q0);
  hl_queue_release(q1);
  hl_device_release(d);
}

// alloca -> fill -> read -> dealloca, 1,000 times across two queues, chained
// by semaphores only: the host never waits inside the chain.
static void test_chain_flat_memory(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q[2] = {hl_test_queue_create(d), hl_test_queue_create(d)};
  hl_semaphore_t* s = hl_test_semaphore_create();
  const uint64_t steps = 1000;
  const uint64_t size = 4 * KIB;
  uint32_t* seen = calloc(steps, sizeof(uint32_t));
  uint64_t v = 0;
  for (uint64_t i = 0; i < steps; ++i) {
    hl_queue_t* qa = q[i & 1];
    hl_queue_t* qb = q[(i >> 1) & 1];
    hl_buffer_t* b = mem_alloca(qa, v ? s : NULL, v, s, v + 1, size);
    hl_fence_t* w = hl_test_fence(s, v + 1);
    hl_fence_t* sig = hl_test_fence(s, v + 2);
    HL_ASSERT_OK(hl_queue_fill(qb, w, sig, b, 0, size, (uint32_t)(i * 31 + 7)));
    hl_fence_release(w);
    hl_fence_release(sig);
    w = hl_test_fence(s, v + 2);
    sig = hl_test_fence(s, v + 3);
    HL_ASSERT_OK(hl_queue_read(qa, w, sig, b, size - 4, &seen[i], 4));
    hl_fence_release(w);
    hl_fence_release(sig);
    mem_dealloca(qb, s, v + 3, s, v + 4, b);
    hl_buffer_release(b);
    v += 4;
  }
  mem_wait(s, v);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  for (uint64_t i = 0; i < steps; ++i) {
    if (seen[i] != (uint32_t)(i * 31 + 7)) {
      fail_msg("step %llu read %08x", (unsigned long long)i, seen[i]);
    }
  }
  hl_memory_stats_t st = hl_test_memory_stats(d);
  assert_int_equal(st.allocas, steps);
  assert_int_equal(st.bytes_in_use, 0);
  // Each step waits for the previous free, so at most one buffer is live
  // and the pool reuses its blocks.
  print_message("chain: in use peak %llu, reserved %llu, reserved peak %llu\n",
                (unsigned long long)st.bytes_in_use_peak,
                (unsigned long long)st.bytes_reserved,
                (unsigned long long)st.bytes_reserved_peak);
  assert_int_equal(st.bytes_in_use_peak, size);
  assert_true(st.bytes_reserved_peak <= mem_reserved_for(4 * size));
  // Deallocas are counted when their ops are released (completion thread).
  hl_time_t deadline = hl_deadline_after(2000 * MEM_MS);
  while (hl_test_memory_stats(d).deallocas < steps &&
         hl_time_now() < deadline) {
    hl_test_sleep_ms(2);
  }
  assert_int_equal(hl_test_memory_stats(d).deallocas, steps);
  assert_int_equal(hl_test_memory_stats(d).fallback_releases_frontier, 0);
  free(seen);
  hl_semaphore_release(s);
  hl_queue_release(q[0]);
  hl_queue_release(q[1]);
  hl_device_release(d);
}

static void test_bad_input(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_buffer_t* b = (hl_buffer_t*)(uintptr_t)1;

  hl_test_assert_status_has(hl_queue_alloca(q, NULL, NULL, 0, 0, &b),
                            HL_STATUS_INVALID_ARGUMENT, "0 bytes", NULL);
  assert_null(b);
  hl_test_assert_status_has(
      hl_queue_alloca(q, NULL, NULL, HL_BUFFER_MAX_SIZE + 1, 0, &b),
      HL_STATUS_OUT_OF_RANGE, "281474976710657", NULL);
  assert_null(b);
  HL_ASSERT_STATUS(hl_queue_alloca(NULL, NULL, NULL, 64, 0, &b),
                   INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_queue_alloca(q, NULL, NULL, 64, 0, NULL),
                   INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_queue_alloca(q, NULL, NULL, 64, 1, &b), INVALID_ARGUMENT);
  assert_int_equal(hl_test_memory_stats(d).allocas, 0);

  b = mem_alloca(q, NULL, 0, NULL, 0, 1 * KIB);
  hl_buffer_t* view = (hl_buffer_t*)(uintptr_t)1;
  HL_ASSERT_STATUS(hl_buffer_subview(b, 1 * KIB + 1, 0, &view), OUT_OF_RANGE);
  assert_null(view);
  HL_ASSERT_STATUS(hl_buffer_subview(b, 512, 513, &view), OUT_OF_RANGE);
  HL_ASSERT_STATUS(hl_buffer_subview(b, 1, UINT64_MAX, &view), OUT_OF_RANGE);
  HL_ASSERT_STATUS(hl_buffer_subview(NULL, 0, 1, &view), INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_buffer_subview(b, 0, 1, NULL), INVALID_ARGUMENT);

  HL_ASSERT_STATUS(hl_queue_fill(q, NULL, NULL, b, 0, 6, 0), INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_queue_fill(q, NULL, NULL, b, 2, 8, 0), INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_queue_fill(q, NULL, NULL, b, 0, 2 * KIB, 0),
                   OUT_OF_RANGE);
  // An unaligned subview makes an aligned fill offset unaligned in the root.
  HL_ASSERT_OK(hl_buffer_subview(b, 2, 64, &view));
  HL_ASSERT_STATUS(hl_queue_fill(q, NULL, NULL, view, 0, 8, 0),
                   INVALID_ARGUMENT);
  hl_buffer_release(view);
  char host[16];
  HL_ASSERT_STATUS(hl_queue_read(q, NULL, NULL, b, 1 * KIB - 8, host, 16),
                   OUT_OF_RANGE);
  HL_ASSERT_STATUS(hl_queue_write(q, NULL, NULL, host, b, UINT64_MAX, 16),
                   OUT_OF_RANGE);
  HL_ASSERT_STATUS(hl_queue_read(q, NULL, NULL, b, 0, NULL, 16),
                   INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_queue_copy(q, NULL, NULL, b, 0, b, 1, 1 * KIB),
                   OUT_OF_RANGE);
  // (A NULL queue means the buffer's origin queue:
  // tests/timeline_queue_test.c.)
  HL_ASSERT_STATUS(hl_queue_dealloca(q, NULL, NULL, NULL), INVALID_ARGUMENT);

  // A buffer of another device is rejected.
  hl_device_t* d2 = mem_device_create(NULL);
  hl_queue_t* q2 = hl_test_queue_create(d2);
  HL_ASSERT_STATUS(hl_queue_dealloca(q2, NULL, NULL, b), INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_queue_fill(q2, NULL, NULL, b, 0, 4, 0), INVALID_ARGUMENT);
  hl_queue_release(q2);
  hl_device_release(d2);

  // None of the rejected calls scheduled anything: the dealloca still works.
  HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, b));
  hl_buffer_release(b);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  hl_queue_release(q);
  hl_device_release(d);
}

// Releasing a buffer never waits for the device's deferred work: a fence
// callback still running on the completion thread (here, until it sees the
// release or two seconds pass) must not hold up the release of a buffer's
// last reference. It used to: the root's device reference went through
// hl_device_release, which flushes the device's work first.
typedef struct release_probe_t {
  atomic_int entered;
  atomic_int released;
  atomic_int saw_release;
  atomic_int done;
} release_probe_t;

static void release_probe_fn(void* user, hl_status_t status) {
  (void)status;
  release_probe_t* p = (release_probe_t*)user;
  atomic_store(&p->entered, 1);
  int64_t deadline = hl_time_now() + 2000 * 1000 * 1000ll;
  while (!atomic_load(&p->released) && hl_time_now() < deadline) {
    struct timespec nap = {0, 1000 * 1000};
    thrd_sleep(&nap, NULL);
  }
  atomic_store(&p->saw_release, atomic_load(&p->released));
  atomic_store(&p->done, 1);
}

static void test_buffer_release_skips_deferred_work(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  hl_buffer_t* b = mem_alloca(q, NULL, 0, s, 1, 4 * KIB);
  mem_dealloca(q, NULL, 0, s, 2, b);
  mem_wait(s, 2);

  static release_probe_t probe;
  memset(&probe, 0, sizeof(probe));
  HL_ASSERT_OK(hl_fence_call_when_reached(NULL, d, release_probe_fn, &probe));
  while (!atomic_load(&probe.entered)) {
    struct timespec nap = {0, 100 * 1000};
    thrd_sleep(&nap, NULL);
  }
  hl_buffer_release(b);  // The root's last reference.
  atomic_store(&probe.released, 1);
  while (!atomic_load(&probe.done)) {
    struct timespec nap = {0, 100 * 1000};
    thrd_sleep(&nap, NULL);
  }
  assert_int_equal(atomic_load(&probe.saw_release), 1);

  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(d);
}

// A root records every use on its affinity queue's timeline without taking
// a reference on that semaphore: the root holds the queue, which holds its
// timeline. The timeline's count stays flat however many roots are live,
// and the buffers outlive the program's own queue handle: their dealloca,
// another queue's use and their release still work after it (AddressSanitizer
// would see a use after free).
static void test_root_uses_hold_no_timeline_reference(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_queue_t* other = hl_test_queue_create(d);
  hl_semaphore_t* timeline = hl_queue_timeline(q);
  // hipline's suballocator keeps one reference per queue that allocated
  // (its blocks carry the queue's timepoints): take it before counting.
  hl_buffer_t* first = mem_alloca(q, NULL, 0, NULL, 0, 4096);
  HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, first));
  hl_buffer_release(first);
  HL_ASSERT_OK(hl_queue_wait_idle(q, hl_deadline_after(10000000000LL)));
  hl_device_flush_work(d);
  int before = atomic_load(&timeline->ref_count);
  enum { N = 64 };
  hl_buffer_t* b[N];
  for (int i = 0; i < N; ++i) b[i] = mem_alloca(q, NULL, 0, NULL, 0, 4096);
  HL_ASSERT_OK(hl_queue_wait_idle(q, hl_deadline_after(10000000000LL)));
  hl_device_flush_work(d);
  assert_int_equal(atomic_load(&timeline->ref_count), before);
  // A use fence still names the timeline (with a reference of its own).
  hl_fence_t* uses = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &uses));
  HL_ASSERT_OK(hl_buffer_use_fence(b[0], uses));
  assert_int_equal(hl_fence_count(uses), 1);
  assert_int_equal(atomic_load(&timeline->ref_count), before + 1);
  hl_queue_release(q);  // The roots still hold it.
  HL_ASSERT_OK(hl_queue_barrier(other, uses, NULL));
  hl_fence_release(uses);
  for (int i = 0; i < N; ++i) {
    HL_ASSERT_OK(hl_queue_dealloca(other, NULL, NULL, b[i]));
    hl_buffer_release(b[i]);
  }
  HL_ASSERT_OK(hl_queue_wait_idle(other, hl_deadline_after(10000000000LL)));
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  hl_queue_release(other);
  hl_device_release(d);
}

// A host call that holds its queue's stream until the test lets it go.
typedef struct stream_gate_t {
  atomic_int entered;
  atomic_int open;
} stream_gate_t;

static void stream_gate_fn(void* user) {
  stream_gate_t* gate = (stream_gate_t*)user;
  atomic_store(&gate->entered, 1);
  while (!atomic_load(&gate->open)) hl_test_sleep_ms(1);
}

// An alloca's and a dealloca's ops borrow their buffer's root while their
// submission finishes inside the call; behind a busy stream it outlives the
// call, and the ops must take references of their own before it returns:
// here the program drops its buffers at once, while both ops still wait
// behind the gate. Without their own references the roots die at the
// release (AddressSanitizer: a use after free; elsewhere the late alloca's
// memory is never given back).
static void test_ops_outlive_released_buffers(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  static stream_gate_t gate;
  atomic_init(&gate.entered, 0);
  atomic_init(&gate.open, 0);
  HL_ASSERT_OK(hl_queue_host_call(q, NULL, NULL, stream_gate_fn, &gate));
  while (!atomic_load(&gate.entered)) hl_test_sleep_ms(1);
  enum { N = 8 };
  for (int i = 0; i < N; ++i) {
    // Never deallocated: the refcount fallback frees it once the alloca ran.
    hl_buffer_t* dropped = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
    hl_buffer_release(dropped);
    hl_buffer_t* freed = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
    HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, freed));
    hl_buffer_release(freed);
  }
  hl_memory_stats_t st = hl_test_memory_stats(d);
  assert_int_equal(st.allocas, 0);  // All of it still behind the gate.
  atomic_store(&gate.open, 1);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  hl_device_flush_work(d);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  st = hl_test_memory_stats(d);
  assert_int_equal(st.allocas, 2 * N);
  assert_int_equal(st.deallocas, N);  // The fallback frees the rest.
  assert_int_equal(st.bytes_in_use, 0);
  hl_queue_release(q);
  hl_device_release(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_alloca_handle_then_usable),
      cmocka_unit_test(test_alloca_parked_commits_after_signal),
      cmocka_unit_test(test_full_cycle_one_queue),
      cmocka_unit_test(test_full_cycle_two_queues),
      cmocka_unit_test(test_chain_flat_memory),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_buffer_release_skips_deferred_work),
      cmocka_unit_test(test_root_uses_hold_no_timeline_reference),
      cmocka_unit_test(test_ops_outlive_released_buffers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
