// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Tests for the RMM allocation-log parser in bench/replay_log.{h,c}.
//
// Run without arguments for the unit tests. Run as
//   replay_log_test --check-csv FILE...
// to parse real logs (made by tools/hipline-trace-convert) and print one
// `allocs=N frees=N peak_live_bytes=N` line each; it fails when a log does not
// parse, has no allocation, or has no live bytes at its peak.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
// cmocka.h needs the includes above first.
#include <cmocka.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/replay_log.h"

static const char kValidLog[] =
    "Thread,Time,Action,Pointer,Size,Stream\n"
    "140573312345856,14:02:11.000001,allocate,0x7f8a40000000,1024,0x55d0c0\n"
    "140573312345856,14:02:11.000002,allocate,0x7f8a40000400,2048,0x55d0c0\n"
    "140573312345999,14:02:11.000003,allocate,0x7f8a40001000,4096,0\n"
    "140573312345856,14:02:11.000004,free,0x7f8a40000000,1024,0x55d0c0\n"
    "140573312345999,14:02:11.000005,allocate failure,(nil),1099511627776,0\n"
    "140573312345999,14:02:11.000006,free,0x7f8a40001000,4096,0\n"
    "140573312345856,14:02:11.000007,allocate,0x7f8a40002000,512,0x55d0c0\n";

// Parses |text| (NUL-terminated, NUL excluded) from an exactly sized heap copy,
// so a sanitizer catches any read past the end.
static hl_status_t parse_text(const char* text, hl_replay_log_flags_t flags,
                              hl_replay_log_t* out_log) {
  size_t size = strlen(text);
  char* copy = malloc(size ? size : 1);
  assert_non_null(copy);
  memcpy(copy, text, size);
  hl_status_t status =
      hl_replay_log_parse_buffer(copy, size, "trace.csv", flags, out_log);
  free(copy);
  return status;
}

// Asserts that |status| is INVALID_ARGUMENT whose message contains |expected|,
// then frees it.
static void expect_invalid(hl_status_t status, const char* expected) {
  assert_non_null(status);
  assert_int_equal(hl_status_code(status), HL_STATUS_INVALID_ARGUMENT);
  const char* message = hl_status_message(status);
  if (!strstr(message, expected)) {
    fail_msg("message '%s' lacks '%s'", message, expected);
  }
  hl_status_free(status);
}

static void expect_ok(hl_status_t status) {
  if (status) {
    hl_status_fprint(stderr, "unexpected: ", status);
    hl_status_free(status);
    fail();
  }
}

static void check_valid_log(const hl_replay_log_t* log) {
  assert_int_equal(log->event_count, 6);
  assert_int_equal(log->slot_count, 4);
  assert_int_equal(log->stream_count, 2);
  assert_int_equal(log->thread_count, 2);
  assert_int_equal(log->failure_count, 1);
  assert_int_equal(log->unknown_free_count, 0);
  assert_int_equal(log->line_count, 8);

  const hl_replay_event_t* e = log->events;
  assert_int_equal(e[0].op, HL_REPLAY_OP_ALLOC);
  assert_int_equal(e[0].id, 0);
  assert_int_equal(e[0].size, 1024);
  assert_int_equal(e[0].stream, 0);
  assert_int_equal(e[0].thread, 0);
  assert_int_equal(e[0].line, 2);
  assert_true(e[0].time_ns ==
              (UINT64_C(14) * 3600 + 2 * 60 + 11) * UINT64_C(1000000000) +
                  1000);
  assert_int_equal(e[1].id, 1);
  assert_int_equal(e[2].op, HL_REPLAY_OP_ALLOC);
  assert_int_equal(e[2].id, 2);
  assert_int_equal(e[2].stream, 1);
  assert_int_equal(e[2].thread, 1);
  assert_int_equal(e[3].op, HL_REPLAY_OP_FREE);
  assert_int_equal(e[3].id, 0);
  assert_int_equal(e[3].size, 1024);
  assert_int_equal(e[3].line, 5);
  assert_int_equal(e[4].op, HL_REPLAY_OP_FREE);
  assert_int_equal(e[4].id, 2);
  assert_int_equal(e[4].line, 7);
  assert_int_equal(e[5].op, HL_REPLAY_OP_ALLOC);
  assert_int_equal(e[5].id, 3);
  assert_int_equal(e[5].size, 512);

  hl_replay_summary_t summary;
  hl_replay_log_summarize(log, &summary);
  assert_int_equal(summary.alloc_count, 4);
  assert_int_equal(summary.free_count, 2);
  assert_int_equal(summary.peak_live_bytes, 1024 + 2048 + 4096);
  assert_int_equal(summary.peak_live_count, 3);
  assert_int_equal(summary.never_freed_count, 2);
  assert_int_equal(summary.never_freed_bytes, 2048 + 512);
  assert_int_equal(summary.total_alloc_bytes, 1024 + 2048 + 4096 + 512);
  assert_int_equal(summary.max_alloc_bytes, 4096);
}

