// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Command buffers (hipline/command_buffer.h) on the host backend: recording
// and executing every command, repeated execution, the two cases of IREE
// #6972 as exact elision tests, the other elision rules, HIPLINE_ELIDE_FILLS,
// bad input, and that executions are recorded on the roots' timeline
// resources (dealloca ordering, use fences, checked-mode use after free).

#include "hipline/command_buffer.h"

#include <threads.h>

#include "hipline/dispatch.h"
#include "hipline/invocation.h"
#include "tests/memory_util.h"

typedef struct cb_env_t {
  hl_device_t* device;
  hl_queue_t* queue;
  hl_semaphore_t* sem;
  uint64_t value;
} cb_env_t;

static void cb_env_init(cb_env_t* env, int checked) {
  mem_device_config_t cfg = {.checked = checked};
  env->device = mem_device_create(&cfg);
  env->queue = hl_test_queue_create(env->device);
  env->sem = hl_test_semaphore_create();
  env->value = 0;
}

static void cb_env_deinit(cb_env_t* env) {
  HL_ASSERT_OK(hl_queue_wait_idle(env->queue, MEM_DEADLINE()));
  hl_semaphore_release(env->sem);
  hl_queue_release(env->queue);
  hl_device_release(env->device);
}

// A buffer of |size| bytes, allocated and ready.
static hl_buffer_t* cb_alloca(cb_env_t* env, uint64_t size) {
  hl_buffer_t* b =
      mem_alloca(env->queue, NULL, 0, env->sem, env->value + 1, size);
  mem_wait(env->sem, ++env->value);
  return b;
}

// Executes |cb| on the environment's queue and waits for it.
static hl_status_t cb_run(cb_env_t* env, hl_command_buffer_t* cb) {
  hl_fence_t* w = hl_test_fence(env->sem, env->value);
  hl_fence_t* s = hl_test_fence(env->sem, env->value + 1);
  hl_status_t st = hl_queue_execute(env->queue, w, s, cb);
  hl_fence_release(w);
  hl_fence_release(s);
  if (st) return st;
  return hl_semaphore_wait(env->sem, ++env->value, MEM_DEADLINE());
}

static void cb_write(cb_env_t* env, hl_buffer_t* b, const void* data,
                     uint64_t length) {
  hl_fence_t* s = hl_test_fence(env->sem, env->value + 1);
  HL_ASSERT_OK(hl_queue_write(env->queue, NULL, s, data, b, 0, length));
  hl_fence_release(s);
  mem_wait(env->sem, ++env->value);
}

static void cb_read(cb_env_t* env, hl_buffer_t* b, void* data,
                    uint64_t length) {
  hl_fence_t* s = hl_test_fence(env->sem, env->value + 1);
  HL_ASSERT_OK(hl_queue_read(env->queue, NULL, s, b, 0, data, length));
  hl_fence_release(s);
  mem_wait(env->sem, ++env->value);
}

static hl_command_buffer_t* cb_create(cb_env_t* env, uint32_t flags) {
  hl_command_buffer_t* cb = NULL;
  HL_ASSERT_OK(hl_command_buffer_create(env->device, flags, &cb));
  return cb;
}

static hl_command_buffer_info_t cb_info(hl_command_buffer_t* cb) {
  hl_command_buffer_info_t info;
  HL_ASSERT_OK(hl_command_buffer_query(cb, &info));
  return info;
}

static void test_records_and_executes_every_command(void** state) {
  (void)state;
  cb_env_t env;
  cb_env_init(&env, 0);
  hl_buffer_t* a = cb_alloca(&env, 256);
  hl_buffer_t* b = cb_alloca(&env, 256);
  hl_command_buffer_t* cb = cb_create(&env, 0);
  uint8_t bytes[32];
  for (int i = 0; i < 32; ++i) bytes[i] = (uint8_t)(i * 7 + 1);
  HL_ASSERT_OK(hl_command_buffer_fill(cb, a, 0, 256, 0x11223344u));
  HL_ASSERT_OK(hl_command_buffer_update(cb, bytes, a, 8, 32));
  memset(bytes, 0, sizeof(bytes));  // Copied at record time.
  HL_ASSERT_OK(hl_command_buffer_barrier(cb));
  HL_ASSERT_OK(hl_command_buffer_copy(cb, a, 0, b, 128, 64));
  hl_kernel_arg_t args[3] = {
      {.kind = HL_KERNEL_ARG_BUFFER,
       .buffer = b,
       .offset = 0,
       .length = 64,
       .access = HL_ACCESS_WRITE},
      {.kind = HL_KERNEL_ARG_SCALAR, .scalar = 16, .size = 8},
      {.kind = HL_KERNEL_ARG_SCALAR, .scalar = 9, .size = 4}};
  HL_ASSERT_OK(
      hl_command_buffer_dispatch(cb, "fill_pattern", NULL, 3, args, NULL));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  hl_command_buffer_info_t info = cb_info(cb);
  assert_int_equal(info.commands, 5);
  assert_int_equal(info.fills, 1);
  assert_int_equal(info.updates, 1);
  assert_int_equal(info.copies, 1);
  assert_int_equal(info.dispatches, 1);
  assert_int_equal(info.barriers, 1);
  assert_int_equal(info.roots, 2);
  assert_int_equal(info.update_bytes, 32);
  // The update overwrites [8, 40) of the fill before the copy reads it: the
  // fill shrinks to [0, 8) and [40, 256).
  assert_int_equal(info.fills_elided, 0);
  assert_int_equal(info.fills_shrunk, 1);
  assert_int_equal(info.fill_bytes_elided, 32);
  assert_int_equal(info.fill_ranges, 2);

  hl_memory_stats_t before = hl_test_memory_stats(env.device);
  for (int round = 0; round < 3; ++round) {
    uint8_t zero[256] = {0};
    cb_write(&env, a, zero, 256);
    cb_write(&env, b, zero, 256);
    HL_ASSERT_OK(cb_run(&env, cb));
    uint8_t out_a[256], out_b[256];
    cb_read(&env, a, out_a, 256);
    cb_read(&env, b, out_b, 256);
    for (int i = 0; i < 256; i += 4) {
      uint32_t word;
      memcpy(&word, out_a + i, 4);
      if (i < 8 || i >= 40) assert_int_equal(word, 0x11223344u);
    }
    for (int i = 0; i < 32; ++i) {
      assert_int_equal(out_a[8 + i], (uint8_t)(i * 7 + 1));
    }
    for (int i = 0; i < 16; ++i) {
      uint32_t word;
      memcpy(&word, out_b + 4 * i, 4);
      assert_int_equal(word, hl_pattern_value(9, (uint64_t)i));
    }
    assert_memory_equal(out_b + 128, out_a, 64);
    assert_int_equal(out_b[64], 0);
  }
  hl_memory_stats_t after = hl_test_memory_stats(env.device);
  assert_int_equal(
      after.command_buffer_executions - before.command_buffer_executions, 3);
  hl_command_buffer_release(cb);
  hl_buffer_release(a);
  hl_buffer_release(b);
  cb_env_deinit(&env);
}

