// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The executable registry: target-id parsing, matching, union-find grouping,
// the NOT_FOUND message, the embedded table, and the module loader against a
// fake backend that runs the host code object.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
// cmocka.h needs the headers above.
#include <cmocka.h>

#include "hipline/executable.h"
#include "kernels/host/host_kernels.h"
#include "kernels/pattern.h"
#include "runtime/executable/executable_module.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static void assert_status_code(hl_status_t status, hl_status_code_t code) {
  hl_status_code_t actual = hl_status_code(status);
  if (actual != code) {
    hl_status_fprint(stderr, "unexpected status", status);
  }
  assert_int_equal(actual, code);
  hl_status_free(status);
}

static void test_canonicalize(void** state) {
  char out[HL_TARGET_ID_MAX];
  assert_null(
      hl_target_id_canonicalize("gfx90a:xnack-:sramecc+", out, sizeof(out)));
  assert_string_equal(out, "gfx90a:sramecc+:xnack-");
  assert_null(hl_target_id_canonicalize("gfx1100", out, sizeof(out)));
  assert_string_equal(out, "gfx1100");
  assert_null(hl_target_id_canonicalize("host", out, sizeof(out)));
  assert_string_equal(out, "host");
  static const char* const invalid[] = {
      "",
      ":xnack+",
      "gfx90a:xnack",
      "gfx90a:",
      "GFX90A",
      "gfx90a:xnack+:xnack-",
      "gfx90a::xnack+",
  };
  for (size_t i = 0; i < COUNT_OF(invalid); ++i) {
    assert_status_code(hl_target_id_canonicalize(invalid[i], out, sizeof(out)),
                       HL_STATUS_INVALID_ARGUMENT);
  }
  assert_status_code(hl_target_id_canonicalize(NULL, out, sizeof(out)),
                     HL_STATUS_INVALID_ARGUMENT);
  assert_status_code(hl_target_id_canonicalize("gfx90a:xnack-", out, 8),
                     HL_STATUS_OUT_OF_RANGE);
  assert_null(hl_target_id_canonicalize("gfx90a:xnack-", out, 14));
  assert_string_equal(out, "gfx90a:xnack-");
}

static void test_equal(void** state) {
  assert_true(
      hl_target_id_equal("gfx90a:xnack-:sramecc+", "gfx90a:sramecc+:xnack-"));
  assert_false(hl_target_id_equal("gfx90a:xnack-", "gfx90a:xnack+"));
  assert_false(hl_target_id_equal("gfx90a:xnack-", "gfx90a"));
  assert_false(hl_target_id_equal("gfx90a", "gfx942"));
  assert_false(hl_target_id_equal("gfx90a", "bad:"));
}

static void test_group_mixed(void** state) {
  const char* devices[] = {"gfx90a", "gfx942", "gfx90a", "host"};
  size_t group_of[4], groups = 0;
  assert_null(hl_executable_group_targets(devices, 4, group_of, &groups));
  assert_int_equal(groups, 3);
  assert_int_equal(group_of[0], 0);
  assert_int_equal(group_of[1], 1);
  assert_int_equal(group_of[2], 0);
  assert_int_equal(group_of[3], 2);
}

static void test_group_xnack_differs(void** state) {
  const char* devices[] = {"gfx90a:xnack-", "gfx90a:xnack+", "gfx90a:xnack-",
                           "gfx90a:xnack+", "gfx90a"};
  size_t group_of[5], groups = 0;
  assert_null(hl_executable_group_targets(devices, 5, group_of, &groups));
  assert_int_equal(groups, 3);
  const size_t want[] = {0, 1, 0, 1, 2};
  for (size_t i = 0; i < 5; ++i) assert_int_equal(group_of[i], want[i]);
}

