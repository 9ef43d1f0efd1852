// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Every HIP entry point the hip backend uses, in one X-macro table.
//
// Each row is HL_HIP_PFN(KIND, RETURN_TYPE, NAME, PARAMETERS):
// - KIND is REQUIRED (loading fails without it) or OPTIONAL (the pointer is
//   NULL when the library lacks it and the caller falls back);
// - RETURN_TYPE is what the function returns (hipError_t for all but the
//   error-name lookup);
// - PARAMETERS is the parenthesized parameter list.
//
// The includer defines HL_HIP_PFN, includes this file and undefines it. The
// table is consumed by dynamic_symbols.h (the struct of pointers) and
// dynamic_symbols.c (the dlsym loop). The header has no include guard on
// purpose.

// Initialization and errors.
HL_HIP_PFN(REQUIRED, hipError_t, hipInit, (unsigned int flags))
HL_HIP_PFN(REQUIRED, const char*, hipGetErrorName, (hipError_t error))
HL_HIP_PFN(OPTIONAL, hipError_t, hipRuntimeGetVersion, (int* version))

// Devices.
HL_HIP_PFN(REQUIRED, hipError_t, hipGetDeviceCount, (int* count))
HL_HIP_PFN(REQUIRED, hipError_t, hipSetDevice, (int device))
HL_HIP_PFN(REQUIRED, hipError_t, hipGetDevice, (int* device))
HL_HIP_PFN(REQUIRED, hipError_t, hipDeviceGetName,
           (char* name, int length, int device))
HL_HIP_PFN(REQUIRED, hipError_t, hipDeviceTotalMem,
           (size_t * bytes, int device))
HL_HIP_PFN(REQUIRED, hipError_t, hipDeviceGetAttribute,
           (int* value, int attribute, int device))
HL_HIP_PFN(REQUIRED, hipError_t, hipDeviceSynchronize, (void))
// Both fill the original hipDeviceProp_t layout (see hip_types.h); the
// R0000 name exists from ROCm 6 on and is preferred when present.
HL_HIP_PFN(OPTIONAL, hipError_t, hipGetDevicePropertiesR0000,
           (void* props, int device))
HL_HIP_PFN(OPTIONAL, hipError_t, hipGetDeviceProperties,
           (void* props, int device))

// Streams and host callbacks. hipLaunchHostFunc is missing from ROCm 5.2's
// library (only declared in its headers); hipStreamAddCallback stands in.
HL_HIP_PFN(REQUIRED, hipError_t, hipStreamCreateWithFlags,
           (hipStream_t * stream, unsigned int flags))
HL_HIP_PFN(REQUIRED, hipError_t, hipStreamDestroy, (hipStream_t stream))
HL_HIP_PFN(REQUIRED, hipError_t, hipStreamSynchronize, (hipStream_t stream))
HL_HIP_PFN(REQUIRED, hipError_t, hipStreamQuery, (hipStream_t stream))
HL_HIP_PFN(REQUIRED, hipError_t, hipStreamWaitEvent,
           (hipStream_t stream, hipEvent_t event, unsigned int flags))
HL_HIP_PFN(OPTIONAL, hipError_t, hipLaunchHostFunc,
           (hipStream_t stream, hipHostFn_t fn, void* user_data))
HL_HIP_PFN(REQUIRED, hipError_t, hipStreamAddCallback,
           (hipStream_t stream, hipStreamCallback_t callback, void* user_data,
            unsigned int flags))

// Events.
HL_HIP_PFN(REQUIRED, hipError_t, hipEventCreateWithFlags,
           (hipEvent_t * event, unsigned int flags))
HL_HIP_PFN(REQUIRED, hipError_t, hipEventDestroy, (hipEvent_t event))
HL_HIP_PFN(REQUIRED, hipError_t, hipEventRecord,
           (hipEvent_t event, hipStream_t stream))
HL_HIP_PFN(REQUIRED, hipError_t, hipEventQuery, (hipEvent_t event))
HL_HIP_PFN(REQUIRED, hipError_t, hipEventSynchronize, (hipEvent_t event))
HL_HIP_PFN(REQUIRED, hipError_t, hipEventElapsedTime,
           (float* ms, hipEvent_t start, hipEvent_t stop))

// Copies and fills.
HL_HIP_PFN(REQUIRED, hipError_t, hipMemcpyAsync,
           (void* dst, const void* src, size_t size, int kind,
            hipStream_t stream))
HL_HIP_PFN(REQUIRED, hipError_t, hipMemsetD32Async,
           (hipDeviceptr_t dst, int value, size_t count, hipStream_t stream))

