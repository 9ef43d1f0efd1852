// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Tests for the PyTorch caching allocator model in
// bench/stress/torch_model.{h,c}: hand-made event sequences whose reserved
// bytes follow from PyTorch's rules by hand (the comments show the sums).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
// cmocka.h needs the includes above first.
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "bench/replay_log.h"
#include "bench/stress/torch_model.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)

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

static hl_torch_model_t* make(uint64_t limit) {
  hl_torch_model_t* model = NULL;
  expect_ok(hl_torch_model_create(limit, &model));
  assert_non_null(model);
  return model;
}

static hl_torch_model_stats_t stats_of(const hl_torch_model_t* model) {
  hl_torch_model_stats_t s;
  hl_torch_model_query_stats(model, &s);
  return s;
}

// Reserved bytes after one allocation of |size| on a fresh model.
static uint64_t reserved_for_one(uint64_t size, uint64_t* out_allocated) {
  hl_torch_model_t* m = make(0);
  expect_ok(hl_torch_model_alloc(m, 0, size));
  hl_torch_model_stats_t s = stats_of(m);
  hl_torch_model_destroy(m);
  *out_allocated = s.allocated_bytes;
  return s.reserved_bytes;
}

static void test_segment_sizes(void** state) {
  (void)state;
  static const struct {
    uint64_t size, reserved, allocated;
  } kCases[] = {
      // Small (<= 1 MiB, after rounding to 512 B): a 2 MiB segment, split.
      {1, 2 * MiB, 512},
      {600 * KiB, 2 * MiB, 600 * KiB},
      {600 * KiB + 1, 2 * MiB, 600 * KiB + 512},
      {MiB, 2 * MiB, MiB},
      // Large under 10 MiB (kMinLargeAlloc): a 20 MiB segment, split.
      {MiB + 1, 20 * MiB, MiB + 512},
      {5 * MiB, 20 * MiB, 5 * MiB},
      {10 * MiB - 512, 20 * MiB, 10 * MiB - 512},
      // 10 MiB and more: the request rounded up to 2 MiB (kRoundLarge); a
      // rest of 1 MiB or less is not split off.
      {10 * MiB - 511, 10 * MiB, 10 * MiB},
      {12 * MiB + 1, 14 * MiB, 12 * MiB + 512},
      {15 * MiB, 16 * MiB, 16 * MiB},
      {19 * MiB, 20 * MiB, 20 * MiB},
      {50 * MiB, 50 * MiB, 50 * MiB},
      {51 * MiB + 1, 52 * MiB, 52 * MiB},
  };
  for (size_t i = 0; i < sizeof(kCases) / sizeof(kCases[0]); ++i) {
    uint64_t allocated = 0;
    assert_int_equal(reserved_for_one(kCases[i].size, &allocated),
                     kCases[i].reserved);
    assert_int_equal(allocated, kCases[i].allocated);
  }

  // Small requests pack into one 2 MiB segment until it is full.
  hl_torch_model_t* m = make(0);
  expect_ok(hl_torch_model_alloc(m, 0, 600 * KiB));
  expect_ok(hl_torch_model_alloc(m, 1, 600 * KiB));
  expect_ok(hl_torch_model_alloc(m, 2, 600 * KiB));
  assert_int_equal(stats_of(m).reserved_bytes, 2 * MiB);
  expect_ok(hl_torch_model_alloc(m, 3, 600 * KiB));  // 248 KiB were left.
  assert_int_equal(stats_of(m).reserved_bytes, 4 * MiB);
  expect_ok(hl_torch_model_alloc(m, 4, 248 * KiB));  // Best fit: the first.
  assert_int_equal(stats_of(m).reserved_bytes, 4 * MiB);
  assert_int_equal(stats_of(m).segment_count, 2);
  assert_int_equal(stats_of(m).peak_reserved_bytes, 4 * MiB);
  hl_torch_model_destroy(m);
}

