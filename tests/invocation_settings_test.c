// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// assume_no_alias settings: precedence of the process-wide value (unset,
// true, false; API or HIPLINE_ASSUME_NO_ALIAS) over each invocation's own,
// checked through the query and through what the import actually does.
//
// The environment is read once per process, so the environment cases run in
// child processes: this binary re-executed (posix_spawn of /proc/self/exe)
// with "--child=<case>" and the variable set. A child reports by its exit
// status, with the reason on stderr.
#define HL_TEST_C11_THREADS_SHIM
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/invocation_util.h"

extern char** environ;

#define SIZE ((uint64_t)1024)
#define VAR "HIPLINE_ASSUME_NO_ALIAS"

static int teardown_unset(void** state) {
  (void)state;
  hl_set_assume_no_alias(HL_TRISTATE_UNSET);
  return 0;
}

//===----------------------------------------------------------------------===//
// Precedence (this process; the environment variable is unset by main)
//===----------------------------------------------------------------------===//

static void test_source_names(void** state) {
  (void)state;
  assert_string_equal(hl_setting_source_name(HL_SETTING_SOURCE_INVOCATION),
                      "invocation");
  assert_string_equal(hl_setting_source_name(HL_SETTING_SOURCE_API), "api");
  assert_string_equal(hl_setting_source_name(HL_SETTING_SOURCE_ENVIRONMENT),
                      "environment");
}

static void test_default_is_true(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 1);
  hl_function_t* f = inv_function("default", 0, NULL, 1, inv_fn_fresh, &c);
  hl_tristate_t global = HL_TRISTATE_TRUE;
  HL_ASSERT_OK(hl_get_assume_no_alias(&global, NULL));
  assert_int_equal(global, HL_TRISTATE_UNSET);
  hl_invocation_t* inv = NULL;
  HL_ASSERT_OK(hl_invocation_create(f, q, &inv));
  assert_true(hl_invocation_assume_no_alias(inv));
  bool value = false;
  hl_setting_source_t source = HL_SETTING_SOURCE_API;
  HL_ASSERT_OK(hl_invocation_effective_assume_no_alias(inv, &value, &source));
  assert_true(value);
  assert_int_equal(source, HL_SETTING_SOURCE_INVOCATION);
  // out_source is optional.
  HL_ASSERT_OK(hl_invocation_effective_assume_no_alias(inv, &value, NULL));
  hl_invocation_release(inv);
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

static void test_precedence_query(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 1);
  hl_function_t* f = inv_function("precedence", 0, NULL, 1, inv_fn_fresh, &c);
  hl_invocation_t* inv = NULL;
  HL_ASSERT_OK(hl_invocation_create(f, q, &inv));
  const hl_tristate_t globals[3] = {HL_TRISTATE_UNSET, HL_TRISTATE_TRUE,
                                    HL_TRISTATE_FALSE};
  for (int own = 0; own < 2; ++own) {
    for (int g = 0; g < 3; ++g) {
      hl_set_assume_no_alias(globals[g]);
      hl_invocation_set_assume_no_alias(inv, own != 0);
      assert_int_equal(hl_invocation_assume_no_alias(inv), own != 0);

      hl_tristate_t got = (hl_tristate_t)42;
      hl_setting_source_t got_source = HL_SETTING_SOURCE_ENVIRONMENT;
      HL_ASSERT_OK(hl_get_assume_no_alias(&got, &got_source));
      assert_int_equal(got, globals[g]);
      if (globals[g] != HL_TRISTATE_UNSET) {
        assert_int_equal(got_source, HL_SETTING_SOURCE_API);
      }

      bool value = own == 0;
      hl_setting_source_t source = HL_SETTING_SOURCE_ENVIRONMENT;
      HL_ASSERT_OK(
          hl_invocation_effective_assume_no_alias(inv, &value, &source));
      if (globals[g] == HL_TRISTATE_UNSET) {
        assert_int_equal(value, own != 0);
        assert_int_equal(source, HL_SETTING_SOURCE_INVOCATION);
      } else {
        assert_int_equal(value, globals[g] == HL_TRISTATE_TRUE);
        assert_int_equal(source, HL_SETTING_SOURCE_API);
      }
    }
  }
  // Values outside the tristate clear the setting.
  hl_set_assume_no_alias(HL_TRISTATE_TRUE);
  hl_set_assume_no_alias((hl_tristate_t)7);
  hl_tristate_t got = HL_TRISTATE_TRUE;
  HL_ASSERT_OK(hl_get_assume_no_alias(&got, NULL));
  assert_int_equal(got, HL_TRISTATE_UNSET);
  hl_set_assume_no_alias(HL_TRISTATE_UNSET);
  hl_invocation_release(inv);
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

