// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Stream work: how an operation (the op contract, timeline_internal.h) does
// its work on its queue's stream. The memory, executable and command layers
// build their operations on it.
#ifndef HIPLINE_RUNTIME_TIMELINE_STREAM_WORK_H_
#define HIPLINE_RUNTIME_TIMELINE_STREAM_WORK_H_

#include "runtime/timeline/timeline_internal.h"

// Stream work of queue operations (stream_work.c): how every
// operation of the memory, executable and command layers does what it does
// on its queue's stream. An operation's |issue| puts its work in one
// function, |fn(user)|, which makes the backend calls (malloc_async,
// free_async, memcpy_async, memset32_async, launch_kernel) on |ctx->stream|
// after checking the roots it touches, and hands it to
// hl_stream_work_issue. When |fn| runs is the backend's to say, through its
// |stream_ordered_host_work| capability (runtime/backend/backend.h):
// - with it, |fn| runs from a gated host function when the stream gets
//   there: it is skipped when the submission has failed by then, including
//   through a wait that failed after it was issued as a device-side wait;
//   its checks see the state at that moment; its backend calls take effect
//   at that point of the stream;
// - without it, |fn| runs now, on the issuing thread, and its backend calls
//   are enqueued behind the submission's waits: failures known at issue
//   skip it (the queue issues no more of a failed submission's operations),
//   and a later failure of a wait fails the submission's signals but does
//   not undo the work.
// Either way a status returned by |fn| fails the submission (not the
// queue); a backend call that writes device memory and fails goes through
// hl_stream_work_write_failed instead. |gate| is the operation's storage
// for the gated call; it must live until the submission completes.
hl_status_t hl_stream_work_issue(hl_issue_ctx_t* ctx, hl_gated_t* gate,
                                 hl_gated_fn_t fn, void* user,
                                 bool runtime_work);

// hl_stream_work_issue for runtime work, then |then(then_user)| (runtime
// work too: short, leaf locks only) right after |fn| ran or was skipped and
// before the submission's signals are published: in the same stream item
// with |stream_ordered_host_work|, now otherwise. For decisions that depend
// on whether the work ran (|then| runs whatever |fn| returns; with the
// capability, a failure to enqueue runs neither).
hl_status_t hl_stream_work_issue_then(hl_issue_ctx_t* ctx, hl_gated_t* gate,
                                      hl_gated_fn_t fn, void* user,
                                      hl_host_fn_t then, void* then_user);

// What an operation's stream work reads when it runs (embed it in the op and
// fill it with hl_stream_work_bind at issue); |gate| is the storage to pass
// to hl_stream_work_issue.
typedef struct hl_stream_work_t {
  hl_submission_t* submission;
  hl_backend_t* backend;
  hl_backend_stream_t* stream;
  bool checked;  // The device's checked mode.
  hl_gated_t gate;
} hl_stream_work_t;
void hl_stream_work_bind(hl_stream_work_t* work, const hl_issue_ctx_t* ctx);

// For stream work whose backend call writes device memory (a fill, a copy,
// an update, a kernel): when that call fails, the bytes are not what program
// order says, so the queue fails with the submission and nothing behind it
// runs as if the write had happened (a failed allocation, by contrast, fails
// only its submission: its buffer has no memory to misread). Takes
// |status| (NULL: nothing failed); returns NULL for |fn| to return.
hl_status_t hl_stream_work_write_failed(hl_stream_work_t* work,
                                        hl_status_t status);

#endif  // HIPLINE_RUNTIME_TIMELINE_STREAM_WORK_H_
