// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The registry of embedded code objects and the pure matching and grouping
// functions of hipline/executable.h.
#include <stdio.h>
#include <string.h>

#include "hipline/executable.h"
#include "kernels/embedded_code_objects.h"
#include "runtime/executable/target_id.h"

size_t hl_executable_gpu_target_count(void) {
  return hl_embedded_code_object_count;
}

const char* hl_executable_gpu_target(size_t index) {
  if (index >= hl_embedded_code_object_count) return NULL;
  return hl_embedded_code_objects[index]->target;
}

hl_status_t hl_executable_gpu_code_object(size_t index, const void** out_data,
                                          size_t* out_size) {
  if (!out_data || !out_size) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_executable_gpu_code_object: NULL out_data or "
                          "out_size");
  }
  if (index >= hl_embedded_code_object_count) {
    return HL_MAKE_STATUS(HL_STATUS_OUT_OF_RANGE,
                          "GPU code object %zu requested; the library embeds "
                          "%zu",
                          index, hl_embedded_code_object_count);
  }
  *out_data = hl_embedded_code_objects[index]->data;
  *out_size = hl_embedded_code_objects[index]->size;
  return hl_ok_status();
}

size_t hl_executable_registry_target_count(void) {
  return hl_embedded_code_object_count + 1;
}

const char* hl_executable_registry_target(size_t index) {
  if (index < hl_embedded_code_object_count) {
    return hl_embedded_code_objects[index]->target;
  }
  return index == hl_embedded_code_object_count ? HL_TARGET_ID_HOST : NULL;
}

// Appends "a, b, c" (or "none") naming |built_targets| to |buffer| at
// |*used|, truncating at |capacity|.
static void hl_executable_append_targets(char* buffer, size_t capacity,
                                         size_t* used,
                                         const char* const* built_targets,
                                         size_t built_count) {
  static const char* const kNone[] = {"none"};
  if (built_count == 0) {
    built_targets = kNone;
    built_count = 1;
  }
  for (size_t i = 0; i < built_count && *used < capacity; ++i) {
    int n = snprintf(buffer + *used, capacity - *used, "%s%s", i ? ", " : "",
                     built_targets[i]);
    *used += n > 0 ? (size_t)n : 0;
  }
}

// Picks the best compatible entry of |built_targets| for the parsed |device|
// (exact beats compatible, then more features, then earlier), or returns
// |built_count| when none is compatible.
static hl_status_t hl_executable_match_parsed(const hl_target_id_t* device,
                                              const char* const* built_targets,
                                              size_t built_count,
                                              size_t* out_index) {
  size_t best = built_count;
  size_t best_rank = 0;
  for (size_t i = 0; i < built_count; ++i) {
    hl_target_id_t object;
    HL_RETURN_IF_ERROR(hl_target_id_parse(built_targets[i], &object),
                       "built target %zu", i);
    if (!hl_target_id_compatible(&object, device)) continue;
    // Rank 1 + features for a compatible object; exact matches outrank any.
    size_t rank = hl_target_id_parsed_equal(&object, device)
                      ? HL_TARGET_ID_MAX_FEATURES + 2
                      : object.feature_count + 1;
    if (rank > best_rank) {
      best = i;
      best_rank = rank;
    }
  }
  *out_index = best;
  return hl_ok_status();
}

hl_status_t hl_executable_match_target(const char* device_target,
                                       const char* const* built_targets,
                                       size_t built_count, size_t* out_index) {
  if (!out_index || (built_count && !built_targets)) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_executable_match_target: NULL out_index or "
                          "built_targets");
  }
  hl_target_id_t device;
  HL_RETURN_IF_ERROR(hl_target_id_parse(device_target, &device),
                     "matching a device to a code object");
  size_t index = built_count;
  HL_RETURN_IF_ERROR_PLAIN(
      hl_executable_match_parsed(&device, built_targets, built_count, &index));
  if (index == built_count) {
    char built[512];
    size_t used = 0;
    built[0] = '\0';
    hl_executable_append_targets(built, sizeof(built), &used, built_targets,
                                 built_count);
    return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                          "no code object for device target '%s'; built "
                          "targets: %s",
                          device_target, built);
  }
  *out_index = index;
  return hl_ok_status();
}