static void test_group_canonical_and_many(void** state) {
  // Feature order does not matter; the first device of a group fixes its
  // number even when the group's members are interleaved.
  const char* devices[] = {"gfx942",
                           "gfx90a:xnack-:sramecc+",
                           "gfx1100",
                           "gfx90a:sramecc+:xnack-",
                           "gfx942",
                           "gfx1100",
                           "gfx90a:sramecc+:xnack-"};
  size_t group_of[7], groups = 0;
  assert_null(hl_executable_group_targets(devices, 7, group_of, &groups));
  assert_int_equal(groups, 3);
  const size_t want[] = {0, 1, 2, 1, 0, 2, 1};
  for (size_t i = 0; i < 7; ++i) assert_int_equal(group_of[i], want[i]);

  groups = 99;
  assert_null(hl_executable_group_targets(NULL, 0, NULL, &groups));
  assert_int_equal(groups, 0);

  const char* bad[] = {"gfx90a", "gfx90a:xnack"};
  hl_status_t status = hl_executable_group_targets(bad, 2, group_of, &groups);
  assert_non_null(strstr(hl_status_message(status), "gfx90a:xnack"));
  assert_non_null(strstr(hl_status_message(status), "device 1"));
  assert_status_code(status, HL_STATUS_INVALID_ARGUMENT);
}

static void test_match(void** state) {
  const char* built[] = {"gfx90a", "gfx942", "gfx90a:sramecc+:xnack-",
                         "gfx90a:xnack-", "host"};
  size_t index = 99;
  // Exact beats every compatible object.
  assert_null(
      hl_executable_match_target("gfx90a:xnack-:sramecc+", built, 5, &index));
  assert_int_equal(index, 2);
  // The most specific compatible object wins over the generic one.
  assert_null(
      hl_executable_match_target("gfx90a:sramecc-:xnack-", built, 5, &index));
  assert_int_equal(index, 3);
  // Only the feature-less object fits xnack+.
  assert_null(
      hl_executable_match_target("gfx90a:sramecc+:xnack+", built, 5, &index));
  assert_int_equal(index, 0);
  assert_null(
      hl_executable_match_target("gfx942:sramecc+:xnack-", built, 5, &index));
  assert_int_equal(index, 1);
  assert_null(hl_executable_match_target("host", built, 5, &index));
  assert_int_equal(index, 4);

  // A device that reports no features cannot take an object that needs one.
  const char* specific[] = {"gfx90a:xnack-"};
  assert_status_code(hl_executable_match_target("gfx90a", specific, 1, &index),
                     HL_STATUS_NOT_FOUND);
  assert_status_code(
      hl_executable_match_target("gfx90a:xnack+", specific, 1, &index),
      HL_STATUS_NOT_FOUND);
  assert_status_code(hl_executable_match_target("gfx90a", NULL, 0, &index),
                     HL_STATUS_NOT_FOUND);
  assert_status_code(hl_executable_match_target("gfx90a:", built, 5, &index),
                     HL_STATUS_INVALID_ARGUMENT);
}

static void test_match_not_found_message(void** state) {
  const char* built[] = {"gfx90a", "gfx942", "host"};
  size_t index = 0;
  hl_status_t status =
      hl_executable_match_target("gfx1030:xnack-", built, 3, &index);
  const char* message = hl_status_message(status);
  assert_non_null(strstr(message, "'gfx1030:xnack-'"));
  assert_non_null(strstr(message, "gfx90a, gfx942, host"));
  assert_status_code(status, HL_STATUS_NOT_FOUND);
}

static void test_select(void** state) {
  const char* built[] = {"gfx90a", "gfx942", "host"};
  const char* devices[] = {"gfx90a:sramecc+:xnack-", "gfx942:sramecc+:xnack-",
                           "gfx90a:xnack-:sramecc+", "host"};
  size_t group_of[4], object_of[4], groups = 0;
  assert_null(
      hl_executable_select(devices, 4, built, 3, group_of, object_of, &groups));
  assert_int_equal(groups, 3);
  const size_t want_group[] = {0, 1, 0, 2};
  for (size_t i = 0; i < 4; ++i) assert_int_equal(group_of[i], want_group[i]);
  assert_int_equal(object_of[0], 0);
  assert_int_equal(object_of[1], 1);
  assert_int_equal(object_of[2], 2);
}

