// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer harness: the environment and option parsers of runtime/base/env.h
// and HIPLINE_FAULTS (hl_faults_parse). The first byte picks the parser and
// its bounds; the rest is the value (NUL-terminated copy). Every parser must
// either succeed with a value that honours its contract or fail with
// INVALID_ARGUMENT naming what it parsed.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/env.h"
#include "runtime/base/faults.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void check_error(hl_status_t st, const char* what) {
  if (!st) return;
  if (hl_status_code(st) != HL_STATUS_INVALID_ARGUMENT ||
      !strstr(hl_status_message(st), what)) {
    hl_status_fprint(stderr, "fuzz_env: bad error: ", st);
    abort();
  }
  hl_status_free(st);
}

static hl_status_t count_kv(void* user, const char* key, const char* value) {
  if (!key[0] || !value[0] || strchr(key, '=') || strchr(key, ',') ||
      strchr(value, ',')) {
    abort();  // The list parser must hand over non-empty, split items.
  }
  ++*(int*)user;
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  uint8_t selector = data[0];
  char* text = malloc(size);
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  switch (selector % 6) {
    case 0: {
      static const char* const names[] = {"auto", "hip", "host", "frontier",
                                          "device-sync"};
      int index = -1;
      hl_status_t st = hl_parse_enum("HIPLINE_X", text, names, 5, &index);
      if (!st && (index < 0 || index >= 5)) abort();
      check_error(st, "HIPLINE_X");
      break;
    }
    case 1: {
      bool value = false;
      check_error(hl_parse_bool("HIPLINE_B", text, &value), "HIPLINE_B");
      break;
    }
    case 2: {
      uint64_t min = (selector >> 3) & 1 ? 1 : 0;
      uint64_t max = (selector >> 4) & 1 ? 1000000 : UINT64_MAX;
      uint64_t value = 0;
      hl_status_t st = hl_parse_u64("HIPLINE_U", text, min, max, &value);
      if (!st && (value < min || value > max)) abort();
      check_error(st, "HIPLINE_U");
      break;
    }
    case 3: {
      uint64_t value = 0;
      check_error(hl_parse_size("HIPLINE_S", text, &value), "HIPLINE_S");
      break;
    }
    case 4: {
      int items = 0;
      check_error(hl_parse_kv_list("HIPLINE_KV", text, count_kv, &items),
                  "HIPLINE_KV");
      break;
    }
    default: {
      hl_faults_t faults;
      hl_status_t st = hl_faults_parse(text, &faults);
      if (!st && faults.stream_delay_us > 1000000) abort();
      check_error(st, "HIPLINE_FAULTS");
      break;
    }
  }
  free(text);
  return 0;
}
