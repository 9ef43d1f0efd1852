// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The pool behind queue_alloca on the host backend: cross-queue reuse only
// after the free completes, same-queue reuse in stream order, fallback
// release in both modes (blocking and not), out of memory, the release
// threshold, trim, and per-queue versus device-wide statistics.

#include "tests/memory_util.h"

#define KIB ((uint64_t)1024)
#define MIB (KIB * KIB)

static void test_cross_queue_reuse_waits_for_free(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* qa = hl_test_queue_create(d);
  hl_queue_t* qb = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  const uint64_t n = 64 * KIB;

  hl_buffer_t* x = mem_alloca(qa, NULL, 0, s, 1, n);
  mem_wait(s, 1);
  void* freed = hl_buffer_device_pointer(x);
  assert_non_null(freed);

  mem_gate_t gate;
  mem_gate_init(&gate, 0);
  mem_gate_submit(qa, &gate);
  mem_dealloca(qa, NULL, 0, NULL, 0, x);
  hl_buffer_release(x);
  hl_buffer_t* y = mem_alloca(qb, NULL, 0, s, 2, n);
  mem_wait(s, 2);
  // A is still held before its free: B must not get the block.
  assert_int_equal(atomic_load(&gate.done), 0);
  assert_non_null(hl_buffer_device_pointer(y));
  assert_ptr_not_equal(hl_buffer_device_pointer(y), freed);

  mem_gate_open(&gate);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  uint64_t reserved = hl_test_memory_stats(d).bytes_reserved;
  // A has passed its free: B may take the block now (opportunistic reuse).
  hl_buffer_t* z = mem_alloca(qb, NULL, 0, s, 3, n);
  mem_wait(s, 3);
  assert_ptr_equal(hl_buffer_device_pointer(z), freed);
  assert_int_equal(hl_test_memory_stats(d).bytes_reserved, reserved);

  mem_dealloca(qb, NULL, 0, NULL, 0, y);
  mem_dealloca(qb, NULL, 0, NULL, 0, z);
  hl_buffer_release(y);
  hl_buffer_release(z);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  assert_int_equal(atomic_load(&gate.timed_out), 0);
  hl_semaphore_release(s);
  hl_queue_release(qa);
  hl_queue_release(qb);
  hl_device_release(d);
}

// HIP semantics: a block freed on stream S is reusable by S at once, since
// stream order puts the free before the next use. With the stream held
// (the host runs ahead, as it normally does), 64 alloca/dealloca pairs on one
// queue need one block, not 64.
static void test_same_queue_reuse_while_stream_behind(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  const uint64_t n = 64 * KIB;
  mem_gate_t gate;
  mem_gate_init(&gate, 0);
  mem_gate_submit(q, &gate);
  for (int i = 0; i < 64; ++i) {
    hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, n);
    HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, b));
    hl_buffer_release(b);
  }
  mem_gate_open(&gate);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  hl_memory_stats_t st = hl_test_memory_stats(d);
  print_message("same queue: in use peak %llu, reserved peak %llu\n",
                (unsigned long long)st.bytes_in_use_peak,
                (unsigned long long)st.bytes_reserved_peak);
  assert_int_equal(st.bytes_in_use, 0);
  assert_true(st.bytes_reserved_peak <= mem_reserved_for(2 * n));
  assert_true(st.bytes_in_use_peak <= 2 * n);
  hl_queue_release(q);
  hl_device_release(d);
}

static void test_fallback_release_frees(void** state) {
  (void)state;
  hl_fallback_mode_t modes[2] = {HL_FALLBACK_FRONTIER, HL_FALLBACK_DEVICE_SYNC};
  for (int m = 0; m < 2; ++m) {
    mem_device_config_t cfg = {.fallback = modes[m]};
    hl_device_t* d = mem_device_create(&cfg);
    assert_int_equal(hl_device_fallback_mode(d), modes[m]);
    hl_queue_t* q = hl_test_queue_create(d);
    hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, 32 * KIB);
    HL_ASSERT_OK(hl_queue_fill(q, NULL, NULL, b, 0, 32 * KIB, 7));
    hl_buffer_t* view = NULL;
    HL_ASSERT_OK(hl_buffer_subview(b, 0, 4, &view));
    hl_buffer_release(b);
    HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
    assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 32 * KIB);
    hl_buffer_release(view);  // The last reference, no dealloca.
    HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
    assert_true(hl_test_poll_bytes_in_use(d, 0, 2000));
    hl_memory_stats_t st = hl_test_memory_stats(d);
    assert_int_equal(st.fallback_releases_frontier, m == 0 ? 1 : 0);
    assert_int_equal(st.fallback_releases_device_sync, m == 1 ? 1 : 0);
    assert_int_equal(st.deallocas, 0);
    assert_int_equal(mem_queue_stats(q).bytes_in_use, 0);
    hl_queue_release(q);
    hl_device_release(d);
  }
}