// Runs the IREE #6972 resource: 296 bytes splatted with |pattern|, then
// updated over each of |ranges| (pairs of offset, length). Returns the info;
// fills |out| with the resulting bytes.
static hl_command_buffer_info_t cb_splat_then_update(
    cb_env_t* env, uint32_t flags, const uint64_t* ranges, int count,
    uint8_t out[296], hl_memory_stats_t* out_delta) {
  hl_buffer_t* b = cb_alloca(env, 296);
  uint8_t junk[296];
  memset(junk, 0xA5, sizeof(junk));
  cb_write(env, b, junk, 296);
  hl_command_buffer_t* cb = cb_create(env, flags);
  HL_ASSERT_OK(hl_command_buffer_fill(cb, b, 0, 296, 0x01010101u));
  uint8_t data[296];
  for (int i = 0; i < 296; ++i) data[i] = (uint8_t)(200 - i % 100);
  for (int i = 0; i < count; ++i) {
    HL_ASSERT_OK(hl_command_buffer_update(cb, data + ranges[2 * i], b,
                                          ranges[2 * i], ranges[2 * i + 1]));
  }
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  hl_memory_stats_t before = hl_test_memory_stats(env->device);
  HL_ASSERT_OK(cb_run(env, cb));
  hl_memory_stats_t after = hl_test_memory_stats(env->device);
  out_delta->fills_elided = after.fills_elided - before.fills_elided;
  out_delta->fills_shrunk = after.fills_shrunk - before.fills_shrunk;
  out_delta->fill_bytes_elided =
      after.fill_bytes_elided - before.fill_bytes_elided;
  cb_read(env, b, out, 296);
  hl_command_buffer_info_t info = cb_info(cb);
  hl_command_buffer_release(cb);
  mem_dealloca(env->queue, env->sem, env->value, env->sem, env->value + 1, b);
  mem_wait(env->sem, ++env->value);
  hl_buffer_release(b);
  return info;
}

static void test_iree_6972_full_cover_drops_the_fill(void** state) {
  (void)state;
  cb_env_t env;
  cb_env_init(&env, 0);
  const uint64_t ranges[] = {0, 256, 256, 40};
  uint8_t out[296], ref[296];
  hl_memory_stats_t delta;
  hl_command_buffer_info_t info =
      cb_splat_then_update(&env, 0, ranges, 2, out, &delta);
  assert_true(info.elision_enabled);
  assert_int_equal(info.fills_elided, 1);
  assert_int_equal(info.fills_shrunk, 0);
  assert_int_equal(info.fill_bytes_elided, 296);
  assert_int_equal(info.fill_ranges, 0);
  assert_int_equal(delta.fills_elided, 1);
  assert_int_equal(delta.fill_bytes_elided, 296);
  // Same bytes as without elision.
  hl_command_buffer_info_t plain = cb_splat_then_update(
      &env, HL_COMMAND_BUFFER_FLAG_NO_ELISION, ranges, 2, ref, &delta);
  assert_false(plain.elision_enabled);
  assert_int_equal(plain.fills_elided, 0);
  assert_int_equal(plain.fill_ranges, 1);
  assert_int_equal(delta.fills_elided, 0);
  assert_memory_equal(out, ref, 296);
  for (int i = 0; i < 296; ++i) assert_int_equal(out[i], 200 - i % 100);
  cb_env_deinit(&env);
}

static void test_iree_6972_partial_cover_shrinks_to_the_gap(void** state) {
  (void)state;
  cb_env_t env;
  cb_env_init(&env, 0);
  const uint64_t ranges[] = {0, 256};
  uint8_t out[296], ref[296];
  hl_memory_stats_t delta;
  hl_command_buffer_info_t info =
      cb_splat_then_update(&env, 0, ranges, 1, out, &delta);
  assert_int_equal(info.fills_elided, 0);
  assert_int_equal(info.fills_shrunk, 1);
  assert_int_equal(info.fill_bytes_elided, 256);
  assert_int_equal(info.fill_ranges, 1);  // [256, 296)
  assert_int_equal(delta.fills_shrunk, 1);
  assert_int_equal(delta.fill_bytes_elided, 256);
  cb_splat_then_update(&env, HL_COMMAND_BUFFER_FLAG_NO_ELISION, ranges, 1, ref,
                       &delta);
  assert_memory_equal(out, ref, 296);
  for (int i = 256; i < 296; ++i) assert_int_equal(out[i], 0x01);
  cb_env_deinit(&env);
}

