// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Host reference kernels: the parameter table and each kernel's results on
// edge cases (empty, single, odd sizes, views at unaligned offsets).
#if defined(__linux__)
#define _GNU_SOURCE  // sched_setaffinity, CPU_SET
#include <sched.h>
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>
#include <time.h>
// cmocka.h needs the headers above.
#include <cmocka.h>

#include "hipline/time.h"
#include "kernels/host/host_kernels.h"
#include "kernels/kernel_table.h"
#include "kernels/pattern.h"
#include "runtime/base/time_util.h"
#if defined(__linux__)
#include <sys/wait.h>
#include <unistd.h>
#endif

// Finds the host kernel |name| in the host code object.
static const hl_host_kernel_t* find_kernel(const char* name) {
  const hl_host_code_object_t* object = &hl_host_kernels_code_object;
  for (uint32_t i = 0; i < object->kernel_count; ++i) {
    if (strcmp(object->kernels[i].name, name) == 0) return &object->kernels[i];
  }
  fail_msg("host code object has no kernel '%s'", name);
  return NULL;
}

static void launch(const char* name, void** params,
                   const hl_launch_config_t* config) {
  find_kernel(name)->fn(params, config);
}

// A reference SplitMix64 step (Vigna's splitmix64.c), written independently
// of pattern.h: the pattern word is the high half of the first output for
// the state ((seed << 32) ^ index).
static uint32_t reference_word(uint32_t seed, uint64_t index) {
  uint64_t state = ((uint64_t)seed << 32) ^ index;
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static void test_table_layout(void** state) {
  const hl_host_code_object_t* object = &hl_host_kernels_code_object;
  assert_int_equal(object->magic, HL_HOST_CODE_OBJECT_MAGIC);
  assert_int_equal(object->kernel_count, HL_KERNEL_COUNT);
  assert_int_equal(HL_KERNEL_COUNT, 5);
  // The documented layout, spelled out so a table edit must update it.
  static const struct {
    const char* name;
    uint32_t count;
    uint32_t sizes[4];
  } expected[] = {
      {"fill_pattern", 3, {8, 8, 4}}, {"verify_pattern", 4, {8, 8, 4, 8}},
      {"copy", 3, {8, 8, 8}},         {"spin", 2, {8, 8}},
      {"axpy", 4, {4, 8, 8, 8}},
  };
  for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); ++i) {
    const hl_host_kernel_t* kernel = &object->kernels[i];
    assert_string_equal(kernel->name, expected[i].name);
    assert_non_null(kernel->fn);
    assert_int_equal(kernel->param_count, expected[i].count);
    assert_true(kernel->param_count <= HL_KERNEL_MAX_PARAMS);
    for (uint32_t p = 0; p < 16; ++p) {
      assert_int_equal(kernel->param_sizes[p],
                       p < expected[i].count ? expected[i].sizes[p] : 0);
    }
  }
}

static void test_pattern_word(void** state) {
  // SplitMix64's first output from state 0 is 0xe220a8397b1dcdaf.
  assert_int_equal(hl_pattern_word(0, 0), 0xe220a839u);
  for (uint32_t seed = 0; seed < 4; ++seed) {
    for (uint64_t i = 0; i < 64; ++i) {
      assert_int_equal(hl_pattern_word(seed, i), reference_word(seed, i));
    }
  }
  assert_int_equal(hl_pattern_word(7, 1ull << 40),
                   reference_word(7, 1ull << 40));
  // Neighbours and seeds give different words.
  assert_int_not_equal(hl_pattern_word(1, 0), hl_pattern_word(1, 1));
  assert_int_not_equal(hl_pattern_word(1, 5), hl_pattern_word(2, 5));
}

static void fill(uint32_t* buf, uint64_t words, uint32_t seed) {
  void* params[] = {&buf, &words, &seed};
  launch("fill_pattern", params, NULL);
}

static uint32_t verify(const uint32_t* buf, uint64_t words, uint32_t seed,
                       uint32_t initial) {
  uint32_t mismatches = initial;
  uint32_t* out = &mismatches;
  void* params[] = {&buf, &words, &seed, &out};
  launch("verify_pattern", params, NULL);
  return mismatches;
}

static void test_fill_pattern(void** state) {
  enum { kWords = 64 };
  uint32_t buf[kWords];
  static const uint64_t sizes[] = {0, 1, 2, 7, 33};
  static const uint64_t offsets[] = {0, 3, 5};
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
    for (size_t o = 0; o < sizeof(offsets) / sizeof(offsets[0]); ++o) {
      memset(buf, 0xab, sizeof(buf));
      const uint64_t off = offsets[o], n = sizes[s];
      fill(buf + off, n, 42);
      for (uint64_t i = 0; i < kWords; ++i) {
        // A view's pattern starts at its own index 0; words outside the view
        // stay as they were.
        uint32_t want =
            i >= off && i < off + n ? reference_word(42, i - off) : 0xababababu;
        assert_int_equal(buf[i], want);
      }
    }
  }
}

