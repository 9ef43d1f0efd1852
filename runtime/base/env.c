// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "runtime/base/env.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char* hl_env_get(const char* name) {
  const char* v = getenv(name);
  return (v && v[0]) ? v : NULL;
}

// Formats "a|b|c" into |buffer|.
static void hl_join_names(const char* const* names, int count, char* buffer,
                          size_t capacity) {
  size_t used = 0;
  buffer[0] = 0;
  for (int i = 0; i < count && used < capacity; ++i) {
    int n = snprintf(buffer + used, capacity - used, "%s%s", i ? "|" : "",
                     names[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
}

hl_status_t hl_parse_enum(const char* what, const char* value,
                          const char* const* names, int count, int* out_index) {
  if (!value) value = "";
  for (int i = 0; i < count; ++i) {
    if (strcasecmp(value, names[i]) == 0) {
      *out_index = i;
      return NULL;
    }
  }
  char accepted[256];
  hl_join_names(names, count, accepted, sizeof(accepted));
  return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                        "%s='%.64s' is not valid; accepted values: %s", what,
                        value, accepted);
}

hl_status_t hl_parse_bool(const char* what, const char* value, bool* out) {
  static const char* const kNames[] = {"1",  "0",   "true", "false",
                                       "on", "off", "yes",  "no"};
  int index = 0;
  HL_RETURN_IF_ERROR_PLAIN(hl_parse_enum(what, value, kNames, 8, &index));
  *out = (index % 2) == 0;
  return NULL;
}

hl_status_t hl_parse_u64(const char* what, const char* value, uint64_t min,
                         uint64_t max, uint64_t* out) {
  const char* p = value ? value : "";
  bool ok = *p != 0;
  uint64_t v = 0;
  for (; ok && *p; ++p) {
    if (!isdigit((unsigned char)*p)) {
      ok = false;
      break;
    }
    uint64_t digit = (uint64_t)(*p - '0');
    if (v > (UINT64_MAX - digit) / 10) {
      ok = false;
      break;
    }
    v = v * 10 + digit;
  }
  if (!ok || v < min || v > max) {
    return HL_MAKE_STATUS(
        HL_STATUS_INVALID_ARGUMENT,
        "%s='%.64s' is not valid; accepted values: an integer "
        "in [%llu, %llu]",
        what, value ? value : "", (unsigned long long)min,
        (unsigned long long)max);
  }
  *out = v;
  return NULL;
}

hl_status_t hl_parse_size(const char* what, const char* value, uint64_t* out) {
  static const struct {
    const char* suffix;
    unsigned shift;
  } kSuffixes[] = {{"", 0},   {"b", 0},    {"k", 10}, {"kib", 10},
                   {"m", 20}, {"mib", 20}, {"g", 30}, {"gib", 30},
                   {"t", 40}, {"tib", 40}};
  const char* p = value ? value : "";
  size_t digits = 0;
  while (isdigit((unsigned char)p[digits])) ++digits;
  if (digits > 0 && digits < 21) {
    char number[24];
    memcpy(number, p, digits);
    number[digits] = 0;
    uint64_t base = 0;
    hl_status_t st = hl_parse_u64(what, number, 0, UINT64_MAX, &base);
    if (!st) {
      for (size_t i = 0; i < sizeof(kSuffixes) / sizeof(kSuffixes[0]); ++i) {
        if (strcasecmp(p + digits, kSuffixes[i].suffix) != 0) continue;
        unsigned shift = kSuffixes[i].shift;
        if (shift && base > (UINT64_MAX >> shift)) break;
        *out = base << shift;
        return NULL;
      }
    }
    hl_status_ignore(st);
  }
  return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                        "%s='%.64s' is not valid; accepted values: a byte size "
                        "such as 4096, 64KiB, 512MiB or 2GiB "
                        "(suffixes B|K|KiB|M|MiB|G|GiB|T|TiB, no overflow)",
                        what, value ? value : "");
}

hl_status_t hl_env_enum(const char* name, const char* const* names, int count,
                        int* out_index, bool* out_set) {
  const char* v = hl_env_get(name);
  *out_set = false;
  if (!v) return NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_parse_enum(name, v, names, count, out_index));
  *out_set = true;
  return NULL;
}

