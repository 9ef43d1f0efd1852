// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Graphs on the hip backend: the work a command buffer replays, captured
// once from a private stream (hipStreamBeginCapture in thread-local mode,
// so nothing another thread enqueues elsewhere is caught or refused),
// instantiated, and launched with one hipGraphLaunch per execution. The
// nodes are the kernel, memset and memcpy operations in the order they were
// enqueued, each depending on the one before, as on a stream.

#include "runtime/backend/hip/hip_graph.h"

#include <stdlib.h>

#include "runtime/backend/hip/status_util.h"

struct hl_backend_graph_t {
  hipGraphExec_t exec;
};

static bool hl_hip_graph_api_present(const hl_hip_dynamic_symbols_t* syms) {
  return syms->hipStreamBeginCapture && syms->hipStreamEndCapture &&
         syms->hipGraphInstantiate && syms->hipGraphLaunch &&
         syms->hipGraphExecDestroy && syms->hipGraphDestroy;
}

// Ends the capture on |stream| and instantiates what it caught. |recorded|
// is the record callback's status: on failure the capture still ends and
// its graph is dropped.
static hl_status_t hl_hip_graph_finish(const hl_hip_dynamic_symbols_t* syms,
                                       hipStream_t stream, hl_status_t recorded,
                                       hipGraphExec_t* out_exec) {
  hipGraph_t graph = NULL;
  hl_status_t st = HL_HIP_RESULT_TO_STATUS(
      syms, hipStreamEndCapture(stream, &graph), "hipStreamEndCapture");
  if (recorded) {
    hl_status_ignore(st);
    st = recorded;
  }
  if (!st) {
    st = HL_HIP_RESULT_TO_STATUS(
        syms, hipGraphInstantiate(out_exec, graph, NULL, NULL, 0),
        "hipGraphInstantiate");
  }
  if (graph) {
    // The executable graph keeps what it needs of the graph.
    hl_status_ignore(HL_HIP_RESULT_TO_STATUS(syms, hipGraphDestroy(graph),
                                             "hipGraphDestroy"));
  }
  return st;
}

hl_status_t hl_hip_graph_capture(hl_backend_t* base,
                                 hl_backend_graph_record_fn_t record,
                                 void* user, hl_backend_graph_t** out_graph) {
  *out_graph = NULL;
  const hl_hip_dynamic_symbols_t* syms = hl_hip_backend_symbols(base);
  if (!hl_hip_graph_api_present(syms)) {
    return HL_MAKE_STATUS(HL_STATUS_UNAVAILABLE,
                          "the HIP runtime lacks the graph API "
                          "(hipStreamBeginCapture ... hipGraphLaunch)");
  }
  hl_backend_graph_t* graph = calloc(1, sizeof(*graph));
  if (!graph) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "allocating a graph");
  }
  hl_backend_stream_t* stream = NULL;
  hl_status_t st = base->vtable->stream_create(base, &stream);
  if (!st) {
    hipStream_t handle = (hipStream_t)stream;
    st = HL_HIP_RESULT_TO_STATUS(
        syms,
        hipStreamBeginCapture(handle, HL_HIP_STREAM_CAPTURE_MODE_THREAD_LOCAL),
        "hipStreamBeginCapture");
    if (!st) {
      st =
          hl_hip_graph_finish(syms, handle, record(user, stream), &graph->exec);
    }
    base->vtable->stream_destroy(base, stream);
  }
  if (st) {
    free(graph);
    return hl_status_annotate(st, "capturing a graph");
  }
  *out_graph = graph;
  return NULL;
}

hl_status_t hl_hip_graph_launch(hl_backend_t* base, hl_backend_graph_t* graph,
                                hl_backend_stream_t* stream) {
  const hl_hip_dynamic_symbols_t* syms = hl_hip_backend_symbols(base);
  return HL_HIP_RESULT_TO_STATUS(
      syms, hipGraphLaunch(graph->exec, (hipStream_t)stream),
      "hipGraphLaunch(stream %p)", (void*)stream);
}

void hl_hip_graph_destroy(hl_backend_t* base, hl_backend_graph_t* graph) {
  if (!graph) return;
  const hl_hip_dynamic_symbols_t* syms = hl_hip_backend_symbols(base);
  hl_status_ignore(HL_HIP_RESULT_TO_STATUS(
      syms, hipGraphExecDestroy(graph->exec), "hipGraphExecDestroy"));
  free(graph);
}