static void test_free_then_reuse(void** state) {
  (void)state;
  hl_torch_model_t* m = make(0);
  expect_ok(hl_torch_model_alloc(m, 0, 5 * MiB));
  expect_ok(hl_torch_model_free(m, 0));
  // Freed segments stay reserved, and serve the next request.
  assert_int_equal(stats_of(m).reserved_bytes, 20 * MiB);
  assert_int_equal(stats_of(m).allocated_bytes, 0);
  expect_ok(hl_torch_model_alloc(m, 0, 5 * MiB));
  expect_ok(hl_torch_model_alloc(m, 1, 14 * MiB));  // The 15 MiB rest.
  assert_int_equal(stats_of(m).reserved_bytes, 20 * MiB);
  assert_int_equal(stats_of(m).segment_allocs, 1);
  // Small frees never serve large requests, nor large ones small requests.
  expect_ok(hl_torch_model_alloc(m, 2, 512 * KiB));
  assert_int_equal(stats_of(m).reserved_bytes, 22 * MiB);
  expect_ok(hl_torch_model_free(m, 2));
  expect_ok(hl_torch_model_alloc(m, 2, 2 * MiB));
  assert_int_equal(stats_of(m).reserved_bytes, 42 * MiB);
  hl_torch_model_destroy(m);
}

static void test_split_and_merge(void** state) {
  (void)state;
  hl_torch_model_t* m = make(0);
  // One 20 MiB segment: A 8 MiB, B 8 MiB, 4 MiB rest (each split leaves
  // more than 1 MiB).
  expect_ok(hl_torch_model_alloc(m, 0, 8 * MiB));
  expect_ok(hl_torch_model_alloc(m, 1, 8 * MiB));
  assert_int_equal(stats_of(m).reserved_bytes, 20 * MiB);
  expect_ok(hl_torch_model_free(m, 0));
  expect_ok(hl_torch_model_free(m, 1));
  // A, B and the rest merged back: 19 MiB fits (it would not in 8 + 8 + 4).
  expect_ok(hl_torch_model_alloc(m, 2, 19 * MiB));
  assert_int_equal(stats_of(m).reserved_bytes, 20 * MiB);
  // 1 MiB left is not more than kSmallSize: no split, the block is whole.
  assert_int_equal(stats_of(m).allocated_bytes, 20 * MiB);
  expect_ok(hl_torch_model_alloc(m, 3, 2 * MiB));
  assert_int_equal(stats_of(m).reserved_bytes, 40 * MiB);
  // 1.5 MiB left is more than kSmallSize: split; the rest serves 1.5 MiB.
  expect_ok(hl_torch_model_alloc(m, 4, 16 * MiB + 512 * KiB));
  assert_int_equal(stats_of(m).reserved_bytes, 40 * MiB);
  expect_ok(hl_torch_model_alloc(m, 5, MiB + 512 * KiB));
  assert_int_equal(stats_of(m).reserved_bytes, 40 * MiB);
  // Small segments split down to the last 512 B (1 MiB + 1 MiB - 512 + 512).
  expect_ok(hl_torch_model_alloc(m, 6, MiB));
  expect_ok(hl_torch_model_alloc(m, 7, MiB - 512));
  expect_ok(hl_torch_model_alloc(m, 8, 512));
  assert_int_equal(stats_of(m).reserved_bytes, 42 * MiB);
  expect_ok(hl_torch_model_alloc(m, 9, 1));
  assert_int_equal(stats_of(m).reserved_bytes, 44 * MiB);
  hl_torch_model_destroy(m);
}

static void test_best_fit(void** state) {
  (void)state;
  hl_torch_model_t* m = make(0);
  // X: its own 12 MiB segment. Y 4 MiB + Z 16 MiB fill a 20 MiB segment.
  expect_ok(hl_torch_model_alloc(m, 0, 12 * MiB));
  expect_ok(hl_torch_model_alloc(m, 1, 4 * MiB));
  expect_ok(hl_torch_model_alloc(m, 2, 16 * MiB));
  assert_int_equal(stats_of(m).reserved_bytes, 32 * MiB);
  // Free blocks: 12 MiB (lower address), 4 MiB. 4 MiB takes the 4 MiB block,
  // so 12 MiB still fits; first fit would have split the 12 MiB block.
  expect_ok(hl_torch_model_free(m, 0));
  expect_ok(hl_torch_model_free(m, 1));
  expect_ok(hl_torch_model_alloc(m, 3, 4 * MiB));
  expect_ok(hl_torch_model_alloc(m, 4, 12 * MiB));
  assert_int_equal(stats_of(m).reserved_bytes, 32 * MiB);
  assert_int_equal(stats_of(m).segment_allocs, 2);
  hl_torch_model_destroy(m);
}

