// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The call counter of the hip test runtime (call_counts.h): a child process
// makes known calls from its main thread, from a thread named as hipline
// names its own ("hl-..."), and from an unnamed one; the file it writes at
// exit has one line per entry called, with the calls split by thread kind.

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <threads.h>
#include <unistd.h>

// cmocka.h must follow the headers above.
#include <cmocka.h>

#include "runtime/backend/hip/hip_types.h"
#include "tests/hip_test_runtime/call_counts.h"

#define HL_HIP_PFN(kind, return_type, name, params) return_type name params;
#include "runtime/backend/hip/dynamic_symbol_table.h"
#undef HL_HIP_PFN

static int named_thread_main(void* arg) {
  (void)arg;
  prctl(PR_SET_NAME, (unsigned long)"hl-test", 0ul, 0ul, 0ul);
  int device = -1;
  for (int i = 0; i < 2; ++i) (void)hipGetDevice(&device);
  return 0;
}

static int unnamed_thread_main(void* arg) {
  (void)arg;
  (void)hipSetDevice(0);
  return 0;
}

static int child_main(void) {
  int count = 0;
  for (int i = 0; i < 3; ++i) (void)hipGetDeviceCount(&count);
  thrd_t named, unnamed;
  if (thrd_create(&named, named_thread_main, NULL) != thrd_success ||
      thrd_create(&unnamed, unnamed_thread_main, NULL) != thrd_success) {
    return 2;
  }
  thrd_join(named, NULL);
  thrd_join(unnamed, NULL);
  return 0;
}

static char self_path[4096];

// Runs this executable as the child with HL_HIP_TEST_RUNTIME_CALL_COUNTS set
// to |path| (unset when NULL); returns its exit status.
static int run_child(const char* path) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (path) {
      setenv(HL_CALL_COUNTS_ENV, path, 1);
    } else {
      unsetenv(HL_CALL_COUNTS_ENV);
    }
    execl(self_path, self_path, "--child", (char*)NULL);
    _exit(127);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

static void temp_path(char* out, size_t size, const char* tag) {
  const char* dir = getenv("TMPDIR");
  snprintf(out, size, "%s/hl_call_counts_%s_%ld.txt", dir ? dir : "/tmp", tag,
           (long)getpid());
  unlink(out);
}

static void test_lines_split_by_thread(void** state) {
  (void)state;
  char path[4200];
  temp_path(path, sizeof(path), "split");
  assert_int_equal(run_child(path), 0);
  FILE* file = fopen(path, "r");
  assert_non_null(file);
  char line[256];
  assert_non_null(fgets(line, sizeof(line), file));
  assert_int_equal(line[0], '#');
  int seen = 0;
  while (fgets(line, sizeof(line), file)) {
    char name[128];
    long long total, caller, runtime;
    assert_int_equal(
        sscanf(line, "%127s %lld %lld %lld", name, &total, &caller, &runtime),
        4);
    assert_int_equal(total, caller + runtime);
    if (strcmp(name, "hipGetDeviceCount") == 0) {
      assert_int_equal(caller, 3);
      assert_int_equal(runtime, 0);
    } else if (strcmp(name, "hipGetDevice") == 0) {
      assert_int_equal(caller, 0);
      assert_int_equal(runtime, 2);
    } else if (strcmp(name, "hipSetDevice") == 0) {
      assert_int_equal(caller, 1);
      assert_int_equal(runtime, 0);
    } else {
      fail_msg("an entry the child never called: %s", line);
    }
    ++seen;
  }
  fclose(file);
  unlink(path);
  assert_int_equal(seen, 3);
}

static void test_nothing_written_without_the_variable(void** state) {
  (void)state;
  char path[4200];
  temp_path(path, sizeof(path), "unset");
  assert_int_equal(run_child(NULL), 0);
  assert_int_equal(access(path, F_OK), -1);
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--child") == 0) return child_main();
  ssize_t n = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
  if (n <= 0) return 1;
  self_path[n] = '\0';
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lines_split_by_thread),
      cmocka_unit_test(test_nothing_written_without_the_variable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