static void test_valid_log(void** state) {
  hl_replay_log_t log;
  expect_ok(parse_text(kValidLog, HL_REPLAY_LOG_FLAG_STRICT, &log));
  check_valid_log(&log);
  hl_replay_log_deinitialize(&log);
}

static void test_crlf_bom_and_blank_lines(void** state) {
  // The valid log with a byte-order mark, CRLF endings, blank and
  // whitespace-only lines, padded fields and no final newline.
  static const char kText[] =
      "\xEF\xBB\xBFThread,Time,Action,Pointer,Size,Stream\r\n"
      " \t \r\n"
      "\r\n"
      "140573312345856 , 14:02:11.000001 "
      ",allocate,0x7f8a40000000,1024,0x55d0c0\r\n"
      "140573312345856,14:02:11.000002,allocate,0x7f8a40000400,2048,"
      "0x55d0c0\r\n"
      "140573312345999,14:02:11.000003,allocate,0x7f8a40001000,4096,0\r\n"
      "140573312345856,14:02:11.000004,free,0x7f8a40000000,1024,0x55d0c0\r\n"
      "140573312345999,14:02:11.000005,allocate "
      "failure,(nil),1099511627776,0\r\n"
      "\t140573312345999,14:02:11.000006,free,0x7f8a40001000,4096,0\t\r\n"
      "140573312345856,14:02:11.000007,allocate,0x7f8a40002000,512,0x55d0c0";
  hl_replay_log_t log;
  expect_ok(parse_text(kText, HL_REPLAY_LOG_FLAG_STRICT, &log));
  assert_int_equal(log.event_count, 6);
  assert_int_equal(log.slot_count, 4);
  assert_int_equal(log.stream_count, 2);
  assert_int_equal(log.thread_count, 2);
  assert_int_equal(log.events[0].line, 4);
  assert_int_equal(log.events[0].size, 1024);
  assert_int_equal(log.events[5].line, 10);
  assert_int_equal(log.events[5].size, 512);
  assert_int_equal(log.line_count, 10);
  hl_replay_summary_t summary;
  hl_replay_log_summarize(&log, &summary);
  assert_int_equal(summary.peak_live_bytes, 1024 + 2048 + 4096);
  assert_int_equal(summary.never_freed_bytes, 2048 + 512);
  hl_replay_log_deinitialize(&log);
}

static void test_columns_in_any_order(void** state) {
  hl_replay_log_t log;
  expect_ok(
      parse_text("Action,Size,Pointer,Extra,Stream,Time,Thread\n"
                 "allocate,100,0x1000,whatever,0x5,1.5,7\n"
                 "free,100,0x1000,,0x5,2,7\n",
                 HL_REPLAY_LOG_FLAG_STRICT, &log));
  assert_int_equal(log.event_count, 2);
  assert_int_equal(log.events[0].size, 100);
  assert_true(log.events[0].time_ns == UINT64_C(1500000000));
  assert_true(log.events[1].time_ns == UINT64_C(2000000000));
  assert_int_equal(log.events[1].op, HL_REPLAY_OP_FREE);
  hl_replay_log_deinitialize(&log);
}

typedef struct malformed_case_t {
  const char* line;
  const char* expected;
} malformed_case_t;