// Elision rules beyond the canonical cases, checked on the counters (the
// property test checks the bytes).
static void test_elision_rules(void** state) {
  (void)state;
  cb_env_t env;
  cb_env_init(&env, 0);
  hl_buffer_t* a = cb_alloca(&env, 1024);
  hl_buffer_t* b = cb_alloca(&env, 1024);
  hl_buffer_t* view = NULL;
  HL_ASSERT_OK(hl_buffer_subview(a, 512, 512, &view));
  uint8_t data[1024] = {0};

  // A read between the fill and the overwrite keeps the fill.
  hl_command_buffer_t* cb = cb_create(&env, 0);
  HL_ASSERT_OK(hl_command_buffer_fill(cb, a, 0, 1024, 1));
  HL_ASSERT_OK(hl_command_buffer_copy(cb, a, 101, b, 0, 8));
  HL_ASSERT_OK(hl_command_buffer_update(cb, data, a, 0, 1024));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  hl_command_buffer_info_t info = cb_info(cb);
  assert_int_equal(info.fills_shrunk, 1);  // Only the read bytes' words stay.
  // The read [101, 109) keeps the words [100, 112).
  assert_int_equal(info.fill_bytes_elided, 1024 - 12);
  HL_ASSERT_OK(cb_run(&env, cb));
  hl_command_buffer_release(cb);

  // Views of one root share its ranges: a fill through a view is dropped by
  // an update through the whole buffer.
  cb = cb_create(&env, 0);
  HL_ASSERT_OK(hl_command_buffer_fill(cb, view, 0, 512, 2));
  HL_ASSERT_OK(hl_command_buffer_update(cb, data, a, 500, 524));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  info = cb_info(cb);
  assert_int_equal(info.roots, 1);
  assert_int_equal(info.fills_elided, 1);
  HL_ASSERT_OK(cb_run(&env, cb));
  hl_command_buffer_release(cb);

  // A dispatch write counts only when it says it writes the whole range; a
  // read binding stops elision.
  hl_kernel_arg_t fill_args[3] = {
      {.kind = HL_KERNEL_ARG_BUFFER,
       .buffer = b,
       .length = 256,
       .access = HL_ACCESS_WRITE},
      {.kind = HL_KERNEL_ARG_SCALAR, .scalar = 64, .size = 8},
      {.kind = HL_KERNEL_ARG_SCALAR, .scalar = 3, .size = 4}};
  const uint32_t whole[3] = {HL_COMMAND_ARG_WRITES_WHOLE_RANGE, 0, 0};
  for (int flagged = 0; flagged < 2; ++flagged) {
    cb = cb_create(&env, 0);
    HL_ASSERT_OK(hl_command_buffer_fill(cb, b, 0, 512, 5));
    HL_ASSERT_OK(hl_command_buffer_dispatch(cb, "fill_pattern", NULL, 3,
                                            fill_args, flagged ? whole : NULL));
    HL_ASSERT_OK(hl_command_buffer_finalize(cb));
    info = cb_info(cb);
    assert_int_equal(info.fills_shrunk, flagged ? 1 : 0);
    assert_int_equal(info.fill_bytes_elided, flagged ? 256 : 0);
    HL_ASSERT_OK(cb_run(&env, cb));
    hl_command_buffer_release(cb);
  }
  hl_kernel_arg_t copy_args[3] = {
      {.kind = HL_KERNEL_ARG_BUFFER,
       .buffer = b,
       .offset = 512,
       .length = 64,
       .access = HL_ACCESS_WRITE},
      {.kind = HL_KERNEL_ARG_BUFFER,
       .buffer = b,
       .offset = 0,
       .length = 64,
       .access = HL_ACCESS_READ},
      {.kind = HL_KERNEL_ARG_SCALAR, .scalar = 64, .size = 8}};
  cb = cb_create(&env, 0);
  HL_ASSERT_OK(hl_command_buffer_fill(cb, b, 0, 64, 5));
  HL_ASSERT_OK(
      hl_command_buffer_dispatch(cb, "copy", NULL, 3, copy_args, NULL));
  HL_ASSERT_OK(hl_command_buffer_update(cb, data, b, 0, 64));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  assert_int_equal(cb_info(cb).fills_elided + cb_info(cb).fills_shrunk, 0);
  HL_ASSERT_OK(cb_run(&env, cb));
  hl_command_buffer_release(cb);

  // A fill overwritten by a later fill is dropped; the last one stays.
  cb = cb_create(&env, 0);
  HL_ASSERT_OK(hl_command_buffer_fill(cb, b, 0, 64, 5));
  HL_ASSERT_OK(hl_command_buffer_fill(cb, b, 0, 64, 6));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  info = cb_info(cb);
  assert_int_equal(info.fills_elided, 1);
  assert_int_equal(info.fill_ranges, 1);
  HL_ASSERT_OK(cb_run(&env, cb));
  uint32_t word = 0;
  cb_read(&env, b, &word, 4);
  assert_int_equal(word, 6);
  hl_command_buffer_release(cb);

  hl_buffer_release(view);
  hl_buffer_release(a);
  hl_buffer_release(b);
  cb_env_deinit(&env);
}

