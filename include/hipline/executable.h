// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The executable registry: which kernel code objects this library carries and
// which one each device gets.
//
// The library embeds one GPU code object per distinct target it was built for
// (HIPLINE_GPU_TARGETS) plus the host code object used by the host backend,
// whose target id is "host". Nothing here allocates or touches a device: the
// matching and grouping functions are pure functions over arrays of target-id
// strings, so they can be used (and tested) without devices. Every function
// is thread-safe.
//
// Target ids follow AMD's syntax: a processor name, then optional
// colon-separated features, each with + (on) or - (off):
// "gfx90a", "gfx90a:xnack-", "gfx90a:sramecc+:xnack-". The canonical form
// sorts the features by name. Two ids are *equal* when their canonical forms
// are; "gfx90a:xnack-" and "gfx90a:xnack+" are different targets.
//
// Matching rule (hl_executable_match_target), after the rules of clang's
// target ids: a code object built for target C can run on a device of
// target D when C and D have the same processor and every feature C names
// appears in D with the same sign; a feature C leaves out means "any". So a
// "gfx90a" code object runs on every gfx90a device, and a "gfx90a:xnack-"
// one only on devices that report xnack-. Among the candidates an exact
// (equal) match wins, then the one naming the most features, then the first
// in the list.
#ifndef HIPLINE_EXECUTABLE_H_
#define HIPLINE_EXECUTABLE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hipline/device.h"
#include "hipline/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// Longest target id accepted, terminator included (as
// hl_device_properties_t.target).
#define HL_TARGET_ID_MAX 128

// The target id of the host backend and of the host code object.
#define HL_TARGET_ID_HOST "host"

// Writes the canonical form of |target| into |out| (|capacity| bytes, always
// terminated on success). Returns INVALID_ARGUMENT naming |target| when it is
// not a target id (empty processor, a feature without a sign, a feature named
// twice, more than 8 features), and OUT_OF_RANGE when |capacity| is too small.
HL_API hl_status_t hl_target_id_canonicalize(const char* target, char* out,
                                             size_t capacity);

// Returns true when |a| and |b| are valid target ids with equal canonical
// forms.
HL_API bool hl_target_id_equal(const char* a, const char* b);

// Returns the number of GPU code objects embedded in the library (0 in a
// build without hipcc). The host code object is not counted.
HL_API size_t hl_executable_gpu_target_count(void);

// Returns the canonical target id of embedded GPU code object |index|
// (static storage), or NULL when |index| is out of range.
HL_API const char* hl_executable_gpu_target(size_t index);

// Returns the bytes of embedded GPU code object |index| (a clang offload
// bundle as written by hipcc --genco; static storage, 64-byte aligned) in
// |*out_data| and |*out_size|. OUT_OF_RANGE for a bad |index|.
HL_API hl_status_t hl_executable_gpu_code_object(size_t index,
                                                 const void** out_data,
                                                 size_t* out_size);

// Returns the number of registry targets: every embedded GPU target, then
// "host" last. hl_executable_registry_target(i) lists them; pass that list as
// |built_targets| to match the library's own code objects.
HL_API size_t hl_executable_registry_target_count(void);
HL_API const char* hl_executable_registry_target(size_t index);

// Finds the code object for |device_target| among |built_targets|
// (|built_count| target ids) with the matching rule above and writes its index
// to
// |*out_index|. Returns NOT_FOUND naming |device_target| and listing every
// built target when none matches, and INVALID_ARGUMENT when |device_target|
// or an entry of |built_targets| is not a valid target id.
HL_API hl_status_t hl_executable_match_target(const char* device_target,
                                              const char* const* built_targets,
                                              size_t built_count,
                                              size_t* out_index);

// Groups |count| devices by target id: devices whose target ids are equal
// (union-find over the ids) share a group. Writes each device's group to
// |out_group_of[i]| (|count| entries), groups being numbered 0, 1, ... in
// order of their first device, and the number of groups to
// |*out_group_count|. INVALID_ARGUMENT names the first invalid id.
HL_API hl_status_t
hl_executable_group_targets(const char* const* device_targets, size_t count,
                            size_t* out_group_of, size_t* out_group_count);

