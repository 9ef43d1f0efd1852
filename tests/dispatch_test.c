// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Kernel dispatch and the kernel-backed functions (hipline/dispatch.h), on
// the backend tests/test_util.h picks (HIPLINE_TEST_BACKEND): each kernel
// against the host oracle, argument validation, use after free (checked mode
// where the backend has it), the kernel-backed functions through
// invocations, and the per-device module cache. The cross-device and cache
// tests need two devices (HIPLINE_HOST_DEVICES=2 is set before any device
// exists; the hip test runtime gets HL_HIP_TEST_RUNTIME_DEVICES=2) and skip
// with one. Without a HIP device the hip copies exit 77 (skipped).
#include "hipline/dispatch.h"

#include <float.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hipline/buffer.h"
#include "hipline/fence.h"
#include "hipline/invocation.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "hipline/time.h"
#include "runtime/executable/executable_cache.h"
#include "runtime/timeline/timeline_internal.h"
#include "tests/test_util.h"

#define MS ((hl_duration_t)1000000)
#define DEADLINE() hl_deadline_after(20000 * MS)

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

// A semaphore and the next value to signal: each step() is a fresh
// one-pair fence the caller releases.
typedef struct timeline_t {
  hl_semaphore_t* sem;
  uint64_t value;
} timeline_t;

static void timeline_init(timeline_t* t) {
  t->value = 0;
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &t->sem));
}

static hl_fence_t* fence_of(hl_semaphore_t* sem, uint64_t value) {
  hl_fence_t* f = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &f));
  HL_ASSERT_OK(hl_fence_insert(f, sem, value));
  return f;
}

// The fence of the next value on |t|.
static hl_fence_t* step(timeline_t* t) { return fence_of(t->sem, ++t->value); }

// Waits for the last value handed out by step().
static void timeline_wait(timeline_t* t) {
  HL_ASSERT_OK(hl_semaphore_wait(t->sem, t->value, DEADLINE()));
}

static hl_device_t* make_device(int ordinal, int checked) {
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = hl_test_backend_kind();
  o.ordinal = ordinal;
  o.checked = checked;
  hl_device_t* d = NULL;
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  return d;
}

static hl_queue_t* make_queue(hl_device_t* device) {
  hl_queue_t* q = NULL;
  HL_ASSERT_OK(hl_queue_create(device, &q));
  return q;
}

// Allocates |size| bytes on |q| and waits until the memory is usable.
static hl_buffer_t* alloc_sync(hl_queue_t* q, uint64_t size) {
  timeline_t t;
  timeline_init(&t);
  hl_fence_t* s = step(&t);
  hl_buffer_t* b = NULL;
  HL_ASSERT_OK(hl_queue_alloca(q, NULL, s, size, 0, &b));
  timeline_wait(&t);
  hl_fence_release(s);
  hl_semaphore_release(t.sem);
  return b;
}

static void read_sync(hl_queue_t* q, hl_buffer_t* b, uint64_t offset, void* out,
                      uint64_t length) {
  timeline_t t;
  timeline_init(&t);
  hl_fence_t* s = step(&t);
  HL_ASSERT_OK(hl_queue_read(q, NULL, s, b, offset, out, length));
  timeline_wait(&t);
  hl_fence_release(s);
  hl_semaphore_release(t.sem);
}

static void write_sync(hl_queue_t* q, hl_buffer_t* b, uint64_t offset,
                       const void* data, uint64_t length) {
  timeline_t t;
  timeline_init(&t);
  hl_fence_t* s = step(&t);
  HL_ASSERT_OK(hl_queue_write(q, NULL, s, data, b, offset, length));
  timeline_wait(&t);
  hl_fence_release(s);
  hl_semaphore_release(t.sem);
}

// Runs verify_pattern into a zeroed counter and returns the mismatches.
static uint32_t verify_sync(hl_queue_t* q, hl_buffer_t* b, uint32_t seed) {
  hl_buffer_t* counter = alloc_sync(q, 4);
  const uint32_t zero = 0;
  write_sync(q, counter, 0, &zero, 4);
  timeline_t t;
  timeline_init(&t);
  hl_fence_t* s = step(&t);
  HL_ASSERT_OK(hl_queue_verify_pattern(q, NULL, s, b, seed, counter));
  timeline_wait(&t);
  uint32_t mismatches = UINT32_MAX;
  read_sync(q, counter, 0, &mismatches, 4);
  hl_fence_release(s);
  hl_semaphore_release(t.sem);
  hl_buffer_release(counter);
  return mismatches;
}

static void fill_sync(hl_queue_t* q, hl_buffer_t* b, uint32_t seed) {
  timeline_t t;
  timeline_init(&t);
  hl_fence_t* s = step(&t);
  HL_ASSERT_OK(hl_queue_fill_pattern(q, NULL, s, b, seed));
  timeline_wait(&t);
  hl_fence_release(s);
  hl_semaphore_release(t.sem);
}

static hl_kernel_arg_t buf_arg(hl_buffer_t* b, uint64_t offset, uint64_t length,
                               hl_access_t access) {
  hl_kernel_arg_t a = {.kind = HL_KERNEL_ARG_BUFFER,
                       .buffer = b,
                       .offset = offset,
                       .length = length,
                       .access = access};
  return a;
}

