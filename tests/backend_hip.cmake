# The hip backend. One source, three uses:
# - backend_hip_probe_test needs no device: availability reporting, creation
#   without a device, error translation and the size map;
# - backend_hip_gpu_test needs a HIP device and exits 77 (skipped) without
#   one;
# - backend_hip_fake_test is the GPU test run against a fake libamdhip64.so
#   (built from the same source) found through LD_LIBRARY_PATH, so every
#   vtable entry is exercised on any machine; it fails rather than skips.
set(hl_backend_hip_test_source ${CMAKE_CURRENT_SOURCE_DIR}/backend_hip_test.c)

hl_add_test(backend_hip_probe_test
  SOURCES ${hl_backend_hip_test_source}
  LABELS backend hip)

hl_add_test(backend_hip_gpu_test
  SOURCES ${hl_backend_hip_test_source}
  LABELS backend hip
  GPU)
target_compile_definitions(backend_hip_gpu_test PRIVATE HL_HIP_TEST_GPU=1)

add_library(hl_fake_amdhip64 SHARED ${hl_backend_hip_test_source})
target_include_directories(hl_fake_amdhip64 PRIVATE
  ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include ${CMOCKA_INCLUDE_DIR})
target_compile_definitions(hl_fake_amdhip64 PRIVATE HL_HIP_TEST_FAKE_RUNTIME=1)
target_link_libraries(hl_fake_amdhip64 PRIVATE hipline_warnings Threads::Threads)
set_target_properties(hl_fake_amdhip64 PROPERTIES
  OUTPUT_NAME amdhip64
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/fake_hip)

hl_add_test(backend_hip_fake_test
  SOURCES ${hl_backend_hip_test_source}
  LABELS backend hip)
target_compile_definitions(backend_hip_fake_test PRIVATE
  HL_HIP_TEST_GPU=1 HL_HIP_TEST_EXPECT_DEVICE=1)
add_dependencies(backend_hip_fake_test hl_fake_amdhip64)
set_tests_properties(backend_hip_fake_test PROPERTIES
  ENVIRONMENT "LD_LIBRARY_PATH=${PROJECT_BINARY_DIR}/fake_hip")
