// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The table of environment variables (runtime/base/env.c) against
// docs/environment.md and hl_environment_check: the docs' library table
// lists exactly the table's variables, with the table's defaults and values;
// the scripts' variables are not in it (nor taken for misspellings of it);
// hl_environment_check refuses an invalid value of every one of them.
#include <stdlib.h>
#include <string.h>

#include "runtime/base/env.h"
#include "tests/test_util.h"

#define MAX_ROWS 64

typedef struct row_t {
  char name[64];
  char values[512];
  char fallback[128];
} row_t;

// Copies |text| without its backticks and surrounding blanks.
static void cell_copy(char* out, size_t capacity, const char* text,
                      size_t length) {
  while (length && (*text == ' ')) ++text, --length;
  while (length && text[length - 1] == ' ') --length;
  size_t n = 0;
  for (size_t i = 0; i < length && n + 1 < capacity; ++i) {
    if (text[i] != '`') out[n++] = text[i];
  }
  out[n] = '\0';
}

// Reads the rows of the table under |heading| in docs/environment.md: the
// name, and for the library's table the values and default columns.
static int read_rows(const char* heading, bool library, row_t* rows) {
  FILE* f = fopen(HL_DOCS_DIR "/environment.md", "r");
  assert_non_null(f);
  char line[2048];
  bool inside = false;
  int count = 0;
  while (fgets(line, sizeof(line), f)) {
    if (strncmp(line, "## ", 3) == 0) inside = strstr(line, heading) != NULL;
    if (!inside || strncmp(line, "| `HIPLINE_", 11) != 0) continue;
    assert_true(count < MAX_ROWS);
    const char* cells[8];
    size_t lengths[8];
    int n = 0;
    for (char* p = line + 1; *p && *p != '\n' && n < 8;) {
      char* bar = strchr(p, '|');
      if (!bar) break;
      cells[n] = p;
      lengths[n++] = (size_t)(bar - p);
      p = bar + 1;
    }
    assert_true(n >= 4);
    row_t* row = &rows[count++];
    cell_copy(row->name, sizeof(row->name), cells[0], lengths[0]);
    if (library) {
      cell_copy(row->values, sizeof(row->values), cells[1], lengths[1]);
      cell_copy(row->fallback, sizeof(row->fallback), cells[2], lengths[2]);
    }
  }
  fclose(f);
  return count;
}

// Whether |values| (a docs cell) describes |var|'s accepted values.
static bool values_match(const hl_env_var_t* var, const char* values) {
  char expected[128];
  switch (var->kind) {
    case HL_ENV_KIND_BOOL:
      return strcmp(values, "boolean") == 0;
    case HL_ENV_KIND_SIZE:
      if (!var->max) return strcmp(values, "byte size") == 0;
      snprintf(expected, sizeof(expected), "byte size in %s", var->range);
      return strcmp(values, expected) == 0;
    case HL_ENV_KIND_UINT:
      snprintf(expected, sizeof(expected), "%llu..%llu",
               (unsigned long long)var->min, (unsigned long long)var->max);
      return strcmp(values, expected) == 0;
    case HL_ENV_KIND_SPEC:
      return strncmp(values, "key=value", 9) == 0;
    case HL_ENV_KIND_PATH:
      snprintf(expected, sizeof(expected), "shorter than %llu bytes",
               (unsigned long long)var->max);
      return strstr(values, expected) != NULL;
    case HL_ENV_KIND_ENUM: {
      // "a, b, c": the same names, any order.
      int seen = 0;
      char copy[512];
      snprintf(copy, sizeof(copy), "%s", values);
      for (char *save = NULL, *word = strtok_r(copy, ", ", &save); word;
           word = strtok_r(NULL, ", ", &save)) {
        bool known = false;
        for (int i = 0; i < var->name_count; ++i) {
          known |= strcmp(word, var->names[i]) == 0;
        }
        if (!known) return false;
        ++seen;
      }
      return seen == var->name_count;
    }
  }
  return false;
}

static void test_docs_list_the_table(void** state) {
  (void)state;
  row_t rows[MAX_ROWS];
  int count = read_rows("Read by the library", true, rows);
  assert_int_equal(count, HL_ENV_COUNT);
  bool listed[HL_ENV_COUNT] = {false};
  for (int r = 0; r < count; ++r) {
    const hl_env_var_t* var = hl_env_find(rows[r].name, strlen(rows[r].name));
    if (!var) fail_msg("docs list %s, the table does not", rows[r].name);
    int id = (int)(var - hl_env_var((hl_env_id_t)0));
    assert_false(listed[id]);
    listed[id] = true;
    if (strcmp(rows[r].fallback, var->fallback) != 0) {
      fail_msg("%s: docs say the default is '%s', the table '%s'", var->name,
               rows[r].fallback, var->fallback);
    }
    if (!values_match(var, rows[r].values)) {
      fail_msg("%s: docs' values '%s' are not the table's", var->name,
               rows[r].values);
    }
    assert_true(var->doc && var->doc[0]);
  }
}

static void test_script_variables_are_not_the_librarys(void** state) {
  (void)state;
  row_t rows[MAX_ROWS];
  int count = read_rows("Read by scripts", false, rows);
  assert_true(count > 0);
  for (int r = 0; r < count; ++r) {
    size_t length = strlen(rows[r].name);
    if (hl_env_find(rows[r].name, length)) {
      fail_msg("%s is the scripts' but in the library's table", rows[r].name);
    }
    // Nor is it warned about as a misspelling of one.
    if (hl_env_suggest(rows[r].name, length)) {
      fail_msg("%s would be taken for a misspelling of %s", rows[r].name,
               hl_env_suggest(rows[r].name, length)->name);
    }
  }
}

