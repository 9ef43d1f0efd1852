// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Readers for the code objects users hand to hl_executable_create: clang
// offload bundles, AMDGPU ELF files and their AMDGPU metadata note.
//
// Everything here is a pure function over bytes: nothing is loaded and no
// device is touched. Sizes and offsets are checked against the buffer, so a
// truncated or corrupt object fails with INVALID_ARGUMENT naming what is
// wrong instead of reading out of bounds.
#ifndef HIPLINE_RUNTIME_EXECUTABLE_CODE_OBJECT_H_
#define HIPLINE_RUNTIME_EXECUTABLE_CODE_OBJECT_H_

#include <stddef.h>
#include <stdint.h>

#include "hipline/executable.h"
#include "hipline/status.h"

// One entry of a clang offload bundle: its id ("hipv4-amdgcn-amd-amdhsa--
// gfx90a:xnack-", "host-x86_64-unknown-linux") and its bytes (borrowed from
// the bundle).
typedef struct hl_bundle_entry_t {
  char id[HL_TARGET_ID_MAX + 64];
  const void* data;
  size_t size;
} hl_bundle_entry_t;

// True when |data| starts with the offload bundle magic
// "__CLANG_OFFLOAD_BUNDLE__".
bool hl_code_object_is_bundle(const void* data, size_t size);

// True when |data| is a 64-bit little-endian ELF for EM_AMDGPU.
bool hl_code_object_is_amdgpu_elf(const void* data, size_t size);

// Reads the entries of the bundle |data|: the magic, a uint64 entry count,
// then per entry uint64 offset, uint64 size, uint64 id length and the id.
// Calls |visit| for every entry; a non-NULL status from |visit| stops the
// walk and is returned. INVALID_ARGUMENT for a malformed bundle.
typedef hl_status_t (*hl_bundle_visit_fn_t)(void* user,
                                            const hl_bundle_entry_t* entry);
hl_status_t hl_code_object_bundle_walk(const void* data, size_t size,
                                       hl_bundle_visit_fn_t visit, void* user);

// The target id in a bundle entry id or a metadata "amdhsa.target": what
// follows "amdgcn-amd-amdhsa--" (written to |out|, |capacity| bytes). False
// for ids that name no AMDGPU target (the bundle's host entry).
bool hl_code_object_bundle_target(const char* id, char* out, size_t capacity);

// Returns the descriptor of the NT_AMDGPU_METADATA note ("AMDGPU", type 32)
// of the AMDGPU ELF |data| in |*out_desc| and |*out_size| (borrowed).
// NOT_FOUND when the ELF has no such note; INVALID_ARGUMENT when the ELF's
// headers do not fit in |size|.
hl_status_t hl_code_object_metadata_note(const void* data, size_t size,
                                         const void** out_desc,
                                         size_t* out_size);

// A kernel signature as the AMDGPU metadata states it.
#define HL_KERNEL_SIGNATURE_MAX_ARGS 64
#define HL_KERNEL_NAME_MAX 128

typedef struct hl_kernel_arg_desc_t {
  char name[64];  // ".name"; empty when the metadata has none.
  uint32_t offset;
  uint32_t size;
  hl_kernel_value_kind_t kind;
  bool is_const;  // ".is_const" (a pointer to const data).
} hl_kernel_arg_desc_t;

typedef struct hl_kernel_signature_t {
  char name[HL_KERNEL_NAME_MAX];  // ".name".
  uint32_t kernarg_size;          // ".kernarg_segment_size".
  uint32_t kernarg_align;         // ".kernarg_segment_align".
  uint32_t arg_count;             // Every argument, hidden ones included.
  uint32_t explicit_count;        // Those before the first hidden one.
  hl_kernel_arg_desc_t args[HL_KERNEL_SIGNATURE_MAX_ARGS];
} hl_kernel_signature_t;

typedef struct hl_code_object_metadata_t {
  char target[HL_TARGET_ID_MAX];  // From "amdhsa.target"; may be empty.
  uint32_t kernel_count;
  hl_kernel_signature_t* kernels;  // |kernel_count|, allocated with malloc.
} hl_code_object_metadata_t;

// Parses the msgpack metadata |desc| (the note's descriptor) into
// |out_metadata|. INVALID_ARGUMENT naming the kernel and field for
// metadata that is not what the AMDGPU code object spec describes; an
// unknown value kind is HL_KERNEL_VALUE_UNKNOWN, not an error (the
// dispatch refuses it). Free with hl_code_object_metadata_deinitialize.
hl_status_t hl_code_object_metadata_parse(
    const void* desc, size_t size, hl_code_object_metadata_t* out_metadata);

// hl_code_object_metadata_note followed by _parse.
hl_status_t hl_code_object_read_metadata(
    const void* elf, size_t size, hl_code_object_metadata_t* out_metadata);

void hl_code_object_metadata_deinitialize(hl_code_object_metadata_t* metadata);

// The name of value kind |kind> as the metadata spells it ("global_buffer").
const char* hl_kernel_value_kind_name(hl_kernel_value_kind_t kind);

#endif  // HIPLINE_RUNTIME_EXECUTABLE_CODE_OBJECT_H_