static void test_malformed_lines(void** state) {
  static const malformed_case_t kCases[] = {
      {"1,00:00:01.0,allocate,0x10,abc,0",
       "trace.csv:4: Size 'abc' is not a number"},
      {"1,00:00:01.0,allocate,0x10,-5,0",
       "trace.csv:4: Size '-5' is not a number"},
      {"1,00:00:01.0,allocate,0x10,,0", "trace.csv:4: Size '' is not a number"},
      {"1,00:00:01.0,alloc,0x10,5,0", "trace.csv:4: Action 'alloc' is not"},
      {"1,00:00:01.0,allocate,0xzz,5,0", "trace.csv:4: Pointer '0xzz' is not"},
      {"1,00:00:01.0,allocate,0x,5,0", "trace.csv:4: Pointer '0x' is not"},
      {"x1,00:00:01.0,allocate,0x10,5,0", "trace.csv:4: Thread 'x1' is not"},
      {"1,noon,allocate,0x10,5,0", "trace.csv:4: Time 'noon' is not"},
      {"1,00:61:00,allocate,0x10,5,0", "trace.csv:4: Time '00:61:00' is not"},
      {"1,00:01,allocate,0x10,5,0", "trace.csv:4: Time '00:01' is not"},
      {"1,00:00:01.,allocate,0x10,5,0", "trace.csv:4: Time '00:00:01.' is not"},
      {"1,00:00:01.0,allocate,0x10,5,stream", "trace.csv:4: Stream 'stream'"},
      {"1,00:00:01.0,allocate,0x10,5", "trace.csv:4: expected 6 fields, got 5"},
      {"1,00:00:01.0,allocate,0x10,5,0,9",
       "trace.csv:4: expected 6 fields, got 7"},
      {",,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,",
       "expected 6 fields, got more"},
      {"1,00:00:01.0,allocate,(nil),5,0",
       "trace.csv:4: allocate of 5 bytes has a null"},
      {"1,00:00:01.0,allocate,0x20,5,0",
       "Pointer 0x20 is allocated again while live"},
      {"1,00:00:01.0,allocate\0,0x10,5,0",
       "trace.csv:4: Action 'allocate?' is not"},
  };
  for (size_t i = 0; i < sizeof(kCases) / sizeof(kCases[0]); ++i) {
    char text[512];
    int n = snprintf(text, sizeof(text),
                     "Thread,Time,Action,Pointer,Size,Stream\n"
                     "1,00:00:00.5,allocate,0x20,8,0\n"
                     "\n%s\n",
                     kCases[i].line);
    assert_true(n > 0 && (size_t)n < sizeof(text));
    size_t size = (size_t)n;
    if (i == sizeof(kCases) / sizeof(kCases[0]) - 1) {
      // The last case hides a NUL byte after "allocate"; snprintf stopped at
      // it, so splice the rest of the line in by hand.
      const char* rest = ",0x10,5,0\n";
      memcpy(text + size - 1, "\0", 1);
      memcpy(text + size, rest, strlen(rest));
      size += strlen(rest);
    }
    hl_replay_log_t log;
    hl_status_t status =
        hl_replay_log_parse_buffer(text, size, "trace.csv", 0, &log);
    print_message("case %zu: %s\n", i, hl_status_message(status));
    expect_invalid(status, kCases[i].expected);
    assert_null(log.events);
    assert_int_equal(log.event_count, 0);
  }
}

static void test_missing_and_bad_header(void** state) {
  hl_replay_log_t log;
  expect_invalid(parse_text("1,00:00:01.0,allocate,0x10,5,0\n", 0, &log),
                 "trace.csv:1: expected the header "
                 "'Thread,Time,Action,Pointer,Size,Stream', got "
                 "'1,00:00:01.0,allocate,0x10,5,0' (is the header missing?)");
  expect_invalid(parse_text("\n\nThread,Time,Action,Pointer,Size\n", 0, &log),
                 "trace.csv:3: header lacks the column 'Stream'");
  expect_invalid(
      parse_text("Thread,Time,Action,Pointer,Size,Stream,Size\n", 0, &log),
      "trace.csv:1: header names column 'Size' twice");
}

static void test_empty_file(void** state) {
  hl_replay_log_t log;
  expect_invalid(hl_replay_log_parse_buffer(NULL, 0, "empty.csv", 0, &log),
                 "empty.csv:1: log is empty");
  expect_invalid(parse_text("\r\n  \n\n", 0, &log),
                 "trace.csv:3: log is empty");
  // A header alone is a valid log with no events.
  expect_ok(parse_text("Thread,Time,Action,Pointer,Size,Stream", 0, &log));
  assert_int_equal(log.event_count, 0);
  hl_replay_summary_t summary;
  hl_replay_log_summarize(&log, &summary);
  assert_int_equal(summary.alloc_count, 0);
  assert_int_equal(summary.peak_live_bytes, 0);
  hl_replay_log_deinitialize(&log);
}

