// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Parser for RMM logging_resource_adaptor CSV logs; see replay_log.h for the
// format and the policies.
#include "replay_log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A line may hold at most this many fields; RMM writes six.
#define HL_REPLAY_MAX_FIELDS 32
// Error messages quote at most this many characters of a field.
#define HL_REPLAY_QUOTE_MAX 40

static const char kHlReplayHeader[] = "Thread,Time,Action,Pointer,Size,Stream";

// The columns the parser needs, in RMM's order.
typedef enum hl_replay_column_e {
  HL_REPLAY_COLUMN_THREAD = 0,
  HL_REPLAY_COLUMN_TIME,
  HL_REPLAY_COLUMN_ACTION,
  HL_REPLAY_COLUMN_POINTER,
  HL_REPLAY_COLUMN_SIZE,
  HL_REPLAY_COLUMN_STREAM,
  HL_REPLAY_COLUMN_COUNT,
} hl_replay_column_t;

static const char* const kHlReplayColumnNames[HL_REPLAY_COLUMN_COUNT] = {
    "Thread", "Time", "Action", "Pointer", "Size", "Stream",
};

typedef enum hl_replay_number_e {
  HL_REPLAY_NUMBER_OK = 0,
  HL_REPLAY_NUMBER_INVALID,
  HL_REPLAY_NUMBER_OVERFLOW,
} hl_replay_number_t;

// A field of a line: a span of the input, not NUL-terminated.
typedef struct hl_replay_field_t {
  const char* data;
  size_t length;
} hl_replay_field_t;

//===----------------------------------------------------------------------===//
// uint64 -> (value, size, line) open-addressing hash map
//===----------------------------------------------------------------------===//

typedef struct hl_replay_map_entry_t {
  uint64_t key;
  uint64_t size;
  uint32_t value;
  uint32_t line;
  uint32_t used;
} hl_replay_map_entry_t;

// Linear probing with backward-shift deletion, so frees leave no tombstones
// and a long log with heavy address reuse keeps short probe chains.
typedef struct hl_replay_map_t {
  hl_replay_map_entry_t* entries;
  size_t capacity;  // Zero or a power of two.
  size_t count;
} hl_replay_map_t;

static uint64_t hl_replay_hash(uint64_t key) {
  // splitmix64 finalizer: addresses share low zero bits and high prefixes.
  key ^= key >> 30;
  key *= UINT64_C(0xbf58476d1ce4e5b9);
  key ^= key >> 27;
  key *= UINT64_C(0x94d049bb133111eb);
  key ^= key >> 31;
  return key;
}

static void hl_replay_map_deinitialize(hl_replay_map_t* map) {
  free(map->entries);
  memset(map, 0, sizeof(*map));
}

static hl_replay_map_entry_t* hl_replay_map_find(const hl_replay_map_t* map,
                                                 uint64_t key) {
  if (map->capacity == 0) return NULL;
  size_t mask = map->capacity - 1;
  for (size_t i = (size_t)hl_replay_hash(key) & mask;; i = (i + 1) & mask) {
    hl_replay_map_entry_t* entry = &map->entries[i];
    if (!entry->used) return NULL;
    if (entry->key == key) return entry;
  }
}

static bool hl_replay_map_grow(hl_replay_map_t* map) {
  size_t new_capacity = map->capacity ? map->capacity * 2 : 64;
  if (new_capacity < map->capacity ||
      new_capacity > SIZE_MAX / sizeof(hl_replay_map_entry_t)) {
    return false;
  }
  hl_replay_map_entry_t* entries =
      calloc(new_capacity, sizeof(hl_replay_map_entry_t));
  if (!entries) return false;
  size_t mask = new_capacity - 1;
  for (size_t i = 0; i < map->capacity; ++i) {
    const hl_replay_map_entry_t* old = &map->entries[i];
    if (!old->used) continue;
    size_t j = (size_t)hl_replay_hash(old->key) & mask;
    while (entries[j].used) j = (j + 1) & mask;
    entries[j] = *old;
  }
  free(map->entries);
  map->entries = entries;
  map->capacity = new_capacity;
  return true;
}

