// Stream work of queue operations (see hl_stream_work_issue in
// memory_internal.h): the one place that decides, from the backend's
// |stream_ordered_host_work| capability, whether an operation's work runs
// when its stream gets there or when it is issued.

#include "runtime/memory/memory_internal.h"

hl_status_t hl_stream_work_issue(hl_issue_ctx_t* ctx, hl_gated_t* gate,
                                 hl_gated_fn_t fn, void* user,
                                 bool runtime_work) {
  if (ctx->backend->stream_ordered_host_work) {
    return hl_issue_enqueue_gated(ctx, gate, fn, user, runtime_work);
  }
  // Host functions here run on a shared driver thread and may not call the
  // backend: the work is enqueued now, behind the submission's waits.
  return fn(user);
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

hl_status_t hl_stream_work_after(hl_issue_ctx_t* ctx, hl_host_fn_t fn,
                                 void* user) {
  hl_backend_t* backend = ctx->backend;
  if (backend->stream_ordered_host_work) {
    return hl_backend_launch_runtime_func(backend, ctx->stream, fn, user);
  }
  fn(user);
  return NULL;
}
