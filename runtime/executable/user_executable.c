// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// User executables (hipline/executable.h, "User executables").
//
// An executable owns its code objects: GPU ones as copies of their ELF
// bytes (a bundle contributes the ELF of an entry) with their parsed
// metadata; host ones as dlopen handles, whose kernels are described by
// the `hipline_kernel_<name>` symbols they export (looked up on first use
// and kept). Per device it keeps one entry: the device (retained), the
// object chosen for it, the loaded module and the functions resolved so
// far. One mutex guards the device entries, the per-target selections and
// the host kernel cache; loads happen under it, so concurrent first
// dispatches on a device load once.
//
// The built-in executable (hl_executable_builtin) is a static instance of
// the same type marked |builtin|: its objects are the registry's, its
// per-device state is the module cache's (executable_cache.h) and its
// kernels are the kernel table's (builtin_kernels.h). It is never freed.
#include "runtime/executable/user_executable.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "runtime/executable/builtin_kernels.h"
#include "runtime/executable/executable_cache.h"
#include "runtime/executable/target_id.h"
#include "runtime/timeline/timeline_internal.h"

typedef struct hl_host_kernel_slot_t {
  hl_kernel_signature_t signature;
  hl_host_kernel_entry_t entry;
} hl_host_kernel_slot_t;

typedef struct hl_exec_object_t {
  char target[HL_TARGET_ID_MAX];  // Canonical.
  void* image;                    // GPU: the ELF (owned).
  size_t size;
  hl_code_object_metadata_t metadata;  // GPU only.
  void* library;                       // Host: the dlopen handle.
  size_t host_kernel_count;
  hl_host_kernel_slot_t** host_kernels;  // Host: looked up so far (owned).
} hl_exec_object_t;

typedef struct hl_exec_device_t {
  hl_device_t* device;  // Retained.
  size_t object;
  hl_backend_module_t* module;
  hl_backend_function_t** functions;  // Per metadata kernel (GPU objects).
} hl_exec_device_t;

typedef struct hl_exec_selection_t {
  char target[HL_TARGET_ID_MAX];  // A device target, canonical.
  size_t object;
} hl_exec_selection_t;

struct hl_executable_t {
  atomic_int ref_count;
  bool builtin;  // hl_executable_builtin(): static, no objects of its own.
  mtx_t mutex;
  size_t object_count;
  hl_exec_object_t* objects;
  size_t device_count;
  hl_exec_device_t* devices;
  size_t selection_count;
  hl_exec_selection_t* selections;
};

static hl_executable_t hl_builtin_executable_ = {.builtin = true};

hl_executable_t* hl_executable_builtin(void) { return &hl_builtin_executable_; }

bool hl_executable_is_builtin(const hl_executable_t* executable) {
  return executable == &hl_builtin_executable_;
}

static const char* hl_object_kind(const hl_exec_object_t* o) {
  return o->library ? "host shared object" : "AMDGPU code object";
}

//===----------------------------------------------------------------------===//
// Creation
//===----------------------------------------------------------------------===//

static hl_status_t hl_read_file(const char* path, void** out_data,
                                size_t* out_size) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    return HL_MAKE_STATUS(HL_STATUS_UNAVAILABLE, "cannot open '%s'", path);
  }
  hl_status_t st = NULL;
  long size = -1;
  if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
  void* data = size > 0 ? malloc((size_t)size) : NULL;
  if (size <= 0 || !data || fseek(f, 0, SEEK_SET) != 0 ||
      fread(data, 1, (size_t)size, f) != (size_t)size) {
    st = HL_MAKE_STATUS(HL_STATUS_UNAVAILABLE, "cannot read '%s' (%ld bytes)",
                        path, size);
    free(data);
    data = NULL;
  }
  fclose(f);
  *out_data = data;
  *out_size = st ? 0 : (size_t)size;
  return st;
}

