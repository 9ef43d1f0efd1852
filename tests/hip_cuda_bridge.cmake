# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The HIP-on-CUDA bridge (tests/hip_cuda_bridge/, test code that never
# ships): a libamdhip64.so over NVIDIA's CUDA driver API, so that the
# requires-gpu tests run the hip backend on an NVIDIA GPU. It dlopens
# libcuda.so.1 and needs no CUDA headers, so it builds everywhere;
# tools/gpu/cuda-bridge.sh builds the kernels' cubin with nvcc and runs the
# requires-gpu tests through it.
set(hl_cuda_bridge_dir ${PROJECT_BINARY_DIR}/hip_cuda_bridge)
add_library(hl_hip_cuda_bridge SHARED
  ${CMAKE_CURRENT_SOURCE_DIR}/hip_cuda_bridge/hip_cuda_bridge.c
  ${CMAKE_CURRENT_SOURCE_DIR}/hip_test_runtime/call_counts.c)
target_include_directories(hl_hip_cuda_bridge PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_options(hl_hip_cuda_bridge PRIVATE -fvisibility=hidden)
target_link_libraries(hl_hip_cuda_bridge PRIVATE hipline_warnings
  ${CMAKE_DL_LIBS})
set_target_properties(hl_hip_cuda_bridge PROPERTIES
  OUTPUT_NAME amdhip64
  LIBRARY_OUTPUT_DIRECTORY ${hl_cuda_bridge_dir})

# Without libcuda (CI, this machine) the bridge must answer as libamdhip64
# does without a GPU: the probe suite's no-device expectations hold through
# it, and the GPU suite skips.
add_test(NAME backend_hip_probe_test_cuda_bridge COMMAND backend_hip_probe_test)
add_dependencies(backend_hip_probe_test hl_hip_cuda_bridge)
set_tests_properties(backend_hip_probe_test_cuda_bridge PROPERTIES
  ENVIRONMENT "LD_LIBRARY_PATH=${hl_cuda_bridge_dir};HL_HIP_PROBE_EXPECT_REASON=libamdhip64.so (HIP 6.2.0): hipGetDeviceCount failed: hipErrorNoDevice"
  LABELS "backend;hip" TIMEOUT 60)
