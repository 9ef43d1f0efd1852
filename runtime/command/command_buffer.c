// Command buffers (hipline/command_buffer.h).
//
// Layering: this layer sits above executable (dispatch calls), memory (roots,
// timeline resources) and timeline (queue submissions).
//
// Recording appends commands whose ranges are resolved to offsets from the
// start of each buffer's root, so views of one allocation share one entry in
// |roots|. Finalize runs the elision pass and builds |steps|, the list each
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
//
// An execution is one hl_op_t in one submission. At submit it takes an op
// reference on every root and records one use per root (a write when any
// command writes it). The execution is one piece of stream work
// (hl_stream_work_issue): it checks that every root is live, then enqueues
// each step through the backend (memset32_async, memcpy_async,
// launch_kernel). With the backend's |stream_ordered_host_work| that runs
// when the stream gets there (a failed submission runs no step, and the
// checks see that moment); without it, at issue.

#include "hipline/command_buffer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "runtime/base/env.h"
#include "runtime/base/log.h"
#include "runtime/base/trace.h"
#include "runtime/executable/dispatch_internal.h"
#include "runtime/memory/memory_internal.h"

typedef enum hl_command_kind_e {
  HL_COMMAND_FILL,
  HL_COMMAND_UPDATE,
  HL_COMMAND_COPY,
  HL_COMMAND_DISPATCH,
  HL_COMMAND_BARRIER,
} hl_command_kind_t;

typedef struct hl_command_t {
  hl_command_kind_t kind;
  uint32_t target;         // Root index (fill, update, copy).
  uint32_t source;         // Root index (copy).
  uint64_t target_offset;  // From the root's start.
  uint64_t source_offset;
  uint64_t length;
  uint32_t pattern;      // Fill.
  uint32_t call;         // Dispatch: into |calls|.
  uint64_t data_offset;  // Update: into |data|.
} hl_command_t;

// A recorded dispatch: the call and, per argument, its root index + 1 (0 for
// none) and HL_COMMAND_ARG_* flags.
typedef struct hl_command_call_t {
  hl_dispatch_call_t call;
  uint32_t arg_roots[HL_KERNEL_MAX_PARAMS];
  uint32_t arg_flags[HL_KERNEL_MAX_PARAMS];
} hl_command_call_t;

struct hl_command_buffer_t {
  atomic_int ref_count;
  hl_device_t* device;  // Retained.
  uint32_t flags;
  uint64_t id;
  bool finalized;

  hl_buffer_t** buffers;  // Retained; distinct handles.
  uint32_t buffer_count;
  size_t buffer_capacity;
  hl_root_t** roots;  // Distinct roots (held through |buffers|).
  bool* root_writes;
  uint32_t root_count;
  size_t root_capacity;
  size_t root_writes_capacity;

  hl_command_t* commands;
  size_t command_count;
  size_t command_capacity;
  hl_command_call_t* calls;
  uint32_t call_count;
  size_t call_capacity;
  uint8_t* data;
  size_t data_size;
  size_t data_capacity;

  hl_command_t* steps;  // Built by finalize.
  size_t step_count;
  hl_command_buffer_info_t info;

  // The steps as one backend graph (backends with graph_capture), built at
  // the first execution, when every root's address is known, and launched
  // by every execution after (see hl_execute_run_graph).
  mtx_t graph_mutex;
  hl_backend_graph_t* graph;
  bool graph_tried;  // Built, or known not to be buildable.
};

static atomic_uint_fast64_t hl_next_command_buffer_id_ = 1;

//===----------------------------------------------------------------------===//
// Lifetime
//===----------------------------------------------------------------------===//