static hl_kernel_arg_t scalar_arg(uint64_t value, uint32_t size) {
  hl_kernel_arg_t a = {
      .kind = HL_KERNEL_ARG_SCALAR, .scalar = value, .size = size};
  return a;
}

// Expects |expr| to fail with HL_STATUS_<code> and a message containing
// |needle|.
#define EXPECT_FAILURE(expr, code, needle)                              \
  do {                                                                  \
    hl_status_t st_ = (expr);                                           \
    char buf_[1024];                                                    \
    hl_status_format(st_, buf_, sizeof(buf_));                          \
    if (hl_status_code(st_) != HL_STATUS_##code ||                      \
        !strstr(hl_status_message(st_), (needle))) {                    \
      hl_status_free(st_);                                              \
      fail_msg("%s: expected %s mentioning '%s', got %s", #expr, #code, \
               (needle), buf_);                                         \
    }                                                                   \
    hl_status_free(st_);                                                \
  } while (0)

typedef struct fixture_t {
  hl_device_t* device;
  hl_queue_t* queue;
} fixture_t;

// Skips the current test unless the test backend has two devices.
static void require_two_devices(void) {
  hl_backend_info_t info;
  HL_ASSERT_OK(hl_backend_query(hl_test_backend_kind(), &info));
  if (info.device_count < 2) {
    print_message("skipped: needs two devices, the backend has %u\n",
                  (unsigned)info.device_count);
    skip();
  }
}

static int fixture_setup(void** state) {
  fixture_t* f = calloc(1, sizeof(*f));
  f->device = make_device(0, 0);
  f->queue = make_queue(f->device);
  *state = f;
  return 0;
}

static int fixture_teardown(void** state) {
  fixture_t* f = *state;
  HL_ASSERT_OK(hl_queue_wait_idle(f->queue, DEADLINE()));
  hl_queue_release(f->queue);
  hl_device_release(f->device);
  free(f);
  return 0;
}

//===----------------------------------------------------------------------===//
// Kernels against the oracle (both backends)
//===----------------------------------------------------------------------===//

static void test_fill_pattern_matches_oracle(void** state) {
  fixture_t* f = *state;
  enum { kWords = 3000 };
  hl_buffer_t* b = alloc_sync(f->queue, kWords * 4);
  fill_sync(f->queue, b, 0xC0FFEEu);
  uint32_t* host = malloc(kWords * 4);
  read_sync(f->queue, b, 0, host, kWords * 4);
  for (uint64_t i = 0; i < kWords; ++i) {
    if (host[i] != hl_pattern_value(0xC0FFEEu, i)) {
      fail_msg("word %llu: 0x%08x, oracle 0x%08x", (unsigned long long)i,
               host[i], hl_pattern_value(0xC0FFEEu, i));
    }
  }
  // A dispatch on a sub-range writes exactly that range: words [100, 150)
  // get seed 7's words 0..49, and their neighbours keep seed 0xC0FFEE.
  timeline_t t;
  timeline_init(&t);
  hl_fence_t* s = step(&t);
  hl_kernel_arg_t args[3] = {buf_arg(b, 400, 200, HL_ACCESS_WRITE),
                             scalar_arg(50, 8), scalar_arg(7, 4)};
  HL_ASSERT_OK(
      hl_queue_dispatch(f->queue, NULL, s, "fill_pattern", NULL, 3, args));
  timeline_wait(&t);
  read_sync(f->queue, b, 0, host, kWords * 4);
  for (uint64_t i = 0; i < kWords; ++i) {
    uint32_t expect = i >= 100 && i < 150 ? hl_pattern_value(7, i - 100)
                                          : hl_pattern_value(0xC0FFEEu, i);
    if (host[i] != expect) {
      fail_msg("after the sub-range fill, word %llu: 0x%08x, expected 0x%08x",
               (unsigned long long)i, host[i], expect);
    }
  }
  hl_fence_release(s);
  hl_semaphore_release(t.sem);
  free(host);
  hl_buffer_release(b);
}

static void test_verify_pattern_counts_mismatches(void** state) {
  fixture_t* f = *state;
  hl_buffer_t* b = alloc_sync(f->queue, 4096);
  fill_sync(f->queue, b, 42);
  assert_int_equal(verify_sync(f->queue, b, 42), 0);
  // Another seed differs nearly everywhere.
  assert_true(verify_sync(f->queue, b, 43) > 1000);
  // Flip one word.
  uint32_t word = hl_pattern_value(42, 17) ^ 0x10u;
  write_sync(f->queue, b, 17 * 4, &word, 4);
  assert_int_equal(verify_sync(f->queue, b, 42), 1);
  hl_buffer_release(b);
}

