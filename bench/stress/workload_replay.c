// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// replay: an allocation log replayed through the queue-ordered allocator.
//
// The log is RMM's logging CSV (bench/replay_log.h). A PyTorch snapshot
// pickle or a Kineto JSON(.gz) is recognised by its first bytes and
// converted to that CSV first by running tools/hipline-trace-convert (its
// path: HIPLINE_TRACE_CONVERT, else next to this program, else the source
// tree this program was built from). Each log stream maps to a queue
// (stream mod K). The first bytes (up to 256) of each allocation are filled
// with a pattern and one allocation in four is checked before its free.
// Reported: the pool's peak reserved bytes against the log's own peak live
// bytes, and what PyTorch's caching allocator would reserve for the same
// events (torch_model.h: simulated in this process once per log, on one
// stream, with no device limit; no device involved) and an ideal best-fit
// arena would (arena_model.h: the least a non-moving allocator reserves).

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/replay_log.h"
#include "bench/stress/arena_model.h"
#include "bench/stress/stress.h"
#include "bench/stress/torch_model.h"

#ifndef HL_STRESS_TRACE_CONVERT
#define HL_STRESS_TRACE_CONVERT ""
#endif

#define REPLAY_DEFAULT_QUEUES 4
#define REPLAY_HEAD_BYTES 256
#define REPLAY_VERIFY_PROBABILITY 0.25

extern char** environ;

// The log is parsed once per program, whatever number of runs replay it.
static struct {
  bool loaded;
  char path[4096];       // The file given.
  char converted[4096];  // The temporary CSV, "" when none.
  char copied[4096];     // A pipe's content copied to a file, "" when none.
  hl_replay_log_t log;
  hl_replay_summary_t summary;
  hl_torch_model_stats_t torch_model;
  hl_arena_model_stats_t arena;
} replay_cache;

void stress_replay_cleanup(void);
void stress_replay_cleanup(void) {
  if (replay_cache.converted[0]) unlink(replay_cache.converted);
  replay_cache.converted[0] = '\0';
  if (replay_cache.copied[0]) unlink(replay_cache.copied);
  replay_cache.copied[0] = '\0';
  hl_replay_log_deinitialize(&replay_cache.log);
  replay_cache.loaded = false;
}

// True when |path| holds something other than CSV text that the converter
// reads: gzip, a pickle, or JSON.
static hl_status_t replay_needs_conversion(const char* path, bool* out) {
  *out = false;
  FILE* f = fopen(path, "rb");
  if (!f) {
    return HL_MAKE_STATUS(
        errno == ENOENT ? HL_STATUS_NOT_FOUND : HL_STATUS_PERMISSION_DENIED,
        "cannot open the log '%s': %s", path, strerror(errno));
  }
  unsigned char head[4] = {0};
  size_t n = fread(head, 1, sizeof(head), f);
  fclose(f);
  size_t skip = n >= 3 && head[0] == 0xef && head[1] == 0xbb && head[2] == 0xbf
                    ? 3
                    : 0;  // A UTF-8 byte-order mark before CSV text.
  if (n > skip) {
    unsigned char c = head[skip];
    *out = (n >= 2 && head[0] == 0x1f && head[1] == 0x8b) || head[0] == 0x80 ||
           c == '{' || c == '[';
  }
  return hl_ok_status();
}

static bool replay_executable(const char* path) {
  return path && path[0] && access(path, X_OK) == 0;
}

// Finds tools/hipline-trace-convert.
static const char* replay_converter(char* scratch, size_t capacity) {
  const char* env = getenv("HIPLINE_TRACE_CONVERT");
  if (env && env[0]) return env;
  ssize_t len = readlink("/proc/self/exe", scratch, capacity - 1);
  if (len > 0) {
    scratch[len] = '\0';
    char* slash = strrchr(scratch, '/');
    const char* name = "hipline-trace-convert";
    if (slash && (size_t)(slash - scratch) + 1 + strlen(name) < capacity) {
      strcpy(slash + 1, name);
      if (replay_executable(scratch)) return scratch;
    }
  }
  return HL_STRESS_TRACE_CONVERT;
}

