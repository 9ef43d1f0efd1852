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
  uint64_t ops = 0;
  hl_time_t start = hl_time_now();
  bool timed = options->duration_s > 0;
  for (uint64_t it = 0;
       !st && (timed ? !stress_run_expired(&run) : it < iterations); ++it) {
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
      stress_progress(&run, timed
                                ? 1.0 - (double)(run.deadline - hl_time_now()) /
                                            (options->duration_s * 1e9)
                                : (double)it / (double)iterations);
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
  HL_RETURN_IF_ERROR(multistream_pass(options, policy, 1, iterations, &single,
                                      &single_seconds),
                     "multistream with 1 queue");
  HL_RETURN_IF_ERROR(
      multistream_pass(options, policy, k, iterations, result, &multi_seconds),
      "multistream with %u queues", k);
  result->verify_failures += single.verify_failures;
  result->use_after_free += single.use_after_free;
  result->single_queue_seconds = single_seconds;
  if (options->duration_s > 0) {
    // Equal time, not equal work: compare the rate per queue.
    double single_rate = (double)single.ops / single_seconds;
    double multi_rate = (double)result->ops / k / multi_seconds;
    result->queue_scaling = multi_rate > 0 ? single_rate / multi_rate : 0;
  } else {
    result->queue_scaling =
        single_seconds > 0 ? multi_seconds / single_seconds : 0;
  }
  return hl_ok_status();
}