// Inserts |key|, which must be absent. Returns the new entry, or NULL when
// memory runs out.
static hl_replay_map_entry_t* hl_replay_map_insert(hl_replay_map_t* map,
                                                   uint64_t key) {
  // Keep the load at or below one half.
  if ((map->count + 1) * 2 > map->capacity && !hl_replay_map_grow(map)) {
    return NULL;
  }
  size_t mask = map->capacity - 1;
  size_t i = (size_t)hl_replay_hash(key) & mask;
  while (map->entries[i].used) i = (i + 1) & mask;
  hl_replay_map_entry_t* entry = &map->entries[i];
  memset(entry, 0, sizeof(*entry));
  entry->key = key;
  entry->used = 1;
  ++map->count;
  return entry;
}

static void hl_replay_map_remove(hl_replay_map_t* map,
                                 hl_replay_map_entry_t* entry) {
  size_t mask = map->capacity - 1;
  size_t hole = (size_t)(entry - map->entries);
  size_t j = hole;
  for (;;) {
    j = (j + 1) & mask;
    hl_replay_map_entry_t* next = &map->entries[j];
    if (!next->used) break;
    size_t home = (size_t)hl_replay_hash(next->key) & mask;
    // |next| may move into the hole only if its home is not cyclically in
    // (hole, j]; otherwise a lookup from its home would stop at the hole.
    bool stays =
        hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    map->entries[hole] = *next;
    hole = j;
  }
  map->entries[hole].used = 0;
  --map->count;
}

//===----------------------------------------------------------------------===//
// Field parsing
//===----------------------------------------------------------------------===//

static bool hl_replay_is_blank(char c) { return c == ' ' || c == '\t'; }

static hl_replay_field_t hl_replay_trim(const char* data, size_t length) {
  while (length > 0 && hl_replay_is_blank(data[0])) {
    ++data;
    --length;
  }
  while (length > 0 && hl_replay_is_blank(data[length - 1])) --length;
  hl_replay_field_t field = {data, length};
  return field;
}

static bool hl_replay_field_equals(hl_replay_field_t field, const char* text) {
  size_t length = strlen(text);
  return field.length == length && memcmp(field.data, text, length) == 0;
}

// Copies at most HL_REPLAY_QUOTE_MAX characters of |field| into |buffer| for
// an error message, replacing unprintable bytes and marking truncation.
static const char* hl_replay_quote(hl_replay_field_t field, char* buffer,
                                   size_t capacity) {
  size_t n =
      field.length < HL_REPLAY_QUOTE_MAX ? field.length : HL_REPLAY_QUOTE_MAX;
  if (n + 4 > capacity) n = capacity - 4;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = (unsigned char)field.data[i];
    buffer[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  }
  if (n < field.length) {
    memcpy(buffer + n, "...", 4);
  } else {
    buffer[n] = '\0';
  }
  return buffer;
}

static bool hl_replay_is_digit(char c) { return c >= '0' && c <= '9'; }

