// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Randomized property test of fill elision: random command buffers of fills,
// updates, copies, dispatches (fill_pattern and copy, with and without the
// whole-range flag) and barriers over a few buffers and views. Each case is
// recorded twice, with elision and with HL_COMMAND_BUFFER_FLAG_NO_ELISION,
// over two sets of buffers holding the same random bytes; after both run the
// memory must be byte-identical.
//
// HL_CB_PROPERTY_CASES sets the number of cases (default 10000; a tenth
// under TSan) and HL_CB_PROPERTY_SEED the first seed. A failure prints the
// seed and the commands.

#include "hipline/command_buffer.h"
#include "hipline/dispatch.h"
#include "tests/memory_util.h"

#define ROOT_X 512  // Views: [0,256), [256,512), [64,192).
#define ROOT_Y 256
#define VIEWS 4
#define MAX_COMMANDS 14

typedef struct set_t {
  hl_buffer_t* x;
  hl_buffer_t* y;
  hl_buffer_t* views[VIEWS];
} set_t;

static uint64_t rng_next(uint64_t* s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *s = x;
  return x;
}

static uint64_t rng_below(uint64_t* s, uint64_t n) {
  return n ? rng_next(s) % n : 0;
}

static void set_create(hl_queue_t* q, set_t* set) {
  set->x = mem_alloca(q, NULL, 0, NULL, 0, ROOT_X);
  set->y = mem_alloca(q, NULL, 0, NULL, 0, ROOT_Y);
  HL_ASSERT_OK(hl_buffer_subview(set->x, 0, 256, &set->views[0]));
  HL_ASSERT_OK(hl_buffer_subview(set->x, 256, 256, &set->views[1]));
  HL_ASSERT_OK(hl_buffer_subview(set->x, 64, 128, &set->views[2]));
  set->views[3] = set->y;
  hl_buffer_retain(set->y);
}

static void set_release(set_t* set) {
  for (int i = 0; i < VIEWS; ++i) hl_buffer_release(set->views[i]);
  hl_buffer_release(set->x);
  hl_buffer_release(set->y);
}

// One random command, described for failure messages.
typedef struct command_t {
  int kind;  // 0 fill, 1 update, 2 copy, 3 fill_pattern, 4 copy kernel, 5
             // barrier
  int target, source;
  uint64_t target_offset, source_offset, length;
  uint32_t pattern;
  bool whole;
  uint8_t data[64];
} command_t;

static void command_random(uint64_t* rng, command_t* c) {
  memset(c, 0, sizeof(*c));
  c->kind = (int)rng_below(rng, 12);
  // Fills are the point: weight them up.
  static const int kKinds[12] = {0, 0, 0, 1, 1, 1, 2, 2, 3, 4, 5, 0};
  c->kind = kKinds[c->kind];
  c->target = (int)rng_below(rng, VIEWS);
  c->source = (int)rng_below(rng, VIEWS);
  uint64_t tlen = c->target == 2 ? 128 : 256;
  uint64_t slen = c->source == 2 ? 128 : 256;
  switch (c->kind) {
    case 0:
    case 3: {
      uint64_t words = 1 + rng_below(rng, tlen / 4);
      c->length = words * 4;
      c->target_offset = 4 * rng_below(rng, tlen / 4 - words + 1);
      c->pattern = (uint32_t)rng_next(rng);
      c->whole = rng_below(rng, 4) != 0;
      break;
    }
    case 1:
      c->length = 1 + rng_below(rng, 64);
      c->target_offset = rng_below(rng, tlen - c->length + 1);
      for (int i = 0; i < 64; ++i) c->data[i] = (uint8_t)rng_next(rng);
      break;
    case 2:
    case 4: {
      uint64_t max = tlen < slen ? tlen : slen;
      c->length = 1 + rng_below(rng, max < 96 ? max : 96);
      c->target_offset = rng_below(rng, tlen - c->length + 1);
      c->source_offset = rng_below(rng, slen - c->length + 1);
      c->whole = rng_below(rng, 4) != 0;
      break;
    }
    default:
      break;
  }
}

