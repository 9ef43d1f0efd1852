// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hipline: a C11 device runtime for HIP/ROCm GPUs.
//
// The umbrella header. See each header for the contracts:
// - status.h, allocator.h, time.h: base types;
// - device.h: backends (host, hip) and devices;
// - semaphore.h, fence.h, queue.h: timelines and queues;
// - buffer.h: the queue-ordered allocator and buffer operations;
// - invocation.h: functions, invocations, import/export, assume_no_alias;
// - dispatch.h: kernel dispatch and kernel-backed functions;
// - command_buffer.h: recorded commands with fill elision;
// - executable.h: the kernel code objects built in and target matching.
#ifndef HIPLINE_HIPLINE_H_
#define HIPLINE_HIPLINE_H_

#include "hipline/allocator.h"
#include "hipline/buffer.h"
#include "hipline/command_buffer.h"
#include "hipline/device.h"
#include "hipline/dispatch.h"
#include "hipline/executable.h"
#include "hipline/fence.h"
#include "hipline/invocation.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "hipline/status.h"
#include "hipline/time.h"

#endif  // HIPLINE_HIPLINE_H_
