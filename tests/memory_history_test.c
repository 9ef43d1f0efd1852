// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hl_memory_history_begin/end: the PyTorch memory snapshot of allocas and
// frees. The snapshot's content is checked by tests/memory_history_check.py
// (run with HL_TEST_PYTHON), its errors and limits here.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hipline/trace.h"
#include "tests/memory_util.h"

#define KIB 1024ull

static void snapshot_path(char* path, size_t capacity, const char* name) {
  snprintf(path, capacity, "%s/%s", HL_TEST_WORK_DIR, name);
  remove(path);
}

// Two allocas, the first freed: the snapshot has both allocs, one free, and
// the second as the one live segment with its active_allocated block.
static void test_snapshot_live_segment(void** state) {
  (void)state;
  char path[512];
  snapshot_path(path, sizeof(path), "memory_history_live.pickle");
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_memory_history_begin(0);
  hl_buffer_t* a = mem_alloca(q, NULL, 0, NULL, 0, 64 * KIB);
  hl_buffer_t* b = mem_alloca(q, NULL, 0, NULL, 0, 32 * KIB);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  mem_dealloca(q, NULL, 0, NULL, 0, a);
  hl_buffer_release(a);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_true(hl_test_poll_bytes_in_use(d, 32 * KIB, 2000));
  HL_ASSERT_OK(hl_memory_history_end(path));
  assert_int_equal(hl_memory_history_dropped(), 0);
  char command[1024];
  snprintf(command, sizeof(command),
           "'%s' '%s/tests/memory_history_check.py' '%s'", HL_TEST_PYTHON,
           HL_TEST_SOURCE_DIR, path);
  assert_int_equal(system(command), 0);
  mem_dealloca(q, NULL, 0, NULL, 0, b);
  hl_buffer_release(b);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  hl_queue_release(q);
  hl_device_release(d);
}

// Without a history nothing is written, and a second end changes nothing.
static void test_end_without_begin(void** state) {
  (void)state;
  char path[512];
  snapshot_path(path, sizeof(path), "memory_history_none.pickle");
  HL_ASSERT_OK(hl_memory_history_end(path));
  assert_int_equal(access(path, F_OK), -1);
  hl_memory_history_begin(0);
  HL_ASSERT_OK(hl_memory_history_end(NULL));  // Discarded.
  HL_ASSERT_OK(hl_memory_history_end(path));
  assert_int_equal(access(path, F_OK), -1);
}

static void test_unwritable_path(void** state) {
  (void)state;
  hl_memory_history_begin(0);
  HL_ASSERT_STATUS(hl_memory_history_end("/nonexistent-dir/x.pickle"),
                   PERMISSION_DENIED);
}

// Beyond the limit events are counted as dropped.
static void test_limit_drops(void** state) {
  (void)state;
  char path[512];
  snapshot_path(path, sizeof(path), "memory_history_limit.pickle");
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_memory_history_begin(2);
  hl_buffer_t* b[3];
  for (int i = 0; i < 3; ++i) b[i] = mem_alloca(q, NULL, 0, NULL, 0, 4 * KIB);
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(hl_memory_history_dropped(), 1);
  for (int i = 0; i < 3; ++i) {
    mem_dealloca(q, NULL, 0, NULL, 0, b[i]);
    hl_buffer_release(b[i]);
  }
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  assert_int_equal(hl_memory_history_dropped(), 4);
  HL_ASSERT_OK(hl_memory_history_end(path));
  assert_int_equal(access(path, F_OK), 0);
  hl_queue_release(q);
  hl_device_release(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_snapshot_live_segment),
      cmocka_unit_test(test_end_without_begin),
      cmocka_unit_test(test_unwritable_path),
      cmocka_unit_test(test_limit_drops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