static void test_copy_kernel(void** state) {
  fixture_t* f = *state;
  hl_buffer_t* src = alloc_sync(f->queue, 1024);
  hl_buffer_t* dst = alloc_sync(f->queue, 2048);
  fill_sync(f->queue, src, 9);
  fill_sync(f->queue, dst, 10);
  // 1000 bytes (not a multiple of 4) of src at dst+3.
  timeline_t t;
  timeline_init(&t);
  hl_fence_t* s = step(&t);
  hl_kernel_arg_t args[3] = {buf_arg(dst, 3, 1000, HL_ACCESS_WRITE),
                             buf_arg(src, 0, 1000, HL_ACCESS_READ),
                             scalar_arg(1000, 8)};
  HL_ASSERT_OK(hl_queue_dispatch(f->queue, NULL, s, "copy", NULL, 3, args));
  timeline_wait(&t);
  uint8_t expect[2048], got[2048], source[1024];
  read_sync(f->queue, src, 0, source, sizeof(source));
  for (uint64_t i = 0; i < 512; ++i) {
    uint32_t w = hl_pattern_value(10, i);
    memcpy(expect + 4 * i, &w, 4);
  }
  memcpy(expect + 3, source, 1000);
  read_sync(f->queue, dst, 0, got, sizeof(got));
  assert_memory_equal(got, expect, sizeof(expect));
  hl_fence_release(s);
  hl_semaphore_release(t.sem);
  hl_buffer_release(src);
  hl_buffer_release(dst);
}

static void test_axpy_kernel(void** state) {
  fixture_t* f = *state;
  enum { kN = 1000 };
  float x[kN], y[kN], got[kN];
  for (int i = 0; i < kN; ++i) {
    x[i] = (float)i * 0.37f - 11.0f;
    y[i] = 1.0f / (float)(i + 3);
  }
  hl_buffer_t* bx = alloc_sync(f->queue, sizeof(x));
  hl_buffer_t* by = alloc_sync(f->queue, sizeof(y));
  write_sync(f->queue, bx, 0, x, sizeof(x));
  write_sync(f->queue, by, 0, y, sizeof(y));
  const float a = 1.7f;
  uint32_t a_bits;
  memcpy(&a_bits, &a, 4);
  timeline_t t;
  timeline_init(&t);
  hl_fence_t* s = step(&t);
  hl_kernel_arg_t args[4] = {
      scalar_arg(a_bits, 4), buf_arg(bx, 0, sizeof(x), HL_ACCESS_READ),
      buf_arg(by, 0, sizeof(y), HL_ACCESS_READ_WRITE), scalar_arg(kN, 8)};
  hl_dispatch_config_t config = {{2, 1, 1}, {128, 1, 1}, 0};
  HL_ASSERT_OK(hl_queue_dispatch(f->queue, NULL, s, "axpy", &config, 4, args));
  timeline_wait(&t);
  read_sync(f->queue, by, 0, got, sizeof(got));
  for (int i = 0; i < kN; ++i) {
    volatile float product = a * x[i];  // Rounded, as the kernel does.
    float expect = product + y[i];
    if (memcmp(&got[i], &expect, 4) != 0) {
      fail_msg("y[%d] = %.9g, expected %.9g", i, (double)got[i],
               (double)expect);
    }
  }
  hl_fence_release(s);
  hl_semaphore_release(t.sem);
  hl_buffer_release(bx);
  hl_buffer_release(by);
}

// The least time |cycles| of spin can take: the host backend counts
// nanoseconds (a nominal 1 GHz clock); a GPU counts its shader clock, which
// varies with the device and its boost (an H200 ran 2,000,000 cycles in
// under 2 ms), so there the bound assumes a 4 GHz clock, above any GPU's.
static hl_time_t spin_min_ns(uint64_t cycles) {
  return hl_test_backend_kind() == HL_BACKEND_HOST ? (hl_time_t)cycles
                                                   : (hl_time_t)(cycles / 4);
}

static void test_spin_kernel(void** state) {
  fixture_t* f = *state;
  hl_buffer_t* counter = alloc_sync(f->queue, 4);
  const uint32_t zero = 0;
  write_sync(f->queue, counter, 0, &zero, 4);
  timeline_t t;
  timeline_init(&t);
  // 2,000,000 cycles (2 ms on the host's nominal 1 GHz clock); the counter
  // gets the grid's block count.
  hl_fence_t* s = step(&t);
  hl_kernel_arg_t args[2] = {scalar_arg(2000000, 8),
                             buf_arg(counter, 0, 4, HL_ACCESS_READ_WRITE)};
  hl_dispatch_config_t config = {{3, 2, 0}, {0, 0, 0}, 0};
  hl_time_t start = hl_time_now();
  HL_ASSERT_OK(hl_queue_dispatch(f->queue, NULL, s, "spin", &config, 2, args));
  timeline_wait(&t);
  assert_true(hl_time_now() - start >= spin_min_ns(2000000));
  uint32_t blocks = 0;
  read_sync(f->queue, counter, 0, &blocks, 4);
  assert_int_equal(blocks, 6);

  // The convenience keeps the queue busy, in order with later work.
  hl_fence_t* s2 = step(&t);
  start = hl_time_now();
  HL_ASSERT_OK(hl_queue_spin(f->queue, NULL, NULL, 3000000));
  HL_ASSERT_OK(hl_queue_barrier(f->queue, NULL, s2));
  timeline_wait(&t);
  assert_true(hl_time_now() - start >= spin_min_ns(3000000));
  hl_fence_release(s);
  hl_fence_release(s2);
  hl_semaphore_release(t.sem);
  hl_buffer_release(counter);
}