// device-sync drains every queue of the device, even ones that never touched
// the buffer: the release returns only after B's host call has finished.
static void test_fallback_device_sync_blocks(void** state) {
  (void)state;
  mem_device_config_t cfg = {.fallback = HL_FALLBACK_DEVICE_SYNC};
  hl_device_t* d = mem_device_create(&cfg);
  hl_queue_t* qa = hl_test_queue_create(d);
  hl_queue_t* qb = hl_test_queue_create(d);
  hl_buffer_t* b = mem_alloca(qa, NULL, 0, NULL, 0, 8 * KIB);
  HL_ASSERT_OK(hl_queue_wait_idle(qa, MEM_DEADLINE()));
  mem_gate_t busy;
  mem_gate_init(&busy, 200);
  mem_gate_submit(qb, &busy);
  hl_buffer_release(b);
  assert_int_equal(atomic_load(&busy.done), 1);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  assert_int_equal(hl_test_memory_stats(d).fallback_releases_device_sync, 1);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  hl_queue_release(qa);
  hl_queue_release(qb);
  hl_device_release(d);
}

// frontier never blocks the releasing thread: B's host call is held until
// after the release returns, and the memory goes only once B passes it.
static void test_fallback_frontier_does_not_block(void** state) {
  (void)state;
  mem_device_config_t cfg = {.fallback = HL_FALLBACK_FRONTIER};
  hl_device_t* d = mem_device_create(&cfg);
  hl_queue_t* qa = hl_test_queue_create(d);
  hl_queue_t* qb = hl_test_queue_create(d);
  hl_buffer_t* b = mem_alloca(qa, NULL, 0, NULL, 0, 8 * KIB);
  HL_ASSERT_OK(hl_queue_wait_idle(qa, MEM_DEADLINE()));
  mem_gate_t busy;
  mem_gate_init(&busy, 0);
  mem_gate_submit(qb, &busy);
  hl_buffer_release(
      b);  // Would hang until the gate's 10 s timeout if blocking.
  assert_int_equal(atomic_load(&busy.done), 0);
  assert_int_equal(hl_test_memory_stats(d).fallback_releases_frontier, 1);
  hl_test_sleep_ms(20);
  // Not before B reaches its value at release time.
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 8 * KIB);
  mem_gate_open(&busy);
  HL_ASSERT_OK(hl_queue_wait_idle(qb, MEM_DEADLINE()));
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  assert_true(hl_test_poll_bytes_in_use(d, 0, 2000));
  assert_int_equal(atomic_load(&busy.timed_out), 0);
  hl_queue_release(qa);
  hl_queue_release(qb);
  hl_device_release(d);
}

