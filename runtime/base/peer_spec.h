// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// HIPLINE_HOST_PEERS: which host-backend devices reach each other.
//
// A key=value list read in order: "all=on|off" sets every pair,
// "A-B=on|off" the pair of ordinals A and B (both directions; A != B,
// both below 64). Unset, every pair reaches each other. "all=off" makes
// every cross-device copy staged; "0-1=off" only the one pair.
#ifndef HIPLINE_RUNTIME_BASE_PEER_SPEC_H_
#define HIPLINE_RUNTIME_BASE_PEER_SPEC_H_

#include <stdint.h>

#include "hipline/status.h"

#define HL_PEER_SPEC_MAX_DEVICES 64

// Parses |text| (NULL: unset) into |out_unreachable|: bit B of row A is set
// when ordinal A does not reach ordinal B. An invalid spec is
// INVALID_ARGUMENT naming HIPLINE_HOST_PEERS and the item.
hl_status_t hl_peer_spec_parse(
    const char* text, uint64_t out_unreachable[HL_PEER_SPEC_MAX_DEVICES]);

// hl_peer_spec_parse of the environment's HIPLINE_HOST_PEERS.
hl_status_t hl_peer_spec_from_env(
    uint64_t out_unreachable[HL_PEER_SPEC_MAX_DEVICES]);

#endif  // HIPLINE_RUNTIME_BASE_PEER_SPEC_H_
