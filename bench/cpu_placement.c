// See cpu_placement.h.
#if defined(__linux__)
#define _GNU_SOURCE
#include <dirent.h>
#include <sched.h>
#include <unistd.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cpu_placement.h"

bool bench_cpus_parse(const char* text, bench_cpus_t* out_mode) {
  static const char* const names[] = {"free", "same", "split"};
  for (int i = 0; i < 3; ++i) {
    if (text && strcmp(text, names[i]) == 0) {
      *out_mode = (bench_cpus_t)i;
      return true;
    }
  }
  return false;
}

const char* bench_cpus_name(bench_cpus_t mode) {
  switch (mode) {
    case BENCH_CPUS_SAME:
      return "same";
    case BENCH_CPUS_SPLIT:
      return "split";
    default:
      return "free";
  }
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
  int found = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) placement_cpus_[found++] = cpu;
  }
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

#endif