static void test_verify_pattern(void** state) {
  enum { kWords = 37 };
  uint32_t buf[kWords + 3];
  fill(buf + 3, kWords, 9);
  assert_int_equal(verify(buf + 3, kWords, 9, 0), 0);
  assert_int_equal(verify(buf + 3, 0, 9, 0), 0);
  // The counter accumulates, as the device's atomicAdd does.
  assert_int_equal(verify(buf + 3, kWords, 9, 5), 5);
  // A wrong seed mismatches (almost) everywhere.
  assert_true(verify(buf + 3, kWords, 10, 0) >= kWords - 1);
  // One flipped bit in one word, including the first and last word of an
  // odd-sized view.
  static const size_t flips[] = {0, 17, kWords - 1};
  for (size_t f = 0; f < sizeof(flips) / sizeof(flips[0]); ++f) {
    buf[3 + flips[f]] ^= 1u << 13;
    assert_int_equal(verify(buf + 3, kWords, 9, 0), 1);
    assert_int_equal(verify(buf + 3, kWords, 9, 2), 3);
    buf[3 + flips[f]] ^= 1u << 13;
  }
  assert_int_equal(verify(buf + 3, kWords, 9, 0), 0);
  // A single-word view.
  fill(buf, 1, 1);
  assert_int_equal(verify(buf, 1, 1, 0), 0);
  buf[0] = ~buf[0];
  assert_int_equal(verify(buf, 1, 1, 0), 1);
}

static void test_copy(void** state) {
  enum { kBytes = 256 };
  uint8_t src[kBytes], dst[kBytes];
  for (size_t i = 0; i < kBytes; ++i) src[i] = (uint8_t)(i * 7 + 1);
  static const uint64_t sizes[] = {0, 1, 3, 4, 5, 17, 200};
  static const size_t offsets[][2] = {{0, 0}, {12, 12}, {1, 3}, {3, 0}};
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
    for (size_t o = 0; o < sizeof(offsets) / sizeof(offsets[0]); ++o) {
      memset(dst, 0xee, sizeof(dst));
      void* d = dst + offsets[o][0];
      const void* sp = src + offsets[o][1];
      uint64_t bytes = sizes[s];
      void* params[] = {&d, &sp, &bytes};
      launch("copy", params, NULL);
      for (size_t i = 0; i < kBytes; ++i) {
        size_t begin = offsets[o][0];
        uint8_t want = i >= begin && i < begin + bytes
                           ? src[offsets[o][1] + (i - begin)]
                           : 0xee;
        assert_int_equal(dst[i], want);
      }
    }
  }
}

static void test_spin(void** state) {
  uint32_t blocks = 10;
  uint32_t* out = &blocks;
  uint64_t cycles = 2000000;  // 2 ms at the nominal 1 GHz host clock.
  void* params[] = {&cycles, &out};
  hl_launch_config_t config = {{3, 2, 1}, {64, 1, 1}, 0, 0};
  hl_time_t start = hl_time_now();
  launch("spin", params, &config);
  hl_duration_t elapsed = hl_time_now() - start;
  assert_true(elapsed >= 2000000);
  assert_true(elapsed < 2000000000);
  assert_int_equal(blocks, 16);  // 10 + 3 * 2 * 1 blocks.
  cycles = 0;
  launch("spin", params, NULL);  // No config: one block.
  assert_int_equal(blocks, 17);
  out = NULL;
  launch("spin", params, &config);  // A NULL counter is allowed.
}

