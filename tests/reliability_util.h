// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Helpers shared by the reliability tests (tests/reliability_*_test.c and
// tests/bad_input_test.c): devices on the test backend (tests/test_util.h:
// the host backend, or hip with HIPLINE_TEST_BACKEND=hip), one-pair fences,
// waits with a deadline, fault-injection scopes, RSS and child processes.
#ifndef HIPLINE_TESTS_RELIABILITY_UTIL_H_
#define HIPLINE_TESTS_RELIABILITY_UTIL_H_

#include <spawn.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hipline/hipline.h"
#include "runtime/base/faults.h"
#include "runtime/timeline/timeline_internal.h"
#include "tests/test_util.h"

#define REL_MS ((hl_duration_t)1000000)
// Every wait in these tests ends: a lost signal fails the test, never hangs.
#define REL_DEADLINE() hl_deadline_after(20000 * REL_MS)

extern char** environ;

static inline hl_device_t* rel_device_create(int checked) {
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = hl_test_backend_kind();
  o.checked = checked;
  o.fallback = HL_FALLBACK_FRONTIER;
  hl_device_t* d = NULL;
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  return d;
}

// Installs |spec| (parsed strictly) as the process fault configuration.
static inline void rel_faults_set(const char* spec) {
  hl_faults_t f;
  HL_ASSERT_OK(hl_faults_parse(spec, &f));
  hl_faults_set(&f);
}

static inline void rel_faults_clear(void) { hl_faults_set(NULL); }

static inline hl_fault_counts_t rel_fault_counts(void) {
  hl_fault_counts_t c;
  hl_faults_counts(&c);
  return c;
}

// Resident set size of this process in bytes (/proc/self/statm).
static inline uint64_t rel_rss_bytes(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  int n = fscanf(f, "%lu %lu", &size, &resident);
  fclose(f);
  if (n != 2) return 0;
  return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

// Runs /proc/self/exe with |args| (argv[1..], NULL-terminated) and the
// current environment plus |extra_env| ("NAME=value", may be NULL). Returns
// the exit code, or 128+signal when the child was killed.
static inline int rel_run_self(const char* const* args, const char* extra_env) {
  size_t env_count = 0;
  while (environ[env_count]) ++env_count;
  char** envp = calloc(env_count + 2, sizeof(char*));
  assert_non_null(envp);
  size_t j = 0;
  size_t name_len = 0;
  if (extra_env) {
    const char* eq = strchr(extra_env, '=');
    name_len = eq ? (size_t)(eq - extra_env) + 1 : strlen(extra_env);
  }
  for (size_t i = 0; i < env_count; ++i) {
    if (extra_env && strncmp(environ[i], extra_env, name_len) == 0) continue;
    envp[j++] = environ[i];
  }
  if (extra_env) envp[j++] = (char*)extra_env;
  envp[j] = NULL;
  char* argv[16];
  size_t argc = 0;
  argv[argc++] = (char*)"/proc/self/exe";
  for (size_t i = 0; args[i] && argc < 15; ++i) argv[argc++] = (char*)args[i];
  argv[argc] = NULL;
  pid_t pid = 0;
  int rc = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, envp);
  free(envp);
  assert_int_equal(rc, 0);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0) {
  }
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return 255;
}

// The child side of an environment check: creates a device and returns
// 0 when that fails with INVALID_ARGUMENT naming |variable|, 1 otherwise
// (printing what it got).
static inline int rel_child_expect_env_error(const char* variable) {
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = hl_test_backend_kind();
  hl_device_t* d = NULL;
  hl_status_t st = hl_device_create(&o, hl_allocator_system(), &d);
  char text[1024];
  hl_status_format(st, text, sizeof(text));
  bool ok = hl_status_code(st) == HL_STATUS_INVALID_ARGUMENT &&
            strstr(text, variable) != NULL;
  hl_status_free(st);
  hl_device_release(d);
  hl_status_t check = hl_environment_check();
  char check_text[1024];
  hl_status_format(check, check_text, sizeof(check_text));
  ok = ok && hl_status_code(check) == HL_STATUS_INVALID_ARGUMENT &&
       strstr(check_text, variable) != NULL;
  hl_status_free(check);
  if (!ok) {
    fprintf(stderr,
            "child: expected INVALID_ARGUMENT naming %s, got '%s' / '%s'\n",
            variable, text, check_text);
  }
  return ok ? 0 : 1;
}

#endif  // HIPLINE_TESTS_RELIABILITY_UTIL_H_