// Creates an empty temporary file (TMPDIR, else /tmp) named into |out_path|.
static hl_status_t replay_temporary(char* out_path, size_t capacity) {
  const char* tmpdir = getenv("TMPDIR");
  if (!tmpdir || !tmpdir[0]) tmpdir = "/tmp";
  int n = snprintf(out_path, capacity, "%s/hipline-stress-XXXXXX", tmpdir);
  if (n < 0 || (size_t)n >= capacity) {
    out_path[0] = '\0';
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "TMPDIR is too long");
  }
  int fd = mkstemp(out_path);
  if (fd < 0) {
    int error = errno;
    out_path[0] = '\0';
    return HL_MAKE_STATUS(HL_STATUS_PERMISSION_DENIED,
                          "creating a temporary file in '%s': %s", tmpdir,
                          strerror(error));
  }
  close(fd);
  return hl_ok_status();
}

// Whether the first |n| bytes of a streamed log (|done|: all of it) can start
// a log: gzip, a pickle, JSON, or CSV text whose first line ends within them.
// An endless stream of anything else (/dev/zero) is refused from its start.
static hl_status_t replay_stream_head_check(const char* path,
                                            const unsigned char* head, size_t n,
                                            bool done) {
  size_t skip =
      n >= 3 && head[0] == 0xef && head[1] == 0xbb && head[2] == 0xbf ? 3 : 0;
  if (n <= skip) return hl_ok_status();
  unsigned char c = head[skip];
  if ((n >= 2 && head[0] == 0x1f && head[1] == 0x8b) || head[0] == 0x80 ||
      c == '{' || c == '[') {
    return hl_ok_status();  // For the converter, which bounds its input.
  }
  if (c < 0x20 || c > 0x7e) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "the log '%s' starts with byte 0x%02x: not RMM CSV "
                          "text, gzip, a pickle or JSON",
                          path, c);
  }
  if (!done && !memchr(head, '\n', n)) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "the log '%s' has no line end in its first %zu "
                          "bytes: not RMM CSV text",
                          path, n);
  }
  return hl_ok_status();
}

// A log that is not a regular file (a pipe: /dev/stdin, <(...)) can be read
// once only; it is copied to a temporary file that is sniffed and parsed.
static hl_status_t replay_copy_stream(const char* path, char* out_path,
                                      size_t capacity) {
  HL_RETURN_IF_ERROR_PLAIN(replay_temporary(out_path, capacity));
  FILE* in = fopen(path, "rb");
  FILE* out = in ? fopen(out_path, "wb") : NULL;
  hl_status_t st = NULL;
  if (!in || !out) {
    st = HL_MAKE_STATUS(HL_STATUS_PERMISSION_DENIED, "cannot open '%s': %s",
                        in ? out_path : path, strerror(errno));
  }
  char buffer[65536];
  size_t n = 0;
  bool first = true;
  while (!st && !stress_interrupted &&
         (n = fread(buffer, 1, sizeof(buffer), in)) > 0) {
    if (first) {
      first = false;
      st = replay_stream_head_check(path, (const unsigned char*)buffer, n,
                                    n < sizeof(buffer));
      if (st) break;
    }
    if (fwrite(buffer, 1, n, out) != n) {
      st = HL_MAKE_STATUS(HL_STATUS_DATA_LOSS, "copying '%s' to '%s': %s", path,
                          out_path, strerror(errno));
    }
  }
  if (!st && in && ferror(in)) {
    st = HL_MAKE_STATUS(HL_STATUS_DATA_LOSS, "reading '%s': %s", path,
                        strerror(errno));
  }
  if (!st && stress_interrupted) {
    st = HL_MAKE_STATUS(HL_STATUS_CANCELLED, "reading '%s' was interrupted",
                        path);
  }
  if (in) fclose(in);
  if (out && fclose(out) != 0 && !st) {
    st = HL_MAKE_STATUS(HL_STATUS_DATA_LOSS, "writing '%s': %s", out_path,
                        strerror(errno));
  }
  return st;
}