static void test_select_not_found(void** state) {
  const char* built[] = {"gfx90a", "host"};
  const char* devices[] = {"gfx90a:xnack+", "gfx1030", "gfx942", "gfx1030"};
  size_t group_of[4], object_of[4], groups = 0;
  hl_status_t status =
      hl_executable_select(devices, 4, built, 2, group_of, object_of, &groups);
  const char* message = hl_status_message(status);
  assert_non_null(strstr(message, "'gfx1030' (device 1)"));
  assert_non_null(strstr(message, "'gfx942' (device 2)"));
  assert_null(strstr(message, "(device 3)"));  // Same group as device 1.
  assert_null(strstr(message, "'gfx90a:xnack+'"));
  assert_non_null(strstr(message, "built targets: gfx90a, host"));
  assert_status_code(status, HL_STATUS_NOT_FOUND);
}

static void test_registry(void** state) {
  size_t gpu = hl_executable_gpu_target_count();
  assert_int_equal(hl_executable_registry_target_count(), gpu + 1);
  assert_string_equal(hl_executable_registry_target(gpu), HL_TARGET_ID_HOST);
  assert_null(hl_executable_registry_target(gpu + 1));
  assert_null(hl_executable_gpu_target(gpu));
  const void* data = NULL;
  size_t size = 0;
  assert_status_code(hl_executable_gpu_code_object(gpu, &data, &size),
                     HL_STATUS_OUT_OF_RANGE);
  for (size_t i = 0; i < gpu; ++i) {
    const char* target = hl_executable_gpu_target(i);
    assert_string_equal(hl_executable_registry_target(i), target);
    char canonical[HL_TARGET_ID_MAX];
    assert_null(
        hl_target_id_canonicalize(target, canonical, sizeof(canonical)));
    assert_string_equal(canonical, target);
    for (size_t j = 0; j < i; ++j) {
      assert_false(hl_target_id_equal(target, hl_executable_gpu_target(j)));
    }
    assert_null(hl_executable_gpu_code_object(i, &data, &size));
    assert_true(size > 64);
    assert_int_equal((uintptr_t)data % 64, 0);
    assert_true(memcmp(data, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0 ||
                memcmp(data, "\177ELF", 4) == 0);
  }
}

// A fake backend: module_load records the image; functions are the host
// code object's kernels, so launches run the host reference versions.
typedef struct fake_backend_t {
  hl_backend_t base;
  const void* loaded_image;
  size_t loaded_size;
  int live_modules;
  int load_calls;
  const char* fail_function;  // module_get_function fails for this name.
} fake_backend_t;

static hl_status_t fake_module_load(hl_backend_t* backend, const void* image,
                                    size_t size,
                                    hl_backend_module_t** out_module) {
  fake_backend_t* fake = (fake_backend_t*)backend;
  fake->loaded_image = image;
  fake->loaded_size = size;
  ++fake->live_modules;
  ++fake->load_calls;
  *out_module = (hl_backend_module_t*)(uintptr_t)image;
  return NULL;
}

static void fake_module_unload(hl_backend_t* backend,
                               hl_backend_module_t* module) {
  --((fake_backend_t*)backend)->live_modules;
}

static hl_status_t fake_module_get_function(
    hl_backend_t* backend, hl_backend_module_t* module, const char* name,
    hl_backend_function_t** out_function) {
  fake_backend_t* fake = (fake_backend_t*)backend;
  if (fake->fail_function && strcmp(name, fake->fail_function) == 0) {
    return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND, "fake: no '%s'", name);
  }
  if (backend->kind != HL_BACKEND_HOST) {
    *out_function = (hl_backend_function_t*)(uintptr_t)name;
    return NULL;
  }
  const hl_host_code_object_t* object = (const hl_host_code_object_t*)module;
  assert_int_equal(object->magic, HL_HOST_CODE_OBJECT_MAGIC);
  for (uint32_t i = 0; i < object->kernel_count; ++i) {
    if (strcmp(object->kernels[i].name, name) == 0) {
      *out_function = (hl_backend_function_t*)(uintptr_t)&object->kernels[i];
      return NULL;
    }
  }
  return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND, "fake: no '%s'", name);
}

