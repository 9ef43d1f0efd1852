// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The user kernel set's files, for the tests that load it
// (executable_test, command_buffer_executable_test): the GPU targets it was
// built for, each target's code object, and an executable of all of them
// plus the host twin. The test's build defines HL_USER_KERNEL_TARGETS
// (comma-separated), HL_USER_KERNELS_DIR and HL_USER_KERNELS_HOST
// (tests/executable.cmake).
#ifndef HIPLINE_TESTS_USER_KERNELS_USER_KERNELS_FILES_H_
#define HIPLINE_TESTS_USER_KERNELS_USER_KERNELS_FILES_H_

#include <stdio.h>
#include <string.h>

#include "hipline/executable.h"
#include "tests/test_util.h"

// The targets the user kernels were built for, and their files.
static inline size_t gpu_targets(char targets[][64], size_t capacity) {
  const char* list = HL_USER_KERNEL_TARGETS;
  size_t count = 0;
  while (*list && count < capacity) {
    size_t n = strcspn(list, ",");
    memcpy(targets[count], list, n);
    targets[count][n] = '\0';
    ++count;
    list += n + (list[n] == ',');
  }
  return count;
}

static inline void object_path(const char* target, char* out, size_t capacity) {
  char stem[64];
  size_t j = 0;
  for (const char* p = target; *p && j + 4 < sizeof(stem); ++p) {
    if (*p == '+') {
      j += (size_t)snprintf(stem + j, sizeof(stem) - j, "_on");
    } else if (*p == '-') {
      j += (size_t)snprintf(stem + j, sizeof(stem) - j, "_off");
    } else if (*p == ':') {
      stem[j++] = '_';
    } else {
      stem[j++] = *p;
    }
  }
  stem[j] = '\0';
  snprintf(out, capacity, "%s/user_kernels_%s.co", HL_USER_KERNELS_DIR, stem);
}

// An executable of every GPU object (from files, tagged) and the host twin.
static inline hl_executable_t* make_executable(void) {
  char targets[16][64];
  char paths[16][512];
  hl_code_object_t objects[17];
  size_t n = gpu_targets(targets, 16);
  for (size_t i = 0; i < n; ++i) {
    object_path(targets[i], paths[i], sizeof(paths[i]));
    objects[i] = (hl_code_object_t){.target = targets[i], .path = paths[i]};
  }
  objects[n] = (hl_code_object_t){.target = HL_TARGET_ID_HOST,
                                  .path = HL_USER_KERNELS_HOST};
  hl_executable_t* e = NULL;
  HL_ASSERT_OK(hl_executable_create(n + 1, objects, &e));
  return e;
}

#endif  // HIPLINE_TESTS_USER_KERNELS_USER_KERNELS_FILES_H_
