// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Command buffers that record dispatches of user executables
// (hl_command_buffer_dispatch_executable), on the backend tests/test_util.h
// picks: the host backend runs the host twin of tests/user_kernels/, the hip
// test runtime a GPU object (whose kernels run their twins) and captures the
// command buffer into a HIP graph at its first execution. Covers results
// with fills and copies around a user dispatch, repeated executions (the
// graph's replays), argument lists longer than the inline ones, record-time
// argument checks, the elision pass over user bindings by declared access,
// the executable retained by the command buffer, use recording and use
// after free.
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>

#include "hipline/command_buffer.h"
#include "hipline/dispatch.h"
#include "hipline/executable.h"
#include "tests/hip_test_runtime/hip_test_runtime.h"
#include "tests/memory_util.h"
#include "tests/user_kernels/user_kernels_files.h"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

typedef struct env_t {
  hl_device_t* device;
  hl_queue_t* queue;
  hl_semaphore_t* sem;
  uint64_t value;
  bool host;  // The device runs host objects (the host backend).
} env_t;

static void env_init(env_t* env, int checked) {
  mem_device_config_t cfg = {.checked = checked};
  env->device = mem_device_create(&cfg);
  env->queue = hl_test_queue_create(env->device);
  env->sem = hl_test_semaphore_create();
  env->value = 0;
  hl_device_properties_t props;
  HL_ASSERT_OK(hl_device_properties(env->device, &props));
  env->host = strcmp(props.target, HL_TARGET_ID_HOST) == 0;
}

static void env_deinit(env_t* env) {
  HL_ASSERT_OK(hl_queue_wait_idle(env->queue, MEM_DEADLINE()));
  hl_semaphore_release(env->sem);
  hl_queue_release(env->queue);
  hl_device_release(env->device);
}

static hl_buffer_t* env_alloca(env_t* env, uint64_t size) {
  hl_buffer_t* b =
      mem_alloca(env->queue, NULL, 0, env->sem, env->value + 1, size);
  mem_wait(env->sem, ++env->value);
  return b;
}

static void env_write(env_t* env, hl_buffer_t* b, const void* data,
                      uint64_t length) {
  hl_fence_t* s = hl_test_fence(env->sem, env->value + 1);
  HL_ASSERT_OK(hl_queue_write(env->queue, NULL, s, data, b, 0, length));
  hl_fence_release(s);
  mem_wait(env->sem, ++env->value);
}

static void env_read(env_t* env, hl_buffer_t* b, void* data, uint64_t length) {
  hl_fence_t* s = hl_test_fence(env->sem, env->value + 1);
  HL_ASSERT_OK(hl_queue_read(env->queue, NULL, s, b, 0, data, length));
  hl_fence_release(s);
  mem_wait(env->sem, ++env->value);
}

static hl_status_t env_run(env_t* env, hl_command_buffer_t* cb) {
  hl_fence_t* w = hl_test_fence(env->sem, env->value);
  hl_fence_t* s = hl_test_fence(env->sem, env->value + 1);
  hl_status_t st = hl_queue_execute(env->queue, w, s, cb);
  hl_fence_release(w);
  hl_fence_release(s);
  if (st) return st;
  return hl_semaphore_wait(env->sem, ++env->value, MEM_DEADLINE());
}

static hl_command_buffer_t* cb_create(env_t* env, uint32_t flags) {
  hl_command_buffer_t* cb = NULL;
  HL_ASSERT_OK(hl_command_buffer_create(env->device, flags, &cb));
  return cb;
}

static hl_command_buffer_info_t cb_info(hl_command_buffer_t* cb) {
  hl_command_buffer_info_t info;
  HL_ASSERT_OK(hl_command_buffer_query(cb, &info));
  return info;
}

static hl_kernel_arg_t buf_arg(hl_buffer_t* b, hl_access_t access) {
  hl_kernel_arg_t a = {.kind = HL_KERNEL_ARG_BUFFER,
                       .buffer = b,
                       .length = b ? hl_buffer_length(b) : 0,
                       .access = access};
  return a;
}

static hl_kernel_arg_t scalar_arg(uint64_t value, uint32_t size) {
  hl_kernel_arg_t a = {
      .kind = HL_KERNEL_ARG_SCALAR, .scalar = value, .size = size};
  return a;
}

static hl_kernel_arg_t float_arg(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return scalar_arg(bits, 4);
}

static uint32_t float_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

static const hl_dispatch_config_t kConfig = {{2, 1, 1}, {64, 1, 1}, 0};

// The hip test runtime's counters; false when it is not what is loaded.
static bool runtime_counters(hl_trt_counters_t* out) {
  void* library = dlopen("libamdhip64.so", RTLD_NOW | RTLD_NOLOAD);
  if (!library) return false;
  void* symbol = dlsym(library, HL_TRT_GET_COUNTERS_SYMBOL);
  dlclose(library);
  if (!symbol) return false;
  hl_trt_get_counters_fn_t get = NULL;
  memcpy(&get, &symbol, sizeof(get));
  get(out);
  return true;
}

#define N 256u

//===----------------------------------------------------------------------===//
// Tests
//===----------------------------------------------------------------------===//