static void test_dispatch_validation(void** state) {
  fixture_t* f = *state;
  hl_queue_t* q = f->queue;
  hl_buffer_t* b = alloc_sync(q, 256);
  hl_buffer_t* c = alloc_sync(q, 4);
  hl_kernel_arg_t fill[3] = {buf_arg(b, 0, 256, HL_ACCESS_WRITE),
                             scalar_arg(64, 8), scalar_arg(1, 4)};

  EXPECT_FAILURE(
      hl_queue_dispatch(q, NULL, NULL, "no_such_kernel", NULL, 3, fill),
      NOT_FOUND, "no_such_kernel");
  EXPECT_FAILURE(
      hl_queue_dispatch(q, NULL, NULL, "fill_pattern", NULL, 2, fill),
      INVALID_ARGUMENT, "takes 3 parameters");

  hl_kernel_arg_t bad[4];
  // A scalar of the wrong size names the parameter.
  memcpy(bad, fill, sizeof(fill));
  bad[2].size = 8;
  EXPECT_FAILURE(hl_queue_dispatch(q, NULL, NULL, "fill_pattern", NULL, 3, bad),
                 INVALID_ARGUMENT, "parameter 2 (seed)");
  // A pointer parameter given a scalar.
  memcpy(bad, fill, sizeof(fill));
  bad[0] = scalar_arg(0x1000, 8);
  EXPECT_FAILURE(hl_queue_dispatch(q, NULL, NULL, "fill_pattern", NULL, 3, bad),
                 INVALID_ARGUMENT, "parameter 0 (buf)");
  // A scalar parameter given a buffer.
  memcpy(bad, fill, sizeof(fill));
  bad[1] = buf_arg(b, 0, 8, HL_ACCESS_READ);
  EXPECT_FAILURE(hl_queue_dispatch(q, NULL, NULL, "fill_pattern", NULL, 3, bad),
                 INVALID_ARGUMENT, "parameter 1 (words)");
  // A NULL buffer where the kernel needs memory.
  memcpy(bad, fill, sizeof(fill));
  bad[0].buffer = NULL;
  EXPECT_FAILURE(hl_queue_dispatch(q, NULL, NULL, "fill_pattern", NULL, 3, bad),
                 INVALID_ARGUMENT, "parameter 0 (buf)");
  // Declaring a read where the kernel writes.
  memcpy(bad, fill, sizeof(fill));
  bad[0].access = HL_ACCESS_READ;
  EXPECT_FAILURE(hl_queue_dispatch(q, NULL, NULL, "fill_pattern", NULL, 3, bad),
                 INVALID_ARGUMENT, "does write access");
  // A range outside the buffer.
  memcpy(bad, fill, sizeof(fill));
  bad[0].offset = 8;
  EXPECT_FAILURE(hl_queue_dispatch(q, NULL, NULL, "fill_pattern", NULL, 3, bad),
                 OUT_OF_RANGE, "exceeds the 256-byte buffer");
  // More words than the declared range holds.
  memcpy(bad, fill, sizeof(fill));
  bad[0].length = 128;
  EXPECT_FAILURE(hl_queue_dispatch(q, NULL, NULL, "fill_pattern", NULL, 3, bad),
                 OUT_OF_RANGE, "touches 256 bytes");
  // An element count whose byte size overflows.
  memcpy(bad, fill, sizeof(fill));
  bad[1].scalar = UINT64_MAX / 2;
  EXPECT_FAILURE(hl_queue_dispatch(q, NULL, NULL, "fill_pattern", NULL, 3, bad),
                 OUT_OF_RANGE, "overflows");
  // Misaligned words.
  memcpy(bad, fill, sizeof(fill));
  bad[0].offset = 2;
  bad[0].length = 128;
  bad[1].scalar = 4;
  EXPECT_FAILURE(hl_queue_dispatch(q, NULL, NULL, "fill_pattern", NULL, 3, bad),
                 INVALID_ARGUMENT, "not a multiple of 4");
  // An overlapping copy within one allocation.
  hl_kernel_arg_t copy[3] = {buf_arg(b, 16, 64, HL_ACCESS_WRITE),
                             buf_arg(b, 0, 64, HL_ACCESS_READ),
                             scalar_arg(64, 8)};
  EXPECT_FAILURE(hl_queue_dispatch(q, NULL, NULL, "copy", NULL, 3, copy),
                 INVALID_ARGUMENT, "overlaps parameter 1 (src)");
  // The same allocation without overlap is fine.
  copy[0].offset = 64;
  timeline_t t;
  timeline_init(&t);
  hl_fence_t* s = step(&t);
  HL_ASSERT_OK(hl_queue_dispatch(q, NULL, s, "copy", NULL, 3, copy));
  timeline_wait(&t);
  // verify_pattern's counter is read and written.
  hl_kernel_arg_t verify[4] = {buf_arg(b, 0, 256, HL_ACCESS_READ),
                               scalar_arg(64, 8), scalar_arg(1, 4),
                               buf_arg(c, 0, 4, HL_ACCESS_WRITE)};
  EXPECT_FAILURE(
      hl_queue_dispatch(q, NULL, NULL, "verify_pattern", NULL, 4, verify),
      INVALID_ARGUMENT, "parameter 3 (out_mismatches)");
  // Conveniences check their buffers too.
  hl_buffer_t* odd = NULL;
  HL_ASSERT_OK(hl_buffer_subview(b, 0, 10, &odd));
  EXPECT_FAILURE(hl_queue_fill_pattern(q, NULL, NULL, odd, 1), INVALID_ARGUMENT,
                 "not a multiple of 4");
  EXPECT_FAILURE(hl_queue_verify_pattern(q, NULL, NULL, b, 1, NULL),
                 INVALID_ARGUMENT, "counter is NULL");
  hl_buffer_release(odd);
  // Nothing above was queued except the valid copy.
  hl_queue_stats_t stats;
  hl_queue_stats(q, &stats);
  assert_int_equal(stats.failed, 0);
  hl_fence_release(s);
  hl_semaphore_release(t.sem);
  hl_buffer_release(b);
  hl_buffer_release(c);
}