static void test_oom_then_retry(void** state) {
  (void)state;
  mem_device_config_t cfg = {.limit_bytes = 1 * MIB};
  hl_device_t* d = mem_device_create(&cfg);
  hl_pool_attributes_t attrs;
  HL_ASSERT_OK(hl_device_pool_attributes(d, &attrs));
  assert_int_equal(attrs.limit_bytes, 1 * MIB);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();

  // Beyond the limit outright.
  hl_buffer_t* big = mem_alloca(q, NULL, 0, s, 1, 2 * MIB);
  hl_status_t st = hl_semaphore_wait(s, 1, MEM_DEADLINE());
  hl_test_assert_status_has(st, HL_STATUS_RESOURCE_EXHAUSTED, "2097152", NULL);
  hl_buffer_release(big);

  // Beyond what is left while another allocation is live.
  hl_semaphore_t* s2 = hl_test_semaphore_create();
  hl_buffer_t* a = mem_alloca(q, NULL, 0, s2, 1, 512 * KIB);
  mem_wait(s2, 1);
  hl_buffer_t* b = mem_alloca(q, NULL, 0, s2, 2, 768 * KIB);
  st = hl_semaphore_wait(s2, 2, MEM_DEADLINE());
  char text[1024];
  hl_status_format(st, text, sizeof(text));
  print_message("oom: %s\n", text);
  assert_non_null(strstr(text, "786432"));  // The request.
  assert_non_null(strstr(text, "used 524288"));
  char reserved[64];
  snprintf(reserved, sizeof(reserved), "reserved %llu",
           (unsigned long long)mem_reserved_for(512 * KIB));
  assert_non_null(strstr(text, reserved));
  hl_test_assert_status_has(st, HL_STATUS_RESOURCE_EXHAUSTED, "out of memory",
                            NULL);
  assert_null(hl_buffer_device_pointer(b));
  hl_buffer_release(b);
  hl_memory_stats_t ms = hl_test_memory_stats(d);
  assert_true(ms.ooms >= 2);
  assert_int_equal(ms.bytes_in_use, 512 * KIB);
  assert_true(mem_queue_stats(q).ooms >= 2);
  // An OOM fails the submission, not the queue.
  HL_ASSERT_OK(hl_queue_status(q));

  // Free a, then the retry fits (the cached block is trimmed to make room).
  hl_semaphore_t* s3 = hl_test_semaphore_create();
  mem_dealloca(q, NULL, 0, s3, 1, a);
  hl_buffer_release(a);
  mem_wait(s3, 1);
  b = mem_alloca(q, NULL, 0, s3, 2, 768 * KIB);
  mem_wait(s3, 2);
  assert_non_null(hl_buffer_device_pointer(b));
  assert_true(hl_test_memory_stats(d).bytes_reserved <=
              mem_reserved_for(1 * MIB));
  mem_dealloca(q, NULL, 0, NULL, 0, b);
  hl_buffer_release(b);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  hl_semaphore_release(s3);
  hl_semaphore_release(s2);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_device_release(d);
}

// Allocates and frees |count| blocks of |n| bytes on |q|, all live at once.
static void alloc_free_blocks(hl_queue_t* q, int count, uint64_t n) {
  hl_buffer_t* bs[8];
  assert_true(count <= 8);
  for (int i = 0; i < count; ++i) bs[i] = mem_alloca(q, NULL, 0, NULL, 0, n);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  for (int i = 0; i < count; ++i) {
    HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, bs[i]));
    hl_buffer_release(bs[i]);
  }
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
}

static void test_trim(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_pool_attributes_t attrs;
  HL_ASSERT_OK(hl_device_pool_attributes(d, &attrs));
  assert_int_equal(attrs.release_threshold, UINT64_MAX);  // Keep everything.
  hl_queue_t* q = hl_test_queue_create(d);
  const uint64_t n = 64 * KIB;
  alloc_free_blocks(q, 3, n);
  assert_int_equal(hl_test_memory_stats(d).bytes_reserved,
                   mem_reserved_for(3 * n));
  assert_int_equal(hl_test_memory_stats(d).bytes_reserved_peak,
                   mem_reserved_for(3 * n));
  HL_ASSERT_OK(hl_device_trim(d, n));
  assert_int_equal(hl_test_memory_stats(d).bytes_reserved, mem_reserved_for(n));
  // Live memory is never trimmed, and it counts: a trim leaves at most its
  // argument reserved, live memory included (ROCm's hipMemPoolTrimTo keeps
  // its argument of free memory on top of what is in use).
  hl_buffer_t* live = mem_alloca(q, NULL, 0, NULL, 0, 2 * n);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  // (hipline's suballocator gives its empty slab back before it grows.)
  assert_int_equal(
      hl_test_memory_stats(d).bytes_reserved,
      (hl_device_pool_mode(d) == HL_POOL_MODE_HIPLINE ? 0
                                                      : mem_reserved_for(n)) +
          mem_reserved_for(2 * n));
  HL_ASSERT_OK(hl_device_trim(d, mem_reserved_for(2 * n)));
  assert_int_equal(hl_test_memory_stats(d).bytes_reserved,
                   mem_reserved_for(2 * n));
  HL_ASSERT_OK(hl_device_trim(d, 0));
  assert_int_equal(hl_test_memory_stats(d).bytes_reserved,
                   mem_reserved_for(2 * n));
  HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, live));
  hl_buffer_release(live);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  HL_ASSERT_OK(hl_device_trim(d, 0));
  hl_memory_stats_t st = hl_test_memory_stats(d);
  assert_int_equal(st.bytes_reserved, 0);
  assert_int_equal(st.bytes_reserved_peak, mem_reserved_for(3 * n));
  HL_ASSERT_STATUS(hl_device_trim(NULL, 0), INVALID_ARGUMENT);
  hl_queue_release(q);
  hl_device_release(d);
}