static void test_unknown_free(void** state) {
  static const char kText[] =
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,00:00:01.0,free,0xdead0000,64,0\n"
      "1,00:00:02.0,allocate,0x1000,32,0\n"
      "1,00:00:03.0,free,0x1000,32,0\n"
      "1,00:00:04.0,free,0x1000,32,0\n"
      "1,00:00:05.0,free,(nil),0,0\n";
  hl_replay_log_t log;
  expect_ok(parse_text(kText, 0, &log));
  assert_int_equal(log.event_count, 2);
  assert_int_equal(log.unknown_free_count, 2);
  assert_int_equal(log.null_count, 1);
  hl_replay_log_deinitialize(&log);

  expect_invalid(parse_text(kText, HL_REPLAY_LOG_FLAG_STRICT, &log),
                 "trace.csv:2: free of Pointer 0xdead0000 that is not live");
}

static void test_size_mismatch(void** state) {
  static const char kText[] =
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,00:00:01.0,allocate,0x1000,32,0\n"
      "1,00:00:02.0,free,0x1000,16,0\n";
  hl_replay_log_t log;
  expect_ok(parse_text(kText, 0, &log));
  assert_int_equal(log.size_mismatch_count, 1);
  assert_int_equal(log.events[1].size, 32);  // The allocation's size.
  hl_replay_log_deinitialize(&log);
  expect_invalid(parse_text(kText, HL_REPLAY_LOG_FLAG_STRICT, &log),
                 "trace.csv:3: free of Pointer 0x1000 has Size 16 but line 2 "
                 "allocated 32");
}

static void test_pointer_reuse(void** state) {
  hl_replay_log_t log;
  expect_ok(
      parse_text("Thread,Time,Action,Pointer,Size,Stream\n"
                 "1,00:00:01.0,allocate,0x1000,32,0\n"
                 "1,00:00:02.0,free,0x1000,32,0\n"
                 "1,00:00:03.0,allocate,0x1000,64,0\n"
                 "1,00:00:04.0,allocate,0x2000,8,0\n"
                 "1,00:00:05.0,free,0x1000,64,0\n",
                 HL_REPLAY_LOG_FLAG_STRICT, &log));
  assert_int_equal(log.event_count, 5);
  assert_int_equal(log.slot_count, 3);
  assert_int_equal(log.events[0].id, 0);
  assert_int_equal(log.events[1].id, 0);
  assert_int_equal(log.events[2].id, 1);
  assert_int_equal(log.events[3].id, 2);
  assert_int_equal(log.events[4].id, 1);
  assert_int_equal(log.events[4].size, 64);
  hl_replay_summary_t summary;
  hl_replay_log_summarize(&log, &summary);
  assert_int_equal(summary.peak_live_bytes, 72);
  assert_int_equal(summary.never_freed_count, 1);
  assert_int_equal(summary.never_freed_bytes, 8);
  hl_replay_log_deinitialize(&log);
}

static void test_huge_sizes(void** state) {
  hl_replay_log_t log;
  // UINT64_MAX fits, one more does not.
  expect_ok(
      parse_text("Thread,Time,Action,Pointer,Size,Stream\n"
                 "1,0,allocate,0xffffffffffffffff,18446744073709551615,0\n",
                 HL_REPLAY_LOG_FLAG_STRICT, &log));
  assert_true(log.events[0].size == UINT64_MAX);
  hl_replay_log_deinitialize(&log);
  expect_invalid(
      parse_text("Thread,Time,Action,Pointer,Size,Stream\n"
                 "1,0,allocate,0x10,18446744073709551616,0\n",
                 0, &log),
      "trace.csv:2: Size '18446744073709551616' does not fit in 64 bits");
  expect_invalid(parse_text("Thread,Time,Action,Pointer,Size,Stream\n"
                            "1,0,allocate,0x10000000000000000,1,0\n",
                            0, &log),
                 "trace.csv:2: Pointer '0x10000000000000000' does not fit");
  expect_invalid(parse_text("Thread,Time,Action,Pointer,Size,Stream\n"
                            "1,99999999999999999999:00:00,allocate,0x1,1,0\n",
                            0, &log),
                 "trace.csv:2: Time '99999999999999999999:00:00' does not fit");
  // The sum of live bytes must fit as well.
  expect_invalid(parse_text("Thread,Time,Action,Pointer,Size,Stream\n"
                            "1,0,allocate,0x10,18446744073709551615,0\n"
                            "1,0,allocate,0x20,1,0\n",
                            0, &log),
                 "trace.csv:3: live bytes overflow 64 bits");
}