// Runs fill(target) -> copy(source -> out) -> update(target) and returns the
// first word of |out|. |source| aliases |target| through another root, so the
// copy reads the fill: elision must keep it (0x11111111, as without elision).
static uint32_t cb_fill_read_through_alias(cb_env_t* env, hl_buffer_t* target,
                                           hl_buffer_t* source, uint32_t flags,
                                           hl_command_buffer_info_t* out_info) {
  hl_buffer_t* out = cb_alloca(env, 256);
  uint8_t zeros[256] = {0};
  cb_write(env, out, zeros, sizeof(zeros));
  hl_command_buffer_t* cb = cb_create(env, flags);
  HL_ASSERT_OK(hl_command_buffer_fill(cb, target, 0, 256, 0x11111111u));
  HL_ASSERT_OK(hl_command_buffer_copy(cb, source, 0, out, 0, 256));
  HL_ASSERT_OK(hl_command_buffer_update(cb, zeros, target, 0, 256));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  HL_ASSERT_OK(cb_run(env, cb));
  *out_info = cb_info(cb);
  uint32_t words[64];
  cb_read(env, out, words, sizeof(words));
  for (int i = 1; i < 64; ++i) assert_int_equal(words[i], words[0]);
  hl_command_buffer_release(cb);
  mem_dealloca(env->queue, env->sem, env->value, env->sem, env->value + 1, out);
  mem_wait(env->sem, ++env->value);
  hl_buffer_release(out);
  return words[0];
}

// Elision is per root; a wrap of an escaped address (or two wraps of one
// foreign pointer) is another root over the same bytes. A fill of one must
// not be dropped when the other is read before the overwrite.
static void test_elision_respects_aliased_roots(void** state) {
  (void)state;
  cb_env_t env;
  cb_env_init(&env, 0);
  hl_command_buffer_info_t info;
  // A wrap of an alloca's escaped address.
  hl_buffer_t* a = cb_alloca(&env, 256);
  hl_buffer_t* alias = NULL;
  HL_ASSERT_OK(hl_buffer_wrap(env.device, hl_buffer_device_pointer(a), 256,
                              NULL, NULL, &alias));
  assert_int_equal(cb_fill_read_through_alias(&env, a, alias, 0, &info),
                   0x11111111u);
  assert_int_equal(info.fills_elided, 0);
  assert_int_equal(
      cb_fill_read_through_alias(&env, a, alias,
                                 HL_COMMAND_BUFFER_FLAG_NO_ELISION, &info),
      0x11111111u);
  // Two wraps of one foreign pointer (device memory from elsewhere).
  hl_buffer_t* foreign = cb_alloca(&env, 256);
  void* foreign_ptr = hl_buffer_device_pointer(foreign);
  hl_buffer_t* w1 = NULL;
  hl_buffer_t* w2 = NULL;
  HL_ASSERT_OK(hl_buffer_wrap(env.device, foreign_ptr, 256, NULL, NULL, &w1));
  HL_ASSERT_OK(hl_buffer_wrap(env.device, foreign_ptr, 256, NULL, NULL, &w2));
  assert_int_equal(cb_fill_read_through_alias(&env, w1, w2, 0, &info),
                   0x11111111u);
  assert_int_equal(info.fills_elided, 0);
  // One escaped root alone still elides (nothing else can alias it).
  hl_buffer_t* b = cb_alloca(&env, 256);
  (void)hl_buffer_device_pointer(b);
  // |other| may reuse a block an earlier step freed: zero it, so the copy's
  // expected value does not depend on what the pool hands out.
  hl_buffer_t* other = cb_alloca(&env, 256);
  uint8_t zeros[256] = {0};
  cb_write(&env, other, zeros, sizeof(zeros));
  assert_int_equal(cb_fill_read_through_alias(&env, b, other, 0, &info), 0);
  assert_int_equal(info.fills_elided, 1);
  HL_ASSERT_OK(hl_queue_wait_idle(env.queue, MEM_DEADLINE()));
  hl_buffer_release(alias);
  hl_buffer_release(w1);
  hl_buffer_release(w2);
  hl_buffer_release(foreign);
  hl_buffer_release(a);
  hl_buffer_release(b);
  hl_buffer_release(other);
  cb_env_deinit(&env);
}

static void test_elide_fills_env(void** state) {
  (void)state;
  cb_env_t env;
  cb_env_init(&env, 0);
  hl_buffer_t* b = cb_alloca(&env, 64);
  uint8_t data[64] = {0};
  const char* values[] = {"0", "1", "sometimes"};
  for (int i = 0; i < 3; ++i) {
    assert_int_equal(setenv("HIPLINE_ELIDE_FILLS", values[i], 1), 0);
    hl_command_buffer_t* cb = cb_create(&env, 0);
    HL_ASSERT_OK(hl_command_buffer_fill(cb, b, 0, 64, 7));
    HL_ASSERT_OK(hl_command_buffer_update(cb, data, b, 0, 64));
    hl_status_t st = hl_command_buffer_finalize(cb);
    if (i == 2) {
      hl_test_assert_status_has(st, HL_STATUS_INVALID_ARGUMENT,
                                "HIPLINE_ELIDE_FILLS", "sometimes");
      // Still open: a valid setting finalizes it.
      assert_int_equal(unsetenv("HIPLINE_ELIDE_FILLS"), 0);
      HL_ASSERT_OK(hl_command_buffer_finalize(cb));
    } else {
      HL_ASSERT_OK(st);
    }
    hl_command_buffer_info_t info = cb_info(cb);
    assert_int_equal(info.elision_enabled, i != 0);
    assert_int_equal(info.fills_elided, i != 0 ? 1 : 0);
    hl_command_buffer_release(cb);
  }
  assert_int_equal(unsetenv("HIPLINE_ELIDE_FILLS"), 0);
  hl_buffer_release(b);
  cb_env_deinit(&env);
}