// fill a, fill c (overwritten), vector_add(a, b) -> c, copy c -> d, fill a
// again: the user dispatch sees the first fill and its result reaches the
// copy, on every execution. On the hip test runtime the first execution
// captures a graph and the later ones launch it, so the captured user
// launch is checked too.
static void test_user_dispatch_between_fills_and_copies(void** state) {
  (void)state;
  env_t env;
  env_init(&env, 0);
  hl_executable_t* e = make_executable();
  hl_buffer_t* a = env_alloca(&env, N * 4);
  hl_buffer_t* b = env_alloca(&env, N * 4);
  hl_buffer_t* c = env_alloca(&env, N * 4);
  hl_buffer_t* d = env_alloca(&env, N * 4);
  hl_command_buffer_t* cb = cb_create(&env, 0);
  HL_ASSERT_OK(hl_command_buffer_fill(cb, a, 0, N * 4, float_bits(1.5f)));
  HL_ASSERT_OK(hl_command_buffer_fill(cb, c, 0, N * 4, 0xdeadbeefu));
  hl_kernel_arg_t args[4] = {buf_arg(a, HL_ACCESS_READ),
                             buf_arg(b, HL_ACCESS_READ),
                             buf_arg(c, HL_ACCESS_WRITE), scalar_arg(N, 4)};
  HL_ASSERT_OK(hl_command_buffer_dispatch_executable(cb, e, "vector_add",
                                                     &kConfig, 4, args, NULL));
  HL_ASSERT_OK(hl_command_buffer_copy(cb, c, 0, d, 0, N * 4));
  HL_ASSERT_OK(hl_command_buffer_fill(cb, a, 0, N * 4, float_bits(-7.0f)));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  hl_command_buffer_info_t info = cb_info(cb);
  assert_int_equal(info.dispatches, 1);
  assert_int_equal(info.roots, 4);
  // The dispatch reads a: its fill stays; c's fill is not overwritten by a
  // flagged binding, so it stays too.
  assert_int_equal(info.fills_elided, 0);
  hl_trt_counters_t before, after;
  bool trt = runtime_counters(&before);
  for (int round = 0; round < 3; ++round) {
    float host_b[N], host_c[N], host_d[N], host_a[N];
    for (uint32_t i = 0; i < N; ++i) host_b[i] = (float)(i + 100 * round);
    env_write(&env, b, host_b, sizeof(host_b));
    HL_ASSERT_OK(env_run(&env, cb));
    env_read(&env, c, host_c, sizeof(host_c));
    env_read(&env, d, host_d, sizeof(host_d));
    env_read(&env, a, host_a, sizeof(host_a));
    for (uint32_t i = 0; i < N; ++i) {
      if (host_c[i] != 1.5f + host_b[i] || host_d[i] != host_c[i] ||
          host_a[i] != -7.0f) {
        fail_msg("round %d, element %u: c %g d %g a %g (b %g)", round, i,
                 (double)host_c[i], (double)host_d[i], (double)host_a[i],
                 (double)host_b[i]);
      }
    }
  }
  if (trt) {
    assert_true(runtime_counters(&after));
    // One capture, then a launch of the graph per execution.
    assert_int_equal(after.graph_launches - before.graph_launches, 3);
  }
  hl_command_buffer_release(cb);
  hl_executable_release(e);
  hl_buffer_release(a);
  hl_buffer_release(b);
  hl_buffer_release(c);
  hl_buffer_release(d);
  env_deinit(&env);
}

// A kernel of ten explicit arguments (more than the built-in kernels have)
// records and runs, executed twice, with a built-in dispatch beside it.
static void test_long_argument_list(void** state) {
  (void)state;
  env_t env;
  env_init(&env, 0);
  hl_executable_t* e = make_executable();
  hl_buffer_t* in[4];
  for (int k = 0; k < 4; ++k) in[k] = env_alloca(&env, N * 4);
  hl_buffer_t* out = env_alloca(&env, N * 4);
  hl_buffer_t* y = env_alloca(&env, N * 4);
  hl_command_buffer_t* cb = cb_create(&env, 0);
  for (int k = 0; k < 4; ++k) {
    HL_ASSERT_OK(
        hl_command_buffer_fill(cb, in[k], 0, N * 4, float_bits(1.0f + k)));
  }
  HL_ASSERT_OK(hl_command_buffer_fill(cb, y, 0, N * 4, float_bits(1.0f)));
  hl_kernel_arg_t args[10] = {buf_arg(out, HL_ACCESS_WRITE),
                              buf_arg(in[0], HL_ACCESS_READ),
                              buf_arg(in[1], HL_ACCESS_READ),
                              buf_arg(in[2], HL_ACCESS_READ),
                              buf_arg(in[3], HL_ACCESS_READ),
                              float_arg(1.0f),
                              float_arg(10.0f),
                              float_arg(100.0f),
                              float_arg(1000.0f),
                              scalar_arg(N, 4)};
  HL_ASSERT_OK(hl_command_buffer_dispatch_executable(cb, e, "weighted_sum4",
                                                     &kConfig, 10, args, NULL));
  // y += 2 * out, with the built-in axpy.
  hl_kernel_arg_t axpy[4] = {float_arg(2.0f), buf_arg(out, HL_ACCESS_READ),
                             buf_arg(y, HL_ACCESS_READ_WRITE),
                             scalar_arg(N, 8)};
  HL_ASSERT_OK(hl_command_buffer_dispatch(cb, "axpy", &kConfig, 4, axpy, NULL));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  for (int round = 0; round < 2; ++round) {
    HL_ASSERT_OK(env_run(&env, cb));
    float host_out[N], host_y[N];
    env_read(&env, out, host_out, sizeof(host_out));
    env_read(&env, y, host_y, sizeof(host_y));
    for (uint32_t i = 0; i < N; ++i) {
      if (host_out[i] != 4321.0f || host_y[i] != 1.0f + 2.0f * 4321.0f) {
        fail_msg("round %d, element %u: out %g y %g", round, i,
                 (double)host_out[i], (double)host_y[i]);
      }
    }
  }
  hl_command_buffer_release(cb);
  hl_executable_release(e);
  for (int k = 0; k < 4; ++k) hl_buffer_release(in[k]);
  hl_buffer_release(out);
  hl_buffer_release(y);
  env_deinit(&env);
}