static hl_status_t hl_executable_grow(hl_executable_t* e) {
  hl_exec_object_t* grown =
      realloc(e->objects, (e->object_count + 1) * sizeof(*grown));
  if (!grown) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "executable objects");
  }
  e->objects = grown;
  memset(&grown[e->object_count], 0, sizeof(*grown));
  return NULL;
}

// Adds the AMDGPU ELF |elf| as an object for |target| (NULL: the target
// its metadata names).
static hl_status_t hl_executable_add_elf(hl_executable_t* e, const char* target,
                                         const void* elf, size_t size) {
  HL_RETURN_IF_ERROR_PLAIN(hl_executable_grow(e));
  hl_exec_object_t* o = &e->objects[e->object_count];
  HL_RETURN_IF_ERROR_PLAIN(
      hl_code_object_read_metadata(elf, size, &o->metadata));
  hl_status_t st = NULL;
  const char* own = o->metadata.target;
  if (!target && !own[0]) {
    st = HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                        "the code object names no target (amdhsa.target) "
                        "and none was given");
  } else if (target && own[0]) {
    // The object must run on devices of |target|.
    hl_target_id_t object_id, tag_id;
    st = hl_target_id_parse(own, &object_id);
    if (!st) st = hl_target_id_parse(target, &tag_id);
    if (!st && !hl_target_id_compatible(&object_id, &tag_id)) {
      st = HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "the code object is built for '%s', which does not "
                          "run on target '%s'",
                          own, target);
    }
  }
  if (!st) {
    st = hl_target_id_canonicalize(target ? target : own, o->target,
                                   sizeof(o->target));
  }
  if (!st) {
    o->image = aligned_alloc(64, (size + 63) & ~(size_t)63);
    if (!o->image) {
      st = HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "a %zu-byte code object", size);
    }
  }
  if (st) {
    hl_code_object_metadata_deinitialize(&o->metadata);
    return st;
  }
  memcpy(o->image, elf, size);
  o->size = size;
  e->object_count++;
  return NULL;
}

typedef struct hl_bundle_pick_t {
  hl_executable_t* executable;
  const char* target;  // NULL: every AMDGPU entry.
  size_t added;
  char offered[512];  // The AMDGPU entries' targets, for NOT_FOUND.
} hl_bundle_pick_t;

static hl_status_t hl_bundle_visit(void* user, const hl_bundle_entry_t* e) {
  hl_bundle_pick_t* pick = user;
  char target[HL_TARGET_ID_MAX];
  if (!hl_code_object_bundle_target(e->id, target, sizeof(target)) ||
      e->size == 0) {
    return NULL;  // The host entry, or an empty one.
  }
  size_t used = strlen(pick->offered);
  snprintf(pick->offered + used, sizeof(pick->offered) - used, "%s'%s'",
           used ? ", " : "", target);
  if (pick->target && !hl_target_id_equal(pick->target, target)) return NULL;
  HL_RETURN_IF_ERROR(hl_executable_add_elf(pick->executable,
                                           pick->target ? pick->target : target,
                                           e->data, e->size),
                     "bundle entry '%s'", e->id);
  pick->added++;
  return NULL;
}

static hl_status_t hl_executable_add_bundle(hl_executable_t* e,
                                            const char* target,
                                            const void* data, size_t size) {
  hl_bundle_pick_t pick = {.executable = e, .target = target};
  HL_RETURN_IF_ERROR_PLAIN(
      hl_code_object_bundle_walk(data, size, hl_bundle_visit, &pick));
  if (pick.added == 0) {
    return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                          "the offload bundle has no AMDGPU entry for '%s' "
                          "(entries: %s)",
                          target ? target : "any target",
                          pick.offered[0] ? pick.offered : "none");
  }
  return NULL;
}

