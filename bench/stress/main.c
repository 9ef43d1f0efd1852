// hipline-stress: the allocation stress benchmark. See --help, and
// bench/stress/stress.h for how the program is split.

#include <stdlib.h>
#include <string.h>

#include "bench/stress/stress.h"
#include "hipline/trace.h"

void stress_replay_cleanup(void);

// The policies of the default run, async first (the ratios' reference).
static const stress_policy_t kMatrix[] = {
    {"async", STRESS_ALLOC_ASYNC, true, HL_FALLBACK_DEFAULT},
    {"noalias0-ordered", STRESS_ALLOC_ASYNC, false, HL_FALLBACK_ORDERED},
    {"noalias0-devsync", STRESS_ALLOC_ASYNC, false, HL_FALLBACK_DEVICE_SYNC},
    {"noalias0-frontier", STRESS_ALLOC_ASYNC, false, HL_FALLBACK_FRONTIER},
    {"sync", STRESS_ALLOC_SYNC, false, HL_FALLBACK_DEVICE_SYNC},
};

typedef hl_status_t (*stress_workload_fn_t)(const stress_options_t*,
                                            const stress_policy_t*,
                                            stress_result_t*);

static stress_workload_fn_t workload_fn(stress_workload_t workload) {
  switch (workload) {
    case STRESS_WORKLOAD_RANDOM:
      return stress_workload_random;
    case STRESS_WORKLOAD_MULTISTREAM:
      return stress_workload_multistream;
    case STRESS_WORKLOAD_SERVING:
      return stress_workload_serving;
    case STRESS_WORKLOAD_REPLAY:
      return stress_workload_replay;
    default:
      return NULL;
  }
}

int main(int argc, char** argv) {
  stress_options_t options;
  int rc = stress_options_parse(argc, argv, &options);
  if (rc == 1) return 0;
  if (rc != 0) return rc;

  // Bad HIPLINE_* values are usage errors, reported before any work.
  hl_status_t st = hl_environment_check();
  if (!st) {
    hl_tristate_t value;
    hl_setting_source_t source;
    st = hl_get_assume_no_alias(&value, &source);
  }
  if (st) {
    hl_status_fprint(stderr, STRESS_PROG ": ", st);
    hl_status_free(st);
    return 2;
  }

  stress_workload_t workloads[3] = {STRESS_WORKLOAD_SERVING,
                                    STRESS_WORKLOAD_RANDOM,
                                    STRESS_WORKLOAD_MULTISTREAM};
  size_t workload_count = 3;
  if (options.workload_set) {
    workloads[0] = options.workload;
    workload_count = 1;
  }
  const stress_policy_t* policies = options.matrix ? kMatrix : &options.policy;
  size_t policy_count =
      options.matrix ? sizeof(kMatrix) / sizeof(kMatrix[0]) : 1;

  size_t run_count = workload_count * policy_count;
  stress_result_t* results = calloc(run_count, sizeof(*results));
  if (!results) {
    fprintf(stderr, STRESS_PROG ": out of memory\n");
    return 1;
  }
  if (options.trace_path) hl_trace_capture_begin(0);

  bool failed = false;
  hl_time_t program_start = hl_time_now();
  for (size_t w = 0; w < workload_count; ++w) {
    if (policy_count > 1 && !options.duration_s) {
      // An unmeasured run of the first policy first, so one-time costs
      // (backend start-up, code object load, and on the host backend the
      // first page faults of the emulated device memory) do not land on the
      // first policy of the comparison.
      stress_result_t scratch;
      memset(&scratch, 0, sizeof(scratch));
      hl_status_ignore(
          workload_fn(workloads[w])(&options, &policies[0], &scratch));
    }
    for (size_t p = 0; p < policy_count; ++p) {
      stress_result_t* r = &results[w * policy_count + p];
      r->workload = workloads[w];
      st = workload_fn(workloads[w])(&options, &policies[p], r);
      if (st) {
        failed = true;
        hl_status_format(st, r->error, sizeof(r->error));
        fprintf(stderr, STRESS_PROG ": %s/%s failed: %s\n",
                stress_workload_name(r->workload), policies[p].label, r->error);
        hl_status_free(st);
      }
    }
  }
  double total_seconds = (double)(hl_time_now() - program_start) / 1e9;

  if (!options.quiet) {
    stress_report_table(stdout, results, run_count);
    printf("total %.1f s\n", total_seconds);
  }
  if (options.json_path) {
    st = stress_report_json(options.json_path, results, run_count);
    if (st) {
      failed = true;
      hl_status_fprint(stderr, STRESS_PROG ": ", st);
      hl_status_free(st);
    }
  }
  if (options.trace_path) {
    st = hl_trace_capture_end(options.trace_path);
    if (st) {
      failed = true;
      hl_status_fprint(stderr, STRESS_PROG ": --trace: ", st);
      hl_status_free(st);
    }
  }
  for (size_t i = 0; i < run_count; ++i) {
    const stress_result_t* r = &results[i];
    if (r->verify_failures || r->use_after_free) {
      failed = true;
      fprintf(stderr,
              STRESS_PROG
              ": %s/%s: %llu verification failures, %llu "
              "use-after-free\n",
              stress_workload_name(r->workload), r->policy,
              (unsigned long long)r->verify_failures,
              (unsigned long long)r->use_after_free);
    }
  }
  free(results);
  stress_replay_cleanup();
  return failed ? 1 : 0;
}