// Expects |st| to be |code| mentioning |needle| and |needle2|; frees it.
static void expect_failure(hl_status_t st, hl_status_code_t code,
                           const char* needle, const char* needle2) {
  hl_test_assert_status_has(st, code, needle, needle2);
}

// A wrong argument count, kind, scalar size, access or range fails at
// record time naming the argument, and leaves the command buffer as it was.
static void test_record_time_argument_checks(void** state) {
  (void)state;
  env_t env;
  env_init(&env, 0);
  hl_executable_t* e = make_executable();
  hl_buffer_t* b = env_alloca(&env, 64);
  hl_command_buffer_t* cb = cb_create(&env, 0);
  hl_kernel_arg_t good[4] = {buf_arg(b, HL_ACCESS_READ),
                             buf_arg(b, HL_ACCESS_READ),
                             buf_arg(b, HL_ACCESS_WRITE), scalar_arg(16, 4)};
  hl_kernel_arg_t args[4];
#define RECORD(count)                                                     \
  hl_command_buffer_dispatch_executable(cb, e, "vector_add", NULL, count, \
                                        args, NULL)
  memcpy(args, good, sizeof(args));
  expect_failure(RECORD(3), HL_STATUS_INVALID_ARGUMENT,
                 "kernel 'vector_add' takes 4 arguments; 3 were given",
                 "command buffer");
  args[1] = scalar_arg(1, 8);
  expect_failure(RECORD(4), HL_STATUS_INVALID_ARGUMENT, "argument 1 (",
                 "is a global_buffer and needs a BUFFER");
  memcpy(args, good, sizeof(args));
  args[3] = buf_arg(b, HL_ACCESS_READ);
  expect_failure(RECORD(4), HL_STATUS_INVALID_ARGUMENT, "argument 3 (",
                 "needs a SCALAR");
  args[3] = scalar_arg(16, 8);
  expect_failure(RECORD(4), HL_STATUS_INVALID_ARGUMENT, "argument 3 (",
                 "is 4 bytes; the argument has 8");
  memcpy(args, good, sizeof(args));
  args[2].access = (hl_access_t)9;
  expect_failure(RECORD(4), HL_STATUS_INVALID_ARGUMENT, "argument 2 (",
                 ": access 9");
  memcpy(args, good, sizeof(args));
  args[0].offset = 32;
  expect_failure(RECORD(4), HL_STATUS_OUT_OF_RANGE, "argument 0 (",
                 ": range [32, +64)");
  // The argument's metadata name: the host twin names its arguments;
  // clang's metadata does not (without -g), so hipline names them by kind.
  memcpy(args, good, sizeof(args));
  args[3] = scalar_arg(16, 2);
  expect_failure(RECORD(4), HL_STATUS_INVALID_ARGUMENT,
                 env.host ? "argument 3 (n)" : "argument 3 (unnamed by_value)",
                 "vector_add");
  // Flags: WRITES_WHOLE_RANGE only on a buffer with write access.
  uint32_t flags[4] = {HL_COMMAND_ARG_WRITES_WHOLE_RANGE, 0, 0, 0};
  expect_failure(hl_command_buffer_dispatch_executable(cb, e, "vector_add",
                                                       NULL, 4, good, flags),
                 HL_STATUS_INVALID_ARGUMENT, "argument 0",
                 "WRITES_WHOLE_RANGE");
  flags[0] = 0;
  flags[3] = 1u << 7;
  expect_failure(hl_command_buffer_dispatch_executable(cb, e, "vector_add",
                                                       NULL, 4, good, flags),
                 HL_STATUS_INVALID_ARGUMENT, "argument 3", "unknown flags");
  expect_failure(
      hl_command_buffer_dispatch_executable(cb, e, "nope", NULL, 4, good, NULL),
      HL_STATUS_NOT_FOUND, "no kernel named 'nope'", "command buffer");
  expect_failure(hl_command_buffer_dispatch_executable(cb, NULL, "vector_add",
                                                       NULL, 4, good, NULL),
                 HL_STATUS_INVALID_ARGUMENT, "executable", NULL);
  expect_failure(
      hl_command_buffer_dispatch_executable(cb, e, NULL, NULL, 4, good, NULL),
      HL_STATUS_INVALID_ARGUMENT, "kernel_name", NULL);
  expect_failure(hl_command_buffer_dispatch_executable(NULL, e, "vector_add",
                                                       NULL, 4, good, NULL),
                 HL_STATUS_INVALID_ARGUMENT, "NULL", NULL);
  // Nothing was recorded.
  hl_command_buffer_info_t info = cb_info(cb);
  assert_int_equal(info.commands, 0);
  assert_int_equal(info.roots, 0);
  HL_ASSERT_STATUS(hl_command_buffer_finalize(cb), FAILED_PRECONDITION);
  // The good one records; after finalize nothing does.
  HL_ASSERT_OK(hl_command_buffer_dispatch_executable(cb, e, "vector_add", NULL,
                                                     4, good, NULL));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  expect_failure(hl_command_buffer_dispatch_executable(cb, e, "vector_add",
                                                       NULL, 4, good, NULL),
                 HL_STATUS_FAILED_PRECONDITION, "finalized", NULL);
#undef RECORD
  hl_command_buffer_release(cb);
  hl_executable_release(e);
  hl_buffer_release(b);
  env_deinit(&env);
}