static void test_bad_input(void** state) {
  (void)state;
  cb_env_t env;
  cb_env_init(&env, 0);
  hl_device_t* other = mem_device_create(NULL);
  hl_queue_t* other_queue = hl_test_queue_create(other);
  hl_buffer_t* b = cb_alloca(&env, 64);
  hl_buffer_t* foreign = mem_alloca(other_queue, NULL, 0, NULL, 0, 64);
  uint8_t data[64] = {0};
  hl_command_buffer_t* cb = NULL;

  hl_test_assert_status_has(hl_command_buffer_create(NULL, 0, &cb),
                            HL_STATUS_INVALID_ARGUMENT, "NULL device", NULL);
  hl_test_assert_status_has(hl_command_buffer_create(env.device, 0, NULL),
                            HL_STATUS_INVALID_ARGUMENT, "out_cb", NULL);
  hl_test_assert_status_has(hl_command_buffer_create(env.device, 0x80, &cb),
                            HL_STATUS_INVALID_ARGUMENT, "unknown flags", NULL);
  assert_null(cb);
  cb = cb_create(&env, 0);

  struct {
    hl_status_t st;
    hl_status_code_t code;
    const char* needle;
  } cases[] = {
      {hl_command_buffer_fill(NULL, b, 0, 4, 0), HL_STATUS_INVALID_ARGUMENT,
       "command buffer is NULL"},
      {hl_command_buffer_fill(cb, NULL, 0, 4, 0), HL_STATUS_INVALID_ARGUMENT,
       "buffer is NULL"},
      {hl_command_buffer_fill(cb, b, 0, 0, 0), HL_STATUS_INVALID_ARGUMENT,
       "length is 0"},
      {hl_command_buffer_fill(cb, b, 60, 8, 0), HL_STATUS_OUT_OF_RANGE,
       "exceeds the 64-byte buffer"},
      {hl_command_buffer_fill(cb, b, UINT64_MAX - 3, 8, 0),
       HL_STATUS_OUT_OF_RANGE, "exceeds"},
      {hl_command_buffer_fill(cb, b, 2, 8, 0), HL_STATUS_INVALID_ARGUMENT,
       "multiples of 4"},
      {hl_command_buffer_fill(cb, foreign, 0, 4, 0), HL_STATUS_INVALID_ARGUMENT,
       "another device"},
      {hl_command_buffer_update(cb, NULL, b, 0, 4), HL_STATUS_INVALID_ARGUMENT,
       "host_source is NULL"},
      {hl_command_buffer_update(cb, data, b, 0, 65), HL_STATUS_OUT_OF_RANGE,
       "exceeds"},
      {hl_command_buffer_copy(cb, b, 0, NULL, 0, 4), HL_STATUS_INVALID_ARGUMENT,
       "target: buffer is NULL"},
      {hl_command_buffer_copy(cb, foreign, 0, b, 0, 4),
       HL_STATUS_INVALID_ARGUMENT, "another device"},
      {hl_command_buffer_copy(cb, b, 32, b, 0, 40), HL_STATUS_OUT_OF_RANGE,
       "source"},
      {hl_command_buffer_dispatch(cb, NULL, NULL, 0, NULL, NULL),
       HL_STATUS_INVALID_ARGUMENT, "kernel_name is NULL"},
      {hl_command_buffer_dispatch(cb, "nope", NULL, 0, NULL, NULL),
       HL_STATUS_NOT_FOUND, "fill_pattern"},
      {hl_command_buffer_barrier(NULL), HL_STATUS_INVALID_ARGUMENT, "NULL"},
      {hl_command_buffer_finalize(cb), HL_STATUS_FAILED_PRECONDITION,
       "no commands"},
      {hl_queue_execute(env.queue, NULL, NULL, cb),
       HL_STATUS_FAILED_PRECONDITION, "not finalized"},
      {hl_queue_execute(NULL, NULL, NULL, cb), HL_STATUS_INVALID_ARGUMENT,
       "NULL"},
      {hl_queue_execute(env.queue, NULL, NULL, NULL),
       HL_STATUS_INVALID_ARGUMENT, "NULL"},
      {hl_command_buffer_query(NULL, NULL), HL_STATUS_INVALID_ARGUMENT, "NULL"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    print_message("case %zu\n", i);
    hl_test_assert_status_has(cases[i].st, cases[i].code, cases[i].needle,
                              NULL);
  }
  // Dispatch arguments are checked as hl_queue_dispatch checks them, and the
  // whole-range flag is checked against the kernel.
  hl_kernel_arg_t args[3] = {
      {.kind = HL_KERNEL_ARG_BUFFER,
       .buffer = b,
       .length = 64,
       .access = HL_ACCESS_WRITE},
      {.kind = HL_KERNEL_ARG_SCALAR, .scalar = 8, .size = 8},
      {.kind = HL_KERNEL_ARG_SCALAR, .scalar = 3, .size = 4}};
  const uint32_t whole[3] = {HL_COMMAND_ARG_WRITES_WHOLE_RANGE, 0, 0};
  hl_test_assert_status_has(
      hl_command_buffer_dispatch(cb, "fill_pattern", NULL, 3, args, whole),
      HL_STATUS_INVALID_ARGUMENT, "WRITES_WHOLE_RANGE over 64 bytes",
      "writes 32");
  const uint32_t on_scalar[3] = {0, HL_COMMAND_ARG_WRITES_WHOLE_RANGE, 0};
  hl_test_assert_status_has(
      hl_command_buffer_dispatch(cb, "fill_pattern", NULL, 3, args, on_scalar),
      HL_STATUS_INVALID_ARGUMENT, "not a buffer with write access", NULL);
  const uint32_t unknown[3] = {4, 0, 0};
  hl_test_assert_status_has(
      hl_command_buffer_dispatch(cb, "fill_pattern", NULL, 3, args, unknown),
      HL_STATUS_INVALID_ARGUMENT, "unknown flags", NULL);
  args[0].access = HL_ACCESS_READ;
  hl_test_assert_status_has(
      hl_command_buffer_dispatch(cb, "fill_pattern", NULL, 3, args, NULL),
      HL_STATUS_INVALID_ARGUMENT, "parameter 0 (buf)", "command buffer");
  args[0].access = HL_ACCESS_WRITE;
  args[0].buffer = foreign;
  hl_test_assert_status_has(
      hl_command_buffer_dispatch(cb, "fill_pattern", NULL, 3, args, NULL),
      HL_STATUS_INVALID_ARGUMENT, "another device than command buffer", NULL);
  // Failed records left nothing behind.
  hl_command_buffer_info_t info = cb_info(cb);
  assert_int_equal(info.commands, 0);
  assert_int_equal(info.roots, 0);

  HL_ASSERT_OK(hl_command_buffer_update(cb, data, b, 0, 64));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  hl_test_assert_status_has(hl_command_buffer_finalize(cb),
                            HL_STATUS_FAILED_PRECONDITION, "finalized", NULL);
  hl_test_assert_status_has(hl_command_buffer_fill(cb, b, 0, 4, 0),
                            HL_STATUS_FAILED_PRECONDITION,
                            "record before hl_command_buffer_finalize", NULL);
  hl_test_assert_status_has(hl_command_buffer_barrier(cb),
                            HL_STATUS_FAILED_PRECONDITION, "finalized", NULL);
  hl_test_assert_status_has(hl_queue_execute(other_queue, NULL, NULL, cb),
                            HL_STATUS_INVALID_ARGUMENT,
                            "another device than queue", NULL);
  // Larger than the update limit.
  hl_buffer_t* big = cb_alloca(&env, HL_COMMAND_BUFFER_MAX_UPDATE_SIZE + 4);
  uint8_t* bytes = calloc(1, HL_COMMAND_BUFFER_MAX_UPDATE_SIZE + 4);
  hl_command_buffer_t* cb2 = cb_create(&env, 0);
  hl_test_assert_status_has(
      hl_command_buffer_update(cb2, bytes, big, 0,
                               HL_COMMAND_BUFFER_MAX_UPDATE_SIZE + 4),
      HL_STATUS_OUT_OF_RANGE, "update limit", NULL);
  free(bytes);
  hl_command_buffer_release(cb2);
  hl_buffer_release(big);

  // A NULL release is a no-op.
  hl_command_buffer_release(NULL);
  HL_ASSERT_OK(cb_run(&env, cb));
  hl_command_buffer_release(cb);
  hl_buffer_release(b);
  hl_buffer_release(foreign);
  HL_ASSERT_OK(hl_queue_wait_idle(other_queue, MEM_DEADLINE()));
  hl_queue_release(other_queue);
  hl_device_release(other);
  cb_env_deinit(&env);
}

// Executions are recorded on the roots' timeline resources: the use fence
// names the execution, a dealloca orders after it, and the command buffer
// may be released while its execution is in flight.
static void test_uses_recorded_on_timeline(void** state) {
  (void)state;
  cb_env_t env;
  cb_env_init(&env, 0);
  hl_buffer_t* src = cb_alloca(&env, 4096);
  hl_buffer_t* dst = cb_alloca(&env, 4096);
  hl_command_buffer_t* cb = cb_create(&env, 0);
  HL_ASSERT_OK(hl_command_buffer_fill(cb, src, 0, 4096, 0xABCDABCDu));
  HL_ASSERT_OK(hl_command_buffer_copy(cb, src, 0, dst, 0, 4096));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));

  // Hold the queue with a gate so the execution is in flight.
  hl_semaphore_t* gate = hl_test_semaphore_create();
  hl_fence_t* w = hl_test_fence(gate, 1);
  hl_fence_t* s = hl_test_fence(env.sem, env.value + 1);
  HL_ASSERT_OK(hl_queue_execute(env.queue, w, s, cb));
  hl_fence_release(w);
  hl_fence_release(s);
  hl_command_buffer_release(cb);  // The execution holds it.
  uint64_t executed = ++env.value;

  hl_fence_t* uses = hl_test_fence(NULL, 0);
  HL_ASSERT_OK(hl_buffer_use_fence(dst, uses));
  hl_fence_t* writes = hl_test_fence(NULL, 0);
  HL_ASSERT_OK(hl_buffer_mutation_barrier(dst, writes));
  hl_queue_stats_t qstats;
  hl_queue_stats(env.queue, &qstats);
  bool named = false;
  for (size_t i = 0; i < hl_fence_count(writes); ++i) {
    hl_semaphore_t* sem = NULL;
    uint64_t v = 0;
    hl_fence_entry(writes, i, &sem, &v);
    named |= sem == hl_queue_timeline(env.queue) && v == qstats.submitted_value;
  }
  assert_true(named);
  bool reached = true;
  HL_ASSERT_OK(hl_fence_is_reached(uses, &reached));
  assert_false(reached);
  hl_fence_release(uses);
  hl_fence_release(writes);

  // A dealloca with no wait of its own still orders after the execution.
  hl_semaphore_t* freed = hl_test_semaphore_create();
  mem_dealloca(env.queue, NULL, 0, freed, 1, dst);
  assert_false(hl_buffer_is_freed(dst));
  HL_ASSERT_OK(hl_semaphore_signal(gate, 1));
  mem_wait(freed, 1);
  mem_wait(env.sem, executed);
  assert_true(hl_buffer_is_freed(dst));
  hl_semaphore_release(freed);
  hl_semaphore_release(gate);
  hl_buffer_release(src);
  hl_buffer_release(dst);
  cb_env_deinit(&env);
}

