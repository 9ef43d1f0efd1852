// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hipline-stress: the allocation stress benchmark. See --help, and
// bench/stress/stress.h for how the program is split.

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

// Writes |text| with control characters escaped ("\n", "\x1b"), so a value
// with a newline or a terminal escape from the environment or a file name
// cannot forge or garble lines.
static void stress_print_escaped(FILE* out, const char* text) {
  for (const unsigned char* c = (const unsigned char*)text; *c; ++c) {
    if (*c == '\n') {
      fputs("\\n", out);
    } else if (*c == '\t') {
      fputs("\\t", out);
    } else if (*c < 0x20 || *c == 0x7f) {
      fprintf(out, "\\x%02x", *c);
    } else {
      fputc(*c, out);
    }
  }
}

// Prints "hipline-stress: PREFIX<status>" on one line.
static void stress_print_status(const char* prefix, hl_status_t status) {
  char text[1024];
  hl_status_format(status, text, sizeof(text));
  fprintf(stderr, STRESS_PROG ": %s", prefix);
  stress_print_escaped(stderr, text);
  fputc('\n', stderr);
}

// SIGINT/SIGTERM: the runs stop at their next step and the program writes
// what was measured; a second signal ends the program at once (the handler
// is reset to the default).
static void stress_on_signal(int sig) {
  stress_interrupted = sig;
  static const char kMessage[] =
      "\n" STRESS_PROG
      ": interrupted; stopping at the next step and writing what was "
      "measured (interrupt again to abort)\n";
  ssize_t n = write(2, kMessage, sizeof(kMessage) - 1);
  (void)n;
}

static void stress_install_signal_handlers(void) {
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = stress_on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_RESETHAND;
  sigaction(SIGINT, &action, NULL);
  sigaction(SIGTERM, &action, NULL);
}

// True when |path| can be written: an existing writable file that is not a
// directory, or a new file its directory lets us create (created and
// removed again). Prints the reason otherwise.
static bool stress_output_writable(const char* what, const char* path) {
  struct stat st;
  const char* reason = NULL;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      reason = "it is a directory";
    } else if (access(path, W_OK) != 0) {
      reason = strerror(errno);
    }
  } else if (errno != ENOENT) {
    reason = strerror(errno);
  } else {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0) {
      reason = strerror(errno);
    } else {
      close(fd);
      unlink(path);
    }
  }
  if (!reason) return true;
  fprintf(stderr, STRESS_PROG ": cannot write %s '%s': %s\n", what, path,
          reason);
  return false;
}

