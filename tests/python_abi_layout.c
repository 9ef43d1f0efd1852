// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Prints the layout of the public structs the Python binding mirrors with
// ctypes, one line each: "STRUCT size N" and "STRUCT.FIELD offset N".
// runtime/bindings/python/tests/test_abi.py compares them with the ctypes
// declarations, so a field added in C without the binding fails a test
// instead of corrupting memory.
#include <stddef.h>
#include <stdio.h>

#include "hipline/hipline.h"

#define SIZE(type) printf("%s size %zu\n", #type, sizeof(type))
#define FIELD(type, field) \
  printf("%s.%s offset %zu\n", #type, #field, offsetof(type, field))

int main(void) {
  SIZE(hl_allocator_t);
  SIZE(hl_pool_attributes_t);
  FIELD(hl_pool_attributes_t, limit_bytes);
  SIZE(hl_device_options_t);
  FIELD(hl_device_options_t, pool);
  FIELD(hl_device_options_t, checked);
  FIELD(hl_device_options_t, pool_mode);
  FIELD(hl_device_options_t, queue_depth);
  SIZE(hl_backend_info_t);
  FIELD(hl_backend_info_t, reason);
  SIZE(hl_device_properties_t);
  FIELD(hl_device_properties_t, memory_bytes);
  FIELD(hl_device_properties_t, compute_units);
  SIZE(hl_queue_stats_t);
  SIZE(hl_memory_stats_t);
  SIZE(hl_device_peer_stats_t);
  FIELD(hl_device_peer_stats_t, cross_device_waits);
  SIZE(hl_invocation_stats_t);
  SIZE(hl_function_signature_t);
  FIELD(hl_function_signature_t, argument_access);
  SIZE(hl_kernel_arg_t);
  FIELD(hl_kernel_arg_t, scalar);
  FIELD(hl_kernel_arg_t, size);
  SIZE(hl_dispatch_config_t);
  FIELD(hl_dispatch_config_t, shared_bytes);
  SIZE(hl_buffer_binding_t);
  FIELD(hl_buffer_binding_t, access);
  SIZE(hl_code_object_t);
  FIELD(hl_code_object_t, size);
  FIELD(hl_code_object_t, path);
  return 0;
}