static hl_replay_number_t hl_replay_parse_decimal(hl_replay_field_t field,
                                                  uint64_t* out_value) {
  if (field.length == 0) return HL_REPLAY_NUMBER_INVALID;
  uint64_t value = 0;
  for (size_t i = 0; i < field.length; ++i) {
    if (!hl_replay_is_digit(field.data[i])) return HL_REPLAY_NUMBER_INVALID;
    uint64_t digit = (uint64_t)(field.data[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) {
      // Keep scanning so that "99...9x" reports the bad character, not size.
      for (size_t k = i + 1; k < field.length; ++k) {
        if (!hl_replay_is_digit(field.data[k])) return HL_REPLAY_NUMBER_INVALID;
      }
      return HL_REPLAY_NUMBER_OVERFLOW;
    }
    value = value * 10 + digit;
  }
  *out_value = value;
  return HL_REPLAY_NUMBER_OK;
}

static int hl_replay_hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses hexadecimal digits, with or without a 0x prefix.
static hl_replay_number_t hl_replay_parse_hex(hl_replay_field_t field,
                                              uint64_t* out_value) {
  if (field.length >= 2 && field.data[0] == '0' &&
      (field.data[1] == 'x' || field.data[1] == 'X')) {
    field.data += 2;
    field.length -= 2;
  }
  if (field.length == 0) return HL_REPLAY_NUMBER_INVALID;
  uint64_t value = 0;
  bool overflow = false;
  for (size_t i = 0; i < field.length; ++i) {
    int digit = hl_replay_hex_digit(field.data[i]);
    if (digit < 0) return HL_REPLAY_NUMBER_INVALID;
    if (value > (UINT64_MAX >> 4)) overflow = true;
    value = (value << 4) | (uint64_t)digit;
  }
  if (overflow) return HL_REPLAY_NUMBER_OVERFLOW;
  *out_value = value;
  return HL_REPLAY_NUMBER_OK;
}

// Parses a pointer or stream: "(nil)" is 0, "0x..." is hexadecimal and, when
// |bare_hex| is set, so are bare digits; otherwise bare digits are decimal.
static hl_replay_number_t hl_replay_parse_handle(hl_replay_field_t field,
                                                 bool bare_hex,
                                                 uint64_t* out_value) {
  if (hl_replay_field_equals(field, "(nil)")) {
    *out_value = 0;
    return HL_REPLAY_NUMBER_OK;
  }
  bool prefixed = field.length >= 2 && field.data[0] == '0' &&
                  (field.data[1] == 'x' || field.data[1] == 'X');
  if (prefixed || bare_hex) return hl_replay_parse_hex(field, out_value);
  return hl_replay_parse_decimal(field, out_value);
}

// Parses "H:MM:SS[.f]" (hours unbounded) or "S[.f]" into nanoseconds.
static hl_replay_number_t hl_replay_parse_time(hl_replay_field_t field,
                                               uint64_t* out_ns) {
  const char* s = field.data;
  size_t n = field.length;
  size_t i = 0;
  uint64_t parts[3] = {0, 0, 0};
  size_t part_count = 0;
  for (;;) {
    size_t start = i;
    uint64_t value = 0;
    bool overflow = false;
    for (; i < n && hl_replay_is_digit(s[i]); ++i) {
      uint64_t digit = (uint64_t)(s[i] - '0');
      if (value > (UINT64_MAX - digit) / 10) overflow = true;
      value = value * 10 + digit;
    }
    if (i == start) return HL_REPLAY_NUMBER_INVALID;
    if (overflow) value = UINT64_MAX;
    parts[part_count++] = value;
    if (i < n && s[i] == ':' && part_count < 3) {
      ++i;
      continue;
    }
    break;
  }
  if (part_count == 2) return HL_REPLAY_NUMBER_INVALID;
  uint64_t fraction_ns = 0;
  if (i < n && s[i] == '.') {
    ++i;
    size_t start = i;
    uint64_t scale = 100000000;
    for (; i < n && hl_replay_is_digit(s[i]); ++i) {
      // Digits past nanoseconds are dropped.
      fraction_ns += (uint64_t)(s[i] - '0') * scale;
      scale /= 10;
    }
    if (i == start) return HL_REPLAY_NUMBER_INVALID;
  }
  if (i != n) return HL_REPLAY_NUMBER_INVALID;
  uint64_t seconds = parts[0];
  if (part_count == 3) {
    if (parts[1] >= 60 || parts[2] >= 61) return HL_REPLAY_NUMBER_INVALID;
    uint64_t rest = parts[1] * 60 + parts[2];
    if (parts[0] > (UINT64_MAX - rest) / 3600) return HL_REPLAY_NUMBER_OVERFLOW;
    seconds = parts[0] * 3600 + rest;
  }
  if (seconds > (UINT64_MAX - fraction_ns) / UINT64_C(1000000000)) {
    return HL_REPLAY_NUMBER_OVERFLOW;
  }
  *out_ns = seconds * UINT64_C(1000000000) + fraction_ns;
  return HL_REPLAY_NUMBER_OK;
}

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

typedef struct hl_replay_parser_t {
  const char* name;
  hl_replay_log_flags_t flags;
  uint64_t line;
  // Field index of each column, and the number of fields a line must have.
  size_t columns[HL_REPLAY_COLUMN_COUNT];
  size_t field_count;
  bool have_header;
  // Live pointers: key pointer, value lifetime id, size and line.
  hl_replay_map_t pointers;
  // Streams and threads: key as logged, value dense index.
  hl_replay_map_t streams;
  hl_replay_map_t threads;
  uint64_t live_bytes;
  size_t event_capacity;
  hl_replay_log_t* log;
} hl_replay_parser_t;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static hl_status_t
hl_replay_parser_error(const hl_replay_parser_t* parser, const char* format,
                       ...) {
  char what[512];
  va_list args;
  va_start(args, format);
  vsnprintf(what, sizeof(what), format, args);
  va_end(args);
  return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "%s:%" PRIu64 ": %s",
                        parser->name, parser->line, what);
}