// Records fill(x) ; vector_add with |x| bound as |access| (flagged
// |flags|) to argument |slot| ; and returns the command buffer finalized.
// The other buffers: a and b inputs, c output.
static hl_command_buffer_t* record_fill_then_add(env_t* env, hl_executable_t* e,
                                                 hl_buffer_t* bufs[3],
                                                 hl_buffer_t* x, uint32_t slot,
                                                 hl_access_t access,
                                                 uint32_t flags, float value) {
  hl_command_buffer_t* cb = cb_create(env, 0);
  HL_ASSERT_OK(hl_command_buffer_fill(cb, x, 0, N * 4, float_bits(value)));
  hl_kernel_arg_t args[4] = {
      buf_arg(bufs[0], HL_ACCESS_READ), buf_arg(bufs[1], HL_ACCESS_READ),
      buf_arg(bufs[2], HL_ACCESS_WRITE), scalar_arg(N, 4)};
  args[slot] = buf_arg(x, access);
  uint32_t arg_flags[4] = {0};
  arg_flags[slot] = flags;
  HL_ASSERT_OK(hl_command_buffer_dispatch_executable(
      cb, e, "vector_add", &kConfig, 4, args, arg_flags));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  return cb;
}

// The elision pass treats a user dispatch's bindings by declared access:
// a read keeps the fill before it; a write flagged WRITES_WHOLE_RANGE
// drops it; an unflagged write, or a flagged READ_WRITE, keeps it. The
// memory after each execution is what program order says.
static void test_elision_by_declared_access(void** state) {
  (void)state;
  env_t env;
  env_init(&env, 0);
  hl_executable_t* e = make_executable();
  hl_buffer_t* a = env_alloca(&env, N * 4);
  hl_buffer_t* b = env_alloca(&env, N * 4);
  hl_buffer_t* c = env_alloca(&env, N * 4);
  float host_a[N], host_b[N], host_c[N];
  for (uint32_t i = 0; i < N; ++i) {
    host_a[i] = (float)i;
    host_b[i] = (float)(2 * i);
  }
  hl_buffer_t* bufs[3] = {a, b, c};

  // The kernel reads the filled range (a = 3.0 everywhere): the fill stays.
  env_write(&env, a, host_a, sizeof(host_a));
  env_write(&env, b, host_b, sizeof(host_b));
  hl_command_buffer_t* cb =
      record_fill_then_add(&env, e, bufs, a, 0, HL_ACCESS_READ, 0, 3.0f);
  assert_int_equal(cb_info(cb).fills_elided, 0);
  assert_int_equal(cb_info(cb).fill_bytes_elided, 0);
  HL_ASSERT_OK(env_run(&env, cb));
  env_read(&env, c, host_c, sizeof(host_c));
  for (uint32_t i = 0; i < N; ++i) {
    if (host_c[i] != 3.0f + host_b[i]) {
      fail_msg("read: element %u is %g", i, (double)host_c[i]);
    }
  }
  hl_command_buffer_release(cb);

  // The kernel overwrites the filled range (c, flagged): the fill goes and
  // c is the sum.
  cb = record_fill_then_add(&env, e, bufs, c, 2, HL_ACCESS_WRITE,
                            HL_COMMAND_ARG_WRITES_WHOLE_RANGE, 9.0f);
  assert_int_equal(cb_info(cb).fills_elided, 1);
  assert_int_equal(cb_info(cb).fill_bytes_elided, N * 4);
  env_write(&env, a, host_a, sizeof(host_a));
  HL_ASSERT_OK(env_run(&env, cb));
  env_read(&env, c, host_c, sizeof(host_c));
  for (uint32_t i = 0; i < N; ++i) {
    if (host_c[i] != host_a[i] + host_b[i]) {
      fail_msg("overwrite: element %u is %g", i, (double)host_c[i]);
    }
  }
  hl_command_buffer_release(cb);

  // Unflagged, the write may leave bytes as they were: the fill stays.
  cb = record_fill_then_add(&env, e, bufs, c, 2, HL_ACCESS_WRITE, 0, 9.0f);
  assert_int_equal(cb_info(cb).fills_elided, 0);
  HL_ASSERT_OK(env_run(&env, cb));
  hl_command_buffer_release(cb);

  // READ_WRITE reads before it writes: flagged or not, the fill stays. The
  // kernel reads a through the READ_WRITE binding, so a = 5.0 shows in c.
  cb = record_fill_then_add(&env, e, bufs, a, 0, HL_ACCESS_READ_WRITE,
                            HL_COMMAND_ARG_WRITES_WHOLE_RANGE, 5.0f);
  assert_int_equal(cb_info(cb).fills_elided, 0);
  HL_ASSERT_OK(env_run(&env, cb));
  env_read(&env, c, host_c, sizeof(host_c));
  for (uint32_t i = 0; i < N; ++i) {
    if (host_c[i] != 5.0f + host_b[i]) {
      fail_msg("read-write: element %u is %g", i, (double)host_c[i]);
    }
  }
  hl_command_buffer_release(cb);

  // Elided and unelided memory agree (HL_COMMAND_BUFFER_FLAG_NO_ELISION).
  for (int elide = 0; elide < 2; ++elide) {
    hl_command_buffer_t* x =
        cb_create(&env, elide ? 0 : HL_COMMAND_BUFFER_FLAG_NO_ELISION);
    HL_ASSERT_OK(hl_command_buffer_fill(x, c, 0, N * 4, float_bits(4.0f)));
    HL_ASSERT_OK(hl_command_buffer_fill(x, a, 0, N * 4, float_bits(2.0f)));
    hl_kernel_arg_t args[4] = {buf_arg(a, HL_ACCESS_READ),
                               buf_arg(b, HL_ACCESS_READ),
                               buf_arg(c, HL_ACCESS_WRITE), scalar_arg(N, 4)};
    uint32_t flags[4] = {0, 0, HL_COMMAND_ARG_WRITES_WHOLE_RANGE, 0};
    HL_ASSERT_OK(hl_command_buffer_dispatch_executable(
        x, e, "vector_add", &kConfig, 4, args, flags));
    HL_ASSERT_OK(hl_command_buffer_finalize(x));
    assert_int_equal(cb_info(x).fills_elided, elide ? 1 : 0);
    HL_ASSERT_OK(env_run(&env, x));
    env_read(&env, c, host_c, sizeof(host_c));
    for (uint32_t i = 0; i < N; ++i) {
      if (host_c[i] != 2.0f + host_b[i]) {
        fail_msg("elide=%d: element %u is %g", elide, i, (double)host_c[i]);
      }
    }
    hl_command_buffer_release(x);
  }
  hl_executable_release(e);
  hl_buffer_release(a);
  hl_buffer_release(b);
  hl_buffer_release(c);
  env_deinit(&env);
}

