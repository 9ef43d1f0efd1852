// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Status values: every fallible hipline call returns an hl_status_t.
//
// Ownership contract (applies to the whole public API):
// - what a `_create` returns is owned by the caller and released with
//   `_release`;
// - what an accessor returns is borrowed and valid while its owner lives;
// - a callee retains anything it stores;
// - `_retain` and `_release` accept NULL.
//
// A status is pointer-sized and OK is NULL. A non-OK status owns a message and
// must be consumed exactly once: returned to a caller, freed with
// hl_status_free, or dropped on purpose with hl_status_ignore.
#ifndef HIPLINE_STATUS_H_
#define HIPLINE_STATUS_H_

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hipline/export.h"

#ifdef __cplusplus
extern "C" {
#endif

// The canonical codes, in one table that yields both the enum and the names.
#define HL_STATUS_CODE_TABLE(X) \
  X(OK, 0)                      \
  X(CANCELLED, 1)               \
  X(UNKNOWN, 2)                 \
  X(INVALID_ARGUMENT, 3)        \
  X(DEADLINE_EXCEEDED, 4)       \
  X(NOT_FOUND, 5)               \
  X(ALREADY_EXISTS, 6)          \
  X(PERMISSION_DENIED, 7)       \
  X(RESOURCE_EXHAUSTED, 8)      \
  X(FAILED_PRECONDITION, 9)     \
  X(ABORTED, 10)                \
  X(OUT_OF_RANGE, 11)           \
  X(UNIMPLEMENTED, 12)          \
  X(INTERNAL, 13)               \
  X(UNAVAILABLE, 14)            \
  X(DATA_LOSS, 15)              \
  X(UNAUTHENTICATED, 16)

typedef enum hl_status_code_e {
#define HL_STATUS_CODE_ENUM_(name, value) HL_STATUS_##name = value,
  HL_STATUS_CODE_TABLE(HL_STATUS_CODE_ENUM_)
#undef HL_STATUS_CODE_ENUM_
      HL_STATUS_CODE_COUNT_
} hl_status_code_t;

typedef struct hl_status_s* hl_status_t;

#define hl_ok_status() ((hl_status_t)NULL)

// Returns the canonical name of |code| ("INVALID_ARGUMENT"), or "UNKNOWN_CODE".
HL_API const char* hl_status_code_name(hl_status_code_t code);

// Creates a status with |code| and a printf-style message, recording |file| and
// |line|. Use HL_MAKE_STATUS rather than calling this directly. Returns NULL
// for HL_STATUS_OK. Never fails: when memory is short a static status of the
// same code is returned instead (its message says so).
HL_API hl_status_t hl_status_make(hl_status_code_t code, const char* file,
                                  int line, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
HL_API hl_status_t hl_status_vmake(hl_status_code_t code, const char* file,
                                   int line, const char* format, va_list args);

#define HL_MAKE_STATUS(code, ...) \
  hl_status_make((code), __FILE__, __LINE__, __VA_ARGS__)

// Returns the code of |status| (HL_STATUS_OK for NULL).
HL_API hl_status_code_t hl_status_code(hl_status_t status);

// Returns the message chain of |status| (borrowed; "" for NULL). Context added
// by hl_status_annotate is prepended, outermost first, separated by "; ".
HL_API const char* hl_status_message(hl_status_t status);

// Returns the "file:line" where |status| was first made (borrowed).
HL_API const char* hl_status_source(hl_status_t status);

// Adds printf-style context to |status| and returns it (it may be a new
// pointer). Consumes |status|. OK stays OK.
HL_API hl_status_t hl_status_annotate(hl_status_t status, const char* format,
                                      ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

// Returns an independent copy of |status| that the caller owns.
HL_API hl_status_t hl_status_clone(hl_status_t status);

// Joins two statuses: returns |a| if |b| is OK, |b| if |a| is OK, otherwise
// |a| with |b|'s message appended, freeing |b|. Consumes both.
HL_API hl_status_t hl_status_join(hl_status_t a, hl_status_t b);

// Frees |status|. Accepts NULL.
HL_API void hl_status_free(hl_status_t status);

// Drops |status| on purpose; same as free, but says why at the call site.
HL_API void hl_status_ignore(hl_status_t status);

// Formats "CODE: message [file:line]" into |buffer| (always terminated).
// Returns the number of characters the full text needs, like snprintf.
HL_API size_t hl_status_format(hl_status_t status, char* buffer,
                               size_t capacity);

// Prints the formatted status to stderr with a prefix; for tools and tests.
HL_API void hl_status_fprint(void* file, const char* prefix,
                             hl_status_t status);

static inline bool hl_status_is_ok(hl_status_t status) {
  return status == NULL;
}

#if defined(__GNUC__)
#define HL_LIKELY(x) __builtin_expect(!!(x), 1)
#define HL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define HL_LIKELY(x) (x)
#define HL_UNLIKELY(x) (x)
#endif

// Evaluates |expr|; on failure returns it from the enclosing function with the
// printf-style context that follows appended.
#define HL_RETURN_IF_ERROR(expr, ...)                         \
  do {                                                        \
    hl_status_t hl_status_tmp_ = (expr);                      \
    if (HL_UNLIKELY(hl_status_tmp_ != NULL)) {                \
      return hl_status_annotate(hl_status_tmp_, __VA_ARGS__); \
    }                                                         \
  } while (0)

// Same, without context.
#define HL_RETURN_IF_ERROR_PLAIN(expr)         \
  do {                                         \
    hl_status_t hl_status_tmp_ = (expr);       \
    if (HL_UNLIKELY(hl_status_tmp_ != NULL)) { \
      return hl_status_tmp_;                   \
    }                                          \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_STATUS_H_
