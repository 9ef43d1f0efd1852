// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hipline-info: what hipline sees on this machine.
//
// Lists every backend (available or not, and why), every device of each
// available backend with its properties, and the pool attributes in force on
// each device. Human-readable by default, one JSON document with --json.
//
// Uses only the public API in include/hipline/. Exit codes: 0 on success, 1
// when a query fails, 2 for a usage error or an invalid HIPLINE_* variable.
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipline/allocator.h"
#include "hipline/device.h"
#include "hipline/dispatch.h"
#include "hipline/executable.h"
#include "hipline/export.h"
#include "hipline/status.h"
#include "hipline/trace.h"

typedef struct hl_info_options_t {
  bool json;
} hl_info_options_t;

// The output sink: either a human report or one JSON document on stdout.
// JSON objects and arrays track whether a separator is due.
typedef struct hl_info_writer_t {
  bool json;
  int depth;
  bool need_comma[16];
} hl_info_writer_t;

static const hl_backend_kind_t kBackends[] = {HL_BACKEND_HOST, HL_BACKEND_HIP};

static void hl_info_print_usage(FILE* out) {
  fprintf(out,
          "usage: hipline-info [--json] [--help]\n"
          "\n"
          "Lists hipline's backends, their devices and pool attributes.\n"
          "\n"
          "  --json   print one JSON document instead of the human report\n"
          "  --help   print this help and exit\n"
          "\n"
          "Environment: the HIPLINE_* variables of docs/environment.md (all\n"
          "checked first). An invalid value is reported and exits 2.\n");
}

//===----------------------------------------------------------------------===//
// JSON writing
//===----------------------------------------------------------------------===//

static void hl_json_string(const char* text) {
  putchar('"');
  for (const unsigned char* p = (const unsigned char*)text; *p; ++p) {
    switch (*p) {
      case '"':
        fputs("\\\"", stdout);
        break;
      case '\\':
        fputs("\\\\", stdout);
        break;
      case '\n':
        fputs("\\n", stdout);
        break;
      case '\r':
        fputs("\\r", stdout);
        break;
      case '\t':
        fputs("\\t", stdout);
        break;
      default:
        if (*p < 0x20) {
          printf("\\u%04x", (unsigned)*p);
        } else {
          putchar(*p);
        }
    }
  }
  putchar('"');
}

// Emits the separator and, inside an object, the key of the next value.
static void hl_json_key(hl_info_writer_t* w, const char* key) {
  if (w->need_comma[w->depth]) putchar(',');
  w->need_comma[w->depth] = true;
  if (key) {
    hl_json_string(key);
    putchar(':');
  }
}

static void hl_json_open(hl_info_writer_t* w, const char* key, char bracket) {
  hl_json_key(w, key);
  putchar(bracket);
  if (w->depth + 1 < (int)(sizeof(w->need_comma) / sizeof(w->need_comma[0]))) {
    ++w->depth;
  }
  w->need_comma[w->depth] = false;
}

static void hl_json_close(hl_info_writer_t* w, char bracket) {
  putchar(bracket);
  if (w->depth > 0) --w->depth;
}

static void hl_json_str(hl_info_writer_t* w, const char* key,
                        const char* value) {
  hl_json_key(w, key);
  hl_json_string(value);
}

static void hl_json_bool(hl_info_writer_t* w, const char* key, bool value) {
  hl_json_key(w, key);
  fputs(value ? "true" : "false", stdout);
}

static void hl_json_int(hl_info_writer_t* w, const char* key, int64_t value) {
  hl_json_key(w, key);
  printf("%" PRId64, value);
}

static void hl_json_uint(hl_info_writer_t* w, const char* key, uint64_t value) {
  hl_json_key(w, key);
  printf("%" PRIu64, value);
}

// Formats |status| for a report ("CODE: message [file:line]").
static void hl_info_status_text(hl_status_t status, char* buffer,
                                size_t capacity) {
  hl_status_format(status, buffer, capacity);
}

//===----------------------------------------------------------------------===//
// Report sections
//===----------------------------------------------------------------------===//