static void command_describe(const command_t* c) {
  static const char* kNames[] = {"fill",         "update",      "copy",
                                 "fill_pattern", "copy_kernel", "barrier"};
  print_message("  %s target=%d+%llu source=%d+%llu length=%llu whole=%d\n",
                kNames[c->kind], c->target,
                (unsigned long long)c->target_offset, c->source,
                (unsigned long long)c->source_offset,
                (unsigned long long)c->length, (int)c->whole);
}

static hl_status_t command_record(hl_command_buffer_t* cb, const set_t* set,
                                  const command_t* c) {
  hl_buffer_t* t = set->views[c->target];
  hl_buffer_t* s = set->views[c->source];
  switch (c->kind) {
    case 0:
      return hl_command_buffer_fill(cb, t, c->target_offset, c->length,
                                    c->pattern);
    case 1:
      return hl_command_buffer_update(cb, c->data, t, c->target_offset,
                                      c->length);
    case 2:
      return hl_command_buffer_copy(cb, s, c->source_offset, t,
                                    c->target_offset, c->length);
    case 3: {
      hl_kernel_arg_t args[3] = {
          {.kind = HL_KERNEL_ARG_BUFFER,
           .buffer = t,
           .offset = c->target_offset,
           .length = c->length,
           .access = HL_ACCESS_WRITE},
          {.kind = HL_KERNEL_ARG_SCALAR, .scalar = c->length / 4, .size = 8},
          {.kind = HL_KERNEL_ARG_SCALAR, .scalar = c->pattern, .size = 4}};
      const uint32_t flags[3] = {
          c->whole ? HL_COMMAND_ARG_WRITES_WHOLE_RANGE : 0, 0, 0};
      return hl_command_buffer_dispatch(cb, "fill_pattern", NULL, 3, args,
                                        flags);
    }
    case 4: {
      hl_kernel_arg_t args[3] = {
          {.kind = HL_KERNEL_ARG_BUFFER,
           .buffer = t,
           .offset = c->target_offset,
           .length = c->length,
           .access = HL_ACCESS_WRITE},
          {.kind = HL_KERNEL_ARG_BUFFER,
           .buffer = s,
           .offset = c->source_offset,
           .length = c->length,
           .access = HL_ACCESS_READ},
          {.kind = HL_KERNEL_ARG_SCALAR, .scalar = c->length, .size = 8}};
      const uint32_t flags[3] = {
          c->whole ? HL_COMMAND_ARG_WRITES_WHOLE_RANGE : 0, 0, 0};
      return hl_command_buffer_dispatch(cb, "copy", NULL, 3, args, flags);
    }
    default:
      return hl_command_buffer_barrier(cb);
  }
}

static uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = getenv(name);
  return v && *v ? strtoull(v, NULL, 10) : fallback;
}