static void test_device_limit(void** state) {
  (void)state;
  hl_torch_model_t* m = make(30 * MiB);
  expect_ok(hl_torch_model_alloc(m, 0, 5 * MiB));  // 20 MiB segment.
  expect_ok(hl_torch_model_free(m, 0));
  // 20 + 22 > 30: the whole free 20 MiB segment goes, then 22 MiB fits.
  expect_ok(hl_torch_model_alloc(m, 1, 22 * MiB));
  hl_torch_model_stats_t s = stats_of(m);
  assert_int_equal(s.reserved_bytes, 22 * MiB);
  assert_int_equal(s.peak_reserved_bytes, 22 * MiB);
  assert_int_equal(s.segment_frees, 1);
  // 22 + 10 > 30 and nothing cached to give back: an OOM.
  expect_code(hl_torch_model_alloc(m, 2, 10 * MiB),
              HL_STATUS_RESOURCE_EXHAUSTED);
  assert_int_equal(stats_of(m).oom_count, 1);
  // A segment split and partly in use is not released, neither its free rest
  // (2 MiB + 20 MiB in use) nor its free head (2 MiB free + 20 MiB in use).
  expect_ok(hl_torch_model_free(m, 1));
  expect_ok(hl_torch_model_alloc(m, 3, 2 * MiB));  // From the free 22 MiB.
  expect_code(hl_torch_model_alloc(m, 4, 24 * MiB),
              HL_STATUS_RESOURCE_EXHAUSTED);
  assert_int_equal(stats_of(m).reserved_bytes, 22 * MiB);
  expect_ok(hl_torch_model_alloc(m, 5, 20 * MiB));  // The rest, exactly.
  expect_ok(hl_torch_model_free(m, 3));
  expect_code(hl_torch_model_alloc(m, 4, 24 * MiB),
              HL_STATUS_RESOURCE_EXHAUSTED);
  assert_int_equal(stats_of(m).reserved_bytes, 22 * MiB);
  assert_int_equal(stats_of(m).segment_frees, 1);
  assert_int_equal(stats_of(m).oom_count, 3);
  hl_torch_model_destroy(m);
}

static void test_bad_input(void** state) {
  (void)state;
  hl_torch_model_t* m = make(0);
  expect_code(hl_torch_model_create(0, NULL), HL_STATUS_INVALID_ARGUMENT);
  expect_code(hl_torch_model_alloc(NULL, 0, 1), HL_STATUS_INVALID_ARGUMENT);
  expect_code(hl_torch_model_alloc(m, 0, 0), HL_STATUS_INVALID_ARGUMENT);
  expect_code(hl_torch_model_alloc(m, 0, UINT64_MAX),
              HL_STATUS_INVALID_ARGUMENT);
  expect_code(hl_torch_model_alloc(m, UINT32_MAX, 1),
              HL_STATUS_INVALID_ARGUMENT);
  expect_code(hl_torch_model_free(m, 0), HL_STATUS_NOT_FOUND);
  expect_code(hl_torch_model_free(m, UINT32_MAX), HL_STATUS_NOT_FOUND);
  expect_code(hl_torch_model_free(NULL, 0), HL_STATUS_INVALID_ARGUMENT);
  expect_ok(hl_torch_model_alloc(m, 0, 1));
  expect_code(hl_torch_model_alloc(m, 0, 1), HL_STATUS_ALREADY_EXISTS);
  expect_ok(hl_torch_model_free(m, 0));
  expect_code(hl_torch_model_free(m, 0), HL_STATUS_NOT_FOUND);
  assert_int_equal(stats_of(m).alloc_count, 1);
  hl_torch_model_destroy(m);
  hl_torch_model_destroy(NULL);
}