static hl_status_t hl_executable_add_host(hl_executable_t* e,
                                          const char* path) {
  if (!path) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "a host code object is a shared object: give its "
                          "path");
  }
  HL_RETURN_IF_ERROR_PLAIN(hl_executable_grow(e));
  hl_exec_object_t* o = &e->objects[e->object_count];
  o->library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!o->library) {
    const char* why = dlerror();
    return HL_MAKE_STATUS(HL_STATUS_UNAVAILABLE, "dlopen('%s'): %s", path,
                          why ? why : "failed");
  }
  snprintf(o->target, sizeof(o->target), "%s", HL_TARGET_ID_HOST);
  e->object_count++;
  return NULL;
}

static hl_status_t hl_executable_add(hl_executable_t* e,
                                     const hl_code_object_t* object) {
  if (object->target && hl_target_id_equal(object->target, HL_TARGET_ID_HOST)) {
    return hl_executable_add_host(e, object->path);
  }
  if (object->target) {
    char canonical[HL_TARGET_ID_MAX];
    HL_RETURN_IF_ERROR_PLAIN(hl_target_id_canonicalize(
        object->target, canonical, sizeof(canonical)));
  }
  const void* data = object->data;
  size_t size = object->size;
  void* owned = NULL;
  if (!data) {
    if (!object->path) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "neither data nor path is given");
    }
    HL_RETURN_IF_ERROR_PLAIN(hl_read_file(object->path, &owned, &size));
    data = owned;
  }
  hl_status_t st = NULL;
  if (hl_code_object_is_bundle(data, size)) {
    st = hl_executable_add_bundle(e, object->target, data, size);
  } else if (hl_code_object_is_amdgpu_elf(data, size)) {
    st = hl_executable_add_elf(e, object->target, data, size);
  } else {
    st = HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                        "the %zu bytes are neither an AMDGPU ELF nor a clang "
                        "offload bundle",
                        size);
  }
  free(owned);
  return st;
}

static void hl_executable_destroy(hl_executable_t* e);

hl_status_t hl_executable_create(size_t count, const hl_code_object_t* objects,
                                 hl_executable_t** out_executable) {
  if (!out_executable || (count && !objects) || count == 0) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_executable_create: no code objects or "
                          "out_executable is NULL");
  }
  *out_executable = NULL;
  hl_executable_t* e = calloc(1, sizeof(*e));
  if (!e || mtx_init(&e->mutex, mtx_plain) != thrd_success) {
    free(e);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "an executable");
  }
  atomic_init(&e->ref_count, 1);
  for (size_t i = 0; i < count; ++i) {
    hl_status_t st = hl_executable_add(e, &objects[i]);
    if (st) {
      hl_executable_destroy(e);
      return hl_status_annotate(
          st, "hl_executable_create: code object %zu (target '%s'%s%s)", i,
          objects[i].target ? objects[i].target : "from the object",
          objects[i].path ? ", " : "", objects[i].path ? objects[i].path : "");
    }
  }
  *out_executable = e;
  return NULL;
}

//===----------------------------------------------------------------------===//
// Lifetime and queries
//===----------------------------------------------------------------------===//

static void hl_executable_destroy(hl_executable_t* e) {
  for (size_t i = 0; i < e->device_count; ++i) {
    hl_exec_device_t* d = &e->devices[i];
    if (d->module) {
      hl_backend_t* backend = d->device->backend;
      backend->vtable->module_unload(backend, d->module);
    }
    free(d->functions);
    hl_device_release(d->device);
  }
  for (size_t i = 0; i < e->object_count; ++i) {
    hl_exec_object_t* o = &e->objects[i];
    free(o->image);
    hl_code_object_metadata_deinitialize(&o->metadata);
    for (size_t k = 0; k < o->host_kernel_count; ++k) free(o->host_kernels[k]);
    free(o->host_kernels);
    if (o->library) dlclose(o->library);
  }
  free(e->devices);
  free(e->objects);
  free(e->selections);
  mtx_destroy(&e->mutex);
  free(e);
}

void hl_executable_retain(hl_executable_t* executable) {
  if (executable && !executable->builtin) {
    atomic_fetch_add(&executable->ref_count, 1);
  }
}