// A small deterministic generator (xorshift64*).
static uint64_t rng_next(uint64_t* state) {
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return *state * UINT64_C(2685821657736338717);
}

static uint64_t rng_below(uint64_t* state, uint64_t n) {
  return rng_next(state) % n;
}

#define PROP_BUFFERS 3
#define PROP_BYTES 1024u

// Records |count| random commands into |cb|: fills, copies and vector_add
// dispatches over |bufs|, the output binding WRITE or READ_WRITE, flagged
// WRITES_WHOLE_RANGE (its declared range is then exactly what the kernel
// writes, so the flag's promise holds) or not (then the declared range may
// run past what the kernel writes).
static void record_random(hl_command_buffer_t* cb, hl_executable_t* e,
                          hl_buffer_t* const* bufs, uint64_t seed, int count) {
  uint64_t rng = seed;
  for (int i = 0; i < count; ++i) {
    uint64_t kind = rng_below(&rng, 3);
    hl_buffer_t* x = bufs[rng_below(&rng, PROP_BUFFERS)];
    uint64_t words = 1 + rng_below(&rng, PROP_BYTES / 4);
    uint64_t offset = 4 * rng_below(&rng, PROP_BYTES / 4 - words + 1);
    if (kind == 0) {
      float value = (float)(1 + rng_below(&rng, 50));
      HL_ASSERT_OK(
          hl_command_buffer_fill(cb, x, offset, words * 4, float_bits(value)));
    } else if (kind == 1) {
      hl_buffer_t* y = bufs[rng_below(&rng, PROP_BUFFERS)];
      uint64_t target = 4 * rng_below(&rng, PROP_BYTES / 4 - words + 1);
      HL_ASSERT_OK(hl_command_buffer_copy(cb, x, offset, y, target, words * 4));
    } else {
      // c in one buffer, a and b in the others.
      uint32_t k = (uint32_t)rng_below(&rng, PROP_BUFFERS);
      hl_buffer_t* c = bufs[k];
      hl_buffer_t* a = bufs[(k + 1) % PROP_BUFFERS];
      hl_buffer_t* b = bufs[(k + 1 + rng_below(&rng, 2)) % PROP_BUFFERS];
      uint64_t n = 1 + rng_below(&rng, 64);
      hl_kernel_arg_t args[4] = {buf_arg(a, HL_ACCESS_READ),
                                 buf_arg(b, HL_ACCESS_READ),
                                 buf_arg(c, HL_ACCESS_WRITE), scalar_arg(n, 4)};
      for (int j = 0; j < 3; ++j) {
        args[j].offset = 4 * rng_below(&rng, PROP_BYTES / 4 - n + 1);
        args[j].length = n * 4;
      }
      if (rng_below(&rng, 2)) args[2].access = HL_ACCESS_READ_WRITE;
      uint32_t flags[4] = {0};
      if (rng_below(&rng, 2)) {
        flags[2] = HL_COMMAND_ARG_WRITES_WHOLE_RANGE;
      } else {
        // Unflagged, the declared range may be more than the kernel writes.
        uint64_t room = PROP_BYTES - args[2].offset - args[2].length;
        args[2].length += 4 * rng_below(&rng, room / 4 + 1);
      }
      HL_ASSERT_OK(hl_command_buffer_dispatch_executable(
          cb, e, "vector_add", &kConfig, 4, args, flags));
    }
  }
}