hl_status_t hl_command_buffer_create(hl_device_t* device, uint32_t flags,
                                     hl_command_buffer_t** out_cb) {
  if (!device || !out_cb) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_command_buffer_create: NULL device or out_cb");
  }
  *out_cb = NULL;
  if (flags & ~(uint32_t)HL_COMMAND_BUFFER_FLAG_NO_ELISION) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_command_buffer_create: unknown flags 0x%x",
                          flags & ~(uint32_t)HL_COMMAND_BUFFER_FLAG_NO_ELISION);
  }
  hl_command_buffer_t* cb = calloc(1, sizeof(*cb));
  if (!cb) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating a command buffer");
  }
  if (mtx_init(&cb->graph_mutex, mtx_plain) != thrd_success) {
    free(cb);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "creating a command buffer's mutex");
  }
  atomic_init(&cb->ref_count, 1);
  hl_device_retain(device);
  cb->device = device;
  cb->flags = flags;
  cb->id = atomic_fetch_add(&hl_next_command_buffer_id_, 1);
  *out_cb = cb;
  return NULL;
}

void hl_command_buffer_retain(hl_command_buffer_t* cb) {
  if (cb) atomic_fetch_add(&cb->ref_count, 1);
}

void hl_command_buffer_release(hl_command_buffer_t* cb) {
  if (!cb || atomic_fetch_sub(&cb->ref_count, 1) != 1) return;
  for (uint32_t i = 0; i < cb->buffer_count; ++i) {
    hl_buffer_release(cb->buffers[i]);
  }
  free(cb->buffers);
  free(cb->roots);
  free(cb->root_writes);
  free(cb->commands);
  free(cb->calls);
  free(cb->data);
  free(cb->steps);
  hl_device_t* device = cb->device;
  if (cb->graph) {
    hl_backend_t* backend = device->backend;
    backend->vtable->graph_destroy(backend, cb->graph);
  }
  mtx_destroy(&cb->graph_mutex);
  free(cb);
  hl_device_release(device);
}

//===----------------------------------------------------------------------===//
// Recording
//===----------------------------------------------------------------------===//

// Grows |*items| (|*capacity| elements of |size|) to hold |needed|.
static bool hl_grow(void** items, size_t size, size_t* capacity,
                    size_t needed) {
  if (needed <= *capacity) return true;
  size_t next = *capacity ? *capacity * 2 : 16;
  while (next < needed) next *= 2;
  void* grown = realloc(*items, next * size);
  if (!grown) return false;
  *items = grown;
  *capacity = next;
  return true;
}

static hl_status_t hl_command_check_open(const hl_command_buffer_t* cb,
                                         const char* what) {
  if (!cb) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "%s: command buffer is NULL", what);
  }
  if (cb->finalized) {
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "%s: command buffer %llu is finalized; record before "
                          "hl_command_buffer_finalize",
                          what, (unsigned long long)cb->id);
  }
  return NULL;
}

// Checks |buffer| [offset, +length) for a command |what|.
static hl_status_t hl_command_check_range(const hl_command_buffer_t* cb,
                                          const char* what,
                                          const hl_buffer_t* buffer,
                                          uint64_t offset, uint64_t length) {
  if (!buffer) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "%s: buffer is NULL",
                          what);
  }
  if (buffer->root->device != cb->device) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "%s: buffer (root %llu) belongs to another device "
                          "than command buffer %llu",
                          what, (unsigned long long)buffer->root->id,
                          (unsigned long long)cb->id);
  }
  if (length == 0) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "%s: length is 0", what);
  }
  if (offset > buffer->length || length > buffer->length - offset) {
    return HL_MAKE_STATUS(
        HL_STATUS_OUT_OF_RANGE,
        "%s: range [%llu, +%llu) exceeds the %llu-byte buffer", what,
        (unsigned long long)offset, (unsigned long long)length,
        (unsigned long long)buffer->length);
  }
  return NULL;
}