hl_status_t hl_env_bool(const char* name, bool* out, bool* out_set) {
  const char* v = hl_env_get(name);
  *out_set = false;
  if (!v) return NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_parse_bool(name, v, out));
  *out_set = true;
  return NULL;
}

hl_status_t hl_env_size(const char* name, uint64_t* out, bool* out_set) {
  const char* v = hl_env_get(name);
  *out_set = false;
  if (!v) return NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_parse_size(name, v, out));
  *out_set = true;
  return NULL;
}

hl_status_t hl_parse_kv_list(const char* what, const char* text, hl_kv_fn_t fn,
                             void* user) {
  if (!text) return NULL;
  const char* p = text;
  while (*p) {
    const char* end = strchr(p, ',');
    size_t length = end ? (size_t)(end - p) : strlen(p);
    char item[128];
    if (length == 0 || length >= sizeof(item)) {
      return HL_MAKE_STATUS(
          HL_STATUS_INVALID_ARGUMENT, "%s='%.64s': %s item at offset %zu", what,
          text, length == 0 ? "empty" : "overlong", (size_t)(p - text));
    }
    memcpy(item, p, length);
    item[length] = 0;
    char* eq = strchr(item, '=');
    if (!eq || eq == item || !eq[1]) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "%s='%.64s': item '%s' is not key=value", what,
                            text, item);
    }
    *eq = 0;
    // A key given twice is a mistake whichever value was meant: refuse it
    // rather than let the last one win silently.
    size_t key_length = (size_t)(eq - item);
    for (const char* q = text; q < p;) {
      const char* q_end = strchr(q, ',');
      if ((size_t)(q_end - q) > key_length && q[key_length] == '=' &&
          memcmp(q, item, key_length) == 0) {
        return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                              "%s='%.64s': key '%s' is given twice", what, text,
                              item);
      }
      q = q_end + 1;
    }
    HL_RETURN_IF_ERROR(fn(user, item, eq + 1), "%s", what);
    p = end ? end + 1 : p + length;
    if (end && !*p) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "%s='%.64s': trailing ','", what, text);
    }
  }
  return NULL;
}

//===----------------------------------------------------------------------===//
// The table of environment variables
//===----------------------------------------------------------------------===//

static const char* const kBackendNames[] = {"auto", "host", "hip"};
static const char* const kFallbackNames[] = {"ordered", "frontier",
                                             "device-sync"};
static const char* const kAllocatorNames[] = {"driver", "hipline"};
static const char* const kLogNames[] = {"off", "error", "warn", "info",
                                        "debug"};
static const char* const kCompleterNames[] = {"poll", "block"};

#define HL_ENV_ENUM(names) \
  HL_ENV_KIND_ENUM, names, sizeof(names) / sizeof(*names)
#define HL_ENV_PLAIN(kind) kind, NULL, 0

