// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Thread placement for the micro-benchmarks (--cpus free|same|split).
//
// On the 2-core virtual machines hipline is measured on, moving a cache
// line between the cores costs about 280 ns one way (a two-thread
// ping-pong on one atomic), so a submission's cost depends on whether the
// scheduler put the submitting thread and its stream's worker on one core
// or on two: the same binary measures 300 ns or 2.9 us per empty
// submission from run to run. Placing the threads makes each case
// repeatable:
//   free   no placement (what an embedding application gets by default);
//   same   every thread on the first CPU the process may use (as
//          `taskset -c 0`);
//   split  the submitting thread on that CPU and hipline's threads (stream
//          workers, the work thread, completers) on the second one: every
//          handoff crosses cores, the worst case.
// Linux only; elsewhere every mode but free fails.
#ifndef HIPLINE_BENCH_CPU_PLACEMENT_H_
#define HIPLINE_BENCH_CPU_PLACEMENT_H_

#include <stdbool.h>

typedef enum bench_cpus_e {
  BENCH_CPUS_FREE = 0,
  BENCH_CPUS_SAME,
  BENCH_CPUS_SPLIT,
} bench_cpus_t;

// Parses "free", "same" or "split"; false on anything else.
bool bench_cpus_parse(const char* text, bench_cpus_t* out_mode);
const char* bench_cpus_name(bench_cpus_t mode);

// Call once at start, before any hipline object exists: pins the calling
// thread (and so every thread it creates) to the first CPU for same and
// split.
// Returns false, with a message on stderr, when that is impossible.
bool bench_cpus_begin(bench_cpus_t mode);

// For split: moves every thread of the process but the caller to the
// second CPU.
// Call from the submitting thread after creating queues (their stream
// workers start with the queue) and before starting threads of your own.
// Returns false, with a message on stderr, when it cannot.
bool bench_cpus_place_runtime_threads(bench_cpus_t mode);

// The machine's price of moving a cache line between two cores: two
// threads, pinned to the first two CPUs this process may use, take turns
// writing one atomic |rounds| times; returns nanoseconds per round trip
// (two moves), or -1 with fewer than two CPUs or off Linux. Benchmarks print
// it, because every cross-thread handoff in hipline pays it and it changes
// with where the host puts the virtual machine's CPUs (145 to 590 ns on the
// development VM within one day). The calling thread's placement is
// restored before it returns.
double bench_cpus_core_round_trip_ns(int rounds);
// Prints that figure as the benchmarks' "machine:" line (nothing for -1).
void bench_cpus_print_round_trip(double round_trip_ns);

#endif  // HIPLINE_BENCH_CPU_PLACEMENT_H_
