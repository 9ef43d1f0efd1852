// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Parsed target ids, shared by the registry's matching and grouping code.
#ifndef HIPLINE_RUNTIME_EXECUTABLE_TARGET_ID_H_
#define HIPLINE_RUNTIME_EXECUTABLE_TARGET_ID_H_

#include <stdbool.h>
#include <stddef.h>

#include "hipline/executable.h"
#include "hipline/status.h"

#define HL_TARGET_ID_MAX_FEATURES 8
#define HL_TARGET_ID_NAME_MAX 32

typedef struct hl_target_feature_t {
  char name[HL_TARGET_ID_NAME_MAX];
  bool on;  // '+' when true, '-' when false.
} hl_target_feature_t;

// A target id split into its processor and its features sorted by name.
typedef struct hl_target_id_t {
  char processor[HL_TARGET_ID_NAME_MAX];
  size_t feature_count;
  hl_target_feature_t features[HL_TARGET_ID_MAX_FEATURES];
} hl_target_id_t;

// Parses |text| into |out_id|. INVALID_ARGUMENT names |text| and says what is
// wrong with it.
hl_status_t hl_target_id_parse(const char* text, hl_target_id_t* out_id);

// Returns true when |a| and |b| have the same processor and features.
bool hl_target_id_parsed_equal(const hl_target_id_t* a,
                               const hl_target_id_t* b);

// Returns true when a code object built for |object| can run on a device of
// target |device| (same processor, every feature of |object| present in
// |device| with the same sign).
bool hl_target_id_compatible(const hl_target_id_t* object,
                             const hl_target_id_t* device);

#endif  // HIPLINE_RUNTIME_EXECUTABLE_TARGET_ID_H_
