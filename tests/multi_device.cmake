# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Several devices in one process: peer access, copies between devices (peer
# and staged), dispatches over a peer's buffer, frees that wait for another
# device's use, cross-device waits. 4 host devices; on the hip test runtime
# 2 and 4 devices.
hl_add_test(multi_device_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/multi_device_test.c
  LABELS multi-device concurrency
  TIMEOUT 120)
set_tests_properties(multi_device_test PROPERTIES ENVIRONMENT
  "HIPLINE_HOST_DEVICES=4")
hl_add_cts(multi_device_test)
# The same with random stream delays (HIPLINE_FAULTS), so the orderings
# across devices are exercised with the work landing late.
add_test(NAME multi_device_test_delays COMMAND multi_device_test)
set_tests_properties(multi_device_test_delays PROPERTIES
  ENVIRONMENT "HIPLINE_HOST_DEVICES=4;HIPLINE_FAULTS=stream_delay_us=300,seed=7"
  LABELS "multi-device;concurrency" TIMEOUT 120)
set_property(TEST multi_device_test_hiprt APPEND PROPERTY ENVIRONMENT
  HL_HIP_TEST_RUNTIME_DEVICES=2)
hl_add_cts_variant(multi_device_test 4 HL_HIP_TEST_RUNTIME_DEVICES=4)
# A heterogeneous group: gfx90a and gfx1100 devices, each on its own code
# object (test_heterogeneous_group; the other tests run on it too).
hl_add_cts_variant(multi_device_test hetero
  HL_HIP_TEST_RUNTIME_TARGETS=gfx90a:sramecc+:xnack-,gfx1100)