static void test_dispatch_rejects_other_device_buffer(void** state) {
  fixture_t* f = *state;
  require_two_devices();
  hl_device_t* other = make_device(1, 0);
  hl_queue_t* other_queue = make_queue(other);
  hl_buffer_t* foreign = alloc_sync(other_queue, 64);
  hl_kernel_arg_t args[3] = {buf_arg(foreign, 0, 64, HL_ACCESS_WRITE),
                             scalar_arg(16, 8), scalar_arg(1, 4)};
  EXPECT_FAILURE(
      hl_queue_dispatch(f->queue, NULL, NULL, "fill_pattern", NULL, 3, args),
      INVALID_ARGUMENT, "another device");
  hl_buffer_release(foreign);
  HL_ASSERT_OK(hl_queue_wait_idle(other_queue, DEADLINE()));
  hl_queue_release(other_queue);
  hl_device_release(other);
}

// A dispatch that runs after its buffer's dealloca fails instead of
// touching freed memory; in checked mode the queue fails too.
static void check_use_after_free(int checked) {
  hl_device_t* d = make_device(0, checked);
  if (checked) hl_test_require_checked(d);
  hl_queue_t* q = make_queue(d);
  hl_buffer_t* b = alloc_sync(q, 1024);
  timeline_t t;
  timeline_init(&t);
  hl_fence_t* freed = step(&t);
  HL_ASSERT_OK(hl_queue_dealloca(q, NULL, freed, b));
  hl_fence_t* s = step(&t);
  HL_ASSERT_OK(hl_queue_fill_pattern(q, freed, s, b, 5));
  hl_status_t st = hl_semaphore_wait(t.sem, t.value, DEADLINE());
  char text[1024];
  hl_status_format(st, text, sizeof(text));
  if (hl_status_code(st) != HL_STATUS_FAILED_PRECONDITION ||
      !strstr(hl_status_message(st), "use after free") ||
      !strstr(hl_status_message(st), "fill_pattern")) {
    hl_status_free(st);
    fail_msg("checked=%d: expected a use-after-free failure, got %s", checked,
             text);
  }
  hl_status_free(st);
  hl_memory_stats_t stats;
  HL_ASSERT_OK(hl_device_memory_stats(d, &stats));
  assert_int_equal(stats.use_after_free, 1);
  hl_status_t queue_status = hl_queue_status(q);
  if (checked) {
    assert_int_equal(hl_status_code(queue_status),
                     HL_STATUS_FAILED_PRECONDITION);
  } else {
    assert_null(queue_status);
  }
  hl_status_free(queue_status);
  hl_fence_release(freed);
  hl_fence_release(s);
  hl_semaphore_release(t.sem);
  hl_buffer_release(b);
  hl_status_ignore(hl_queue_wait_idle(q, DEADLINE()));
  hl_queue_release(q);
  hl_device_release(d);
}

static void test_use_after_free_checked(void** state) {
  (void)state;
  check_use_after_free(1);
}

static void test_use_after_free_unchecked(void** state) {
  (void)state;
  check_use_after_free(0);
}

// A buffer the dispatch writes is kept alive by the dispatch even when the
// caller drops it at once; reads and writes land in the timeline resource.
static void test_dispatch_retains_and_records_uses(void** state) {
  fixture_t* f = *state;
  hl_buffer_t* b = alloc_sync(f->queue, 4096);
  hl_buffer_t* c = alloc_sync(f->queue, 4);
  timeline_t gate;
  timeline_init(&gate);
  hl_fence_t* open = step(&gate);
  timeline_t t;
  timeline_init(&t);
  hl_fence_t* filled = step(&t);
  // Parked until |gate| is signalled.
  HL_ASSERT_OK(hl_queue_fill_pattern(f->queue, open, filled, b, 77));
  hl_fence_t* barrier = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &barrier));
  HL_ASSERT_OK(hl_buffer_mutation_barrier(b, barrier));
  // The write is the mutation barrier now: its value on the queue's
  // timeline, not reached while the gate is closed.
  assert_int_equal(hl_fence_count(barrier), 1);
  bool reached = true;
  HL_ASSERT_OK(hl_fence_is_reached(barrier, &reached));
  assert_false(reached);
  HL_ASSERT_OK(hl_semaphore_signal(gate.sem, 1));
  timeline_wait(&t);
  HL_ASSERT_OK(hl_fence_wait(barrier, DEADLINE()));
  // verify reads |b|: the use fence gains it, the mutation barrier does not.
  hl_fence_t* verified = step(&t);
  const uint32_t zero = 0;
  write_sync(f->queue, c, 0, &zero, 4);
  HL_ASSERT_OK(hl_queue_verify_pattern(f->queue, NULL, verified, b, 77, c));
  hl_fence_t* after = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &after));
  HL_ASSERT_OK(hl_buffer_mutation_barrier(b, after));
  hl_semaphore_t* sem_before = NULL;
  hl_semaphore_t* sem_after = NULL;
  uint64_t v_before = 0, v_after = 0;
  hl_fence_entry(barrier, 0, &sem_before, &v_before);
  hl_fence_entry(after, 0, &sem_after, &v_after);
  assert_ptr_equal(sem_before, sem_after);
  assert_int_equal(v_before, v_after);
  hl_fence_t* uses = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &uses));
  HL_ASSERT_OK(hl_buffer_use_fence(b, uses));
  hl_semaphore_t* sem_use = NULL;
  uint64_t v_use = 0;
  hl_fence_entry(uses, 0, &sem_use, &v_use);
  assert_ptr_equal(sem_use, sem_after);
  assert_true(v_use > v_after);
  timeline_wait(&t);
  uint32_t mismatches = 1;
  read_sync(f->queue, c, 0, &mismatches, 4);
  assert_int_equal(mismatches, 0);
  hl_fence_release(barrier);
  hl_fence_release(after);
  hl_fence_release(uses);
  hl_fence_release(open);
  hl_fence_release(filled);
  hl_fence_release(verified);
  hl_semaphore_release(gate.sem);
  hl_semaphore_release(t.sem);
  hl_buffer_release(b);
  hl_buffer_release(c);
}

