// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Command-line parsing for hipline-stress with glibc's getopt_long. Every bad
// value is an error that names the flag, the value and what is accepted
// (exit status 2). Option names are matched whole (no abbreviations), so a
// name is either an option or an error, whatever options are added later.

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/stress/stress.h"

static const char* const kWorkloadNames[STRESS_WORKLOAD_COUNT_] = {
    "random", "multistream", "serving", "replay", "tp"};

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
      "  --workload NAME       random | multistream | serving | replay | tp\n"
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
      "  --devices N           devices (tp: each computes a shard, all\n"
      "                        shards are gathered to every device; 1..8,\n"
      "                        default 2)\n"
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
      "  --memory-snapshot FILE\n"
      "                        every alloca and free of the program as a\n"
      "                        PyTorch memory snapshot pickle (memory_viz\n"
      "                        opens it; tools/hipline-trace-convert turns it\n"
      "                        into a log for --workload replay)\n"
      "  --quiet               no table\n"
      "  --wide                every column in the table (the default shows\n"
      "                        the key ones in 100 columns; --json has all)\n"
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

enum {
  OPT_LOG_POSITIONAL = 1,  // getopt_long's code for a positional argument.
  OPT_WORKLOAD = 256,
  OPT_MATRIX,
  OPT_ITERATIONS,
  OPT_DURATION,
  OPT_SEED,
  OPT_MAX_SIZE,
  OPT_LIVE_CAP,
  OPT_QUEUES,
  OPT_DEVICES,
  OPT_REQUESTS,
  OPT_RESULTS,
  OPT_ALIASING,
  OPT_ESCAPE,
  OPT_SPIN,
  OPT_TRACE_FILE,
  OPT_LOG,
  OPT_ALLOC,
  OPT_ASSUME_NO_ALIAS,
  OPT_FALLBACK,
  OPT_BACKEND,
  OPT_CHECKED,
  OPT_JSON,
  OPT_TRACE,
  OPT_TRACE_EVENTS,
  OPT_MEMORY_SNAPSHOT,
  OPT_QUIET,
  OPT_WIDE,
  OPT_HELP,
};

static const struct option kOptions[] = {
    {"workload", required_argument, NULL, OPT_WORKLOAD},
    {"matrix", no_argument, NULL, OPT_MATRIX},
    {"iterations", required_argument, NULL, OPT_ITERATIONS},
    {"duration", required_argument, NULL, OPT_DURATION},
    {"seed", required_argument, NULL, OPT_SEED},
    {"max-size", required_argument, NULL, OPT_MAX_SIZE},
    {"live-cap", required_argument, NULL, OPT_LIVE_CAP},
    {"queues", required_argument, NULL, OPT_QUEUES},
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"requests", required_argument, NULL, OPT_REQUESTS},
    {"results", required_argument, NULL, OPT_RESULTS},
    {"aliasing", required_argument, NULL, OPT_ALIASING},
    {"escape", required_argument, NULL, OPT_ESCAPE},
    {"spin", required_argument, NULL, OPT_SPIN},
    {"trace-file", required_argument, NULL, OPT_TRACE_FILE},
    {"log", required_argument, NULL, OPT_LOG},
    {"alloc", required_argument, NULL, OPT_ALLOC},
    {"assume-no-alias", required_argument, NULL, OPT_ASSUME_NO_ALIAS},
    {"fallback", required_argument, NULL, OPT_FALLBACK},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"checked", no_argument, NULL, OPT_CHECKED},
    {"json", required_argument, NULL, OPT_JSON},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"trace-events", required_argument, NULL, OPT_TRACE_EVENTS},
    {"memory-snapshot", required_argument, NULL, OPT_MEMORY_SNAPSHOT},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"wide", no_argument, NULL, OPT_WIDE},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

// The option a token names: "--name" or "--name=value" (NULL: none, or a
// token that is not a long option).
static const struct option* option_named(const char* token) {
  if (strncmp(token, "--", 2) != 0) return NULL;
  const char* name = token + 2;
  size_t n = strcspn(name, "=");
  for (const struct option* o = kOptions; o->name; ++o) {
    if (strlen(o->name) == n && !strncmp(o->name, name, n)) return o;
  }
  return NULL;
}

// The token's flag, without "=value" ("--queues=3" is "--queues").
static void flag_of(const char* token, char* flag, size_t capacity) {
  size_t n = strcspn(token, "=");
  if (n >= capacity) n = capacity - 1;
  memcpy(flag, token, n);
  flag[n] = '\0';
}

// A token getopt_long refused ('?') or found without its value (':').
static int token_error(int code, const char* token) {
  char flag[64];
  flag_of(token, flag, sizeof(flag));
  const struct option* o = option_named(token);
  if (code == ':') {
    fprintf(stderr, STRESS_PROG ": option %s needs a value\n", flag);
  } else if (o && o->has_arg == no_argument && strchr(token, '=')) {
    fprintf(stderr, STRESS_PROG ": %s takes no value (got '%s')\n", flag,
            strchr(token, '=') + 1);
  } else {
    fprintf(stderr,
            STRESS_PROG ": unknown option '%s'\nTry '" STRESS_PROG
                        " --help'.\n",
            flag);
  }
  return 2;
}

