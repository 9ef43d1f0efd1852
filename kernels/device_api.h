// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The few device-side HIP names the kernels use.
//
// Built by ROCm's hipcc, the kernels see them through <hip/hip_runtime.h>.
// Built by a plain clang (-nogpulib -nogpuinc, HL_KERNELS_FREESTANDING
// defined by kernels/CMakeLists.txt) there are no HIP headers and no ROCm
// device library, so this header defines the same names over clang's AMDGPU
// builtins. The kernels need nothing else: no math library, no printf.
#ifndef HIPLINE_KERNELS_DEVICE_API_H_
#define HIPLINE_KERNELS_DEVICE_API_H_

#if defined(__CUDACC__) && !defined(__HIP__)

// nvcc, building the cubin that the HIP-on-CUDA bridge
// (tests/hip_cuda_bridge/) loads in place of an AMDGPU code object: CUDA
// declares every name the kernels use, with the same meaning.

#elif !defined(HL_KERNELS_FREESTANDING)

#include <hip/hip_runtime.h>

#else  // HL_KERNELS_FREESTANDING

#include <stddef.h>
#include <stdint.h>

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))

// threadIdx, blockIdx, blockDim and gridDim as HIP spells them. Each member
// read is one builtin; gridDim counts a partial last work-group, as HIP's
// __ockl_get_num_groups does.
struct hl_thread_idx_t {
  __declspec(property(get = get_x)) uint32_t x;
  __declspec(property(get = get_y)) uint32_t y;
  __declspec(property(get = get_z)) uint32_t z;
  static __device__ uint32_t get_x() {
    return __builtin_amdgcn_workitem_id_x();
  }
  static __device__ uint32_t get_y() {
    return __builtin_amdgcn_workitem_id_y();
  }
  static __device__ uint32_t get_z() {
    return __builtin_amdgcn_workitem_id_z();
  }
};
struct hl_block_idx_t {
  __declspec(property(get = get_x)) uint32_t x;
  static __device__ uint32_t get_x() {
    return __builtin_amdgcn_workgroup_id_x();
  }
};
struct hl_block_dim_t {
  __declspec(property(get = get_x)) uint32_t x;
  static __device__ uint32_t get_x() {
    return __builtin_amdgcn_workgroup_size_x();
  }
};
struct hl_grid_dim_t {
  __declspec(property(get = get_x)) uint32_t x;
  static __device__ uint32_t get_x() {
    const uint32_t size = __builtin_amdgcn_workgroup_size_x();
    return (__builtin_amdgcn_grid_size_x() + size - 1) / size;
  }
};
static constexpr __device__ hl_thread_idx_t threadIdx = {};
static constexpr __device__ hl_block_idx_t blockIdx = {};
static constexpr __device__ hl_block_dim_t blockDim = {};
static constexpr __device__ hl_grid_dim_t gridDim = {};

static __device__ inline long long clock64(void) {
  return (long long)__builtin_readcyclecounter();
}

// A work-group barrier that also orders memory, like HIP's __syncthreads.
static __device__ inline void __syncthreads(void) {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// Device-scope relaxed add, as HIP's atomicAdd.
static __device__ inline uint32_t atomicAdd(uint32_t* address, uint32_t value) {
  return __hip_atomic_fetch_add(address, value, __ATOMIC_RELAXED,
                                __HIP_MEMORY_SCOPE_AGENT);
}

#endif  // HL_KERNELS_FREESTANDING

#endif  // HIPLINE_KERNELS_DEVICE_API_H_
