// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Status objects: one heap block holding the code, source and message.

#include "hipline/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hl_status_s {
  hl_status_code_t code;
  bool is_static;  // Out-of-memory fallback: never freed.
  char source[64];
  char message[];  // NUL-terminated.
};

// One static status per code, used when the message itself cannot be
// allocated. They carry a fixed message and are never freed.
#define HL_STATIC_STATUS_TEXT_ 48
static _Alignas(
    max_align_t) unsigned char hl_static_statuses_[HL_STATUS_CODE_COUNT_]
                                                  [sizeof(struct hl_status_s) +
                                                   HL_STATIC_STATUS_TEXT_];

const char* hl_status_code_name(hl_status_code_t code) {
  switch (code) {
#define HL_STATUS_CODE_NAME_(name, value) \
  case HL_STATUS_##name:                  \
    return #name;
    HL_STATUS_CODE_TABLE(HL_STATUS_CODE_NAME_)
#undef HL_STATUS_CODE_NAME_
    default:
      return "UNKNOWN_CODE";
  }
}

static hl_status_t hl_status_static(hl_status_code_t code) {
  if ((int)code < 0 || code >= HL_STATUS_CODE_COUNT_) code = HL_STATUS_UNKNOWN;
  struct hl_status_s* s = (struct hl_status_s*)hl_static_statuses_[code];
  // Benign if two threads race here: both write the same bytes.
  s->code = code;
  s->is_static = true;
  s->source[0] = 0;
  snprintf(s->message, HL_STATIC_STATUS_TEXT_, "%s",
           "(message lost: out of host memory)");
  return s;
}

static hl_status_t hl_status_alloc(hl_status_code_t code, const char* source,
                                   const char* text, size_t length) {
  struct hl_status_s* s = malloc(sizeof(*s) + length + 1);
  if (!s) return hl_status_static(code);
  s->code = code;
  s->is_static = false;
  snprintf(s->source, sizeof(s->source), "%s", source ? source : "");
  memcpy(s->message, text, length);
  s->message[length] = 0;
  return s;
}

static const char* hl_basename(const char* path) {
  const char* slash = path ? strrchr(path, '/') : NULL;
  return slash ? slash + 1 : (path ? path : "");
}

hl_status_t hl_status_vmake(hl_status_code_t code, const char* file, int line,
                            const char* format, va_list args) {
  if (code == HL_STATUS_OK) return NULL;
  char source[64];
  snprintf(source, sizeof(source), "%s:%d", hl_basename(file), line);
  char stack_text[512];
  va_list copy;
  va_copy(copy, args);
  int n = vsnprintf(stack_text, sizeof(stack_text), format ? format : "", copy);
  va_end(copy);
  if (n < 0) n = 0;
  if ((size_t)n < sizeof(stack_text)) {
    return hl_status_alloc(code, source, stack_text, (size_t)n);
  }
  char* heap_text = malloc((size_t)n + 1);
  if (!heap_text)
    return hl_status_alloc(code, source, stack_text, sizeof(stack_text) - 1);
  vsnprintf(heap_text, (size_t)n + 1, format, args);
  hl_status_t s = hl_status_alloc(code, source, heap_text, (size_t)n);
  free(heap_text);
  return s;
}

hl_status_t hl_status_make(hl_status_code_t code, const char* file, int line,
                           const char* format, ...) {
  va_list args;
  va_start(args, format);
  hl_status_t s = hl_status_vmake(code, file, line, format, args);
  va_end(args);
  return s;
}

hl_status_code_t hl_status_code(hl_status_t status) {
  return status ? status->code : HL_STATUS_OK;
}

const char* hl_status_message(hl_status_t status) {
  return status ? status->message : "";
}

const char* hl_status_source(hl_status_t status) {
  return status ? status->source : "";
}

static hl_status_t hl_status_replace_message(hl_status_t status,
                                             const char* prefix,
                                             const char* separator,
                                             const char* suffix) {
  size_t a = strlen(prefix), b = strlen(separator), c = strlen(suffix);
  struct hl_status_s* s = malloc(sizeof(*s) + a + b + c + 1);
  if (!s) return status;  // Keep the original message rather than lose it.
  s->code = status->code;
  s->is_static = false;
  memcpy(s->source, status->source, sizeof(s->source));
  memcpy(s->message, prefix, a);
  memcpy(s->message + a, separator, b);
  memcpy(s->message + a + b, suffix, c);
  s->message[a + b + c] = 0;
  hl_status_free(status);
  return s;
}

hl_status_t hl_status_annotate(hl_status_t status, const char* format, ...) {
  if (!status || !format || !format[0]) return status;
  char context[512];
  va_list args;
  va_start(args, format);
  vsnprintf(context, sizeof(context), format, args);
  va_end(args);
  if (!context[0]) return status;
  char* old = strdup(hl_status_message(status));
  if (!old) return status;
  hl_status_t result = hl_status_replace_message(status, context, ": ", old);
  free(old);
  return result;
}

hl_status_t hl_status_clone(hl_status_t status) {
  if (!status) return NULL;
  if (status->is_static) return status;
  const char* m = hl_status_message(status);
  return hl_status_alloc(status->code, status->source, m, strlen(m));
}

hl_status_t hl_status_join(hl_status_t a, hl_status_t b) {
  if (!a) return b;
  if (!b) return a;
  char* first = strdup(hl_status_message(a));
  char* second = strdup(hl_status_message(b));
  hl_status_t result = a;
  if (first && second) {
    result = hl_status_replace_message(a, first, "; also: ", second);
  }
  free(first);
  free(second);
  hl_status_free(b);
  return result;
}

void hl_status_free(hl_status_t status) {
  if (status && !status->is_static) free(status);
}

void hl_status_ignore(hl_status_t status) { hl_status_free(status); }

size_t hl_status_format(hl_status_t status, char* buffer, size_t capacity) {
  int n;
  if (!status) {
    n = snprintf(buffer, capacity, "OK");
  } else {
    n = snprintf(buffer, capacity, "%s: %s [%s]",
                 hl_status_code_name(status->code), hl_status_message(status),
                 status->source);
  }
  return n < 0 ? 0 : (size_t)n;
}

void hl_status_fprint(void* file, const char* prefix, hl_status_t status) {
  FILE* f = file ? (FILE*)file : stderr;
  size_t n = hl_status_format(status, NULL, 0);
  char* text = malloc(n + 1);
  if (!text) {
    fprintf(f, "%s%s\n", prefix ? prefix : "",
            hl_status_code_name(hl_status_code(status)));
    return;
  }
  hl_status_format(status, text, n + 1);
  fprintf(f, "%s%s\n", prefix ? prefix : "", text);
  free(text);
}