// Sets the log: --trace-file, --log or a positional LOG (one of them).
static int set_log(const char* flag, const char* value, stress_options_t* out) {
  if (!flag) {
    if (out->log_path) {
      fprintf(stderr,
              STRESS_PROG
              ": unexpected argument '%s' (the log is already "
              "'%s')\n",
              value, out->log_path);
      return 2;
    }
  } else if (!value[0]) {
    return usage_error(flag, value, "a file path");
  } else if (out->log_path) {
    fprintf(stderr, STRESS_PROG ": %s '%s': the log is already '%s'\n", flag,
            value, out->log_path);
    return 2;
  }
  out->log_path = value;
  return 0;
}

static int set_path(const char* flag, const char* value, const char** out) {
  if (!value[0]) return usage_error(flag, value, "a file path");
  *out = value;
  return 0;
}

// One of |names| (NULL-terminated) into |*out| (its index).
static int set_choice(const char* flag, const char* value,
                      const char* const* names, const char* accepted,
                      int* out) {
  for (int i = 0; names[i]; ++i) {
    if (!strcmp(value, names[i])) {
      *out = i;
      return 0;
    }
  }
  return usage_error(flag, value, accepted);
}

static int set_u64(const char* flag, const char* value, uint64_t lo,
                   uint64_t hi, const char* accepted, uint64_t* out) {
  return parse_u64(value, lo, hi, out) ? 0 : usage_error(flag, value, accepted);
}

static int set_u32(const char* flag, const char* value, uint64_t hi,
                   const char* accepted, uint32_t* out) {
  uint64_t u = 0;
  if (!parse_u64(value, 1, hi, &u)) return usage_error(flag, value, accepted);
  *out = (uint32_t)u;
  return 0;
}

static int set_fraction(const char* flag, const char* value, double* out) {
  return parse_double(value, 0, 1, out)
             ? 0
             : usage_error(flag, value, "a fraction in [0, 1]");
}

// The policy flags (--alloc, --assume-no-alias, --fallback).
static int set_policy(int code, const char* flag, const char* value,
                      stress_options_t* out) {
  static const char* const kAllocs[] = {"async", "sync", NULL};
  static const char* const kNoAlias[] = {"0", "1", NULL};
  static const char* const kFallbacks[] = {"ordered", "device-sync", "frontier",
                                           NULL};
  static const hl_fallback_mode_t kFallbackModes[] = {
      HL_FALLBACK_ORDERED, HL_FALLBACK_DEVICE_SYNC, HL_FALLBACK_FRONTIER};
  int i = 0, rc = 0;
  if (code == OPT_ALLOC) {
    rc = set_choice(flag, value, kAllocs, "async or sync", &i);
    if (!rc) out->policy.alloc = i ? STRESS_ALLOC_SYNC : STRESS_ALLOC_ASYNC;
  } else if (code == OPT_ASSUME_NO_ALIAS) {
    rc = set_choice(flag, value, kNoAlias, "0 or 1", &i);
    if (!rc) out->policy.assume_no_alias = i == 1;
  } else {
    rc = set_choice(flag, value, kFallbacks, "ordered, device-sync or frontier",
                    &i);
    if (!rc) out->policy.fallback = kFallbackModes[i];
  }
  return rc;
}

// The workload's and the run's choices (--workload, --backend).
static int set_kind(int code, const char* flag, const char* value,
                    stress_options_t* out) {
  static const char* const kWorkloads[] = {"random", "multistream", "serving",
                                           "replay", "tp",          NULL};
  static const char* const kBackends[] = {"auto", "host", "hip", NULL};
  static const hl_backend_kind_t kBackendKinds[] = {
      HL_BACKEND_AUTO, HL_BACKEND_HOST, HL_BACKEND_HIP};
  int i = 0, rc = 0;
  if (code == OPT_WORKLOAD) {
    rc = set_choice(flag, value, kWorkloads,
                    "one of random, multistream, serving, replay, tp", &i);
    if (!rc) {
      out->workload = (stress_workload_t)i;
      out->workload_set = true;
    }
  } else {
    rc = set_choice(flag, value, kBackends, "auto, host or hip", &i);
    if (!rc) out->backend = kBackendKinds[i];
  }
  return rc;
}

