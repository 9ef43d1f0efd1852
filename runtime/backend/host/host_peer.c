// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Peers on the host backend: every device's memory is host memory, so a
// peer copy is a copy; HIPLINE_HOST_PEERS (base/peer_spec.h) marks pairs
// that do not reach each other, so that the staged path runs here too.
//
// The backend holds what it enabled, per device, and refuses a peer copy
// between devices it did not enable: a caller that forgot to enable (or
// copies between unreachable devices) fails here instead of passing
// silently on memory that is reachable anyway.

#include <string.h>

#include "runtime/backend/host/host_item.h"
#include "runtime/base/peer_spec.h"

static hl_host_backend_t* hl_host_peer_cast(hl_backend_t* backend) {
  return (hl_host_backend_t*)backend;
}

hl_status_t hl_host_peer_can_access(hl_backend_t* backend, hl_backend_t* peer,
                                    bool* out_can_access) {
  int a = hl_host_peer_cast(backend)->ordinal;
  int b = hl_host_peer_cast(peer)->ordinal;
  *out_can_access = false;
  if (a == b) {
    *out_can_access = true;
    return NULL;
  }
  uint64_t unreachable[HL_PEER_SPEC_MAX_DEVICES];
  HL_RETURN_IF_ERROR_PLAIN(hl_peer_spec_from_env(unreachable));
  *out_can_access = ((unreachable[a] >> b) & 1u) == 0;
  return NULL;
}

hl_status_t hl_host_peer_enable(hl_backend_t* backend, hl_backend_t* peer) {
  bool can = false;
  HL_RETURN_IF_ERROR_PLAIN(hl_host_peer_can_access(backend, peer, &can));
  hl_host_backend_t* device = hl_host_peer_cast(backend);
  int b = hl_host_peer_cast(peer)->ordinal;
  if (!can) {
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "host device %d cannot reach host device %d "
                          "(HIPLINE_HOST_PEERS)",
                          device->ordinal, b);
  }
  atomic_fetch_or(&device->peers_enabled, UINT64_C(1) << b);
  return NULL;
}

// Whether |device| may touch memory of |owner|.
static bool hl_host_peer_reaches(hl_host_backend_t* device,
                                 hl_backend_t* owner) {
  int b = hl_host_peer_cast(owner)->ordinal;
  return owner == &device->base || b == device->ordinal ||
         ((atomic_load(&device->peers_enabled) >> b) & 1u);
}

hl_status_t hl_host_memcpy_peer_async(hl_backend_t* backend, void* dst,
                                      hl_backend_t* dst_backend,
                                      const void* src,
                                      hl_backend_t* src_backend, size_t size,
                                      hl_backend_stream_t* stream) {
  hl_host_backend_t* device = hl_host_peer_cast(backend);
  hl_backend_t* sides[2] = {src_backend, dst_backend};
  for (int i = 0; i < 2; ++i) {
    if (!sides[i] || sides[i]->kind != HL_BACKEND_HOST) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "memcpy_peer_async: the %s is not host memory",
                            i ? "destination" : "source");
    }
    if (!hl_host_peer_reaches(device, sides[i])) {
      return HL_MAKE_STATUS(
          HL_STATUS_FAILED_PRECONDITION,
          "memcpy_peer_async on host device %d: the %s is memory of host "
          "device %d, which it does not reach (peer access not enabled)",
          device->ordinal, i ? "destination" : "source",
          hl_host_peer_cast(sides[i])->ordinal);
    }
  }
  return backend->vtable->memcpy_async(backend, dst, src, size, stream);
}
