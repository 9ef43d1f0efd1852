// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Host reference versions of the kernels in kernel_table.h.
//
// They are what the host backend launches and the oracles that tests compare
// device results against. Each takes the HIP kernelParams convention:
// |params[i]| points to the i-th argument as listed in kernel_table.h.
// |config| may be NULL (taken as one block of one thread). They run on the
// calling thread and are thread-safe when concurrent launches touch disjoint
// memory (spin's counter is updated atomically).
#ifndef HIPLINE_KERNELS_HOST_HOST_KERNELS_H_
#define HIPLINE_KERNELS_HOST_HOST_KERNELS_H_

#include "kernels/kernel_table.h"
#include "runtime/backend/backend.h"

// The longest a host spin waits, whatever |cycles| asks for: 10 s. Larger
// requests are clamped so a bad argument cannot hang a test.
#define HL_HOST_SPIN_MAX_NS 10000000000ull

#define HL_DECLARE_HOST_KERNEL_(ID, name, count, types) \
  void hl_host_kernel_##name(void** params, const hl_launch_config_t* config);
HL_KERNEL_TABLE(HL_DECLARE_HOST_KERNEL_)
#undef HL_DECLARE_HOST_KERNEL_

// The host code object: one entry per kernel in kernel_table.h, in id order,
// with param_count and param_sizes filled from the table. Pass its address
// and sizeof(hl_host_code_object_t) to the host backend's module_load.
extern const hl_host_code_object_t hl_host_kernels_code_object;

#endif  // HIPLINE_KERNELS_HOST_HOST_KERNELS_H_