// Space for one more command, and for |buffers| (|count| of them, NULLs
// skipped) among the retained buffers and their roots, without changing
// anything visible: a later failure leaves the command buffer as it was.
static hl_status_t hl_command_reserve(hl_command_buffer_t* cb,
                                      hl_buffer_t* const* buffers,
                                      uint32_t count) {
  bool ok = hl_grow((void**)&cb->commands, sizeof(*cb->commands),
                    &cb->command_capacity, cb->command_count + 1);
  ok = ok && hl_grow((void**)&cb->buffers, sizeof(*cb->buffers),
                     &cb->buffer_capacity, (size_t)cb->buffer_count + count);
  ok = ok && hl_grow((void**)&cb->roots, sizeof(*cb->roots), &cb->root_capacity,
                     (size_t)cb->root_count + count);
  ok = ok && hl_grow((void**)&cb->root_writes, sizeof(*cb->root_writes),
                     &cb->root_writes_capacity, (size_t)cb->root_count + count);
  if (!ok) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "growing command buffer %llu",
                          (unsigned long long)cb->id);
  }
  return NULL;
}

// Adds |buffer| to the retained set (space reserved) and returns its root's
// index; |write| marks the root written.
static uint32_t hl_command_track(hl_command_buffer_t* cb, hl_buffer_t* buffer,
                                 bool write) {
  bool known = false;
  for (uint32_t i = cb->buffer_count; i-- > 0 && !known;) {
    known = cb->buffers[i] == buffer;
  }
  if (!known) {
    hl_buffer_retain(buffer);
    cb->buffers[cb->buffer_count++] = buffer;
  }
  uint32_t index = 0;
  while (index < cb->root_count && cb->roots[index] != buffer->root) ++index;
  if (index == cb->root_count) {
    cb->roots[cb->root_count] = buffer->root;
    cb->root_writes[cb->root_count] = false;
    ++cb->root_count;
  }
  cb->root_writes[index] |= write;
  return index;
}

static hl_command_t* hl_command_append(hl_command_buffer_t* cb,
                                       hl_command_kind_t kind) {
  hl_command_t* command = &cb->commands[cb->command_count++];
  memset(command, 0, sizeof(*command));
  command->kind = kind;
  ++cb->info.commands;
  return command;
}

hl_status_t hl_command_buffer_fill(hl_command_buffer_t* cb, hl_buffer_t* buffer,
                                   uint64_t offset, uint64_t length,
                                   uint32_t pattern) {
  static const char kWhat[] = "hl_command_buffer_fill";
  HL_RETURN_IF_ERROR_PLAIN(hl_command_check_open(cb, kWhat));
  HL_RETURN_IF_ERROR_PLAIN(
      hl_command_check_range(cb, kWhat, buffer, offset, length));
  if (((buffer->offset + offset) | length) & 3u) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "%s: offset %llu and length %llu must be multiples "
                          "of 4",
                          kWhat, (unsigned long long)(buffer->offset + offset),
                          (unsigned long long)length);
  }
  HL_RETURN_IF_ERROR_PLAIN(hl_command_reserve(cb, &buffer, 1));
  uint32_t root = hl_command_track(cb, buffer, true);
  hl_command_t* command = hl_command_append(cb, HL_COMMAND_FILL);
  command->target = root;
  command->target_offset = buffer->offset + offset;
  command->length = length;
  command->pattern = pattern;
  ++cb->info.fills;
  return NULL;
}

hl_status_t hl_command_buffer_update(hl_command_buffer_t* cb,
                                     const void* host_source,
                                     hl_buffer_t* buffer, uint64_t offset,
                                     uint64_t length) {
  static const char kWhat[] = "hl_command_buffer_update";
  HL_RETURN_IF_ERROR_PLAIN(hl_command_check_open(cb, kWhat));
  if (!host_source) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "%s: host_source is NULL",
                          kWhat);
  }
  HL_RETURN_IF_ERROR_PLAIN(
      hl_command_check_range(cb, kWhat, buffer, offset, length));
  if (length > HL_COMMAND_BUFFER_MAX_UPDATE_SIZE) {
    return HL_MAKE_STATUS(
        HL_STATUS_OUT_OF_RANGE,
        "%s: %llu bytes exceed the %llu-byte update limit "
        "(use hl_queue_write or a copy for more)",
        kWhat, (unsigned long long)length,
        (unsigned long long)HL_COMMAND_BUFFER_MAX_UPDATE_SIZE);
  }
  HL_RETURN_IF_ERROR_PLAIN(hl_command_reserve(cb, &buffer, 1));
  if (!hl_grow((void**)&cb->data, 1, &cb->data_capacity,
               cb->data_size + (size_t)length)) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "%s: holding %llu bytes", kWhat,
                          (unsigned long long)length);
  }
  memcpy(cb->data + cb->data_size, host_source, (size_t)length);
  uint32_t root = hl_command_track(cb, buffer, true);
  hl_command_t* command = hl_command_append(cb, HL_COMMAND_UPDATE);
  command->target = root;
  command->target_offset = buffer->offset + offset;
  command->length = length;
  command->data_offset = cb->data_size;
  cb->data_size += (size_t)length;
  cb->info.update_bytes += length;
  ++cb->info.updates;
  return NULL;
}

