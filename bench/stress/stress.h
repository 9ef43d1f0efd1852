// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hipline-stress: the allocation stress benchmark. Shared types of the
// program's parts:
// - options.c: command line parsing and validation;
// - run.c: one run (device, queues, alloc/free helpers, statistics);
// - oracle.c: the pattern oracle (fill and verify, device or host);
// - workload_*.c: the four workloads;
// - report.c: progress bar, table and JSON.
// Benchmark code: it uses the public hipline API only.
#ifndef HIPLINE_BENCH_STRESS_STRESS_H_
#define HIPLINE_BENCH_STRESS_STRESS_H_

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hipline/hipline.h"

#define STRESS_PROG "hipline-stress"
#define STRESS_MAX_QUEUES 64
#define STRESS_MAX_REQUESTS 4096

typedef enum stress_workload_e {
  STRESS_WORKLOAD_RANDOM = 0,
  STRESS_WORKLOAD_MULTISTREAM = 1,
  STRESS_WORKLOAD_SERVING = 2,
  STRESS_WORKLOAD_REPLAY = 3,
  STRESS_WORKLOAD_TP = 4,  // Tensor parallel over --devices (workload_tp.c).
  STRESS_WORKLOAD_COUNT_ = 5,
} stress_workload_t;

const char* stress_workload_name(stress_workload_t workload);

typedef enum stress_alloc_mode_e {
  STRESS_ALLOC_ASYNC = 0,  // hl_queue_alloca / hl_queue_dealloca.
  STRESS_ALLOC_SYNC = 1,   // alloca + wait; device sync before each free.
} stress_alloc_mode_t;

// One policy of the matrix: how memory is allocated and freed.
typedef struct stress_policy_t {
  const char* label;  // Short name for the table ("async", "sync", ...).
  stress_alloc_mode_t alloc;
  bool assume_no_alias;         // Per-invocation value.
  hl_fallback_mode_t fallback;  // Device option.
} stress_policy_t;

// Command-line options. Zero/NULL fields mean "the workload's default".
typedef struct stress_options_t {
  bool workload_set;
  stress_workload_t workload;
  bool matrix;  // Run the five policies of the default run.
  hl_backend_kind_t backend;
  stress_policy_t policy;  // When |matrix| is false.
  uint64_t seed;
  uint64_t iterations;  // 0: the workload's default.
  double duration_s;    // > 0: run each workload for this long instead.
  bool checked;
  uint64_t max_size;  // 0: the workload's default.
  uint64_t live_cap;  // random: cap on live bytes.
  uint32_t queues;
  uint32_t devices;  // tp: devices (0: 2).
  uint32_t requests;
  uint32_t results;
  double aliasing;
  bool aliasing_set;
  double escape;  // serving: fraction of steps that hand an address out.
  uint64_t spin_ns;
  const char* json_path;
  const char* trace_path;  // --trace, else HIPLINE_TRACE (see main.c).
  bool trace_from_env;     // |trace_path| is HIPLINE_TRACE.
  uint64_t trace_events;   // --trace-events (0: the default).
  const char* memory_snapshot_path;  // --memory-snapshot.
  const char* log_path;
  bool quiet;  // No table (JSON only).
  bool wide;   // Every column in the table, not the compact default.
} stress_options_t;

// Parses argv. Returns 0 to run, 1 when --help was printed (exit 0), and 2
// after printing an error that names the flag, the value and the accepted
// values.
int stress_options_parse(int argc, char** argv, stress_options_t* out_options);
void stress_options_print_help(FILE* out);

// Host-side latencies of one run's operations.
typedef struct stress_latency_t {
  uint32_t* samples_ns;  // Saturated at UINT32_MAX.
  size_t count;
  size_t capacity;
  uint64_t seen;
} stress_latency_t;

void stress_latency_record(stress_latency_t* latency, hl_time_t start,
                           hl_time_t end);
// Sorts the samples and returns quantile |q| in microseconds.
double stress_latency_quantile_us(stress_latency_t* latency, double q);
void stress_latency_deinitialize(stress_latency_t* latency);

