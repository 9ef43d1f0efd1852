# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""hipline from Python: devices, queues, timelines, buffers, invocations and
executables.

A thin layer over libhipline.so with the standard library's ctypes. Every
handle is released exactly once: by `close()` / a `with` block, or by the
garbage collector as a last resort. Every failing call raises `hipline.Error`
(or its per-code subclass) carrying hipline's status code and message.

Queue operations take optional `wait` and `signal` fences and return the
signal fence; a fence, an invocation and `queue.idle()` can be awaited from
asyncio without blocking the loop and without a thread per wait: hipline's
completion thread calls back into Python, which wakes the loop with
`call_soon_threadsafe`.

    import asyncio, hipline
    async def main():
        with hipline.Device("host") as dev, dev.create_queue() as q:
            buf = q.alloca(1024)
            await q.fill(buf, 0x01020304)
            print((await q.read_bytes(buf))[:4])
            await q.dealloca(buf)
    asyncio.run(main())

Every public name is here; each lives in the module of its seam (errors,
device, semaphore, buffer, queue, executable, invocation, kernels, info,
trace).
See docs/python.md.
"""

from . import _lib
from ._completion import pending_callbacks
from .buffer import Buffer, BufferArg, Scalar
from .device import (Device, backend_query, devices, enable_peer_access,
                     environment_check, live_device_count)
from .errors import (AbortedError, AlreadyExistsError, CancelledError,
                     DataLossError, DeadlineExceededError, Error,
                     FailedPreconditionError, InternalError,
                     InvalidArgumentError, NotFoundError, OutOfRangeError,
                     PermissionDeniedError, ResourceExhaustedError,
                     StatusCode, UnauthenticatedError, UnavailableError,
                     UnimplementedError, UnknownError)
from .executable import Executable
from .info import (AssumeNoAlias, BackendInfo, DeviceProperties,
                   InvocationStats, MemoryStats, PeerStats, PoolAttributes,
                   QueueStats)
from .invocation import (Function, Invocation, ProgramInvocation,
                         invocation_stats_global, register_kernel_functions)
from .kernels import kernel_names, pattern_value
from .queue import Queue
from .semaphore import Fence, Semaphore
from .trace import (memory_history, memory_history_begin,
                    memory_history_dropped, memory_history_end, trace_capture,
                    trace_capture_active, trace_capture_begin,
                    trace_capture_count, trace_capture_dropped,
                    trace_capture_end)

__version__ = "0.1.0"
# The path libhipline.so was loaded from.
library_path: str = _lib.library_path

__all__ = [
    # Objects.
    "Device", "Queue", "Semaphore", "Fence", "Buffer", "BufferArg", "Scalar",
    "Executable", "Function", "ProgramInvocation", "Invocation",
    # Plain data.
    "AssumeNoAlias", "BackendInfo", "DeviceProperties", "InvocationStats",
    "MemoryStats", "PeerStats", "PoolAttributes", "QueueStats",
    # Functions.
    "backend_query", "devices", "enable_peer_access", "environment_check",
    "invocation_stats_global",
    "kernel_names", "live_device_count", "pattern_value", "pending_callbacks",
    "register_kernel_functions",
    # Traces and memory history.
    "memory_history", "memory_history_begin", "memory_history_dropped",
    "memory_history_end", "trace_capture", "trace_capture_active",
    "trace_capture_begin", "trace_capture_count", "trace_capture_dropped",
    "trace_capture_end",
    # Data.
    "library_path",
    # Errors.
    "StatusCode", "Error", "AbortedError", "AlreadyExistsError",
    "CancelledError", "DataLossError", "DeadlineExceededError",
    "FailedPreconditionError", "InternalError", "InvalidArgumentError",
    "NotFoundError", "OutOfRangeError", "PermissionDeniedError",
    "ResourceExhaustedError", "UnauthenticatedError", "UnavailableError",
    "UnimplementedError", "UnknownError",
]