static void hl_info_print_bytes(uint64_t bytes) {
  if (bytes == UINT64_MAX) {
    fputs("unlimited", stdout);
    return;
  }
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = (double)bytes;
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < sizeof(kUnits) / sizeof(kUnits[0])) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) {
    printf("%" PRIu64 " B", bytes);
  } else {
    printf("%.1f %s (%" PRIu64 " B)", value, kUnits[unit], bytes);
  }
}

static void hl_info_print_reuse_flags(uint32_t flags) {
  if (flags == 0) {
    fputs("none", stdout);
    return;
  }
  const char* sep = "";
  if (flags & HL_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES) {
    printf("%sfollow-event-dependencies", sep);
    sep = "|";
  }
  if (flags & HL_POOL_REUSE_ALLOW_OPPORTUNISTIC) {
    printf("%sallow-opportunistic", sep);
    sep = "|";
  }
  if (flags & HL_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES) {
    printf("%sallow-internal-dependencies", sep);
  }
}

// Kernel targets and executables (include/hipline/executable.h).
//
// Groups are computed over every device of every available backend with
// hl_executable_group_targets (devices with equal target ids share a group),
// and each group's target is matched once against the library's registry
// (the embedded GPU code objects, then "host"), as the runtime does when it
// loads kernels. Per device (|device| not NULL) this prints its group and
// the code object its target resolves to; once for the process (|device|
// NULL) the registry, the kernels and the groups with their devices.

#define HL_INFO_MAX_DEVICES 64

// Every listed device's target, grouped and matched.
typedef struct hl_info_fleet_t {
  size_t count;
  hl_device_properties_t props[HL_INFO_MAX_DEVICES];
  size_t group_of[HL_INFO_MAX_DEVICES];
  size_t group_count;
  // Per group: the registry index of its code object, or an error text.
  size_t object_of_group[HL_INFO_MAX_DEVICES];
  char group_error[HL_INFO_MAX_DEVICES][512];
  char error[512];  // Grouping failed (an invalid target id).
} hl_info_fleet_t;

static void hl_info_collect_fleet(hl_info_fleet_t* fleet) {
  memset(fleet, 0, sizeof(*fleet));
  for (size_t b = 0; b < sizeof(kBackends) / sizeof(kBackends[0]); ++b) {
    hl_backend_info_t info;
    hl_status_t status = hl_backend_query(kBackends[b], &info);
    if (!hl_status_is_ok(status) || !info.available) {
      hl_status_free(status);
      continue;
    }
    for (int i = 0; i < info.device_count && fleet->count < HL_INFO_MAX_DEVICES;
         ++i) {
      status = hl_backend_device_properties(kBackends[b], i,
                                            &fleet->props[fleet->count]);
      if (hl_status_is_ok(status)) {
        ++fleet->count;
      } else {
        hl_status_free(status);  // Reported with the device already.
      }
    }
  }
  const char* targets[HL_INFO_MAX_DEVICES];
  for (size_t i = 0; i < fleet->count; ++i) targets[i] = fleet->props[i].target;
  hl_status_t status = hl_executable_group_targets(
      targets, fleet->count, fleet->group_of, &fleet->group_count);
  if (!hl_status_is_ok(status)) {
    hl_info_status_text(status, fleet->error, sizeof(fleet->error));
    hl_status_free(status);
    fleet->group_count = 0;
    return;
  }
  const char* registry[HL_INFO_MAX_DEVICES + 1];
  size_t registry_count = hl_executable_registry_target_count();
  if (registry_count > sizeof(registry) / sizeof(registry[0])) {
    registry_count = sizeof(registry) / sizeof(registry[0]);
  }
  for (size_t i = 0; i < registry_count; ++i) {
    registry[i] = hl_executable_registry_target(i);
  }
  for (size_t g = 0; g < fleet->group_count; ++g) {
    size_t first = 0;
    while (fleet->group_of[first] != g) ++first;
    status = hl_executable_match_target(
        targets[first], registry, registry_count, &fleet->object_of_group[g]);
    if (!hl_status_is_ok(status)) {
      hl_info_status_text(status, fleet->group_error[g],
                          sizeof(fleet->group_error[g]));
      hl_status_free(status);
    }
  }
}