static const hl_env_var_t kEnvVars[HL_ENV_COUNT] = {
    [HL_ENV_BACKEND] = {"HIPLINE_BACKEND", HL_ENV_ENUM(kBackendNames), 0, 0,
                        "auto",
                        "backend of devices created with HL_BACKEND_AUTO"},
    [HL_ENV_ASSUME_NO_ALIAS] = {"HIPLINE_ASSUME_NO_ALIAS",
                                HL_ENV_PLAIN(HL_ENV_KIND_BOOL), 0, 0, "unset",
                                "process-wide assume_no_alias of invocations"},
    [HL_ENV_FALLBACK] = {"HIPLINE_FALLBACK", HL_ENV_ENUM(kFallbackNames), 0, 0,
                         "ordered",
                         "how a root released without a dealloca is freed"},
    [HL_ENV_POOL_RELEASE_THRESHOLD] = {"HIPLINE_POOL_RELEASE_THRESHOLD",
                                       HL_ENV_PLAIN(HL_ENV_KIND_SIZE), 0, 0,
                                       "the backend's default",
                                       "bytes the pool keeps when idle"},
    [HL_ENV_ALLOCATOR] = {"HIPLINE_ALLOCATOR", HL_ENV_ENUM(kAllocatorNames), 0,
                          0, "hipline", "what serves hl_queue_alloca"},
    [HL_ENV_CHECKED] = {"HIPLINE_CHECKED", HL_ENV_PLAIN(HL_ENV_KIND_BOOL), 0, 0,
                        "off", "checked mode (host backend)"},
    [HL_ENV_FAULTS] = {"HIPLINE_FAULTS", HL_ENV_PLAIN(HL_ENV_KIND_SPEC), 0, 0,
                       "none", "fault injection (base/faults.h)"},
    [HL_ENV_TRACE] = {"HIPLINE_TRACE", HL_ENV_PLAIN(HL_ENV_KIND_PATH), 0, 512,
                      "off", "file the trace zones are written to at exit"},
    [HL_ENV_HOST_MEMORY] = {"HIPLINE_HOST_MEMORY",
                            HL_ENV_PLAIN(HL_ENV_KIND_SIZE), 4096,
                            (uint64_t)1 << 48, "half of physical memory",
                            "memory size of a host-backend device",
                            "[4096, 2^48]"},
    [HL_ENV_HOST_DEVICES] = {"HIPLINE_HOST_DEVICES",
                             HL_ENV_PLAIN(HL_ENV_KIND_UINT), 1, 64, "1",
                             "number of host-backend devices"},
    [HL_ENV_HOST_INLINE] = {"HIPLINE_HOST_INLINE",
                            HL_ENV_PLAIN(HL_ENV_KIND_BOOL), 0, 0, "on",
                            "host backend: short runtime work runs inline"},
    [HL_ENV_HOST_PEERS] = {"HIPLINE_HOST_PEERS", HL_ENV_PLAIN(HL_ENV_KIND_SPEC),
                           0, 0, "all=on",
                           "host backend: which devices reach each other"},
    [HL_ENV_QUEUE_DEPTH] = {"HIPLINE_QUEUE_DEPTH",
                            HL_ENV_PLAIN(HL_ENV_KIND_UINT), 1, 1u << 20, "1024",
                            "submissions a queue holds before one blocks"},
    [HL_ENV_LOG] = {"HIPLINE_LOG", HL_ENV_ENUM(kLogNames), 0, 0, "warn",
                    "log level (stderr)"},
    [HL_ENV_ELIDE_FILLS] = {"HIPLINE_ELIDE_FILLS",
                            HL_ENV_PLAIN(HL_ENV_KIND_BOOL), 0, 0, "on",
                            "fill elision in hl_command_buffer_finalize"},
    [HL_ENV_COMPLETER] = {"HIPLINE_COMPLETER", HL_ENV_ENUM(kCompleterNames), 0,
                          0, "poll",
                          "how the hip completer waits on several queues"},
};

const hl_env_var_t* hl_env_var(hl_env_id_t id) {
  return (unsigned)id < HL_ENV_COUNT ? &kEnvVars[id] : NULL;
}

const hl_env_var_t* hl_env_find(const char* name, size_t length) {
  for (int i = 0; i < HL_ENV_COUNT; ++i) {
    const char* known = kEnvVars[i].name;
    if (strlen(known) == length && strncmp(name, known, length) == 0) {
      return &kEnvVars[i];
    }
  }
  return NULL;
}

// Edit distance between |a| (|n| bytes) and |b|, capped at 3.
static int hl_env_distance(const char* a, size_t n, const char* b) {
  size_t m = strlen(b);
  if (n > m + 2 || m > n + 2 || m > 63) return 3;
  int row[64];
  for (size_t j = 0; j <= m; ++j) row[j] = (int)j;
  for (size_t i = 1; i <= n; ++i) {
    int diagonal = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= m; ++j) {
      int up = row[j];
      int best = diagonal + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diagonal = up;
    }
  }
  return row[m] < 3 ? row[m] : 3;
}

