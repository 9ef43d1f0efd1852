// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Tests for the ideal best-fit arena in bench/stress/arena_model.{h,c}:
// hand-made sequences whose addresses and tops follow from the rules by
// hand (the comments show the sums), and random traffic checked against a
// brute-force search over the live blocks.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
// cmocka.h needs the includes above first.
#include <cmocka.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bench/replay_log.h"
#include "bench/stress/arena_model.h"

#define KiB ((uint64_t)1 << 10)

static void expect_ok(hl_status_t st) {
  if (st) {
    hl_status_free(st);
    fail_msg("unexpected error status");
  }
}

static void expect_code(hl_status_t st, hl_status_code_t code) {
  assert_non_null(st);
  assert_int_equal(hl_status_code(st), code);
  hl_status_free(st);
}

static hl_arena_model_t* make(void) {
  hl_arena_model_t* model = NULL;
  expect_ok(hl_arena_model_create(&model));
  assert_non_null(model);
  return model;
}

static hl_arena_model_stats_t stats_of(const hl_arena_model_t* model) {
  hl_arena_model_stats_t s;
  hl_arena_model_query_stats(model, &s);
  return s;
}

// Allocates |size| under |id| and returns its address.
static uint64_t alloc_at(hl_arena_model_t* m, uint32_t id, uint64_t size) {
  expect_ok(hl_arena_model_alloc(m, id, size));
  return hl_arena_model_address(m, id);
}

static void test_rounding(void** state) {
  (void)state;
  static const struct {
    uint64_t size, reserved;
  } kCases[] = {
      {0, 256}, {1, 256}, {256, 256}, {257, 512}, {1000, 1024}, {4096, 4096},
  };
  for (size_t i = 0; i < sizeof(kCases) / sizeof(kCases[0]); ++i) {
    hl_arena_model_t* m = make();
    expect_ok(hl_arena_model_alloc(m, 7, kCases[i].size));
    hl_arena_model_stats_t s = stats_of(m);
    assert_int_equal(s.reserved_bytes, kCases[i].reserved);
    assert_int_equal(s.allocated_bytes, kCases[i].reserved);
    assert_int_equal(hl_arena_model_address(m, 7), 0);
    hl_arena_model_destroy(m);
  }
}

// Holes of 1, 2 and 1 KiB: a 1 KiB request takes the lower 1 KiB hole (the
// smallest that fits, lowest address on ties), the next the other one, and
// 1.5 KiB splits the 2 KiB hole; the top never moves.
static void test_best_fit_smallest_then_lowest(void** state) {
  (void)state;
  hl_arena_model_t* m = make();
  assert_int_equal(alloc_at(m, 0, 1 * KiB), 0);
  assert_int_equal(alloc_at(m, 1, 256), 1024);
  assert_int_equal(alloc_at(m, 2, 2 * KiB), 1280);
  assert_int_equal(alloc_at(m, 3, 256), 3328);
  assert_int_equal(alloc_at(m, 4, 1 * KiB), 3584);
  assert_int_equal(alloc_at(m, 5, 256), 4608);
  assert_int_equal(stats_of(m).reserved_bytes, 4864);
  expect_ok(hl_arena_model_free(m, 4));
  expect_ok(hl_arena_model_free(m, 2));
  expect_ok(hl_arena_model_free(m, 0));
  assert_int_equal(stats_of(m).free_blocks, 3);
  assert_int_equal(alloc_at(m, 10, 1 * KiB), 0);
  assert_int_equal(alloc_at(m, 11, 1 * KiB), 3584);
  assert_int_equal(alloc_at(m, 12, 1536), 1280);
  assert_int_equal(alloc_at(m, 13, 512), 2816);  // 1280 + 1536.
  hl_arena_model_stats_t s = stats_of(m);
  assert_int_equal(s.reserved_bytes, 4864);
  assert_int_equal(s.peak_reserved_bytes, 4864);
  assert_int_equal(s.allocated_bytes, 4864);
  assert_int_equal(s.free_blocks, 0);
  assert_int_equal(s.alloc_count, 10);
  hl_arena_model_destroy(m);
}

