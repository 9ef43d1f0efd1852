// Command-line parsing for hipline-stress. Every bad value is an error that
// names the flag, the value and what is accepted (exit status 2).

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/stress/stress.h"

static const char* const kWorkloadNames[STRESS_WORKLOAD_COUNT_] = {
    "random", "multistream", "serving", "replay"};

const char* stress_workload_name(stress_workload_t workload) {
  return (unsigned)workload < STRESS_WORKLOAD_COUNT_ ? kWorkloadNames[workload]
                                                     : "?";
}

void stress_options_print_help(FILE* out) {
  fprintf(
      out,
      "Usage: " STRESS_PROG
      " [options] [LOG]\n"
      "\n"
      "Allocation stress benchmark for hipline's queue-ordered allocator and\n"
      "its import/export policies. With no arguments it runs serving, random\n"
      "and multistream under five policies (async with assume_no_alias=1;\n"
      "assume_no_alias=0 with the ordered, device-sync and frontier\n"
      "fallbacks; the naive sync baseline) and prints a table with ratios\n"
      "against async.\n"
      "\n"
      "Workload:\n"
      "  --workload NAME       random | multistream | serving | replay\n"
      "  --matrix              run the five policies of the default run\n"
      "  --iterations N        random: live-allocation cap N (2N steps);\n"
      "                        multistream: iterations per queue; serving:\n"
      "                        steps per request; replay: passes over the log\n"
      "  --duration SECONDS    run each workload for this long instead; with\n"
      "                        --iterations too, whichever ends first\n"
      "  --seed N              random seed (default 1)\n"
      "  --max-size BYTES      largest allocation (random, serving)\n"
      "  --live-cap BYTES      random: cap on live bytes (default 64 MiB)\n"
      "  --queues K            queues (multistream, serving, replay)\n"
      "  --requests R          serving: concurrent requests\n"
      "  --results M           serving: results per step (1..32)\n"
      "  --aliasing P          serving: fraction of steps whose function\n"
      "                        returns an alias of a global or an argument\n"
      "  --escape P            serving: fraction of steps whose function "
      "hands\n"
      "                        a result's raw device address out (it escapes)\n"
      "  --spin NS             multistream: spin per iteration (default "
      "20000)\n"
      "  --trace-file FILE     replay: the allocation log (also --log FILE or\n"
      "                        a positional LOG). RMM logging CSV is read\n"
      "                        natively; a PyTorch snapshot pickle or a "
      "Kineto\n"
      "                        JSON(.gz) is converted first with\n"
      "                        tools/hipline-trace-convert\n"
      "                        (HIPLINE_TRACE_CONVERT overrides its path)\n"
      "\n"
      "Policy:\n"
      "  --alloc MODE          async (hl_queue_alloca/dealloca) | sync (alloc\n"
      "                        + wait; device sync before each free)\n"
      "  --assume-no-alias V   0 | 1, the per-invocation value (default 1);\n"
      "                        HIPLINE_ASSUME_NO_ALIAS, when set, wins\n"
      "  --fallback MODE       ordered | device-sync | frontier (default:\n"
      "                        HIPLINE_FALLBACK, else ordered)\n"
      "  --backend KIND        auto | host | hip (default auto)\n"
      "  --checked             checked mode (use-after-free detection)\n"
      "\n"
      "Output:\n"
      "  --json FILE           one object per run (an array for several)\n"
      "  --trace FILE          Chrome trace JSON of the whole program (or\n"
      "                        HIPLINE_TRACE=FILE; not both)\n"
      "  --trace-events N      keep at most N trace events (default 1000000);\n"
      "                        later ones are counted and warned about\n"
      "  --quiet               no table\n"
      "  --help                this text\n"
      "\n"
      "Exit status: 0 on success; 1 when a run fails (a failed submission or\n"
      "allocation, named on stderr and in the JSON), sees a verification\n"
      "failure or a use-after-free, or an output cannot be written; 2 for\n"
      "bad usage (outputs are checked before the first run); 130 or 143\n"
      "after SIGINT or SIGTERM, with what was measured written and marked\n"
      "partial.\n");
}