// A value |var|'s parser refuses.
static const char* invalid_value(const hl_env_var_t* var, char* buffer,
                                 size_t capacity) {
  switch (var->kind) {
    case HL_ENV_KIND_BOOL:
      return "maybe";
    case HL_ENV_KIND_SIZE:
      return "12XB";
    case HL_ENV_KIND_ENUM:
      return "bogus";
    case HL_ENV_KIND_UINT:
      snprintf(buffer, capacity, "%llu", (unsigned long long)var->max + 1);
      return buffer;
    case HL_ENV_KIND_SPEC:
      return "not-a-pair";
    case HL_ENV_KIND_PATH:
      assert_true(var->max < capacity);
      memset(buffer, 'a', var->max);
      buffer[var->max] = '\0';
      return buffer;
  }
  return "bogus";
}

static void test_every_variable_is_checked(void** state) {
  (void)state;
  HL_ASSERT_OK(hl_environment_check());
  for (int id = 0; id < HL_ENV_COUNT; ++id) {
    const hl_env_var_t* var = hl_env_var((hl_env_id_t)id);
    char buffer[1024];
    const char* value = invalid_value(var, buffer, sizeof(buffer));
    const char* saved = getenv(var->name);
    char* restore = saved ? strdup(saved) : NULL;
    assert_int_equal(setenv(var->name, value, 1), 0);
    hl_status_t st = hl_environment_check();
    if (hl_status_code(st) != HL_STATUS_INVALID_ARGUMENT ||
        !strstr(hl_status_message(st), var->name)) {
      fail_msg("%s='%.32s': hl_environment_check said %s", var->name, value,
               st ? hl_status_message(st) : "OK");
    }
    hl_status_free(st);
    if (restore) {
      setenv(var->name, restore, 1);
      free(restore);
    } else {
      unsetenv(var->name);
    }
  }
  HL_ASSERT_OK(hl_environment_check());
}

// A size that parses but is out of its entry's range (HIPLINE_HOST_MEMORY:
// [4096, 2^48]) is refused by the check and by the reader alike.
static void test_sizes_out_of_range_are_refused(void** state) {
  (void)state;
  const hl_env_var_t* var = hl_env_var(HL_ENV_HOST_MEMORY);
  assert_true(var->max > 0);
  assert_int_equal(setenv(var->name, "12", 1), 0);
  hl_status_t st = hl_environment_check();
  assert_int_equal(hl_status_code(st), HL_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hl_status_message(st), "[4096, 2^48]"));
  hl_status_free(st);
  uint64_t size = 0;
  bool set = true;
  HL_ASSERT_STATUS(hl_env_read_size(HL_ENV_HOST_MEMORY, &size, &set),
                   INVALID_ARGUMENT);
  assert_false(set);
  assert_int_equal(setenv(var->name, "4KiB", 1), 0);
  HL_ASSERT_OK(hl_env_read_size(HL_ENV_HOST_MEMORY, &size, &set));
  assert_true(set);
  assert_int_equal(size, 4096);
  unsetenv(var->name);
}

static void test_misspellings_are_recognised(void** state) {
  (void)state;
  static const struct {
    const char* name;
    const char* meant;  // NULL: not a misspelling.
  } kCases[] = {
      {"HIPLINE_ALOCATOR", "HIPLINE_ALLOCATOR"},
      {"HIPLINE_QUEUE_DEPHT", "HIPLINE_QUEUE_DEPTH"},
      {"HIPLINE_CHECK", "HIPLINE_CHECKED"},
      {"HIPLINE_LOGS", "HIPLINE_LOG"},
      {"HIPLINE_LOG", NULL},
      {"HIPLINE_JOBS", NULL},
      {"HIPLINE_TEST_BACKEND", NULL},
      {"HIPLINE_SOMETHING_ELSE", NULL},
  };
  for (size_t i = 0; i < sizeof(kCases) / sizeof(kCases[0]); ++i) {
    const hl_env_var_t* var =
        hl_env_suggest(kCases[i].name, strlen(kCases[i].name));
    if (!kCases[i].meant) {
      if (var) fail_msg("%s taken for %s", kCases[i].name, var->name);
    } else if (!var || strcmp(var->name, kCases[i].meant) != 0) {
      fail_msg("%s: expected %s, got %s", kCases[i].name, kCases[i].meant,
               var ? var->name : "nothing");
    }
  }
}

static void test_readers_check_the_kind(void** state) {
  (void)state;
  bool flag = false, set = true;
  HL_ASSERT_STATUS(hl_env_read_bool(HL_ENV_LOG, &flag, &set), INTERNAL);
  assert_false(set);
  assert_null(hl_env_var(HL_ENV_COUNT));
  assert_null(hl_env_read_text(HL_ENV_LOG));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_docs_list_the_table),
      cmocka_unit_test(test_script_variables_are_not_the_librarys),
      cmocka_unit_test(test_every_variable_is_checked),
      cmocka_unit_test(test_sizes_out_of_range_are_refused),
      cmocka_unit_test(test_misspellings_are_recognised),
      cmocka_unit_test(test_readers_check_the_kind),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
