// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Command buffers: the elision pass and finalize (hipline/command_buffer.h).
//
// Finalize runs the elision pass and builds |steps|, the list each
// execution runs: fills become zero or more word-aligned pieces, the other
// commands are copied unchanged.
//
// The elision pass walks the commands backwards keeping, per root, the set
// of "dead" bytes: bytes that a later command overwrites before anything
// reads them. The end of the buffer reads everything (the set starts empty).
// For each command, its writes are added to the set, then its reads removed
// (within a command reads happen first). A fill keeps only the bytes of its
// range that are not dead at that point; the fill itself then kills its
// range for earlier commands.
//
// The sets are per root, so they only see reads through the same root.
// Another root can cover the same bytes when both are escaped: a wrap of an
// escaped address, or two wraps of one foreign pointer. When two or more of
// the roots are escaped, fills of the escaped ones are kept whole (a read
// through the alias would not clear their dead set).

#include <stdlib.h>
#include <string.h>

#include "runtime/base/env.h"
#include "runtime/base/trace.h"
#include "runtime/command/command_buffer_internal.h"

//===----------------------------------------------------------------------===//
// Elision
//===----------------------------------------------------------------------===//

// A set of disjoint, sorted, non-adjacent byte ranges [begin, end).
typedef struct hl_range_t {
  uint64_t begin, end;
} hl_range_t;
typedef struct hl_range_set_t {
  hl_range_t* ranges;
  size_t count;
  size_t capacity;
} hl_range_set_t;

