// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// See cpu_placement.h.
#if defined(__linux__)
#define _GNU_SOURCE
#include <dirent.h>
#include <sched.h>
#include <unistd.h>
#endif

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <time.h>

#include "bench/cpu_placement.h"

static const char* const kModeNames[] = {"free", "same", "split"};

bool bench_cpus_parse(const char* text, bench_cpus_t* out_mode) {
  for (int i = 0; i < 3; ++i) {
    if (text && strcmp(text, kModeNames[i]) == 0) {
      *out_mode = (bench_cpus_t)i;
      return true;
    }
  }
  return false;
}

const char* bench_cpus_name(bench_cpus_t mode) {
  return mode >= BENCH_CPUS_FREE && mode <= BENCH_CPUS_SPLIT ? kModeNames[mode]
                                                             : "free";
}

void bench_cpus_print_round_trip(double round_trip_ns) {
  if (round_trip_ns <= 0) return;
  printf(
      "machine: a cache line's round trip between two cores %.1f ns (two "
      "threads taking turns on one atomic)\n",
      round_trip_ns);
}

#if defined(__linux__)

// Pins thread |tid| (0: the caller) to |cpu|.
static bool pin(pid_t tid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(tid, sizeof(set), &set) != 0) {
    fprintf(stderr, "--cpus: cannot place thread %d on CPU %d\n", (int)tid,
            cpu);
    return false;
  }
  return true;
}

// Fills |out| with the first two CPUs of |allowed| (-1: none); returns how
// many there are, at most 2.
static int first_two_cpus(const cpu_set_t* allowed, int out[2]) {
  int found = 0;
  out[0] = out[1] = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; ++cpu) {
    if (CPU_ISSET(cpu, allowed)) out[found++] = cpu;
  }
  return found;
}

// The first two CPUs this process may run on (-1: none).
static int placement_cpus_[2] = {-1, -1};

bool bench_cpus_begin(bench_cpus_t mode) {
  if (mode == BENCH_CPUS_FREE) return true;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    fprintf(stderr, "--cpus %s: cannot read the CPUs allowed\n",
            bench_cpus_name(mode));
    return false;
  }
  int found = first_two_cpus(&allowed, placement_cpus_);
  if (found < (mode == BENCH_CPUS_SPLIT ? 2 : 1)) {
    fprintf(stderr, "--cpus %s needs two CPUs; this process may use %d\n",
            bench_cpus_name(mode), found);
    return false;
  }
  return pin(0, placement_cpus_[0]);
}

bool bench_cpus_place_runtime_threads(bench_cpus_t mode) {
  if (mode != BENCH_CPUS_SPLIT) return true;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) {
    fprintf(stderr, "--cpus split: cannot list /proc/self/task\n");
    return false;
  }
  pid_t self = gettid();
  bool ok = true;
  struct dirent* entry;
  while ((entry = readdir(dir)) != NULL) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    pid_t tid = (pid_t)atoi(entry->d_name);
    // Every other thread is hipline's: a thread names itself ("hl-stream")
    // only once it runs, so names are not waited for.
    if (tid != self) ok &= pin(tid, placement_cpus_[1]);
  }
  closedir(dir);
  return ok;
}

typedef struct round_trip_t {
  // Odd: the helper's turn; even: the caller's; -1: stop.
  _Atomic long turn;
  atomic_bool failed;  // The helper could not be placed.
  int cpu;
} round_trip_t;

// Waits until |turn| is |want| or -1 (returns false then). Yields now and
// then: on a loaded machine the other thread may have lost its CPU.
static bool await_turn(_Atomic long* turn, long want) {
  for (unsigned spins = 1;; ++spins) {
    long t = atomic_load_explicit(turn, memory_order_acquire);
    if (t == want) return true;
    if (t == -1) return false;
    if ((spins & 1023) == 0) thrd_yield();
  }
}

static int round_trip_helper(void* arg) {
  round_trip_t* rt = (round_trip_t*)arg;
  if (!pin(0, rt->cpu)) {
    atomic_store(&rt->failed, true);
    return 1;
  }
  for (long i = 0; await_turn(&rt->turn, 2 * i + 1); ++i) {
    atomic_store_explicit(&rt->turn, 2 * i + 2, memory_order_release);
  }
  return 0;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

double bench_cpus_core_round_trip_ns(int rounds) {
  cpu_set_t saved;
  if (rounds < 1 || sched_getaffinity(0, sizeof(saved), &saved) != 0) {
    return -1;
  }
  int cpus[2];
  if (first_two_cpus(&saved, cpus) < 2 || !pin(0, cpus[0])) return -1;
  static round_trip_t rt;  // One measurement at a time.
  atomic_store(&rt.turn, 0);
  atomic_store(&rt.failed, false);
  rt.cpu = cpus[1];
  thrd_t helper;
  double result = -1;
  if (thrd_create(&helper, round_trip_helper, &rt) == thrd_success) {
    // At most |rounds| round trips and about 50 ms: a loaded machine (other
    // tests beside this one) must not stretch a benchmark's start.
    double start = now_ns(), elapsed = 0;
    long done = 0;
    while (done < rounds && !atomic_load(&rt.failed)) {
      atomic_store_explicit(&rt.turn, 2 * done + 1, memory_order_release);
      while (atomic_load_explicit(&rt.turn, memory_order_acquire) !=
                 2 * done + 2 &&
             !atomic_load_explicit(&rt.failed, memory_order_relaxed)) {
      }
      if (atomic_load(&rt.failed)) break;
      ++done;
      if ((done & 255) == 0 && now_ns() - start > 50e6) break;
    }
    elapsed = now_ns() - start;
    atomic_store(&rt.turn, -1);
    thrd_join(helper, NULL);
    if (done > 0 && !atomic_load(&rt.failed)) result = elapsed / done;
  }
  sched_setaffinity(0, sizeof(saved), &saved);
  return result;
}

#else

bool bench_cpus_begin(bench_cpus_t mode) {
  if (mode == BENCH_CPUS_FREE) return true;
  fprintf(stderr, "--cpus %s: thread placement is Linux only\n",
          bench_cpus_name(mode));
  return false;
}

bool bench_cpus_place_runtime_threads(bench_cpus_t mode) {
  return mode == BENCH_CPUS_FREE;
}

double bench_cpus_core_round_trip_ns(int rounds) {
  (void)rounds;
  return -1;
}

#endif