// Invokes the hidden-reference function with the per-invocation value |own|
// and returns whether its result was imported async.
static bool hidden_import_is_async(hl_device_t* d, hl_queue_t* q,
                                   hl_function_t* f, inv_fn_config_t* c,
                                   bool own) {
  hl_invocation_stats_t before = inv_stats(d);
  hl_invocation_t* inv = inv_invoke(f, q, NULL, 0, own);
  hl_invocation_stats_t after = inv_stats(d);
  inv_wait_signal(inv);
  hl_invocation_release(inv);  // Releases the untaken result too.
  inv_wait_idle(d);
  // The hidden reference is not touched again: with an async import its
  // memory is gone.
  hl_buffer_release(c->kept);
  c->kept = NULL;
  uint64_t async = after.async_imports - before.async_imports;
  uint64_t sync = after.sync_imports - before.sync_imports;
  assert_int_equal(async + sync, 1);
  assert_int_equal(after.alias_detected, before.alias_detected);
  return async == 1;
}

// The process-wide value decides the import, whatever the invocation says.
static void test_precedence_behaviour(void** state) {
  (void)state;
  hl_device_t* d = inv_device_create();
  hl_queue_t* q = hl_test_queue_create(d);
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0x0BADF00Du);
  hl_function_t* f = inv_function("hidden", 0, NULL, 1, inv_fn_hidden, &c);
  const hl_tristate_t globals[3] = {HL_TRISTATE_UNSET, HL_TRISTATE_TRUE,
                                    HL_TRISTATE_FALSE};
  for (int own = 0; own < 2; ++own) {
    for (int g = 0; g < 3; ++g) {
      hl_set_assume_no_alias(globals[g]);
      bool expected = globals[g] == HL_TRISTATE_UNSET
                          ? own != 0
                          : globals[g] == HL_TRISTATE_TRUE;
      bool async = hidden_import_is_async(d, q, f, &c, own != 0);
      if (async != expected) {
        fail_msg("own=%d global=%d: imported %s, expected %s", own,
                 (int)globals[g], async ? "async" : "sync",
                 expected ? "async" : "sync");
      }
    }
  }
  hl_set_assume_no_alias(HL_TRISTATE_UNSET);
  assert_int_equal(hl_test_memory_stats(d).use_after_free, 0);
  assert_true(hl_test_poll_bytes_in_use(d, 0, 10000));
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
}

//===----------------------------------------------------------------------===//
// The environment, in child processes
//===----------------------------------------------------------------------===//

static int child_failures;

#define CHILD_CHECK(cond, ...)                                                 \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "child check failed at line %d: %s: ", __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      ++child_failures;                                                        \
    }                                                                          \
  } while (0)

// Checks |st| is INVALID_ARGUMENT naming the variable, its value and the
// accepted values; frees it.
static void child_check_invalid(hl_status_t st, const char* what) {
  char text[2048];
  hl_status_format(st, text, sizeof(text));
  hl_status_code_t code = hl_status_code(st);
  hl_status_free(st);
  CHILD_CHECK(code == HL_STATUS_INVALID_ARGUMENT, "%s: %s", what, text);
  CHILD_CHECK(strstr(text, VAR) != NULL, "%s: %s", what, text);
  CHILD_CHECK(strstr(text, "maybe") != NULL, "%s: %s", what, text);
  CHILD_CHECK(strstr(text, "accepted") != NULL, "%s: %s", what, text);
  CHILD_CHECK(strstr(text, "true") && strstr(text, "false"), "%s: %s", what,
              text);
}

static int child_invalid(void) {
  hl_tristate_t value = HL_TRISTATE_TRUE;
  child_check_invalid(hl_get_assume_no_alias(&value, NULL),
                      "hl_get_assume_no_alias");
  child_check_invalid(hl_environment_check(), "hl_environment_check");
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = HL_BACKEND_HOST;
  hl_device_t* d = NULL;
  child_check_invalid(hl_device_create(&o, hl_allocator_system(), &d),
                      "hl_device_create");
  CHILD_CHECK(d == NULL, "a device was returned");
  // Asking again gives the same answer (the error is not forgotten).
  child_check_invalid(hl_get_assume_no_alias(&value, NULL),
                      "hl_get_assume_no_alias (again)");
  return child_failures ? 1 : 0;
}

