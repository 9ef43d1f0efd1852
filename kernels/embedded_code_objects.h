// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The GPU code objects compiled into the library at build time.
//
// kernels/CMakeLists.txt compiles hipline_kernels.hip once per distinct
// target in HIPLINE_GPU_TARGETS that a device compiler can build and embeds
// each result as one entry here: a bare AMDGPU ELF from a plain clang, or a
// clang offload bundle from hipcc. A build without either has no entries. The
// registry in runtime/executable/ is the only intended reader.
#ifndef HIPLINE_KERNELS_EMBEDDED_CODE_OBJECTS_H_
#define HIPLINE_KERNELS_EMBEDDED_CODE_OBJECTS_H_

#include <stddef.h>
#include <stdint.h>

typedef struct hl_embedded_code_object_t {
  // Canonical target id the object was built for: the processor, then its
  // feature flags sorted by name ("gfx90a", "gfx90a:sramecc+:xnack-").
  const char* target;
  // The bytes the device compiler wrote, 64-byte aligned; static storage.
  const uint8_t* data;
  size_t size;
} hl_embedded_code_object_t;

// The embedded code objects, |hl_embedded_code_object_count| of them, in the
// order their targets first appear in HIPLINE_GPU_TARGETS.
extern const hl_embedded_code_object_t* const hl_embedded_code_objects[];
extern const size_t hl_embedded_code_object_count;

#endif  // HIPLINE_KERNELS_EMBEDDED_CODE_OBJECTS_H_
