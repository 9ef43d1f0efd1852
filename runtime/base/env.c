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

hl_status_t hl_env_size_in(const char* name, uint64_t min, uint64_t max,
                           const char* range, uint64_t* out, bool* out_set) {
  HL_RETURN_IF_ERROR_PLAIN(hl_env_size(name, out, out_set));
  if (*out_set && (*out < min || *out > max)) {
    *out_set = false;
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "%s=%llu is not valid; accepted values: a byte size "
                          "in %s",
                          name, (unsigned long long)*out, range);
  }
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