static hl_status_t hl_replay_parser_out_of_memory(
    const hl_replay_parser_t* parser, const char* what) {
  return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                        "%s:%" PRIu64 ": out of memory growing the %s",
                        parser->name, parser->line, what);
}

// Splits |line| at commas into |fields|; returns the count, or
// HL_REPLAY_MAX_FIELDS + 1 when there are more.
static size_t hl_replay_split(const char* line, size_t length,
                              hl_replay_field_t* fields) {
  size_t count = 0;
  size_t start = 0;
  for (size_t i = 0; i <= length; ++i) {
    if (i < length && line[i] != ',') continue;
    if (count == HL_REPLAY_MAX_FIELDS) return HL_REPLAY_MAX_FIELDS + 1;
    fields[count++] = hl_replay_trim(line + start, i - start);
    start = i + 1;
  }
  return count;
}

static hl_status_t hl_replay_parser_header(hl_replay_parser_t* parser,
                                           const hl_replay_field_t* fields,
                                           size_t field_count, const char* line,
                                           size_t length) {
  char quoted[HL_REPLAY_QUOTE_MAX + 8];
  bool seen[HL_REPLAY_COLUMN_COUNT] = {false};
  size_t matched = 0;
  for (size_t i = 0; i < field_count; ++i) {
    for (int c = 0; c < HL_REPLAY_COLUMN_COUNT; ++c) {
      if (!hl_replay_field_equals(fields[i], kHlReplayColumnNames[c])) continue;
      if (seen[c]) {
        return hl_replay_parser_error(parser, "header names column '%s' twice",
                                      kHlReplayColumnNames[c]);
      }
      seen[c] = true;
      parser->columns[c] = i;
      ++matched;
    }
  }
  if (matched == 0) {
    hl_replay_field_t whole = {line, length};
    return hl_replay_parser_error(
        parser, "expected the header '%s', got '%s' (is the header missing?)",
        kHlReplayHeader, hl_replay_quote(whole, quoted, sizeof(quoted)));
  }
  for (int c = 0; c < HL_REPLAY_COLUMN_COUNT; ++c) {
    if (!seen[c]) {
      return hl_replay_parser_error(
          parser, "header lacks the column '%s' (expected '%s')",
          kHlReplayColumnNames[c], kHlReplayHeader);
    }
  }
  parser->field_count = field_count;
  parser->have_header = true;
  return hl_ok_status();
}