// HIPLINE_ASSUME_NO_ALIAS=|expected| in the environment: it is the
// process-wide value, overrides the invocation's own (set to !expected), and
// decides the import; hl_set_assume_no_alias(UNSET) clears it.
static int child_env(bool expected) {
  hl_tristate_t value = HL_TRISTATE_UNSET;
  hl_setting_source_t source = HL_SETTING_SOURCE_API;
  hl_status_t st = hl_get_assume_no_alias(&value, &source);
  CHILD_CHECK(st == NULL, "%s", hl_status_message(st));
  hl_status_free(st);
  CHILD_CHECK(value == (expected ? HL_TRISTATE_TRUE : HL_TRISTATE_FALSE),
              "value %d", (int)value);
  CHILD_CHECK(source == HL_SETTING_SOURCE_ENVIRONMENT, "source %s",
              hl_setting_source_name(source));

  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = HL_BACKEND_HOST;
  o.checked = 1;
  hl_device_t* d = NULL;
  st = hl_device_create(&o, hl_allocator_system(), &d);
  CHILD_CHECK(st == NULL, "hl_device_create: %s", hl_status_message(st));
  hl_status_free(st);
  if (!d) return 1;
  hl_queue_t* q = NULL;
  st = hl_queue_create(d, &q);
  CHILD_CHECK(st == NULL, "hl_queue_create: %s", hl_status_message(st));
  hl_status_free(st);
  if (!q) return 1;
  inv_fn_config_t c;
  inv_fn_config_init(&c, SIZE, 0x600DCAFEu);
  hl_function_signature_t sig = {0, 1, NULL};
  hl_function_t* f = NULL;
  st = hl_function_create("hidden", &sig, inv_fn_hidden, &c,
                          hl_allocator_system(), &f);
  CHILD_CHECK(st == NULL, "hl_function_create: %s", hl_status_message(st));
  hl_status_free(st);
  if (!f) return 1;

  hl_invocation_t* inv = NULL;
  st = hl_invocation_create(f, q, &inv);
  CHILD_CHECK(st == NULL, "hl_invocation_create: %s", hl_status_message(st));
  hl_status_free(st);
  if (!inv) return 1;
  hl_invocation_set_assume_no_alias(inv, !expected);
  bool effective = !expected;
  source = HL_SETTING_SOURCE_API;
  st = hl_invocation_effective_assume_no_alias(inv, &effective, &source);
  CHILD_CHECK(st == NULL, "%s", hl_status_message(st));
  hl_status_free(st);
  CHILD_CHECK(effective == expected, "effective %d", (int)effective);
  CHILD_CHECK(source == HL_SETTING_SOURCE_ENVIRONMENT, "source %s",
              hl_setting_source_name(source));

  st = hl_invocation_invoke(inv);
  CHILD_CHECK(st == NULL, "invoke: %s", hl_status_message(st));
  hl_status_free(st);
  hl_invocation_stats_t stats;
  memset(&stats, 0, sizeof(stats));
  hl_status_ignore(hl_device_invocation_stats(d, &stats));
  CHILD_CHECK(stats.async_imports == (expected ? 1u : 0u), "async_imports %llu",
              (unsigned long long)stats.async_imports);
  CHILD_CHECK(stats.sync_imports == (expected ? 0u : 1u), "sync_imports %llu",
              (unsigned long long)stats.sync_imports);
  st = hl_fence_wait(hl_invocation_signal_fence(inv), INV_DEADLINE());
  CHILD_CHECK(st == NULL, "wait: %s", hl_status_message(st));
  hl_status_free(st);
  hl_invocation_release(inv);
  hl_status_ignore(hl_device_wait_idle(d, INV_DEADLINE()));
  if (!expected) {
    // Sync import: the hidden reference is still good.
    uint32_t word = 0;
    hl_semaphore_t* s = NULL;
    hl_fence_t* fence = NULL;
    hl_status_ignore(hl_semaphore_create(0, hl_allocator_system(), &s));
    hl_status_ignore(hl_fence_create(hl_allocator_system(), &fence));
    hl_status_ignore(hl_fence_insert(fence, s, 1));
    st = hl_queue_read(q, NULL, fence, c.kept, 0, &word, 4);
    if (!st) st = hl_semaphore_wait(s, 1, INV_DEADLINE());
    CHILD_CHECK(st == NULL, "read: %s", hl_status_message(st));
    hl_status_free(st);
    CHILD_CHECK(word == c.pattern, "word 0x%08x", word);
    hl_fence_release(fence);
    hl_semaphore_release(s);
  }
  hl_buffer_release(c.kept);
  c.kept = NULL;

  // The API's UNSET clears the environment's value.
  hl_set_assume_no_alias(HL_TRISTATE_UNSET);
  st = hl_invocation_create(f, q, &inv);
  CHILD_CHECK(st == NULL, "hl_invocation_create: %s", hl_status_message(st));
  hl_status_free(st);
  if (!inv) return 1;
  hl_invocation_set_assume_no_alias(inv, !expected);
  st = hl_invocation_effective_assume_no_alias(inv, &effective, &source);
  CHILD_CHECK(st == NULL, "%s", hl_status_message(st));
  hl_status_free(st);
  CHILD_CHECK(effective == !expected, "effective after UNSET %d",
              (int)effective);
  CHILD_CHECK(source == HL_SETTING_SOURCE_INVOCATION, "source after UNSET %s",
              hl_setting_source_name(source));
  hl_invocation_release(inv);

  // Let the fallback free of the hidden root finish before exiting: it holds
  // the device, and the process would end with it still pending.
  hl_memory_stats_t m;
  hl_time_t deadline = hl_deadline_after(10000 * INV_MS);
  for (;;) {
    memset(&m, 0, sizeof(m));
    hl_status_ignore(hl_device_memory_stats(d, &m));
    if (m.bytes_in_use == 0 || hl_time_now() > deadline) break;
    hl_test_sleep_ms(2);
  }
  hl_status_ignore(hl_device_wait_idle(d, INV_DEADLINE()));
  CHILD_CHECK(m.bytes_in_use == 0, "bytes_in_use %llu",
              (unsigned long long)m.bytes_in_use);
  CHILD_CHECK(m.use_after_free == 0, "use_after_free %llu",
              (unsigned long long)m.use_after_free);
  hl_function_release(f);
  hl_queue_release(q);
  hl_device_release(d);
  return child_failures ? 1 : 0;
}