// The host backend applies the threshold at its synchronization points
// (stream and event synchronize), which a device-sync fallback release
// reaches: cached blocks beyond the threshold go back to the system.
static void test_release_threshold_at_device_sync(void** state) {
  (void)state;
  mem_device_config_t cfg = {.fallback = HL_FALLBACK_DEVICE_SYNC,
                             .threshold_set = true,
                             .release_threshold = 64 * KIB};
  hl_device_t* d = mem_device_create(&cfg);
  hl_pool_attributes_t attrs;
  HL_ASSERT_OK(hl_device_pool_attributes(d, &attrs));
  assert_int_equal(attrs.release_threshold, 64 * KIB);
  hl_queue_t* q = hl_test_queue_create(d);
  const uint64_t n = 64 * KIB;
  hl_buffer_t* keep = mem_alloca(q, NULL, 0, NULL, 0, n);
  alloc_free_blocks(q, 4, n);
  // Waiting idle is a synchronization point too: the four freed blocks have
  // already shrunk to the threshold; |keep| is live.
  uint64_t before = hl_test_memory_stats(d).bytes_reserved;
  assert_true(before <= mem_reserved_for(64 * KIB + n));
  assert_true(before >= n);
  hl_buffer_release(keep);  // device-sync: drains, then applies the threshold.
  uint64_t after = hl_test_memory_stats(d).bytes_reserved;
  print_message("threshold: reserved %llu -> %llu\n",
                (unsigned long long)before, (unsigned long long)after);
  // The four cached blocks shrink to the threshold; |keep|'s block is cached
  // after the drain, so at most one more.
  assert_true(after <= mem_reserved_for(64 * KIB + n));
  assert_true(after <= before);
  hl_queue_release(q);
  hl_device_release(d);
}

// device.h: "freed blocks beyond this are returned to the system at
// synchronization points". hl_device_wait_idle is the public API's
// synchronization point; with a threshold of 0, nothing should stay cached
// after it.
static void test_release_threshold_at_wait_idle(void** state) {
  (void)state;
  mem_device_config_t cfg = {.threshold_set = true, .release_threshold = 0};
  hl_device_t* d = mem_device_create(&cfg);
  hl_queue_t* q = hl_test_queue_create(d);
  alloc_free_blocks(q, 2, 64 * KIB);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  hl_memory_stats_t st = hl_test_memory_stats(d);
  print_message("threshold 0 after wait idle: reserved %llu\n",
                (unsigned long long)st.bytes_reserved);
  assert_int_equal(st.bytes_reserved, 0);
  hl_queue_release(q);
  hl_device_release(d);
}