// The group of the first listed device whose target equals |target|, or
// SIZE_MAX when none does.
static size_t hl_info_group_of_target(const hl_info_fleet_t* fleet,
                                      const char* target) {
  for (size_t i = 0; i < fleet->count && fleet->group_count; ++i) {
    if (hl_target_id_equal(fleet->props[i].target, target)) {
      return fleet->group_of[i];
    }
  }
  return SIZE_MAX;
}

static void hl_info_print_device_executable(hl_info_writer_t* w,
                                            const hl_info_fleet_t* fleet,
                                            hl_device_t* device) {
  hl_device_properties_t props;
  char error[512] = "";
  size_t group = SIZE_MAX;
  hl_status_t status = hl_device_properties(device, &props);
  if (!hl_status_is_ok(status)) {
    hl_info_status_text(status, error, sizeof(error));
    hl_status_free(status);
  } else if (fleet->error[0]) {
    snprintf(error, sizeof(error), "%s", fleet->error);
  } else {
    group = hl_info_group_of_target(fleet, props.target);
    if (group == SIZE_MAX) {
      snprintf(error, sizeof(error),
               "target '%s' is not among the listed "
               "devices' targets",
               props.target);
    } else if (fleet->group_error[group][0]) {
      snprintf(error, sizeof(error), "%s", fleet->group_error[group]);
    }
  }
  const char* object =
      group == SIZE_MAX || error[0]
          ? NULL
          : hl_executable_registry_target(fleet->object_of_group[group]);
  if (w->json) {
    hl_json_open(w, "executable", '{');
    if (group != SIZE_MAX) hl_json_uint(w, "group", group);
    if (object) {
      hl_json_str(w, "code_object", object);
    } else {
      hl_json_str(w, "executable_error", error);
    }
    hl_json_close(w, '}');
  } else if (object) {
    printf("      kernels:  group %zu, code object %s\n", group, object);
  } else if (group != SIZE_MAX) {
    printf("      kernels:  group %zu, no code object: %s\n", group, error);
  } else {
    printf("      kernels:  %s\n", error);
  }
}

// The |index|th embedded code object; false when it is there.
static bool hl_info_code_object(size_t index, const void** out_data,
                                size_t* out_size) {
  hl_status_t st = hl_executable_gpu_code_object(index, out_data, out_size);
  if (!st) return false;
  hl_status_free(st);
  return true;
}