// Returns the dense index of |key| in |map|, adding it as |*counter|++.
static hl_status_t hl_replay_parser_intern(hl_replay_parser_t* parser,
                                           hl_replay_map_t* map, uint64_t key,
                                           uint32_t* counter,
                                           uint32_t* out_index) {
  hl_replay_map_entry_t* entry = hl_replay_map_find(map, key);
  if (!entry) {
    entry = hl_replay_map_insert(map, key);
    if (!entry) return hl_replay_parser_out_of_memory(parser, "id table");
    entry->value = (*counter)++;
  }
  *out_index = entry->value;
  return hl_ok_status();
}

static hl_status_t hl_replay_parser_push(hl_replay_parser_t* parser,
                                         const hl_replay_event_t* event) {
  hl_replay_log_t* log = parser->log;
  if (log->event_count >= UINT32_MAX) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "%s:%" PRIu64 ": more than %" PRIu32
                          " events; ids are 32-bit",
                          parser->name, parser->line, UINT32_MAX);
  }
  if (log->event_count == parser->event_capacity) {
    size_t capacity = parser->event_capacity ? parser->event_capacity * 2 : 256;
    if (capacity > SIZE_MAX / sizeof(hl_replay_event_t)) {
      return hl_replay_parser_out_of_memory(parser, "event array");
    }
    hl_replay_event_t* events =
        realloc(log->events, capacity * sizeof(hl_replay_event_t));
    if (!events) return hl_replay_parser_out_of_memory(parser, "event array");
    log->events = events;
    parser->event_capacity = capacity;
  }
  log->events[log->event_count++] = *event;
  return hl_ok_status();
}

typedef enum hl_replay_action_e {
  HL_REPLAY_ACTION_ALLOCATE,
  HL_REPLAY_ACTION_FREE,
  HL_REPLAY_ACTION_FAILURE,
} hl_replay_action_t;