// Random command buffers with user dispatches leave the same memory with
// and without elision.
static void test_elision_property(void** state) {
  (void)state;
  env_t env;
  env_init(&env, 0);
  hl_executable_t* e = make_executable();
  hl_buffer_t* bufs[PROP_BUFFERS];
  for (int i = 0; i < PROP_BUFFERS; ++i) {
    bufs[i] = env_alloca(&env, PROP_BYTES);
  }
  int rounds = (int)hl_test_scale(200, 4);
  uint64_t elided_fills = 0;
  for (int round = 0; round < rounds; ++round) {
    uint64_t seed = UINT64_C(0x9e3779b97f4a7c15) * (uint64_t)(round + 1);
    float result[2][PROP_BUFFERS][PROP_BYTES / 4];
    for (int elide = 0; elide < 2; ++elide) {
      float init[PROP_BYTES / 4];
      for (int i = 0; i < PROP_BUFFERS; ++i) {
        for (uint32_t w = 0; w < PROP_BYTES / 4; ++w) {
          init[w] = (float)(1000 * i + w);
        }
        env_write(&env, bufs[i], init, sizeof(init));
      }
      hl_command_buffer_t* cb =
          cb_create(&env, elide ? 0 : HL_COMMAND_BUFFER_FLAG_NO_ELISION);
      record_random(cb, e, bufs, seed, 12);
      HL_ASSERT_OK(hl_command_buffer_finalize(cb));
      if (elide) elided_fills += cb_info(cb).fill_bytes_elided;
      HL_ASSERT_OK(env_run(&env, cb));
      hl_command_buffer_release(cb);
      for (int i = 0; i < PROP_BUFFERS; ++i) {
        env_read(&env, bufs[i], result[elide][i], PROP_BYTES);
      }
    }
    if (memcmp(result[0], result[1], sizeof(result[0])) != 0) {
      fail_msg("round %d (seed %llu): memory differs with elision", round,
               (unsigned long long)seed);
    }
  }
  // The workload exercises the pass: some fill bytes go.
  assert_true(elided_fills > 0);
  hl_executable_release(e);
  for (int i = 0; i < PROP_BUFFERS; ++i) hl_buffer_release(bufs[i]);
  env_deinit(&env);
}

// The command buffer retains the executable: released right after
// recording, the dispatch still runs (AddressSanitizer would see the
// executable's memory freed otherwise), and the last release of the
// command buffer frees it.
static void test_executable_retained(void** state) {
  (void)state;
  env_t env;
  env_init(&env, 0);
  hl_buffer_t* p = env_alloca(&env, 8 * 8);
  uint64_t host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  env_write(&env, p, host, sizeof(host));
  hl_command_buffer_t* cb = cb_create(&env, 0);
  hl_executable_t* e = make_executable();
  hl_kernel_arg_t args[3] = {buf_arg(p, HL_ACCESS_READ_WRITE),
                             scalar_arg(UINT64_C(0x100000000), 8),
                             scalar_arg(8, 4)};
  hl_dispatch_config_t one = {{1, 1, 1}, {8, 1, 1}, 0};
  HL_ASSERT_OK(hl_command_buffer_dispatch_executable(cb, e, "add_u64", &one, 3,
                                                     args, NULL));
  hl_executable_release(e);
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  HL_ASSERT_OK(env_run(&env, cb));
  HL_ASSERT_OK(env_run(&env, cb));
  // An execution in flight holds the command buffer, and so the executable.
  hl_fence_t* s = hl_test_fence(env.sem, env.value + 1);
  HL_ASSERT_OK(hl_queue_execute(env.queue, NULL, s, cb));
  hl_fence_release(s);
  hl_command_buffer_release(cb);
  mem_wait(env.sem, ++env.value);
  uint64_t result[8];
  env_read(&env, p, result, sizeof(result));
  for (int i = 0; i < 8; ++i) {
    assert_int_equal(result[i], host[i] + 3 * UINT64_C(0x100000000));
  }
  hl_buffer_release(p);
  env_deinit(&env);
}

// An execution records one use per root, so a dealloca of a buffer the
// user dispatch writes orders after the execution.
static void test_dealloca_orders_after_execution(void** state) {
  (void)state;
  env_t env;
  env_init(&env, 0);
  hl_executable_t* e = make_executable();
  hl_buffer_t* a = env_alloca(&env, N * 4);
  hl_buffer_t* c = env_alloca(&env, N * 4);
  hl_command_buffer_t* cb = cb_create(&env, 0);
  HL_ASSERT_OK(hl_command_buffer_fill(cb, a, 0, N * 4, float_bits(0.5f)));
  hl_kernel_arg_t args[4] = {buf_arg(a, HL_ACCESS_READ),
                             buf_arg(a, HL_ACCESS_READ),
                             buf_arg(c, HL_ACCESS_WRITE), scalar_arg(N, 4)};
  HL_ASSERT_OK(hl_command_buffer_dispatch_executable(cb, e, "vector_add",
                                                     &kConfig, 4, args, NULL));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  hl_executable_release(e);
  // A second queue executes; the dealloca on the first must wait for it.
  hl_queue_t* q2 = hl_test_queue_create(env.device);
  hl_semaphore_t* gate = hl_test_semaphore_create();
  hl_semaphore_t* done = hl_test_semaphore_create();
  hl_fence_t* w = hl_test_fence(gate, 1);
  hl_fence_t* s = hl_test_fence(done, 1);
  HL_ASSERT_OK(hl_queue_execute(q2, w, s, cb));
  hl_fence_release(w);
  hl_fence_release(s);
  mem_dealloca(env.queue, NULL, 0, env.sem, env.value + 1, c);
  hl_test_sleep_ms(20);
  // The dealloca has not run: the execution waits on the gate.
  uint64_t reached = 0;
  HL_ASSERT_OK(hl_semaphore_query(env.sem, &reached));
  assert_true(reached < env.value + 1);
  assert_false(hl_buffer_is_freed(c));
  HL_ASSERT_OK(hl_semaphore_signal(gate, 1));
  mem_wait(done, 1);
  mem_wait(env.sem, ++env.value);
  assert_true(hl_buffer_is_freed(c));
  HL_ASSERT_OK(hl_queue_wait_idle(q2, MEM_DEADLINE()));
  hl_semaphore_release(gate);
  hl_semaphore_release(done);
  hl_queue_release(q2);
  hl_command_buffer_release(cb);
  hl_buffer_release(a);
  hl_buffer_release(c);
  env_deinit(&env);
}