// Groups |device_count| devices as hl_executable_group_targets does and
// matches each group's target once against |built_targets|. Writes the
// groups to |out_group_of| (|device_count| entries), the matched code object
// of each group to |out_object_of_group| (room for |device_count| entries;
// the first |*out_group_count| are written) and the group count. When some
// group has no code object the result is NOT_FOUND naming every such target
// with its first device index and listing the built targets; the outputs
// are then unspecified.
HL_API hl_status_t hl_executable_select(
    const char* const* device_targets, size_t device_count,
    const char* const* built_targets, size_t built_count, size_t* out_group_of,
    size_t* out_object_of_group, size_t* out_group_count);

//===----------------------------------------------------------------------===//
// User executables
//===----------------------------------------------------------------------===//
//
// An executable made from the program's own code objects (see
// docs/executables.md). Each code object is tagged with a target id; the
// executable picks one object per device by the matching rule above (the
// first device of each group of equal targets matches, the others reuse
// its choice) and loads it on a device the first time that device
// dispatches from it (lazily, once per device). Kernel signatures come from
// each object's AMDGPU metadata note (host objects describe themselves,
// below). Executables are reference counted and thread-safe.

typedef struct hl_executable_t hl_executable_t;

// The value kinds of kernel arguments, as the AMDGPU metadata names them
// (".value_kind"). Every kind from HL_KERNEL_VALUE_HIDDEN_FIRST on is a
// hidden argument: the runtime fills it, the caller passes nothing for it.
typedef enum hl_kernel_value_kind_e {
  HL_KERNEL_VALUE_BY_VALUE = 0,       // "by_value": a SCALAR argument.
  HL_KERNEL_VALUE_GLOBAL_BUFFER = 1,  // "global_buffer": a BUFFER argument.
  HL_KERNEL_VALUE_UNKNOWN = 2,        // Any other explicit kind (images, ...).
  HL_KERNEL_VALUE_HIDDEN_FIRST = 16,
  HL_KERNEL_VALUE_HIDDEN_GLOBAL_OFFSET_X = 16,  // 8 bytes, 0.
  HL_KERNEL_VALUE_HIDDEN_GLOBAL_OFFSET_Y = 17,
  HL_KERNEL_VALUE_HIDDEN_GLOBAL_OFFSET_Z = 18,
  HL_KERNEL_VALUE_HIDDEN_BLOCK_COUNT_X = 19,  // 4 bytes: grid in blocks.
  HL_KERNEL_VALUE_HIDDEN_BLOCK_COUNT_Y = 20,
  HL_KERNEL_VALUE_HIDDEN_BLOCK_COUNT_Z = 21,
  HL_KERNEL_VALUE_HIDDEN_GROUP_SIZE_X = 22,  // 2 bytes: block in threads.
  HL_KERNEL_VALUE_HIDDEN_GROUP_SIZE_Y = 23,
  HL_KERNEL_VALUE_HIDDEN_GROUP_SIZE_Z = 24,
  HL_KERNEL_VALUE_HIDDEN_REMAINDER_X = 25,  // 2 bytes: 0 (whole blocks).
  HL_KERNEL_VALUE_HIDDEN_REMAINDER_Y = 26,
  HL_KERNEL_VALUE_HIDDEN_REMAINDER_Z = 27,
  HL_KERNEL_VALUE_HIDDEN_GRID_DIMS = 28,         // 2 bytes: 1, 2 or 3.
  HL_KERNEL_VALUE_HIDDEN_DYNAMIC_LDS_SIZE = 29,  // 4 bytes: shared_bytes.
  HL_KERNEL_VALUE_HIDDEN_OTHER = 30,  // Every other hidden kind: zeroed.
} hl_kernel_value_kind_t;

// The host kernel ABI (HL_HOST_KERNEL_ABI_VERSION). A host code object is a
// shared object; each kernel K is an exported function
//   void K(const void* kernarg, const hl_host_launch_t* launch);
// and an exported `const hl_host_kernel_info_t hipline_kernel_K` that
// describes it. |kernarg| is the kernel's argument segment laid out as
// |info.args| says (explicit arguments at their offsets, then hidden ones,
// filled as hl_kernel_value_kind_t says); |launch| is the launch shape. The
// function runs the whole grid on the calling thread and returns when it is
// done; it must not call hipline.
#define HL_HOST_KERNEL_ABI_VERSION 1u

