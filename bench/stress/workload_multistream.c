// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// multistream: does the allocator serialise independent queues?
//
// Each iteration, on every one of K queues: alloca a small buffer, spin the
// queue, dealloca the buffer. The same number of iterations per queue is run
// with K queues and with one queue; if the queues ran independently the two
// take about the same time (scaling 1), if the allocator serialises them the
// K-queue pass takes about K times as long. The naive sync baseline drains
// the whole device before each free, so it serialises by construction.

#include "bench/stress/stress.h"

#define MULTISTREAM_DEFAULT_ITERATIONS 4000
#define MULTISTREAM_DEFAULT_QUEUES 4
#define MULTISTREAM_BUFFER_BYTES 4096

// Runs one pass on |queue_count| queues; fills |result| when |measured|.
static hl_status_t multistream_pass(const stress_options_t* options,
                                    const stress_policy_t* policy,
                                    uint32_t queue_count, uint64_t iterations,
                                    stress_result_t* result,
                                    double* out_seconds) {
  stress_run_t run;
  hl_status_t st =
      stress_run_initialize(options, policy, queue_count, result, &run);
  // With --duration each of the two passes takes half of it.
  if (options->duration_s > 0) {
    stress_run_set_duration(&run, (hl_duration_t)(options->duration_s * 0.5e9));
  }
  uint64_t ops = 0;
  hl_time_t start = hl_time_now();
  for (uint64_t it = 0; !st && !stress_run_done(&run, it, iterations); ++it) {
    for (uint32_t q = 0; q < queue_count && !st; ++q) {
      hl_time_t t0 = hl_time_now();
      hl_buffer_t* buffer = NULL;
      st = stress_run_alloc(&run, q, MULTISTREAM_BUFFER_BYTES, &buffer);
      if (!st) st = stress_oracle_spin(run.oracle, q, options->spin_ns);
      if (buffer) st = hl_status_join(st, stress_run_free(&run, q, buffer));
      stress_latency_record(&run.latency, t0, hl_time_now());
      ++ops;
    }
    if ((it & 31) == 0) {
      stress_progress(&run, stress_run_fraction(&run, it, iterations));
    }
  }
  hl_status_t wst =
      run.device ? hl_device_wait_idle(run.device, HL_INFINITE_FUTURE) : NULL;
  hl_time_t end = hl_time_now();
  st = hl_status_join(st, wst);
  if (run.device) {
    st = hl_status_join(st, stress_run_finish(&run, start, end, ops));
  }
  *out_seconds = (double)(end - start) / 1e9;
  stress_run_deinitialize(&run);
  return st;
}

hl_status_t stress_workload_multistream(const stress_options_t* options,
                                        const stress_policy_t* policy,
                                        stress_result_t* result) {
  result->workload = STRESS_WORKLOAD_MULTISTREAM;
  uint32_t k = options->queues ? options->queues : MULTISTREAM_DEFAULT_QUEUES;
  uint64_t iterations = options->iterations ? options->iterations
                                            : MULTISTREAM_DEFAULT_ITERATIONS;
  // The single-queue reference first, into a scratch result.
  stress_result_t single = *result;
  double single_seconds = 0, multi_seconds = 0;
  hl_status_t st = multistream_pass(options, policy, 1, iterations, &single,
                                    &single_seconds);
  if (st) {
    st = hl_status_annotate(st, "multistream with 1 queue");
  } else if (single.partial) {
    *result = single;  // Interrupted: the reference pass is all there is.
    result->queue_scaling = 0;
    return hl_ok_status();
  } else {
    st = multistream_pass(options, policy, k, iterations, result,
                          &multi_seconds);
    if (st) st = hl_status_annotate(st, "multistream with %u queues", k);
  }
  result->verify_failures += single.verify_failures;
  result->verified += single.verified;
  result->unverified += single.unverified;
  result->use_after_free += single.use_after_free;
  result->failed_submissions += single.failed_submissions;
  result->ooms += single.ooms;
  result->single_queue_seconds = single_seconds;
  if (st || result->partial || single_seconds <= 0 || multi_seconds <= 0) {
    result->queue_scaling = 0;
  } else if (options->duration_s > 0) {
    // Equal time, not equal work: compare the rate per queue.
    double single_rate = (double)single.ops / single_seconds;
    double multi_rate = (double)result->ops / k / multi_seconds;
    result->queue_scaling = multi_rate > 0 ? single_rate / multi_rate : 0;
  } else {
    result->queue_scaling = multi_seconds / single_seconds;
  }
  return st;
}
