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

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_EXECUTABLE_H_
