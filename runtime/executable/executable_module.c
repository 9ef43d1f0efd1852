// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "runtime/executable/executable_module.h"

#include <string.h>

#include "kernels/embedded_code_objects.h"
#include "kernels/host/host_kernels.h"

static const char* const hl_kernel_names_[HL_KERNEL_COUNT] = {
#define HL_KERNEL_NAME_(ID, name, count, types) [HL_KERNEL_##ID] = #name,
    HL_KERNEL_TABLE(HL_KERNEL_NAME_)
#undef HL_KERNEL_NAME_
};

hl_kernel_id_t hl_kernel_id_from_name(const char* name) {
  for (int i = 0; i < HL_KERNEL_COUNT; ++i) {
    if (strcmp(hl_kernel_names_[i], name) == 0) return (hl_kernel_id_t)i;
  }
  return HL_KERNEL_COUNT;
}

const char* hl_kernel_name(hl_kernel_id_t id) {
  if ((int)id < 0 || id >= HL_KERNEL_COUNT) return NULL;
  return hl_kernel_names_[id];
}

// Finds the image for |device_target| among every code object the library
// has, in the registry's order (hl_executable_registry_target): the embedded
// GPU code objects, then the host code object for target "host".
static hl_status_t hl_executable_find_image(const char* device_target,
                                            const void** out_image,
                                            size_t* out_size,
                                            const char** out_target) {
  const char* targets[65];
  size_t count = hl_executable_registry_target_count();
  if (count > sizeof(targets) / sizeof(targets[0])) {
    return HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                          "the registry lists %zu targets; at most %zu fit",
                          count, sizeof(targets) / sizeof(targets[0]));
  }
  for (size_t i = 0; i < count; ++i) {
    targets[i] = hl_executable_registry_target(i);
  }
  size_t index = 0;
  HL_RETURN_IF_ERROR_PLAIN(
      hl_executable_match_target(device_target, targets, count, &index));
  if (index < hl_embedded_code_object_count) {
    *out_image = hl_embedded_code_objects[index]->data;
    *out_size = hl_embedded_code_objects[index]->size;
  } else {
    *out_image = &hl_host_kernels_code_object;
    *out_size = sizeof(hl_host_kernels_code_object);
  }
  *out_target = targets[index];
  return hl_ok_status();
}

hl_status_t hl_executable_module_initialize(
    hl_backend_t* backend, const char* device_target,
    hl_executable_module_t* out_module) {
  memset(out_module, 0, sizeof(*out_module));
  const void* image = NULL;
  size_t size = 0;
  const char* target = NULL;
  hl_device_properties_t props;
  // The backend says which code object it takes through its target: a GPU
  // its target id, the host backend "host".
  if (device_target == NULL) {
    HL_RETURN_IF_ERROR(backend->vtable->query_properties(backend, &props),
                       "loading kernels");
    device_target = props.target;
  }
  HL_RETURN_IF_ERROR(
      hl_executable_find_image(device_target, &image, &size, &target),
      "loading kernels");

  hl_backend_module_t* module = NULL;
  HL_RETURN_IF_ERROR(
      backend->vtable->module_load(backend, image, size, &module),
      "loading the %s code object (%zu bytes)", target, size);
  for (int i = 0; i < HL_KERNEL_COUNT; ++i) {
    hl_status_t status = backend->vtable->module_get_function(
        backend, module, hl_kernel_names_[i], &out_module->functions[i]);
    if (status != NULL) {
      backend->vtable->module_unload(backend, module);
      memset(out_module, 0, sizeof(*out_module));
      return hl_status_annotate(status,
                                "resolving kernel '%s' in the %s code object",
                                hl_kernel_names_[i], target);
    }
  }
  out_module->backend = backend;
  out_module->module = module;
  out_module->target = target;
  return hl_ok_status();
}

void hl_executable_module_deinitialize(hl_executable_module_t* module) {
  if (module->module != NULL) {
    module->backend->vtable->module_unload(module->backend, module->module);
  }
  memset(module, 0, sizeof(*module));
}

hl_status_t hl_executable_module_lookup(const hl_executable_module_t* module,
                                        const char* name,
                                        hl_backend_function_t** out_function) {
  hl_kernel_id_t id = hl_kernel_id_from_name(name);
  if (id == HL_KERNEL_COUNT) {
    return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                          "no kernel named '%s' in the %s code object", name,
                          module->target ? module->target : "(unloaded)");
  }
  *out_function = module->functions[id];
  return hl_ok_status();
}