// What one run measured (the JSON object and a table row).
typedef struct stress_result_t {
  stress_workload_t workload;
  char policy[32];
  hl_backend_kind_t backend;
  stress_alloc_mode_t alloc;
  bool assume_no_alias;             // Effective value.
  char assume_no_alias_source[16];  // "invocation", "api", "environment".
  hl_fallback_mode_t fallback;      // Effective mode of the device.
  bool checked;
  uint32_t queues;
  uint64_t ops;
  double seconds;
  double ops_per_s;
  double p50_us;
  double p99_us;
  uint64_t peak_used_bytes;
  uint64_t peak_reserved_bytes;
  uint64_t async_imports;
  uint64_t sync_imports;
  uint64_t alias_detected;
  uint64_t fallback_releases;
  uint64_t escaped_roots;
  uint64_t verified;
  uint64_t verify_failures;
  uint64_t unverified;  // Verifications voided by a failed submission.
  uint64_t use_after_free;
  uint64_t failed_submissions;  // hl_queue_stats failed, all queues.
  uint64_t ooms;                // The pool's failed allocations.
  // multistream: seconds with one queue and the ratio K queues / 1 queue.
  double single_queue_seconds;
  double queue_scaling;
  // replay: what the log itself needs.
  uint64_t log_events;
  uint64_t log_peak_live_bytes;
  uint64_t log_peak_live_count;
  // replay: peak reserved bytes of the PyTorch caching allocator model
  // (torch_model.h) on the same events, no device limit.
  uint64_t torch_model_peak_reserved_bytes;
  // replay: peak reserved bytes of the ideal best-fit arena (arena_model.h)
  // on the same events.
  uint64_t arena_peak_reserved_bytes;
  // hipline's pool when its slab bytes last reached a new peak: the slab
  // bytes and where they went (hl_memory_stats_t's pool_peak_*); the slab
  // bytes above the requested ones are the sum of the last four.
  uint64_t pool_peak_slab_bytes;
  uint64_t pool_peak_requested_bytes;
  uint64_t pool_peak_rounding_bytes;
  uint64_t pool_peak_tail_bytes;
  uint64_t pool_peak_fragment_bytes;
  uint64_t pool_peak_free_slab_bytes;
  // The run was cut short by SIGINT or SIGTERM.
  bool partial;
  // A failure that ended the run early ("" when none).
  char error[512];
} stress_result_t;

// The pattern oracle: fills buffers with hl_queue_fill_pattern and checks
// them with hl_queue_verify_pattern into one counter per queue (or, in a
// build without dispatch, writes/reads the pattern through host memory).
typedef struct stress_oracle_t stress_oracle_t;

hl_status_t stress_oracle_create(hl_queue_t* const* queues, uint32_t count,
                                 stress_oracle_t** out_oracle);
void stress_oracle_destroy(stress_oracle_t* oracle);
// Fills all of |buffer| (length a multiple of 4) with the pattern of |seed|
// on queue |queue_index|.
hl_status_t stress_oracle_fill(stress_oracle_t* oracle, uint32_t queue_index,
                               const hl_fence_t* wait_fence,
                               const hl_fence_t* signal_fence,
                               hl_buffer_t* buffer, uint32_t seed);
// Counts the words of |buffer| that differ from the pattern of |seed|.
hl_status_t stress_oracle_verify(stress_oracle_t* oracle, uint32_t queue_index,
                                 const hl_fence_t* wait_fence,
                                 const hl_fence_t* signal_fence,
                                 hl_buffer_t* buffer, uint32_t seed);
// The signal fence for a submission on queue |queue_index|: the queue's
// watch semaphore (which keeps the first failure of any submission made
// with it) plus the pairs of |also| (may be NULL). Valid until the next call
// for the same queue.
const hl_fence_t* stress_oracle_signal(stress_oracle_t* oracle,
                                       uint32_t queue_index,
                                       const hl_fence_t* also);
// Waits for every queue and returns the mismatches and the verifications
// really made. Returns the first failure of a submission on any queue; the
// verifications of a queue that saw one count as |out_unverified| instead
// (its counter cannot be trusted).
hl_status_t stress_oracle_collect(stress_oracle_t* oracle,
                                  uint64_t* out_failures,
                                  uint64_t* out_verified,
                                  uint64_t* out_unverified);
// Keeps queue |queue_index| busy for about |ns| (hl_queue_spin).
hl_status_t stress_oracle_spin(stress_oracle_t* oracle, uint32_t queue_index,
                               uint64_t ns);
// "dispatch" or "host-readback".
const char* stress_oracle_kind(void);

// One run in progress: its device, queues, policy and measurements.
typedef struct stress_run_t {
  const stress_options_t* options;
  stress_policy_t policy;
  hl_device_t* device;
  hl_queue_t* queues[STRESS_MAX_QUEUES];
  uint32_t queue_count;
  stress_oracle_t* oracle;
  // For synchronous waits (sync mode): a host semaphore and fence.
  hl_semaphore_t* sync_semaphore;
  uint64_t sync_value;
  hl_fence_t* sync_fence;
  stress_latency_t latency;
  uint64_t rng;
  hl_time_t deadline;      // HL_INFINITE_FUTURE unless --duration.
  hl_duration_t duration;  // The run's share of --duration (0: none).
  uint64_t checks;         // Calls of stress_run_done (pacing).
  // Progress (0..1) for the progress bar.
  const char* progress_label;
  hl_time_t progress_last;
  stress_result_t* result;
} stress_run_t;