void hl_executable_release(hl_executable_t* executable) {
  if (executable && !executable->builtin &&
      atomic_fetch_sub(&executable->ref_count, 1) == 1) {
    hl_executable_destroy(executable);
  }
}

bool hl_executable_release_unless_last(hl_executable_t* executable) {
  if (!executable || executable->builtin) return true;
  int count = atomic_load(&executable->ref_count);
  while (count > 1) {
    if (atomic_compare_exchange_weak(&executable->ref_count, &count,
                                     count - 1)) {
      return true;
    }
  }
  return false;
}

size_t hl_executable_object_count(const hl_executable_t* executable) {
  if (executable && executable->builtin) {
    return hl_executable_registry_target_count();
  }
  return executable ? executable->object_count : 0;
}

const char* hl_executable_object_target(const hl_executable_t* executable,
                                        size_t index) {
  if (executable && executable->builtin) {
    return hl_executable_registry_target(index);
  }
  if (!executable || index >= executable->object_count) return NULL;
  return executable->objects[index].target;
}

//===----------------------------------------------------------------------===//
// Selection and loading (under |mutex|)
//===----------------------------------------------------------------------===//

// The object for devices of |device_target|: matched once per canonical
// target, then reused.
static hl_status_t hl_executable_select_locked(hl_executable_t* e,
                                               const char* device_target,
                                               size_t* out_index) {
  char canonical[HL_TARGET_ID_MAX];
  HL_RETURN_IF_ERROR_PLAIN(
      hl_target_id_canonicalize(device_target, canonical, sizeof(canonical)));
  for (size_t i = 0; i < e->selection_count; ++i) {
    if (strcmp(e->selections[i].target, canonical) == 0) {
      *out_index = e->selections[i].object;
      return NULL;
    }
  }
  const char** targets = calloc(e->object_count, sizeof(*targets));
  if (!targets) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "a target list");
  }
  for (size_t i = 0; i < e->object_count; ++i) {
    targets[i] = e->objects[i].target;
  }
  size_t index = 0;
  hl_status_t st =
      hl_executable_match_target(canonical, targets, e->object_count, &index);
  free(targets);
  HL_RETURN_IF_ERROR_PLAIN(st);
  hl_exec_selection_t* grown =
      realloc(e->selections, (e->selection_count + 1) * sizeof(*grown));
  if (!grown) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "a selection");
  }
  e->selections = grown;
  snprintf(grown[e->selection_count].target, HL_TARGET_ID_MAX, "%s", canonical);
  grown[e->selection_count].object = index;
  e->selection_count++;
  *out_index = index;
  return NULL;
}

static hl_status_t hl_executable_select_device_locked(hl_executable_t* e,
                                                      hl_device_t* device,
                                                      size_t* out_index) {
  HL_RETURN_IF_ERROR(
      hl_executable_select_locked(e, device->props.target, out_index),
      "executable for device %d (%s backend, target '%s')",
      device->props.ordinal, hl_backend_kind_name(device->backend->kind),
      device->props.target);
  return NULL;
}

// The built-in executable's object for |device|: the registry target the
// module cache selected for its group.
static hl_status_t hl_builtin_select(hl_device_t* device, size_t* out_index) {
  uint32_t group = 0;
  const char* target = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_executable_device_group(device, &group, &target));
  size_t count = hl_executable_registry_target_count();
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(hl_executable_registry_target(i), target) == 0) {
      *out_index = i;
      return NULL;
    }
  }
  return HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                        "the module cache selected '%s', which the registry "
                        "does not list",
                        target);
}

hl_status_t hl_executable_select_for_device(hl_executable_t* executable,
                                            hl_device_t* device,
                                            size_t* out_index) {
  if (!executable || !device || !out_index) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_executable_select_for_device: NULL argument");
  }
  if (executable->builtin) return hl_builtin_select(device, out_index);
  mtx_lock(&executable->mutex);
  hl_status_t st =
      hl_executable_select_device_locked(executable, device, out_index);
  mtx_unlock(&executable->mutex);
  return st;
}