// A command buffer whose buffer was freed fails its execution with "use
// after free" instead of touching the memory, and fails the queue in checked
// mode.
static void test_use_after_free_checked(void** state) {
  (void)state;
  cb_env_t env;
  cb_env_init(&env, 1);
  if (!hl_device_checked(env.device)) {
    hl_semaphore_release(env.sem);
    hl_queue_release(env.queue);
  }
  hl_test_require_checked(env.device);
  hl_buffer_t* b = cb_alloca(&env, 256);
  hl_command_buffer_t* cb = cb_create(&env, 0);
  HL_ASSERT_OK(hl_command_buffer_fill(cb, b, 0, 256, 1));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  HL_ASSERT_OK(cb_run(&env, cb));
  mem_dealloca(env.queue, env.sem, env.value, env.sem, env.value + 1, b);
  mem_wait(env.sem, ++env.value);
  assert_true(hl_buffer_is_freed(b));
  uint64_t before = hl_test_memory_stats(env.device).use_after_free;
  hl_status_t st = cb_run(&env, cb);
  hl_test_assert_status_has(st, HL_STATUS_FAILED_PRECONDITION, "use after free",
                            "command buffer");
  assert_true(hl_test_memory_stats(env.device).use_after_free > before);
  hl_test_assert_status_has(hl_queue_status(env.queue),
                            HL_STATUS_FAILED_PRECONDITION, NULL, NULL);
  hl_command_buffer_release(cb);
  hl_buffer_release(b);
  hl_semaphore_release(env.sem);
  hl_queue_release(env.queue);
  hl_device_release(env.device);
}

