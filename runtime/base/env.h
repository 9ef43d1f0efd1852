// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Strict parsing of HIPLINE_* environment variables and option strings.
//
// Every parser names the variable, the value it was given and the accepted
// values in its error. An unset or empty variable means "not set"; any other
// value that does not parse is an error, never silently ignored.
#ifndef HIPLINE_RUNTIME_BASE_ENV_H_
#define HIPLINE_RUNTIME_BASE_ENV_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hipline/status.h"

// Returns the value of |name| or NULL when unset or empty.
const char* hl_env_get(const char* name);

// Parses |value| as one of |names| (|count| of them, exact match, case
// insensitive) into |*out_index|. |what| names the variable or option.
hl_status_t hl_parse_enum(const char* what, const char* value,
                          const char* const* names, int count, int* out_index);

// Parses 1|0|true|false|on|off|yes|no (case insensitive).
hl_status_t hl_parse_bool(const char* what, const char* value, bool* out);

// Parses a decimal unsigned integer in [min, max].
hl_status_t hl_parse_u64(const char* what, const char* value, uint64_t min,
                         uint64_t max, uint64_t* out);

// Parses a byte size: an integer with an optional suffix B, K/KiB, M/MiB,
// G/GiB, T/TiB (binary multiples, case-insensitive). Overflow is an error.
hl_status_t hl_parse_size(const char* what, const char* value, uint64_t* out);

// Looks up |name| and, when set, parses it with the matching parser; the
// out-parameter is untouched and *out_set false when unset.
hl_status_t hl_env_enum(const char* name, const char* const* names, int count,
                        int* out_index, bool* out_set);
hl_status_t hl_env_bool(const char* name, bool* out, bool* out_set);
hl_status_t hl_env_size(const char* name, uint64_t* out, bool* out_set);

// A key=value list parser for specs such as HIPLINE_FAULTS:
// "alloc_fail_every=8,seed=3". Calls |fn| for each pair; |fn| returns an error
// for unknown keys. Empty items and missing '=' are errors naming |what|.
typedef hl_status_t (*hl_kv_fn_t)(void* user, const char* key,
                                  const char* value);
hl_status_t hl_parse_kv_list(const char* what, const char* text, hl_kv_fn_t fn,
                             void* user);

// The library's environment variables, one table (env.c): every reader of a
// HIPLINE_* variable goes through it, hl_environment_check walks it, and
// docs/environment.md documents it (tests/env_table_test.c holds the two
// together). Variables that only the scripts and tools read are not in it.
typedef enum hl_env_id_e {
  HL_ENV_BACKEND,
  HL_ENV_ASSUME_NO_ALIAS,
  HL_ENV_FALLBACK,
  HL_ENV_POOL_RELEASE_THRESHOLD,
  HL_ENV_ALLOCATOR,
  HL_ENV_CHECKED,
  HL_ENV_FAULTS,
  HL_ENV_TRACE,
  HL_ENV_HOST_MEMORY,
  HL_ENV_HOST_DEVICES,
  HL_ENV_HOST_INLINE,
  HL_ENV_HOST_PEERS,
  HL_ENV_QUEUE_DEPTH,
  HL_ENV_LOG,
  HL_ENV_ELIDE_FILLS,
  HL_ENV_COMPLETER,
  HL_ENV_COUNT
} hl_env_id_t;

// How a variable's value is parsed.
typedef enum hl_env_kind_e {
  HL_ENV_KIND_BOOL,  // hl_parse_bool.
  HL_ENV_KIND_SIZE,  // hl_parse_size, in [min, max] unless max is 0.
  HL_ENV_KIND_ENUM,  // hl_parse_enum over |names|.
  HL_ENV_KIND_UINT,  // hl_parse_u64 in [min, max].
  HL_ENV_KIND_SPEC,  // A key=value list its reader parses (HIPLINE_FAULTS).
  HL_ENV_KIND_PATH,  // A file path shorter than |max| bytes.
} hl_env_kind_t;

typedef struct hl_env_var_t {
  const char* name;
  hl_env_kind_t kind;
  const char* const* names;  // HL_ENV_KIND_ENUM: the values, by index.
  int name_count;
  uint64_t min, max;     // UINT, SIZE: the range; PATH: max length.
  const char* fallback;  // What an unset variable means (the docs' default).
  const char* doc;       // One line.
  const char* range;  // SIZE with a range: how it is written, "[4096, 2^48]".
} hl_env_var_t;

// The entry of |id| (one of HL_ENV_COUNT).
const hl_env_var_t* hl_env_var(hl_env_id_t id);

// The entry named by the |length| bytes at |name|, or NULL.
const hl_env_var_t* hl_env_find(const char* name, size_t length);

// The entry whose name the |length| bytes at |name| look like a misspelling
// of (at most two letters off), or NULL (also for an exact name).
const hl_env_var_t* hl_env_suggest(const char* name, size_t length);

// Parses |var|'s value with its kind's parser, as its reader would (SPEC:
// only that it is set). NULL when unset or valid.
hl_status_t hl_env_var_check(const hl_env_var_t* var);

// Readers by id: the out-parameter is untouched and *out_set false when the
// variable is unset; an invalid value is an error naming it.
hl_status_t hl_env_read_bool(hl_env_id_t id, bool* out, bool* out_set);
hl_status_t hl_env_read_size(hl_env_id_t id, uint64_t* out, bool* out_set);
hl_status_t hl_env_read_enum(hl_env_id_t id, int* out_index, bool* out_set);
hl_status_t hl_env_read_uint(hl_env_id_t id, uint64_t* out, bool* out_set);
// SPEC and PATH variables: the value, or NULL when unset or empty.
const char* hl_env_read_text(hl_env_id_t id);

#endif  // HIPLINE_RUNTIME_BASE_ENV_H_