// The numeric flags.
static int set_number(int code, const char* flag, const char* value,
                      stress_options_t* out) {
  switch (code) {
    case OPT_SEED:
      return set_u64(flag, value, 0, UINT64_MAX, "an unsigned 64-bit integer",
                     &out->seed);
    case OPT_ITERATIONS:
      return set_u64(flag, value, 1, 100000000, "an integer in [1, 100000000]",
                     &out->iterations);
    case OPT_TRACE_EVENTS:
      return set_u64(flag, value, 1, 100000000, "an integer in [1, 100000000]",
                     &out->trace_events);
    case OPT_SPIN:
      return set_u64(flag, value, 0, 1000000000,
                     "nanoseconds in [0, 1000000000]", &out->spin_ns);
    case OPT_DURATION:
      return parse_double(value, 0.001, 86400, &out->duration_s)
                 ? 0
                 : usage_error(flag, value, "seconds in [0.001, 86400]");
    case OPT_MAX_SIZE:
      return parse_size(value, 4, 1ull << 30, &out->max_size)
                 ? 0
                 : usage_error(flag, value,
                               "bytes in [4, 1G] (suffixes K, M, G allowed)");
    case OPT_LIVE_CAP:
      return parse_size(value, 4, 1ull << 40, &out->live_cap)
                 ? 0
                 : usage_error(
                       flag, value,
                       "bytes in [4, 1024G] (suffixes K, M, G allowed)");
    case OPT_QUEUES:
      return set_u32(flag, value, STRESS_MAX_QUEUES, "an integer in [1, 64]",
                     &out->queues);
    case OPT_DEVICES:
      return set_u32(flag, value, 8, "an integer in [1, 8]", &out->devices);
    case OPT_REQUESTS:
      return set_u32(flag, value, STRESS_MAX_REQUESTS,
                     "an integer in [1, 4096]", &out->requests);
    case OPT_RESULTS:
      return set_u32(flag, value, HL_FUNCTION_MAX_RESULTS,
                     "an integer in [1, 32]", &out->results);
    case OPT_ALIASING:
      out->aliasing_set = true;
      return set_fraction(flag, value, &out->aliasing);
    case OPT_ESCAPE:
      return set_fraction(flag, value, &out->escape);
  }
  return 0;
}

// Applies option |code| with |value| (NULL for a bare flag); |flag| names
// it in errors.
static int apply_option(int code, const char* flag, const char* value,
                        stress_options_t* out, bool* policy_set) {
  switch (code) {
    case OPT_LOG_POSITIONAL:
      return set_log(NULL, value, out);
    case OPT_TRACE_FILE:
    case OPT_LOG:
      return set_log(flag, value, out);
    case OPT_JSON:
      return set_path(flag, value, &out->json_path);
    case OPT_TRACE:
      return set_path(flag, value, &out->trace_path);
    case OPT_MEMORY_SNAPSHOT:
      return set_path(flag, value, &out->memory_snapshot_path);
    case OPT_MATRIX:
      out->matrix = true;
      return 0;
    case OPT_CHECKED:
      out->checked = true;
      return 0;
    case OPT_QUIET:
      out->quiet = true;
      return 0;
    case OPT_WIDE:
      out->wide = true;
      return 0;
    case OPT_ALLOC:
    case OPT_ASSUME_NO_ALIAS:
    case OPT_FALLBACK:
      *policy_set = true;
      return set_policy(code, flag, value, out);
    case OPT_WORKLOAD:
    case OPT_BACKEND:
      return set_kind(code, flag, value, out);
  }
  return set_number(code, flag, value, out);
}

// The checks across options, and the policy's label.
static int options_finish(stress_options_t* out, bool policy_set) {
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

static void options_defaults(stress_options_t* out) {
  memset(out, 0, sizeof(*out));
  out->backend = HL_BACKEND_AUTO;
  out->policy.label = "async";
  out->policy.alloc = STRESS_ALLOC_ASYNC;
  out->policy.assume_no_alias = true;
  out->policy.fallback = HL_FALLBACK_DEFAULT;
  out->seed = 1;
  out->spin_ns = 20000;
  out->live_cap = 64ull << 20;
}

int stress_options_parse(int argc, char** argv, stress_options_t* out) {
  options_defaults(out);
  bool policy_set = false;
  // "-": positional arguments in place (code 1); ":": a missing value is
  // ':', not a message of getopt's own; opterr 0: no messages at all.
  opterr = 0;
  optind = 0;  // Resets glibc's scanner (tests parse more than once).
  for (;;) {
    int at = optind ? optind : 1;  // The token getopt_long reads next.
    int code = getopt_long(argc, argv, "-:h", kOptions, NULL);
    if (code == -1) break;
    if (code == 'h' || code == OPT_HELP) {
      stress_options_print_help(stdout);
      return 1;
    }
    if (at >= argc) at = argc - 1;
    const char* token = argv[at];
    if (code == '?' || code == ':') return token_error(code, token);
    // getopt_long matches a unique prefix; an option is only its whole name.
    const struct option* named = option_named(token);
    if (code != OPT_LOG_POSITIONAL && (!named || named->val != code)) {
      return token_error('?', token);
    }
    char flag[64];
    flag_of(token, flag, sizeof(flag));
    int rc = apply_option(code, flag, optarg, out, &policy_set);
    if (rc) return rc;
  }
  // After "--": the rest are positional.
  for (int i = optind; i < argc; ++i) {
    int rc = set_log(NULL, argv[i], out);
    if (rc) return rc;
  }
  return options_finish(out, policy_set);
}