static void test_elided_equals_unelided(void** state) {
  (void)state;
  hl_device_t* d = mem_device_create(NULL);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_semaphore_t* sem = hl_test_semaphore_create();
  uint64_t value = 0;
  set_t opt, ref;
  set_create(q, &opt);
  set_create(q, &ref);

  uint64_t cases = 10000;
#if defined(__SANITIZE_THREAD__)
  cases = 1000;  // The property is single-threaded; TSan only slows it.
#endif
  cases = env_u64("HL_CB_PROPERTY_CASES", cases);
  uint64_t first_seed = env_u64("HL_CB_PROPERTY_SEED", 1);
  uint64_t fills = 0, elided = 0, shrunk = 0, bytes = 0, skipped = 0;
  command_t commands[MAX_COMMANDS];
  uint8_t init_x[ROOT_X], init_y[ROOT_Y];
  uint8_t out[2][ROOT_X + ROOT_Y];
  for (uint64_t k = 0; k < cases; ++k) {
    uint64_t seed = first_seed + k;
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull | 1;
    int count = 1 + (int)rng_below(&rng, MAX_COMMANDS);
    hl_command_buffer_t* cbs[2] = {NULL, NULL};
    HL_ASSERT_OK(hl_command_buffer_create(d, 0, &cbs[0]));
    HL_ASSERT_OK(hl_command_buffer_create(d, HL_COMMAND_BUFFER_FLAG_NO_ELISION,
                                          &cbs[1]));
    int recorded = 0;
    for (int i = 0; i < count; ++i) {
      command_random(&rng, &commands[i]);
      hl_status_t a = command_record(cbs[0], &opt, &commands[i]);
      hl_status_t b = command_record(cbs[1], &ref, &commands[i]);
      // Both sets have the same shapes: a record fails for both or neither
      // (the copy kernel rejects overlapping ranges of one allocation).
      assert_int_equal(hl_status_code(a), hl_status_code(b));
      if (a) {
        assert_int_equal(hl_status_code(a), HL_STATUS_INVALID_ARGUMENT);
        ++skipped;
        commands[i].kind = -1;
      } else {
        ++recorded;
      }
      hl_status_free(a);
      hl_status_free(b);
    }
    if (!recorded) {
      hl_command_buffer_release(cbs[0]);
      hl_command_buffer_release(cbs[1]);
      continue;
    }
    HL_ASSERT_OK(hl_command_buffer_finalize(cbs[0]));
    HL_ASSERT_OK(hl_command_buffer_finalize(cbs[1]));
    hl_command_buffer_info_t info;
    HL_ASSERT_OK(hl_command_buffer_query(cbs[0], &info));
    fills += info.fills;
    elided += info.fills_elided;
    shrunk += info.fills_shrunk;
    bytes += info.fill_bytes_elided;
    for (size_t i = 0; i < sizeof(init_x); ++i)
      init_x[i] = (uint8_t)rng_next(&rng);
    for (size_t i = 0; i < sizeof(init_y); ++i)
      init_y[i] = (uint8_t)rng_next(&rng);
    const set_t* sets[2] = {&opt, &ref};
    for (int s = 0; s < 2; ++s) {
      HL_ASSERT_OK(
          hl_queue_write(q, NULL, NULL, init_x, sets[s]->x, 0, ROOT_X));
      HL_ASSERT_OK(
          hl_queue_write(q, NULL, NULL, init_y, sets[s]->y, 0, ROOT_Y));
      HL_ASSERT_OK(hl_queue_execute(q, NULL, NULL, cbs[s]));
      HL_ASSERT_OK(hl_queue_read(q, NULL, NULL, sets[s]->x, 0, out[s], ROOT_X));
      hl_fence_t* done = s == 1 ? hl_test_fence(sem, value + 1) : NULL;
      HL_ASSERT_OK(
          hl_queue_read(q, NULL, done, sets[s]->y, 0, out[s] + ROOT_X, ROOT_Y));
      hl_fence_release(done);
    }
    HL_ASSERT_OK(hl_semaphore_wait(sem, ++value, MEM_DEADLINE()));
    if (memcmp(out[0], out[1], sizeof(out[0])) != 0) {
      size_t at = 0;
      while (out[0][at] == out[1][at]) ++at;
      print_message(
          "seed %llu: elided and unelided memory differ at byte %zu "
          "(root %s, offset %zu): %u vs %u\n",
          (unsigned long long)seed, at, at < ROOT_X ? "x" : "y",
          at < ROOT_X ? at : at - ROOT_X, out[0][at], out[1][at]);
      for (int i = 0; i < count; ++i) {
        if (commands[i].kind >= 0) command_describe(&commands[i]);
      }
      fail();
    }
    hl_command_buffer_release(cbs[0]);
    hl_command_buffer_release(cbs[1]);
  }
  print_message(
      "%llu cases: %llu fills, %llu elided, %llu shrunk, %llu bytes "
      "not filled, %llu records rejected\n",
      (unsigned long long)cases, (unsigned long long)fills,
      (unsigned long long)elided, (unsigned long long)shrunk,
      (unsigned long long)bytes, (unsigned long long)skipped);
  // The generator must exercise both outcomes for the comparison to mean
  // anything.
  if (cases >= 100) {
    assert_true(elided > 0);
    assert_true(shrunk > 0);
    assert_true(elided + shrunk < fills);
  }
  HL_ASSERT_OK(hl_queue_wait_idle(q, MEM_DEADLINE()));
  set_release(&opt);
  set_release(&ref);
  hl_semaphore_release(sem);
  hl_queue_release(q);
  hl_device_release(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_elided_equals_unelided),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