// A host fake reports the host backend's target, "host"; a GPU fake a
// gfx90a target id. The target is what selects the code object.
static hl_status_t fake_query_properties(hl_backend_t* backend,
                                         hl_device_properties_t* out_props) {
  memset(out_props, 0, sizeof(*out_props));
  strcpy(out_props->target, backend->kind == HL_BACKEND_HOST
                                ? HL_TARGET_ID_HOST
                                : "gfx90a:sramecc+:xnack-");
  return NULL;
}

static const hl_backend_vtable_t fake_vtable = {
    .query_properties = fake_query_properties,
    .module_load = fake_module_load,
    .module_unload = fake_module_unload,
    .module_get_function = fake_module_get_function,
};

static void fake_initialize(fake_backend_t* fake, hl_backend_kind_t kind) {
  memset(fake, 0, sizeof(*fake));
  fake->base.vtable = &fake_vtable;
  fake->base.kind = kind;
  fake->base.host_visible_memory = kind == HL_BACKEND_HOST;
}

static void test_kernel_names(void** state) {
  assert_int_equal(hl_kernel_id_from_name("fill_pattern"),
                   HL_KERNEL_FILL_PATTERN);
  assert_int_equal(hl_kernel_id_from_name("axpy"), HL_KERNEL_AXPY);
  assert_int_equal(hl_kernel_id_from_name("nope"), HL_KERNEL_COUNT);
  assert_string_equal(hl_kernel_name(HL_KERNEL_SPIN), "spin");
  assert_null(hl_kernel_name(HL_KERNEL_COUNT));
}

static void test_module_host(void** state) {
  fake_backend_t fake;
  fake_initialize(&fake, HL_BACKEND_HOST);
  hl_executable_module_t module;
  // The target "host" selects the host code object, named explicitly...
  assert_null(
      hl_executable_module_initialize(&fake.base, HL_TARGET_ID_HOST, &module));
  assert_ptr_equal(fake.loaded_image, &hl_host_kernels_code_object);
  assert_int_equal(fake.loaded_size, sizeof(hl_host_code_object_t));
  assert_string_equal(module.target, HL_TARGET_ID_HOST);
  assert_int_equal(fake.live_modules, 1);
  hl_executable_module_deinitialize(&module);
  assert_int_equal(fake.live_modules, 0);
  // ... or as the backend's reported target.
  assert_null(hl_executable_module_initialize(&fake.base, NULL, &module));
  assert_ptr_equal(fake.loaded_image, &hl_host_kernels_code_object);
  assert_int_equal(fake.loaded_size, sizeof(hl_host_code_object_t));
  assert_string_equal(module.target, HL_TARGET_ID_HOST);
  assert_int_equal(fake.live_modules, 1);

  // Launch fill then verify through the resolved functions.
  hl_backend_function_t* function = NULL;
  assert_null(hl_executable_module_lookup(&module, "fill_pattern", &function));
  assert_ptr_equal(function, module.functions[HL_KERNEL_FILL_PATTERN]);
  uint32_t buf[11];
  uint32_t* p = buf;
  uint64_t words = 11;
  uint32_t seed = 3;
  void* fill_params[] = {&p, &words, &seed};
  ((const hl_host_kernel_t*)function)->fn(fill_params, NULL);
  assert_int_equal(buf[10], hl_pattern_word(3, 10));
  assert_null(
      hl_executable_module_lookup(&module, "verify_pattern", &function));
  uint32_t mismatches = 0;
  uint32_t* out = &mismatches;
  buf[4] ^= 1;
  void* verify_params[] = {&p, &words, &seed, &out};
  ((const hl_host_kernel_t*)function)->fn(verify_params, NULL);
  assert_int_equal(mismatches, 1);

  hl_status_t status = hl_executable_module_lookup(&module, "gemm", &function);
  assert_non_null(strstr(hl_status_message(status), "'gemm'"));
  assert_status_code(status, HL_STATUS_NOT_FOUND);

  hl_executable_module_deinitialize(&module);
  assert_int_equal(fake.live_modules, 0);
  hl_executable_module_deinitialize(&module);  // A zeroed module is fine.
  assert_int_equal(fake.live_modules, 0);
}