// Invokes function |name| on |q| with |args| and waits for it.
static hl_invocation_t* invoke_sync(hl_queue_t* q, const char* name,
                                    hl_buffer_t* const* args, size_t count) {
  hl_function_t* fn = NULL;
  HL_ASSERT_OK(hl_function_lookup(name, &fn));
  hl_invocation_t* inv = NULL;
  HL_ASSERT_OK(hl_invocation_create(fn, q, &inv));
  hl_function_release(fn);
  for (size_t i = 0; i < count; ++i) {
    HL_ASSERT_OK(hl_invocation_add_argument(inv, args[i]));
  }
  HL_ASSERT_OK(hl_invocation_invoke(inv));
  HL_ASSERT_OK(hl_fence_wait(hl_invocation_signal_fence(inv), DEADLINE()));
  return inv;
}

static void test_kernel_functions(void** state) {
  fixture_t* f = *state;
  HL_ASSERT_OK(hl_kernels_register_functions());
  HL_ASSERT_OK(hl_kernels_register_functions());  // Idempotent.
  hl_invocation_stats_t before, after;
  HL_ASSERT_OK(hl_device_invocation_stats(f->device, &before));

  hl_buffer_t* a = alloc_sync(f->queue, 4096);
  uint32_t seed = (uint32_t)hl_buffer_root_id(a);
  hl_invocation_t* inv = invoke_sync(f->queue, "hipline.fill_pattern", &a, 1);
  hl_invocation_release(inv);
  assert_int_equal(verify_sync(f->queue, a, seed), 0);

  // clone: a fresh alloca'd copy, imported async since it is unique.
  inv = invoke_sync(f->queue, "hipline.clone", &a, 1);
  assert_int_equal(hl_invocation_result_count(inv), 1);
  hl_buffer_t* clone = NULL;
  HL_ASSERT_OK(hl_invocation_take_result(inv, 0, &clone));
  hl_invocation_release(inv);
  assert_int_equal(hl_buffer_length(clone), 4096);
  assert_true(hl_buffer_root_id(clone) != hl_buffer_root_id(a));
  assert_int_equal(hl_buffer_origin(clone), HL_BUFFER_ORIGIN_ASYNC);
  assert_int_equal(verify_sync(f->queue, clone, seed), 0);
  HL_ASSERT_OK(hl_device_invocation_stats(f->device, &after));
  assert_int_equal(after.async_imports - before.async_imports, 1);
  assert_int_equal(after.sync_imports - before.sync_imports, 0);

  // copy: the source into a larger target's start.
  hl_buffer_t* big = alloc_sync(f->queue, 8192);
  fill_sync(f->queue, big, 3);
  hl_buffer_t* copy_args[2] = {clone, big};
  inv = invoke_sync(f->queue, "hipline.copy", copy_args, 2);
  hl_invocation_release(inv);
  hl_buffer_t* head = NULL;
  hl_buffer_t* tail = NULL;
  HL_ASSERT_OK(hl_buffer_subview(big, 0, 4096, &head));
  HL_ASSERT_OK(hl_buffer_subview(big, 4096, 4096, &tail));
  assert_int_equal(verify_sync(f->queue, head, seed), 0);
  assert_int_equal(verify_sync(f->queue, tail, 3), 1024);  // Other indices.
  // copy into a shorter target fails the invocation with OUT_OF_RANGE.
  hl_buffer_t* short_args[2] = {big, clone};
  hl_function_t* fn = NULL;
  HL_ASSERT_OK(hl_function_lookup("hipline.copy", &fn));
  HL_ASSERT_OK(hl_invocation_create(fn, f->queue, &inv));
  hl_function_release(fn);
  HL_ASSERT_OK(hl_invocation_add_argument(inv, short_args[0]));
  HL_ASSERT_OK(hl_invocation_add_argument(inv, short_args[1]));
  EXPECT_FAILURE(hl_invocation_invoke(inv), OUT_OF_RANGE, "hipline.copy");
  hl_invocation_release(inv);

  // axpy2: y += 2x.
  enum { kN = 256 };
  float x[kN], y[kN], got[kN];
  for (int i = 0; i < kN; ++i) {
    x[i] = (float)i / 8.0f;
    y[i] = 100.0f - (float)i;
  }
  hl_buffer_t* bx = alloc_sync(f->queue, sizeof(x));
  hl_buffer_t* by = alloc_sync(f->queue, sizeof(y));
  write_sync(f->queue, bx, 0, x, sizeof(x));
  write_sync(f->queue, by, 0, y, sizeof(y));
  hl_buffer_t* axpy_args[2] = {bx, by};
  inv = invoke_sync(f->queue, "hipline.axpy2", axpy_args, 2);
  hl_invocation_release(inv);
  read_sync(f->queue, by, 0, got, sizeof(got));
  for (int i = 0; i < kN; ++i) {
    volatile float product = 2.0f * x[i];
    float expect = product + y[i];
    assert_memory_equal(&got[i], &expect, 4);
  }

  hl_buffer_release(head);
  hl_buffer_release(tail);
  hl_buffer_release(big);
  hl_buffer_release(bx);
  hl_buffer_release(by);
  hl_buffer_release(clone);
  hl_buffer_release(a);
  for (const char* const* name =
           (const char* const[]){"hipline.fill_pattern", "hipline.copy",
                                 "hipline.clone", "hipline.axpy2", NULL};
       *name; ++name) {
    HL_ASSERT_OK(hl_function_unregister(*name));
  }
}

