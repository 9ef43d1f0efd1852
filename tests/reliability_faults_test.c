// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Fault injection (runtime/base/faults.h) through the public API on the test
// backend: injected allocation failures surface as RESOURCE_EXHAUSTED on the
// alloca's signal semaphore, injected submission failures as INTERNAL on the
// signal semaphores and on everything that depends on them, random stream
// delays keep a verified multi-queue pipeline in order, and malformed
// HIPLINE_FAULTS specs are INVALID_ARGUMENT naming the variable (in-process
// and through hl_device_create in a child process). Submission failures are
// injected by the timeline, on every backend; allocation failures and stream
// delays by the backend, where it injects faults (injects_faults).
#include "tests/reliability_util.h"

#define SIZE 4096u

// Fills |b| with |pattern| on |q| after |ws|@|wv|, signalling |ss|@|sv|.
static hl_status_t fill(hl_queue_t* q, hl_semaphore_t* ws, uint64_t wv,
                        hl_semaphore_t* ss, uint64_t sv, hl_buffer_t* b,
                        uint32_t pattern) {
  hl_fence_t* w = hl_test_fence(ws, wv);
  hl_fence_t* s = hl_test_fence(ss, sv);
  hl_status_t st = hl_queue_fill(q, w, s, b, 0, hl_buffer_length(b), pattern);
  hl_fence_release(w);
  hl_fence_release(s);
  return st;
}

