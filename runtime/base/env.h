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
// hl_env_size, refusing a size outside [min, max] (|range| describes it).
hl_status_t hl_env_size_in(const char* name, uint64_t min, uint64_t max,
                           const char* range, uint64_t* out, bool* out_set);
// The host backend's memory size (HIPLINE_HOST_MEMORY), range-checked.
#define HL_HOST_MEMORY_MIN ((uint64_t)4096)
#define HL_HOST_MEMORY_MAX ((uint64_t)1 << 48)
#define HL_HOST_MEMORY_RANGE "[4096, 2^48]"

// A key=value list parser for specs such as HIPLINE_FAULTS:
// "alloc_fail_every=8,seed=3". Calls |fn| for each pair; |fn| returns an error
// for unknown keys. Empty items and missing '=' are errors naming |what|.
typedef hl_status_t (*hl_kv_fn_t)(void* user, const char* key,
                                  const char* value);
hl_status_t hl_parse_kv_list(const char* what, const char* text, hl_kv_fn_t fn,
                             void* user);

#endif  // HIPLINE_RUNTIME_BASE_ENV_H_