static void test_module_gpu(void** state) {
  fake_backend_t fake;
  fake_initialize(&fake, HL_BACKEND_HIP);
  hl_executable_module_t module;
  size_t count = hl_executable_gpu_target_count();
  const char* built[64];
  for (size_t i = 0; i < count && i < 64; ++i) {
    built[i] = hl_executable_gpu_target(i);
  }
  size_t index = 0;
  hl_status_t expected = hl_executable_match_target("gfx90a:sramecc+:xnack-",
                                                    built, count, &index);
  // NULL target: the backend's reported target is used.
  hl_status_t status =
      hl_executable_module_initialize(&fake.base, NULL, &module);
  if (expected == NULL) {
    assert_null(status);
    const void* data = NULL;
    size_t size = 0;
    assert_null(hl_executable_gpu_code_object(index, &data, &size));
    assert_ptr_equal(fake.loaded_image, data);
    assert_int_equal(fake.loaded_size, size);
    assert_string_equal(module.target, built[index]);
    for (int k = 0; k < HL_KERNEL_COUNT; ++k) {
      assert_string_equal((const char*)module.functions[k],
                          hl_kernel_name((hl_kernel_id_t)k));
    }
    hl_executable_module_deinitialize(&module);
  } else {
    assert_int_equal(hl_status_code(status), HL_STATUS_NOT_FOUND);
    hl_status_free(status);
    hl_status_free(expected);
    assert_int_equal(fake.load_calls, 0);
  }
  assert_int_equal(fake.live_modules, 0);

  // No code object for this target: NOT_FOUND, nothing loaded.
  fake.load_calls = 0;
  status = hl_executable_module_initialize(&fake.base, "gfx1030", &module);
  assert_non_null(strstr(hl_status_message(status), "'gfx1030'"));
  assert_non_null(strstr(hl_status_message(status), "built targets"));
  assert_status_code(status, HL_STATUS_NOT_FOUND);
  assert_int_equal(fake.load_calls, 0);
  assert_null(module.module);
}

static void test_module_function_failure_unloads(void** state) {
  fake_backend_t fake;
  fake_initialize(&fake, HL_BACKEND_HOST);
  fake.fail_function = "spin";
  hl_executable_module_t module;
  hl_status_t status =
      hl_executable_module_initialize(&fake.base, NULL, &module);
  assert_non_null(strstr(hl_status_message(status), "'spin'"));
  assert_status_code(status, HL_STATUS_NOT_FOUND);
  assert_int_equal(fake.load_calls, 1);
  assert_int_equal(fake.live_modules, 0);
  assert_null(module.module);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_canonicalize),
      cmocka_unit_test(test_equal),
      cmocka_unit_test(test_group_mixed),
      cmocka_unit_test(test_group_xnack_differs),
      cmocka_unit_test(test_group_canonical_and_many),
      cmocka_unit_test(test_match),
      cmocka_unit_test(test_match_not_found_message),
      cmocka_unit_test(test_select),
      cmocka_unit_test(test_select_not_found),
      cmocka_unit_test(test_registry),
      cmocka_unit_test(test_kernel_names),
      cmocka_unit_test(test_module_host),
      cmocka_unit_test(test_module_gpu),
      cmocka_unit_test(test_module_function_failure_unloads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