// "elf" for a bare AMDGPU ELF (a plain clang build), "bundle" for a clang
// offload bundle (hipcc --genco).
static const char* hl_info_code_object_format(const void* data, size_t size) {
  if (size >= 4 && memcmp(data, "\177ELF", 4) == 0) return "elf";
  if (size >= 24 && memcmp(data, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0) {
    return "bundle";
  }
  return "unknown";
}

static void hl_info_print_executables(hl_info_writer_t* w,
                                      hl_device_t* device) {
  // Large: keep it off the stack.
  static hl_info_fleet_t fleet;
  static bool collected = false;
  if (!collected) {
    hl_info_collect_fleet(&fleet);
    collected = true;
  }
  if (device) {
    hl_info_print_device_executable(w, &fleet, device);
    return;
  }

  size_t gpu_count = hl_executable_gpu_target_count();
  size_t kernel_count = hl_dispatch_kernel_count();
  if (w->json) {
    hl_json_open(w, "executables", '{');
    hl_json_open(w, "gpu_targets", '[');
    for (size_t i = 0; i < gpu_count; ++i) {
      hl_json_str(w, NULL, hl_executable_gpu_target(i));
    }
    hl_json_close(w, ']');
    hl_json_open(w, "code_objects", '[');
    for (size_t i = 0; i < gpu_count; ++i) {
      const void* data = NULL;
      size_t size = 0;
      hl_json_open(w, NULL, '{');
      hl_json_str(w, "target", hl_executable_gpu_target(i));
      if (!hl_info_code_object(i, &data, &size)) {
        hl_json_uint(w, "bytes", size);
        hl_json_str(w, "format", hl_info_code_object_format(data, size));
      }
      hl_json_close(w, '}');
    }
    hl_json_close(w, ']');
    hl_json_open(w, "registry_targets", '[');
    for (size_t i = 0; i < hl_executable_registry_target_count(); ++i) {
      hl_json_str(w, NULL, hl_executable_registry_target(i));
    }
    hl_json_close(w, ']');
    hl_json_open(w, "kernels", '[');
    for (size_t i = 0; i < kernel_count; ++i) {
      hl_json_str(w, NULL, hl_dispatch_kernel_name(i));
    }
    hl_json_close(w, ']');
    if (fleet.error[0]) hl_json_str(w, "groups_error", fleet.error);
    hl_json_open(w, "groups", '[');
    for (size_t g = 0; g < fleet.group_count; ++g) {
      hl_json_open(w, NULL, '{');
      hl_json_uint(w, "id", g);
      size_t first = 0;
      while (fleet.group_of[first] != g) ++first;
      hl_json_str(w, "target", fleet.props[first].target);
      if (fleet.group_error[g][0]) {
        hl_json_str(w, "code_object_error", fleet.group_error[g]);
      } else {
        hl_json_str(w, "code_object",
                    hl_executable_registry_target(fleet.object_of_group[g]));
      }
      hl_json_open(w, "devices", '[');
      for (size_t i = 0; i < fleet.count; ++i) {
        if (fleet.group_of[i] != g) continue;
        hl_json_open(w, NULL, '{');
        hl_json_str(w, "backend", hl_backend_kind_name(fleet.props[i].backend));
        hl_json_int(w, "ordinal", fleet.props[i].ordinal);
        hl_json_close(w, '}');
      }
      hl_json_close(w, ']');
      hl_json_close(w, '}');
    }
    hl_json_close(w, ']');
    hl_json_close(w, '}');
    return;
  }

  printf("executables:\n  GPU code objects: ");
  if (gpu_count == 0) fputs("none (built without a device compiler)", stdout);
  for (size_t i = 0; i < gpu_count; ++i) {
    const void* data = NULL;
    size_t size = 0;
    printf("%s%s", i ? ", " : "", hl_executable_gpu_target(i));
    if (!hl_info_code_object(i, &data, &size)) {
      printf(" (%zu bytes, %s)", size, hl_info_code_object_format(data, size));
    }
  }
  printf("\n  host code object: %s\n  kernels:          ", HL_TARGET_ID_HOST);
  for (size_t i = 0; i < kernel_count; ++i) {
    printf("%s%s", i ? ", " : "", hl_dispatch_kernel_name(i));
  }
  putchar('\n');
  if (fleet.error[0]) {
    printf("  groups: cannot group the device targets: %s\n", fleet.error);
    return;
  }
  for (size_t g = 0; g < fleet.group_count; ++g) {
    size_t first = 0;
    while (fleet.group_of[first] != g) ++first;
    printf("  group %zu: target %s -> ", g, fleet.props[first].target);
    if (fleet.group_error[g][0]) {
      printf("no code object (%s)", fleet.group_error[g]);
    } else {
      printf("code object %s",
             hl_executable_registry_target(fleet.object_of_group[g]));
    }
    fputs("; devices", stdout);
    for (size_t i = 0; i < fleet.count; ++i) {
      if (fleet.group_of[i] != g) continue;
      printf(" %s:%d", hl_backend_kind_name(fleet.props[i].backend),
             fleet.props[i].ordinal);
    }
    putchar('\n');
  }
}

// Creates device |ordinal| of |kind| and reports its pool attributes, its
// fallback mode and checked flag. A failure is reported, not fatal: the rest
// of the listing is still useful. Returns false when something failed.
static bool hl_info_print_device_state(hl_info_writer_t* w,
                                       hl_backend_kind_t kind, int ordinal) {
  hl_device_options_t options;
  hl_device_options_initialize(&options);
  options.backend = kind;
  options.ordinal = ordinal;

  char error[512] = "";
  hl_device_t* device = NULL;
  hl_pool_attributes_t attrs;
  memset(&attrs, 0, sizeof(attrs));
  hl_status_t status =
      hl_device_create(&options, hl_allocator_system(), &device);
  if (hl_status_is_ok(status)) {
    status = hl_device_pool_attributes(device, &attrs);
  }
  if (!hl_status_is_ok(status)) {
    hl_info_status_text(status, error, sizeof(error));
    hl_status_free(status);
  }

  if (w->json) {
    if (error[0]) {
      hl_json_str(w, "device_error", error);
    } else {
      hl_json_str(w, "fallback",
                  hl_fallback_mode_name(hl_device_fallback_mode(device)));
      hl_json_bool(w, "checked", hl_device_checked(device));
      hl_json_open(w, "pool", '{');
      // UINT64_MAX (keep everything) stays a number so the type is stable.
      hl_json_uint(w, "release_threshold", attrs.release_threshold);
      hl_json_uint(w, "reuse_flags", attrs.reuse_flags);
      hl_json_uint(w, "limit_bytes", attrs.limit_bytes);
      hl_json_close(w, '}');
    }
  } else {
    if (error[0]) {
      printf("      device:   cannot create: %s\n", error);
    } else {
      printf("      fallback: %s\n",
             hl_fallback_mode_name(hl_device_fallback_mode(device)));
      printf("      checked:  %s\n", hl_device_checked(device) ? "yes" : "no");
      printf("      pool:     release threshold ");
      hl_info_print_bytes(attrs.release_threshold);
      printf("\n                reuse ");
      hl_info_print_reuse_flags(attrs.reuse_flags);
      printf("\n                limit ");
      if (attrs.limit_bytes == 0) {
        fputs("device memory", stdout);
      } else {
        hl_info_print_bytes(attrs.limit_bytes);
      }
      putchar('\n');
    }
  }
  if (device) hl_info_print_executables(w, device);
  hl_device_release(device);
  return error[0] == '\0';
}

static bool hl_info_print_device(hl_info_writer_t* w, hl_backend_kind_t kind,
                                 int ordinal) {
  hl_device_properties_t props;
  memset(&props, 0, sizeof(props));
  hl_status_t status = hl_backend_device_properties(kind, ordinal, &props);
  char error[512] = "";
  if (!hl_status_is_ok(status)) {
    hl_info_status_text(status, error, sizeof(error));
    hl_status_free(status);
  }

  bool ok = error[0] == '\0';
  if (w->json) {
    hl_json_open(w, NULL, '{');
    hl_json_int(w, "ordinal", ordinal);
    if (!ok) {
      hl_json_str(w, "error", error);
    } else {
      hl_json_str(w, "name", props.name);
      hl_json_str(w, "target", props.target);
      hl_json_uint(w, "memory_bytes", props.memory_bytes);
      hl_json_int(w, "compute_units", props.compute_units);
      ok = hl_info_print_device_state(w, kind, ordinal);
    }
    hl_json_close(w, '}');
  } else {
    printf("    device %d:\n", ordinal);
    if (!ok) {
      printf("      error:    %s\n", error);
    } else {
      printf("      name:     %s\n", props.name);
      printf("      target:   %s\n", props.target);
      printf("      memory:   ");
      hl_info_print_bytes(props.memory_bytes);
      printf("\n      CUs:      %d\n", props.compute_units);
      ok = hl_info_print_device_state(w, kind, ordinal);
    }
  }
  return ok;
}

// Reports one backend and its devices. Returns false when a query failed
// (an unavailable backend is not a failure).
static bool hl_info_print_backend(hl_info_writer_t* w, hl_backend_kind_t kind) {
  hl_backend_info_t info;
  memset(&info, 0, sizeof(info));
  hl_status_t status = hl_backend_query(kind, &info);
  const char* name = hl_backend_kind_name(kind);
  if (!hl_status_is_ok(status)) {
    char error[512];
    hl_info_status_text(status, error, sizeof(error));
    hl_status_free(status);
    if (w->json) {
      hl_json_open(w, NULL, '{');
      hl_json_str(w, "name", name);
      hl_json_bool(w, "available", false);
      hl_json_str(w, "reason", error);
      hl_json_str(w, "error", error);
      hl_json_close(w, '}');
    } else {
      printf("backend %s: query failed: %s\n", name, error);
    }
    return false;
  }

  bool ok = true;
  if (w->json) {
    hl_json_open(w, NULL, '{');
    hl_json_str(w, "name", name);
    hl_json_bool(w, "available", info.available);
    hl_json_int(w, "device_count", info.available ? info.device_count : 0);
    hl_json_str(w, "reason", info.available ? "" : info.reason);
    hl_json_open(w, "devices", '[');
    for (int i = 0; info.available && i < info.device_count; ++i) {
      ok = hl_info_print_device(w, kind, i) && ok;
    }
    hl_json_close(w, ']');
    hl_json_close(w, '}');
  } else if (!info.available) {
    printf("backend %s: not available: %s\n", name,
           info.reason[0] ? info.reason : "(no reason given)");
  } else {
    printf("backend %s: available, %d device%s\n", name, info.device_count,
           info.device_count == 1 ? "" : "s");
    for (int i = 0; i < info.device_count; ++i) {
      ok = hl_info_print_device(w, kind, i) && ok;
    }
  }
  return ok;
}

// Reports which backend a default device would use (HIPLINE_BACKEND, then
// auto-detection).
static void hl_info_print_default_backend(hl_info_writer_t* w) {
  hl_backend_kind_t resolved = HL_BACKEND_AUTO;
  hl_status_t status = hl_backend_resolve(HL_BACKEND_AUTO, &resolved);
  char error[512] = "";
  if (!hl_status_is_ok(status)) {
    hl_info_status_text(status, error, sizeof(error));
    hl_status_free(status);
  }
  if (w->json) {
    if (error[0]) {
      hl_json_str(w, "default_backend_error", error);
    } else {
      hl_json_str(w, "default_backend", hl_backend_kind_name(resolved));
    }
  } else if (error[0]) {
    printf("default backend: cannot resolve: %s\n", error);
  } else {
    printf("default backend: %s\n", hl_backend_kind_name(resolved));
  }
}

//===----------------------------------------------------------------------===//
// main
//===----------------------------------------------------------------------===//

// Parses argv into |out_options|. Returns -1 to continue, otherwise the exit
// code (0 after --help, 2 for a usage error).
static int hl_info_parse_args(int argc, char** argv,
                              hl_info_options_t* out_options) {
  memset(out_options, 0, sizeof(*out_options));
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--json") == 0) {
      out_options->json = true;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      hl_info_print_usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "hipline-info: unknown argument '%s'\n", argv[i]);
      hl_info_print_usage(stderr);
      return 2;
    }
  }
  return -1;
}

