// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Turning HIP error codes into hipline statuses at the call site.
//
// Every HIP call in the backend goes through one of the macros below, which
// name the call and its arguments and add the HIP error name:
//
//   HL_HIP_RETURN_IF_ERROR(syms, hipMallocAsync(&ptr, size, stream),
//                          "hipMallocAsync(%zu bytes)", size);
//
// fails with "hipMallocAsync(1048576 bytes) failed: hipErrorOutOfMemory".
#ifndef HIPLINE_RUNTIME_BACKEND_HIP_STATUS_UTIL_H_
#define HIPLINE_RUNTIME_BACKEND_HIP_STATUS_UTIL_H_

#include "hipline/status.h"
#include "runtime/backend/hip/dynamic_symbols.h"

// Returns the canonical code for a HIP error: out of memory is
// RESOURCE_EXHAUSTED, no device (or too old a driver) UNAVAILABLE, an invalid
// value or device INVALID_ARGUMENT, success OK, anything else INTERNAL.
hl_status_code_t hl_hip_error_code(hipError_t error);

// Returns the HIP name of |error| ("hipErrorOutOfMemory"), or "hipError(N)"
// written into |buffer| when the runtime has no name for it.
const char* hl_hip_error_name(const hl_hip_dynamic_symbols_t* syms,
                              hipError_t error, char* buffer, size_t capacity);

// Returns OK for hipSuccess; otherwise a status with the mapped code whose
// message is "<context> failed: <HIP error name>", where the context is the
// printf-style |format|. The context is formatted only on failure.
hl_status_t hl_hip_result_to_status(const hl_hip_dynamic_symbols_t* syms,
                                    hipError_t error, const char* file,
                                    int line, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

// Calls |syms->expr| and converts its result. The variadic part is the
// printf-style description of the call (at least a format string).
#define HL_HIP_RESULT_TO_STATUS(syms, expr, ...) \
  hl_hip_result_to_status((syms), (syms)->expr, __FILE__, __LINE__, __VA_ARGS__)

// Same, returning the status from the enclosing function on failure.
#define HL_HIP_RETURN_IF_ERROR(syms, expr, ...) \
  HL_RETURN_IF_ERROR_PLAIN(HL_HIP_RESULT_TO_STATUS(syms, expr, __VA_ARGS__))

#endif  // HIPLINE_RUNTIME_BACKEND_HIP_STATUS_UTIL_H_