// A buffer a recorded user dispatch writes is freed: the next execution
// fails with "use after free" instead of running the kernel, and the queue
// fails too in checked mode.
static void check_use_after_free(int checked) {
  env_t env;
  env_init(&env, checked);
  if (checked && !hl_device_checked(env.device)) {
    env_deinit(&env);
    print_message("skipped: the backend has no checked mode\n");
    skip();
  }
  hl_executable_t* e = make_executable();
  hl_buffer_t* a = env_alloca(&env, N * 4);
  hl_buffer_t* c = env_alloca(&env, N * 4);
  hl_command_buffer_t* cb = cb_create(&env, 0);
  hl_kernel_arg_t args[4] = {buf_arg(a, HL_ACCESS_READ),
                             buf_arg(a, HL_ACCESS_READ),
                             buf_arg(c, HL_ACCESS_WRITE), scalar_arg(N, 4)};
  HL_ASSERT_OK(hl_command_buffer_dispatch_executable(cb, e, "vector_add",
                                                     &kConfig, 4, args, NULL));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  hl_executable_release(e);
  HL_ASSERT_OK(env_run(&env, cb));
  mem_dealloca(env.queue, env.sem, env.value, env.sem, env.value + 1, c);
  mem_wait(env.sem, ++env.value);
  assert_true(hl_buffer_is_freed(c));
  uint64_t before = hl_test_memory_stats(env.device).use_after_free;
  hl_status_t st = env_run(&env, cb);
  hl_test_assert_status_has(st, HL_STATUS_FAILED_PRECONDITION, "use after free",
                            "command buffer");
  assert_true(hl_test_memory_stats(env.device).use_after_free > before);
  if (checked) {
    hl_test_assert_status_has(hl_queue_status(env.queue),
                              HL_STATUS_FAILED_PRECONDITION, NULL, NULL);
  } else {
    HL_ASSERT_OK(hl_queue_status(env.queue));
  }
  hl_command_buffer_release(cb);
  hl_buffer_release(a);
  hl_buffer_release(c);
  hl_semaphore_release(env.sem);
  hl_queue_release(env.queue);
  hl_device_release(env.device);
}

static void test_use_after_free_unchecked(void** state) {
  (void)state;
  check_use_after_free(0);
}

static void test_use_after_free_checked(void** state) {
  (void)state;
  check_use_after_free(1);
}

// The built-in executable is an executable like the others: its kernels
// record through hl_command_buffer_dispatch_executable with the kernel
// table's checks, and queries answer for it.
static void test_builtin_executable(void** state) {
  (void)state;
  env_t env;
  env_init(&env, 0);
  hl_executable_t* builtin = hl_executable_builtin();
  assert_non_null(builtin);
  assert_ptr_equal(builtin, hl_executable_builtin());
  hl_executable_retain(builtin);
  hl_executable_release(builtin);
  hl_executable_release(builtin);  // Static: release leaves it alone.
  size_t objects = hl_executable_object_count(builtin);
  assert_int_equal(objects, hl_executable_registry_target_count());
  assert_string_equal(hl_executable_object_target(builtin, objects - 1),
                      HL_TARGET_ID_HOST);
  size_t index = objects;
  HL_ASSERT_OK(hl_executable_select_for_device(builtin, env.device, &index));
  assert_true(index < objects);
  size_t count = 0;
  HL_ASSERT_OK(
      hl_executable_kernel_arg_count(builtin, index, "verify_pattern", &count));
  assert_int_equal(count, 4);
  hl_buffer_t* b = env_alloca(&env, 64);
  hl_command_buffer_t* cb = cb_create(&env, 0);
  hl_kernel_arg_t args[3] = {buf_arg(b, HL_ACCESS_READ), scalar_arg(16, 8),
                             scalar_arg(7, 4)};
  // The kernel table's check: fill_pattern's buf needs write access.
  expect_failure(hl_command_buffer_dispatch_executable(
                     cb, builtin, "fill_pattern", NULL, 3, args, NULL),
                 HL_STATUS_INVALID_ARGUMENT, "parameter 0 (buf)",
                 "command buffer");
  args[0].access = HL_ACCESS_WRITE;
  HL_ASSERT_OK(hl_command_buffer_dispatch_executable(
      cb, builtin, "fill_pattern", &kConfig, 3, args, NULL));
  HL_ASSERT_OK(hl_command_buffer_finalize(cb));
  HL_ASSERT_OK(env_run(&env, cb));
  uint32_t host[16];
  env_read(&env, b, host, sizeof(host));
  for (uint32_t i = 0; i < 16; ++i) {
    assert_int_equal(host[i], hl_pattern_value(7, i));
  }
  // The same through the queue.
  HL_ASSERT_OK(hl_queue_dispatch_executable(env.queue, NULL, NULL, builtin,
                                            "fill_pattern", &kConfig, 3, args));
  hl_command_buffer_release(cb);
  hl_buffer_release(b);
  env_deinit(&env);
}