static hl_status_t hl_replay_parser_event(hl_replay_parser_t* parser,
                                          const hl_replay_field_t* fields,
                                          size_t field_count) {
  char quoted[HL_REPLAY_QUOTE_MAX + 8];
  if (field_count != parser->field_count) {
    if (field_count > HL_REPLAY_MAX_FIELDS) {
      return hl_replay_parser_error(parser,
                                    "expected %zu fields, got more than %d",
                                    parser->field_count, HL_REPLAY_MAX_FIELDS);
    }
    return hl_replay_parser_error(parser, "expected %zu fields, got %zu",
                                  parser->field_count, field_count);
  }
  hl_replay_field_t action_field =
      fields[parser->columns[HL_REPLAY_COLUMN_ACTION]];
  hl_replay_action_t action;
  if (hl_replay_field_equals(action_field, "allocate")) {
    action = HL_REPLAY_ACTION_ALLOCATE;
  } else if (hl_replay_field_equals(action_field, "free") ||
             hl_replay_field_equals(action_field, "deallocate")) {
    action = HL_REPLAY_ACTION_FREE;
  } else if (hl_replay_field_equals(action_field, "allocate failure")) {
    action = HL_REPLAY_ACTION_FAILURE;
  } else {
    return hl_replay_parser_error(
        parser, "Action '%s' is not allocate, free or allocate failure",
        hl_replay_quote(action_field, quoted, sizeof(quoted)));
  }

  hl_replay_field_t field = fields[parser->columns[HL_REPLAY_COLUMN_THREAD]];
  uint64_t thread = 0;
  hl_replay_number_t result = hl_replay_parse_handle(field, false, &thread);
  if (result != HL_REPLAY_NUMBER_OK) {
    return hl_replay_parser_error(
        parser, "Thread '%s' %s",
        hl_replay_quote(field, quoted, sizeof(quoted)),
        result == HL_REPLAY_NUMBER_OVERFLOW ? "does not fit in 64 bits"
                                            : "is not a number");
  }

  field = fields[parser->columns[HL_REPLAY_COLUMN_TIME]];
  uint64_t time_ns = 0;
  result = hl_replay_parse_time(field, &time_ns);
  if (result != HL_REPLAY_NUMBER_OK) {
    return hl_replay_parser_error(
        parser, "Time '%s' %s", hl_replay_quote(field, quoted, sizeof(quoted)),
        result == HL_REPLAY_NUMBER_OVERFLOW
            ? "does not fit in 64-bit nanoseconds"
            : "is not H:MM:SS.ffffff or seconds");
  }

  field = fields[parser->columns[HL_REPLAY_COLUMN_POINTER]];
  uint64_t pointer = 0;
  result = hl_replay_parse_handle(field, true, &pointer);
  if (result != HL_REPLAY_NUMBER_OK) {
    return hl_replay_parser_error(
        parser, "Pointer '%s' %s",
        hl_replay_quote(field, quoted, sizeof(quoted)),
        result == HL_REPLAY_NUMBER_OVERFLOW
            ? "does not fit in 64 bits"
            : "is not a hexadecimal address or (nil)");
  }

  field = fields[parser->columns[HL_REPLAY_COLUMN_SIZE]];
  uint64_t size = 0;
  result = hl_replay_parse_decimal(field, &size);
  if (result != HL_REPLAY_NUMBER_OK) {
    return hl_replay_parser_error(
        parser, "Size '%s' %s", hl_replay_quote(field, quoted, sizeof(quoted)),
        result == HL_REPLAY_NUMBER_OVERFLOW ? "does not fit in 64 bits"
                                            : "is not a number");
  }

  field = fields[parser->columns[HL_REPLAY_COLUMN_STREAM]];
  uint64_t stream = 0;
  result = hl_replay_parse_handle(field, false, &stream);
  if (result != HL_REPLAY_NUMBER_OK) {
    return hl_replay_parser_error(
        parser, "Stream '%s' %s",
        hl_replay_quote(field, quoted, sizeof(quoted)),
        result == HL_REPLAY_NUMBER_OVERFLOW ? "does not fit in 64 bits"
                                            : "is not a number or (nil)");
  }

  hl_replay_log_t* log = parser->log;
  if (action == HL_REPLAY_ACTION_FAILURE) {
    ++log->failure_count;
    return hl_ok_status();
  }
  if (pointer == 0) {
    if (action == HL_REPLAY_ACTION_ALLOCATE && size != 0) {
      return hl_replay_parser_error(
          parser, "allocate of %" PRIu64 " bytes has a null Pointer", size);
    }
    ++log->null_count;
    return hl_ok_status();
  }

  hl_replay_event_t event;
  memset(&event, 0, sizeof(event));
  event.time_ns = time_ns;
  event.line = parser->line > UINT32_MAX ? UINT32_MAX : (uint32_t)parser->line;
  hl_replay_map_entry_t* live = hl_replay_map_find(&parser->pointers, pointer);
  if (action == HL_REPLAY_ACTION_ALLOCATE) {
    if (live) {
      return hl_replay_parser_error(
          parser,
          "Pointer 0x%" PRIx64
          " is allocated again while live (allocated at "
          "line %" PRIu32 " and never freed)",
          pointer, live->line);
    }
    if (size > UINT64_MAX - parser->live_bytes) {
      return hl_replay_parser_error(parser,
                                    "live bytes overflow 64 bits (%" PRIu64
                                    " live + %" PRIu64 ")",
                                    parser->live_bytes, size);
    }
    if (log->slot_count == UINT32_MAX) {
      return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                            "%s:%" PRIu64 ": more than %" PRIu32
                            " allocations; ids are 32-bit",
                            parser->name, parser->line, UINT32_MAX);
    }
    event.op = HL_REPLAY_OP_ALLOC;
    event.size = size;
    event.id = log->slot_count;
  } else {
    if (!live) {
      if (parser->flags & HL_REPLAY_LOG_FLAG_STRICT) {
        return hl_replay_parser_error(
            parser, "free of Pointer 0x%" PRIx64 " that is not live", pointer);
      }
      ++log->unknown_free_count;
      return hl_ok_status();
    }
    if (live->size != size) {
      if (parser->flags & HL_REPLAY_LOG_FLAG_STRICT) {
        return hl_replay_parser_error(parser,
                                      "free of Pointer 0x%" PRIx64
                                      " has Size %" PRIu64 " but line %" PRIu32
                                      " allocated %" PRIu64,
                                      pointer, size, live->line, live->size);
      }
      ++log->size_mismatch_count;
    }
    event.op = HL_REPLAY_OP_FREE;
    event.size = live->size;
    event.id = live->value;
  }
  HL_RETURN_IF_ERROR_PLAIN(hl_replay_parser_intern(
      parser, &parser->streams, stream, &log->stream_count, &event.stream));
  HL_RETURN_IF_ERROR_PLAIN(hl_replay_parser_intern(
      parser, &parser->threads, thread, &log->thread_count, &event.thread));
  HL_RETURN_IF_ERROR_PLAIN(hl_replay_parser_push(parser, &event));

  if (event.op == HL_REPLAY_OP_ALLOC) {
    hl_replay_map_entry_t* entry =
        hl_replay_map_insert(&parser->pointers, pointer);
    if (!entry) return hl_replay_parser_out_of_memory(parser, "pointer table");
    entry->value = event.id;
    entry->size = size;
    entry->line = event.line;
    ++log->slot_count;
    parser->live_bytes += size;
  } else {
    parser->live_bytes -= live->size;
    hl_replay_map_remove(&parser->pointers, live);
  }
  return hl_ok_status();
}