hl_status_t hl_command_buffer_copy(hl_command_buffer_t* cb, hl_buffer_t* source,
                                   uint64_t source_offset, hl_buffer_t* target,
                                   uint64_t target_offset, uint64_t length) {
  HL_RETURN_IF_ERROR_PLAIN(hl_command_check_open(cb, "hl_command_buffer_copy"));
  HL_RETURN_IF_ERROR_PLAIN(hl_command_check_range(
      cb, "hl_command_buffer_copy source", source, source_offset, length));
  HL_RETURN_IF_ERROR_PLAIN(hl_command_check_range(
      cb, "hl_command_buffer_copy target", target, target_offset, length));
  hl_buffer_t* buffers[2] = {source, target};
  HL_RETURN_IF_ERROR_PLAIN(hl_command_reserve(cb, buffers, 2));
  uint32_t source_root = hl_command_track(cb, source, false);
  uint32_t target_root = hl_command_track(cb, target, true);
  hl_command_t* command = hl_command_append(cb, HL_COMMAND_COPY);
  command->source = source_root;
  command->source_offset = source->offset + source_offset;
  command->target = target_root;
  command->target_offset = target->offset + target_offset;
  command->length = length;
  ++cb->info.copies;
  return NULL;
}

hl_status_t hl_command_buffer_dispatch(hl_command_buffer_t* cb,
                                       const char* kernel_name,
                                       const hl_dispatch_config_t* config,
                                       size_t arg_count,
                                       const hl_kernel_arg_t* args,
                                       const uint32_t* arg_flags) {
  static const char kWhat[] = "hl_command_buffer_dispatch";
  HL_RETURN_IF_ERROR_PLAIN(hl_command_check_open(cb, kWhat));
  if (!kernel_name) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "%s: kernel_name is NULL",
                          kWhat);
  }
  char owner[48];
  snprintf(owner, sizeof(owner), "command buffer %llu",
           (unsigned long long)cb->id);
  hl_dispatch_call_t call;
  HL_RETURN_IF_ERROR(hl_dispatch_call_init(cb->device, owner, kernel_name,
                                           config, arg_count, args, &call),
                     "%s into %s", kWhat, owner);
  for (uint32_t i = 0; arg_flags && i < call.param_count; ++i) {
    uint32_t flags = arg_flags[i];
    if (flags & ~(uint32_t)HL_COMMAND_ARG_WRITES_WHOLE_RANGE) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "%s: '%s' argument %u: unknown flags 0x%x", kWhat,
                            call.kernel_name, i, flags);
    }
    if (!flags) continue;
    if (!call.roots[i] || !(call.access[i] & HL_ACCESS_WRITE)) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "%s: '%s' argument %u (%s) is flagged "
                            "WRITES_WHOLE_RANGE but is not a buffer with "
                            "write access",
                            kWhat, call.kernel_name, i, call.param_names[i]);
    }
    if (call.extents[i] != call.lengths[i]) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "%s: '%s' argument %u (%s) is flagged "
                            "WRITES_WHOLE_RANGE over %llu bytes but the kernel "
                            "writes %llu",
                            kWhat, call.kernel_name, i, call.param_names[i],
                            (unsigned long long)call.lengths[i],
                            (unsigned long long)call.extents[i]);
    }
  }
  hl_buffer_t* buffers[HL_KERNEL_MAX_PARAMS] = {0};
  for (uint32_t i = 0; i < call.param_count; ++i) {
    if (call.roots[i]) buffers[i] = args[i].buffer;
  }
  HL_RETURN_IF_ERROR_PLAIN(hl_command_reserve(cb, buffers, call.param_count));
  if (!hl_grow((void**)&cb->calls, sizeof(*cb->calls), &cb->call_capacity,
               (size_t)cb->call_count + 1)) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "%s: growing command buffer %llu", kWhat,
                          (unsigned long long)cb->id);
  }
  hl_command_t* command = hl_command_append(cb, HL_COMMAND_DISPATCH);
  command->call = cb->call_count;
  hl_command_call_t* recorded = &cb->calls[cb->call_count++];
  memset(recorded, 0, sizeof(*recorded));
  recorded->call = call;
  for (uint32_t i = 0; i < call.param_count; ++i) {
    if (!buffers[i]) continue;
    recorded->arg_roots[i] =
        1 + hl_command_track(cb, buffers[i],
                             (call.access[i] & HL_ACCESS_WRITE) != 0);
    recorded->arg_flags[i] = arg_flags ? arg_flags[i] : 0;
  }
  ++cb->info.dispatches;
  return NULL;
}