static hl_status_t replay_convert(const char* input, char* out_csv,
                                  size_t capacity) {
  char scratch[4096];
  const char* converter = replay_converter(scratch, sizeof(scratch));
  if (!replay_executable(converter)) {
    return HL_MAKE_STATUS(
        HL_STATUS_NOT_FOUND,
        "'%s' is not RMM CSV and the converter is missing ('%s'); convert it "
        "first: tools/hipline-trace-convert '%s' -o trace.csv, or set "
        "HIPLINE_TRACE_CONVERT",
        input, converter, input);
  }
  HL_RETURN_IF_ERROR_PLAIN(replay_temporary(out_csv, capacity));
  // "--" ends the options: a log named "--help" is a file name.
  char* argv[] = {(char*)converter, (char*)"-o",  out_csv,
                  (char*)"--",      (char*)input, NULL};
  pid_t pid = 0;
  int rc = posix_spawn(&pid, converter, NULL, NULL, argv, environ);
  int status = 0;
  bool interrupted = false;
  if (rc == 0) {
    // Polled, so that a signal to this program stops the converter too (a
    // SIGTERM reaches only this process) and its temporary file goes.
    for (;;) {
      pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid || (done < 0 && errno != EINTR)) break;
      if (stress_interrupted && !interrupted) {
        interrupted = true;
        kill(pid, SIGTERM);
      }
      struct timespec pause = {0, 10 * 1000 * 1000};
      nanosleep(&pause, NULL);
    }
  }
  if (interrupted) {
    unlink(out_csv);
    out_csv[0] = '\0';
    return HL_MAKE_STATUS(HL_STATUS_CANCELLED,
                          "converting '%s' was interrupted", input);
  }
  if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    unlink(out_csv);
    out_csv[0] = '\0';
    return HL_MAKE_STATUS(
        HL_STATUS_INVALID_ARGUMENT, "converting '%s' with '%s' failed (%s %d)",
        input, converter, rc ? "spawn error" : "exit status",
        rc ? rc : (WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  return hl_ok_status();
}

static hl_status_t replay_load(const char* path) {
  if (replay_cache.loaded && !strcmp(replay_cache.path, path)) {
    return hl_ok_status();
  }
  stress_replay_cleanup();
  snprintf(replay_cache.path, sizeof(replay_cache.path), "%s", path);
  struct stat info;
  if (stat(path, &info) != 0) {
    return HL_MAKE_STATUS(
        errno == ENOENT ? HL_STATUS_NOT_FOUND : HL_STATUS_PERMISSION_DENIED,
        "cannot open the log '%s': %s", path, strerror(errno));
  }
  if (S_ISDIR(info.st_mode)) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "the log '%s' is a directory", path);
  }
  const char* source = path;
  if (!S_ISREG(info.st_mode)) {
    HL_RETURN_IF_ERROR_PLAIN(replay_copy_stream(path, replay_cache.copied,
                                                sizeof(replay_cache.copied)));
    source = replay_cache.copied;
  }
  bool convert = false;
  HL_RETURN_IF_ERROR_PLAIN(replay_needs_conversion(source, &convert));
  const char* csv = source;
  if (convert) {
    HL_RETURN_IF_ERROR_PLAIN(replay_convert(source, replay_cache.converted,
                                            sizeof(replay_cache.converted)));
    csv = replay_cache.converted;
  }
  hl_status_t st =
      hl_replay_log_parse_file(csv, HL_REPLAY_LOG_FLAG_NONE, &replay_cache.log);
  if (st) {
    return csv != path
               ? hl_status_annotate(st, "reading '%s' (a copy of the log '%s')",
                                    csv, path)
               : st;
  }
  hl_replay_log_summarize(&replay_cache.log, &replay_cache.summary);
  HL_RETURN_IF_ERROR_PLAIN(
      hl_torch_model_replay(&replay_cache.log, 0, &replay_cache.torch_model));
  HL_RETURN_IF_ERROR_PLAIN(
      hl_arena_model_replay(&replay_cache.log, &replay_cache.arena));
  replay_cache.loaded = true;
  return hl_ok_status();
}

static uint32_t replay_seed(uint32_t id, uint64_t pass) {
  return id * 2654435761u + (uint32_t)pass * 40503u + 1;
}

// Fills or checks the head of |buffer| (a subview; nothing for < 4 bytes).
static hl_status_t replay_head(stress_run_t* run, uint32_t qi,
                               hl_buffer_t* buffer, uint32_t seed,
                               bool verify) {
  uint64_t head = hl_buffer_length(buffer) & ~(uint64_t)3;
  if (head > REPLAY_HEAD_BYTES) head = REPLAY_HEAD_BYTES;
  if (head < 4) return hl_ok_status();
  hl_buffer_t* view = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_buffer_subview(buffer, 0, head, &view));
  hl_status_t st =
      verify ? stress_oracle_verify(run->oracle, qi, NULL, NULL, view, seed)
             : stress_oracle_fill(run->oracle, qi, NULL, NULL, view, seed);
  hl_buffer_release(view);
  return st;
}