static hl_status_t hl_replay_parser_run(hl_replay_parser_t* parser,
                                        const char* text, size_t size) {
  size_t pos = 0;
  if (size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) pos = 3;
  hl_replay_field_t fields[HL_REPLAY_MAX_FIELDS];
  while (pos < size) {
    const char* line = text + pos;
    const char* newline = memchr(line, '\n', size - pos);
    size_t length = newline ? (size_t)(newline - line) : size - pos;
    pos += length + (newline ? 1 : 0);
    ++parser->line;
    if (length > 0 && line[length - 1] == '\r') --length;
    hl_replay_field_t whole = hl_replay_trim(line, length);
    if (whole.length == 0) continue;
    size_t field_count = hl_replay_split(whole.data, whole.length, fields);
    if (!parser->have_header) {
      if (field_count > HL_REPLAY_MAX_FIELDS) {
        return hl_replay_parser_error(parser, "header has more than %d fields",
                                      HL_REPLAY_MAX_FIELDS);
      }
      HL_RETURN_IF_ERROR_PLAIN(hl_replay_parser_header(
          parser, fields, field_count, whole.data, whole.length));
    } else {
      HL_RETURN_IF_ERROR_PLAIN(
          hl_replay_parser_event(parser, fields, field_count));
    }
  }
  parser->log->line_count = parser->line;
  if (!parser->have_header) {
    parser->line = parser->line ? parser->line : 1;
    return hl_replay_parser_error(
        parser, "log is empty; expected the header '%s'", kHlReplayHeader);
  }
  return hl_ok_status();
}

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

void hl_replay_log_initialize(hl_replay_log_t* log) {
  memset(log, 0, sizeof(*log));
}

void hl_replay_log_deinitialize(hl_replay_log_t* log) {
  if (!log) return;
  free(log->events);
  memset(log, 0, sizeof(*log));
}