// Union-find over |parent| (device indices). The root of a set is always its
// smallest index, so the root is the set's first device.
static size_t hl_union_find_root(size_t* parent, size_t i) {
  size_t root = i;
  while (parent[root] != root) root = parent[root];
  // Path compression keeps later finds short.
  while (parent[i] != root) {
    size_t next = parent[i];
    parent[i] = root;
    i = next;
  }
  return root;
}

static void hl_union_find_join(size_t* parent, size_t a, size_t b) {
  a = hl_union_find_root(parent, a);
  b = hl_union_find_root(parent, b);
  if (a < b) {
    parent[b] = a;
  } else if (b < a) {
    parent[a] = b;
  }
}

hl_status_t hl_executable_group_targets(const char* const* device_targets,
                                        size_t count, size_t* out_group_of,
                                        size_t* out_group_count) {
  if (!out_group_count || (count && (!device_targets || !out_group_of))) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_executable_group_targets: NULL targets or "
                          "outputs");
  }
  // |out_group_of| doubles as the union-find parent array, so grouping
  // needs no allocation.
  for (size_t i = 0; i < count; ++i) out_group_of[i] = i;
  for (size_t i = 0; i < count; ++i) {
    hl_target_id_t a;
    HL_RETURN_IF_ERROR(hl_target_id_parse(device_targets[i], &a), "device %zu",
                       i);
    for (size_t j = i + 1; j < count; ++j) {
      hl_target_id_t b;
      HL_RETURN_IF_ERROR(hl_target_id_parse(device_targets[j], &b),
                         "device %zu", j);
      if (hl_target_id_parsed_equal(&a, &b)) {
        hl_union_find_join(out_group_of, i, j);
      }
    }
  }
  for (size_t i = 0; i < count; ++i) {
    out_group_of[i] = hl_union_find_root(out_group_of, i);
  }
  // Every entry now holds its root, which is never after it. Relabel in
  // index order: a root takes the next group number; any other device copies
  // the (already relabelled) number of its root.
  size_t groups = 0;
  for (size_t i = 0; i < count; ++i) {
    out_group_of[i] =
        out_group_of[i] == i ? groups++ : out_group_of[out_group_of[i]];
  }
  *out_group_count = groups;
  return hl_ok_status();
}

hl_status_t hl_executable_select(const char* const* device_targets,
                                 size_t device_count,
                                 const char* const* built_targets,
                                 size_t built_count, size_t* out_group_of,
                                 size_t* out_object_of_group,
                                 size_t* out_group_count) {
  if (!out_group_count ||
      (device_count &&
       (!device_targets || !out_group_of || !out_object_of_group)) ||
      (built_count && !built_targets)) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_executable_select: NULL targets or outputs");
  }
  size_t group_count = 0;
  HL_RETURN_IF_ERROR(hl_executable_group_targets(device_targets, device_count,
                                                 out_group_of, &group_count),
                     "selecting code objects");
  char missing[512];
  size_t missing_used = 0;
  missing[0] = '\0';
  size_t missing_count = 0;
  // The first device of group g is the first i with out_group_of[i] == g,
  // and groups are numbered in that order, so one pass visits each group
  // once, at its first device.
  size_t next_group = 0;
  for (size_t i = 0; i < device_count; ++i) {
    if (out_group_of[i] != next_group) continue;
    ++next_group;
    hl_target_id_t device;
    HL_RETURN_IF_ERROR(hl_target_id_parse(device_targets[i], &device),
                       "device %zu", i);
    size_t index = built_count;
    HL_RETURN_IF_ERROR_PLAIN(hl_executable_match_parsed(&device, built_targets,
                                                        built_count, &index));
    out_object_of_group[out_group_of[i]] = index;
    if (index == built_count) {
      ++missing_count;
      if (missing_used < sizeof(missing)) {
        int n = snprintf(missing + missing_used, sizeof(missing) - missing_used,
                         "%s'%s' (device %zu)", missing_count > 1 ? ", " : "",
                         device_targets[i], i);
        missing_used += n > 0 ? (size_t)n : 0;
      }
    }
  }
  if (missing_count != 0) {
    char built[512];
    size_t used = 0;
    built[0] = '\0';
    hl_executable_append_targets(built, sizeof(built), &used, built_targets,
                                 built_count);
    return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                          "no code object for device target%s %s; built "
                          "targets: %s",
                          missing_count > 1 ? "s" : "", missing, built);
  }
  *out_group_count = group_count;
  return hl_ok_status();
}