// Runs this binary with --child=|name| and VAR=|value|; returns its exit
// status (or -1 if it did not exit normally).
static int run_child(const char* name, const char* value) {
  size_t count = 0;
  while (environ[count]) ++count;
  char** envp = calloc(count + 2, sizeof(char*));
  assert_non_null(envp);
  size_t n = 0;
  for (size_t i = 0; i < count; ++i) {
    if (strncmp(environ[i], VAR "=", strlen(VAR) + 1) != 0) {
      envp[n++] = environ[i];
    }
  }
  char setting[128];
  snprintf(setting, sizeof(setting), "%s=%s", VAR, value);
  envp[n++] = setting;
  envp[n] = NULL;
  char arg[64];
  snprintf(arg, sizeof(arg), "--child=%s", name);
  char exe[] = "/proc/self/exe";
  char* argv[] = {exe, arg, NULL};
  pid_t pid = 0;
  int rc = posix_spawn(&pid, exe, NULL, NULL, argv, envp);
  free(envp);
  assert_int_equal(rc, 0);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_environment_invalid(void** state) {
  (void)state;
  assert_int_equal(run_child("invalid", "maybe"), 0);
}

static void test_environment_false_overrides_invocation(void** state) {
  (void)state;
  assert_int_equal(run_child("env-false", "0"), 0);
}

static void test_environment_true_overrides_invocation(void** state) {
  (void)state;
  assert_int_equal(run_child("env-true", "on"), 0);
}

int main(int argc, char** argv) {
  if (argc > 1 && strncmp(argv[1], "--child=", 8) == 0) {
    const char* name = argv[1] + 8;
    if (strcmp(name, "invalid") == 0) return child_invalid();
    if (strcmp(name, "env-false") == 0) return child_env(false);
    if (strcmp(name, "env-true") == 0) return child_env(true);
    fprintf(stderr, "unknown child case '%s'\n", name);
    return 2;
  }
  // This process tests the API alone; the environment cases run in children.
  unsetenv(VAR);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_source_names),
      cmocka_unit_test_teardown(test_default_is_true, teardown_unset),
      cmocka_unit_test_teardown(test_precedence_query, teardown_unset),
      cmocka_unit_test_teardown(test_precedence_behaviour, teardown_unset),
      cmocka_unit_test(test_environment_invalid),
      cmocka_unit_test(test_environment_false_overrides_invocation),
      cmocka_unit_test(test_environment_true_overrides_invocation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