// Pinned host memory: the staging buffers that make host<->device copies
// asynchronous (hipMemcpyAsync on pageable memory waits for the copy).
HL_HIP_PFN(REQUIRED, hipError_t, hipHostMalloc,
           (void** ptr, size_t size, unsigned int flags))
HL_HIP_PFN(REQUIRED, hipError_t, hipHostFree, (void* ptr))

// Stream-ordered allocation (exported from ROCm 5.2 on).
HL_HIP_PFN(REQUIRED, hipError_t, hipMallocAsync,
           (void** ptr, size_t size, hipStream_t stream))
HL_HIP_PFN(REQUIRED, hipError_t, hipFreeAsync, (void* ptr, hipStream_t stream))
HL_HIP_PFN(REQUIRED, hipError_t, hipDeviceGetDefaultMemPool,
           (hipMemPool_t * pool, int device))
HL_HIP_PFN(OPTIONAL, hipError_t, hipMemPoolCreate,
           (hipMemPool_t * pool, const hipMemPoolProps* props))
HL_HIP_PFN(OPTIONAL, hipError_t, hipMemPoolDestroy, (hipMemPool_t pool))
HL_HIP_PFN(OPTIONAL, hipError_t, hipMallocFromPoolAsync,
           (void** ptr, size_t size, hipMemPool_t pool, hipStream_t stream))
HL_HIP_PFN(REQUIRED, hipError_t, hipMemPoolSetAttribute,
           (hipMemPool_t pool, hipMemPoolAttr attr, void* value))
HL_HIP_PFN(REQUIRED, hipError_t, hipMemPoolGetAttribute,
           (hipMemPool_t pool, hipMemPoolAttr attr, void* value))
HL_HIP_PFN(REQUIRED, hipError_t, hipMemPoolTrimTo,
           (hipMemPool_t pool, size_t min_bytes_to_hold))

// Peers (runtime/backend/hip/hip_peer.c). OPTIONAL: without them no device
// reaches another and cross-device copies are staged through the host.
HL_HIP_PFN(OPTIONAL, hipError_t, hipDeviceCanAccessPeer,
           (int* can_access, int device, int peer_device))
HL_HIP_PFN(OPTIONAL, hipError_t, hipDeviceEnablePeerAccess,
           (int peer_device, unsigned int flags))
HL_HIP_PFN(OPTIONAL, hipError_t, hipMemPoolSetAccess,
           (hipMemPool_t pool, const hipMemAccessDesc* descs, size_t count))
HL_HIP_PFN(OPTIONAL, hipError_t, hipMemcpyPeerAsync,
           (void* dst, int dst_device, const void* src, int src_device,
            size_t size, hipStream_t stream))

// Modules and kernel launch.
HL_HIP_PFN(REQUIRED, hipError_t, hipModuleLoadData,
           (hipModule_t * module, const void* image))
HL_HIP_PFN(REQUIRED, hipError_t, hipModuleUnload, (hipModule_t module))
HL_HIP_PFN(REQUIRED, hipError_t, hipModuleGetFunction,
           (hipFunction_t * function, hipModule_t module, const char* name))
HL_HIP_PFN(REQUIRED, hipError_t, hipModuleLaunchKernel,
           (hipFunction_t function, unsigned int grid_x, unsigned int grid_y,
            unsigned int grid_z, unsigned int block_x, unsigned int block_y,
            unsigned int block_z, unsigned int shared_bytes, hipStream_t stream,
            void** kernel_params, void** extra))

// Graphs, built by stream capture (runtime/backend/hip/hip_graph.c). ROCm
// exports them from 4.3 on (hip_graph.cpp); OPTIONAL so that a library
// without one of them still loads and command buffers replay instead.
HL_HIP_PFN(OPTIONAL, hipError_t, hipStreamBeginCapture,
           (hipStream_t stream, hipStreamCaptureMode mode))
HL_HIP_PFN(OPTIONAL, hipError_t, hipStreamEndCapture,
           (hipStream_t stream, hipGraph_t* graph))
HL_HIP_PFN(OPTIONAL, hipError_t, hipGraphInstantiate,
           (hipGraphExec_t * exec, hipGraph_t graph, void* error_node,
            char* log_buffer, size_t log_size))
HL_HIP_PFN(OPTIONAL, hipError_t, hipGraphLaunch,
           (hipGraphExec_t exec, hipStream_t stream))
HL_HIP_PFN(OPTIONAL, hipError_t, hipGraphExecDestroy, (hipGraphExec_t exec))
HL_HIP_PFN(OPTIONAL, hipError_t, hipGraphDestroy, (hipGraph_t graph))