// One command buffer executed from several threads on several queues at
// once (a finalized command buffer is immutable).
typedef struct cb_thread_arg_t {
  hl_queue_t* queue;
  hl_command_buffer_t* cb;
  int rounds;
} cb_thread_arg_t;

static int cb_thread_main(void* user) {
  cb_thread_arg_t* arg = (cb_thread_arg_t*)user;
  hl_semaphore_t* s = NULL;
  if (hl_semaphore_create(0, hl_allocator_system(), &s)) return 1;
  int failures = 0;
  for (int i = 0; i < arg->rounds; ++i) {
    hl_fence_t* f = NULL;
    hl_status_t st = hl_fence_create(hl_allocator_system(), &f);
    if (!st) st = hl_fence_insert(f, s, (uint64_t)i + 1);
    if (!st) st = hl_queue_execute(arg->queue, NULL, f, arg->cb);
    if (!st) st = hl_semaphore_wait(s, (uint64_t)i + 1, MEM_DEADLINE());
    hl_fence_release(f);
    if (st) {
      ++failures;
      hl_status_free(st);
    }
  }
  hl_semaphore_release(s);
  return failures;
}

static void test_concurrent_executions(void** state) {
  (void)state;
  cb_env_t env;
  cb_env_init(&env, 0);
  hl_buffer_t* bufs[4];
  hl_queue_t* queues[4];
  hl_command_buffer_t* cbs[4];
  for (int i = 0; i < 4; ++i) {
    bufs[i] = cb_alloca(&env, 512);
    queues[i] = hl_test_queue_create(env.device);
    cbs[i] = cb_create(&env, 0);
    uint8_t data[256];
    memset(data, i + 1, sizeof(data));
    HL_ASSERT_OK(hl_command_buffer_fill(cbs[i], bufs[i], 0, 512, 0));
    HL_ASSERT_OK(hl_command_buffer_update(cbs[i], data, bufs[i], 0, 256));
    HL_ASSERT_OK(hl_command_buffer_finalize(cbs[i]));
  }
  thrd_t threads[8];
  cb_thread_arg_t args[8];
  int rounds = (int)hl_test_scale(200, 4);
  for (int t = 0; t < 8; ++t) {
    // Two threads per command buffer, on its queue (executions on two
    // queues would write the same bytes at the same time).
    args[t] = (cb_thread_arg_t){queues[t / 2], cbs[t / 2], rounds};
    assert_int_equal(thrd_create(&threads[t], cb_thread_main, &args[t]),
                     thrd_success);
  }
  for (int t = 0; t < 8; ++t) {
    int failures = -1;
    thrd_join(threads[t], &failures);
    assert_int_equal(failures, 0);
  }
  for (int i = 0; i < 4; ++i) {
    HL_ASSERT_OK(hl_queue_wait_idle(queues[i], MEM_DEADLINE()));
    uint8_t out[512];
    cb_read(&env, bufs[i], out, 512);
    for (int k = 0; k < 256; ++k) assert_int_equal(out[k], i + 1);
    for (int k = 256; k < 512; ++k) assert_int_equal(out[k], 0);
    hl_command_buffer_release(cbs[i]);
    hl_buffer_release(bufs[i]);
    hl_queue_release(queues[i]);
  }
  cb_env_deinit(&env);
}

// The fallback release sees command-buffer work: a wrapped external buffer
// whose last handle goes while an execution on another queue is held behind
// a gate is given back only after the execution has written it, once.
typedef struct cb_release_t {
  atomic_int calls;
  uint32_t last_word;  // memory[last] when release_fn ran.
  uint32_t* memory;
  size_t words;
} cb_release_t;

static void cb_release_fn(void* user, void* device_ptr) {
  cb_release_t* rel = (cb_release_t*)user;
  assert_ptr_equal(device_ptr, rel->memory);
  rel->last_word = rel->memory[rel->words - 1];
  atomic_fetch_add(&rel->calls, 1);
}