hl_status_t hl_command_buffer_barrier(hl_command_buffer_t* cb) {
  HL_RETURN_IF_ERROR_PLAIN(
      hl_command_check_open(cb, "hl_command_buffer_barrier"));
  HL_RETURN_IF_ERROR_PLAIN(hl_command_reserve(cb, NULL, 0));
  hl_command_append(cb, HL_COMMAND_BARRIER);
  ++cb->info.barriers;
  return NULL;
}

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
    if (!hl_grow((void**)&set->ranges, sizeof(*set->ranges), &set->capacity,
                 set->count + 1)) {
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
      if (!hl_grow((void**)&set->ranges, sizeof(*set->ranges), &set->capacity,
                   set->count + 1)) {
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
    case HL_COMMAND_DISPATCH: {
      const hl_command_call_t* recorded = &cb->calls[command->call];
      const hl_dispatch_call_t* call = &recorded->call;
      for (uint32_t i = 0; i < call->param_count; ++i) {
        if (!recorded->arg_roots[i] ||
            !(recorded->arg_flags[i] & HL_COMMAND_ARG_WRITES_WHOLE_RANGE)) {
          continue;
        }
        if (!hl_dead_add(&dead[recorded->arg_roots[i] - 1], call->offsets[i],
                         call->lengths[i])) {
          return false;
        }
      }
      for (uint32_t i = 0; i < call->param_count; ++i) {
        if (!recorded->arg_roots[i] || !(call->access[i] & HL_ACCESS_READ)) {
          continue;
        }
        if (!hl_dead_remove(&dead[recorded->arg_roots[i] - 1], call->offsets[i],
                            call->lengths[i])) {
          return false;
        }
      }
      return true;
    }
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
           hl_grow((void**)&kept.ranges, sizeof(*kept.ranges), &kept.capacity,
                   kept.count + scratch.count);
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

//===----------------------------------------------------------------------===//
// Execution
//===----------------------------------------------------------------------===//

typedef struct hl_execute_op_t {
  hl_op_t base;
  hl_command_buffer_t* cb;  // Retained.
  uint32_t queue_id;
  uint64_t value;
  hl_stream_work_t work;  // Filled at issue.
} hl_execute_op_t;

static void hl_execute_on_submit(hl_op_t* base, hl_queue_t* queue,
                                 uint64_t value) {
  hl_execute_op_t* op = (hl_execute_op_t*)base;
  op->value = value;
  for (uint32_t i = 0; i < op->cb->root_count; ++i) {
    hl_root_record_use(op->cb->roots[i], queue, value, op->cb->root_writes[i]);
  }
}

// Checks every root; on a violation fails the submission (and, in checked
// mode, the queue) and returns false.
static bool hl_execute_check(hl_execute_op_t* op) {
  for (uint32_t i = 0; i < op->cb->root_count; ++i) {
    char what[128];
    snprintf(what, sizeof(what),
             "command buffer %llu on queue %u (submission %llu)",
             (unsigned long long)op->cb->id, op->queue_id,
             (unsigned long long)op->value);
    if (!hl_root_check_use(op->cb->roots[i], what, op->work.submission,
                           op->work.checked)) {
      return false;
    }
  }
  return true;
}

static char* hl_step_pointer(const hl_command_buffer_t* cb, uint32_t root,
                             uint64_t offset) {
  return (char*)atomic_load(&cb->roots[root]->ptr) + offset;
}

// Enqueues every step of |cb| on |stream|. On failure |*out_failed| is the
// index of the step that failed.
static hl_status_t hl_command_buffer_enqueue_steps(
    const hl_command_buffer_t* cb, hl_backend_t* b, hl_backend_stream_t* stream,
    size_t* out_failed) {
  for (size_t i = 0; i < cb->step_count; ++i) {
    const hl_command_t* step = &cb->steps[i];
    hl_status_t st = NULL;
    switch (step->kind) {
      case HL_COMMAND_FILL:
        st = b->vtable->memset32_async(
            b, hl_step_pointer(cb, step->target, step->target_offset),
            step->pattern, (size_t)(step->length / 4), stream);
        break;
      case HL_COMMAND_UPDATE:
        st = b->vtable->memcpy_async(
            b, hl_step_pointer(cb, step->target, step->target_offset),
            cb->data + step->data_offset, (size_t)step->length, stream);
        break;
      case HL_COMMAND_COPY:
        st = b->vtable->memcpy_async(
            b, hl_step_pointer(cb, step->target, step->target_offset),
            hl_step_pointer(cb, step->source, step->source_offset),
            (size_t)step->length, stream);
        break;
      case HL_COMMAND_DISPATCH:
        st = hl_dispatch_call_launch(b, &cb->calls[step->call].call, stream);
        break;
      case HL_COMMAND_BARRIER:
        break;
    }
    if (st) {
      *out_failed = i;
      return st;
    }
  }
  return NULL;
}

// Whether a graph can hold every step: an update copies from host memory,
// which the backend may stage through pinned chunks and host functions, so
// a command buffer with one replays on the stream instead.
static bool hl_command_buffer_graphable(const hl_command_buffer_t* cb) {
  for (size_t i = 0; i < cb->step_count; ++i) {
    if (cb->steps[i].kind == HL_COMMAND_UPDATE) return false;
  }
  return true;
}

static hl_status_t hl_command_buffer_record_graph(void* user,
                                                  hl_backend_stream_t* stream) {
  hl_command_buffer_t* cb = (hl_command_buffer_t*)user;
  size_t failed = 0;
  return hl_command_buffer_enqueue_steps(cb, cb->device->backend, stream,
                                         &failed);
}

// |cb|'s graph, built on first use; NULL when the backend has none or it
// cannot be built (the caller replays the steps then). The roots are live
// (hl_execute_check), so their addresses are final.
static hl_backend_graph_t* hl_command_buffer_graph(hl_command_buffer_t* cb,
                                                   hl_backend_t* b) {
  if (!b->vtable->graph_capture) return NULL;
  mtx_lock(&cb->graph_mutex);
  if (!cb->graph_tried) {
    cb->graph_tried = true;
    if (hl_command_buffer_graphable(cb)) {
      hl_status_t st = b->vtable->graph_capture(
          b, hl_command_buffer_record_graph, cb, &cb->graph);
      if (st) {
        HL_LOG_INFO("command buffer %llu replays on the stream: %s",
                    (unsigned long long)cb->id, hl_status_message(st));
        hl_status_free(st);
      }
    }
  }
  hl_backend_graph_t* graph = cb->graph;
  mtx_unlock(&cb->graph_mutex);
  return graph;
}

// The stream work: check the roots, then launch the graph or enqueue every
// step.
static hl_status_t hl_execute_run(void* user) {
  hl_execute_op_t* op = (hl_execute_op_t*)user;
  if (!hl_execute_check(op)) return NULL;
  hl_backend_t* b = op->work.backend;
  hl_command_buffer_t* cb = op->cb;
  hl_backend_graph_t* graph = hl_command_buffer_graph(cb, b);
  hl_status_t st = NULL;
  size_t failed = 0;
  if (graph) {
    st = b->vtable->graph_launch(b, graph, op->work.stream);
    if (st) {
      st = hl_status_annotate(st, "the graph of command buffer %llu",
                              (unsigned long long)cb->id);
    }
  } else {
    st = hl_command_buffer_enqueue_steps(cb, b, op->work.stream, &failed);
    if (st) {
      st = hl_status_annotate(st, "command %zu of command buffer %llu", failed,
                              (unsigned long long)cb->id);
    }
  }
  // Every step but a barrier writes device memory.
  return st ? hl_stream_work_write_failed(&op->work, st) : NULL;
}

static hl_status_t hl_execute_issue(hl_op_t* base, hl_issue_ctx_t* ctx) {
  hl_execute_op_t* op = (hl_execute_op_t*)base;
  hl_stream_work_bind(&op->work, ctx);
  return hl_stream_work_issue(ctx, &op->work.gate, hl_execute_run, op, false);
}

static void hl_execute_release(hl_op_t* base, hl_status_t status) {
  (void)status;
  hl_execute_op_t* op = (hl_execute_op_t*)base;
  for (uint32_t i = 0; i < op->cb->root_count; ++i) {
    hl_root_release_for_op(op->cb->roots[i]);
  }
  hl_command_buffer_release(op->cb);
  free(op);
}

static const hl_op_vtable_t hl_execute_vtable = {
    .issue = hl_execute_issue,
    .release = hl_execute_release,
    .on_submit = hl_execute_on_submit,
};

hl_status_t hl_queue_execute(hl_queue_t* queue, const hl_fence_t* wait_fence,
                             const hl_fence_t* signal_fence,
                             hl_command_buffer_t* cb) {
  if (!queue || !cb) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_execute: queue or command buffer is NULL");
  }
  if (!cb->finalized) {
    return HL_MAKE_STATUS(HL_STATUS_FAILED_PRECONDITION,
                          "hl_queue_execute: command buffer %llu is not "
                          "finalized; call hl_command_buffer_finalize first",
                          (unsigned long long)cb->id);
  }
  hl_device_t* device = hl_queue_device(queue);
  if (device != cb->device) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_queue_execute: command buffer %llu belongs to "
                          "another device than queue %u",
                          (unsigned long long)cb->id, hl_queue_id(queue));
  }
  HL_TRACE_ZONE_BEGIN(zone, "hl_queue_execute");
  hl_execute_op_t* op = calloc(1, sizeof(*op));
  if (!op) {
    HL_TRACE_ZONE_END(zone);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating an execution of command buffer %llu",
                          (unsigned long long)cb->id);
  }
  uint32_t queue_id = hl_queue_id(queue);
  op->base.vtable = &hl_execute_vtable;
  op->queue_id = queue_id;
  hl_command_buffer_retain(cb);
  op->cb = cb;
  for (uint32_t i = 0; i < cb->root_count; ++i) {
    hl_root_retain_for_op(cb->roots[i]);
  }
  hl_status_t st =
      hl_queue_submit(queue, wait_fence, signal_fence, &op->base, NULL);
  if (!st) {
    // |op| may already be released; |cb| is the caller's.
    hl_memory_note_elision(device, queue_id, cb->info.fills_elided,
                           cb->info.fills_shrunk, cb->info.fill_bytes_elided);
  }
  HL_TRACE_ZONE_END(zone);
  return st;
}