static int usage_error(const char* flag, const char* value,
                       const char* accepted) {
  fprintf(stderr,
          STRESS_PROG
          ": invalid value '%s' for %s: expected %s\n"
          "Try '" STRESS_PROG " --help'.\n",
          value, flag, accepted);
  return 2;
}

// Numbers are decimal: "010" is ten, "0x10" is an error.
static bool parse_u64(const char* text, uint64_t lo, uint64_t hi,
                      uint64_t* out) {
  if (!text[0]) return false;
  for (const char* c = text; *c; ++c) {
    if (*c < '0' || *c > '9') return false;
  }
  errno = 0;
  char* end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// Sizes accept K, M and G suffixes (powers of 1024).
static bool parse_size(const char* text, uint64_t lo, uint64_t hi,
                       uint64_t* out) {
  size_t n = strlen(text);
  if (n == 0 || n >= 64) return false;
  char digits[64];
  memcpy(digits, text, n + 1);
  uint64_t scale = 1;
  char last = digits[n - 1];
  if (last == 'K' || last == 'k') scale = 1024;
  if (last == 'M' || last == 'm') scale = 1024 * 1024;
  if (last == 'G' || last == 'g') scale = 1024 * 1024 * 1024;
  if (scale != 1) digits[n - 1] = '\0';
  uint64_t v = 0;
  if (!parse_u64(digits, 0, UINT64_MAX / scale, &v)) return false;
  v *= scale;
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

// Decimal numbers with an optional fraction and exponent ("0.5", "2e-3");
// no hexadecimal, "inf" or "nan".
static bool parse_double(const char* text, double lo, double hi, double* out) {
  if (!text[0] || strspn(text, "0123456789.eE+-") != strlen(text)) {
    return false;
  }
  errno = 0;
  char* end = NULL;
  double v = strtod(text, &end);
  if (errno || *end || !isfinite(v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

int stress_options_parse(int argc, char** argv, stress_options_t* out) {
  memset(out, 0, sizeof(*out));
  out->backend = HL_BACKEND_AUTO;
  out->policy.label = "async";
  out->policy.alloc = STRESS_ALLOC_ASYNC;
  out->policy.assume_no_alias = true;
  out->policy.fallback = HL_FALLBACK_DEFAULT;
  out->seed = 1;
  out->spin_ns = 20000;
  out->live_cap = 64ull << 20;
  bool policy_set = false;

  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (arg[0] != '-' || arg[1] == '\0') {
      if (out->log_path) {
        fprintf(stderr,
                STRESS_PROG
                ": unexpected argument '%s' (the log is "
                "already '%s')\n",
                arg, out->log_path);
        return 2;
      }
      out->log_path = arg;
      continue;
    }
    // Split "--flag=value".
    char flag[64];
    const char* value = NULL;
    const char* eq = strchr(arg, '=');
    size_t flag_len = eq ? (size_t)(eq - arg) : strlen(arg);
    if (flag_len >= sizeof(flag)) flag_len = sizeof(flag) - 1;
    memcpy(flag, arg, flag_len);
    flag[flag_len] = '\0';
    if (eq) value = eq + 1;

    // Flags without a value.
    static const char* const kBare[] = {"--help", "-h", "--checked", "--matrix",
                                        "--quiet"};
    bool bare = false;
    for (size_t b = 0; b < sizeof(kBare) / sizeof(kBare[0]); ++b) {
      bare |= strcmp(flag, kBare[b]) == 0;
    }
    if (bare) {
      if (value) {
        fprintf(stderr, STRESS_PROG ": %s takes no value (got '%s')\n", flag,
                value);
        return 2;
      }
      if (!strcmp(flag, "--help") || !strcmp(flag, "-h")) {
        stress_options_print_help(stdout);
        return 1;
      }
      if (!strcmp(flag, "--checked")) out->checked = true;
      if (!strcmp(flag, "--matrix")) out->matrix = true;
      if (!strcmp(flag, "--quiet")) out->quiet = true;
      continue;
    }

    static const char* const kValued[] = {
        "--workload",    "--alloc",    "--assume-no-alias", "--fallback",
        "--backend",     "--seed",     "--iterations",      "--duration",
        "--max-size",    "--live-cap", "--queues",          "--requests",
        "--results",     "--aliasing", "--escape",          "--spin",
        "--json",        "--trace",    "--trace-file",      "--log",
        "--trace-events"};
    bool known = false;
    for (size_t k = 0; k < sizeof(kValued) / sizeof(kValued[0]); ++k) {
      known |= strcmp(flag, kValued[k]) == 0;
    }
    if (!known) {
      fprintf(stderr,
              STRESS_PROG ": unknown option '%s'\nTry '" STRESS_PROG
                          " --help'.\n",
              flag);
      return 2;
    }
    if (!value) {
      if (i + 1 >= argc) {
        fprintf(stderr, STRESS_PROG ": option %s needs a value\n", flag);
        return 2;
      }
      value = argv[++i];
    }

    uint64_t u = 0;
    double d = 0;
    if (!strcmp(flag, "--workload")) {
      bool found = false;
      for (int w = 0; w < STRESS_WORKLOAD_COUNT_; ++w) {
        if (!strcmp(value, kWorkloadNames[w])) {
          out->workload = (stress_workload_t)w;
          found = true;
        }
      }
      if (!found) {
        return usage_error(flag, value,
                           "one of random, multistream, serving, replay");
      }
      out->workload_set = true;
    } else if (!strcmp(flag, "--alloc")) {
      if (!strcmp(value, "async")) {
        out->policy.alloc = STRESS_ALLOC_ASYNC;
      } else if (!strcmp(value, "sync")) {
        out->policy.alloc = STRESS_ALLOC_SYNC;
      } else {
        return usage_error(flag, value, "async or sync");
      }
      policy_set = true;
    } else if (!strcmp(flag, "--assume-no-alias")) {
      if (!strcmp(value, "1")) {
        out->policy.assume_no_alias = true;
      } else if (!strcmp(value, "0")) {
        out->policy.assume_no_alias = false;
      } else {
        return usage_error(flag, value, "0 or 1");
      }
      policy_set = true;
    } else if (!strcmp(flag, "--fallback")) {
      if (!strcmp(value, "ordered")) {
        out->policy.fallback = HL_FALLBACK_ORDERED;
      } else if (!strcmp(value, "device-sync")) {
        out->policy.fallback = HL_FALLBACK_DEVICE_SYNC;
      } else if (!strcmp(value, "frontier")) {
        out->policy.fallback = HL_FALLBACK_FRONTIER;
      } else {
        return usage_error(flag, value, "ordered, device-sync or frontier");
      }
      policy_set = true;
    } else if (!strcmp(flag, "--backend")) {
      if (!strcmp(value, "auto")) {
        out->backend = HL_BACKEND_AUTO;
      } else if (!strcmp(value, "host")) {
        out->backend = HL_BACKEND_HOST;
      } else if (!strcmp(value, "hip")) {
        out->backend = HL_BACKEND_HIP;
      } else {
        return usage_error(flag, value, "auto, host or hip");
      }
    } else if (!strcmp(flag, "--seed")) {
      if (!parse_u64(value, 0, UINT64_MAX, &out->seed)) {
        return usage_error(flag, value, "an unsigned 64-bit integer");
      }
    } else if (!strcmp(flag, "--iterations")) {
      if (!parse_u64(value, 1, 100000000, &out->iterations)) {
        return usage_error(flag, value, "an integer in [1, 100000000]");
      }
    } else if (!strcmp(flag, "--duration")) {
      if (!parse_double(value, 0.001, 86400, &out->duration_s)) {
        return usage_error(flag, value, "seconds in [0.001, 86400]");
      }
    } else if (!strcmp(flag, "--max-size")) {
      if (!parse_size(value, 4, 1ull << 30, &out->max_size)) {
        return usage_error(flag, value,
                           "bytes in [4, 1G] (suffixes K, M, G allowed)");
      }
    } else if (!strcmp(flag, "--live-cap")) {
      if (!parse_size(value, 4, 1ull << 40, &out->live_cap)) {
        return usage_error(flag, value,
                           "bytes in [4, 1024G] (suffixes K, M, G allowed)");
      }
    } else if (!strcmp(flag, "--queues")) {
      if (!parse_u64(value, 1, STRESS_MAX_QUEUES, &u)) {
        return usage_error(flag, value, "an integer in [1, 64]");
      }
      out->queues = (uint32_t)u;
    } else if (!strcmp(flag, "--requests")) {
      if (!parse_u64(value, 1, STRESS_MAX_REQUESTS, &u)) {
        return usage_error(flag, value, "an integer in [1, 4096]");
      }
      out->requests = (uint32_t)u;
    } else if (!strcmp(flag, "--results")) {
      if (!parse_u64(value, 1, HL_FUNCTION_MAX_RESULTS, &u)) {
        return usage_error(flag, value, "an integer in [1, 32]");
      }
      out->results = (uint32_t)u;
    } else if (!strcmp(flag, "--aliasing")) {
      if (!parse_double(value, 0, 1, &d)) {
        return usage_error(flag, value, "a fraction in [0, 1]");
      }
      out->aliasing = d;
      out->aliasing_set = true;
    } else if (!strcmp(flag, "--escape")) {
      if (!parse_double(value, 0, 1, &d)) {
        return usage_error(flag, value, "a fraction in [0, 1]");
      }
      out->escape = d;
    } else if (!strcmp(flag, "--trace-events")) {
      if (!parse_u64(value, 1, 100000000, &out->trace_events)) {
        return usage_error(flag, value, "an integer in [1, 100000000]");
      }
    } else if (!strcmp(flag, "--spin")) {
      if (!parse_u64(value, 0, 1000000000, &out->spin_ns)) {
        return usage_error(flag, value, "nanoseconds in [0, 1000000000]");
      }
    } else if (!strcmp(flag, "--json") || !strcmp(flag, "--trace") ||
               !strcmp(flag, "--trace-file") || !strcmp(flag, "--log")) {
      if (!value[0]) return usage_error(flag, value, "a file path");
      if (!strcmp(flag, "--json")) {
        out->json_path = value;
      } else if (!strcmp(flag, "--trace")) {
        out->trace_path = value;
      } else {
        if (out->log_path) {
          fprintf(stderr, STRESS_PROG ": %s '%s': the log is already '%s'\n",
                  flag, value, out->log_path);
          return 2;
        }
        out->log_path = value;
      }
    }
  }

  // A log alone means replay.
  if (out->log_path && !out->workload_set) {
    out->workload = STRESS_WORKLOAD_REPLAY;
    out->workload_set = true;
  }
  if (out->workload_set && out->workload == STRESS_WORKLOAD_REPLAY &&
      !out->log_path) {
    fprintf(stderr, STRESS_PROG
            ": --workload replay needs a log: --trace-file FILE, --log FILE "
            "or a positional LOG\n");
    return 2;
  }
  if (out->log_path && out->workload != STRESS_WORKLOAD_REPLAY) {
    fprintf(stderr,
            STRESS_PROG
            ": a log ('%s') is only read by --workload replay, "
            "not --workload %s\n",
            out->log_path, stress_workload_name(out->workload));
    return 2;
  }
  if (out->matrix && policy_set) {
    fprintf(stderr, STRESS_PROG
            ": --matrix runs the four default policies; it cannot be combined "
            "with --alloc, --assume-no-alias or --fallback\n");
    return 2;
  }
  // No workload: the default run, the whole matrix.
  if (!out->workload_set) out->matrix = !policy_set || out->matrix;
  if (out->policy.alloc == STRESS_ALLOC_SYNC) {
    out->policy.label = "sync";
  } else if (!out->policy.assume_no_alias) {
    out->policy.label =
        out->policy.fallback == HL_FALLBACK_DEVICE_SYNC ? "noalias0-devsync"
        : out->policy.fallback == HL_FALLBACK_FRONTIER  ? "noalias0-frontier"
        : out->policy.fallback == HL_FALLBACK_ORDERED   ? "noalias0-ordered"
                                                        : "noalias0";
  }
  return 0;
}