// Loads object |index| on |device| and records the device entry.
static hl_status_t hl_executable_load_locked(hl_executable_t* e,
                                             hl_device_t* device, size_t index,
                                             hl_exec_device_t** out_entry) {
  hl_exec_object_t* o = &e->objects[index];
  hl_exec_device_t* grown =
      realloc(e->devices, (e->device_count + 1) * sizeof(*grown));
  if (!grown) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "a device entry");
  }
  e->devices = grown;
  hl_exec_device_t* d = &grown[e->device_count];
  memset(d, 0, sizeof(*d));
  size_t slots = o->library ? 1 : o->metadata.kernel_count;
  d->functions = calloc(slots ? slots : 1, sizeof(*d->functions));
  if (!d->functions) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "function slots");
  }
  hl_backend_t* backend = device->backend;
  const void* image =
      o->library ? (const void*)&hl_user_host_trampoline_object : o->image;
  size_t size = o->library ? sizeof(hl_user_host_trampoline_object) : o->size;
  hl_status_t st =
      backend->vtable->module_load(backend, image, size, &d->module);
  if (!st && o->library) {
    st = backend->vtable->module_get_function(
        backend, d->module, hl_user_host_trampoline_object.kernels[0].name,
        &d->functions[0]);
  }
  if (st) {
    if (d->module) backend->vtable->module_unload(backend, d->module);
    free(d->functions);
    return hl_status_annotate(st, "loading the %s for '%s' on device %d",
                              hl_object_kind(o), o->target,
                              device->props.ordinal);
  }
  d->object = index;
  d->device = device;
  hl_device_retain(device);
  e->device_count++;
  *out_entry = d;
  return NULL;
}

static hl_status_t hl_executable_device_locked(hl_executable_t* e,
                                               hl_device_t* device,
                                               hl_exec_device_t** out_entry) {
  for (size_t i = 0; i < e->device_count; ++i) {
    if (e->devices[i].device == device) {
      *out_entry = &e->devices[i];
      return NULL;
    }
  }
  size_t index = 0;
  HL_RETURN_IF_ERROR_PLAIN(
      hl_executable_select_device_locked(e, device, &index));
  return hl_executable_load_locked(e, device, index, out_entry);
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

// Lists the kernels of GPU object |o| in |out| for NOT_FOUND messages.
static void hl_object_kernel_list(const hl_exec_object_t* o, char* out,
                                  size_t capacity) {
  size_t used = 0;
  out[0] = '\0';
  for (uint32_t i = 0; i < o->metadata.kernel_count && used < capacity; ++i) {
    int n = snprintf(out + used, capacity - used, "%s%s", i ? ", " : "",
                     o->metadata.kernels[i].name);
    used += n > 0 ? (size_t)n : 0;
  }
}

static hl_status_t hl_gpu_kernel_index(const hl_exec_object_t* o,
                                       const char* name, uint32_t* out) {
  for (uint32_t i = 0; i < o->metadata.kernel_count; ++i) {
    if (strcmp(o->metadata.kernels[i].name, name) == 0) {
      *out = i;
      return NULL;
    }
  }
  char list[512];
  hl_object_kernel_list(o, list, sizeof(list));
  return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                        "no kernel named '%s' in the '%s' code object "
                        "(kernels: %s)",
                        name, o->target, list[0] ? list : "none");
}