static void test_very_long_lines(void** state) {
  // A 1 MiB Size field: the error quotes only its start.
  const size_t digits = (size_t)1 << 20;
  const char* head =
      "Thread,Time,Action,Pointer,Size,Stream\n1,0,allocate,0x10,";
  size_t head_length = strlen(head);
  char* text = malloc(head_length + digits + 3);
  assert_non_null(text);
  memcpy(text, head, head_length);
  memset(text + head_length, '9', digits);
  memcpy(text + head_length + digits, ",0", 2);
  hl_replay_log_t log;
  hl_status_t status = hl_replay_log_parse_buffer(
      text, head_length + digits + 2, "long.csv", 0, &log);
  assert_non_null(status);
  assert_true(strlen(hl_status_message(status)) < 200);
  char expected[128];
  memset(expected, 0, sizeof(expected));
  strcpy(expected, "long.csv:2: Size '");
  memset(expected + strlen(expected), '9', 40);
  strcat(expected, "...' does not fit in 64 bits");
  expect_invalid(status, expected);

  // A valid line padded to 1 MiB with blanks still parses.
  memset(text + head_length, ' ', digits);
  memcpy(text + head_length + digits - 2, "42", 2);
  expect_ok(hl_replay_log_parse_buffer(text, head_length + digits + 2,
                                       "long.csv", 0, &log));
  assert_int_equal(log.event_count, 1);
  assert_int_equal(log.events[0].size, 42);
  hl_replay_log_deinitialize(&log);
  free(text);
}

static void test_time_formats(void** state) {
  hl_replay_log_t log;
  expect_ok(
      parse_text("Thread,Time,Action,Pointer,Size,Stream\n"
                 "1,25:00:00,allocate,0x10,1,0\n"
                 "1,1634567890.123456789123,allocate,0x20,1,0\n"
                 "1,0:00:59.5,allocate,0x30,1,(nil)\n",
                 0, &log));
  assert_true(log.events[0].time_ns == UINT64_C(25) * 3600 * 1000000000);
  assert_true(log.events[1].time_ns == UINT64_C(1634567890123456789));
  assert_true(log.events[2].time_ns == UINT64_C(59500000000));
  assert_int_equal(log.stream_count, 1);  // "0" and "(nil)" are one stream.
  hl_replay_log_deinitialize(&log);
}

// Replays a long random log with heavy address reuse and checks the parser's
// lifetimes and the summary against a direct simulation. This exercises the
// pointer table's growth and deletion.
static void test_random_log_matches_simulation(void** state) {
  enum { kAddresses = 4096, kLines = 60000 };
  uint64_t* live_size = calloc(kAddresses, sizeof(uint64_t));
  uint32_t* live_id = calloc(kAddresses, sizeof(uint32_t));
  size_t capacity = (size_t)kLines * 64 + 64;
  char* text = malloc(capacity);
  uint32_t* expected_ids = malloc(kLines * sizeof(uint32_t));
  assert_non_null(live_size);
  assert_non_null(live_id);
  assert_non_null(text);
  assert_non_null(expected_ids);
  size_t n = (size_t)snprintf(text, capacity, "%s\n",
                              "Thread,Time,Action,Pointer,Size,Stream");
  uint64_t seed = 12345;
  uint64_t live = 0, peak = 0, live_count = 0;
  uint32_t next_id = 0;
  size_t events = 0;
  for (int i = 0; i < kLines; ++i) {
    seed = seed * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
    uint32_t slot = (uint32_t)(seed >> 33) % kAddresses;
    uint64_t address = UINT64_C(0x7f0000000000) + (uint64_t)slot * 256;
    if (live_size[slot]) {
      n += (size_t)snprintf(text + n, capacity - n,
                            "3,%d,free,0x%" PRIx64 ",%" PRIu64 ",0x7\n", i,
                            address, live_size[slot]);
      live -= live_size[slot];
      --live_count;
      live_size[slot] = 0;
      expected_ids[events++] = live_id[slot];
    } else {
      uint64_t size = 1 + ((seed >> 13) & 0xffff);
      n += (size_t)snprintf(text + n, capacity - n,
                            "3,%d,allocate,0x%" PRIx64 ",%" PRIu64 ",0x7\n", i,
                            address, size);
      live_size[slot] = size;
      live_id[slot] = next_id;
      expected_ids[events++] = next_id++;
      live += size;
      ++live_count;
      if (live > peak) peak = live;
    }
  }
  hl_replay_log_t log;
  expect_ok(hl_replay_log_parse_buffer(text, n, "random.csv",
                                       HL_REPLAY_LOG_FLAG_STRICT, &log));
  assert_int_equal(log.event_count, events);
  assert_int_equal(log.slot_count, next_id);
  for (size_t i = 0; i < events; ++i) {
    assert_int_equal(log.events[i].id, expected_ids[i]);
  }
  hl_replay_summary_t summary;
  hl_replay_log_summarize(&log, &summary);
  assert_true(summary.peak_live_bytes == peak);
  assert_true(summary.never_freed_bytes == live);
  assert_true(summary.never_freed_count == live_count);
  hl_replay_log_deinitialize(&log);
  free(expected_ids);
  free(text);
  free(live_id);
  free(live_size);
}