static void test_replay_log(void** state) {
  (void)state;
  static const char kLog[] =
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,0:00:00.000001,allocate,0x1000,614400,0\n"     // 600 KiB: 2 MiB
      "1,0:00:00.000002,allocate,0x200000,5242880,0\n"  // 5 MiB: 20 MiB
      "1,0:00:00.000003,allocate,0x3000,0,0\n"          // 0 B: nothing
      "1,0:00:00.000004,free,0x1000,614400,0\n"
      "1,0:00:00.000005,free,0x200000,5242880,0\n"
      "1,0:00:00.000006,free,0x3000,0,0\n"
      "1,0:00:00.000007,allocate,0x4000,52428800,0\n"  // 50 MiB: 50 MiB
      "1,0:00:00.000008,allocate,0x5000,4194304,0\n";  // From the 20 MiB.
  hl_replay_log_t log;
  expect_ok(hl_replay_log_parse_buffer(kLog, strlen(kLog), "t.csv",
                                       HL_REPLAY_LOG_FLAG_NONE, &log));
  hl_torch_model_stats_t s;
  expect_ok(hl_torch_model_replay(&log, 0, &s));
  assert_int_equal(s.peak_reserved_bytes, 72 * MiB);
  assert_int_equal(s.alloc_count, 4);
  assert_int_equal(s.allocated_bytes, 54 * MiB);
  // On a 71 MiB device the cached 2 + 20 MiB go before the 50 MiB segment
  // (72 > 71), so 4 MiB needs a new 20 MiB segment: 70 MiB at the peak.
  expect_ok(hl_torch_model_replay(&log, 71 * MiB, &s));
  assert_int_equal(s.peak_reserved_bytes, 70 * MiB);
  assert_int_equal(s.segment_frees, 2);
  // On 72 MiB nothing is released and 4 MiB reuses the 20 MiB segment.
  expect_ok(hl_torch_model_replay(&log, 72 * MiB, &s));
  assert_int_equal(s.peak_reserved_bytes, 72 * MiB);
  assert_int_equal(s.segment_frees, 0);
  // 40 MiB cannot hold the 50 MiB request: the replay fails, naming it.
  expect_code(hl_torch_model_replay(&log, 40 * MiB, &s),
              HL_STATUS_RESOURCE_EXHAUSTED);
  assert_int_equal(s.oom_count, 1);
  expect_code(hl_torch_model_replay(NULL, 0, &s), HL_STATUS_INVALID_ARGUMENT);
  hl_replay_log_deinitialize(&log);
}

// Random traffic: after everything is freed, every segment must have merged
// back whole. Then a request of the whole device limit must release them all
// (release_cached_blocks frees only whole free segments) and fit.
static void test_random_merges_back(void** state) {
  (void)state;
  const uint64_t limit = (uint64_t)1 << 40;
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  for (int round = 0; round < 20; ++round) {
    hl_torch_model_t* m = make(limit);
    enum { kIds = 64 };
    bool live[kIds] = {false};
    for (int step = 0; step < 2000; ++step) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      uint32_t id = (uint32_t)(rng % kIds);
      if (live[id]) {
        expect_ok(hl_torch_model_free(m, id));
        live[id] = false;
      } else {
        uint64_t size = 1 + (rng >> 20) % ((rng >> 8) & 1 ? 24 * MiB : MiB);
        expect_ok(hl_torch_model_alloc(m, id, size));
        live[id] = true;
      }
      hl_torch_model_stats_t s = stats_of(m);
      assert_true(s.allocated_bytes <= s.reserved_bytes);
    }
    for (uint32_t id = 0; id < kIds; ++id) {
      if (live[id]) expect_ok(hl_torch_model_free(m, id));
    }
    hl_torch_model_stats_t s = stats_of(m);
    assert_int_equal(s.allocated_bytes, 0);
    assert_true(s.segment_count > 1);
    expect_ok(hl_torch_model_alloc(m, 0, limit));
    s = stats_of(m);
    assert_int_equal(s.reserved_bytes, limit);
    assert_int_equal(s.segment_count, 1);
    assert_int_equal(s.segment_frees, s.segment_allocs - 1);
    hl_torch_model_destroy(m);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_segment_sizes),
      cmocka_unit_test(test_free_then_reuse),
      cmocka_unit_test(test_split_and_merge),
      cmocka_unit_test(test_best_fit),
      cmocka_unit_test(test_device_limit),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_replay_log),
      cmocka_unit_test(test_random_merges_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
