// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Allocation-log replay input: a parser for the CSV that RMM's
// `rmm::mr::logging_resource_adaptor` writes, turned into a dense event array
// that a benchmark can replay through an allocator.
//
// The format, as RMM writes it (one header line, then one line per event):
//
//   Thread,Time,Action,Pointer,Size,Stream
//   140573312345856,14:02:11.123456,allocate,0x7f8a40000000,1024,0x55d0c0
//   140573312345856,14:02:11.234567,free,0x7f8a40000000,1024,0x55d0c0
//   140573312345856,14:02:11.345678,allocate failure,(nil),1099511627776,0
//
// - Thread is the decimal OS thread id (spdlog `%t`).
// - Time is `H:MM:SS.ffffff` (spdlog `%H:%M:%S.%f`; hours may exceed 23, as
//   tools/hipline-trace-convert writes elapsed time) or plain seconds with an
//   optional fraction (`1634567890.123456`). Up to nine fraction digits are
//   kept; the result is in nanoseconds.
// - Action is `allocate`, `free` or `allocate failure`. `deallocate` is
//   accepted as a synonym of `free` (RMM's user guide shows it).
// - Pointer is hexadecimal with or without `0x`, or `(nil)` for null.
// - Size is a decimal byte count that must fit in 64 bits.
// - Stream is hexadecimal with `0x`, decimal, or `(nil)`.
//
// The header is required (a file without one is rejected, naming line 1), but
// its columns may come in any order and extra columns are ignored. Blank lines,
// CRLF line endings, a UTF-8 byte-order mark and spaces around fields are
// accepted. Lines may be of any length.
//
// Policies, chosen so that logs cut from the middle of a run still replay:
// - A free of a pointer that is not live (allocated before the log began) is
//   skipped and counted in |unknown_free_count|. With
//   HL_REPLAY_LOG_FLAG_STRICT it is an error.
// - A free whose Size differs from its allocation's is replayed with the
//   allocation's size and counted in |size_mismatch_count|; strict: an error.
// - A pointer allocated again after its free starts a new lifetime (a new id).
//   A pointer allocated again while still live is always an error: no
//   allocator can return it twice, so the log is broken.
// - `allocate failure` lines are not replayed; they are counted.
// - An allocation of 0 bytes that returned null, and a free of null, are not
//   replayed; they are counted in |null_count|. A null pointer for a non-zero
//   allocation is an error.
// - The sum of live bytes must fit in 64 bits.
//
// Every error is INVALID_ARGUMENT (RESOURCE_EXHAUSTED when memory runs out)
// with a message of the form `NAME:LINE: what was wrong`, for example
// `trace.csv:17: Size 'abc' is not a number`.
//
// This is benchmark-side code: it uses only the public hipline API.
#ifndef HIPLINE_BENCH_REPLAY_LOG_H_
#define HIPLINE_BENCH_REPLAY_LOG_H_

#include <stddef.h>
#include <stdint.h>

#include "hipline/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// The kind of a replay event.
typedef enum hl_replay_op_e {
  HL_REPLAY_OP_ALLOC = 0,
  HL_REPLAY_OP_FREE = 1,
} hl_replay_op_t;

// One replayable event. An allocation and the free that ends it share |id|.
typedef struct hl_replay_event_t {
  // Bytes allocated, or for a free the size of the allocation it ends.
  uint64_t size;
  // Time stamp in nanoseconds, as given by the log (not necessarily from 0).
  uint64_t time_ns;
  // Lifetime slot in [0, slot_count): one per allocation, in log order. A
  // replayer keeps an array of slot_count pointers indexed by |id|.
  uint32_t id;
  // Dense stream index in [0, stream_count), in order of first appearance.
  uint32_t stream;
  // Dense thread index in [0, thread_count), in order of first appearance.
  uint32_t thread;
  // The 1-based line of the log the event came from, for diagnostics.
  uint32_t line;
  // Whether the event allocates or frees.
  hl_replay_op_t op;
} hl_replay_event_t;

// Parse flags; combine with |.
typedef uint32_t hl_replay_log_flags_t;
enum hl_replay_log_flag_bits_e {
  HL_REPLAY_LOG_FLAG_NONE = 0u,
  // Makes a free of a pointer that is not live, and a free whose Size differs
  // from its allocation's, an error instead of a counted anomaly.
  HL_REPLAY_LOG_FLAG_STRICT = 1u << 0,
};

// A parsed log. It is an in-place struct: hl_replay_log_initialize it (the
// parse functions do so themselves) and hl_replay_log_deinitialize it. Not
// thread-safe to modify; concurrent readers are fine.
typedef struct hl_replay_log_t {
  // Owned array of |event_count| events in log order.
  hl_replay_event_t* events;
  size_t event_count;
  // Number of lifetimes (equals the number of allocations).
  uint32_t slot_count;
  // Number of distinct streams and threads among replayed events.
  uint32_t stream_count;
  uint32_t thread_count;
  // Number of lines read, the header and blank lines included.
  uint64_t line_count;
  // `allocate failure` lines, not replayed.
  uint64_t failure_count;
  // Frees of pointers that were not live, skipped (lenient mode only).
  uint64_t unknown_free_count;
  // Zero-byte null allocations and frees of null, skipped.
  uint64_t null_count;
  // Frees whose Size differed from their allocation's (lenient mode only).
  uint64_t size_mismatch_count;
} hl_replay_log_t;

// What a replay of a log in order yields.
typedef struct hl_replay_summary_t {
  uint64_t alloc_count;
  uint64_t free_count;
  // Highest sum of live allocation sizes at any point of the log.
  uint64_t peak_live_bytes;
  // Highest number of simultaneously live allocations.
  uint64_t peak_live_count;
  // Allocations still live at the end of the log, and their bytes.
  uint64_t never_freed_count;
  uint64_t never_freed_bytes;
  // Sum of all allocation sizes, saturated at UINT64_MAX.
  uint64_t total_alloc_bytes;
  // Largest single allocation.
  uint64_t max_alloc_bytes;
} hl_replay_summary_t;

// Sets |log| to an empty log that owns nothing.
void hl_replay_log_initialize(hl_replay_log_t* log);

// Frees what |log| owns and leaves it empty. Accepts NULL and empty logs.
void hl_replay_log_deinitialize(hl_replay_log_t* log);

// Parses |size| bytes of |text| (need not be NUL-terminated; may hold any
// bytes) into |out_log|, which is initialized first and owned by the caller
// afterwards, also on failure (it is then empty). |name| labels error messages
// (NULL reads as "<buffer>"). Safe to call on untrusted input; this is the
// fuzzing entry point.
hl_status_t hl_replay_log_parse_buffer(const char* text, size_t size,
                                       const char* name,
                                       hl_replay_log_flags_t flags,
                                       hl_replay_log_t* out_log);

// Reads the file at |path| whole and parses it as hl_replay_log_parse_buffer
// does, naming errors after |path|. Fails with NOT_FOUND when the file does
// not exist and INVALID_ARGUMENT when it cannot be read.
hl_status_t hl_replay_log_parse_file(const char* path,
                                     hl_replay_log_flags_t flags,
                                     hl_replay_log_t* out_log);

// Replays |log| in order and fills |out_summary|. |log| must come from one of
// the parse functions (its frees then match earlier allocations and the live
// sum fits in 64 bits).
void hl_replay_log_summarize(const hl_replay_log_t* log,
                             hl_replay_summary_t* out_summary);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_BENCH_REPLAY_LOG_H_