// The chain inside clone: a failed wait fence fails the alloca, and the
// copy after it, so the invocation's signal carries the original failure.
// Without stream_ordered_host_work (hip) the copy is issued behind the
// failed alloca's event before that failure reaches the chain's semaphore,
// and its check at issue finds the memory missing: the cancelled alloca
// leaves its status in the root, so the copy fails with the upstream status
// too (it reported FAILED_PRECONDITION, "allocation has not run", before).
static void test_clone_propagates_wait_failure(void** state) {
  hl_device_t* device = make_device(0, 0);
  fixture_t fixture = {device, make_queue(device)};
  fixture_t* f = &fixture;
  *state = f;
  HL_ASSERT_OK(hl_kernels_register_functions());
  hl_buffer_t* a = alloc_sync(f->queue, 256);
  hl_semaphore_t* upstream = NULL;
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &upstream));
  hl_function_t* fn = NULL;
  HL_ASSERT_OK(hl_function_lookup("hipline.clone", &fn));
  hl_invocation_t* inv = NULL;
  HL_ASSERT_OK(hl_invocation_create(fn, f->queue, &inv));
  hl_function_release(fn);
  HL_ASSERT_OK(hl_invocation_add_argument(inv, a));
  HL_ASSERT_OK(hl_invocation_add_wait(inv, upstream, 1));
  HL_ASSERT_OK(hl_invocation_invoke(inv));
  hl_semaphore_fail(
      upstream, HL_MAKE_STATUS(HL_STATUS_ABORTED, "upstream producer crashed"));
  EXPECT_FAILURE(hl_fence_wait(hl_invocation_signal_fence(inv), DEADLINE()),
                 ABORTED, "upstream producer crashed");
  hl_status_t queue_status = hl_queue_status(f->queue);
  assert_null(queue_status);
  hl_buffer_t* clone = NULL;
  HL_ASSERT_OK(hl_invocation_take_result(inv, 0, &clone));
  hl_invocation_release(inv);
  hl_buffer_release(clone);
  hl_buffer_release(a);
  hl_semaphore_release(upstream);
  HL_ASSERT_OK(hl_function_unregister("hipline.fill_pattern"));
  HL_ASSERT_OK(hl_function_unregister("hipline.copy"));
  HL_ASSERT_OK(hl_function_unregister("hipline.clone"));
  HL_ASSERT_OK(hl_function_unregister("hipline.axpy2"));
  HL_ASSERT_OK(hl_queue_wait_idle(f->queue, DEADLINE()));
  hl_queue_release(f->queue);
  hl_device_release(f->device);
}

// Devices are destroyed by their last release, which may finish on another
// thread; waits until the cache holds |devices| entries and returns its
// statistics.
static hl_executable_cache_stats_t cache_settle(uint32_t devices) {
  hl_executable_cache_stats_t s;
  hl_time_t deadline = hl_deadline_after(5000 * MS);
  do {
    hl_executable_cache_stats(&s);
  } while (s.devices != devices && hl_time_now() < deadline);
  assert_int_equal(s.devices, devices);
  return s;
}

