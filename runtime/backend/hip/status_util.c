// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// HIP error translation.

#include "runtime/backend/hip/status_util.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

hl_status_code_t hl_hip_error_code(hipError_t error) {
  switch (error) {
    case hipSuccess:
      return HL_STATUS_OK;
    case hipErrorOutOfMemory:
      return HL_STATUS_RESOURCE_EXHAUSTED;
    case hipErrorNoDevice:
    case hipErrorInsufficientDriver:
      return HL_STATUS_UNAVAILABLE;
    case hipErrorInvalidValue:
    case hipErrorInvalidDevice:
      return HL_STATUS_INVALID_ARGUMENT;
    default:
      return HL_STATUS_INTERNAL;
  }
}

const char* hl_hip_error_name(const hl_hip_dynamic_symbols_t* syms,
                              hipError_t error, char* buffer, size_t capacity) {
  const char* name =
      syms && syms->hipGetErrorName ? syms->hipGetErrorName(error) : NULL;
  // ROCm answers "hipErrorUnknown" for codes it does not know; print the
  // number then so the message still says which error it was.
  bool unnamed =
      !name || !name[0] ||
      (error != hipErrorUnknown && strcmp(name, "hipErrorUnknown") == 0);
  if (!unnamed) return name;
  snprintf(buffer, capacity, "hipError(%d)", (int)error);
  return buffer;
}

hl_status_t hl_hip_result_to_status(const hl_hip_dynamic_symbols_t* syms,
                                    hipError_t error, const char* file,
                                    int line, const char* format, ...) {
  if (HL_LIKELY(error == hipSuccess)) return hl_ok_status();
  char context[256];
  va_list args;
  va_start(args, format);
  vsnprintf(context, sizeof(context), format, args);
  va_end(args);
  char name_buffer[32];
  const char* name =
      hl_hip_error_name(syms, error, name_buffer, sizeof(name_buffer));
  return hl_status_make(hl_hip_error_code(error), file, line, "%s failed: %s",
                        context, name);
}
