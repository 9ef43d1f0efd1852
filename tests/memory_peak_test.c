// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hl_device_reset_peak_memory_stats: the in-use peaks of the device and its
// queues and the reserved peak start again from the current values, with
// either pool (the driver's, hipline's suballocator).
#include "tests/memory_util.h"

#define KIB 1024ull

static hl_device_t* peak_device_create(hl_pool_mode_t mode) {
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = hl_test_backend_kind();
  o.checked = 0;
  o.fallback = HL_FALLBACK_FRONTIER;
  o.pool_mode = mode;
  hl_device_t* d = NULL;
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  return d;
}

static void free_now(hl_queue_t* q, hl_buffer_t* b) {
  mem_dealloca(q, NULL, 0, NULL, 0, b);
  hl_buffer_release(b);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
}

static void check_reset(hl_pool_mode_t mode) {
  hl_device_t* d = peak_device_create(mode);
  hl_queue_t* q0 = hl_test_queue_create(d);
  hl_queue_t* q1 = hl_test_queue_create(d);
  hl_buffer_t* big = mem_alloca(q0, NULL, 0, NULL, 0, 512 * KIB);
  hl_buffer_t* small = mem_alloca(q1, NULL, 0, NULL, 0, 32 * KIB);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  free_now(q0, big);
  assert_true(hl_test_poll_bytes_in_use(d, 32 * KIB, 2000));

  hl_memory_stats_t before = hl_test_memory_stats(d);
  assert_int_equal(before.bytes_in_use_peak, 544 * KIB);
  assert_int_equal(mem_queue_stats(q0).bytes_in_use_peak, 512 * KIB);
  HL_ASSERT_OK(hl_device_trim(d, 0));

  HL_ASSERT_OK(hl_device_reset_peak_memory_stats(d));
  hl_memory_stats_t after = hl_test_memory_stats(d);
  assert_int_equal(after.bytes_in_use, 32 * KIB);
  assert_int_equal(after.bytes_in_use_peak, 32 * KIB);
  assert_int_equal(mem_queue_stats(q0).bytes_in_use_peak, 0);
  assert_int_equal(mem_queue_stats(q1).bytes_in_use_peak, 32 * KIB);
  // Trimmed: the reservation fell below the peak it had before the reset.
  assert_true(after.bytes_reserved < before.bytes_reserved_peak);
  assert_int_equal(after.bytes_reserved_peak, after.bytes_reserved);

  // The peaks grow again from there.
  hl_buffer_t* mid = mem_alloca(q0, NULL, 0, NULL, 0, 128 * KIB);
  HL_ASSERT_OK(hl_device_wait_idle(d, MEM_DEADLINE()));
  hl_memory_stats_t grown = hl_test_memory_stats(d);
  assert_int_equal(grown.bytes_in_use_peak, 160 * KIB);
  assert_int_equal(mem_queue_stats(q0).bytes_in_use_peak, 128 * KIB);
  assert_true(grown.bytes_reserved_peak >= grown.bytes_reserved);
  assert_true(grown.bytes_reserved_peak >= 160 * KIB);
  assert_true(grown.bytes_reserved_peak < before.bytes_reserved_peak);

  free_now(q0, mid);
  free_now(q1, small);
  hl_queue_release(q0);
  hl_queue_release(q1);
  hl_device_release(d);
}

static void test_reset_driver_pool(void** state) {
  (void)state;
  check_reset(HL_POOL_MODE_DRIVER);
}

static void test_reset_hipline_pool(void** state) {
  (void)state;
  check_reset(HL_POOL_MODE_HIPLINE);
}

static void test_reset_null_device(void** state) {
  (void)state;
  HL_ASSERT_STATUS(hl_device_reset_peak_memory_stats(NULL), INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reset_driver_pool),
      cmocka_unit_test(test_reset_hipline_pool),
      cmocka_unit_test(test_reset_null_device),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