hl_status_t hl_replay_log_parse_buffer(const char* text, size_t size,
                                       const char* name,
                                       hl_replay_log_flags_t flags,
                                       hl_replay_log_t* out_log) {
  if (!out_log) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "out_log is NULL");
  }
  hl_replay_log_initialize(out_log);
  if (!name) name = "<buffer>";
  if (!text && size != 0) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "%s: text is NULL but size is %zu", name, size);
  }
  hl_replay_parser_t parser;
  memset(&parser, 0, sizeof(parser));
  parser.name = name;
  parser.flags = flags;
  parser.log = out_log;
  hl_status_t status = hl_replay_parser_run(&parser, text ? text : "", size);
  hl_replay_map_deinitialize(&parser.pointers);
  hl_replay_map_deinitialize(&parser.streams);
  hl_replay_map_deinitialize(&parser.threads);
  if (status) {
    hl_replay_log_deinitialize(out_log);
    return status;
  }
  if (out_log->event_count < parser.event_capacity && out_log->event_count) {
    // Give back the growth slack; a failed shrink keeps the larger block.
    hl_replay_event_t* events = realloc(
        out_log->events, out_log->event_count * sizeof(hl_replay_event_t));
    if (events) out_log->events = events;
  }
  return hl_ok_status();
}

hl_status_t hl_replay_log_parse_file(const char* path,
                                     hl_replay_log_flags_t flags,
                                     hl_replay_log_t* out_log) {
  if (!out_log) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "out_log is NULL");
  }
  hl_replay_log_initialize(out_log);
  if (!path) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT, "path is NULL");
  }
  FILE* file = fopen(path, "rb");
  if (!file) {
    int error = errno;
    return HL_MAKE_STATUS(
        error == ENOENT ? HL_STATUS_NOT_FOUND : HL_STATUS_INVALID_ARGUMENT,
        "%s: cannot open the replay log: %s", path, strerror(error));
  }
  // Read in growing chunks rather than trusting ftell, so pipes work too.
  char* text = NULL;
  size_t size = 0;
  size_t capacity = 0;
  hl_status_t status = hl_ok_status();
  for (;;) {
    if (size == capacity) {
      size_t new_capacity = capacity ? capacity * 2 : (size_t)1 << 16;
      char* grown =
          new_capacity > capacity ? realloc(text, new_capacity) : NULL;
      if (!grown) {
        status =
            HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                           "%s: out of memory reading %zu bytes", path, size);
        break;
      }
      text = grown;
      capacity = new_capacity;
    }
    size_t n = fread(text + size, 1, capacity - size, file);
    size += n;
    if (n == 0) {
      if (ferror(file)) {
        int error = errno;
        status = HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                                "%s: reading the replay log failed: %s", path,
                                strerror(error));
      }
      break;
    }
  }
  fclose(file);
  if (!status) {
    status = hl_replay_log_parse_buffer(text, size, path, flags, out_log);
  }
  free(text);
  return status;
}

void hl_replay_log_summarize(const hl_replay_log_t* log,
                             hl_replay_summary_t* out_summary) {
  memset(out_summary, 0, sizeof(*out_summary));
  uint64_t live_bytes = 0;
  uint64_t live_count = 0;
  for (size_t i = 0; i < log->event_count; ++i) {
    const hl_replay_event_t* event = &log->events[i];
    if (event->op == HL_REPLAY_OP_ALLOC) {
      ++out_summary->alloc_count;
      live_bytes += event->size;
      ++live_count;
      if (event->size > UINT64_MAX - out_summary->total_alloc_bytes) {
        out_summary->total_alloc_bytes = UINT64_MAX;
      } else {
        out_summary->total_alloc_bytes += event->size;
      }
      if (event->size > out_summary->max_alloc_bytes) {
        out_summary->max_alloc_bytes = event->size;
      }
      if (live_bytes > out_summary->peak_live_bytes) {
        out_summary->peak_live_bytes = live_bytes;
      }
      if (live_count > out_summary->peak_live_count) {
        out_summary->peak_live_count = live_count;
      }
    } else {
      ++out_summary->free_count;
      live_bytes -= event->size;
      --live_count;
    }
  }
  out_summary->never_freed_count = live_count;
  out_summary->never_freed_bytes = live_bytes;
}
