# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Kernel tests: host reference kernels, the executable registry, and (when
# a device compiler built code objects) the build record and the embedded code objects.
hl_add_test(kernels_host_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/kernels_host_test.c
            LABELS kernels)
hl_add_test(kernels_registry_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/kernels_registry_test.c
            LABELS kernels)
if(HIPLINE_KERNELS_HIPCC_USED)
  hl_add_test(kernels_build_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/kernels_build_test.c
              LABELS kernels)
  string(REPLACE ";" "," hl_requested_targets "${HIPLINE_GPU_TARGETS}")
  target_compile_definitions(kernels_build_test PRIVATE
    "HL_TEST_BUILD_RECORD=\"${HIPLINE_KERNELS_BUILD_RECORD}\""
    "HL_TEST_REQUESTED_TARGETS=\"${hl_requested_targets}\"")
  if(HIPLINE_KERNELS_CLANG_AVAILABLE)
    target_compile_definitions(kernels_build_test PRIVATE HL_TEST_EXPECT_ALL_TARGETS=1)
  endif()
endif()