// Checks a host kernel's exported description and turns it into a
// signature.
static hl_status_t hl_host_signature(const char* name,
                                     const hl_host_kernel_info_t* info,
                                     hl_kernel_signature_t* out) {
  memset(out, 0, sizeof(*out));
  if (info->abi_version != HL_HOST_KERNEL_ABI_VERSION || !info->entry ||
      info->kernarg_size > HL_HOST_KERNARG_MAX ||
      info->arg_count > HL_KERNEL_SIGNATURE_MAX_ARGS ||
      (info->arg_count && !info->args) || strlen(name) >= sizeof(out->name)) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "host kernel '%s': hipline_kernel_%s is not a "
                          "valid hl_host_kernel_info_t (ABI version %u, "
                          "%u-byte kernarg, %u arguments)",
                          name, name, info->abi_version, info->kernarg_size,
                          info->arg_count);
  }
  snprintf(out->name, sizeof(out->name), "%s", name);
  out->kernarg_size = info->kernarg_size;
  out->kernarg_align = 8;
  out->arg_count = info->arg_count;
  out->explicit_count = info->arg_count;
  for (uint32_t i = 0; i < info->arg_count; ++i) {
    const hl_host_kernel_arg_info_t* a = &info->args[i];
    if ((uint64_t)a->offset + a->size > info->kernarg_size) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "host kernel '%s' argument %u at [%u, +%u) "
                            "exceeds its %u-byte kernarg segment",
                            name, i, a->offset, a->size, info->kernarg_size);
    }
    snprintf(out->args[i].name, sizeof(out->args[i].name), "%s",
             a->name ? a->name : "");
    out->args[i].offset = a->offset;
    out->args[i].size = a->size;
    out->args[i].kind = a->kind;
    if (a->kind >= HL_KERNEL_VALUE_HIDDEN_FIRST &&
        out->explicit_count == info->arg_count) {
      out->explicit_count = i;
    }
  }
  return NULL;
}

static hl_status_t hl_host_kernel_slot(hl_exec_object_t* o, const char* name,
                                       hl_host_kernel_slot_t** out) {
  for (size_t i = 0; i < o->host_kernel_count; ++i) {
    if (strcmp(o->host_kernels[i]->signature.name, name) == 0) {
      *out = o->host_kernels[i];
      return NULL;
    }
  }
  char symbol[HL_KERNEL_NAME_MAX + 32];
  snprintf(symbol, sizeof(symbol), "hipline_kernel_%s", name);
  const hl_host_kernel_info_t* info = dlsym(o->library, symbol);
  if (!info) {
    return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                          "no kernel named '%s' in the host code object (it "
                          "exports no %s)",
                          name, symbol);
  }
  hl_host_kernel_slot_t* slot = calloc(1, sizeof(*slot));
  hl_host_kernel_slot_t** grown =
      realloc(o->host_kernels, (o->host_kernel_count + 1) * sizeof(*grown));
  if (!slot || !grown) {
    free(slot);
    if (grown) o->host_kernels = grown;
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "a host kernel");
  }
  o->host_kernels = grown;
  hl_status_t st = hl_host_signature(name, info, &slot->signature);
  if (st) {
    free(slot);
    return st;
  }
  slot->entry = info->entry;
  grown[o->host_kernel_count++] = slot;
  *out = slot;
  return NULL;
}

static hl_status_t hl_user_kernel_locked(hl_executable_t* e,
                                         hl_device_t* device, const char* name,
                                         hl_executable_kernel_t* out) {
  hl_exec_device_t* d = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_executable_device_locked(e, device, &d));
  hl_exec_object_t* o = &e->objects[d->object];
  out->target = o->target;
  if (o->library) {
    hl_host_kernel_slot_t* slot = NULL;
    HL_RETURN_IF_ERROR_PLAIN(hl_host_kernel_slot(o, name, &slot));
    out->signature = &slot->signature;
    out->host_entry = slot->entry;
    out->function = d->functions[0];
    return NULL;
  }
  uint32_t k = 0;
  HL_RETURN_IF_ERROR_PLAIN(hl_gpu_kernel_index(o, name, &k));
  if (!d->functions[k]) {
    hl_backend_t* backend = device->backend;
    HL_RETURN_IF_ERROR(backend->vtable->module_get_function(
                           backend, d->module, name, &d->functions[k]),
                       "resolving kernel '%s' in the '%s' code object", name,
                       o->target);
  }
  out->signature = &o->metadata.kernels[k];
  out->host_entry = NULL;
  out->function = d->functions[k];
  return NULL;
}