static void test_parse_file(void** state) {
  char path[] = "replay_log_test.tmp.csv";
  FILE* file = fopen(path, "wb");
  assert_non_null(file);
  assert_int_equal(fwrite(kValidLog, 1, strlen(kValidLog), file),
                   strlen(kValidLog));
  assert_int_equal(fclose(file), 0);
  hl_replay_log_t log;
  expect_ok(hl_replay_log_parse_file(path, HL_REPLAY_LOG_FLAG_STRICT, &log));
  check_valid_log(&log);
  hl_replay_log_deinitialize(&log);
  remove(path);

  hl_status_t status =
      hl_replay_log_parse_file("/nonexistent/replay.csv", 0, &log);
  assert_int_equal(hl_status_code(status), HL_STATUS_NOT_FOUND);
  assert_non_null(strstr(hl_status_message(status), "/nonexistent/replay.csv"));
  hl_status_free(status);
  hl_replay_log_deinitialize(NULL);
}

// Parses each file and prints its summary; see the comment at the top.
static int check_csv_files(int count, char** paths) {
  int failures = 0;
  for (int i = 0; i < count; ++i) {
    hl_replay_log_t log;
    hl_status_t status = hl_replay_log_parse_file(paths[i], 0, &log);
    if (status) {
      hl_status_fprint(stderr, "replay_log_test: ", status);
      hl_status_free(status);
      ++failures;
      continue;
    }
    hl_replay_summary_t summary;
    hl_replay_log_summarize(&log, &summary);
    printf("%s: events=%zu allocs=%" PRIu64 " frees=%" PRIu64
           " peak_live_bytes=%" PRIu64 " never_freed=%" PRIu64
           " streams=%" PRIu32 " threads=%" PRIu32 " unknown_frees=%" PRIu64
           " size_mismatches=%" PRIu64 "\n",
           paths[i], log.event_count, summary.alloc_count, summary.free_count,
           summary.peak_live_bytes, summary.never_freed_count, log.stream_count,
           log.thread_count, log.unknown_free_count, log.size_mismatch_count);
    if (summary.alloc_count == 0 || summary.peak_live_bytes == 0) {
      fprintf(stderr,
              "replay_log_test: %s has no allocations or no live bytes\n",
              paths[i]);
      ++failures;
    }
    hl_replay_log_deinitialize(&log);
  }
  return failures ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "--check-csv") == 0) {
    if (argc == 2) {
      fprintf(stderr, "usage: %s --check-csv FILE...\n", argv[0]);
      return 2;
    }
    return check_csv_files(argc - 2, argv + 2);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_log),
      cmocka_unit_test(test_crlf_bom_and_blank_lines),
      cmocka_unit_test(test_columns_in_any_order),
      cmocka_unit_test(test_malformed_lines),
      cmocka_unit_test(test_missing_and_bad_header),
      cmocka_unit_test(test_empty_file),
      cmocka_unit_test(test_unknown_free),
      cmocka_unit_test(test_size_mismatch),
      cmocka_unit_test(test_pointer_reuse),
      cmocka_unit_test(test_huge_sizes),
      cmocka_unit_test(test_very_long_lines),
      cmocka_unit_test(test_time_formats),
      cmocka_unit_test(test_random_log_matches_simulation),
      cmocka_unit_test(test_parse_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