// Frees merge with both neighbours; free space that reaches the top lowers
// it, and the peak stays.
static void test_coalescing_and_top(void** state) {
  (void)state;
  hl_arena_model_t* m = make();
  for (uint32_t id = 0; id < 4; ++id) alloc_at(m, id, 1 * KiB);
  expect_ok(hl_arena_model_free(m, 1));
  expect_ok(hl_arena_model_free(m, 0));  // Merges right: 2 KiB at 0.
  assert_int_equal(stats_of(m).free_blocks, 1);
  expect_ok(hl_arena_model_free(m, 2));  // Merges left: 3 KiB at 0.
  assert_int_equal(stats_of(m).free_blocks, 1);
  assert_int_equal(alloc_at(m, 5, 3 * KiB), 0);
  assert_int_equal(stats_of(m).reserved_bytes, 4 * KiB);
  expect_ok(hl_arena_model_free(m, 3));  // The top block: top 4 -> 3 KiB.
  assert_int_equal(stats_of(m).reserved_bytes, 3 * KiB);
  // A hole below the top block merges into the top when that goes.
  assert_int_equal(alloc_at(m, 6, 1 * KiB), 3 * KiB);
  expect_ok(hl_arena_model_free(m, 5));
  expect_ok(hl_arena_model_free(m, 6));
  hl_arena_model_stats_t s = stats_of(m);
  assert_int_equal(s.reserved_bytes, 0);
  assert_int_equal(s.free_blocks, 0);
  assert_int_equal(s.allocated_bytes, 0);
  assert_int_equal(s.peak_reserved_bytes, 4 * KiB);
  assert_int_equal(s.peak_allocated_bytes, 4 * KiB);
  // Ids can be used again once freed.
  assert_int_equal(alloc_at(m, 0, 1), 0);
  hl_arena_model_destroy(m);
}

// A request no hole fits goes at the top, above the holes.
static void test_grows_at_top(void** state) {
  (void)state;
  hl_arena_model_t* m = make();
  alloc_at(m, 0, 1 * KiB);
  alloc_at(m, 1, 256);
  expect_ok(hl_arena_model_free(m, 0));
  assert_int_equal(alloc_at(m, 2, 2 * KiB), 1280);
  hl_arena_model_stats_t s = stats_of(m);
  assert_int_equal(s.reserved_bytes, 3328);
  assert_int_equal(s.free_blocks, 1);
  hl_arena_model_destroy(m);
}

static void test_bad_input(void** state) {
  (void)state;
  expect_code(hl_arena_model_create(NULL), HL_STATUS_INVALID_ARGUMENT);
  expect_code(hl_arena_model_alloc(NULL, 0, 1), HL_STATUS_INVALID_ARGUMENT);
  expect_code(hl_arena_model_free(NULL, 0), HL_STATUS_INVALID_ARGUMENT);
  hl_arena_model_t* m = make();
  expect_code(hl_arena_model_alloc(m, (uint32_t)1 << 31, 1),
              HL_STATUS_INVALID_ARGUMENT);
  expect_code(hl_arena_model_alloc(m, 0, ((uint64_t)1 << 48) + 1),
              HL_STATUS_INVALID_ARGUMENT);
  expect_ok(hl_arena_model_alloc(m, 0, 1));
  expect_code(hl_arena_model_alloc(m, 0, 1), HL_STATUS_ALREADY_EXISTS);
  expect_code(hl_arena_model_free(m, 1), HL_STATUS_NOT_FOUND);
  expect_code(hl_arena_model_free(m, 5000), HL_STATUS_NOT_FOUND);
  expect_ok(hl_arena_model_free(m, 0));
  expect_code(hl_arena_model_free(m, 0), HL_STATUS_NOT_FOUND);
  assert_true(hl_arena_model_address(m, 0) == UINT64_MAX);
  assert_true(hl_arena_model_address(NULL, 0) == UINT64_MAX);
  hl_arena_model_stats_t s;
  hl_arena_model_query_stats(NULL, &s);
  assert_int_equal(s.peak_reserved_bytes, 0);
  hl_arena_model_destroy(m);
  hl_arena_model_destroy(NULL);
}

