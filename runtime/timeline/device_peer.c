// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Peer access between devices: the query, the enabling of a device set and
// the cross-device counters (include/hipline/device.h says what is
// reachable from where).
//
// A device keeps the ordinals it reaches as a bit set (hl_device_t.
// peers_enabled); hl_device_reaches reads it on every cross-device use.
// Enabling makes the backend calls first (peer_enable) and sets the bit only
// once they succeeded, so a reader that sees the bit may use the memory.

#include <string.h>

#include "runtime/timeline/timeline_internal.h"

// Serialises enabling (backend calls included), so that two threads
// enabling overlapping sets make each backend call once. Never held
// across anything but the enabling itself.
static mtx_t hl_peer_mutex_;
static once_flag hl_peer_once_ = ONCE_FLAG_INIT;

static void hl_peer_mutex_init(void) { mtx_init(&hl_peer_mutex_, mtx_plain); }

static hl_status_t hl_device_peer_check_pair(const char* what,
                                             const hl_device_t* device,
                                             const hl_device_t* peer) {
  if (!device || !peer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "%s: NULL device", what);
  }
  if (device->props.backend != peer->props.backend) {
    return HL_MAKE_STATUS(
        HL_STATUS_INVALID_ARGUMENT,
        "%s: device %d (%s) and device %d (%s) are of different backends", what,
        device->props.ordinal, hl_backend_kind_name(device->props.backend),
        peer->props.ordinal, hl_backend_kind_name(peer->props.backend));
  }
  if (peer->props.ordinal < 0 || peer->props.ordinal >= 64 ||
      device->props.ordinal < 0 || device->props.ordinal >= 64) {
    return HL_MAKE_STATUS(HL_STATUS_OUT_OF_RANGE,
                          "%s: peer access covers ordinals 0..63 (devices %d "
                          "and %d)",
                          what, device->props.ordinal, peer->props.ordinal);
  }
  return NULL;
}

// Whether the backend lets |device| reach |peer| (both checked).
static hl_status_t hl_device_peer_query(hl_device_t* device, hl_device_t* peer,
                                        bool* out_can_access) {
  *out_can_access = false;
  if (device == peer) {
    *out_can_access = true;
    return NULL;
  }
  hl_backend_t* backend = device->backend;
  if (!backend->vtable->peer_can_access) return NULL;
  return backend->vtable->peer_can_access(backend, peer->backend,
                                          out_can_access);
}

hl_status_t hl_device_can_access_peer(hl_device_t* device, hl_device_t* peer,
                                      bool* out_can_access) {
  if (!out_can_access) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_device_can_access_peer: out_can_access is NULL");
  }
  *out_can_access = false;
  HL_RETURN_IF_ERROR_PLAIN(
      hl_device_peer_check_pair("hl_device_can_access_peer", device, peer));
  return hl_device_peer_query(device, peer, out_can_access);
}

// Enables |device| -> |peer| when the backend allows it. The peer mutex held.
static hl_status_t hl_device_peer_enable_locked(hl_device_t* device,
                                                hl_device_t* peer) {
  if (hl_device_reaches(device, peer)) return NULL;
  bool can = false;
  HL_RETURN_IF_ERROR_PLAIN(hl_device_peer_query(device, peer, &can));
  if (!can || !device->backend->vtable->peer_enable) return NULL;
  HL_RETURN_IF_ERROR(
      device->backend->vtable->peer_enable(device->backend, peer->backend),
      "enabling access of device %d to the memory of device %d",
      device->props.ordinal, peer->props.ordinal);
  atomic_fetch_or_explicit(&device->peers_enabled,
                           UINT64_C(1) << peer->props.ordinal,
                           memory_order_release);
  return NULL;
}

hl_status_t hl_device_enable_peer_access(hl_device_t* const* devices,
                                         size_t count) {
  if (count && !devices) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_device_enable_peer_access: devices is NULL");
  }
  for (size_t i = 0; i < count; ++i) {
    HL_RETURN_IF_ERROR_PLAIN(hl_device_peer_check_pair(
        "hl_device_enable_peer_access", devices[i], devices[0]));
  }
  call_once(&hl_peer_once_, hl_peer_mutex_init);
  hl_status_t st = NULL;
  mtx_lock(&hl_peer_mutex_);
  for (size_t i = 0; i < count && !st; ++i) {
    for (size_t j = 0; j < count && !st; ++j) {
      if (devices[i] != devices[j]) {
        st = hl_device_peer_enable_locked(devices[i], devices[j]);
      }
    }
  }
  mtx_unlock(&hl_peer_mutex_);
  return st;
}

bool hl_device_peer_access_enabled(const hl_device_t* device,
                                   const hl_device_t* peer) {
  return device && peer && hl_device_reaches(device, peer);
}

void hl_device_peer_stats(const hl_device_t* device,
                          hl_device_peer_stats_t* out_stats) {
  if (!out_stats) return;
  memset(out_stats, 0, sizeof(*out_stats));
  if (!device) return;
  hl_device_t* d = (hl_device_t*)device;
  out_stats->peer_copies =
      atomic_load_explicit(&d->peer_copies, memory_order_relaxed);
  out_stats->peer_bytes =
      atomic_load_explicit(&d->peer_bytes, memory_order_relaxed);
  out_stats->staged_copies =
      atomic_load_explicit(&d->staged_copies, memory_order_relaxed);
  out_stats->staged_bytes =
      atomic_load_explicit(&d->staged_bytes, memory_order_relaxed);
  out_stats->cross_device_waits =
      atomic_load_explicit(&d->cross_device_waits, memory_order_relaxed);
}
