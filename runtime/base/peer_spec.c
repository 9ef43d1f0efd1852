// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// HIPLINE_HOST_PEERS parsing (peer_spec.h).

#include "runtime/base/peer_spec.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/base/env.h"

typedef struct hl_peer_spec_t {
  uint64_t* rows;
} hl_peer_spec_t;

static hl_status_t hl_peer_spec_ordinal(const char* text, const char** end,
                                        unsigned* out) {
  char* stop = NULL;
  if (*text < '0' || *text > '9') {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "'%s' is not an ordinal",
                          text);
  }
  unsigned long n = strtoul(text, &stop, 10);
  if (n >= HL_PEER_SPEC_MAX_DEVICES) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "ordinal %lu is not below %d", n,
                          HL_PEER_SPEC_MAX_DEVICES);
  }
  *out = (unsigned)n;
  *end = stop;
  return NULL;
}

static hl_status_t hl_peer_spec_item(void* user, const char* key,
                                     const char* value) {
  hl_peer_spec_t* spec = user;
  bool on = false;
  HL_RETURN_IF_ERROR_PLAIN(hl_parse_bool("the value", value, &on));
  if (strcmp(key, "all") == 0) {
    for (int i = 0; i < HL_PEER_SPEC_MAX_DEVICES; ++i) {
      spec->rows[i] = on ? 0 : ~UINT64_C(0);
    }
    return NULL;
  }
  unsigned a = 0, b = 0;
  const char* p = key;
  hl_status_t st = hl_peer_spec_ordinal(p, &p, &a);
  if (!st && *p++ != '-') {
    st = HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                        "key '%s' is neither 'all' nor 'A-B'", key);
  }
  if (!st) st = hl_peer_spec_ordinal(p, &p, &b);
  if (!st && (*p || a == b)) {
    st = HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                        "key '%s' is not a pair of two ordinals 'A-B'", key);
  }
  if (st) return st;
  if (on) {
    spec->rows[a] &= ~(UINT64_C(1) << b);
    spec->rows[b] &= ~(UINT64_C(1) << a);
  } else {
    spec->rows[a] |= UINT64_C(1) << b;
    spec->rows[b] |= UINT64_C(1) << a;
  }
  return NULL;
}

hl_status_t hl_peer_spec_parse(
    const char* text, uint64_t out_unreachable[HL_PEER_SPEC_MAX_DEVICES]) {
  memset(out_unreachable, 0,
         HL_PEER_SPEC_MAX_DEVICES * sizeof(*out_unreachable));
  hl_peer_spec_t spec = {out_unreachable};
  hl_status_t st =
      hl_parse_kv_list("HIPLINE_HOST_PEERS", text, hl_peer_spec_item, &spec);
  if (st) {
    // All reachable again: a caller that ignores the error sees the default.
    memset(out_unreachable, 0,
           HL_PEER_SPEC_MAX_DEVICES * sizeof(*out_unreachable));
    return hl_status_annotate(st,
                              "accepted values: key=value items 'all=on|off' "
                              "or 'A-B=on|off'");
  }
  return NULL;
}

hl_status_t hl_peer_spec_from_env(
    uint64_t out_unreachable[HL_PEER_SPEC_MAX_DEVICES]) {
  return hl_peer_spec_parse(hl_env_read_text(HL_ENV_HOST_PEERS),
                            out_unreachable);
}
