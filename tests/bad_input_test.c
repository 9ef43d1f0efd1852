// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The bad-input table: every public function of include/hipline/*.h called
// with each bad input that applies (NULL handles and out-parameters, zero and
// maximal sizes, out-of-range indices, wrapped foreign pointers deallocated,
// waits on failed semaphores, backwards signals, invalid environment values in
// a child process), checking the status code. Nothing may crash (the ASan
// build runs it too).
//
//   bad_input_test              cmocka run; fails on any row that mismatches
//   bad_input_test --markdown   prints the table for docs/reliability.md
//
// A released handle cannot be detected in this build (handles are plain
// pointers without generation counts), so no row passes one; that is
// documented in docs/reliability.md.
#include <stdarg.h>

#include "hipline/trace.h"
#include "tests/reliability_util.h"

#if HL_TEST_HAVE_DISPATCH
#include "hipline/command_buffer.h"
#include "hipline/dispatch.h"
#endif

// hl_allocator_calloc(SIZE_MAX) must see malloc return NULL under ASan too.
const char* __asan_default_options(void);
const char* __asan_default_options(void) {
  return "allocator_may_return_null=1";
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

typedef struct row_t {
  const char* header;
  const char* function;
  char input[200];
  char expected[64];
  char got[64];
  bool ok;
} row_t;

#define MAX_ROWS 512
static row_t rows_[MAX_ROWS];
static int row_count_;
static const char* header_ = "";

static void add_row(const char* function, const char* input,
                    const char* expected, const char* got, bool ok) {
  if (row_count_ >= MAX_ROWS) {
    fprintf(stderr, "bad_input_test: MAX_ROWS too small\n");
    exit(2);
  }
  row_t* r = &rows_[row_count_++];
  r->header = header_;
  r->function = function;
  snprintf(r->input, sizeof(r->input), "%s", input);
  snprintf(r->expected, sizeof(r->expected), "%s", expected);
  snprintf(r->got, sizeof(r->got), "%s", got);
  r->ok = ok;
  if (!ok) {
    fprintf(stderr, "MISMATCH %s: %s(%s): expected %s, got %s\n", header_,
            function, input, expected, got);
  }
}

// |expr| returns a status that must have HL_STATUS_<code>; it is freed.
#define EXPECT_STATUS(fn, input, expr, code)                     \
  do {                                                           \
    hl_status_t st_ = (expr);                                    \
    hl_status_code_t c_ = hl_status_code(st_);                   \
    if (c_ != HL_STATUS_##code && getenv("BAD_INPUT_VERBOSE")) { \
      hl_status_fprint(stderr, "  got: ", st_);                  \
    }                                                            \
    hl_status_free(st_);                                         \
    add_row(fn, input, #code, hl_status_code_name(c_),           \
            c_ == HL_STATUS_##code);                             \
  } while (0)

// |cond| must hold after a call that returns no status; |expected| describes
// the outcome ("no-op", "returns NULL").
#define EXPECT_THAT(fn, input, cond, expected) \
  add_row(fn, input, expected, (cond) ? expected : "other", (cond))

// Setup steps must work; they are not rows.
#define SETUP(expr)                                                   \
  do {                                                                \
    hl_status_t st_ = (expr);                                         \
    if (st_) {                                                        \
      hl_status_fprint(stderr, "bad_input_test setup: ", st_);        \
      hl_status_free(st_);                                            \
      fprintf(stderr, "  at %s:%d: %s\n", __FILE__, __LINE__, #expr); \
      exit(2);                                                        \
    }                                                                 \
  } while (0)

#define BIG UINT64_MAX

// Calls that crash today (bugs reported in docs/reliability.md) run in a
// child process: `bad_input_test --probe NAME` exits with the status code the
// call returned, or dies with the signal. Their rows are marked "known bug"
// and do not fail the test unless BAD_INPUT_STRICT=1 (the repro command).
typedef hl_status_t (*probe_fn_t)(void);
typedef struct probe_t {
  const char* name;
  probe_fn_t fn;
} probe_t;

static hl_status_t probe_canonicalize_null_out(void) {
  return hl_target_id_canonicalize("gfx90a", NULL, 16);
}

static hl_status_t probe_code_object_null_out(void) {
  return hl_executable_gpu_code_object(0, NULL, NULL);
}

static const char* const kBuilt[2] = {"gfx90a", "host"};
static const char* const kBadBuilt[2] = {"gfx90a", NULL};

static hl_status_t probe_match_device_null(void) {
  size_t index = 0, group_of[2], object_of[2], groups = 0;
  (void)index, (void)group_of, (void)object_of, (void)groups;
  return hl_executable_match_target(NULL, kBuilt, 2, &index);
}

static hl_status_t probe_match_built_null(void) {
  size_t index = 0, group_of[2], object_of[2], groups = 0;
  (void)index, (void)group_of, (void)object_of, (void)groups;
  return hl_executable_match_target("gfx90a", NULL, 2, &index);
}

static hl_status_t probe_match_built_entry_null(void) {
  size_t index = 0, group_of[2], object_of[2], groups = 0;
  (void)index, (void)group_of, (void)object_of, (void)groups;
  return hl_executable_match_target("gfx90a", kBadBuilt, 2, &index);
}

static hl_status_t probe_match_out_null(void) {
  size_t index = 0, group_of[2], object_of[2], groups = 0;
  (void)index, (void)group_of, (void)object_of, (void)groups;
  return hl_executable_match_target("gfx90a", kBuilt, 2, NULL);
}

static hl_status_t probe_group_targets_null(void) {
  size_t index = 0, group_of[2], object_of[2], groups = 0;
  (void)index, (void)group_of, (void)object_of, (void)groups;
  return hl_executable_group_targets(NULL, 2, group_of, &groups);
}

static hl_status_t probe_group_entry_null(void) {
  size_t index = 0, group_of[2], object_of[2], groups = 0;
  (void)index, (void)group_of, (void)object_of, (void)groups;
  return hl_executable_group_targets(kBadBuilt, 2, group_of, &groups);
}

static hl_status_t probe_group_out_null(void) {
  size_t index = 0, group_of[2], object_of[2], groups = 0;
  (void)index, (void)group_of, (void)object_of, (void)groups;
  return hl_executable_group_targets(kBuilt, 2, NULL, NULL);
}

static hl_status_t probe_select_devices_null(void) {
  size_t index = 0, group_of[2], object_of[2], groups = 0;
  (void)index, (void)group_of, (void)object_of, (void)groups;
  return hl_executable_select(NULL, 2, kBuilt, 2, group_of, object_of, &groups);
}

static hl_status_t probe_select_built_null(void) {
  size_t index = 0, group_of[2], object_of[2], groups = 0;
  (void)index, (void)group_of, (void)object_of, (void)groups;
  return hl_executable_select(kBuilt, 2, NULL, 2, group_of, object_of, &groups);
}

static hl_status_t probe_select_out_null(void) {
  size_t index = 0, group_of[2], object_of[2], groups = 0;
  (void)index, (void)group_of, (void)object_of, (void)groups;
  return hl_executable_select(kBuilt, 2, kBuilt, 2, NULL, NULL, NULL);
}

static const probe_t kProbes[] = {
    {"match_device_null", probe_match_device_null},
    {"match_built_null", probe_match_built_null},
    {"match_built_entry_null", probe_match_built_entry_null},
    {"match_out_null", probe_match_out_null},
    {"group_targets_null", probe_group_targets_null},
    {"group_entry_null", probe_group_entry_null},
    {"group_out_null", probe_group_out_null},
    {"select_devices_null", probe_select_devices_null},
    {"select_built_null", probe_select_built_null},
    {"select_out_null", probe_select_out_null},
    {"canonicalize_null_out", probe_canonicalize_null_out},
    {"code_object_null_out", probe_code_object_null_out},
};

static int run_probe(const char* name) {
  for (size_t i = 0; i < sizeof(kProbes) / sizeof(kProbes[0]); ++i) {
    if (strcmp(kProbes[i].name, name) == 0) {
      hl_status_t st = kProbes[i].fn();
      int code = (int)hl_status_code(st);
      hl_status_free(st);
      return code;
    }
  }
  return 99;
}

static int known_bug_count_;

// Runs probe |name| in a child and records the row; |code| is the contract.
static void expect_probe(const char* fn, const char* input, const char* name,
                         hl_status_code_t code) {
  const char* args[] = {"--probe", name, NULL};
  int rc = rel_run_self(args, NULL);
  char got[40];
  if (rc >= 0 && rc < HL_STATUS_CODE_COUNT_) {
    snprintf(got, sizeof(got), "%s", hl_status_code_name((hl_status_code_t)rc));
  } else if (rc > 128) {
    snprintf(got, sizeof(got), "crash (signal %d)", rc - 128);
  } else {
    snprintf(got, sizeof(got), "exit %d", rc);
  }
  bool ok = rc == (int)code;
  // Every former known bug is fixed: mismatches fail the test unless
  // BAD_INPUT_STRICT=0 asks for a report only.
  const char* strict = getenv("BAD_INPUT_STRICT");
  if (!ok && strict && strcmp(strict, "0") == 0) {
    ++known_bug_count_;
    char marked[64];
    snprintf(marked, sizeof(marked), "KNOWN BUG: %s", got);
    add_row(fn, input, hl_status_code_name(code), marked, true);
    return;
  }
  add_row(fn, input, hl_status_code_name(code), got, ok);
}

//===----------------------------------------------------------------------===//
// Fixtures
//===----------------------------------------------------------------------===//

typedef struct fixture_t {
  hl_device_t* device;
  hl_device_t* other_device;
  hl_queue_t* queue;
  hl_queue_t* other_queue;  // On |other_device|.
  hl_semaphore_t* sem;
  hl_semaphore_t* failed_sem;
  hl_fence_t* fence;
  hl_buffer_t* buffer;  // 256 bytes, live.
} fixture_t;

static hl_semaphore_t* make_sem(uint64_t value) {
  hl_semaphore_t* s = NULL;
  SETUP(hl_semaphore_create(value, hl_allocator_system(), &s));
  return s;
}

static hl_fence_t* make_fence(hl_semaphore_t* s, uint64_t v) {
  hl_fence_t* f = NULL;
  SETUP(hl_fence_create(hl_allocator_system(), &f));
  if (s) SETUP(hl_fence_insert(f, s, v));
  return f;
}

static hl_device_t* make_device(void) {
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = HL_BACKEND_HOST;
  o.checked = 1;
  hl_device_t* d = NULL;
  SETUP(hl_device_create(&o, hl_allocator_system(), &d));
  return d;
}

static hl_buffer_t* make_buffer(hl_queue_t* q, uint64_t size) {
  hl_semaphore_t* s = make_sem(0);
  hl_fence_t* f = make_fence(s, 1);
  hl_buffer_t* b = NULL;
  SETUP(hl_queue_alloca(q, NULL, f, size, 0, &b));
  SETUP(hl_semaphore_wait(s, 1, REL_DEADLINE()));
  hl_fence_release(f);
  hl_semaphore_release(s);
  return b;
}

static void fixture_init(fixture_t* fx) {
  memset(fx, 0, sizeof(*fx));
  fx->device = make_device();
  fx->other_device = make_device();
  SETUP(hl_queue_create(fx->device, &fx->queue));
  SETUP(hl_queue_create(fx->other_device, &fx->other_queue));
  fx->sem = make_sem(5);
  fx->failed_sem = make_sem(0);
  hl_semaphore_fail(fx->failed_sem,
                    HL_MAKE_STATUS(HL_STATUS_ABORTED, "failed on purpose"));
  fx->fence = make_fence(fx->sem, 1);
  fx->buffer = make_buffer(fx->queue, 256);
}

static void fixture_deinit(fixture_t* fx) {
  SETUP(hl_device_wait_idle(fx->device, REL_DEADLINE()));
  hl_buffer_release(fx->buffer);
  hl_fence_release(fx->fence);
  hl_semaphore_release(fx->sem);
  hl_semaphore_release(fx->failed_sem);
  hl_queue_release(fx->queue);
  hl_queue_release(fx->other_queue);
  hl_device_release(fx->device);
  hl_device_release(fx->other_device);
}

//===----------------------------------------------------------------------===//
// status.h, allocator.h, time.h
//===----------------------------------------------------------------------===//

static hl_status_t vmake_ok(const char* format, ...) {
  va_list args;
  va_start(args, format);
  hl_status_t st =
      hl_status_vmake(HL_STATUS_OK, __FILE__, __LINE__, format, args);
  va_end(args);
  return st;
}

static void rows_status(void) {
  header_ = "status.h";
  EXPECT_THAT(
      "hl_status_code_name", "code 999",
      strcmp(hl_status_code_name((hl_status_code_t)999), "UNKNOWN_CODE") == 0,
      "\"UNKNOWN_CODE\"");
  EXPECT_THAT(
      "hl_status_code_name", "code -1",
      strcmp(hl_status_code_name((hl_status_code_t)-1), "UNKNOWN_CODE") == 0,
      "\"UNKNOWN_CODE\"");
  EXPECT_THAT("hl_status_make", "code OK",
              hl_status_make(HL_STATUS_OK, __FILE__, __LINE__, "x") == NULL,
              "returns NULL (OK)");
  EXPECT_THAT("hl_status_vmake", "code OK", vmake_ok("x %d", 1) == NULL,
              "returns NULL (OK)");
  hl_status_t weird =
      hl_status_make((hl_status_code_t)999, NULL, 0, "%s", "odd");
  EXPECT_THAT("hl_status_make", "code 999, file NULL", weird != NULL,
              "a status");
  hl_status_free(weird);
  EXPECT_THAT("hl_status_code", "NULL", hl_status_code(NULL) == HL_STATUS_OK,
              "OK");
  EXPECT_THAT("hl_status_message", "NULL",
              strcmp(hl_status_message(NULL), "") == 0, "\"\"");
  EXPECT_THAT("hl_status_source", "NULL",
              strcmp(hl_status_source(NULL), "") == 0, "\"\"");
  EXPECT_THAT("hl_status_annotate", "NULL status",
              hl_status_annotate(NULL, "ctx %d", 1) == NULL,
              "returns NULL (OK)");
  EXPECT_THAT("hl_status_clone", "NULL", hl_status_clone(NULL) == NULL,
              "returns NULL (OK)");
  EXPECT_THAT("hl_status_join", "NULL, NULL",
              hl_status_join(NULL, NULL) == NULL, "returns NULL (OK)");
  hl_status_free(NULL);
  EXPECT_THAT("hl_status_free", "NULL", true, "no-op");
  hl_status_ignore(NULL);
  EXPECT_THAT("hl_status_ignore", "NULL", true, "no-op");
  EXPECT_THAT("hl_status_format", "NULL buffer, capacity 0",
              hl_status_format(NULL, NULL, 0) == 2, "returns 2 (\"OK\")");
  hl_status_t st = HL_MAKE_STATUS(HL_STATUS_INTERNAL, "%0200d", 1);
  char tiny[4] = {'x', 'x', 'x', 'x'};
  size_t need = hl_status_format(st, tiny, sizeof(tiny));
  EXPECT_THAT("hl_status_format", "capacity 4 for a 200+ char status",
              need > 200 && tiny[3] == '\0', "truncated, terminated");
  hl_status_free(st);
  hl_status_fprint(NULL, NULL, NULL);
  EXPECT_THAT("hl_status_fprint", "NULL file, NULL prefix, NULL status", true,
              "prints OK to stderr");

  header_ = "allocator.h";
  hl_allocator_t a = hl_allocator_system();
  void* p = (void*)1;
  EXPECT_STATUS("hl_allocator_calloc", "size 0", hl_allocator_calloc(a, 0, &p),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_allocator_calloc", "size SIZE_MAX",
                hl_allocator_calloc(a, SIZE_MAX, &p), RESOURCE_EXHAUSTED);
  EXPECT_STATUS("hl_allocator_calloc", "out_ptr NULL",
                hl_allocator_calloc(a, 8, NULL), INVALID_ARGUMENT);
  hl_allocator_t zero = {NULL, NULL, NULL};
  EXPECT_STATUS("hl_allocator_calloc", "zero allocator (means the system one)",
                hl_allocator_calloc(zero, 8, &p), OK);
  hl_allocator_free(zero, p);
  hl_allocator_free(a, NULL);
  EXPECT_THAT("hl_allocator_free", "NULL ptr", true, "no-op");
  EXPECT_THAT("hl_allocator_system", "(none)",
              hl_allocator_system().alloc != NULL, "malloc/free");

  header_ = "time.h";
  EXPECT_THAT("hl_deadline_after", "INT64_MAX",
              hl_deadline_after(INT64_MAX) == HL_INFINITE_FUTURE,
              "HL_INFINITE_FUTURE");
  EXPECT_THAT("hl_deadline_after", "INT64_MIN",
              hl_deadline_after(INT64_MIN) <= hl_time_now(), "in the past");
  EXPECT_THAT("hl_time_now", "(none)", hl_time_now() > 0, "positive");
}

//===----------------------------------------------------------------------===//
// device.h
//===----------------------------------------------------------------------===//

static void rows_device(fixture_t* fx) {
  header_ = "device.h";
  hl_backend_info_t info;
  hl_backend_kind_t kind;
  EXPECT_THAT("hl_backend_kind_name", "kind 99",
              hl_backend_kind_name((hl_backend_kind_t)99) != NULL, "a string");
  EXPECT_STATUS("hl_backend_query", "kind 99",
                hl_backend_query((hl_backend_kind_t)99, &info),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_backend_query", "out_info NULL",
                hl_backend_query(HL_BACKEND_HOST, NULL), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_backend_resolve", "kind 99",
                hl_backend_resolve((hl_backend_kind_t)99, &kind),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_backend_resolve", "out_kind NULL",
                hl_backend_resolve(HL_BACKEND_HOST, NULL), INVALID_ARGUMENT);
  EXPECT_THAT("hl_fallback_mode_name", "mode 99",
              hl_fallback_mode_name((hl_fallback_mode_t)99) != NULL,
              "a string");
  hl_device_options_initialize(NULL);
  EXPECT_THAT("hl_device_options_initialize", "NULL", true, "no-op");

  hl_device_t* d = (hl_device_t*)1;
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = HL_BACKEND_HOST;
  EXPECT_STATUS("hl_device_create", "out_device NULL",
                hl_device_create(&o, hl_allocator_system(), NULL),
                INVALID_ARGUMENT);
  o.backend = (hl_backend_kind_t)99;
  EXPECT_STATUS("hl_device_create", "backend 99",
                hl_device_create(&o, hl_allocator_system(), &d),
                INVALID_ARGUMENT);
  EXPECT_THAT("hl_device_create", "(after a failure)", d == NULL,
              "*out_device NULL");
  o.backend = HL_BACKEND_HOST;
  o.ordinal = -1;
  EXPECT_STATUS("hl_device_create", "ordinal -1",
                hl_device_create(&o, hl_allocator_system(), &d), OUT_OF_RANGE);
  o.ordinal = 1000;
  EXPECT_STATUS("hl_device_create", "ordinal 1000",
                hl_device_create(&o, hl_allocator_system(), &d), OUT_OF_RANGE);
  o.ordinal = 0;
  o.fallback = (hl_fallback_mode_t)99;
  EXPECT_STATUS("hl_device_create", "fallback 99",
                hl_device_create(&o, hl_allocator_system(), &d),
                INVALID_ARGUMENT);
  o.fallback = HL_FALLBACK_DEFAULT;
  o.checked = 7;
  EXPECT_STATUS("hl_device_create", "checked 7",
                hl_device_create(&o, hl_allocator_system(), &d),
                INVALID_ARGUMENT);
  o.checked = -1;
  o.pool.reuse_flags = 0x80;
  o.pool_reuse_flags_set = true;
  EXPECT_STATUS("hl_device_create", "pool reuse_flags 0x80",
                hl_device_create(&o, hl_allocator_system(), &d),
                INVALID_ARGUMENT);
  o.pool_reuse_flags_set = false;
  hl_allocator_t zero = {NULL, NULL, NULL};
  EXPECT_STATUS("hl_device_create", "zero allocator (means the system one)",
                hl_device_create(&o, zero, &d), OK);
  hl_device_release(d);

  hl_device_retain(NULL);
  EXPECT_THAT("hl_device_retain", "NULL", true, "no-op");
  hl_device_release(NULL);
  EXPECT_THAT("hl_device_release", "NULL", true, "no-op");

  hl_device_properties_t props;
  EXPECT_STATUS("hl_backend_device_properties", "ordinal -1",
                hl_backend_device_properties(HL_BACKEND_HOST, -1, &props),
                OUT_OF_RANGE);
  EXPECT_STATUS("hl_backend_device_properties", "ordinal 1000",
                hl_backend_device_properties(HL_BACKEND_HOST, 1000, &props),
                OUT_OF_RANGE);
  EXPECT_STATUS("hl_backend_device_properties", "kind 99",
                hl_backend_device_properties((hl_backend_kind_t)99, 0, &props),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_backend_device_properties", "out_props NULL",
                hl_backend_device_properties(HL_BACKEND_HOST, 0, NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_device_properties", "device NULL",
                hl_device_properties(NULL, &props), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_device_properties", "out_props NULL",
                hl_device_properties(fx->device, NULL), INVALID_ARGUMENT);
  EXPECT_THAT("hl_device_fallback_mode", "NULL",
              hl_device_fallback_mode(NULL) == HL_FALLBACK_DEFAULT,
              "HL_FALLBACK_DEFAULT");
  EXPECT_THAT("hl_device_checked", "NULL", !hl_device_checked(NULL), "false");
  hl_pool_attributes_t attrs;
  EXPECT_STATUS("hl_device_pool_attributes", "device NULL",
                hl_device_pool_attributes(NULL, &attrs), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_device_pool_attributes", "out_attrs NULL",
                hl_device_pool_attributes(fx->device, NULL), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_device_trim", "device NULL", hl_device_trim(NULL, 0),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_device_trim", "min_bytes_to_keep UINT64_MAX",
                hl_device_trim(fx->device, BIG), OK);
  EXPECT_STATUS("hl_device_wait_idle", "device NULL",
                hl_device_wait_idle(NULL, REL_DEADLINE()), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_device_wait_idle", "idle device, deadline in the past",
                hl_device_wait_idle(fx->device, HL_IMMEDIATE_PAST), OK);
}

//===----------------------------------------------------------------------===//
// semaphore.h, fence.h
//===----------------------------------------------------------------------===//

static void rows_semaphore(fixture_t* fx) {
  header_ = "semaphore.h";
  hl_semaphore_t* s = NULL;
  uint64_t v = 0;
  EXPECT_STATUS("hl_semaphore_create", "out_semaphore NULL",
                hl_semaphore_create(0, hl_allocator_system(), NULL),
                INVALID_ARGUMENT);
  hl_allocator_t zero = {NULL, NULL, NULL};
  EXPECT_STATUS("hl_semaphore_create", "zero allocator (means the system one)",
                hl_semaphore_create(0, zero, &s), OK);
  hl_semaphore_release(s);
  EXPECT_STATUS("hl_semaphore_create", "initial_value UINT64_MAX",
                hl_semaphore_create(BIG, hl_allocator_system(), &s), OK);
  EXPECT_STATUS("hl_semaphore_signal",
                "value UINT64_MAX on a semaphore at UINT64_MAX",
                hl_semaphore_signal(s, BIG), OUT_OF_RANGE);
  hl_semaphore_release(s);
  hl_semaphore_retain(NULL);
  EXPECT_THAT("hl_semaphore_retain", "NULL", true, "no-op");
  hl_semaphore_release(NULL);
  EXPECT_THAT("hl_semaphore_release", "NULL", true, "no-op");
  EXPECT_STATUS("hl_semaphore_query", "semaphore NULL",
                hl_semaphore_query(NULL, &v), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_semaphore_query", "out_value NULL",
                hl_semaphore_query(fx->sem, NULL), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_semaphore_query", "failed semaphore",
                hl_semaphore_query(fx->failed_sem, &v), ABORTED);
  EXPECT_STATUS("hl_semaphore_signal", "semaphore NULL",
                hl_semaphore_signal(NULL, 1), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_semaphore_signal", "backwards (5 -> 3)",
                hl_semaphore_signal(fx->sem, 3), OUT_OF_RANGE);
  EXPECT_STATUS("hl_semaphore_signal", "same value (5 -> 5)",
                hl_semaphore_signal(fx->sem, 5), OUT_OF_RANGE);
  EXPECT_STATUS("hl_semaphore_signal", "failed semaphore",
                hl_semaphore_signal(fx->failed_sem, 1), ABORTED);
  EXPECT_STATUS(
      "hl_semaphore_fail", "semaphore NULL (status freed)",
      hl_semaphore_fail(NULL, HL_MAKE_STATUS(HL_STATUS_INTERNAL, "x")),
      INVALID_ARGUMENT);
  hl_semaphore_t* f = make_sem(0);
  hl_semaphore_fail(f, NULL);
  EXPECT_STATUS("hl_semaphore_fail", "status OK (NULL), then query",
                hl_semaphore_query(f, &v), INVALID_ARGUMENT);
  hl_semaphore_fail(f, HL_MAKE_STATUS(HL_STATUS_INTERNAL, "second"));
  EXPECT_STATUS("hl_semaphore_fail", "second failure, then query",
                hl_semaphore_query(f, &v), INVALID_ARGUMENT);
  hl_semaphore_release(f);
  EXPECT_STATUS("hl_semaphore_wait", "semaphore NULL",
                hl_semaphore_wait(NULL, 1, REL_DEADLINE()), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_semaphore_wait", "failed semaphore",
                hl_semaphore_wait(fx->failed_sem, 1, REL_DEADLINE()), ABORTED);
  EXPECT_STATUS("hl_semaphore_wait", "value UINT64_MAX, deadline past",
                hl_semaphore_wait(fx->sem, BIG, HL_IMMEDIATE_PAST),
                DEADLINE_EXCEEDED);
  EXPECT_STATUS("hl_semaphore_wait", "value UINT64_MAX, deadline +10 ms",
                hl_semaphore_wait(fx->sem, BIG, hl_deadline_after(10 * REL_MS)),
                DEADLINE_EXCEEDED);
  hl_semaphore_t* sems[2] = {fx->sem, fx->failed_sem};
  uint64_t values[2] = {1, 1};
  size_t index = 0;
  EXPECT_STATUS("hl_semaphore_wait_many", "mode 99",
                hl_semaphore_wait_many((hl_wait_mode_t)99, 1, sems, values,
                                       REL_DEADLINE(), &index),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_semaphore_wait_many", "count 0",
                hl_semaphore_wait_many(HL_WAIT_ALL, 0, NULL, NULL,
                                       HL_IMMEDIATE_PAST, NULL),
                OK);
  EXPECT_STATUS("hl_semaphore_wait_many", "semaphores NULL",
                hl_semaphore_wait_many(HL_WAIT_ALL, 2, NULL, values,
                                       REL_DEADLINE(), NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS(
      "hl_semaphore_wait_many", "values NULL",
      hl_semaphore_wait_many(HL_WAIT_ALL, 2, sems, NULL, REL_DEADLINE(), NULL),
      INVALID_ARGUMENT);
  EXPECT_STATUS("hl_semaphore_wait_many", "count SIZE_MAX, NULL arrays",
                hl_semaphore_wait_many(HL_WAIT_ALL, SIZE_MAX, NULL, NULL,
                                       REL_DEADLINE(), NULL),
                INVALID_ARGUMENT);
  hl_semaphore_t* with_null[2] = {fx->sem, NULL};
  EXPECT_STATUS("hl_semaphore_wait_many", "a NULL entry",
                hl_semaphore_wait_many(HL_WAIT_ALL, 2, with_null, values,
                                       REL_DEADLINE(), NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_semaphore_wait_many", "ALL with a failed semaphore",
                hl_semaphore_wait_many(HL_WAIT_ALL, 2, sems, values,
                                       REL_DEADLINE(), NULL),
                ABORTED);
  uint64_t far[2] = {BIG, 1};
  EXPECT_STATUS(
      "hl_semaphore_wait_many", "ANY with a failed semaphore",
      hl_semaphore_wait_many(HL_WAIT_ANY, 2, sems, far, REL_DEADLINE(), &index),
      ABORTED);

  header_ = "fence.h";
  hl_fence_t* fence = NULL;
  EXPECT_STATUS("hl_fence_create", "out_fence NULL",
                hl_fence_create(hl_allocator_system(), NULL), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_fence_create", "zero allocator (means the system one)",
                hl_fence_create(zero, &fence), OK);
  hl_fence_release(fence);
  hl_fence_retain(NULL);
  EXPECT_THAT("hl_fence_retain", "NULL", true, "no-op");
  hl_fence_release(NULL);
  EXPECT_THAT("hl_fence_release", "NULL", true, "no-op");
  EXPECT_STATUS("hl_fence_insert", "fence NULL",
                hl_fence_insert(NULL, fx->sem, 1), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_fence_insert", "semaphore NULL",
                hl_fence_insert(fx->fence, NULL, 1), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_fence_join", "fence NULL", hl_fence_join(NULL, fx->fence),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_fence_join", "source NULL (empty)",
                hl_fence_join(fx->fence, NULL), OK);
  EXPECT_STATUS("hl_fence_join", "itself", hl_fence_join(fx->fence, fx->fence),
                OK);
  hl_fence_clear(NULL);
  EXPECT_THAT("hl_fence_clear", "NULL", true, "no-op");
  EXPECT_THAT("hl_fence_count", "NULL", hl_fence_count(NULL) == 0, "0");
  hl_semaphore_t* es = (hl_semaphore_t*)1;
  uint64_t ev = 1;
  hl_fence_entry(NULL, 0, &es, &ev);
  EXPECT_THAT("hl_fence_entry", "fence NULL", es == NULL && ev == 0, "NULL, 0");
  es = (hl_semaphore_t*)1;
  hl_fence_entry(fx->fence, SIZE_MAX, &es, &ev);
  EXPECT_THAT("hl_fence_entry", "index SIZE_MAX", es == NULL && ev == 0,
              "NULL, 0");
  hl_fence_entry(fx->fence, 0, NULL, NULL);
  EXPECT_THAT("hl_fence_entry", "out-parameters NULL", true, "no-op");
  bool reached = false;
  EXPECT_STATUS("hl_fence_is_reached", "fence NULL (empty)",
                hl_fence_is_reached(NULL, &reached), OK);
  EXPECT_THAT("hl_fence_is_reached", "fence NULL (empty): value", reached,
              "reached");
  EXPECT_STATUS("hl_fence_is_reached", "out_reached NULL",
                hl_fence_is_reached(fx->fence, NULL), INVALID_ARGUMENT);
  hl_fence_t* failed_fence = make_fence(fx->failed_sem, 1);
  EXPECT_STATUS("hl_fence_is_reached", "failed semaphore",
                hl_fence_is_reached(failed_fence, &reached), ABORTED);
  EXPECT_STATUS("hl_fence_wait", "fence NULL (empty)",
                hl_fence_wait(NULL, HL_IMMEDIATE_PAST), OK);
  EXPECT_STATUS("hl_fence_wait", "failed semaphore",
                hl_fence_wait(failed_fence, REL_DEADLINE()), ABORTED);
  hl_fence_release(failed_fence);
}

//===----------------------------------------------------------------------===//
// queue.h
//===----------------------------------------------------------------------===//

static void noop_fn(void* user) { (void)user; }

static void rows_queue(fixture_t* fx) {
  header_ = "queue.h";
  hl_queue_t* q = (hl_queue_t*)1;
  EXPECT_STATUS("hl_queue_create", "device NULL", hl_queue_create(NULL, &q),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_create", "out_queue NULL",
                hl_queue_create(fx->device, NULL), INVALID_ARGUMENT);
  hl_queue_retain(NULL);
  EXPECT_THAT("hl_queue_retain", "NULL", true, "no-op");
  hl_queue_release(NULL);
  EXPECT_THAT("hl_queue_release", "NULL", true, "no-op");
  EXPECT_THAT("hl_queue_device", "NULL", hl_queue_device(NULL) == NULL,
              "returns NULL");
  EXPECT_THAT("hl_queue_timeline", "NULL", hl_queue_timeline(NULL) == NULL,
              "returns NULL");
  EXPECT_THAT("hl_queue_id", "NULL", hl_queue_id(NULL) == 0, "0");
  EXPECT_STATUS("hl_queue_barrier", "queue NULL",
                hl_queue_barrier(NULL, NULL, NULL), INVALID_ARGUMENT);
  hl_semaphore_t* s = make_sem(0);
  hl_fence_t* wait_failed = make_fence(fx->failed_sem, 1);
  hl_fence_t* signal = make_fence(s, 1);
  HL_ASSERT_OK(hl_queue_barrier(fx->queue, wait_failed, signal));
  EXPECT_STATUS("hl_queue_barrier",
                "wait on a failed semaphore (signal waited)",
                hl_semaphore_wait(s, 1, REL_DEADLINE()), ABORTED);
  hl_fence_release(signal);
  hl_semaphore_release(s);
  // A device signal cannot be checked against the value at submit time (a
  // host signal may race with it): it is accepted and is a no-op.
  hl_fence_t* backwards = make_fence(fx->sem, 2);  // fx->sem is at 5.
  EXPECT_STATUS("hl_queue_barrier",
                "signal fence behind the semaphore (5 -> 2)",
                hl_queue_barrier(fx->queue, NULL, backwards), OK);
  SETUP(hl_queue_wait_idle(fx->queue, REL_DEADLINE()));
  uint64_t value = 0;
  hl_status_t qst = hl_semaphore_query(fx->sem, &value);
  EXPECT_THAT("hl_queue_barrier", "signal behind the semaphore: afterwards",
              qst == NULL && value == 5, "no-op (still 5, not failed)");
  hl_status_free(qst);
  hl_fence_release(backwards);
  hl_fence_t* own = make_fence(hl_queue_timeline(fx->queue), 1000000);
  EXPECT_STATUS("hl_queue_barrier", "signal fence names the queue's timeline",
                hl_queue_barrier(fx->queue, NULL, own), INVALID_ARGUMENT);
  hl_fence_release(own);
  EXPECT_STATUS("hl_queue_host_call", "queue NULL",
                hl_queue_host_call(NULL, NULL, NULL, noop_fn, NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_host_call", "fn NULL",
                hl_queue_host_call(fx->queue, NULL, NULL, NULL, NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_wait_idle", "queue NULL",
                hl_queue_wait_idle(NULL, REL_DEADLINE()), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_wait_idle", "deadline in the past (idle queue)",
                hl_queue_wait_idle(fx->other_queue, HL_IMMEDIATE_PAST), OK);
  EXPECT_STATUS("hl_queue_status", "queue NULL", hl_queue_status(NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_wait_capacity", "queue NULL",
                hl_queue_wait_capacity(NULL, REL_DEADLINE()), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_semaphore_signal", "a queue's own timeline",
                hl_semaphore_signal(hl_queue_timeline(fx->other_queue), 1000),
                INVALID_ARGUMENT);
  EXPECT_STATUS(
      "hl_semaphore_fail", "a queue's own timeline (status freed)",
      hl_semaphore_fail(hl_queue_timeline(fx->other_queue),
                        HL_MAKE_STATUS(HL_STATUS_ABORTED, "from outside")),
      INVALID_ARGUMENT);
  hl_fence_t* own_future =
      make_fence(hl_queue_timeline(fx->other_queue), UINT64_MAX);
  EXPECT_STATUS("hl_queue_barrier", "wait on own timeline at UINT64_MAX",
                hl_queue_barrier(fx->other_queue, own_future, NULL),
                INVALID_ARGUMENT);
  hl_fence_release(own_future);
  hl_queue_stats_t qs;
  hl_queue_stats(NULL, &qs);
  EXPECT_THAT("hl_queue_stats", "queue NULL", true, "no-op");
  hl_queue_stats(fx->queue, NULL);
  EXPECT_THAT("hl_queue_stats", "out_stats NULL", true, "no-op");
  hl_fence_release(wait_failed);
}

//===----------------------------------------------------------------------===//
// buffer.h
//===----------------------------------------------------------------------===//

typedef struct release_probe_t {
  atomic_int calls;
  void* last_ptr;
} release_probe_t;

static void probe_release(void* user, void* device_ptr) {
  release_probe_t* p = (release_probe_t*)user;
  atomic_fetch_add(&p->calls, 1);
  p->last_ptr = device_ptr;
}

static void rows_buffer(fixture_t* fx) {
  header_ = "buffer.h";
  hl_buffer_t* b = (hl_buffer_t*)1;
  hl_queue_t* q = fx->queue;
  EXPECT_THAT("hl_buffer_origin_name", "origin 99",
              hl_buffer_origin_name((hl_buffer_origin_t)99) != NULL,
              "a string");
  EXPECT_STATUS("hl_queue_alloca", "queue NULL",
                hl_queue_alloca(NULL, NULL, NULL, 64, 0, &b), INVALID_ARGUMENT);
  EXPECT_THAT("hl_queue_alloca", "(after a failure)", b == NULL,
              "*out_buffer NULL");
  EXPECT_STATUS("hl_queue_alloca", "out_buffer NULL",
                hl_queue_alloca(q, NULL, NULL, 64, 0, NULL), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_alloca", "size 0",
                hl_queue_alloca(q, NULL, NULL, 0, 0, &b), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_alloca", "size UINT64_MAX",
                hl_queue_alloca(q, NULL, NULL, BIG, 0, &b), OUT_OF_RANGE);
  EXPECT_STATUS("hl_queue_alloca", "size SIZE_MAX",
                hl_queue_alloca(q, NULL, NULL, (uint64_t)SIZE_MAX, 0, &b),
                OUT_OF_RANGE);
  EXPECT_STATUS("hl_queue_alloca", "size 2^48 + 1",
                hl_queue_alloca(q, NULL, NULL, HL_BUFFER_MAX_SIZE + 1, 0, &b),
                OUT_OF_RANGE);
  EXPECT_STATUS("hl_queue_alloca", "flags 1",
                hl_queue_alloca(q, NULL, NULL, 64, 1, &b), INVALID_ARGUMENT);
  // 2^48 bytes passes the argument checks and must fail on the signal fence.
  hl_semaphore_t* s = make_sem(0);
  hl_fence_t* f = make_fence(s, 1);
  SETUP(hl_queue_alloca(q, NULL, f, HL_BUFFER_MAX_SIZE, 0, &b));
  EXPECT_STATUS("hl_queue_alloca", "size 2^48 (beyond the pool): signal",
                hl_semaphore_wait(s, 1, REL_DEADLINE()), RESOURCE_EXHAUSTED);
  hl_buffer_release(b);
  hl_fence_release(f);
  hl_semaphore_release(s);

  // A NULL queue means the buffer's origin queue (issue 19); a wrapped buffer
  // has none.
  static uint8_t no_origin_storage[64];
  hl_buffer_t* no_origin = NULL;
  SETUP(hl_buffer_wrap(fx->device, no_origin_storage, sizeof(no_origin_storage),
                       NULL, NULL, &no_origin));
  EXPECT_STATUS("hl_queue_dealloca", "queue NULL, wrapped (no origin queue)",
                hl_queue_dealloca(NULL, NULL, NULL, no_origin),
                INVALID_ARGUMENT);
  hl_buffer_release(no_origin);
  EXPECT_STATUS("hl_queue_dealloca", "buffer NULL",
                hl_queue_dealloca(q, NULL, NULL, NULL), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_dealloca", "buffer of another device",
                hl_queue_dealloca(fx->other_queue, NULL, NULL, fx->buffer),
                INVALID_ARGUMENT);
  hl_buffer_t* twice = make_buffer(q, 64);
  SETUP(hl_queue_dealloca(q, NULL, NULL, twice));
  EXPECT_STATUS("hl_queue_dealloca", "second dealloca",
                hl_queue_dealloca(q, NULL, NULL, twice), FAILED_PRECONDITION);
  hl_buffer_release(twice);
  // A dealloca that waits on a failed semaphore is cancelled: the buffer stays
  // valid and can be deallocated again.
  hl_buffer_t* cancel = make_buffer(q, 64);
  s = make_sem(0);
  f = make_fence(s, 1);
  hl_fence_t* wf = make_fence(fx->failed_sem, 1);
  SETUP(hl_queue_dealloca(q, wf, f, cancel));
  EXPECT_STATUS("hl_queue_dealloca", "wait on a failed semaphore: signal",
                hl_semaphore_wait(s, 1, REL_DEADLINE()), ABORTED);
  SETUP(hl_queue_wait_idle(q, REL_DEADLINE()));
  SETUP(hl_device_wait_idle(fx->device, REL_DEADLINE()));
  EXPECT_THAT("hl_queue_dealloca", "wait on a failed semaphore: buffer",
              !hl_buffer_is_freed(cancel), "still valid");
  EXPECT_STATUS("hl_queue_dealloca", "again after a cancelled one",
                hl_queue_dealloca(q, NULL, NULL, cancel), OK);
  hl_buffer_release(cancel);
  hl_fence_release(wf);
  hl_fence_release(f);
  hl_semaphore_release(s);

  // Wrapped foreign pointers.
  static uint32_t foreign[64];
  release_probe_t probe;
  atomic_init(&probe.calls, 0);
  probe.last_ptr = NULL;
  EXPECT_STATUS("hl_buffer_wrap", "device NULL",
                hl_buffer_wrap(NULL, foreign, sizeof(foreign), NULL, NULL, &b),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_buffer_wrap", "device_ptr NULL",
                hl_buffer_wrap(fx->device, NULL, 64, NULL, NULL, &b),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_buffer_wrap", "size 0",
                hl_buffer_wrap(fx->device, foreign, 0, NULL, NULL, &b),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_buffer_wrap", "size UINT64_MAX",
                hl_buffer_wrap(fx->device, foreign, BIG, NULL, NULL, &b),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_buffer_wrap", "out_buffer NULL",
                hl_buffer_wrap(fx->device, foreign, 64, NULL, NULL, NULL),
                INVALID_ARGUMENT);
  hl_buffer_t* wrapped = NULL;
  SETUP(hl_buffer_wrap(fx->device, foreign, sizeof(foreign), probe_release,
                       &probe, &wrapped));
  hl_buffer_t* view = NULL;
  SETUP(hl_buffer_subview(wrapped, 16, 32, &view));
  s = make_sem(0);
  f = make_fence(s, 1);
  EXPECT_STATUS("hl_queue_dealloca", "wrapped foreign pointer",
                hl_queue_dealloca(q, NULL, f, wrapped), OK);
  EXPECT_STATUS("hl_queue_dealloca", "wrapped foreign pointer: signal",
                hl_semaphore_wait(s, 1, REL_DEADLINE()), OK);
  SETUP(hl_device_wait_idle(fx->device, REL_DEADLINE()));
  EXPECT_THAT("hl_queue_dealloca", "wrapped: memory after the barrier",
              !hl_buffer_is_freed(view) && atomic_load(&probe.calls) == 0,
              "not freed, release_fn not run");
  hl_buffer_release(wrapped);
  SETUP(hl_device_wait_idle(fx->device, REL_DEADLINE()));
  EXPECT_THAT("hl_buffer_release", "wrapped: a view still holds the root",
              atomic_load(&probe.calls) == 0, "release_fn not run");
  hl_buffer_release(view);
  SETUP(hl_device_wait_idle(fx->device, REL_DEADLINE()));
  for (int i = 0; i < 2000 && atomic_load(&probe.calls) == 0; ++i) {
    hl_test_sleep_ms(1);
  }
  EXPECT_THAT("hl_buffer_release", "wrapped: last reference",
              atomic_load(&probe.calls) == 1 && probe.last_ptr == foreign,
              "release_fn runs once with the pointer");
  hl_fence_release(f);
  hl_semaphore_release(s);

  hl_buffer_t* v = (hl_buffer_t*)1;
  hl_buffer_t* fb = fx->buffer;  // 256 bytes.
  EXPECT_STATUS("hl_buffer_subview", "buffer NULL",
                hl_buffer_subview(NULL, 0, 4, &v), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_buffer_subview", "out_view NULL",
                hl_buffer_subview(fb, 0, 4, NULL), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_buffer_subview", "offset past the end",
                hl_buffer_subview(fb, 257, 0, &v), OUT_OF_RANGE);
  EXPECT_STATUS("hl_buffer_subview", "length UINT64_MAX",
                hl_buffer_subview(fb, 0, BIG, &v), OUT_OF_RANGE);
  EXPECT_STATUS("hl_buffer_subview", "offset+length overflows",
                hl_buffer_subview(fb, 8, BIG - 4, &v), OUT_OF_RANGE);
  EXPECT_STATUS("hl_buffer_subview", "offset UINT64_MAX",
                hl_buffer_subview(fb, BIG, 1, &v), OUT_OF_RANGE);
  hl_buffer_retain(NULL);
  EXPECT_THAT("hl_buffer_retain", "NULL", true, "no-op");
  hl_buffer_release(NULL);
  EXPECT_THAT("hl_buffer_release", "NULL", true, "no-op");
  EXPECT_STATUS("hl_buffer_register_global", "NULL",
                hl_buffer_register_global(NULL), INVALID_ARGUMENT);
  hl_buffer_t* g = make_buffer(q, 64);
  SETUP(hl_buffer_register_global(g));
  EXPECT_STATUS("hl_buffer_register_global", "twice",
                hl_buffer_register_global(g), ALREADY_EXISTS);
  SETUP(hl_buffer_unregister_global(g));
  EXPECT_STATUS("hl_buffer_unregister_global", "not registered",
                hl_buffer_unregister_global(g), NOT_FOUND);
  EXPECT_STATUS("hl_buffer_unregister_global", "NULL",
                hl_buffer_unregister_global(NULL), INVALID_ARGUMENT);
  SETUP(hl_queue_dealloca(q, NULL, NULL, g));
  hl_buffer_release(g);
  EXPECT_THAT("hl_buffer_length", "NULL", hl_buffer_length(NULL) == 0, "0");
  EXPECT_THAT("hl_buffer_offset", "NULL", hl_buffer_offset(NULL) == 0, "0");
  EXPECT_THAT("hl_buffer_origin", "NULL",
              hl_buffer_origin(NULL) == HL_BUFFER_ORIGIN_ASYNC, "ASYNC");
  EXPECT_THAT("hl_buffer_device", "NULL", hl_buffer_device(NULL) == NULL,
              "returns NULL");
  EXPECT_THAT("hl_buffer_root_id", "NULL", hl_buffer_root_id(NULL) == 0, "0");
  EXPECT_THAT("hl_buffer_device_pointer", "NULL",
              hl_buffer_device_pointer(NULL) == NULL, "returns NULL");
  EXPECT_THAT("hl_buffer_is_freed", "NULL", !hl_buffer_is_freed(NULL), "false");
  EXPECT_STATUS("hl_buffer_use_fence", "buffer NULL",
                hl_buffer_use_fence(NULL, fx->fence), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_buffer_use_fence", "fence NULL",
                hl_buffer_use_fence(fb, NULL), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_buffer_mutation_barrier", "buffer NULL",
                hl_buffer_mutation_barrier(NULL, fx->fence), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_buffer_mutation_barrier", "fence NULL",
                hl_buffer_mutation_barrier(fb, NULL), INVALID_ARGUMENT);

  // Transfers.
  uint32_t host[64];
  EXPECT_STATUS("hl_queue_fill", "queue NULL",
                hl_queue_fill(NULL, NULL, NULL, fb, 0, 4, 1), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_fill", "buffer NULL",
                hl_queue_fill(q, NULL, NULL, NULL, 0, 4, 1), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_fill", "offset 2 (unaligned)",
                hl_queue_fill(q, NULL, NULL, fb, 2, 4, 1), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_fill", "length 6 (unaligned)",
                hl_queue_fill(q, NULL, NULL, fb, 0, 6, 1), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_fill", "length UINT64_MAX - 3",
                hl_queue_fill(q, NULL, NULL, fb, 0, BIG - 3, 1), OUT_OF_RANGE);
  EXPECT_STATUS(
      "hl_queue_fill", "offset 2^63, length 2^63",
      hl_queue_fill(q, NULL, NULL, fb, UINT64_C(1) << 63, UINT64_C(1) << 63, 1),
      OUT_OF_RANGE);
  EXPECT_STATUS("hl_queue_fill", "buffer of another device",
                hl_queue_fill(fx->other_queue, NULL, NULL, fb, 0, 4, 1),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_copy", "source NULL",
                hl_queue_copy(q, NULL, NULL, NULL, 0, fb, 0, 4),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_copy", "target NULL",
                hl_queue_copy(q, NULL, NULL, fb, 0, NULL, 0, 4),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_copy", "queue NULL",
                hl_queue_copy(NULL, NULL, NULL, fb, 0, fb, 0, 4),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_copy", "length UINT64_MAX",
                hl_queue_copy(q, NULL, NULL, fb, 0, fb, 0, BIG), OUT_OF_RANGE);
  EXPECT_STATUS("hl_queue_copy", "source_offset UINT64_MAX",
                hl_queue_copy(q, NULL, NULL, fb, BIG, fb, 0, 4), OUT_OF_RANGE);
  EXPECT_STATUS("hl_queue_copy", "target_offset UINT64_MAX",
                hl_queue_copy(q, NULL, NULL, fb, 0, fb, BIG, 4), OUT_OF_RANGE);
  EXPECT_STATUS("hl_queue_read", "host_target NULL",
                hl_queue_read(q, NULL, NULL, fb, 0, NULL, 4), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_read", "source NULL",
                hl_queue_read(q, NULL, NULL, NULL, 0, host, 4),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_read", "queue NULL",
                hl_queue_read(NULL, NULL, NULL, fb, 0, host, 4),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_read", "length UINT64_MAX",
                hl_queue_read(q, NULL, NULL, fb, 0, host, BIG), OUT_OF_RANGE);
  EXPECT_STATUS("hl_queue_read", "offset UINT64_MAX",
                hl_queue_read(q, NULL, NULL, fb, BIG, host, 4), OUT_OF_RANGE);
  EXPECT_STATUS("hl_queue_write", "host_source NULL",
                hl_queue_write(q, NULL, NULL, NULL, fb, 0, 4),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_write", "target NULL",
                hl_queue_write(q, NULL, NULL, host, NULL, 0, 4),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_write", "queue NULL",
                hl_queue_write(NULL, NULL, NULL, host, fb, 0, 4),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_write", "length UINT64_MAX",
                hl_queue_write(q, NULL, NULL, host, fb, 0, BIG), OUT_OF_RANGE);
  EXPECT_STATUS("hl_queue_write", "offset UINT64_MAX",
                hl_queue_write(q, NULL, NULL, host, fb, BIG, 4), OUT_OF_RANGE);
  // A read that waits on a failed semaphore fails its signal and leaves the
  // host memory alone.
  memset(host, 0x11, sizeof(host));
  s = make_sem(0);
  f = make_fence(s, 1);
  wf = make_fence(fx->failed_sem, 1);
  SETUP(hl_queue_read(q, wf, f, fb, 0, host, sizeof(host)));
  EXPECT_STATUS("hl_queue_read", "wait on a failed semaphore: signal",
                hl_semaphore_wait(s, 1, REL_DEADLINE()), ABORTED);
  EXPECT_THAT("hl_queue_read", "wait on a failed semaphore: host memory",
              host[0] == 0x11111111u, "untouched");
  hl_fence_release(wf);
  hl_fence_release(f);
  hl_semaphore_release(s);

  hl_memory_stats_t ms;
  EXPECT_STATUS("hl_device_memory_stats", "device NULL",
                hl_device_memory_stats(NULL, &ms), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_device_memory_stats", "out_stats NULL",
                hl_device_memory_stats(fx->device, NULL), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_memory_stats", "queue NULL",
                hl_queue_memory_stats(NULL, &ms), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_memory_stats", "out_stats NULL",
                hl_queue_memory_stats(q, NULL), INVALID_ARGUMENT);
}

//===----------------------------------------------------------------------===//
// invocation.h
//===----------------------------------------------------------------------===//

typedef enum fn_mode_e {
  FN_FRESH = 0,      // One fresh alloca'd result.
  FN_FAIL = 1,       // Returns an error.
  FN_NO_RESULT = 2,  // Returns OK without storing its result.
} fn_mode_t;

static hl_status_t bad_fn(void* user, hl_queue_t* queue,
                          hl_buffer_t* const* arguments, size_t argument_count,
                          const hl_fence_t* wait_fence,
                          const hl_fence_t* signal_fence,
                          hl_buffer_t** out_results, size_t result_count) {
  fn_mode_t mode = (fn_mode_t)(intptr_t)user;
  if (mode == FN_FAIL) {
    return HL_MAKE_STATUS(HL_STATUS_DATA_LOSS, "the function fails on purpose");
  }
  if (mode == FN_NO_RESULT)
    return hl_queue_barrier(queue, wait_fence, signal_fence);
  return hl_queue_alloca(queue, wait_fence, signal_fence, 64, 0,
                         &out_results[0]);
}

static hl_function_t* make_function(const char* name, uint32_t args,
                                    uint32_t results, fn_mode_t mode) {
  static const hl_access_t access[4] = {HL_ACCESS_READ, HL_ACCESS_READ,
                                        HL_ACCESS_READ, HL_ACCESS_READ};
  hl_function_signature_t sig = {args, results, access};
  hl_function_t* f = NULL;
  SETUP(hl_function_create(name, &sig, bad_fn, (void*)(intptr_t)mode,
                           hl_allocator_system(), &f));
  return f;
}

static void rows_invocation(fixture_t* fx) {
  header_ = "invocation.h";
  hl_function_t* fn = (hl_function_t*)1;
  hl_access_t access[HL_FUNCTION_MAX_ARGUMENTS + 1];
  for (int i = 0; i <= HL_FUNCTION_MAX_ARGUMENTS; ++i)
    access[i] = HL_ACCESS_READ;
  hl_function_signature_t sig = {1, 1, access};
  hl_allocator_t a = hl_allocator_system();
  EXPECT_STATUS("hl_function_create", "name NULL",
                hl_function_create(NULL, &sig, bad_fn, NULL, a, &fn),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_function_create", "name \"\"",
                hl_function_create("", &sig, bad_fn, NULL, a, &fn),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_function_create", "signature NULL",
                hl_function_create("f", NULL, bad_fn, NULL, a, &fn),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_function_create", "fn NULL",
                hl_function_create("f", &sig, NULL, NULL, a, &fn),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_function_create", "out_function NULL",
                hl_function_create("f", &sig, bad_fn, NULL, a, NULL),
                INVALID_ARGUMENT);
  hl_function_signature_t many_args = {HL_FUNCTION_MAX_ARGUMENTS + 1, 0,
                                       access};
  EXPECT_STATUS("hl_function_create", "33 arguments",
                hl_function_create("f", &many_args, bad_fn, NULL, a, &fn),
                OUT_OF_RANGE);
  hl_function_signature_t many_results = {0, HL_FUNCTION_MAX_RESULTS + 1,
                                          access};
  EXPECT_STATUS("hl_function_create", "33 results",
                hl_function_create("f", &many_results, bad_fn, NULL, a, &fn),
                OUT_OF_RANGE);
  hl_function_signature_t no_access = {2, 0, NULL};
  EXPECT_STATUS("hl_function_create", "argument_access NULL with 2 arguments",
                hl_function_create("f", &no_access, bad_fn, NULL, a, &fn),
                INVALID_ARGUMENT);
  hl_access_t bad_access[1] = {(hl_access_t)7};
  hl_function_signature_t odd = {1, 0, bad_access};
  EXPECT_STATUS("hl_function_create", "access value 7",
                hl_function_create("f", &odd, bad_fn, NULL, a, &fn),
                INVALID_ARGUMENT);
  hl_function_retain(NULL);
  EXPECT_THAT("hl_function_retain", "NULL", true, "no-op");
  hl_function_release(NULL);
  EXPECT_THAT("hl_function_release", "NULL", true, "no-op");
  EXPECT_THAT("hl_function_name", "NULL",
              strcmp(hl_function_name(NULL), "") == 0, "\"\"");
  EXPECT_STATUS("hl_function_register", "NULL", hl_function_register(NULL),
                INVALID_ARGUMENT);
  hl_function_t* reg = make_function("bad_input.registered", 0, 1, FN_FRESH);
  SETUP(hl_function_register(reg));
  hl_function_t* dup = make_function("bad_input.registered", 0, 1, FN_FRESH);
  EXPECT_STATUS("hl_function_register", "taken name", hl_function_register(dup),
                ALREADY_EXISTS);
  hl_function_release(dup);
  EXPECT_STATUS("hl_function_unregister", "NULL", hl_function_unregister(NULL),
                NOT_FOUND);
  EXPECT_STATUS("hl_function_unregister", "unknown name",
                hl_function_unregister("bad_input.nope"), NOT_FOUND);
  EXPECT_STATUS("hl_function_lookup", "name NULL",
                hl_function_lookup(NULL, &fn), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_function_lookup", "unknown name",
                hl_function_lookup("bad_input.nope", &fn), NOT_FOUND);
  EXPECT_STATUS("hl_function_lookup", "out_function NULL",
                hl_function_lookup("bad_input.registered", NULL),
                INVALID_ARGUMENT);
  SETUP(hl_function_unregister("bad_input.registered"));

  hl_invocation_t* inv = (hl_invocation_t*)1;
  EXPECT_STATUS("hl_invocation_create", "function NULL",
                hl_invocation_create(NULL, fx->queue, &inv), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_invocation_create", "queue NULL",
                hl_invocation_create(reg, NULL, &inv), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_invocation_create", "out_invocation NULL",
                hl_invocation_create(reg, fx->queue, NULL), INVALID_ARGUMENT);
  hl_invocation_release(NULL);
  EXPECT_THAT("hl_invocation_release", "NULL", true, "no-op");
  EXPECT_STATUS("hl_invocation_add_argument", "invocation NULL",
                hl_invocation_add_argument(NULL, fx->buffer), INVALID_ARGUMENT);
  SETUP(hl_invocation_create(reg, fx->queue, &inv));
  EXPECT_STATUS("hl_invocation_add_argument", "buffer NULL",
                hl_invocation_add_argument(inv, NULL), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_invocation_add_wait", "invocation NULL",
                hl_invocation_add_wait(NULL, fx->sem, 1), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_invocation_add_wait", "semaphore NULL",
                hl_invocation_add_wait(inv, NULL, 1), INVALID_ARGUMENT);
  hl_invocation_set_assume_no_alias(NULL, false);
  EXPECT_THAT("hl_invocation_set_assume_no_alias", "NULL", true, "no-op");
  EXPECT_THAT("hl_invocation_assume_no_alias", "NULL",
              hl_invocation_assume_no_alias(NULL), "true (the default)");
  bool value = false;
  hl_setting_source_t source;
  EXPECT_STATUS("hl_invocation_effective_assume_no_alias", "invocation NULL",
                hl_invocation_effective_assume_no_alias(NULL, &value, &source),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_invocation_effective_assume_no_alias", "out_value NULL",
                hl_invocation_effective_assume_no_alias(inv, NULL, &source),
                INVALID_ARGUMENT);
  EXPECT_THAT("hl_setting_source_name", "source 99",
              hl_setting_source_name((hl_setting_source_t)99) != NULL,
              "a string");
  hl_tristate_t tri;
  hl_set_assume_no_alias((hl_tristate_t)42);
  SETUP(hl_get_assume_no_alias(&tri, &source));
  EXPECT_THAT("hl_set_assume_no_alias", "value 42", tri != (hl_tristate_t)42,
              "ignored (stays a tristate)");
  hl_set_assume_no_alias(HL_TRISTATE_UNSET);
  EXPECT_STATUS("hl_get_assume_no_alias", "out-parameters NULL (optional)",
                hl_get_assume_no_alias(NULL, NULL), OK);
  EXPECT_STATUS("hl_invocation_invoke", "NULL", hl_invocation_invoke(NULL),
                INVALID_ARGUMENT);
  // The function takes 0 arguments.
  hl_invocation_t* wrong = NULL;
  SETUP(hl_invocation_create(reg, fx->queue, &wrong));
  EXPECT_STATUS("hl_invocation_add_argument",
                "more arguments than the signature",
                hl_invocation_add_argument(wrong, fx->buffer), OUT_OF_RANGE);
  hl_invocation_release(wrong);
  SETUP(hl_invocation_invoke(inv));
  EXPECT_STATUS("hl_invocation_invoke", "twice", hl_invocation_invoke(inv),
                FAILED_PRECONDITION);
  EXPECT_STATUS("hl_invocation_add_argument", "after invoke",
                hl_invocation_add_argument(inv, fx->buffer),
                FAILED_PRECONDITION);
  EXPECT_THAT("hl_invocation_signal_fence", "NULL",
              hl_invocation_signal_fence(NULL) == NULL, "returns NULL");
  EXPECT_THAT("hl_invocation_result_count", "NULL",
              hl_invocation_result_count(NULL) == 0, "0");
  hl_buffer_t* r = NULL;
  EXPECT_STATUS("hl_invocation_take_result", "invocation NULL",
                hl_invocation_take_result(NULL, 0, &r), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_invocation_take_result", "index SIZE_MAX",
                hl_invocation_take_result(inv, SIZE_MAX, &r), OUT_OF_RANGE);
  EXPECT_STATUS("hl_invocation_take_result", "out_buffer NULL",
                hl_invocation_take_result(inv, 0, NULL), INVALID_ARGUMENT);
  SETUP(hl_invocation_take_result(inv, 0, &r));
  hl_buffer_t* r2 = NULL;
  EXPECT_STATUS("hl_invocation_take_result", "twice",
                hl_invocation_take_result(inv, 0, &r2), FAILED_PRECONDITION);
  SETUP(hl_fence_wait(hl_invocation_signal_fence(inv), REL_DEADLINE()));
  hl_buffer_release(r);
  hl_invocation_release(inv);

  hl_status_t st = NULL;

  // A function that fails fails the invocation's signal fence.
  hl_function_t* failing = make_function("bad_input.failing", 0, 1, FN_FAIL);
  SETUP(hl_invocation_create(failing, fx->queue, &inv));
  st = hl_invocation_invoke(inv);
  hl_status_t waited =
      st ? NULL
         : hl_fence_wait(hl_invocation_signal_fence(inv), REL_DEADLINE());
  EXPECT_THAT("hl_invocation_invoke", "the function returns DATA_LOSS",
              hl_status_code(st) == HL_STATUS_DATA_LOSS ||
                  hl_status_code(waited) == HL_STATUS_DATA_LOSS,
              "DATA_LOSS (returned or on the signal fence)");
  hl_status_free(st);
  hl_status_free(waited);
  hl_invocation_release(inv);
  hl_function_release(failing);

  // A function that "forgets" its result.
  hl_function_t* forgetful =
      make_function("bad_input.forgetful", 0, 1, FN_NO_RESULT);
  SETUP(hl_invocation_create(forgetful, fx->queue, &inv));
  EXPECT_STATUS("hl_invocation_invoke", "the function stores no result",
                hl_invocation_invoke(inv), INTERNAL);
  SETUP(hl_device_wait_idle(fx->device, REL_DEADLINE()));
  hl_invocation_release(inv);
  hl_function_release(forgetful);

  // An invocation on a queue of another device with this device's buffer.
  SETUP(hl_invocation_create(reg, fx->other_queue, &inv));
  hl_invocation_release(inv);
  hl_function_release(reg);

  hl_invocation_stats_t is;
  EXPECT_STATUS("hl_device_invocation_stats", "device NULL",
                hl_device_invocation_stats(NULL, &is), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_device_invocation_stats", "out_stats NULL",
                hl_device_invocation_stats(fx->device, NULL), INVALID_ARGUMENT);
  hl_invocation_stats_global(NULL);
  EXPECT_THAT("hl_invocation_stats_global", "NULL", true, "no-op");
}

//===----------------------------------------------------------------------===//
// executable.h, trace.h, dispatch.h
//===----------------------------------------------------------------------===//

static void rows_executable(void) {
  header_ = "executable.h";
  char out[HL_TARGET_ID_MAX];
  EXPECT_STATUS("hl_target_id_canonicalize", "target NULL",
                hl_target_id_canonicalize(NULL, out, sizeof(out)),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_target_id_canonicalize", "\"\"",
                hl_target_id_canonicalize("", out, sizeof(out)),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_target_id_canonicalize", "feature without sign",
                hl_target_id_canonicalize("gfx90a:xnack", out, sizeof(out)),
                INVALID_ARGUMENT);
  EXPECT_STATUS(
      "hl_target_id_canonicalize", "feature twice",
      hl_target_id_canonicalize("gfx90a:xnack+:xnack-", out, sizeof(out)),
      INVALID_ARGUMENT);
  EXPECT_STATUS("hl_target_id_canonicalize", "9 features",
                hl_target_id_canonicalize("gfx90a:a+:b+:c+:d+:e+:f+:g+:h+:i+",
                                          out, sizeof(out)),
                INVALID_ARGUMENT);
  char longer[400];
  memset(longer, 'g', sizeof(longer) - 1);
  longer[sizeof(longer) - 1] = '\0';
  EXPECT_STATUS("hl_target_id_canonicalize", "399-character processor",
                hl_target_id_canonicalize(longer, out, sizeof(out)),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_target_id_canonicalize", "capacity 0",
                hl_target_id_canonicalize("gfx90a", out, 0), OUT_OF_RANGE);
  EXPECT_STATUS("hl_target_id_canonicalize", "capacity 3",
                hl_target_id_canonicalize("gfx90a", out, 3), OUT_OF_RANGE);
  expect_probe("hl_target_id_canonicalize", "out NULL, capacity 16",
               "canonicalize_null_out", HL_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT("hl_target_id_equal", "NULL, NULL",
              !hl_target_id_equal(NULL, NULL), "false");
  EXPECT_THAT("hl_target_id_equal", "invalid ids",
              !hl_target_id_equal("gfx90a:x", "gfx90a:x"), "false");
  EXPECT_THAT("hl_executable_gpu_target_count", "(none)",
              hl_executable_gpu_target_count() < 64, "a count");
  EXPECT_THAT("hl_executable_gpu_target", "index SIZE_MAX",
              hl_executable_gpu_target(SIZE_MAX) == NULL, "returns NULL");
  const void* data = NULL;
  size_t size = 0;
  EXPECT_STATUS("hl_executable_gpu_code_object", "index SIZE_MAX",
                hl_executable_gpu_code_object(SIZE_MAX, &data, &size),
                OUT_OF_RANGE);
  if (hl_executable_gpu_target_count() > 0) {
    expect_probe("hl_executable_gpu_code_object",
                 "index 0, out-parameters NULL", "code_object_null_out",
                 HL_STATUS_INVALID_ARGUMENT);
  }
  EXPECT_THAT("hl_executable_registry_target_count", "(none)",
              hl_executable_registry_target_count() >= 1, "at least 1 (host)");
  EXPECT_THAT("hl_executable_registry_target", "index SIZE_MAX",
              hl_executable_registry_target(SIZE_MAX) == NULL, "returns NULL");
  const char* built[2] = {"gfx90a", "host"};
  size_t index = 0;
  expect_probe("hl_executable_match_target", "device_target NULL",
               "match_device_null", HL_STATUS_INVALID_ARGUMENT);
  expect_probe("hl_executable_match_target", "built_targets NULL, count 2",
               "match_built_null", HL_STATUS_INVALID_ARGUMENT);
  expect_probe("hl_executable_match_target", "a NULL built target",
               "match_built_entry_null", HL_STATUS_INVALID_ARGUMENT);
  expect_probe("hl_executable_match_target", "out_index NULL", "match_out_null",
               HL_STATUS_INVALID_ARGUMENT);
  expect_probe("hl_executable_group_targets", "device_targets NULL, count 2",
               "group_targets_null", HL_STATUS_INVALID_ARGUMENT);
  expect_probe("hl_executable_group_targets", "a NULL target",
               "group_entry_null", HL_STATUS_INVALID_ARGUMENT);
  expect_probe("hl_executable_group_targets", "out-parameters NULL",
               "group_out_null", HL_STATUS_INVALID_ARGUMENT);
  expect_probe("hl_executable_select", "device_targets NULL, count 2",
               "select_devices_null", HL_STATUS_INVALID_ARGUMENT);
  expect_probe("hl_executable_select", "built_targets NULL, count 2",
               "select_built_null", HL_STATUS_INVALID_ARGUMENT);
  expect_probe("hl_executable_select", "out-parameters NULL", "select_out_null",
               HL_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS("hl_executable_match_target", "count 0",
                hl_executable_match_target("gfx90a", built, 0, &index),
                NOT_FOUND);
  EXPECT_STATUS("hl_executable_match_target", "no match",
                hl_executable_match_target("gfx1100", built, 2, &index),
                NOT_FOUND);
  size_t group_of[2], groups = 0, object_of[2];
  EXPECT_STATUS("hl_executable_group_targets", "count 0",
                hl_executable_group_targets(NULL, 0, NULL, &groups), OK);
  const char* devices[1] = {"gfx1100"};
  EXPECT_STATUS(
      "hl_executable_select", "no code object",
      hl_executable_select(devices, 1, built, 2, group_of, object_of, &groups),
      NOT_FOUND);

  header_ = "trace.h";
  EXPECT_STATUS("hl_trace_capture_end", "not capturing, path NULL",
                hl_trace_capture_end(NULL), OK);
  hl_trace_capture_begin(1);
  EXPECT_THAT("hl_trace_capture_begin", "max_events 1", true, "captures");
  EXPECT_STATUS("hl_trace_capture_end", "unwritable path",
                hl_trace_capture_end("/nonexistent-dir/trace.json"),
                PERMISSION_DENIED);
  EXPECT_THAT("hl_trace_capture_active", "after end",
              !hl_trace_capture_active(), "false");
  EXPECT_THAT("hl_trace_capture_count", "NULL",
              hl_trace_capture_count(NULL) == 0, "0");
}

#if HL_TEST_HAVE_DISPATCH
static void rows_dispatch(fixture_t* fx) {
  header_ = "dispatch.h";
  hl_dispatch_config_t cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  hl_kernel_arg_t arg;
  memset(&arg, 0, sizeof(arg));
  EXPECT_STATUS("hl_queue_dispatch", "queue NULL",
                hl_queue_dispatch(NULL, NULL, NULL, "spin", &cfg, 0, NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_dispatch", "kernel_name NULL",
                hl_queue_dispatch(fx->queue, NULL, NULL, NULL, &cfg, 0, NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_dispatch", "unknown kernel",
                hl_queue_dispatch(fx->queue, NULL, NULL, "nope", &cfg, 0, NULL),
                NOT_FOUND);
  EXPECT_STATUS("hl_queue_dispatch", "config NULL",
                hl_queue_dispatch(fx->queue, NULL, NULL, "spin", NULL, 0, NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS(
      "hl_queue_dispatch", "args NULL, count 3",
      hl_queue_dispatch(fx->queue, NULL, NULL, "fill_pattern", &cfg, 3, NULL),
      INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_dispatch", "count SIZE_MAX",
                hl_queue_dispatch(fx->queue, NULL, NULL, "fill_pattern", &cfg,
                                  SIZE_MAX, &arg),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_fill_pattern", "buffer NULL",
                hl_queue_fill_pattern(fx->queue, NULL, NULL, NULL, 1),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_fill_pattern", "queue NULL",
                hl_queue_fill_pattern(NULL, NULL, NULL, fx->buffer, 1),
                INVALID_ARGUMENT);
  EXPECT_STATUS(
      "hl_queue_verify_pattern", "counter NULL",
      hl_queue_verify_pattern(fx->queue, NULL, NULL, fx->buffer, 1, NULL),
      INVALID_ARGUMENT);
  EXPECT_STATUS(
      "hl_queue_verify_pattern", "buffer NULL",
      hl_queue_verify_pattern(fx->queue, NULL, NULL, NULL, 1, fx->buffer),
      INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_spin", "queue NULL",
                hl_queue_spin(NULL, NULL, NULL, 1), INVALID_ARGUMENT);
  EXPECT_THAT("hl_pattern_value", "index UINT64_MAX",
              hl_pattern_value(0, BIG) == hl_pattern_value(0, BIG),
              "deterministic");
  EXPECT_STATUS("hl_kernels_register_functions", "twice (idempotent)",
                hl_kernels_register_functions(), OK);
  EXPECT_STATUS("hl_kernels_register_functions", "twice (idempotent)",
                hl_kernels_register_functions(), OK);
}

static void rows_command_buffer(fixture_t* fx) {
  header_ = "command_buffer.h";
  hl_command_buffer_t* cb = NULL;
  uint8_t bytes[16] = {0};
  EXPECT_STATUS("hl_command_buffer_create", "device NULL",
                hl_command_buffer_create(NULL, 0, &cb), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_create", "out_cb NULL",
                hl_command_buffer_create(fx->device, 0, NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_create", "flags 0x80",
                hl_command_buffer_create(fx->device, 0x80, &cb),
                INVALID_ARGUMENT);
  EXPECT_THAT("hl_command_buffer_retain", "NULL",
              (hl_command_buffer_retain(NULL), true), "no-op");
  EXPECT_THAT("hl_command_buffer_release", "NULL",
              (hl_command_buffer_release(NULL), true), "no-op");
  SETUP(hl_command_buffer_create(fx->device, 0, &cb));
  EXPECT_STATUS("hl_command_buffer_fill", "cb NULL",
                hl_command_buffer_fill(NULL, fx->buffer, 0, 4, 0),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_fill", "buffer NULL",
                hl_command_buffer_fill(cb, NULL, 0, 4, 0), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_fill", "length 0",
                hl_command_buffer_fill(cb, fx->buffer, 0, 0, 0),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_fill", "length UINT64_MAX",
                hl_command_buffer_fill(cb, fx->buffer, 0, BIG, 0),
                OUT_OF_RANGE);
  EXPECT_STATUS("hl_command_buffer_fill", "offset UINT64_MAX",
                hl_command_buffer_fill(cb, fx->buffer, BIG, 4, 0),
                OUT_OF_RANGE);
  EXPECT_STATUS("hl_command_buffer_fill", "offset 2 (unaligned)",
                hl_command_buffer_fill(cb, fx->buffer, 2, 4, 0),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_update", "host_source NULL",
                hl_command_buffer_update(cb, NULL, fx->buffer, 0, 4),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_update", "length UINT64_MAX",
                hl_command_buffer_update(cb, bytes, fx->buffer, 0, BIG),
                OUT_OF_RANGE);
  EXPECT_STATUS("hl_command_buffer_copy", "source NULL",
                hl_command_buffer_copy(cb, NULL, 0, fx->buffer, 0, 4),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_copy", "length UINT64_MAX",
                hl_command_buffer_copy(cb, fx->buffer, 0, fx->buffer, 0, BIG),
                OUT_OF_RANGE);
  EXPECT_STATUS("hl_command_buffer_dispatch", "kernel_name NULL",
                hl_command_buffer_dispatch(cb, NULL, NULL, 0, NULL, NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_dispatch", "unknown kernel",
                hl_command_buffer_dispatch(cb, "nope", NULL, 0, NULL, NULL),
                NOT_FOUND);
  EXPECT_STATUS(
      "hl_command_buffer_dispatch", "args NULL, count 3",
      hl_command_buffer_dispatch(cb, "fill_pattern", NULL, 3, NULL, NULL),
      INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_dispatch_executable", "cb NULL",
                hl_command_buffer_dispatch_executable(
                    NULL, hl_executable_builtin(), "spin", NULL, 0, NULL, NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_dispatch_executable", "executable NULL",
                hl_command_buffer_dispatch_executable(cb, NULL, "spin", NULL, 0,
                                                      NULL, NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_dispatch_executable", "kernel_name NULL",
                hl_command_buffer_dispatch_executable(
                    cb, hl_executable_builtin(), NULL, NULL, 0, NULL, NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_dispatch_executable", "unknown kernel",
                hl_command_buffer_dispatch_executable(
                    cb, hl_executable_builtin(), "nope", NULL, 0, NULL, NULL),
                NOT_FOUND);
  EXPECT_STATUS(
      "hl_command_buffer_dispatch_executable", "args NULL, count 3",
      hl_command_buffer_dispatch_executable(
          cb, hl_executable_builtin(), "fill_pattern", NULL, 3, NULL, NULL),
      INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_barrier", "cb NULL",
                hl_command_buffer_barrier(NULL), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_finalize", "cb NULL",
                hl_command_buffer_finalize(NULL), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_finalize", "no commands",
                hl_command_buffer_finalize(cb), FAILED_PRECONDITION);
  EXPECT_STATUS("hl_queue_execute", "not finalized",
                hl_queue_execute(fx->queue, NULL, NULL, cb),
                FAILED_PRECONDITION);
  SETUP(hl_command_buffer_fill(cb, fx->buffer, 0, 4, 0));
  SETUP(hl_command_buffer_finalize(cb));
  EXPECT_STATUS("hl_command_buffer_fill", "after finalize",
                hl_command_buffer_fill(cb, fx->buffer, 0, 4, 0),
                FAILED_PRECONDITION);
  EXPECT_STATUS("hl_command_buffer_finalize", "twice",
                hl_command_buffer_finalize(cb), FAILED_PRECONDITION);
  EXPECT_STATUS("hl_queue_execute", "queue NULL",
                hl_queue_execute(NULL, NULL, NULL, cb), INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_execute", "cb NULL",
                hl_queue_execute(fx->queue, NULL, NULL, NULL),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_queue_execute", "queue of another device",
                hl_queue_execute(fx->other_queue, NULL, NULL, cb),
                INVALID_ARGUMENT);
  EXPECT_STATUS("hl_command_buffer_query", "out_info NULL",
                hl_command_buffer_query(cb, NULL), INVALID_ARGUMENT);
  hl_command_buffer_release(cb);
}
#endif

//===----------------------------------------------------------------------===//
// Environment (child processes)
//===----------------------------------------------------------------------===//

static const char* const kBadEnv[][2] = {
    {"HIPLINE_BACKEND", "gpu"},
    {"HIPLINE_ASSUME_NO_ALIAS", "maybe"},
    {"HIPLINE_FALLBACK", "sometimes"},
    {"HIPLINE_POOL_RELEASE_THRESHOLD", "12Q"},
    {"HIPLINE_POOL_RELEASE_THRESHOLD", "99999999999999999999T"},
    {"HIPLINE_CHECKED", "2"},
    {"HIPLINE_FAULTS", "alloc_fail_every=x"},
    {"HIPLINE_LOG", "loud"},
    {"HIPLINE_HOST_DEVICES", "0"},
    {"HIPLINE_ELIDE_FILLS", "sometimes"},
};

static void rows_environment(void) {
  header_ = "environment";
  for (size_t i = 0; i < sizeof(kBadEnv) / sizeof(kBadEnv[0]); ++i) {
    char env[160];
    snprintf(env, sizeof(env), "%s=%s", kBadEnv[i][0], kBadEnv[i][1]);
    const char* args[] = {"--child-env-error", kBadEnv[i][0], NULL};
    int rc = rel_run_self(args, env);
    char input[200];
    snprintf(input, sizeof(input), "%s (child process)", env);
    char got[40];
    snprintf(got, sizeof(got), rc == 0 ? "INVALID_ARGUMENT" : "exit %d", rc);
    add_row("hl_device_create + hl_environment_check", input,
            "INVALID_ARGUMENT", got, rc == 0);
  }
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

static void run_all(void) {
  row_count_ = 0;
  known_bug_count_ = 0;
  rows_status();
  rows_executable();
  fixture_t fx;
  fixture_init(&fx);
  rows_device(&fx);
  rows_semaphore(&fx);
  rows_queue(&fx);
  rows_buffer(&fx);
  rows_invocation(&fx);
#if HL_TEST_HAVE_DISPATCH
  rows_dispatch(&fx);
  rows_command_buffer(&fx);
#endif
  fixture_deinit(&fx);
  rows_environment();
}

static int mismatches(void) {
  int n = 0;
  for (int i = 0; i < row_count_; ++i) n += !rows_[i].ok;
  return n;
}

static void print_markdown(void) {
  printf("| header | function | bad input | expected | result |\n");
  printf("|---|---|---|---|---|\n");
  for (int i = 0; i < row_count_; ++i) {
    const row_t* r = &rows_[i];
    printf("| %s | `%s` | %s | %s | %s |\n", r->header, r->function, r->input,
           r->expected,
           strncmp(r->got, "KNOWN BUG", 9) == 0 ? r->got
           : r->ok                              ? "ok"
                                                : r->got);
  }
  printf("\n%d bad inputs tried, %d mismatched, %d known bugs.\n", row_count_,
         mismatches(), known_bug_count_);
}

static void test_bad_inputs(void** state) {
  run_all();
  print_message("bad inputs tried: %d, mismatched: %d, known bugs: %d\n",
                row_count_, mismatches(), known_bug_count_);
  assert_int_equal(mismatches(), 0);
  assert_true(row_count_ > 200);
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "--child-env-error") == 0) {
    return rel_child_expect_env_error(argv[2]);
  }
  if (argc >= 3 && strcmp(argv[1], "--probe") == 0) {
    return run_probe(argv[2]);
  }
  if (argc >= 2 && strcmp(argv[1], "--markdown") == 0) {
    run_all();
    print_markdown();
    return mismatches() ? 1 : 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