// A kernel of the built-in executable: the device's cached module.
static hl_status_t hl_builtin_kernel(hl_device_t* device, const char* name,
                                     hl_executable_kernel_t* out) {
  hl_kernel_id_t id = HL_KERNEL_COUNT;
  HL_RETURN_IF_ERROR_PLAIN(hl_builtin_kernel_lookup(name, &id));
  const hl_executable_module_t* module = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_executable_device_module(device, &module));
  out->signature = hl_builtin_kernel_signature(id);
  out->function = module->functions[id];
  out->host_entry = NULL;
  out->target = module->target;
  out->builtin = id;
  return NULL;
}

hl_status_t hl_executable_kernel_resolve(hl_executable_t* executable,
                                         hl_device_t* device, const char* name,
                                         hl_executable_kernel_t* out_kernel) {
  if (executable->builtin) return hl_builtin_kernel(device, name, out_kernel);
  out_kernel->builtin = HL_KERNEL_COUNT;
  mtx_lock(&executable->mutex);
  hl_status_t st = hl_user_kernel_locked(executable, device, name, out_kernel);
  mtx_unlock(&executable->mutex);
  return st;
}

hl_status_t hl_executable_kernel_arg_count(const hl_executable_t* executable,
                                           size_t index,
                                           const char* kernel_name,
                                           size_t* out_count) {
  if (!executable || !kernel_name || !out_count ||
      index >= hl_executable_object_count(executable)) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "hl_executable_kernel_arg_count: NULL argument or "
                          "object index %zu out of range",
                          index);
  }
  if (executable->builtin) {
    hl_kernel_id_t id = HL_KERNEL_COUNT;
    HL_RETURN_IF_ERROR_PLAIN(hl_builtin_kernel_lookup(kernel_name, &id));
    *out_count = hl_builtin_kernel_signature(id)->explicit_count;
    return NULL;
  }
  hl_executable_t* e = (hl_executable_t*)executable;
  hl_exec_object_t* o = &e->objects[index];
  mtx_lock(&e->mutex);
  hl_status_t st = NULL;
  if (o->library) {
    hl_host_kernel_slot_t* slot = NULL;
    st = hl_host_kernel_slot(o, kernel_name, &slot);
    if (!st) *out_count = slot->signature.explicit_count;
  } else {
    uint32_t k = 0;
    st = hl_gpu_kernel_index(o, kernel_name, &k);
    if (!st) *out_count = o->metadata.kernels[k].explicit_count;
  }
  mtx_unlock(&e->mutex);
  return st;
}

//===----------------------------------------------------------------------===//
// The host trampoline
//===----------------------------------------------------------------------===//

// params[0] points to the entry, params[1] to the kernarg segment's address.
static void hl_user_host_trampoline(void** params,
                                    const hl_launch_config_t* config) {
  hl_host_kernel_entry_t entry;
  const void* kernarg;
  memcpy(&entry, params[0], sizeof(entry));
  memcpy(&kernarg, params[1], sizeof(kernarg));
  hl_host_launch_t launch = {
      {config->grid.x, config->grid.y, config->grid.z},
      {config->block.x, config->block.y, config->block.z},
      config->shared_bytes};
  entry(kernarg, &launch);
}

static const hl_host_kernel_t hl_user_host_trampoline_kernel = {
    .name = "hipline.user_host_kernel",
    .fn = hl_user_host_trampoline,
    .param_count = 2,
    .param_sizes = {sizeof(hl_host_kernel_entry_t), sizeof(void*)},
};

const hl_host_code_object_t hl_user_host_trampoline_object = {
    .magic = HL_HOST_CODE_OBJECT_MAGIC,
    .kernel_count = 1,
    .kernels = &hl_user_host_trampoline_kernel,
};