const hl_env_var_t* hl_env_suggest(const char* name, size_t length) {
  if (hl_env_find(name, length)) return NULL;
  for (int i = 0; i < HL_ENV_COUNT; ++i) {
    if (hl_env_distance(name, length, kEnvVars[i].name) <= 2) {
      return &kEnvVars[i];
    }
  }
  return NULL;
}

// Parses |value| (set) as |var| says into |out| (bool, uint64_t or int).
static hl_status_t hl_env_parse(const hl_env_var_t* var, const char* value,
                                void* out) {
  switch (var->kind) {
    case HL_ENV_KIND_BOOL:
      return hl_parse_bool(var->name, value, (bool*)out);
    case HL_ENV_KIND_SIZE: {
      HL_RETURN_IF_ERROR_PLAIN(hl_parse_size(var->name, value, (uint64_t*)out));
      uint64_t size = *(uint64_t*)out;
      if (var->max && (size < var->min || size > var->max)) {
        return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                              "%s=%llu is not valid; accepted values: a byte "
                              "size in %s",
                              var->name, (unsigned long long)size, var->range);
      }
      return NULL;
    }
    case HL_ENV_KIND_ENUM:
      return hl_parse_enum(var->name, value, var->names, var->name_count,
                           (int*)out);
    case HL_ENV_KIND_UINT:
      return hl_parse_u64(var->name, value, var->min, var->max, (uint64_t*)out);
    case HL_ENV_KIND_PATH:
      if (strlen(value) >= var->max) {
        return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                              "%s='%.64s...' is not valid; accepted values: a "
                              "file path shorter than %llu bytes",
                              var->name, value, (unsigned long long)var->max);
      }
      return NULL;
    case HL_ENV_KIND_SPEC:
      return NULL;
  }
  return NULL;
}

hl_status_t hl_env_var_check(const hl_env_var_t* var) {
  const char* value = hl_env_get(var->name);
  if (!value) return NULL;
  union {
    bool b;
    uint64_t u;
    int i;
  } scratch;
  return hl_env_parse(var, value, &scratch);
}

// Reads |id|, which must be of |kind|, into |out|.
static hl_status_t hl_env_read(hl_env_id_t id, hl_env_kind_t kind, void* out,
                               bool* out_set) {
  const hl_env_var_t* var = hl_env_var(id);
  *out_set = false;
  if (!var || var->kind != kind) {
    return HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                          "environment variable %d read as the wrong kind",
                          (int)id);
  }
  const char* value = hl_env_get(var->name);
  if (!value) return NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_env_parse(var, value, out));
  *out_set = true;
  return NULL;
}

hl_status_t hl_env_read_bool(hl_env_id_t id, bool* out, bool* out_set) {
  return hl_env_read(id, HL_ENV_KIND_BOOL, out, out_set);
}

hl_status_t hl_env_read_size(hl_env_id_t id, uint64_t* out, bool* out_set) {
  return hl_env_read(id, HL_ENV_KIND_SIZE, out, out_set);
}

hl_status_t hl_env_read_enum(hl_env_id_t id, int* out_index, bool* out_set) {
  return hl_env_read(id, HL_ENV_KIND_ENUM, out_index, out_set);
}

hl_status_t hl_env_read_uint(hl_env_id_t id, uint64_t* out, bool* out_set) {
  return hl_env_read(id, HL_ENV_KIND_UINT, out, out_set);
}

const char* hl_env_read_text(hl_env_id_t id) {
  const hl_env_var_t* var = hl_env_var(id);
  if (!var || (var->kind != HL_ENV_KIND_SPEC && var->kind != HL_ENV_KIND_PATH))
    return NULL;
  return hl_env_get(var->name);
}