static void test_replay_log(void** state) {
  (void)state;
  // 1000 -> 1 KiB at 0, 3000 -> 3 KiB at 1 KiB (top 4 KiB); the 1 KiB
  // hole serves 500 -> 512 B, and a 0-byte allocation 256 B of its rest
  // (at 512); freeing 3000 merges it with the 256 B left at 768 and the top
  // drops to 768.
  static const char kLog[] =
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,0:00:00.000001,allocate,0x1000,1000,0\n"
      "1,0:00:00.000002,allocate,0x9000,3000,1\n"
      "1,0:00:00.000003,free,0x1000,1000,0\n"
      "1,0:00:00.000004,allocate,0x1000,500,0\n"
      "1,0:00:00.000005,allocate,0x2000,0,0\n"
      "1,0:00:00.000006,free,0x9000,3000,1\n";
  hl_replay_log_t log;
  expect_ok(hl_replay_log_parse_buffer(kLog, strlen(kLog), "t.csv",
                                       HL_REPLAY_LOG_FLAG_NONE, &log));
  hl_arena_model_stats_t s;
  expect_ok(hl_arena_model_replay(&log, &s));
  assert_int_equal(s.peak_reserved_bytes, 4 * KiB);
  assert_int_equal(s.alloc_count, 4);
  assert_int_equal(s.allocated_bytes, 768);
  assert_int_equal(s.reserved_bytes, 768);
  assert_int_equal(s.free_blocks, 0);
  expect_code(hl_arena_model_replay(NULL, &s), HL_STATUS_INVALID_ARGUMENT);
  hl_replay_log_deinitialize(&log);
}

// Random traffic against a brute-force arena: the live blocks sorted by
// address, the holes between them searched whole for the best fit.
enum { kIds = 48 };
typedef struct {
  bool live[kIds];
  uint64_t addr[kIds];
  uint64_t size[kIds];
} reference_t;

static uint64_t reference_top(const reference_t* r) {
  uint64_t top = 0;
  for (int i = 0; i < kIds; ++i) {
    if (r->live[i] && r->addr[i] + r->size[i] > top) {
      top = r->addr[i] + r->size[i];
    }
  }
  return top;
}

// The end of the live block that ends highest at or below |addr|, else 0.
static uint64_t reference_hole_start(const reference_t* r, uint64_t addr) {
  uint64_t start = 0;
  for (int i = 0; i < kIds; ++i) {
    uint64_t end = r->addr[i] + r->size[i];
    if (r->live[i] && end <= addr && end > start) start = end;
  }
  return start;
}

static uint64_t reference_place(const reference_t* r, uint64_t size) {
  uint64_t best = UINT64_MAX, best_size = UINT64_MAX;
  // Every hole ends at the start of a live block.
  for (int i = 0; i < kIds; ++i) {
    if (!r->live[i]) continue;
    uint64_t start = reference_hole_start(r, r->addr[i]);
    uint64_t hole = r->addr[i] - start;
    if (hole >= size &&
        (hole < best_size || (hole == best_size && start < best))) {
      best = start;
      best_size = hole;
    }
  }
  return best != UINT64_MAX ? best : reference_top(r);
}

static void test_random_against_brute_force(void** state) {
  (void)state;
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  for (int round = 0; round < 10; ++round) {
    hl_arena_model_t* m = make();
    reference_t ref;
    memset(&ref, 0, sizeof(ref));
    uint64_t peak = 0;
    for (int step = 0; step < 3000; ++step) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      uint32_t id = (uint32_t)(rng % kIds);
      if (ref.live[id]) {
        expect_ok(hl_arena_model_free(m, id));
        ref.live[id] = false;
      } else {
        uint64_t size = (rng >> 16) % (8 * KiB);
        uint64_t rounded = size ? (size + 255) / 256 * 256 : 256;
        uint64_t want = reference_place(&ref, rounded);
        assert_int_equal(alloc_at(m, id, size), want);
        ref.live[id] = true;
        ref.addr[id] = want;
        ref.size[id] = rounded;
      }
      uint64_t top = reference_top(&ref);
      if (top > peak) peak = top;
      hl_arena_model_stats_t s = stats_of(m);
      assert_int_equal(s.reserved_bytes, top);
      assert_int_equal(s.peak_reserved_bytes, peak);
    }
    hl_arena_model_destroy(m);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rounding),
      cmocka_unit_test(test_best_fit_smallest_then_lowest),
      cmocka_unit_test(test_coalescing_and_top),
      cmocka_unit_test(test_grows_at_top),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_replay_log),
      cmocka_unit_test(test_random_against_brute_force),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