// True when |a| and |b| name the same file (the same string, or the same
// existing file).
static bool stress_same_file(const char* a, const char* b) {
  if (!strcmp(a, b)) return true;
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// --memory-snapshot: writable, and not the file of another output.
static bool stress_snapshot_check(const stress_options_t* options,
                                  const char* trace_what) {
  const char* snapshot = options->memory_snapshot_path;
  if (!snapshot) return true;
  const char* other = NULL;
  if (options->json_path && stress_same_file(options->json_path, snapshot)) {
    other = "--json";
  } else if (options->trace_path &&
             stress_same_file(options->trace_path, snapshot)) {
    other = trace_what;
  }
  if (other) {
    fprintf(stderr,
            STRESS_PROG ": --memory-snapshot and %s name the same file '%s'\n",
            other, snapshot);
    return false;
  }
  return stress_output_writable("the --memory-snapshot file", snapshot);
}

// Checks the outputs before any run: paths that cannot be written and
// outputs that would overwrite each other are usage errors.
static bool stress_outputs_check(stress_options_t* options) {
  const char* env_trace = getenv("HIPLINE_TRACE");
  if (env_trace && env_trace[0]) {
    if (options->trace_path) {
      fprintf(stderr,
              STRESS_PROG
              ": --trace '%s' and HIPLINE_TRACE='%s' both capture the "
              "program's one trace (the second write would replace the "
              "first); use one of them\n",
              options->trace_path, env_trace);
      return false;
    }
    // The program writes HIPLINE_TRACE's trace itself, so that a failed
    // write is its error; the library's write at exit then has nothing left
    // to write.
    options->trace_path = env_trace;
    options->trace_from_env = true;
  }
  const char* trace_what =
      options->trace_from_env ? "HIPLINE_TRACE" : "--trace";
  if (options->json_path && options->trace_path &&
      stress_same_file(options->json_path, options->trace_path)) {
    fprintf(stderr, STRESS_PROG ": --json and %s name the same file '%s'\n",
            trace_what, options->json_path);
    return false;
  }
  if (options->json_path &&
      !stress_output_writable("the --json file", options->json_path)) {
    return false;
  }
  if (options->trace_path &&
      !stress_output_writable(options->trace_from_env ? "the HIPLINE_TRACE file"
                                                      : "the --trace file",
                              options->trace_path)) {
    return false;
  }
  return stress_snapshot_check(options, trace_what);
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
    stress_print_status("", st);
    hl_status_free(st);
    return 2;
  }
  if (!stress_outputs_check(&options)) return 2;
  stress_install_signal_handlers();
  if (options.workload_set && options.workload == STRESS_WORKLOAD_TP) {
    return stress_tp_main(&options);
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
  if (options.trace_path) hl_trace_capture_begin(options.trace_events);
  if (options.memory_snapshot_path) hl_memory_history_begin(0);
  stress_terminal_begin();

  bool failed = false;
  // Runs started: a prefix of |results| (less than |run_count| after a
  // signal).
  size_t started = 0;
  hl_time_t program_start = hl_time_now();
  for (size_t w = 0; w < workload_count && !stress_interrupted; ++w) {
    if (policy_count > 1 && !options.duration_s) {
      // An unmeasured run of the first policy first, so one-time costs
      // (backend start-up, code object load, and on the host backend the
      // first page faults of the emulated device memory) do not land on the
      // first policy of the comparison. It is not a row of the table.
      stress_result_t scratch;
      memset(&scratch, 0, sizeof(scratch));
      stress_policy_t warm_up = policies[0];
      warm_up.label = "warm-up";
      hl_status_ignore(workload_fn(workloads[w])(&options, &warm_up, &scratch));
    }
    for (size_t p = 0; p < policy_count && !stress_interrupted; ++p) {
      stress_result_t* r = &results[w * policy_count + p];
      ++started;
      r->workload = workloads[w];
      st = workload_fn(workloads[w])(&options, &policies[p], r);
      if (st) {
        failed = true;
        hl_status_format(st, r->error, sizeof(r->error));
        fprintf(stderr, STRESS_PROG ": %s/%s failed: ",
                stress_workload_name(r->workload), policies[p].label);
        stress_print_escaped(stderr, r->error);
        fputc('\n', stderr);
        hl_status_free(st);
      }
    }
  }
  double total_seconds = (double)(hl_time_now() - program_start) / 1e9;
  int signal_number = stress_interrupted;
  if (signal_number) {
    fprintf(stderr,
            STRESS_PROG
            ": stopped by signal %d after %zu of %zu runs; the "
            "results are partial\n",
            signal_number, started, run_count);
  }

  if (!options.quiet) {
    stress_report_table(stdout, results, started, options.wide);
    printf("total %.1f s%s\n", total_seconds,
           signal_number ? " (interrupted: partial results)" : "");
    stress_report_verdict(stdout, results, started);
  }
  if (options.json_path) {
    st = stress_report_json(options.json_path, results, started);
    if (st) {
      failed = true;
      hl_status_fprint(stderr, STRESS_PROG ": ", st);
      hl_status_free(st);
    }
  }
  if (options.memory_snapshot_path) {
    st = hl_memory_history_end(options.memory_snapshot_path);
    if (st) {
      failed = true;
      hl_status_fprint(stderr, STRESS_PROG ": --memory-snapshot: ", st);
      hl_status_free(st);
    }
  }
  if (options.trace_path) {
    st = hl_trace_capture_end(options.trace_path);
    if (st) {
      failed = true;
      fprintf(stderr, STRESS_PROG ": %s: ",
              options.trace_from_env ? "HIPLINE_TRACE" : "--trace");
      hl_status_fprint(stderr, "", st);
      hl_status_free(st);
    }
  }
  for (size_t i = 0; i < started; ++i) {
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
  stress_serving_cleanup();
  stress_terminal_end();
  // The table on a full disk or a closed pipe is a failed run too.
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, STRESS_PROG ": writing the table to stdout failed: %s\n",
            strerror(errno));
    failed = true;
  }
  if (signal_number) return 128 + signal_number;
  return failed ? 1 : 0;
}
