// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Graphs on the hip backend (the backend contract's graph_capture,
// graph_launch and graph_destroy), by stream capture. Private to
// runtime/backend/hip/.
#ifndef HIPLINE_RUNTIME_BACKEND_HIP_HIP_GRAPH_H_
#define HIPLINE_RUNTIME_BACKEND_HIP_HIP_GRAPH_H_

#include "runtime/backend/backend.h"
#include "runtime/backend/hip/dynamic_symbols.h"

// The backend's symbol table (hip_backend.c).
const hl_hip_dynamic_symbols_t* hl_hip_backend_symbols(hl_backend_t* base);

hl_status_t hl_hip_graph_capture(hl_backend_t* base,
                                 hl_backend_graph_record_fn_t record,
                                 void* user, hl_backend_graph_t** out_graph);
hl_status_t hl_hip_graph_launch(hl_backend_t* base, hl_backend_graph_t* graph,
                                hl_backend_stream_t* stream);
void hl_hip_graph_destroy(hl_backend_t* base, hl_backend_graph_t* graph);

#endif  // HIPLINE_RUNTIME_BACKEND_HIP_HIP_GRAPH_H_