static bool words_equal(const uint32_t* words, size_t count, uint32_t value) {
  for (size_t i = 0; i < count; ++i) {
    if (words[i] != value) return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Allocation failures
//===----------------------------------------------------------------------===//

// alloc_fail_every=1: every alloca fails after its trim-and-retry, on its own
// signal semaphore, and every injected failure is accounted for (two per
// alloca: the first attempt and the retry).
static void test_alloc_failures_surface(void** state) {
  hl_device_t* device = rel_device_create(0);
  hl_test_require_fault_injection(device);
  hl_queue_t* queue = hl_test_queue_create(device);
  enum { N = 16 };
  hl_semaphore_t* sems[N];
  hl_buffer_t* buffers[N];
  hl_fault_counts_t before = rel_fault_counts();
  hl_memory_stats_t stats_before = hl_test_memory_stats(device);
  rel_faults_set("alloc_fail_every=1");
  for (int i = 0; i < N; ++i) {
    sems[i] = hl_test_semaphore_create();
    hl_fence_t* s = hl_test_fence(sems[i], 1);
    HL_ASSERT_OK(hl_queue_alloca(queue, NULL, s, SIZE, 0, &buffers[i]));
    hl_fence_release(s);
  }
  int surfaced = 0;
  for (int i = 0; i < N; ++i) {
    hl_status_t st = hl_semaphore_wait(sems[i], 1, REL_DEADLINE());
    if (hl_status_code(st) == HL_STATUS_RESOURCE_EXHAUSTED) ++surfaced;
    hl_test_assert_status_has(st, HL_STATUS_RESOURCE_EXHAUSTED,
                              "HIPLINE_FAULTS", NULL);
  }
  rel_faults_clear();
  hl_fault_counts_t after = rel_fault_counts();
  assert_int_equal(surfaced, N);
  assert_int_equal(after.allocs_failed - before.allocs_failed, 2 * N);
  hl_memory_stats_t stats = hl_test_memory_stats(device);
  assert_int_equal(stats.ooms - stats_before.ooms, N);
  assert_int_equal(stats.bytes_in_use, 0);

  // A dependent of a failed alloca fails with the same status, and a dealloca
  // of a buffer whose alloca failed is cancelled rather than freeing nothing.
  hl_semaphore_t* dep = hl_test_semaphore_create();
  HL_ASSERT_OK(fill(queue, sems[0], 1, dep, 1, buffers[0], 7));
  hl_test_assert_status_has(hl_semaphore_wait(dep, 1, REL_DEADLINE()),
                            HL_STATUS_RESOURCE_EXHAUSTED, "HIPLINE_FAULTS",
                            NULL);
  for (int i = 0; i < N; ++i) {
    hl_buffer_release(buffers[i]);
    hl_semaphore_release(sems[i]);
  }
  hl_semaphore_release(dep);

  // Without faults the device still works.
  hl_semaphore_t* ok = hl_test_semaphore_create();
  hl_fence_t* s = hl_test_fence(ok, 1);
  hl_buffer_t* b = NULL;
  HL_ASSERT_OK(hl_queue_alloca(queue, NULL, s, SIZE, 0, &b));
  hl_fence_release(s);
  HL_ASSERT_OK(fill(queue, ok, 1, ok, 2, b, 0xabcdu));
  HL_ASSERT_OK(hl_semaphore_wait(ok, 2, REL_DEADLINE()));
  hl_fence_t* w = hl_test_fence(ok, 2);
  HL_ASSERT_OK(hl_queue_dealloca(queue, w, NULL, b));
  hl_fence_release(w);
  hl_buffer_release(b);
  hl_semaphore_release(ok);
  HL_ASSERT_OK(hl_device_wait_idle(device, REL_DEADLINE()));
  assert_true(hl_test_poll_bytes_in_use(device, 0, 5000));
  hl_queue_release(queue);
  hl_device_release(device);
}

// alloc_fail_every=N (N >= 2): the trim-and-retry of hl_queue_alloca takes
// the next allocation slot, which never fails, so every injected failure is
// absorbed and nothing surfaces. The accounting still has to balance: with
// allocas issued one at a time, backend allocation calls = allocas +
// injected failures, and injected = floor(calls / N).
static void test_alloc_failures_every_n_recovered(void** state) {
  hl_device_t* device = rel_device_create(1);
  hl_test_require_fault_injection(device);
  hl_queue_t* queue = hl_test_queue_create(device);
  hl_semaphore_t* sem = hl_test_semaphore_create();
  enum { M = 40, EVERY = 3 };
  hl_fault_counts_t before = rel_fault_counts();
  rel_faults_set("alloc_fail_every=3");
  uint32_t host[SIZE / 4];
  uint64_t v = 0;
  for (int i = 0; i < M; ++i) {
    hl_fence_t* s = hl_test_fence(sem, ++v);
    hl_buffer_t* b = NULL;
    HL_ASSERT_OK(hl_queue_alloca(queue, NULL, s, SIZE, 0, &b));
    hl_fence_release(s);
    HL_ASSERT_OK(fill(queue, sem, v, sem, v + 1, b, (uint32_t)i * 2654435761u));
    ++v;
    hl_fence_t* w = hl_test_fence(sem, v);
    hl_fence_t* s2 = hl_test_fence(sem, v + 1);
    memset(host, 0, sizeof(host));
    HL_ASSERT_OK(hl_queue_read(queue, w, s2, b, 0, host, SIZE));
    hl_fence_release(w);
    hl_fence_release(s2);
    ++v;
    HL_ASSERT_OK(hl_queue_dealloca(queue, NULL, NULL, b));
    hl_buffer_release(b);
    HL_ASSERT_OK(hl_semaphore_wait(sem, v, REL_DEADLINE()));
    assert_true(words_equal(host, SIZE / 4, (uint32_t)i * 2654435761u));
  }
  rel_faults_clear();
  hl_fault_counts_t after = rel_fault_counts();
  uint64_t injected = after.allocs_failed - before.allocs_failed;
  uint64_t calls = M + injected;
  assert_int_equal(injected, calls / EVERY);
  assert_true(injected > 0);
  hl_memory_stats_t stats = hl_test_memory_stats(device);
  assert_int_equal(stats.ooms, 0);
  assert_int_equal(stats.use_after_free, 0);
  HL_ASSERT_OK(hl_device_wait_idle(device, REL_DEADLINE()));
  assert_true(hl_test_poll_bytes_in_use(device, 0, 5000));
  hl_semaphore_release(sem);
  hl_queue_release(queue);
  hl_device_release(device);
}

//===----------------------------------------------------------------------===//
// Submission failures
//===----------------------------------------------------------------------===//

// fail_submission=K: the Kth issued submission fails with INTERNAL on its
// signal semaphores; work on another queue that waits on it fails too, and
// the queue itself is not failed (later submissions succeed).
static void test_submission_failure_propagates(void** state) {
  hl_device_t* device = rel_device_create(0);
  hl_queue_t* q0 = hl_test_queue_create(device);
  hl_queue_t* q1 = hl_test_queue_create(device);
  hl_semaphore_t* a = hl_test_semaphore_create();
  hl_semaphore_t* b = hl_test_semaphore_create();
  hl_fault_counts_t before = rel_fault_counts();
  rel_faults_set("fail_submission=3");
  // Submissions 1..5 on q0, each signalling a@i, issued in order.
  for (uint64_t i = 1; i <= 5; ++i) {
    hl_fence_t* s = hl_test_fence(a, i);
    HL_ASSERT_OK(hl_queue_barrier(q0, NULL, s));
    hl_fence_release(s);
    if (i <= 2) HL_ASSERT_OK(hl_semaphore_wait(a, i, REL_DEADLINE()));
  }
  // a@3 fails: host waits see the injected INTERNAL status.
  hl_test_assert_status_has(hl_semaphore_wait(a, 3, REL_DEADLINE()),
                            HL_STATUS_INTERNAL, "HIPLINE_FAULTS", NULL);
  // A dependent on q1 (waits a@3, signals b@1) fails with it, and so does
  // the next dependent in a chain (b@1 -> b@2).
  hl_fence_t* w = hl_test_fence(a, 3);
  hl_fence_t* s = hl_test_fence(b, 1);
  HL_ASSERT_OK(hl_queue_barrier(q1, w, s));
  hl_fence_release(w);
  hl_fence_release(s);
  w = hl_test_fence(b, 1);
  s = hl_test_fence(b, 2);
  HL_ASSERT_OK(hl_queue_barrier(q1, w, s));
  hl_fence_release(w);
  hl_fence_release(s);
  hl_test_assert_status_has(hl_semaphore_wait(b, 2, REL_DEADLINE()),
                            HL_STATUS_INTERNAL, "injected", NULL);
  rel_faults_clear();
  hl_fault_counts_t after = rel_fault_counts();
  assert_int_equal(after.submissions_failed - before.submissions_failed, 1);
  // The queue is not failed: a fresh semaphore on q0 gets signalled.
  HL_ASSERT_OK(hl_queue_status(q0));
  hl_semaphore_t* c = hl_test_semaphore_create();
  s = hl_test_fence(c, 1);
  HL_ASSERT_OK(hl_queue_barrier(q0, NULL, s));
  hl_fence_release(s);
  HL_ASSERT_OK(hl_semaphore_wait(c, 1, REL_DEADLINE()));
  hl_queue_stats_t qs;
  hl_queue_stats(q0, &qs);
  assert_true(qs.failed >= 1);
  hl_semaphore_release(a);
  hl_semaphore_release(b);
  hl_semaphore_release(c);
  hl_queue_release(q0);
  hl_queue_release(q1);
  hl_device_release(device);
}

// fail_submission_every=N over M independent submissions (one semaphore
// each): exactly the injected ones fail, none is lost, none is extra.
static void test_submission_failures_counted(void** state) {
  hl_fault_counts_t before = rel_fault_counts();
  rel_faults_set("stream_delay_us=50,seed=9");
  hl_device_t* device = rel_device_create(0);
  hl_queue_t* queues[3] = {hl_test_queue_create(device),
                           hl_test_queue_create(device),
                           hl_test_queue_create(device)};
  enum { M = 60 };
  hl_semaphore_t* sems[M];
  rel_faults_set("fail_submission_every=4,stream_delay_us=50,seed=9");
  for (int i = 0; i < M; ++i) {
    sems[i] = hl_test_semaphore_create();
    hl_fence_t* s = hl_test_fence(sems[i], 1);
    HL_ASSERT_OK(hl_queue_barrier(queues[i % 3], NULL, s));
    hl_fence_release(s);
  }
  int failed = 0;
  for (int i = 0; i < M; ++i) {
    hl_status_t st = hl_semaphore_wait(sems[i], 1, REL_DEADLINE());
    if (st) {
      ++failed;
      hl_test_assert_status_has(st, HL_STATUS_INTERNAL, "HIPLINE_FAULTS", NULL);
    }
    hl_semaphore_release(sems[i]);
  }
  rel_faults_clear();
  hl_fault_counts_t after = rel_fault_counts();
  assert_int_equal(failed, M / 4);
  assert_int_equal(after.submissions_failed - before.submissions_failed,
                   (uint64_t)failed);
  for (int i = 0; i < 3; ++i) hl_queue_release(queues[i]);
  hl_device_release(device);
}

//===----------------------------------------------------------------------===//
// Delays
//===----------------------------------------------------------------------===//

// A three-stage pipeline over three queues under random stream delays:
// q0 allocates and fills, q1 copies into a second buffer, q2 reads both
// back. Each stage only waits on semaphores, so only correct ordering gives
// the right data; the buffers are deallocated on q2 after the reads.
static void test_delays_keep_pipeline_order(void** state) {
  // Streams pick up stream_delay_us when they are created.
  hl_fault_counts_t before = rel_fault_counts();
  rel_faults_set("stream_delay_us=300,seed=42");
  hl_device_t* device = rel_device_create(1);
  if (!device->backend->injects_faults) rel_faults_clear();
  hl_test_require_fault_injection(device);
  hl_queue_t* q[3] = {hl_test_queue_create(device),
                      hl_test_queue_create(device),
                      hl_test_queue_create(device)};
  hl_semaphore_t* s[3] = {hl_test_semaphore_create(),
                          hl_test_semaphore_create(),
                          hl_test_semaphore_create()};
  enum { STEPS = 24, WORDS = 256 };
  static uint32_t out_a[STEPS][WORDS], out_b[STEPS][WORDS];
  memset(out_a, 0, sizeof(out_a));
  memset(out_b, 0, sizeof(out_b));
  uint64_t v0 = 0, v1 = 0, v2 = 0;
  for (int i = 0; i < STEPS; ++i) {
    uint32_t pattern = 0x9e3779b9u * (uint32_t)(i + 1);
    hl_fence_t* f = hl_test_fence(s[0], ++v0);
    hl_buffer_t* a = NULL;
    HL_ASSERT_OK(hl_queue_alloca(q[0], NULL, f, WORDS * 4, 0, &a));
    hl_fence_release(f);
    HL_ASSERT_OK(fill(q[0], s[0], v0, s[0], v0 + 1, a, pattern));
    ++v0;
    // q1: alloca b, copy a -> b after the fill.
    f = hl_test_fence(s[1], ++v1);
    hl_buffer_t* b = NULL;
    HL_ASSERT_OK(hl_queue_alloca(q[1], NULL, f, WORDS * 4, 0, &b));
    hl_fence_release(f);
    hl_fence_t* w = hl_test_fence(s[0], v0);
    HL_ASSERT_OK(hl_fence_insert(w, s[1], v1));
    f = hl_test_fence(s[1], ++v1);
    HL_ASSERT_OK(hl_queue_copy(q[1], w, f, a, 0, b, 0, WORDS * 4));
    hl_fence_release(w);
    hl_fence_release(f);
    // Overwrite a on q0 after the copy: a copy that ran late would see it.
    w = hl_test_fence(s[1], v1);
    HL_ASSERT_OK(hl_fence_insert(w, s[0], v0));
    f = hl_test_fence(s[0], ++v0);
    HL_ASSERT_OK(hl_queue_fill(q[0], w, f, a, 0, WORDS * 4, ~pattern));
    hl_fence_release(w);
    hl_fence_release(f);
    // q2: read both after both writers.
    w = hl_test_fence(s[0], v0);
    HL_ASSERT_OK(hl_fence_insert(w, s[1], v1));
    f = hl_test_fence(s[2], ++v2);
    HL_ASSERT_OK(hl_queue_read(q[2], w, f, a, 0, out_a[i], WORDS * 4));
    hl_fence_release(f);
    f = hl_test_fence(s[2], ++v2);
    HL_ASSERT_OK(hl_queue_read(q[2], w, f, b, 0, out_b[i], WORDS * 4));
    hl_fence_release(f);
    hl_fence_release(w);
    HL_ASSERT_OK(hl_queue_dealloca(q[2], NULL, NULL, a));
    HL_ASSERT_OK(hl_queue_dealloca(q[2], NULL, NULL, b));
    hl_buffer_release(a);
    hl_buffer_release(b);
  }
  HL_ASSERT_OK(hl_semaphore_wait(s[2], v2, REL_DEADLINE()));
  for (int i = 0; i < STEPS; ++i) {
    uint32_t pattern = 0x9e3779b9u * (uint32_t)(i + 1);
    assert_true(words_equal(out_a[i], WORDS, ~pattern));
    assert_true(words_equal(out_b[i], WORDS, pattern));
  }
  HL_ASSERT_OK(hl_device_wait_idle(device, REL_DEADLINE()));
  rel_faults_clear();
  hl_fault_counts_t after = rel_fault_counts();
  assert_true(after.delays_injected > before.delays_injected);
  assert_int_equal(hl_test_memory_stats(device).use_after_free, 0);
  assert_true(hl_test_poll_bytes_in_use(device, 0, 5000));
  for (int i = 0; i < 3; ++i) {
    hl_semaphore_release(s[i]);
    hl_queue_release(q[i]);
  }
  hl_device_release(device);
}

//===----------------------------------------------------------------------===//
// HIPLINE_FAULTS parsing
//===----------------------------------------------------------------------===//

static const char* const kBadSpecs[] = {
    "bogus=1",                                       // unknown key
    "alloc_fail_every=x",                            // bad number
    "alloc_fail_every=-1",                           // bad number
    "alloc_fail_every=1x",                           // trailing junk
    "alloc_fail_every=99999999999999999999",         // overflow
    "stream_delay_us=1000001",                       // above the maximum
    "alloc_fail_every",                              // missing '='
    "alloc_fail_every=3,",                           // trailing comma
    ",seed=1",                                       // leading comma
    "seed=1,,alloc_fail_every=2",                    // empty item
    "=5",                                            // empty key
    "seed=",                                         // empty value
    "ALLOC_FAIL_EVERY=2",                            // keys are case sensitive
    "seed=1,seed=2",                                 // a key given twice
    "alloc_fail_every=2,seed=1,alloc_fail_every=3",  // ... anywhere
};

static void test_parse_errors(void** state) {
  for (size_t i = 0; i < sizeof(kBadSpecs) / sizeof(kBadSpecs[0]); ++i) {
    hl_faults_t f;
    memset(&f, 0x5a, sizeof(f));
    hl_status_t st = hl_faults_parse(kBadSpecs[i], &f);
    if (hl_status_code(st) != HL_STATUS_INVALID_ARGUMENT) {
      hl_status_free(st);
      fail_msg("spec '%s' was accepted", kBadSpecs[i]);
    }
    hl_test_assert_status_has(st, HL_STATUS_INVALID_ARGUMENT, "HIPLINE_FAULTS",
                              NULL);
  }
}

static void test_parse_good(void** state) {
  hl_faults_t f;
  HL_ASSERT_OK(hl_faults_parse(
      "alloc_fail_every=7,stream_delay_us=100,fail_submission=3,"
      "fail_submission_every=5,seed=11",
      &f));
  assert_int_equal(f.alloc_fail_every, 7);
  assert_int_equal(f.stream_delay_us, 100);
  assert_int_equal(f.fail_submission, 3);
  assert_int_equal(f.fail_submission_every, 5);
  assert_int_equal(f.seed, 11);
  HL_ASSERT_OK(hl_faults_parse(NULL, &f));
  assert_int_equal(f.alloc_fail_every, 0);
  assert_int_equal(f.seed, 1);
  HL_ASSERT_OK(hl_faults_parse("", &f));
  assert_int_equal(f.stream_delay_us, 0);
}

// The same specs through the environment: hl_device_create and
// hl_environment_check in a child process fail naming HIPLINE_FAULTS.
static void test_parse_errors_env(void** state) {
  for (size_t i = 0; i < sizeof(kBadSpecs) / sizeof(kBadSpecs[0]); ++i) {
    char env[256];
    snprintf(env, sizeof(env), "HIPLINE_FAULTS=%s", kBadSpecs[i]);
    const char* args[] = {"--child-env-error", "HIPLINE_FAULTS", NULL};
    int rc = rel_run_self(args, env);
    if (rc != 0) fail_msg("%s: child exited %d", env, rc);
  }
  // A valid spec creates a device.
  const char* args[] = {"--child-create", NULL};
  assert_int_equal(
      rel_run_self(args, "HIPLINE_FAULTS=seed=3,stream_delay_us=1"), 0);
}

static int child_create(void) {
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = hl_test_backend_kind();
  hl_device_t* d = NULL;
  hl_status_t st = hl_device_create(&o, hl_allocator_system(), &d);
  if (st) {
    hl_status_fprint(stderr, "child: ", st);
    hl_status_free(st);
    return 1;
  }
  hl_device_release(d);
  return 0;
}

//===----------------------------------------------------------------------===//
// wait_idle means idle (issue 19)
//===----------------------------------------------------------------------===//

typedef struct idle_probe_t {
  atomic_int started;
  atomic_int finished;
  atomic_int ran_after_idle;  // Started after wait_idle returned.
  atomic_bool idle_returned;
  int sleep_ms;
} idle_probe_t;

static void idle_probe_fn(void* user) {
  idle_probe_t* p = (idle_probe_t*)user;
  if (atomic_load(&p->idle_returned)) atomic_fetch_add(&p->ran_after_idle, 1);
  atomic_fetch_add(&p->started, 1);
  if (p->sleep_ms) hl_test_sleep_ms(p->sleep_ms);
  atomic_fetch_add(&p->finished, 1);
}

// Checked mode: a slow host call, then a use-after-free fill (fails the
// queue when it runs), then another host call. wait_idle on the queue (or the
// device) returns the failure only once nothing submitted before it can
// still run: the later host call has finished or will never start. Before
// the fix it returned as soon as the timeline failed, with the later call
// still to run (ASan: heap-use-after-free in the callback).
static void run_wait_idle_after_checked_failure(bool device_wide) {
  hl_device_t* d = rel_device_create(1);
  hl_test_require_checked(d);
  hl_queue_t* q = hl_test_queue_create(d);
  hl_queue_t* other = hl_test_queue_create(d);
  hl_semaphore_t* s = hl_test_semaphore_create();
  idle_probe_t* slow = calloc(1, sizeof(*slow));
  idle_probe_t* later = calloc(1, sizeof(*later));
  idle_probe_t* elsewhere = calloc(1, sizeof(*elsewhere));
  slow->sleep_ms = 100;
  later->sleep_ms = 20;
  elsewhere->sleep_ms = 100;
  HL_ASSERT_OK(hl_queue_host_call(q, NULL, NULL, idle_probe_fn, slow));
  hl_buffer_t* b = NULL;
  hl_fence_t* sig1 = hl_test_fence(s, 1);
  HL_ASSERT_OK(hl_queue_alloca(q, NULL, sig1, SIZE, 0, &b));
  hl_fence_t* w1 = hl_test_fence(s, 1);
  hl_fence_t* sig2 = hl_test_fence(s, 2);
  HL_ASSERT_OK(hl_queue_dealloca(q, w1, sig2, b));
  HL_ASSERT_OK(fill(q, s, 2, s, 3, b, 0xDEADBEEFu));  // Use after free.
  HL_ASSERT_OK(hl_queue_host_call(q, NULL, NULL, idle_probe_fn, later));
  if (device_wide) {
    // The device's other queues drain too, even after one failed.
    HL_ASSERT_OK(
        hl_queue_host_call(other, NULL, NULL, idle_probe_fn, elsewhere));
  }
  hl_status_t st = device_wide ? hl_device_wait_idle(d, REL_DEADLINE())
                               : hl_queue_wait_idle(q, REL_DEADLINE());
  atomic_store(&later->idle_returned, true);
  atomic_store(&elsewhere->idle_returned, true);
  hl_test_assert_status_has(st, HL_STATUS_FAILED_PRECONDITION, NULL, NULL);
  assert_int_equal(atomic_load(&slow->finished), 1);
  // Idle: nothing half-run now ...
  assert_int_equal(atomic_load(&later->started), atomic_load(&later->finished));
  if (device_wide) assert_int_equal(atomic_load(&elsewhere->finished), 1);
  hl_fence_release(sig1);
  hl_fence_release(w1);
  hl_fence_release(sig2);
  hl_buffer_release(b);
  hl_semaphore_release(s);
  hl_queue_release(q);
  hl_queue_release(other);
  hl_device_release(d);
  // ... and nothing started afterwards (the releases let any stray work run
  // to the end before the device goes).
  assert_int_equal(atomic_load(&later->ran_after_idle), 0);
  assert_int_equal(atomic_load(&elsewhere->ran_after_idle), 0);
  free(slow);
  free(later);
  free(elsewhere);
}

static void test_queue_wait_idle_after_checked_failure(void** state) {
  run_wait_idle_after_checked_failure(false);
}

static void test_device_wait_idle_after_checked_failure(void** state) {
  run_wait_idle_after_checked_failure(true);
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "--child-env-error") == 0) {
    return rel_child_expect_env_error(argv[2]);
  }
  if (argc >= 2 && strcmp(argv[1], "--child-create") == 0) {
    return child_create();
  }
  // Exits 77 (skipped) when the hip backend has no device, before any child.
  (void)hl_test_backend_kind();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_alloc_failures_surface),
      cmocka_unit_test(test_alloc_failures_every_n_recovered),
      cmocka_unit_test(test_submission_failure_propagates),
      cmocka_unit_test(test_submission_failures_counted),
      cmocka_unit_test(test_delays_keep_pipeline_order),
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_parse_good),
      cmocka_unit_test(test_parse_errors_env),
      cmocka_unit_test(test_queue_wait_idle_after_checked_failure),
      cmocka_unit_test(test_device_wait_idle_after_checked_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