static void test_fallback_sees_execution(void** state) {
  (void)state;
  for (int mode = 0; mode < 2; ++mode) {
    mem_device_config_t cfg = {.fallback = mode ? HL_FALLBACK_DEVICE_SYNC
                                                : HL_FALLBACK_FRONTIER};
    hl_device_t* d = mem_device_create(&cfg);
    hl_queue_t* owner = hl_test_queue_create(d);
    hl_queue_t* runner = hl_test_queue_create(d);
    cb_release_t rel = {.memory = hl_test_device_visible_calloc(4096),
                        .words = 1024};
    atomic_init(&rel.calls, 0);
    hl_buffer_t* b = NULL;
    HL_ASSERT_OK(hl_buffer_wrap(d, rel.memory, 4096, cb_release_fn, &rel, &b));
    hl_command_buffer_t* cb = NULL;
    HL_ASSERT_OK(hl_command_buffer_create(d, 0, &cb));
    HL_ASSERT_OK(hl_command_buffer_fill(cb, b, 0, 4096, 0x77777777u));
    HL_ASSERT_OK(hl_command_buffer_finalize(cb));
    mem_gate_t gate;
    mem_gate_init(&gate, 0);
    mem_gate_submit(runner, &gate);
    HL_ASSERT_OK(hl_queue_execute(runner, NULL, NULL, cb));
    hl_command_buffer_release(cb);
    hl_buffer_release(b);  // The last handle: the fallback takes over.
    if (mode == 0) {
      hl_test_sleep_ms(5);
      assert_int_equal(atomic_load(&rel.calls), 0);
    }
    mem_gate_open(&gate);
    assert_true(mem_poll_atomic(&rel.calls, 1, 20000));
    assert_int_equal(rel.last_word, 0x77777777u);
    HL_ASSERT_OK(hl_queue_wait_idle(runner, MEM_DEADLINE()));
    HL_ASSERT_OK(hl_queue_wait_idle(owner, MEM_DEADLINE()));
    assert_int_equal(atomic_load(&rel.calls), 1);
    hl_test_device_visible_free(rel.memory);
    hl_queue_release(runner);
    hl_queue_release(owner);
    hl_device_release(d);
  }
}

// The invocation layer's export sees command-buffer work: an invocation on
// another queue that reads a buffer the command buffer writes waits for the
// execution (the root's mutation barrier names it), even though the
// execution is held behind a gate and the invocation's queue is free.
static hl_status_t cb_fn_clone(void* user, hl_queue_t* queue,
                               hl_buffer_t* const* args, size_t nargs,
                               const hl_fence_t* wait, const hl_fence_t* signal,
                               hl_buffer_t** results, size_t nresults) {
  (void)user;
  (void)nargs;
  (void)nresults;
  uint64_t size = hl_buffer_length(args[0]);
  hl_buffer_t* b = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_queue_alloca(queue, wait, NULL, size, 0, &b));
  hl_status_t st = hl_queue_copy(queue, wait, signal, args[0], 0, b, 0, size);
  if (st) {
    hl_buffer_release(b);
    return st;
  }
  results[0] = b;
  return NULL;
}

static void test_invocation_waits_for_execution(void** state) {
  (void)state;
  cb_env_t env;
  cb_env_init(&env, 0);
  hl_queue_t* runner = hl_test_queue_create(env.device);
  hl_buffer_t* x = cb_alloca(&env, 256);
  uint8_t zero[256] = {0}, data[256];
  for (int i = 0; i < 256; ++i) data[i] = (uint8_t)(i ^ 0x5A);
  cb_write(&env, x, zero, 256);
  hl_command_buffer_t* cb = cb_create(&env, 0);
  HL_ASSERT_OK(hl_command_buffer_fill(cb, x, 0, 256, 0));
  HL_ASSERT_OK(hl_command_buffer_update(cb, data, x, 0, 256));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  assert_int_equal(cb_info(cb).fills_elided, 1);

  mem_gate_t gate;
  mem_gate_init(&gate, 0);
  mem_gate_submit(runner, &gate);
  HL_ASSERT_OK(hl_queue_execute(runner, NULL, NULL, cb));

  const hl_access_t access[1] = {HL_ACCESS_READ};
  hl_function_signature_t sig = {1, 1, access};
  hl_function_t* f = NULL;
  HL_ASSERT_OK(hl_function_create("cb.clone", &sig, cb_fn_clone, NULL,
                                  hl_allocator_system(), &f));
  hl_invocation_t* inv = NULL;
  HL_ASSERT_OK(hl_invocation_create(f, env.queue, &inv));
  HL_ASSERT_OK(hl_invocation_add_argument(inv, x));
  HL_ASSERT_OK(hl_invocation_invoke(inv));
  mem_gate_open(&gate);
  HL_ASSERT_OK(hl_fence_wait(hl_invocation_signal_fence(inv), MEM_DEADLINE()));
  hl_buffer_t* y = NULL;
  HL_ASSERT_OK(hl_invocation_take_result(inv, 0, &y));
  uint8_t out[256];
  cb_read(&env, y, out, 256);
  assert_memory_equal(out, data, 256);

  hl_buffer_release(y);
  hl_invocation_release(inv);
  hl_function_release(f);
  hl_command_buffer_release(cb);
  hl_buffer_release(x);
  HL_ASSERT_OK(hl_queue_wait_idle(runner, MEM_DEADLINE()));
  hl_queue_release(runner);
  cb_env_deinit(&env);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_records_and_executes_every_command),
      cmocka_unit_test(test_iree_6972_full_cover_drops_the_fill),
      cmocka_unit_test(test_iree_6972_partial_cover_shrinks_to_the_gap),
      cmocka_unit_test(test_elision_rules),
      cmocka_unit_test(test_elision_respects_aliased_roots),
      cmocka_unit_test(test_elide_fills_env),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_uses_recorded_on_timeline),
      cmocka_unit_test(test_use_after_free_checked),
      cmocka_unit_test(test_concurrent_executions),
      cmocka_unit_test(test_fallback_sees_execution),
      cmocka_unit_test(test_invocation_waits_for_execution),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
