// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer harness: the code object readers of user executables
// (runtime/executable/code_object.h) through hl_executable_create, and the
// AMDGPU metadata parser on its own. The first byte picks the entry; the
// rest is the object (or the msgpack note). Every input must either load,
// with signatures that fit their kernarg segments, or fail with
// INVALID_ARGUMENT or NOT_FOUND; nothing may read out of bounds.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipline/executable.h"
#include "runtime/executable/code_object.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void check_error(hl_status_t st) {
  if (!st) return;
  hl_status_code_t code = hl_status_code(st);
  if (code != HL_STATUS_INVALID_ARGUMENT && code != HL_STATUS_NOT_FOUND) {
    hl_status_fprint(stderr, "fuzz_code_object: bad error: ", st);
    abort();
  }
  hl_status_free(st);
}

static void check_metadata(const hl_code_object_metadata_t* md) {
  for (uint32_t k = 0; k < md->kernel_count; ++k) {
    const hl_kernel_signature_t* sig = &md->kernels[k];
    if (sig->explicit_count > sig->arg_count) abort();
    for (uint32_t i = 0; i < sig->arg_count; ++i) {
      if ((uint64_t)sig->args[i].offset + sig->args[i].size >
          sig->kernarg_size) {
        abort();
      }
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // A private copy, so reads past |size| are caught by ASan.
  uint8_t* bytes = malloc(size - 1 ? size - 1 : 1);
  if (!bytes) return 0;
  memcpy(bytes, data + 1, size - 1);
  if (data[0] & 1) {
    hl_code_object_metadata_t md;
    hl_status_t st = hl_code_object_metadata_parse(bytes, size - 1, &md);
    if (!st) {
      check_metadata(&md);
      hl_code_object_metadata_deinitialize(&md);
    }
    check_error(st);
  } else {
    hl_code_object_t object = {.target = (data[0] & 2) ? "gfx90a" : NULL,
                               .data = bytes,
                               .size = size - 1};
    hl_executable_t* executable = NULL;
    hl_status_t st = hl_executable_create(1, &object, &executable);
    if (!st && hl_executable_object_count(executable) == 0) abort();
    hl_executable_release(executable);
    check_error(st);
  }
  free(bytes);
  return 0;
}
