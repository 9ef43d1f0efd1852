// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Stream work of queue operations (see hl_stream_work_issue in
// stream_work.h): the one place that decides, from the backend's
// |stream_ordered_host_work| capability, whether an operation's work runs
// when its stream gets there or when it is issued.

#include "runtime/timeline/stream_work.h"

hl_status_t hl_stream_work_issue(hl_issue_ctx_t* ctx, hl_gated_t* gate,
                                 hl_gated_fn_t fn, void* user,
                                 bool runtime_work) {
  if (ctx->backend->stream_ordered_host_work) {
    gate->after = NULL;
    return hl_issue_enqueue_gated(ctx, gate, fn, user, runtime_work);
  }
  // Host functions here run on a shared driver thread and may not call the
  // backend: the work is enqueued now, behind the submission's waits.
  return fn(user);
}

hl_status_t hl_stream_work_issue_then(hl_issue_ctx_t* ctx, hl_gated_t* gate,
                                      hl_gated_fn_t fn, void* user,
                                      hl_host_fn_t then, void* then_user) {
  if (ctx->backend->stream_ordered_host_work) {
    // One stream item for both (the gate runs |then| after |fn|).
    gate->after = then;
    gate->after_user = then_user;
    return hl_issue_enqueue_gated(ctx, gate, fn, user, true);
  }
  hl_status_t st = fn(user);
  then(then_user);
  return st;
}

hl_status_t hl_stream_work_write_failed(hl_stream_work_t* work,
                                        hl_status_t status) {
  if (status) hl_submission_fail(work->submission, status, true);
  return NULL;
}

void hl_stream_work_bind(hl_stream_work_t* work, const hl_issue_ctx_t* ctx) {
  work->submission = ctx->submission;
  work->backend = ctx->backend;
  work->stream = ctx->stream;
  work->checked = ctx->device->checked;
}