static void test_stats_per_queue_and_peaks(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q0 = hl_test_queue_create(d);
  hl_queue_t* q1 = hl_test_queue_create(d);
  hl_buffer_t* a = mem_alloca(q0, NULL, 0, NULL, 0, 4 * KIB);
  hl_buffer_t* b = mem_alloca(q0, NULL, 0, NULL, 0, 4 * KIB);
  hl_buffer_t* c = mem_alloca(q1, NULL, 0, NULL, 0, 64 * KIB);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));

  hl_memory_stats_t s0 = mem_queue_stats(q0), s1 = mem_queue_stats(q1),
                    sd = hl_test_memory_stats(d);
  assert_int_equal(s0.allocas, 2);
  assert_int_equal(s0.bytes_in_use, 8 * KIB);
  assert_int_equal(s1.allocas, 1);
  assert_int_equal(s1.bytes_in_use, 64 * KIB);
  assert_int_equal(sd.allocas, 3);
  assert_int_equal(sd.bytes_in_use, 72 * KIB);
  assert_int_equal(sd.bytes_in_use_peak, 72 * KIB);
  // bytes_reserved is device-wide everywhere.
  assert_int_equal(s0.bytes_reserved, sd.bytes_reserved);
  assert_int_equal(s1.bytes_reserved, sd.bytes_reserved);
  assert_true(sd.bytes_reserved >= sd.bytes_in_use);
  assert_true(sd.bytes_reserved_peak >= sd.bytes_reserved);

  // A q0 buffer freed on q1: the bytes leave q0's count, the dealloca is
  // counted on q1.
  HL_ASSERT_OK(hl_queue_dealloca(q1, NULL, NULL, a));
  HL_ASSERT_OK(hl_queue_dealloca(q0, NULL, NULL, b));
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  hl_time_t deadline = hl_deadline_after(2000 * MEM_MS);
  while (hl_test_memory_stats(d).deallocas < 2 && hl_time_now() < deadline)
    hl_test_sleep_ms(1);
  s0 = mem_queue_stats(q0);
  s1 = mem_queue_stats(q1);
  assert_int_equal(s0.bytes_in_use, 0);
  assert_int_equal(s0.bytes_in_use_peak, 8 * KIB);
  assert_int_equal(s0.deallocas, 1);
  assert_int_equal(s1.deallocas, 1);
  assert_int_equal(s1.bytes_in_use, 64 * KIB);
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 64 * KIB);

  // c goes through the fallback: counted on its alloca queue.
  hl_buffer_release(c);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  assert_true(hl_test_poll_bytes_in_use(d, 0, 2000));
  s1 = mem_queue_stats(q1);
  assert_int_equal(s1.bytes_in_use, 0);
  assert_int_equal(s1.fallback_releases_frontier, 1);
  sd = hl_test_memory_stats(d);
  assert_int_equal(sd.deallocas, 2);
  assert_int_equal(sd.fallback_releases_frontier, 1);
  assert_int_equal(sd.bytes_in_use_peak, 72 * KIB);
  hl_buffer_release(a);
  hl_buffer_release(b);

  HL_ASSERT_STATUS(hl_device_memory_stats(NULL, &sd), INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_device_memory_stats(d, NULL), INVALID_ARGUMENT);
  HL_ASSERT_STATUS(hl_queue_memory_stats(NULL, &sd), INVALID_ARGUMENT);
  hl_queue_release(q0);
  hl_queue_release(q1);
  hl_device_release(d);
}

// Sizes whose pool class is not a multiple of the pool's 256-byte alignment
// (320, 640, 896 bytes): the block must still be a valid allocation
// (aligned_alloc needs the size to be a multiple of the alignment; ASan
// aborts otherwise) and hold its data.
static void test_odd_size_classes(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  const uint64_t sizes[] = {300, 600, 900, 1500};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    uint32_t host[512];
    memset(host, 0, sizeof(host));
    hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, sizes[i]);
    HL_ASSERT_OK(hl_queue_fill(q, NULL, NULL, b, 0, sizes[i], 0x0BADF00Du));
    HL_ASSERT_OK(hl_queue_read(q, NULL, NULL, b, 0, host, sizes[i]));
    HL_ASSERT_OK(hl_queue_dealloca(q, NULL, NULL, b));
    hl_buffer_release(b);
    HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
    assert_true(((uintptr_t)host & 3) == 0);
    for (uint64_t k = 0; k < sizes[i] / 4; ++k)
      assert_int_equal(host[k], 0x0BADF00Du);
  }
  assert_int_equal(hl_test_memory_stats(d).bytes_in_use, 0);
  hl_queue_release(q);
  hl_device_release(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cross_queue_reuse_waits_for_free),
      cmocka_unit_test(test_same_queue_reuse_while_stream_behind),
      cmocka_unit_test(test_fallback_release_frees),
      cmocka_unit_test(test_fallback_device_sync_blocks),
      cmocka_unit_test(test_fallback_frontier_does_not_block),
      cmocka_unit_test(test_oom_then_retry),
      cmocka_unit_test(test_trim),
      cmocka_unit_test(test_release_threshold_at_device_sync),
      cmocka_unit_test(test_release_threshold_at_wait_idle),
      cmocka_unit_test(test_stats_per_queue_and_peaks),
      cmocka_unit_test(test_odd_size_classes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