// Creates the device and |queue_count| queues for |policy|.
hl_status_t stress_run_initialize(const stress_options_t* options,
                                  const stress_policy_t* policy,
                                  uint32_t queue_count, stress_result_t* result,
                                  stress_run_t* out_run);
// Waits for the device, collects statistics into the result and releases
// everything.
hl_status_t stress_run_finish(stress_run_t* run, hl_time_t start, hl_time_t end,
                              uint64_t ops);
void stress_run_deinitialize(stress_run_t* run);

// Allocates |size| bytes on queue |queue_index| in the run's mode.
hl_status_t stress_run_alloc(stress_run_t* run, uint32_t queue_index,
                             uint64_t size, hl_buffer_t** out_buffer);
// Frees |buffer|'s root on queue |queue_index| in the run's mode and
// releases the caller's reference.
hl_status_t stress_run_free(stress_run_t* run, uint32_t queue_index,
                            hl_buffer_t* buffer);
// Blocks until the alloca/dealloca just submitted with the run's sync fence
// completes; returns the signal fence to pass (NULL in async mode).
const hl_fence_t* stress_run_sync_fence(stress_run_t* run);
hl_status_t stress_run_sync_wait(stress_run_t* run);

// Uniform random numbers (xoshiro-like splitmix).
uint64_t stress_rng_next(uint64_t* state);
// Uniform in [lo, hi].
uint64_t stress_rng_range(uint64_t* state, uint64_t lo, uint64_t hi);
// Uniform in [0, 1).
double stress_rng_unit(uint64_t* state);

// The terminal (bench/stress/terminal.c): on a TTY, stderr is relayed so
// that log lines never break the progress bar.
void stress_terminal_begin(void);
void stress_terminal_end(void);
bool stress_terminal_is_tty(void);
// Shows |text| as the bar (NULL: removes it).
void stress_terminal_bar(const char* text);

// Reports progress |fraction| of the run (rate-limited; stderr TTY only).
void stress_progress(stress_run_t* run, double fraction);
void stress_progress_done(stress_run_t* run);
// Set (to the signal number) by SIGINT or SIGTERM: every run stops at its
// next step and the program writes what was measured, marked partial.
extern volatile sig_atomic_t stress_interrupted;

// True when the run's loop should end before step |step| (0-based) of
// |steps|: after a signal (the result is marked partial), when --duration
// has elapsed, or, without --duration, after |steps| steps. It also keeps
// each queue's backlog of submitted work short, so the run ends promptly at
// its deadline or a signal instead of draining seconds of queued work.
bool stress_run_done(stress_run_t* run, uint64_t step, uint64_t steps);
// The run's progress for the bar: time elapsed, or |step| of |steps|.
double stress_run_fraction(const stress_run_t* run, uint64_t step,
                           uint64_t steps);
// Sets the run's deadline to |duration| from now (timed runs only).
void stress_run_set_duration(stress_run_t* run, hl_duration_t duration);

// The workloads. Each fills |result| (also on failure, with |error| set) and
// returns a status for a failure that ended the run.
hl_status_t stress_workload_random(const stress_options_t* options,
                                   const stress_policy_t* policy,
                                   stress_result_t* result);
hl_status_t stress_workload_multistream(const stress_options_t* options,
                                        const stress_policy_t* policy,
                                        stress_result_t* result);
hl_status_t stress_workload_serving(const stress_options_t* options,
                                    const stress_policy_t* policy,
                                    stress_result_t* result);
hl_status_t stress_workload_replay(const stress_options_t* options,
                                   const stress_policy_t* policy,
                                   stress_result_t* result);
// The tensor-parallel workload over several devices (workload_tp.c): runs
// it, prints its own report (and --json), and returns the exit status.
int stress_tp_main(const stress_options_t* options);
// Releases what the workloads keep for the whole program.
void stress_serving_cleanup(void);

// The effective assume_no_alias for a per-invocation |value| and where it
// comes from; fails when HIPLINE_ASSUME_NO_ALIAS is invalid.
hl_status_t stress_effective_assume_no_alias(bool value, bool* out_value,
                                             const char** out_source);

// Reporting. The table: by default its key columns, in at most 100
// columns, with each row's notes wrapped under it; with |wide| every column
// and the notes at the end of the row. Then its legend.
void stress_report_table(FILE* out, const stress_result_t* results,
                         size_t count, bool wide);
// What every column of the table means (printed under it; |wide|: the
// columns of the wide table).
void stress_report_legend(FILE* out, bool wide);
// One closing line: the safe path's (noalias0-ordered) ops/s and reserved
// bytes against async per workload, and whether any run failed.
void stress_report_verdict(FILE* out, const stress_result_t* results,
                           size_t count);
hl_status_t stress_report_json(const char* path, const stress_result_t* results,
                               size_t count);

#endif  // HIPLINE_BENCH_STRESS_STRESS_H_