int main(int argc, char** argv) {
  hl_info_options_t options;
  int exit_code = hl_info_parse_args(argc, argv, &options);
  if (exit_code >= 0) return exit_code;

  // An invalid HIPLINE_* value would otherwise surface as a confusing device
  // creation failure further down; report it up front, naming the variable.
  hl_status_t status = hl_environment_check();
  if (!hl_status_is_ok(status)) {
    hl_status_fprint(stderr, "hipline-info: invalid environment: ", status);
    hl_status_free(status);
    return 2;
  }

  hl_info_writer_t writer;
  memset(&writer, 0, sizeof(writer));
  writer.json = options.json;

  bool ok = true;
  if (writer.json) {
    hl_json_open(&writer, NULL, '{');
    hl_json_str(&writer, "version", HIPLINE_VERSION_STRING);
    hl_info_print_default_backend(&writer);
    hl_json_open(&writer, "backends", '[');
  } else {
    printf("hipline %s\n", HIPLINE_VERSION_STRING);
    hl_info_print_default_backend(&writer);
  }
  for (size_t i = 0; i < sizeof(kBackends) / sizeof(kBackends[0]); ++i) {
    ok = hl_info_print_backend(&writer, kBackends[i]) && ok;
  }
  if (writer.json) hl_json_close(&writer, ']');
  hl_info_print_executables(&writer, NULL);
  if (writer.json) {
    hl_json_close(&writer, '}');
    putchar('\n');
  }
  // HIPLINE_TRACE's trace is written here, where a failed write can still
  // fail the program (the library's write at exit then has nothing left).
  const char* trace = getenv("HIPLINE_TRACE");
  if (trace && trace[0] && hl_trace_capture_active()) {
    hl_status_t trace_status = hl_trace_capture_end(trace);
    if (trace_status) {
      hl_status_fprint(stderr, "hipline-info: HIPLINE_TRACE: ", trace_status);
      hl_status_free(trace_status);
      ok = false;
    }
  }
  // A report that could not be written (a full disk, a closed pipe) fails.
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "hipline-info: writing the report failed: %s\n",
            strerror(errno));
    return 1;
  }
  return ok ? 0 : 1;
}