// Index of the first range whose end is >= |at| (ends ascend too).
static size_t hl_range_set_lower(const hl_range_set_t* set, uint64_t at) {
  size_t lo = 0, hi = set->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (set->ranges[mid].end < at) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

static bool hl_range_set_add(hl_range_set_t* set, uint64_t begin,
                             uint64_t end) {
  if (begin >= end) return true;
  // First range that ends at or after |begin| (touching ranges merge).
  size_t lo = hl_range_set_lower(set, begin);
  size_t hi = lo;
  while (hi < set->count && set->ranges[hi].begin <= end) {
    if (set->ranges[hi].begin < begin) begin = set->ranges[hi].begin;
    if (set->ranges[hi].end > end) end = set->ranges[hi].end;
    ++hi;
  }
  if (hi == lo) {
    if (!hl_command_grow((void**)&set->ranges, sizeof(*set->ranges),
                         &set->capacity, set->count + 1)) {
      return false;
    }
    memmove(&set->ranges[lo + 1], &set->ranges[lo],
            (set->count - lo) * sizeof(*set->ranges));
    ++set->count;
  } else if (hi - lo > 1) {
    memmove(&set->ranges[lo + 1], &set->ranges[hi],
            (set->count - hi) * sizeof(*set->ranges));
    set->count -= hi - lo - 1;
  }
  set->ranges[lo].begin = begin;
  set->ranges[lo].end = end;
  return true;
}

static bool hl_range_set_remove(hl_range_set_t* set, uint64_t begin,
                                uint64_t end) {
  if (begin >= end) return true;
  for (size_t i = hl_range_set_lower(set, begin); i < set->count;) {
    hl_range_t r = set->ranges[i];
    if (r.begin >= end) break;
    if (r.end <= begin) {
      ++i;
      continue;
    }
    if (r.begin < begin && r.end > end) {
      // Split in two.
      if (!hl_command_grow((void**)&set->ranges, sizeof(*set->ranges),
                           &set->capacity, set->count + 1)) {
        return false;
      }
      memmove(&set->ranges[i + 1], &set->ranges[i],
              (set->count - i) * sizeof(*set->ranges));
      ++set->count;
      set->ranges[i].end = begin;
      set->ranges[i + 1].begin = end;
      return true;
    }
    if (r.begin < begin) {
      set->ranges[i].end = begin;
      ++i;
    } else if (r.end > end) {
      set->ranges[i].begin = end;
      ++i;
    } else {
      memmove(&set->ranges[i], &set->ranges[i + 1],
              (set->count - i - 1) * sizeof(*set->ranges));
      --set->count;
    }
  }
  return true;
}

// The dead sets hold bytes mirrored around HL_MIRROR (byte x is stored as
// HL_MIRROR - 1 - x): the walk is backwards and programs mostly write
// ascending offsets, so new ranges land at the end of the array instead of
// moving it. Offsets stay below HL_BUFFER_MAX_SIZE, so nothing wraps, and
// HL_MIRROR is a multiple of 4, so word alignment is kept.
#define HL_MIRROR (UINT64_C(1) << 62)

static bool hl_dead_add(hl_range_set_t* set, uint64_t offset, uint64_t length) {
  return hl_range_set_add(set, HL_MIRROR - (offset + length),
                          HL_MIRROR - offset);
}

static bool hl_dead_remove(hl_range_set_t* set, uint64_t offset,
                           uint64_t length) {
  return hl_range_set_remove(set, HL_MIRROR - (offset + length),
                             HL_MIRROR - offset);
}

// Adds the mirrored gap [mirrored_begin, mirrored_end) to |out| as the
// original bytes [HL_MIRROR - mirrored_end, HL_MIRROR - mirrored_begin),
// rounded out to whole words.
static bool hl_fill_piece_add(hl_range_set_t* out, uint64_t mirrored_end,
                              uint64_t mirrored_begin) {
  uint64_t begin = HL_MIRROR - mirrored_end;
  uint64_t end = HL_MIRROR - mirrored_begin;
  return hl_range_set_add(out, begin & ~UINT64_C(3), (end + 3) & ~UINT64_C(3));
}

// Marks the reads and writes of dispatch |recorded| in |dead| by the
// bindings' declared access, the same for every executable: a binding with
// read access reads its whole declared range; one flagged
// HL_COMMAND_ARG_WRITES_WHOLE_RANGE (write access, the kernel writes every
// byte of the range) overwrites it; other writes neither read nor
// overwrite (they may leave bytes as they were).
static bool hl_dispatch_apply_backwards(const hl_command_call_t* recorded,
                                        hl_range_set_t* dead) {
  const hl_dispatch_call_t* call = &recorded->call;
  for (uint32_t i = 0; i < call->arg_count; ++i) {
    const hl_dispatch_binding_t* b = &call->bindings[i];
    if (!recorded->arg_roots[i] ||
        !(recorded->arg_flags[i] & HL_COMMAND_ARG_WRITES_WHOLE_RANGE)) {
      continue;
    }
    if (!hl_dead_add(&dead[recorded->arg_roots[i] - 1], b->offset, b->length)) {
      return false;
    }
  }
  for (uint32_t i = 0; i < call->arg_count; ++i) {
    const hl_dispatch_binding_t* b = &call->bindings[i];
    if (!recorded->arg_roots[i] || !(b->access & HL_ACCESS_READ)) continue;
    if (!hl_dead_remove(&dead[recorded->arg_roots[i] - 1], b->offset,
                        b->length)) {
      return false;
    }
  }
  return true;
}

// Marks the reads and writes of |command| in |dead| (one set per root):
// writes first, then reads, since the walk is backwards.
static bool hl_command_apply_backwards(const hl_command_buffer_t* cb,
                                       const hl_command_t* command,
                                       hl_range_set_t* dead) {
  switch (command->kind) {
    case HL_COMMAND_FILL:
    case HL_COMMAND_UPDATE:
      return hl_dead_add(&dead[command->target], command->target_offset,
                         command->length);
    case HL_COMMAND_COPY:
      return hl_dead_add(&dead[command->target], command->target_offset,
                         command->length) &&
             hl_dead_remove(&dead[command->source], command->source_offset,
                            command->length);
    case HL_COMMAND_DISPATCH:
      return hl_dispatch_apply_backwards(cb->calls[command->call], dead);
    case HL_COMMAND_BARRIER:
      return true;
  }
  return true;
}

// The pieces of fill |command| that are not in |dead|, rounded out to whole
// words within the fill, appended to |out|.
static bool hl_fill_pieces(const hl_command_t* command,
                           const hl_range_set_t* dead, hl_range_set_t* out) {
  // In mirrored coordinates (see hl_dead_add).
  uint64_t begin = HL_MIRROR - (command->target_offset + command->length);
  uint64_t end = HL_MIRROR - command->target_offset;
  uint64_t cursor = begin;
  for (size_t i = hl_range_set_lower(dead, cursor);
       i < dead->count && cursor < end; ++i) {
    hl_range_t r = dead->ranges[i];
    if (r.end <= cursor) continue;
    if (r.begin >= end) break;
    if (r.begin > cursor && !hl_fill_piece_add(out, r.begin, cursor)) {
      return false;
    }
    cursor = r.end;
  }
  if (cursor < end && !hl_fill_piece_add(out, end, cursor)) return false;
  return true;
}

// Escaped roots of |cb|: any two of them may cover the same bytes.
static uint32_t hl_command_escaped_roots(const hl_command_buffer_t* cb) {
  uint32_t escaped = 0;
  for (uint32_t i = 0; i < cb->root_count; ++i) {
    if (atomic_load(&cb->roots[i]->escaped)) ++escaped;
  }
  return escaped;
}

// The dead set fill elision may use for |root|: none when another root of
// |cb| may alias it.
static const hl_range_set_t* hl_command_fill_dead(const hl_command_buffer_t* cb,
                                                  const hl_range_set_t* dead,
                                                  uint32_t root,
                                                  uint32_t escaped_roots) {
  static const hl_range_set_t no_dead = {0};
  if (escaped_roots >= 2 && atomic_load(&cb->roots[root]->escaped)) {
    return &no_dead;
  }
  return &dead[root];
}

static hl_status_t hl_command_buffer_build_steps(hl_command_buffer_t* cb,
                                                 bool elide) {
  size_t count = cb->command_count;
  hl_range_set_t* dead =
      elide ? calloc(cb->root_count ? cb->root_count : 1, sizeof(*dead)) : NULL;
  // The pieces each fill keeps, gathered backwards: fill i keeps
  // kept[first[i], first[i] + counts[i]). |scratch| is reused per fill.
  size_t* first = elide ? malloc((count ? count : 1) * sizeof(*first)) : NULL;
  uint32_t* counts = elide ? calloc(count ? count : 1, sizeof(*counts)) : NULL;
  hl_range_set_t kept = {0}, scratch = {0};
  bool ok = !elide || (dead && first && counts);
  uint32_t escaped_roots = elide ? hl_command_escaped_roots(cb) : 0;
  for (size_t i = count; ok && elide && i-- > 0;) {
    const hl_command_t* command = &cb->commands[i];
    if (command->kind == HL_COMMAND_FILL) {
      scratch.count = 0;
      ok = hl_fill_pieces(
               command,
               hl_command_fill_dead(cb, dead, command->target, escaped_roots),
               &scratch) &&
           hl_command_grow((void**)&kept.ranges, sizeof(*kept.ranges),
                           &kept.capacity, kept.count + scratch.count);
      if (ok) {
        if (scratch.count) {
          memcpy(&kept.ranges[kept.count], scratch.ranges,
                 scratch.count * sizeof(*scratch.ranges));
        }
        first[i] = kept.count;
        counts[i] = (uint32_t)scratch.count;
        kept.count += scratch.count;
      }
    }
    ok = ok && hl_command_apply_backwards(cb, command, dead);
  }
  size_t step_count = 0;
  for (size_t i = 0; ok && i < count; ++i) {
    const hl_command_t* command = &cb->commands[i];
    if (command->kind == HL_COMMAND_BARRIER) continue;
    if (elide && command->kind == HL_COMMAND_FILL) {
      step_count += counts[i];
    } else {
      ++step_count;
    }
  }
  hl_command_t* steps =
      ok ? malloc((step_count ? step_count : 1) * sizeof(*steps)) : NULL;
  ok = ok && steps;
  size_t n = 0;
  for (size_t i = 0; ok && i < count; ++i) {
    const hl_command_t* command = &cb->commands[i];
    if (command->kind == HL_COMMAND_BARRIER) continue;
    if (!elide || command->kind != HL_COMMAND_FILL) {
      steps[n++] = *command;
      if (command->kind == HL_COMMAND_FILL) ++cb->info.fill_ranges;
      continue;
    }
    uint64_t kept_bytes = 0;
    for (size_t p = first[i]; p < first[i] + counts[i]; ++p) {
      steps[n] = *command;
      steps[n].target_offset = kept.ranges[p].begin;
      steps[n].length = kept.ranges[p].end - kept.ranges[p].begin;
      kept_bytes += steps[n].length;
      ++n;
    }
    cb->info.fill_ranges += counts[i];
    if (kept_bytes == 0) {
      ++cb->info.fills_elided;
    } else if (kept_bytes < command->length) {
      ++cb->info.fills_shrunk;
    }
    cb->info.fill_bytes_elided += command->length - kept_bytes;
  }
  for (size_t i = 0; dead && i < cb->root_count; ++i) free(dead[i].ranges);
  free(dead);
  free(first);
  free(counts);
  free(kept.ranges);
  free(scratch.ranges);
  if (!ok) {
    free(steps);
    memset(&cb->info.fills_elided, 0,
           sizeof(cb->info) - offsetof(hl_command_buffer_info_t, fills_elided));
    cb->info.update_bytes = cb->data_size;
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "finalizing command buffer %llu (%zu commands)",
                          (unsigned long long)cb->id, count);
  }
  cb->steps = steps;
  cb->step_count = n;
  return NULL;
}