typedef struct hl_host_launch_t {
  uint32_t grid[3];   // Blocks.
  uint32_t block[3];  // Threads per block.
  uint32_t shared_bytes;
} hl_host_launch_t;

typedef void (*hl_host_kernel_entry_t)(const void* kernarg,
                                       const hl_host_launch_t* launch);

typedef struct hl_host_kernel_arg_info_t {
  const char* name;  // May be NULL.
  uint32_t offset;
  uint32_t size;
  hl_kernel_value_kind_t kind;
} hl_host_kernel_arg_info_t;

typedef struct hl_host_kernel_info_t {
  uint32_t abi_version;  // HL_HOST_KERNEL_ABI_VERSION.
  hl_host_kernel_entry_t entry;
  uint32_t kernarg_size;  // Bytes; at most HL_HOST_KERNARG_MAX.
  uint32_t arg_count;     // Explicit arguments first, then hidden ones.
  const hl_host_kernel_arg_info_t* args;
} hl_host_kernel_info_t;

#define HL_HOST_KERNARG_MAX 4096

// One code object of an executable. |target| is its target id ("gfx90a",
// "gfx90a:xnack-", "host"). The bytes are |data|/|size| when |data| is not
// NULL (copied; the caller may free them after the call), else the file at
// |path|. GPU objects are AMDGPU ELF files or clang offload bundles; a
// bundle contributes its entry for |target| (or, when |target| is NULL,
// every AMDGPU entry it holds, each with its own target). An ELF's target
// defaults to the one its metadata names ("amdhsa.target") when |target|
// is NULL; a given |target| must be compatible with it. A "host" object is
// a shared object loaded from |path| (dlopen), following the host kernel
// ABI above.
typedef struct hl_code_object_t {
  const char* target;
  const void* data;
  size_t size;
  const char* path;
} hl_code_object_t;

// Creates an executable from |count| code objects. INVALID_ARGUMENT names
// the object (index and target) that is malformed, lacks metadata, or has
// a target that is not a target id; NOT_FOUND names a bundle without an
// entry for the requested target; UNAVAILABLE a file that cannot be read
// or a shared object that does not load. Reads every object and parses
// its metadata now; loads nothing on a device.
HL_API hl_status_t hl_executable_create(size_t count,
                                        const hl_code_object_t* objects,
                                        hl_executable_t** out_executable);
HL_API void hl_executable_retain(hl_executable_t* executable);
// Releasing the last reference unloads the executable's modules from every
// device it loaded on (each device is retained while a module is loaded).
HL_API void hl_executable_release(hl_executable_t* executable);

// The code objects the executable holds after bundles were expanded: their
// number, and the canonical target of object |index| (owned by the
// executable; NULL when out of range).
HL_API size_t hl_executable_object_count(const hl_executable_t* executable);
HL_API const char* hl_executable_object_target(
    const hl_executable_t* executable, size_t index);

// The object |device| would run, selected (not loaded) now: its index in
// |*out_index|. NOT_FOUND lists the targets offered and the device's.
HL_API hl_status_t hl_executable_select_for_device(hl_executable_t* executable,
                                                   hl_device_t* device,
                                                   size_t* out_index);

// The explicit arguments of kernel |kernel_name| in object |index|: their
// number (hidden arguments are not counted). NOT_FOUND names the kernel
// and lists the object's kernels.
HL_API hl_status_t
hl_executable_kernel_arg_count(const hl_executable_t* executable, size_t index,
                               const char* kernel_name, size_t* out_count);

// The executable of the kernels built into the library (fill_pattern,
// verify_pattern, copy, spin, axpy; hipline/dispatch.h). Its objects are
// the registry's (hl_executable_registry_target: every embedded GPU code
// object, then "host"), selected once per group of equal device targets
// and loaded lazily per device, as for every executable. Its kernels'
// arguments are checked against the kernel table as hl_queue_dispatch
// documents (which is hl_queue_dispatch_executable with this executable);
// hl_executable_kernel_arg_count gives their parameter counts for every
// object index. Borrowed and static: it lives as long as the process, and
// retain and release leave it alone. Thread-safe.
HL_API hl_executable_t* hl_executable_builtin(void);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_EXECUTABLE_H_