hl_status_t stress_workload_replay(const stress_options_t* options,
                                   const stress_policy_t* policy,
                                   stress_result_t* result) {
  result->workload = STRESS_WORKLOAD_REPLAY;
  HL_RETURN_IF_ERROR_PLAIN(replay_load(options->log_path));
  const hl_replay_log_t* log = &replay_cache.log;
  result->log_events = log->event_count;
  result->log_peak_live_bytes = replay_cache.summary.peak_live_bytes;
  result->log_peak_live_count = replay_cache.summary.peak_live_count;
  result->torch_model_peak_reserved_bytes =
      replay_cache.torch_model.peak_reserved_bytes;
  result->arena_peak_reserved_bytes = replay_cache.arena.peak_reserved_bytes;

  uint32_t k = options->queues;
  if (!k) {
    k = log->stream_count < REPLAY_DEFAULT_QUEUES ? log->stream_count
                                                  : REPLAY_DEFAULT_QUEUES;
    if (k == 0) k = 1;
  }
  uint64_t passes = options->iterations ? options->iterations : 1;

  stress_run_t run;
  hl_status_t st = stress_run_initialize(options, policy, k, result, &run);
  hl_buffer_t** slots = NULL;
  if (!st && log->slot_count) {
    slots = calloc(log->slot_count, sizeof(*slots));
    if (!slots) {
      st = HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating %u replay slots", log->slot_count);
    }
  }
  uint64_t ops = 0;
  hl_time_t start = hl_time_now();
  for (uint64_t pass = 0; !st && !stress_run_done(&run, pass, passes); ++pass) {
    for (size_t i = 0; i < log->event_count && !st; ++i) {
      // A signal or the deadline also ends a pass (step 0 of 1: not done by
      // count).
      if (i && (i & 255) == 0 && stress_run_done(&run, 0, 1)) break;
      const hl_replay_event_t* e = &log->events[i];
      uint32_t qi = e->stream % k;
      hl_time_t t0 = hl_time_now();
      if (e->op == HL_REPLAY_OP_ALLOC) {
        uint64_t size = e->size ? e->size : 1;
        st = stress_run_alloc(&run, qi, size, &slots[e->id]);
        if (!st) {
          st = replay_head(&run, qi, slots[e->id], replay_seed(e->id, pass),
                           false);
        }
        if (st) {
          st = hl_status_annotate(st,
                                  "%s:%u: replaying an allocation of %llu "
                                  "bytes",
                                  options->log_path, e->line,
                                  (unsigned long long)size);
        }
      } else if (slots[e->id]) {
        if (stress_rng_unit(&run.rng) < REPLAY_VERIFY_PROBABILITY) {
          st = replay_head(&run, qi, slots[e->id], replay_seed(e->id, pass),
                           true);
        }
        st = hl_status_join(st, stress_run_free(&run, qi, slots[e->id]));
        slots[e->id] = NULL;
      }
      stress_latency_record(&run.latency, t0, hl_time_now());
      ++ops;
      if ((i & 1023) == 0) {
        stress_progress(&run,
                        stress_run_fraction(&run, pass * log->event_count + i,
                                            passes * log->event_count));
      }
    }
    // Allocations the log never frees end with the pass.
    for (uint32_t id = 0; slots && id < log->slot_count; ++id) {
      if (!slots[id]) continue;
      st = hl_status_join(st, stress_run_free(&run, 0, slots[id]));
      slots[id] = NULL;
    }
  }
  for (uint32_t id = 0; slots && id < log->slot_count; ++id) {
    if (slots[id]) hl_buffer_release(slots[id]);
  }
  hl_status_t wst =
      run.device ? hl_device_wait_idle(run.device, HL_INFINITE_FUTURE) : NULL;
  hl_time_t end = hl_time_now();
  st = hl_status_join(st, wst);
  if (run.device) {
    st = hl_status_join(st, stress_run_finish(&run, start, end, ops));
  }
  free(slots);
  stress_run_deinitialize(&run);
  return st;
}
