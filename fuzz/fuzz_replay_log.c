// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer harness: the RMM allocation-log parser (bench/replay_log.h), in
// lenient and strict mode. A successful parse must yield a consistent log
// (ids, streams and threads in range, every free after its allocation of the
// same size) that hl_replay_log_summarize can replay; a failure must be
// INVALID_ARGUMENT (or RESOURCE_EXHAUSTED) and leave the log empty.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/replay_log.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void check(const hl_replay_log_t* log) {
  uint64_t* sizes = calloc(log->slot_count + 1, sizeof(uint64_t));
  uint8_t* state = calloc(log->slot_count + 1, 1);  // 0 new, 1 live, 2 freed
  if (!sizes || !state) abort();
  for (size_t i = 0; i < log->event_count; ++i) {
    const hl_replay_event_t* e = &log->events[i];
    if (e->id >= log->slot_count || e->stream >= log->stream_count ||
        e->thread >= log->thread_count) {
      abort();
    }
    if (e->op == HL_REPLAY_OP_ALLOC) {
      if (state[e->id] != 0) abort();
      state[e->id] = 1;
      sizes[e->id] = e->size;
    } else {
      if (state[e->id] != 1 || sizes[e->id] != e->size) abort();
      state[e->id] = 2;
    }
  }
  hl_replay_summary_t summary;
  hl_replay_log_summarize(log, &summary);
  if (summary.alloc_count != log->slot_count) abort();
  if (summary.free_count + summary.never_freed_count != summary.alloc_count) {
    abort();
  }
  free(sizes);
  free(state);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (int strict = 0; strict < 2; ++strict) {
    hl_replay_log_t log;
    hl_status_t st = hl_replay_log_parse_buffer(
        (const char*)data, size, "fuzz.csv",
        strict ? HL_REPLAY_LOG_FLAG_STRICT : HL_REPLAY_LOG_FLAG_NONE, &log);
    if (st) {
      hl_status_code_t code = hl_status_code(st);
      if ((code != HL_STATUS_INVALID_ARGUMENT &&
           code != HL_STATUS_RESOURCE_EXHAUSTED) ||
          log.event_count != 0 || log.events != NULL) {
        hl_status_fprint(stderr, "fuzz_replay_log: bad failure: ", st);
        abort();
      }
      hl_status_free(st);
    } else {
      check(&log);
    }
    hl_replay_log_deinitialize(&log);
  }
  return 0;
}