// Two devices of one target each load the module once, however many
// dispatches, and share one group; destroying a device unloads its module.
static void test_module_loaded_once_per_device(void** state) {
  (void)state;
  require_two_devices();
  // Every earlier test released its devices.
  hl_executable_cache_stats_t s0 = cache_settle(0);
  hl_device_t* d[2] = {make_device(0, 0), make_device(1, 0)};
  hl_queue_t* q[2] = {make_queue(d[0]), make_queue(d[1])};
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 2; ++i) {
      hl_buffer_t* b = alloc_sync(q[i], 512);
      fill_sync(q[i], b, (uint32_t)(round * 2 + i));
      assert_int_equal(verify_sync(q[i], b, (uint32_t)(round * 2 + i)), 0);
      hl_buffer_release(b);
    }
  }
  hl_executable_cache_stats_t s1;
  hl_executable_cache_stats(&s1);
  assert_int_equal(s1.module_loads - s0.module_loads, 2);
  assert_int_equal(s1.devices, 2);
  uint32_t g0 = 99, g1 = 98;
  const char* t0 = NULL;
  const char* t1 = NULL;
  HL_ASSERT_OK(hl_executable_device_group(d[0], &g0, &t0));
  HL_ASSERT_OK(hl_executable_device_group(d[1], &g1, &t1));
  assert_int_equal(g0, g1);
  assert_string_equal(t0, t1);
  if (hl_test_backend_kind() == HL_BACKEND_HOST) {
    assert_string_equal(t0, "host");
  }
  // Selection happens once per distinct target, not per device.
  assert_true(s1.selections <= s1.groups);
  for (int i = 0; i < 2; ++i) {
    HL_ASSERT_OK(hl_queue_wait_idle(q[i], DEADLINE()));
    hl_queue_release(q[i]);
    hl_device_release(d[i]);
  }
  hl_executable_cache_stats_t s2 = cache_settle(0);
  assert_int_equal(s2.module_unloads - s0.module_unloads, 2);
}

// Concurrent first dispatches on a fresh device load its module once.
typedef struct race_arg_t {
  hl_queue_t* queue;
  atomic_int* go;
  int failures;
} race_arg_t;

static int race_main(void* arg) {
  race_arg_t* r = arg;
  while (!atomic_load(r->go)) {
  }
  hl_status_t st = hl_queue_spin(r->queue, NULL, NULL, 1000);
  if (st) {
    ++r->failures;
    hl_status_free(st);
  }
  return 0;
}

static void test_concurrent_first_dispatch_loads_once(void** state) {
  (void)state;
  hl_executable_cache_stats_t s0, s1;
  require_two_devices();
  hl_executable_cache_stats(&s0);
  hl_device_t* d = make_device(1, 0);
  enum { kThreads = 4 };
  hl_queue_t* queues[kThreads];
  thrd_t threads[kThreads];
  race_arg_t args[kThreads];
  atomic_int go = 0;
  for (int i = 0; i < kThreads; ++i) {
    queues[i] = make_queue(d);
    args[i] = (race_arg_t){queues[i], &go, 0};
    assert_int_equal(thrd_create(&threads[i], race_main, &args[i]),
                     thrd_success);
  }
  atomic_store(&go, 1);
  for (int i = 0; i < kThreads; ++i) {
    thrd_join(threads[i], NULL);
    assert_int_equal(args[i].failures, 0);
  }
  hl_executable_cache_stats(&s1);
  assert_int_equal(s1.module_loads - s0.module_loads, 1);
  for (int i = 0; i < kThreads; ++i) {
    HL_ASSERT_OK(hl_queue_wait_idle(queues[i], DEADLINE()));
    hl_queue_release(queues[i]);
  }
  hl_device_release(d);
}

static void test_kernel_names(void** state) {
  (void)state;
  assert_int_equal(hl_dispatch_kernel_count(), 5);
  const char* expected[] = {"fill_pattern", "verify_pattern", "copy", "spin",
                            "axpy"};
  for (size_t i = 0; i < 5; ++i) {
    assert_string_equal(hl_dispatch_kernel_name(i), expected[i]);
  }
  assert_null(hl_dispatch_kernel_name(5));
  // The oracle is SplitMix64's finalizer's high half: distinct neighbours.
  assert_int_not_equal(hl_pattern_value(1, 0), hl_pattern_value(1, 1));
  assert_int_not_equal(hl_pattern_value(1, 0), hl_pattern_value(2, 0));
}

//===----------------------------------------------------------------------===//
// main
//===----------------------------------------------------------------------===//

int main(void) {
  // Two host devices for the cache and cross-device tests; set before any
  // device is made.
  setenv("HIPLINE_HOST_DEVICES", "2", 1);
  // Exits 77 (skipped) when the hip backend has no device.
  (void)hl_test_backend_kind();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kernel_names),
      cmocka_unit_test_setup_teardown(test_fill_pattern_matches_oracle,
                                      fixture_setup, fixture_teardown),
      cmocka_unit_test_setup_teardown(test_verify_pattern_counts_mismatches,
                                      fixture_setup, fixture_teardown),
      cmocka_unit_test_setup_teardown(test_copy_kernel, fixture_setup,
                                      fixture_teardown),
      cmocka_unit_test_setup_teardown(test_axpy_kernel, fixture_setup,
                                      fixture_teardown),
      cmocka_unit_test_setup_teardown(test_spin_kernel, fixture_setup,
                                      fixture_teardown),
      cmocka_unit_test_setup_teardown(test_dispatch_validation, fixture_setup,
                                      fixture_teardown),
      cmocka_unit_test_setup_teardown(test_dispatch_rejects_other_device_buffer,
                                      fixture_setup, fixture_teardown),
      cmocka_unit_test(test_use_after_free_checked),
      cmocka_unit_test(test_use_after_free_unchecked),
      cmocka_unit_test_setup_teardown(test_dispatch_retains_and_records_uses,
                                      fixture_setup, fixture_teardown),
      cmocka_unit_test_setup_teardown(test_kernel_functions, fixture_setup,
                                      fixture_teardown),
      cmocka_unit_test(test_clone_propagates_wait_failure),
      cmocka_unit_test(test_module_loaded_once_per_device),
      cmocka_unit_test(test_concurrent_first_dispatch_loads_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
