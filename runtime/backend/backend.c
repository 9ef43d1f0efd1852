// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The backend layer's front door: kind names, availability queries, the
// HIPLINE_BACKEND / auto resolution, per-kind device properties and backend
// creation. The only file above a backend's own folder that names the host
// and hip backends; the timeline and the layers above it reach a backend
// through hl_backend_create and the vtable.

#include "runtime/backend/backend.h"

#include <stddef.h>

#include "runtime/base/env.h"

const char* hl_backend_kind_name(hl_backend_kind_t kind) {
  // The names HIPLINE_BACKEND accepts, by kind.
  const hl_env_var_t* names = hl_env_var(HL_ENV_BACKEND);
  return (unsigned)kind < (unsigned)names->name_count ? names->names[kind]
                                                      : "unknown";
}

hl_status_t hl_backend_query(hl_backend_kind_t kind,
                             hl_backend_info_t* out_info) {
  if (!out_info) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_backend_query: out_info is NULL");
  }
  switch (kind) {
    case HL_BACKEND_HOST:
      return hl_host_backend_query(out_info);
    case HL_BACKEND_HIP:
      return hl_hip_backend_query(out_info);
    default:
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "hl_backend_query: backend must be host or hip, "
                            "got %d",
                            (int)kind);
  }
}

hl_status_t hl_backend_kind_from_env(hl_backend_kind_t* out_kind) {
  int index = 0;
  bool set = false;
  HL_RETURN_IF_ERROR_PLAIN(hl_env_read_enum(HL_ENV_BACKEND, &index, &set));
  *out_kind = set ? (hl_backend_kind_t)index : HL_BACKEND_AUTO;
  return NULL;
}

hl_status_t hl_backend_resolve(hl_backend_kind_t requested,
                               hl_backend_kind_t* out_kind) {
  if (!out_kind) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_backend_resolve: out_kind is NULL");
  }
  if ((unsigned)requested > HL_BACKEND_HIP) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "unknown backend kind %d; accepted: auto|host|hip",
                          (int)requested);
  }
  if (requested == HL_BACKEND_AUTO) {
    HL_RETURN_IF_ERROR_PLAIN(hl_backend_kind_from_env(&requested));
  }
  hl_backend_info_t info;
  if (requested == HL_BACKEND_AUTO) {
    HL_RETURN_IF_ERROR_PLAIN(hl_hip_backend_query(&info));
    *out_kind = info.available && info.device_count > 0 ? HL_BACKEND_HIP
                                                        : HL_BACKEND_HOST;
    return NULL;
  }
  HL_RETURN_IF_ERROR_PLAIN(hl_backend_query(requested, &info));
  if (!info.available) {
    return HL_MAKE_STATUS(HL_STATUS_UNAVAILABLE,
                          "backend '%s' is unavailable: %s",
                          hl_backend_kind_name(requested), info.reason);
  }
  *out_kind = requested;
  return NULL;
}

hl_status_t hl_backend_device_properties(hl_backend_kind_t kind, int ordinal,
                                         hl_device_properties_t* out_props) {
  if (!out_props) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_backend_device_properties: out_props is NULL");
  }
  switch (kind) {
    case HL_BACKEND_HOST:
      return hl_host_backend_device_properties(ordinal, out_props);
    case HL_BACKEND_HIP:
      return hl_hip_backend_device_properties(ordinal, out_props);
    default:
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "hl_backend_device_properties: backend must be "
                            "host or hip");
  }
}

hl_status_t hl_backend_create(hl_backend_kind_t kind, int ordinal,
                              hl_allocator_t host_allocator,
                              hl_backend_t** out_backend) {
  switch (kind) {
    case HL_BACKEND_HOST:
      return hl_host_backend_create(ordinal, host_allocator, out_backend);
    case HL_BACKEND_HIP:
      return hl_hip_backend_create(ordinal, host_allocator, out_backend);
    default:
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "hl_backend_create: backend must be host or hip "
                            "(resolve auto first), got %d",
                            (int)kind);
  }
}