static hl_duration_t thread_cpu_ns(void) {
  struct timespec ts;
  assert_int_equal(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts), 0);
  return (hl_duration_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

// spin models device time: the stream is busy for the whole span, but the
// host core is free (a busy wait would use all of it). Compares CPU time to
// wall time, which a loaded machine can only make larger, not smaller.
static void test_spin_sleeps(void** state) {
  uint64_t cycles = 50000000;  // 50 ms.
  uint32_t* out = NULL;
  void* params[] = {&cycles, &out};
  hl_duration_t cpu0 = thread_cpu_ns();
  hl_time_t start = hl_time_now();
  launch("spin", params, NULL);
  hl_duration_t wall = hl_time_now() - start;
  hl_duration_t cpu = thread_cpu_ns() - cpu0;
  assert_true(wall >= 50000000);
  if (cpu > wall / 5) {
    fail_msg("spin used %lld ns of CPU in %lld ns: it busy-waits",
             (long long)cpu, (long long)wall);
  }
}

// spin keeps a device clock per stream thread (host_kernels.c): a spin
// starts at its launch or when the previous one ended, whichever is later,
// so a sleep's overshoot is not added to every spin of a back-to-back run.
// Checked on a fresh thread (the clock is per thread) with bounds that a
// loaded machine can only make safer.
static hl_duration_t spin_from(hl_time_t launch_ns, uint64_t cycles) {
  uint32_t* out = NULL;
  void* params[] = {&cycles, &out};
  hl_launch_config_t config = {{1, 1, 1}, {1, 1, 1}, 0, launch_ns};
  hl_time_t start = hl_time_now();
  launch("spin", params, &config);
  return hl_time_now() - start;
}

static int spin_clock_main(void* arg) {
  (void)arg;
  const hl_duration_t ms = 1000000;
  // Launched a second ago, 200 ms long: a device would have finished it.
  hl_duration_t late = spin_from(hl_time_now() - 1000 * ms, 200 * ms);
  if (late >= 200 * ms) return 1;
  // Three 20 ms spins launched together run back to back: 60 ms at least.
  hl_time_t t0 = hl_time_now();
  for (int i = 0; i < 3; ++i) (void)spin_from(t0, 20 * ms);
  if (hl_time_now() - t0 < 60 * ms) return 2;
  // After an idle gap, a spin launched now takes its whole length again.
  thrd_sleep(&(struct timespec){.tv_nsec = 30 * ms}, NULL);
  hl_time_t launch_ns = hl_time_now();
  (void)spin_from(launch_ns, 20 * ms);
  if (hl_time_now() - launch_ns < 20 * ms) return 3;
  return 0;
}

static void test_spin_device_clock(void** state) {
  (void)state;
  thrd_t thread;
  assert_int_equal(thrd_create(&thread, spin_clock_main, NULL), thrd_success);
  int rc = -1;
  assert_int_equal(thrd_join(thread, &rc), thrd_success);
  assert_int_equal(rc, 0);  // 1: slept past a passed deadline; 2, 3: short.
}

// The device clock counts the work a stream's thread did between spins, not
// the time it spent waiting for a core: a GPU is not slowed down because the
// host thread that models it was preempted (several stream threads sharing
// two cores did exactly that to the multistream benchmark). The tests below
// make a thread wait for its core by pinning a burner thread to its CPU.
#if defined(__linux__)
typedef struct shared_core_t {
  int cpu;
  atomic_bool stop;
  atomic_bool running;
  thrd_t burner;
} shared_core_t;

static bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

static int burner_main(void* arg) {
  shared_core_t* core = arg;
  if (!pin_to(core->cpu)) return 1;
  atomic_store(&core->running, true);
  while (!atomic_load_explicit(&core->stop, memory_order_relaxed)) {
  }
  return 0;
}

// Pins the calling thread to |core->cpu| and starts the burner there.
static bool share_core_begin(shared_core_t* core) {
  if (!pin_to(core->cpu) ||
      thrd_create(&core->burner, burner_main, core) != thrd_success) {
    return false;
  }
  while (!atomic_load(&core->running)) thrd_yield();
  return true;
}

// Stops the burner; false when it could not run where it should.
static bool share_core_end(shared_core_t* core) {
  atomic_store(&core->stop, true);
  int rc = 1;
  thrd_join(core->burner, &rc);
  return rc == 0;
}

// thread_cpu_ns without cmocka's assert (this runs on another thread).
static hl_duration_t cpu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (hl_duration_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

// Spends |ns| of the calling thread's CPU time.
static void burn_cpu(hl_duration_t ns) {
  hl_duration_t cpu0 = cpu_now_ns();
  while (cpu_now_ns() - cpu0 < ns) {
  }
}

// Runs |main| (on a shared_core_t) on a thread of its own; its result 1
// means the setup failed (skip), any other non-zero a failure.
static void run_sharing_a_core(thrd_start_t main) {
  FILE* schedstat = fopen("/proc/thread-self/schedstat", "r");
  if (!schedstat) skip();  // No run-delay accounting: wall time is used.
  fclose(schedstat);
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) skip();
  shared_core_t core = {.cpu = -1};
  for (int i = 0; i < CPU_SETSIZE && core.cpu < 0; ++i) {
    if (CPU_ISSET(i, &allowed)) core.cpu = i;
  }
  atomic_init(&core.stop, false);
  atomic_init(&core.running, false);
  thrd_t thread;
  assert_int_equal(thrd_create(&thread, main, &core), thrd_success);
  int rc = -1;
  assert_int_equal(thrd_join(thread, &rc), thrd_success);
  if (rc == 1) skip();
  assert_int_equal(rc, 0);
}

// The spinning thread does 60 ms of work while the burner shares its core;
// then a spin launched together with the first follows.
// 0: passed; 1: setup failed (skip); 2: the wait for the core counted as
// device time; 3: the work did not.
static int preempted_clock_main(void* arg) {
  shared_core_t* core = arg;
  const hl_duration_t ms = 1000000;
  if (!share_core_begin(core)) return 1;
  hl_time_t t0 = hl_time_now();
  (void)spin_from(t0, 30 * ms);
  // 60 ms of this thread's CPU time, with the burner taking turns on the
  // core: about 120 ms of wall time, half of it spent waiting.
  hl_time_t worked_from = hl_time_now();
  burn_cpu(60 * ms);
  hl_time_t worked_to = hl_time_now();
  if (!share_core_end(core)) return 1;
  (void)spin_from(t0, 60 * ms);
  hl_time_t end = hl_time_now();
  printf("    worked %lld ms of wall time; the next 60 ms spin took %lld ms\n",
         (long long)((worked_to - worked_from) / ms),
         (long long)((end - worked_to) / ms));
  // The work itself is device time: 30 + 60 + 60 ms at least.
  if (end - t0 < 150 * ms) return 3;
  // Wall-clock accounting would end the spin 60 ms after the work; the
  // waiting (about 60 ms) is not device time, so it ends well before.
  if (worked_to - worked_from < 90 * ms) return 1;  // Hardly any waiting.
  if (end - worked_to >= 45 * ms) return 2;
  return 0;
}

// A forked child's thread is a new task: its run delay starts afresh, and
// must not be read through the descriptor its parent's thread opened (which
// names the parent's thread). The parent's thread first waits for its core
// for a while, so the two values differ.
// 0: passed; 1: setup failed (skip); 2: the child read its parent's delay.
static int run_delay_fork_main(void* arg) {
  shared_core_t* core = arg;
  const hl_duration_t ms = 1000000;
  if (!share_core_begin(core)) return 1;
  burn_cpu(30 * ms);
  if (!share_core_end(core)) return 1;
  int64_t parent = hl_thread_run_delay_ns();  // Opens this thread's file.
  if (parent < 10 * ms) return 1;             // Hardly waited: no contrast.
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    int64_t child = hl_thread_run_delay_ns();
    _exit(child >= 0 && child < parent / 2 ? 0 : 2);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 1;
  return WEXITSTATUS(status);
}
#endif

static void test_spin_clock_skips_waits_for_a_core(void** state) {
  (void)state;
#if defined(__linux__)
  run_sharing_a_core(preempted_clock_main);
#else
  skip();
#endif
}

static void test_run_delay_is_the_callers_after_fork(void** state) {
  (void)state;
#if defined(__linux__)
  run_sharing_a_core(run_delay_fork_main);
#else
  skip();
#endif
}

static void axpy(float a, const float* x, float* y, uint64_t n) {
  void* params[] = {&a, &x, &y, &n};
  launch("axpy", params, NULL);
}

static void test_axpy(void** state) {
  enum { kN = 9 };
  float x[kN + 3], y[kN + 3];
  for (int i = 0; i < kN + 3; ++i) {
    x[i] = (float)i * 0.5f;
    y[i] = 100.0f + (float)i;
  }
  axpy(2.0f, x, y, 0);
  assert_true(y[0] == 100.0f);
  // An odd-sized view at word 3 of both arrays.
  axpy(2.0f, x + 3, y + 3, kN);
  for (int i = 0; i < kN + 3; ++i) {
    float want = i < 3 ? 100.0f + (float)i : 100.0f + (float)i + (float)i;
    assert_true(y[i] == want);
  }
  // The product is rounded before the add: a fused multiply-add would give
  // 2^-46 here instead of 0.
  const float a = 1.0f + 0x1p-23f;
  float yy = -(1.0f + 0x1p-22f);
  axpy(a, &a, &yy, 1);
  assert_true(yy == 0.0f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_layout),
      cmocka_unit_test(test_pattern_word),
      cmocka_unit_test(test_fill_pattern),
      cmocka_unit_test(test_verify_pattern),
      cmocka_unit_test(test_copy),
      cmocka_unit_test(test_spin),
      cmocka_unit_test(test_spin_sleeps),
      cmocka_unit_test(test_spin_device_clock),
      cmocka_unit_test(test_spin_clock_skips_waits_for_a_core),
      cmocka_unit_test(test_run_delay_is_the_callers_after_fork),
      cmocka_unit_test(test_axpy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