hl_status_t hl_command_buffer_finalize(hl_command_buffer_t* cb) {
  HL_RETURN_IF_ERROR_PLAIN(
      hl_command_check_open(cb, "hl_command_buffer_finalize"));
  if (cb->command_count == 0) {
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "hl_command_buffer_finalize: command buffer %llu "
                          "has no commands",
                          (unsigned long long)cb->id);
  }
  bool elide = true, set = false;
  HL_RETURN_IF_ERROR(hl_env_read_bool(HL_ENV_ELIDE_FILLS, &elide, &set),
                     "finalizing command buffer %llu",
                     (unsigned long long)cb->id);
  if (cb->flags & HL_COMMAND_BUFFER_FLAG_NO_ELISION) elide = false;
  HL_TRACE_ZONE_BEGIN(zone, "hl_command_buffer_finalize");
  hl_status_t st = hl_command_buffer_build_steps(cb, elide);
  if (!st) {
    cb->finalized = true;
    cb->info.finalized = true;
    cb->info.elision_enabled = elide;
    cb->info.roots = cb->root_count;
  }
  HL_TRACE_ZONE_END(zone);
  return st;
}

hl_status_t hl_command_buffer_query(const hl_command_buffer_t* cb,
                                    hl_command_buffer_info_t* out_info) {
  if (!cb || !out_info) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_command_buffer_query: NULL cb or out_info");
  }
  *out_info = cb->info;
  out_info->roots = cb->root_count;
  return NULL;
}
