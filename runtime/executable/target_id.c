// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "runtime/executable/target_id.h"

#include <stdio.h>
#include <string.h>

// Processor and feature names are lower-case letters and digits
// ("gfx90a", "sramecc", "xnack"); "host" is a processor like any other.
static bool hl_target_id_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

// Copies the name of |length| bytes at |begin| into |out|, or returns false
// when it is empty, too long or has a character outside the name set.
static bool hl_target_id_copy_name(const char* begin, size_t length,
                                   char out[HL_TARGET_ID_NAME_MAX]) {
  if (length == 0 || length >= HL_TARGET_ID_NAME_MAX) return false;
  for (size_t i = 0; i < length; ++i) {
    if (!hl_target_id_name_char(begin[i])) return false;
  }
  memcpy(out, begin, length);
  out[length] = '\0';
  return true;
}

hl_status_t hl_target_id_parse(const char* text, hl_target_id_t* out_id) {
  if (text == NULL) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "target id is NULL; expected e.g. 'gfx90a:xnack-'");
  }
  memset(out_id, 0, sizeof(*out_id));
  const char* colon = strchr(text, ':');
  size_t length = colon ? (size_t)(colon - text) : strlen(text);
  if (!hl_target_id_copy_name(text, length, out_id->processor)) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "target id '%s' has no valid processor name "
                          "(expected e.g. 'gfx90a' or 'gfx90a:xnack-')",
                          text);
  }
  while (colon != NULL) {
    const char* begin = colon + 1;
    colon = strchr(begin, ':');
    length = colon ? (size_t)(colon - begin) : strlen(begin);
    if (length < 2 || (begin[length - 1] != '+' && begin[length - 1] != '-')) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "target id '%s': feature '%.*s' must be a name "
                            "followed by + or -",
                            text, (int)length, begin);
    }
    if (out_id->feature_count == HL_TARGET_ID_MAX_FEATURES) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "target id '%s' has more than %d features", text,
                            HL_TARGET_ID_MAX_FEATURES);
    }
    hl_target_feature_t feature;
    if (!hl_target_id_copy_name(begin, length - 1, feature.name)) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "target id '%s': feature '%.*s' has an invalid "
                            "name",
                            text, (int)length, begin);
    }
    feature.on = begin[length - 1] == '+';
    // Insertion keeps the features sorted, which makes equality a
    // field-by-field comparison.
    size_t at = out_id->feature_count;
    while (at > 0) {
      int order = strcmp(out_id->features[at - 1].name, feature.name);
      if (order == 0) {
        return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                              "target id '%s' names feature '%s' twice", text,
                              feature.name);
      }
      if (order < 0) break;
      out_id->features[at] = out_id->features[at - 1];
      --at;
    }
    out_id->features[at] = feature;
    ++out_id->feature_count;
  }
  return hl_ok_status();
}

bool hl_target_id_parsed_equal(const hl_target_id_t* a,
                               const hl_target_id_t* b) {
  if (strcmp(a->processor, b->processor) != 0) return false;
  if (a->feature_count != b->feature_count) return false;
  for (size_t i = 0; i < a->feature_count; ++i) {
    if (strcmp(a->features[i].name, b->features[i].name) != 0 ||
        a->features[i].on != b->features[i].on) {
      return false;
    }
  }
  return true;
}

bool hl_target_id_compatible(const hl_target_id_t* object,
                             const hl_target_id_t* device) {
  if (strcmp(object->processor, device->processor) != 0) return false;
  for (size_t i = 0; i < object->feature_count; ++i) {
    bool found = false;
    for (size_t j = 0; j < device->feature_count; ++j) {
      if (strcmp(object->features[i].name, device->features[j].name) == 0) {
        found = object->features[i].on == device->features[j].on;
        break;
      }
    }
    if (!found) return false;
  }
  return true;
}

hl_status_t hl_target_id_canonicalize(const char* target, char* out,
                                      size_t capacity) {
  if (!out) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_target_id_canonicalize: out is NULL");
  }
  if (capacity == 0) {
    return HL_MAKE_STATUS(HL_STATUS_OUT_OF_RANGE,
                          "hl_target_id_canonicalize: capacity is 0");
  }
  hl_target_id_t id;
  HL_RETURN_IF_ERROR_PLAIN(hl_target_id_parse(target, &id));
  size_t used = 0;
  int n = snprintf(out, capacity, "%s", id.processor);
  used = n > 0 ? (size_t)n : 0;
  for (size_t i = 0; i < id.feature_count; ++i) {
    n = snprintf(used < capacity ? out + used : NULL,
                 used < capacity ? capacity - used : 0, ":%s%c",
                 id.features[i].name, id.features[i].on ? '+' : '-');
    used += n > 0 ? (size_t)n : 0;
  }
  if (used >= capacity) {
    return HL_MAKE_STATUS(HL_STATUS_OUT_OF_RANGE,
                          "canonical form of target id '%s' needs %zu bytes; "
                          "the buffer has %zu",
                          target, used + 1, capacity);
  }
  return hl_ok_status();
}

bool hl_target_id_equal(const char* a, const char* b) {
  hl_target_id_t parsed_a, parsed_b;
  hl_status_t status = hl_target_id_parse(a, &parsed_a);
  if (status == NULL) status = hl_target_id_parse(b, &parsed_b);
  if (status != NULL) {
    hl_status_ignore(status);
    return false;
  }
  return hl_target_id_parsed_equal(&parsed_a, &parsed_b);
}