// One command buffer with a user dispatch executed from two threads at once
// per queue, four queues: each execution lays out its own kernarg segment.
typedef struct exec_thread_t {
  hl_queue_t* queue;
  hl_command_buffer_t* cb;
  int rounds;
} exec_thread_t;

static int exec_thread_main(void* user) {
  exec_thread_t* arg = user;
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
  env_t env;
  env_init(&env, 0);
  hl_executable_t* e = make_executable();
  hl_buffer_t* in[4];
  hl_buffer_t* out[4];
  hl_queue_t* queues[4];
  hl_command_buffer_t* cbs[4];
  for (int q = 0; q < 4; ++q) {
    in[q] = env_alloca(&env, N * 4);
    out[q] = env_alloca(&env, N * 4);
    queues[q] = hl_test_queue_create(env.device);
    cbs[q] = cb_create(&env, 0);
    HL_ASSERT_OK(
        hl_command_buffer_fill(cbs[q], in[q], 0, N * 4, float_bits(q + 1.0f)));
    hl_kernel_arg_t args[4] = {
        buf_arg(in[q], HL_ACCESS_READ), buf_arg(in[q], HL_ACCESS_READ),
        buf_arg(out[q], HL_ACCESS_WRITE), scalar_arg(N, 4)};
    HL_ASSERT_OK(hl_command_buffer_dispatch_executable(
        cbs[q], e, "vector_add", &kConfig, 4, args, NULL));
    HL_ASSERT_OK(hl_command_buffer_finalize(cbs[q]));
  }
  hl_executable_release(e);
  thrd_t threads[8];
  exec_thread_t args[8];
  int rounds = (int)hl_test_scale(100, 4);
  for (int t = 0; t < 8; ++t) {
    // Two threads per command buffer, on its queue (executions on two
    // queues would write the same bytes at the same time).
    args[t] = (exec_thread_t){queues[t / 2], cbs[t / 2], rounds};
    assert_int_equal(thrd_create(&threads[t], exec_thread_main, &args[t]),
                     thrd_success);
  }
  for (int t = 0; t < 8; ++t) {
    int failures = -1;
    thrd_join(threads[t], &failures);
    assert_int_equal(failures, 0);
  }
  for (int q = 0; q < 4; ++q) {
    HL_ASSERT_OK(hl_queue_wait_idle(queues[q], MEM_DEADLINE()));
    float host[N];
    env_read(&env, out[q], host, sizeof(host));
    for (uint32_t i = 0; i < N; ++i) {
      assert_true(host[i] == 2.0f * (q + 1.0f));
    }
    hl_command_buffer_release(cbs[q]);
    hl_buffer_release(in[q]);
    hl_buffer_release(out[q]);
    hl_queue_release(queues[q]);
  }
  env_deinit(&env);
}

// A queue dispatch whose executable the caller releases right after
// submitting holds the last reference: the work runs, and the executable
// (its modules) goes when the op is released, off the stream's thread.
static void test_queue_dispatch_holds_last_reference(void** state) {
  (void)state;
  env_t env;
  env_init(&env, 0);
  hl_buffer_t* p = env_alloca(&env, 8 * 8);
  uint64_t host[8] = {0};
  env_write(&env, p, host, sizeof(host));
  hl_semaphore_t* gate = hl_test_semaphore_create();
  hl_dispatch_config_t one = {{1, 1, 1}, {8, 1, 1}, 0};
  hl_kernel_arg_t args[3] = {buf_arg(p, HL_ACCESS_READ_WRITE), scalar_arg(5, 8),
                             scalar_arg(8, 4)};
  for (int round = 0; round < 20; ++round) {
    hl_executable_t* e = make_executable();
    hl_fence_t* w = hl_test_fence(gate, (uint64_t)round + 1);
    hl_fence_t* s = hl_test_fence(env.sem, env.value + 1);
    HL_ASSERT_OK(hl_queue_dispatch_executable(env.queue, w, s, e, "add_u64",
                                              &one, 3, args));
    hl_executable_release(e);
    hl_fence_release(w);
    hl_fence_release(s);
    HL_ASSERT_OK(hl_semaphore_signal(gate, (uint64_t)round + 1));
    mem_wait(env.sem, ++env.value);
  }
  uint64_t result[8];
  env_read(&env, p, result, sizeof(result));
  for (int i = 0; i < 8; ++i) assert_int_equal(result[i], 100);
  hl_semaphore_release(gate);
  hl_buffer_release(p);
  env_deinit(&env);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_user_dispatch_between_fills_and_copies),
      cmocka_unit_test(test_long_argument_list),
      cmocka_unit_test(test_record_time_argument_checks),
      cmocka_unit_test(test_elision_by_declared_access),
      cmocka_unit_test(test_elision_property),
      cmocka_unit_test(test_executable_retained),
      cmocka_unit_test(test_dealloca_orders_after_execution),
      cmocka_unit_test(test_use_after_free_unchecked),
      cmocka_unit_test(test_use_after_free_checked),
      cmocka_unit_test(test_builtin_executable),
      cmocka_unit_test(test_concurrent_executions),
      cmocka_unit_test(test_queue_dispatch_holds_last_reference),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
