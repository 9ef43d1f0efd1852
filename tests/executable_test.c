// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// User executables (hipline/executable.h "User executables") and their
// dispatch (hl_queue_dispatch_executable), on the backend
// tests/test_util.h picks: the code object readers against every object
// clang-19 (and hipcc, as a bundle) builds for tests/user_kernels/, bad
// objects, target selection, argument checks named from the metadata, the
// kernels' results against the host, use recording and use after free, an
// invocation whose result is freed in queue order, and (hip test runtime,
// HL_HIP_TEST_RUNTIME_TARGETS) devices of different targets.
#define _GNU_SOURCE  // memmem
#include "hipline/executable.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "hipline/buffer.h"
#include "hipline/dispatch.h"
#include "hipline/fence.h"
#include "hipline/invocation.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "hipline/time.h"
#include "runtime/executable/code_object.h"
#include "tests/test_util.h"
#include "tests/user_kernels/user_kernels_files.h"

#define MS ((hl_duration_t)1000000)
#define DEADLINE() hl_deadline_after(20000 * MS)

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

// Expects |expr| to fail with HL_STATUS_<code> and a message containing
// |needle| (and |needle2|).
#define EXPECT_FAILURE2(expr, code, needle, needle2)                          \
  do {                                                                        \
    hl_status_t st_ = (expr);                                                 \
    char buf_[2048];                                                          \
    hl_status_format(st_, buf_, sizeof(buf_));                                \
    if (hl_status_code(st_) != HL_STATUS_##code || !strstr(buf_, (needle)) || \
        !strstr(buf_, (needle2))) {                                           \
      hl_status_free(st_);                                                    \
      fail_msg("%s: expected %s mentioning '%s' and '%s', got %s", #expr,     \
               #code, (needle), (needle2), buf_);                             \
    }                                                                         \
    hl_status_free(st_);                                                      \
  } while (0)
#define EXPECT_FAILURE(expr, code, needle) \
  EXPECT_FAILURE2(expr, code, needle, needle)

// The name of argument |i| of kernel |k| as the object the device runs
// states it: the host twin names its arguments; clang's HIP metadata does
// not (without -g), so hipline names them by value kind.
static const char* arg_name(bool host, const char* host_name,
                            const char* kind) {
  static char text[64];
  snprintf(text, sizeof(text), "(%s)", host ? host_name : kind);
  return text;
}

static void* read_file(const char* path, size_t* out_size) {
  FILE* f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  void* data = malloc((size_t)size);
  assert_int_equal(fread(data, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  *out_size = (size_t)size;
  return data;
}

typedef struct timeline_t {
  hl_semaphore_t* sem;
  uint64_t value;
} timeline_t;

static void timeline_init(timeline_t* t) {
  t->value = 0;
  HL_ASSERT_OK(hl_semaphore_create(0, hl_allocator_system(), &t->sem));
}

static hl_fence_t* step(timeline_t* t) {
  hl_fence_t* f = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &f));
  HL_ASSERT_OK(hl_fence_insert(f, t->sem, ++t->value));
  return f;
}

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

static void copy_sync(hl_queue_t* q, hl_buffer_t* b, void* host, uint64_t n,
                      bool to_device) {
  timeline_t t;
  timeline_init(&t);
  hl_fence_t* s = step(&t);
  if (to_device) {
    HL_ASSERT_OK(hl_queue_write(q, NULL, s, host, b, 0, n));
  } else {
    HL_ASSERT_OK(hl_queue_read(q, NULL, s, b, 0, host, n));
  }
  timeline_wait(&t);
  hl_fence_release(s);
  hl_semaphore_release(t.sem);
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

// Dispatches vector_add over |n| floats and waits for it.
static hl_status_t vector_add(hl_queue_t* q, hl_executable_t* e,
                              const hl_fence_t* wait, hl_buffer_t* a,
                              hl_buffer_t* b, hl_buffer_t* c, uint32_t n,
                              timeline_t* t) {
  hl_kernel_arg_t args[4] = {buf_arg(a, HL_ACCESS_READ),
                             buf_arg(b, HL_ACCESS_READ),
                             buf_arg(c, HL_ACCESS_WRITE), scalar_arg(n, 4)};
  hl_dispatch_config_t config = {{(n + 63) / 64, 1, 1}, {64, 1, 1}, 0};
  hl_fence_t* s = step(t);
  hl_status_t st = hl_queue_dispatch_executable(q, wait, s, e, "vector_add",
                                                &config, 4, args);
  hl_fence_release(s);
  return st;
}

//===----------------------------------------------------------------------===//
// Code object readers
//===----------------------------------------------------------------------===//

static const char* const kKernels[] = {"vector_add", "row_softmax", "add_u64",
                                       "weighted_sum4"};

// Checks |sig|'s explicit arguments against the host twin's description.
static void check_against_twin(void* twin, const hl_kernel_signature_t* sig,
                               const char* file) {
  char symbol[160];
  snprintf(symbol, sizeof(symbol), "hipline_kernel_%s", sig->name);
  const hl_host_kernel_info_t* info = dlsym(twin, symbol);
  assert_non_null(info);
  uint32_t explicit_count = 0;
  while (explicit_count < info->arg_count &&
         info->args[explicit_count].kind < HL_KERNEL_VALUE_HIDDEN_FIRST) {
    ++explicit_count;
  }
  if (sig->explicit_count != explicit_count) {
    fail_msg("%s: %s has %u explicit arguments; the twin %u", file, sig->name,
             sig->explicit_count, explicit_count);
  }
  for (uint32_t i = 0; i < explicit_count; ++i) {
    if (sig->args[i].offset != info->args[i].offset ||
        sig->args[i].size != info->args[i].size ||
        sig->args[i].kind != info->args[i].kind) {
      fail_msg("%s: %s argument %u is %u@%u kind %d; the twin's %u@%u kind %d",
               file, sig->name, i, sig->args[i].size, sig->args[i].offset,
               (int)sig->args[i].kind, info->args[i].size, info->args[i].offset,
               (int)info->args[i].kind);
    }
  }
  // Hidden arguments follow the explicit ones inside the segment.
  for (uint32_t i = sig->explicit_count; i < sig->arg_count; ++i) {
    assert_true(sig->args[i].kind >= HL_KERNEL_VALUE_HIDDEN_FIRST);
    assert_true(sig->args[i].offset >= sig->args[explicit_count - 1].offset +
                                           sig->args[explicit_count - 1].size);
  }
}

// Reads |elf|'s metadata and checks every user kernel; returns the number
// of hidden arguments seen.
static uint32_t check_elf(void* twin, const void* elf, size_t size,
                          const char* target, const char* file) {
  hl_code_object_metadata_t md;
  HL_ASSERT_OK(hl_code_object_read_metadata(elf, size, &md));
  if (target && !hl_target_id_equal(md.target, target)) {
    fail_msg("%s: amdhsa.target is '%s', expected '%s'", file, md.target,
             target);
  }
  uint32_t hidden = 0;
  for (size_t k = 0; k < sizeof(kKernels) / sizeof(kKernels[0]); ++k) {
    const hl_kernel_signature_t* sig = NULL;
    for (uint32_t i = 0; i < md.kernel_count; ++i) {
      if (strcmp(md.kernels[i].name, kKernels[k]) == 0) sig = &md.kernels[i];
    }
    if (!sig) fail_msg("%s: no kernel %s in the metadata", file, kKernels[k]);
    check_against_twin(twin, sig, file);
    hidden += sig->arg_count - sig->explicit_count;
  }
  hl_code_object_metadata_deinitialize(&md);
  return hidden;
}

typedef struct bundle_seen_t {
  void* twin;
  int host_entries;
  int gpu_entries;
} bundle_seen_t;

static hl_status_t visit_entry(void* user, const hl_bundle_entry_t* e) {
  bundle_seen_t* seen = user;
  char target[HL_TARGET_ID_MAX];
  if (!hl_code_object_bundle_target(e->id, target, sizeof(target))) {
    seen->host_entries++;
    return NULL;
  }
  seen->gpu_entries++;
  assert_true(hl_target_id_equal(target, "gfx90a"));
  check_elf(seen->twin, e->data, e->size, "gfx90a", e->id);
  return NULL;
}

// The metadata of every object clang builds (code object v4 per target, v5
// once) and of hipcc's bundle agrees with the host twin's signatures.
static void test_metadata_of_every_object(void** state) {
  (void)state;
  void* twin = dlopen(HL_USER_KERNELS_HOST, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(twin);
  char targets[16][64];
  size_t n = gpu_targets(targets, 16);
  if (n == 0) print_message("no GPU objects were built (no clang)\n");
  for (size_t i = 0; i < n; ++i) {
    char path[512];
    object_path(targets[i], path, sizeof(path));
    size_t size = 0;
    void* data = read_file(path, &size);
    assert_true(hl_code_object_is_amdgpu_elf(data, size));
    check_elf(twin, data, size, targets[i], path);
    free(data);
  }
  if (HL_USER_KERNELS_V5[0]) {
    size_t size = 0;
    void* data = read_file(HL_USER_KERNELS_V5, &size);
    // Code object v5 reads the launch shape from hidden arguments.
    assert_true(check_elf(twin, data, size, NULL, HL_USER_KERNELS_V5) > 0);
    free(data);
  }
  if (HL_USER_KERNELS_BUNDLE[0]) {
    size_t size = 0;
    void* data = read_file(HL_USER_KERNELS_BUNDLE, &size);
    bundle_seen_t seen = {.twin = twin};
    HL_ASSERT_OK(hl_code_object_bundle_walk(data, size, visit_entry, &seen));
    assert_int_equal(seen.gpu_entries, 1);
    assert_int_equal(seen.host_entries, 1);
    free(data);
  } else {
    print_message("no offload bundle was built (no hipcc)\n");
  }
  dlclose(twin);
}

static hl_status_t create_one(const char* target, const void* data, size_t size,
                              const char* path) {
  hl_code_object_t o = {
      .target = target, .data = data, .size = size, .path = path};
  hl_executable_t* e = NULL;
  hl_status_t st = hl_executable_create(1, &o, &e);
  hl_executable_release(e);
  return st;
}

static void test_bad_objects(void** state) {
  (void)state;
  static const char kGarbage[] = "definitely not a code object";
  EXPECT_FAILURE(create_one("gfx90a", kGarbage, sizeof(kGarbage), NULL),
                 INVALID_ARGUMENT, "neither an AMDGPU ELF");
  EXPECT_FAILURE(create_one("gfx90a", NULL, 0, "/nonexistent/x.co"),
                 UNAVAILABLE, "/nonexistent/x.co");
  EXPECT_FAILURE(create_one("host", NULL, 0, "/nonexistent/x.so"), UNAVAILABLE,
                 "dlopen");
  EXPECT_FAILURE(create_one("host", NULL, 0, NULL), INVALID_ARGUMENT, "path");
  EXPECT_FAILURE(create_one("gfx90a:xnack", kGarbage, 4, NULL),
                 INVALID_ARGUMENT, "gfx90a:xnack");
  // A bundle whose entry points past its end.
  unsigned char bundle[128] = "__CLANG_OFFLOAD_BUNDLE__";
  uint64_t fields[4] = {1, 4096, 64, 6};
  memcpy(bundle + 24, fields, sizeof(fields));
  memcpy(bundle + 56, "hipv4-", 6);
  EXPECT_FAILURE(create_one("gfx90a", bundle, sizeof(bundle), NULL),
                 INVALID_ARGUMENT, "past the");
  char targets[16][64];
  if (gpu_targets(targets, 16) == 0) return;
  char path[512];
  object_path(targets[0], path, sizeof(path));
  size_t size = 0;
  unsigned char* elf = read_file(path, &size);
  // Truncated: the section headers are gone.
  EXPECT_FAILURE(create_one(targets[0], elf, size / 2, NULL), INVALID_ARGUMENT,
                 "section headers");
  // Tagged for a target it does not run on.
  EXPECT_FAILURE(create_one("gfx803", elf, size, NULL), INVALID_ARGUMENT,
                 "does not run on target 'gfx803'");
  // The metadata note is not msgpack.
  unsigned char* key = memmem(elf, size, "amdhsa.", 7);
  assert_non_null(key);
  unsigned char* bad = malloc(size);
  memcpy(bad, elf, size);
  size_t at = (size_t)(key - elf);
  // The note's map starts at its first key's header ("amdhsa.kernels"
  // behind a map header and a str header).
  bad[at - 2] = 0xc1;  // Never used by msgpack.
  EXPECT_FAILURE(create_one(targets[0], bad, size, NULL), INVALID_ARGUMENT,
                 "msgpack");
  free(bad);
  free(elf);
  if (HL_USER_KERNELS_BUNDLE[0]) {
    EXPECT_FAILURE(create_one("gfx1100", NULL, 0, HL_USER_KERNELS_BUNDLE),
                   NOT_FOUND, "entries: 'gfx90a'");
  }
}

// Metadata whose containers claim more elements than there are bytes left
// is refused before msgpack-c allocates for the claim (it failed with an
// ASan out-of-memory abort before: msgpack-c sizes a container by its
// header).
static void test_metadata_claims_bounded(void** state) {
  (void)state;
  static const unsigned char kHuge[][8] = {
      {0xdd, 0x10, 0x00, 0x00, 0x00},        // array32 of 2^28.
      {0xdf, 0x7f, 0xff, 0xff, 0xff},        // map32 of 2^31-1 pairs.
      {0x91, 0x91, 0xdc, 0xff, 0xff, 0x00},  // [[array16 of 65535]].
      {0x93, 0x90, 0x90},                    // Three claimed, two present.
  };
  static const size_t kSizes[] = {5, 5, 6, 3};
  for (size_t i = 0; i < 4; ++i) {
    hl_code_object_metadata_t md;
    EXPECT_FAILURE(hl_code_object_metadata_parse(kHuge[i], kSizes[i], &md),
                   INVALID_ARGUMENT, "AMDGPU metadata");
  }
}

// A bundle contributes the entry for its tag, or every entry untagged; an
// untagged ELF takes the target its metadata names.
static void test_objects_and_targets(void** state) {
  (void)state;
  hl_executable_t* e = NULL;
  if (HL_USER_KERNELS_BUNDLE[0]) {
    hl_code_object_t o = {.path = HL_USER_KERNELS_BUNDLE};
    HL_ASSERT_OK(hl_executable_create(1, &o, &e));
    assert_int_equal(hl_executable_object_count(e), 1);
    assert_string_equal(hl_executable_object_target(e, 0), "gfx90a");
    size_t count = 0;
    HL_ASSERT_OK(hl_executable_kernel_arg_count(e, 0, "row_softmax", &count));
    assert_int_equal(count, 4);
    EXPECT_FAILURE(hl_executable_kernel_arg_count(e, 0, "nope", &count),
                   NOT_FOUND, "kernels: ");
    hl_executable_release(e);
  }
  char targets[16][64];
  size_t n = gpu_targets(targets, 16);
  for (size_t i = 0; i < n; ++i) {
    char path[512];
    object_path(targets[i], path, sizeof(path));
    hl_code_object_t o = {.path = path};
    HL_ASSERT_OK(hl_executable_create(1, &o, &e));
    assert_true(
        hl_target_id_equal(hl_executable_object_target(e, 0), targets[i]));
    hl_executable_release(e);
  }
  e = make_executable();
  assert_int_equal(hl_executable_object_count(e), n + 1);
  size_t count = 0;
  HL_ASSERT_OK(hl_executable_kernel_arg_count(e, n, "add_u64", &count));
  assert_int_equal(count, 3);
  EXPECT_FAILURE(hl_executable_kernel_arg_count(e, n, "nope", &count),
                 NOT_FOUND, "hipline_kernel_nope");
  hl_executable_release(e);
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

typedef struct fixture_t {
  hl_device_t* device;
  hl_queue_t* queue;
  hl_executable_t* executable;
} fixture_t;

static int fixture_setup(void** state) {
  fixture_t* f = calloc(1, sizeof(*f));
  f->device = make_device(0, 0);
  HL_ASSERT_OK(hl_queue_create(f->device, &f->queue));
  f->executable = make_executable();
  *state = f;
  return 0;
}

static int fixture_teardown(void** state) {
  fixture_t* f = *state;
  HL_ASSERT_OK(hl_queue_wait_idle(f->queue, DEADLINE()));
  hl_queue_release(f->queue);
  hl_executable_release(f->executable);
  hl_device_release(f->device);
  free(f);
  return 0;
}

static void check_vector_add(hl_queue_t* q, hl_executable_t* e) {
  enum { kN = 1000 };
  float a[kN], b[kN], c[kN];
  for (int i = 0; i < kN; ++i) {
    a[i] = (float)i * 0.5f;
    b[i] = 3.0f - (float)i;
    c[i] = -1.0f;
  }
  hl_buffer_t* ba = alloc_sync(q, sizeof(a));
  hl_buffer_t* bb = alloc_sync(q, sizeof(b));
  hl_buffer_t* bc = alloc_sync(q, sizeof(c));
  copy_sync(q, ba, a, sizeof(a), true);
  copy_sync(q, bb, b, sizeof(b), true);
  copy_sync(q, bc, c, sizeof(c), true);
  timeline_t t;
  timeline_init(&t);
  HL_ASSERT_OK(vector_add(q, e, NULL, ba, bb, bc, kN, &t));
  timeline_wait(&t);
  copy_sync(q, bc, c, sizeof(c), false);
  for (int i = 0; i < kN; ++i) {
    float expect = a[i] + b[i];
    if (c[i] != expect) fail_msg("c[%d] = %g, expected %g", i, c[i], expect);
  }
  hl_semaphore_release(t.sem);
  hl_buffer_release(ba);
  hl_buffer_release(bb);
  hl_buffer_release(bc);
}

static void test_vector_add(void** state) {
  fixture_t* f = *state;
  check_vector_add(f->queue, f->executable);
}

static void test_row_softmax_and_u64_scalar(void** state) {
  fixture_t* f = *state;
  enum { kRows = 7, kCols = 13 };
  float in[kRows * kCols], out[kRows * kCols];
  for (int i = 0; i < kRows * kCols; ++i) in[i] = (float)((i * 37) % 11) - 5;
  hl_buffer_t* bin = alloc_sync(f->queue, sizeof(in));
  hl_buffer_t* bout = alloc_sync(f->queue, sizeof(out));
  copy_sync(f->queue, bin, in, sizeof(in), true);
  timeline_t t;
  timeline_init(&t);
  hl_kernel_arg_t args[4] = {buf_arg(bin, HL_ACCESS_READ),
                             buf_arg(bout, HL_ACCESS_WRITE),
                             scalar_arg(kRows, 4), scalar_arg(kCols, 4)};
  hl_dispatch_config_t config = {{1, 1, 1}, {64, 1, 1}, 0};
  hl_fence_t* s = step(&t);
  HL_ASSERT_OK(hl_queue_dispatch_executable(f->queue, NULL, s, f->executable,
                                            "row_softmax", &config, 4, args));
  timeline_wait(&t);
  copy_sync(f->queue, bout, out, sizeof(out), false);
  for (int r = 0; r < kRows; ++r) {
    double m = -1e30, sum = 0;
    for (int c = 0; c < kCols; ++c) m = fmax(m, in[r * kCols + c]);
    for (int c = 0; c < kCols; ++c) sum += exp(in[r * kCols + c] - m);
    for (int c = 0; c < kCols; ++c) {
      double expect = exp(in[r * kCols + c] - m) / sum;
      if (fabs(out[r * kCols + c] - expect) > 1e-5) {
        fail_msg("out[%d][%d] = %g, expected %g", r, c, out[r * kCols + c],
                 expect);
      }
    }
  }
  // An 8-byte scalar whose high half matters.
  uint64_t words[5] = {1, 2, 3, 4, 5};
  hl_buffer_t* bw = alloc_sync(f->queue, sizeof(words));
  copy_sync(f->queue, bw, words, sizeof(words), true);
  const uint64_t add = UINT64_C(0x100000007);
  hl_kernel_arg_t add_args[3] = {buf_arg(bw, HL_ACCESS_READ_WRITE),
                                 scalar_arg(add, 8), scalar_arg(5, 4)};
  hl_fence_t* s2 = step(&t);
  HL_ASSERT_OK(hl_queue_dispatch_executable(f->queue, NULL, s2, f->executable,
                                            "add_u64", &config, 3, add_args));
  timeline_wait(&t);
  copy_sync(f->queue, bw, words, sizeof(words), false);
  for (int i = 0; i < 5; ++i) assert_int_equal(words[i], i + 1 + add);
  hl_fence_release(s);
  hl_fence_release(s2);
  hl_semaphore_release(t.sem);
  hl_buffer_release(bin);
  hl_buffer_release(bout);
  hl_buffer_release(bw);
}

// Wrong count, kind, size and access are INVALID_ARGUMENT naming the
// argument; ranges are checked; nothing is queued.
static void test_argument_checks(void** state) {
  fixture_t* f = *state;
  hl_queue_t* q = f->queue;
  hl_executable_t* e = f->executable;
  hl_buffer_t* b = alloc_sync(q, 64);
  hl_kernel_arg_t good[4] = {buf_arg(b, HL_ACCESS_READ),
                             buf_arg(b, HL_ACCESS_READ),
                             buf_arg(b, HL_ACCESS_WRITE), scalar_arg(16, 4)};
  hl_kernel_arg_t args[4];
#define DISPATCH(count)                                                     \
  hl_queue_dispatch_executable(q, NULL, NULL, e, "vector_add", NULL, count, \
                               args)
  memcpy(args, good, sizeof(args));
  EXPECT_FAILURE(DISPATCH(3), INVALID_ARGUMENT,
                 "kernel 'vector_add' takes 4 arguments; 3 were given");
  hl_device_properties_t props;
  HL_ASSERT_OK(hl_device_properties(f->device, &props));
  bool host = strcmp(props.target, HL_TARGET_ID_HOST) == 0;
  const char* buffer_kind = "unnamed global_buffer";
  const char* value_kind = "unnamed by_value";
  args[1] = scalar_arg(1, 8);
  EXPECT_FAILURE2(DISPATCH(4), INVALID_ARGUMENT, "argument 1 ",
                  "is a global_buffer and needs a BUFFER");
  EXPECT_FAILURE(DISPATCH(4), INVALID_ARGUMENT,
                 arg_name(host, "b", buffer_kind));
  memcpy(args, good, sizeof(args));
  args[3] = buf_arg(b, HL_ACCESS_READ);
  EXPECT_FAILURE2(DISPATCH(4), INVALID_ARGUMENT, "argument 3 ",
                  "is a 4-byte by_value and needs a SCALAR");
  EXPECT_FAILURE(DISPATCH(4), INVALID_ARGUMENT,
                 arg_name(host, "n", value_kind));
  args[3] = scalar_arg(16, 8);
  EXPECT_FAILURE2(DISPATCH(4), INVALID_ARGUMENT, "argument 3 ",
                  "is 4 bytes; the argument has 8");
  memcpy(args, good, sizeof(args));
  args[2].access = (hl_access_t)9;
  EXPECT_FAILURE2(DISPATCH(4), INVALID_ARGUMENT, "argument 2 ", ": access 9");
  memcpy(args, good, sizeof(args));
  args[0].offset = 32;
  EXPECT_FAILURE2(DISPATCH(4), OUT_OF_RANGE, "argument 0 ",
                  ": range [32, +64)");
  EXPECT_FAILURE(
      hl_queue_dispatch_executable(q, NULL, NULL, e, "nope", NULL, 4, good),
      NOT_FOUND, "no kernel named 'nope'");
  EXPECT_FAILURE(hl_queue_dispatch_executable(q, NULL, NULL, NULL, "vector_add",
                                              NULL, 4, good),
                 INVALID_ARGUMENT, "NULL");
#undef DISPATCH
  hl_buffer_release(b);
}

// A dispatch parked behind a closed gate holds its buffers: its write is the
// output's mutation barrier, and a dealloca of the output on another queue
// orders after it (the memory stays valid until the kernel ran).
static void test_uses_recorded_and_dealloca_orders_after(void** state) {
  fixture_t* f = *state;
  enum { kN = 256 };
  float a[kN], c[kN];
  for (int i = 0; i < kN; ++i) a[i] = (float)i;
  hl_buffer_t* ba = alloc_sync(f->queue, sizeof(a));
  hl_buffer_t* bc = alloc_sync(f->queue, sizeof(c));
  copy_sync(f->queue, ba, a, sizeof(a), true);
  timeline_t gate, t;
  timeline_init(&gate);
  timeline_init(&t);
  hl_fence_t* open = step(&gate);
  HL_ASSERT_OK(vector_add(f->queue, f->executable, open, ba, ba, bc, kN, &t));
  hl_fence_t* barrier = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &barrier));
  HL_ASSERT_OK(hl_buffer_mutation_barrier(bc, barrier));
  assert_int_equal(hl_fence_count(barrier), 1);
  bool reached = true;
  HL_ASSERT_OK(hl_fence_is_reached(barrier, &reached));
  assert_false(reached);
  hl_fence_t* uses = NULL;
  HL_ASSERT_OK(hl_fence_create(hl_allocator_system(), &uses));
  HL_ASSERT_OK(hl_buffer_use_fence(ba, uses));
  assert_int_equal(hl_fence_count(uses), 1);
  HL_ASSERT_OK(hl_fence_is_reached(uses, &reached));
  assert_false(reached);
  HL_ASSERT_OK(hl_semaphore_signal(gate.sem, 1));
  timeline_wait(&t);
  HL_ASSERT_OK(hl_fence_wait(barrier, DEADLINE()));
  copy_sync(f->queue, bc, c, sizeof(c), false);
  for (int i = 0; i < kN; ++i) assert_true(c[i] == 2.0f * a[i]);
  hl_fence_release(barrier);
  hl_fence_release(uses);
  hl_fence_release(open);
  hl_semaphore_release(gate.sem);
  hl_semaphore_release(t.sem);
  hl_buffer_release(ba);
  hl_buffer_release(bc);
}

// A dispatch ordered after a dealloca of its buffer fails with a use after
// free naming the kernel and argument, and (checked) fails the queue.
static void check_use_after_free(int checked) {
  hl_device_t* d = make_device(0, checked);
  hl_queue_t* q = NULL;
  HL_ASSERT_OK(hl_queue_create(d, &q));
  hl_executable_t* e = make_executable();
  hl_buffer_t* b = alloc_sync(q, 256);
  timeline_t t;
  timeline_init(&t);
  hl_fence_t* freed = step(&t);
  HL_ASSERT_OK(hl_queue_dealloca(q, NULL, freed, b));
  HL_ASSERT_OK(vector_add(q, e, freed, b, b, b, 64, &t));
  hl_status_t st = hl_semaphore_wait(t.sem, t.value, DEADLINE());
  char text[1024];
  hl_status_format(st, text, sizeof(text));
  if (hl_status_code(st) != HL_STATUS_FAILED_PRECONDITION ||
      !strstr(text, "use after free") || !strstr(text, "vector_add")) {
    hl_status_free(st);
    fail_msg("checked=%d: expected a use after free, got %s", checked, text);
  }
  hl_status_free(st);
  hl_status_t queue_status = hl_queue_status(q);
  if (hl_device_checked(d)) {  // Checked mode is the host backend's.
    assert_int_equal(hl_status_code(queue_status),
                     HL_STATUS_FAILED_PRECONDITION);
  } else {
    assert_null(queue_status);
  }
  hl_status_free(queue_status);
  hl_fence_release(freed);
  hl_semaphore_release(t.sem);
  hl_buffer_release(b);
  hl_status_ignore(hl_queue_wait_idle(q, DEADLINE()));
  hl_queue_release(q);
  hl_executable_release(e);
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

// An invocation whose function allocas its result and fills it with a user
// kernel; the result is freed in queue order after being read.
static hl_status_t fn_vector_add(void* user, hl_queue_t* queue,
                                 hl_buffer_t* const* arguments,
                                 size_t argument_count,
                                 const hl_fence_t* wait_fence,
                                 const hl_fence_t* signal_fence,
                                 hl_buffer_t** out_results,
                                 size_t result_count) {
  (void)argument_count, (void)result_count;
  hl_executable_t* e = user;
  uint64_t bytes = hl_buffer_length(arguments[0]);
  hl_semaphore_t* sem = NULL;
  hl_fence_t* allocated = NULL;
  hl_buffer_t* result = NULL;
  hl_status_t st = hl_semaphore_create(0, hl_allocator_system(), &sem);
  if (!st) st = hl_fence_create(hl_allocator_system(), &allocated);
  if (!st) st = hl_fence_insert(allocated, sem, 1);
  if (!st)
    st = hl_queue_alloca(queue, wait_fence, allocated, bytes, 0, &result);
  if (!st) {
    hl_kernel_arg_t args[4] = {buf_arg(arguments[0], HL_ACCESS_READ),
                               buf_arg(arguments[1], HL_ACCESS_READ),
                               buf_arg(result, HL_ACCESS_WRITE),
                               scalar_arg(bytes / 4, 4)};
    st = hl_queue_dispatch_executable(queue, allocated, signal_fence, e,
                                      "vector_add", NULL, 4, args);
  }
  hl_fence_release(allocated);
  hl_semaphore_release(sem);
  if (st) {
    hl_buffer_release(result);
    return st;
  }
  out_results[0] = result;
  return NULL;
}

static void test_invocation_result_freed_in_queue_order(void** state) {
  fixture_t* f = *state;
  static const hl_access_t kAccess[2] = {HL_ACCESS_READ, HL_ACCESS_READ};
  hl_function_signature_t sig = {2, 1, kAccess};
  hl_function_t* fn = NULL;
  HL_ASSERT_OK(hl_function_create("test.user_vector_add", &sig, fn_vector_add,
                                  f->executable, hl_allocator_system(), &fn));
  enum { kN = 300 };
  float a[kN], b[kN], c[kN];
  for (int i = 0; i < kN; ++i) {
    a[i] = (float)(i % 17);
    b[i] = 0.25f * (float)i;
  }
  hl_buffer_t* ba = alloc_sync(f->queue, sizeof(a));
  hl_buffer_t* bb = alloc_sync(f->queue, sizeof(b));
  copy_sync(f->queue, ba, a, sizeof(a), true);
  copy_sync(f->queue, bb, b, sizeof(b), true);
  hl_invocation_t* inv = NULL;
  HL_ASSERT_OK(hl_invocation_create(fn, f->queue, &inv));
  HL_ASSERT_OK(hl_invocation_add_argument(inv, ba));
  HL_ASSERT_OK(hl_invocation_add_argument(inv, bb));
  HL_ASSERT_OK(hl_invocation_invoke(inv));
  HL_ASSERT_OK(hl_fence_wait(hl_invocation_signal_fence(inv), DEADLINE()));
  hl_buffer_t* result = NULL;
  HL_ASSERT_OK(hl_invocation_take_result(inv, 0, &result));
  hl_invocation_release(inv);
  copy_sync(f->queue, result, c, sizeof(c), false);
  for (int i = 0; i < kN; ++i) assert_true(c[i] == a[i] + b[i]);
  timeline_t t;
  timeline_init(&t);
  hl_fence_t* freed = step(&t);
  HL_ASSERT_OK(hl_queue_dealloca(f->queue, NULL, freed, result));
  timeline_wait(&t);
  hl_fence_release(freed);
  hl_semaphore_release(t.sem);
  hl_buffer_release(result);
  hl_buffer_release(ba);
  hl_buffer_release(bb);
  hl_function_release(fn);
}

// HL_HIP_TEST_RUNTIME_TARGETS=gfx90a:...,gfx1100,gfx803: each device runs
// its own object; the gfx803 one has none and says so.
static void test_devices_of_different_targets(void** state) {
  (void)state;
  const char* targets_env = getenv("HL_HIP_TEST_RUNTIME_TARGETS");
  if (!targets_env || hl_test_backend_kind() != HL_BACKEND_HIP) {
    print_message("skipped: needs HL_HIP_TEST_RUNTIME_TARGETS\n");
    skip();
  }
  char targets[16][64];
  size_t n = gpu_targets(targets, 16);
  bool have_1100 = false;
  for (size_t i = 0; i < n; ++i) have_1100 |= !strcmp(targets[i], "gfx1100");
  if (!have_1100) {
    print_message("skipped: no gfx1100 object was built\n");
    skip();
  }
  hl_executable_t* e = make_executable();
  const char* expect[2] = {"gfx90a", "gfx1100"};
  for (int i = 0; i < 2; ++i) {
    hl_device_t* d = make_device(i, 0);
    size_t index = 99;
    HL_ASSERT_OK(hl_executable_select_for_device(e, d, &index));
    assert_string_equal(hl_executable_object_target(e, index), expect[i]);
    hl_queue_t* q = NULL;
    HL_ASSERT_OK(hl_queue_create(d, &q));
    check_vector_add(q, e);
    HL_ASSERT_OK(hl_queue_wait_idle(q, DEADLINE()));
    hl_queue_release(q);
    hl_device_release(d);
  }
  hl_device_t* d = make_device(2, 0);
  size_t index = 0;
  EXPECT_FAILURE2(hl_executable_select_for_device(e, d, &index), NOT_FOUND,
                  "gfx803", "gfx1100");
  hl_queue_t* q = NULL;
  HL_ASSERT_OK(hl_queue_create(d, &q));
  hl_buffer_t* b = alloc_sync(q, 64);
  timeline_t t;
  timeline_init(&t);
  EXPECT_FAILURE2(vector_add(q, e, NULL, b, b, b, 4, &t), NOT_FOUND, "device 2",
                  "'gfx803'");
  hl_semaphore_release(t.sem);
  hl_buffer_release(b);
  HL_ASSERT_OK(hl_queue_wait_idle(q, DEADLINE()));
  hl_queue_release(q);
  hl_device_release(d);
  hl_executable_release(e);
}

// Threads whose first dispatches of one fresh executable race on one
// device: one load, every result right (TSan checks the executable's lock).
typedef struct racer_t {
  hl_device_t* device;
  hl_executable_t* executable;
} racer_t;

static int race_dispatch(void* arg) {
  racer_t* r = arg;
  hl_queue_t* q = NULL;
  HL_ASSERT_OK(hl_queue_create(r->device, &q));
  check_vector_add(q, r->executable);
  HL_ASSERT_OK(hl_queue_wait_idle(q, DEADLINE()));
  hl_queue_release(q);
  return 0;
}

static void test_concurrent_first_dispatches(void** state) {
  fixture_t* f = *state;
  enum { kThreads = 4 };
  hl_executable_t* e = make_executable();
  racer_t racer = {f->device, e};
  thrd_t threads[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    assert_int_equal(thrd_create(&threads[i], race_dispatch, &racer),
                     thrd_success);
  }
  for (int i = 0; i < kThreads; ++i) thrd_join(threads[i], NULL);
  hl_executable_release(e);
}

int main(void) {
  // Exits 77 (skipped) when the hip backend has no device.
  (void)hl_test_backend_kind();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_metadata_of_every_object),
      cmocka_unit_test(test_bad_objects),
      cmocka_unit_test(test_objects_and_targets),
      cmocka_unit_test(test_metadata_claims_bounded),
      cmocka_unit_test_setup_teardown(test_vector_add, fixture_setup,
                                      fixture_teardown),
      cmocka_unit_test_setup_teardown(test_row_softmax_and_u64_scalar,
                                      fixture_setup, fixture_teardown),
      cmocka_unit_test_setup_teardown(test_argument_checks, fixture_setup,
                                      fixture_teardown),
      cmocka_unit_test_setup_teardown(
          test_uses_recorded_and_dealloca_orders_after, fixture_setup,
          fixture_teardown),
      cmocka_unit_test(test_use_after_free_checked),
      cmocka_unit_test(test_use_after_free_unchecked),
      cmocka_unit_test_setup_teardown(
          test_invocation_result_freed_in_queue_order, fixture_setup,
          fixture_teardown),
      cmocka_unit_test(test_devices_of_different_targets),
      cmocka_unit_test_setup_teardown(test_concurrent_first_dispatches,
                                      fixture_setup, fixture_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
