// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The few HIP types, enum values and struct layouts the hip backend uses,
// declared here so the build needs no ROCm headers (which want the HIP
// compiler's platform defines). Values are checked against ROCm 5.2's
// hip_runtime_api.h and driver_types.h and are unchanged in ROCm 6.
#ifndef HIPLINE_RUNTIME_BACKEND_HIP_HIP_TYPES_H_
#define HIPLINE_RUNTIME_BACKEND_HIP_HIP_TYPES_H_

#include <stddef.h>
#include <stdint.h>

// hipError_t is a C enum, which the platform ABI passes as an int.
typedef int hipError_t;

enum {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorOutOfMemory = 2,
  hipErrorNotInitialized = 3,
  hipErrorInsufficientDriver = 35,
  hipErrorNoDevice = 100,
  hipErrorInvalidDevice = 101,
  hipErrorNotReady = 600,
  hipErrorNotSupported = 801,
  hipErrorUnknown = 999,
};

// Opaque handles: pointers to runtime-private structs.
typedef struct hl_ihipStream_t* hipStream_t;
typedef struct hl_ihipEvent_t* hipEvent_t;
typedef struct hl_ihipMemPool_t* hipMemPool_t;
typedef struct hl_ihipModule_t* hipModule_t;
typedef struct hl_ihipFunction_t* hipFunction_t;
typedef struct hl_ihipGraph_t* hipGraph_t;
typedef struct hl_ihipGraphExec_t* hipGraphExec_t;
typedef void* hipDeviceptr_t;

// hipStreamCaptureMode (a C enum, passed as an int): ThreadLocal captures
// only what the capturing thread enqueues and forbids nothing elsewhere.
typedef int hipStreamCaptureMode;
#define HL_HIP_STREAM_CAPTURE_MODE_THREAD_LOCAL 1

// Host function and legacy stream callback signatures.
typedef void (*hipHostFn_t)(void* user_data);
typedef void (*hipStreamCallback_t)(hipStream_t stream, hipError_t status,
                                    void* user_data);

// Stream and event creation flags.
#define HL_HIP_STREAM_NON_BLOCKING 0x01u
#define HL_HIP_EVENT_DEFAULT 0x0u
#define HL_HIP_EVENT_BLOCKING_SYNC 0x1u
#define HL_HIP_EVENT_DISABLE_TIMING 0x2u

// hipMemcpyKind: hipMemcpyDefault infers the direction from the pointers.
#define HL_HIP_MEMCPY_DEFAULT 4

// hipDeviceAttribute_t values (stable since ROCm 5.0).
#define HL_HIP_ATTR_COMPUTE_CAPABILITY_MAJOR 23
#define HL_HIP_ATTR_COMPUTE_CAPABILITY_MINOR 61
#define HL_HIP_ATTR_MULTIPROCESSOR_COUNT 63

// hipMemPoolAttr values. The reuse attributes take an int, the byte
// attributes a uint64_t.
typedef enum hl_hipMemPoolAttr_e {
  hipMemPoolReuseFollowEventDependencies = 0x1,
  hipMemPoolReuseAllowOpportunistic = 0x2,
  hipMemPoolReuseAllowInternalDependencies = 0x3,
  hipMemPoolAttrReleaseThreshold = 0x4,
  hipMemPoolAttrReservedMemCurrent = 0x5,
  hipMemPoolAttrReservedMemHigh = 0x6,
  hipMemPoolAttrUsedMemCurrent = 0x7,
  hipMemPoolAttrUsedMemHigh = 0x8,
} hipMemPoolAttr;

// hipMemPoolProps and its parts, as laid out by hip_runtime_api.h.
typedef struct hl_hipMemLocation_t {
  int type;  // hipMemLocationTypeDevice = 1.
  int id;    // The device ordinal.
} hipMemLocation;

#define HL_HIP_MEM_LOCATION_TYPE_DEVICE 1

// hipMemAccessDesc (hipMemPoolSetAccess): who may access a pool's memory.
typedef struct hl_hipMemAccessDesc_t {
  hipMemLocation location;
  int flags;  // hipMemAccessFlags.
} hipMemAccessDesc;
#define HL_HIP_MEM_ACCESS_FLAGS_PROT_READ_WRITE 3
// hipDeviceEnablePeerAccess for a pair already enabled.
#define HL_HIP_ERROR_PEER_ACCESS_ALREADY_ENABLED 704
#define HL_HIP_MEM_ALLOCATION_TYPE_PINNED 1
#define HL_HIP_MEM_HANDLE_TYPE_NONE 0

typedef struct hl_hipMemPoolProps_t {
  int alloc_type;    // hipMemAllocationType.
  int handle_types;  // hipMemAllocationHandleType.
  hipMemLocation location;
  void* win32_security_attributes;
  unsigned char reserved[64];
} hipMemPoolProps;

// The leading fields of hipDeviceProp_t in its original layout, which ROCm 5
// fills through hipGetDeviceProperties and ROCm 6 through the legacy exports
// hipGetDevicePropertiesR0000 and hipGetDeviceProperties (ROCm 6 headers map
// the plain name onto hipGetDevicePropertiesR0600, a different layout, but
// the exported symbol keeps the old one). Only the fields up to gcnArchName
// are declared; callers pass a buffer of HL_HIP_DEVICE_PROP_BUFFER_SIZE bytes
// so the runtime's writes past them land in owned memory.
typedef struct hl_hip_device_prop_r0000_t {
  char name[256];
  size_t total_global_mem;
  size_t shared_mem_per_block;
  int regs_per_block;
  int warp_size;
  int max_threads_per_block;
  int max_threads_dim[3];
  int max_grid_size[3];
  int clock_rate;
  int memory_clock_rate;
  int memory_bus_width;
  size_t total_const_mem;
  int major;
  int minor;
  int multi_processor_count;
  int l2_cache_size;
  int max_threads_per_multi_processor;
  int compute_mode;
  int clock_instruction_rate;
  uint32_t arch;  // hipDeviceArch_t: a 32-bit bit field.
  int concurrent_kernels;
  int pci_domain_id;
  int pci_bus_id;
  int pci_device_id;
  size_t max_shared_memory_per_multi_processor;
  int is_multi_gpu_board;
  int can_map_host_memory;
  int gcn_arch;
  char gcn_arch_name[256];
} hl_hip_device_prop_r0000_t;

// The full original struct is 792 bytes; the buffer leaves ample room.
#define HL_HIP_DEVICE_PROP_BUFFER_SIZE 4096

// Offsets measured with g++ against ROCm 5.2's hip_runtime_api.h.
_Static_assert(offsetof(hl_hip_device_prop_r0000_t, total_global_mem) == 256,
               "hipDeviceProp_t.totalGlobalMem offset");
_Static_assert(offsetof(hl_hip_device_prop_r0000_t, multi_processor_count) ==
                   336,
               "hipDeviceProp_t.multiProcessorCount offset");
_Static_assert(offsetof(hl_hip_device_prop_r0000_t, arch) == 356,
               "hipDeviceProp_t.arch offset");
_Static_assert(offsetof(hl_hip_device_prop_r0000_t, gcn_arch_name) == 396,
               "hipDeviceProp_t.gcnArchName offset");
_Static_assert(sizeof(hipMemPoolProps) == 88, "hipMemPoolProps size");
_Static_assert(sizeof(hipMemAccessDesc) == 12, "hipMemAccessDesc size");

#endif  // HIPLINE_RUNTIME_BACKEND_HIP_HIP_TYPES_H_
