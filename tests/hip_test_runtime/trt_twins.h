// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Host twins of user kernels for the hip test runtime: shared objects that
// follow the host kernel ABI (hipline/executable.h), named by
// HL_HIP_TEST_RUNTIME_TWINS (colon-separated paths). A user code object
// loaded with hipModuleLoadData resolves a kernel that is not one of
// hipline's built-in ones to the twin exporting `hipline_kernel_<name>`,
// when the image contains the name; hipModuleLaunchKernel then lays out
// the twin's kernarg segment from kernelParams (the explicit arguments at
// the twin's offsets and sizes, as ROCm does from the code object's
// metadata), fills the hidden arguments as ROCm would (kernarg.h) and runs
// the twin on the stream's worker.
#ifndef HIPLINE_TESTS_HIP_TEST_RUNTIME_TRT_TWINS_H_
#define HIPLINE_TESTS_HIP_TEST_RUNTIME_TRT_TWINS_H_

#include <stddef.h>

#include "hipline/executable.h"

// The twin of kernel |name|, or NULL when no twin library exports it.
// Thread-safe; the libraries stay loaded for the process.
const hl_host_kernel_info_t* trt_twin_lookup(const char* name);

// Lays out |info|'s kernarg segment from |kernel_params| for a launch of
// |grid| x |block| with |shared_bytes|. Returns a malloc'd segment, or NULL
// when out of memory.
unsigned char* trt_twin_kernarg(const hl_host_kernel_info_t* info,
                                void** kernel_params, const uint32_t grid[3],
                                const uint32_t block[3], uint32_t shared_bytes);

#endif  // HIPLINE_TESTS_HIP_TEST_RUNTIME_TRT_TWINS_H_
