# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Queues: allocation, transfers, host calls and dispatches in timeline
order."""

from __future__ import annotations

import contextlib
import ctypes
from ctypes import byref, c_void_p
from typing import (TYPE_CHECKING, Any, Callable, Iterable, List, Optional,
                    Sequence, Tuple, Union)

from . import _lib
from ._args import (U32_MAX, _deadline, _handle_arg, _int_arg, _str_arg)
from ._completion import (_awaited, _fence_pairs, _live_queues, _notify,
                          _promised, _track, _user_semaphores)
from ._handle import _call, _ccall, _Handle, _tls
from ._lib import lib
from .buffer import Buffer, BufferArg, Scalar
from .device import Device, _device_label
from .errors import (Error, StatusCode, _check, _make_error,
                     _status_from_exception)
from .info import MemoryStats, QueueStats, _struct_to
from .semaphore import Fence, Semaphore

if TYPE_CHECKING:
    from .executable import Executable

__all__ = ["Queue"]

# The shape of a dispatch: 1 to 3 dimensions (missing ones are 1).
_Dims = Sequence[int]


def _host_span(obj: Any, writable: bool, name: str) -> Tuple[Any, int, Any]:
    """(address, length, keep-alive) for a buffer-protocol object."""
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError("%s must support the buffer protocol (bytes, "
                        "bytearray, memoryview, array...), not %s" %
                        (name, type(obj).__name__)) from None
    if not mv.c_contiguous:
        raise _make_error(StatusCode.INVALID_ARGUMENT,
                          "%s: host buffer must be C-contiguous" % name)
    mv = mv.cast("B")
    n = mv.nbytes
    if writable:
        if mv.readonly:
            raise _make_error(StatusCode.INVALID_ARGUMENT,
                              "%s: read target must be writable (bytearray, "
                              "memoryview of one, array.array...)" % name)
        if n == 0:
            return None, 0, mv
        arr = (ctypes.c_char * n).from_buffer(mv)
        return ctypes.addressof(arr), n, arr
    if isinstance(obj, bytes):
        return ctypes.cast(ctypes.c_char_p(obj), c_void_p).value, n, obj
    if not mv.readonly and n:
        arr = (ctypes.c_char * n).from_buffer(mv)
        return ctypes.addressof(arr), n, arr
    data = mv.tobytes()  # Read-only and not bytes: one copy.
    return ctypes.cast(ctypes.c_char_p(data), c_void_p).value, n, data


def _private_semaphore() -> Semaphore:
    # Not a user semaphore: nobody else can signal or fail it.
    out = c_void_p()
    _check(lib.hl_semaphore_create(0, lib.hl_allocator_system(), byref(out)))
    return Semaphore._adopt(out.value)


def _kernel_args(args: Sequence[Any]) -> Any:
    """The hl_kernel_arg_t array of |args| (buffers are filled in by the
    caller, which holds their uses)."""
    arr = (_lib.kernel_arg_t * max(len(args), 1))()
    for i, a in enumerate(args):
        if isinstance(a, BufferArg):
            arr[i].kind = 0
            arr[i].offset = a.offset
            arr[i].access = a.access
            if a.buffer is None:
                arr[i].buffer = None
                arr[i].length = a.length or 0
            else:
                arr[i].length = (a.length if a.length is not None else
                                 max(0, len(a.buffer) - a.offset))
        elif isinstance(a, Scalar):
            arr[i].kind = 1
            arr[i].scalar = a.bits
            arr[i].size = a.size
        else:
            raise TypeError("args[%d] must be a BufferArg or a Scalar, "
                            "not %s" % (i, type(a).__name__))
    return arr


def _dispatch_config(grid: _Dims, block: _Dims, shared_bytes: int) -> Any:
    cfg = _lib.dispatch_config_t()
    for what, dims in (("grid", grid), ("block", block)):
        dims = tuple(dims)
        if not 1 <= len(dims) <= 3:
            raise _make_error(StatusCode.INVALID_ARGUMENT,
                              "%s must have 1 to 3 dimensions" % what)
        for j in range(3):
            v = (_int_arg(dims[j], "%s[%d]" % (what, j), 0, U32_MAX)
                 if j < len(dims) else 1)
            getattr(cfg, what)[j] = v
    cfg.shared_bytes = _int_arg(shared_bytes, "shared_bytes", 0, U32_MAX)
    return cfg


class Queue(_Handle):
    """A queue of |device|. Every operation takes optional `wait` and
    `signal` fences and returns its signal fence (a fresh one when none is
    given), which can be awaited.

    Host memory and callbacks handed to an operation (read, write,
    host_call) stay referenced until the operation itself has finished on
    the queue (completed, failed or cancelled), whatever happens to its
    signal fence, and whether or not the Device object is closed."""

    _release = lib.hl_queue_release
    _kind = "Queue"

    def __init__(self, device: Device) -> None:
        _handle_arg(device, Device, "device")
        out = c_void_p()
        _ccall(lib.hl_queue_create, device, byref(out))
        super().__init__(out.value)
        self.device = device
        self._notifier = Device._borrow(lib.hl_queue_device(out.value))
        _live_queues.add(self)

    def _init_borrowed(self, *args: Any) -> None:
        self.device = Device._borrow(lib.hl_queue_device(self._ptr))
        self._notifier = self.device
        _live_queues.add(self)

    @classmethod
    def _borrow(cls, ptr: Optional[int]) -> Queue:
        lib.hl_queue_retain(ptr)
        return cls._adopt(ptr)

    def _describe(self) -> str:
        s = self.stats()
        state = "ok"
        try:
            self.check()
        except Error as e:
            state = "failed %s" % e.code.name
        with self._use() as p:
            where = _device_label(lib.hl_queue_device(p))
        return "id=%d on %s, submitted %d, %s" % (self.id, where,
                                                  s.submitted_value, state)

    def close(self) -> None:
        """Releases the queue (see the handle's close()); work already
        submitted still runs."""
        super().close()
        notifier = self.__dict__.get("_notifier")
        if notifier is not None and notifier is not self.device:
            notifier.close()

    @property
    def id(self) -> int:
        """The queue's id, unique on its device."""
        return int(_call(lib.hl_queue_id, self))

    @property
    def timeline(self) -> Semaphore:
        """A new reference to the queue's timeline semaphore."""
        with self._use() as p:
            return Semaphore._borrow(lib.hl_queue_timeline(p))

    def _fresh_signal(self) -> Fence:
        f = Fence(device=self.device if not self.device.closed else None)
        with _private_semaphore() as s:
            f.insert(s, 1)
        return f

    def _op(self, cfn: Any, wait: Optional[Fence], signal: Optional[Fence],
            *args: Any, keep: Any = None) -> Fence:
        """Submits cfn(queue, wait, signal, *args) and returns the signal
        fence. |keep| (host memory, callbacks) is referenced from before
        the submission until the operation itself finishes."""
        _handle_arg(wait, Fence, "wait", optional=True)
        _handle_arg(signal, Fence, "signal", optional=True)
        with self._use():
            out = signal if signal is not None else self._fresh_signal()
            if keep is None:
                _ccall(cfn, self, wait, out, *args)
            else:
                self._submit_keeping(cfn, wait, out, args, keep)
            if _user_semaphores:
                for fence, table in ((wait, _awaited), (out, _promised)):
                    if fence is not None:
                        with fence._use():
                            _track(table, _fence_pairs(fence))
        if out._watch is not None:
            out._watch.append(cfn)
        return out

    def _submit_keeping(self, cfn: Any, wait: Optional[Fence], out: Fence,
                        args: Tuple[Any, ...], keep: Any) -> None:
        # The op signals a private semaphore too: the keep-alive follows it,
        # not |out|, which the caller may fail or may have reached already.
        with _private_semaphore() as done, Fence(device=None) as both, \
                Fence(device=None) as finished:
            both.join(out)
            both.insert(done, 1)
            finished.insert(done, 1)
            _notify(finished, self._notifier, None, None, keep)
            try:
                _ccall(cfn, self, wait, both, *args)
            except BaseException:
                try:  # Not submitted: nothing will signal |done|.
                    done.fail(StatusCode.CANCELLED, "not submitted")
                except Error:  # Failed by the submission already.
                    pass
                raise

    def barrier(self, wait: Optional[Fence] = None,
                signal: Optional[Fence] = None) -> Fence:
        """Completes once |wait| is reached and earlier work is done."""
        return self._op(lib.hl_queue_barrier, wait, signal)

    def host_call(self, fn: Callable[[], Any], wait: Optional[Fence] = None,
                  signal: Optional[Fence] = None) -> Fence:
        """Runs |fn()| on a runtime thread in queue order. Exceptions are
        swallowed (printed); keep |fn| short and non-blocking."""
        if not callable(fn):
            raise TypeError("fn must be callable, not %s" % type(fn).__name__)

        def tramp(_user: Any) -> None:
            _tls.runtime_thread = True
            try:
                fn()
            except BaseException as e:  # noqa: BLE001
                import sys
                print("hipline host_call: %r" % (e,), file=sys.stderr)
            finally:
                _tls.runtime_thread = False

        cb = _lib.queue_host_fn(tramp)
        return self._op(lib.hl_queue_host_call, wait, signal, cb, None,
                        keep=(cb, fn))

    def native_call(self, fn: Callable[[int, List[int]], Any],
                    bindings: Iterable[BufferArg] = (),
                    wait: Optional[Fence] = None,
                    signal: Optional[Fence] = None) -> Fence:
        """Runs |fn(native_stream, pointers)| with the queue's native stream
        at this point of its timeline (hl_queue_native_call), so that code
        of your own can enqueue work on the stream in queue order.

        |bindings| (BufferArg: buffer, access, range) declare the buffers
        that work touches: they are kept alive, their uses recorded (a
        dealloca orders after the work), and checked for use after free;
        pointers[i] is binding i's device address (an int). native_stream
        is a hipStream_t on hip (an int), an opaque handle on the host
        backend. On the host backend fn runs on the stream's worker once
        everything before it in the queue has run; on hip it runs on the
        issuing thread once the waits are enqueued, and only what it
        enqueues on the stream is ordered. fn must enqueue and return: it
        must not wait for the stream or for hipline, nor call hipline. An
        exception fails the operation's signal fence (and the queue when a
        binding writes)."""
        if not callable(fn):
            raise TypeError("fn must be callable, not %s" % type(fn).__name__)
        bindings = list(bindings)
        arr = (_lib.buffer_binding_t * max(len(bindings), 1))()
        for i, b in enumerate(bindings):
            if not isinstance(b, BufferArg) or b.buffer is None:
                raise TypeError("bindings[%d] must be a BufferArg of a "
                                "Buffer, not %r" % (i, b))
            arr[i].offset = b.offset
            arr[i].access = b.access
            arr[i].length = (b.length if b.length is not None else
                             max(0, len(b.buffer) - b.offset))

        def tramp(_user: Any, stream: Optional[int], pointers: Any,
                  count: int) -> Optional[int]:
            _tls.runtime_thread = True
            try:
                fn(stream or 0, [pointers[i] or 0 for i in range(count)])
                return None
            except BaseException as e:  # noqa: BLE001
                return _status_from_exception(e, "python native_call")
            finally:
                _tls.runtime_thread = False

        cb = _lib.native_stream_fn(tramp)
        with contextlib.ExitStack() as stack:
            for i, b in enumerate(bindings):
                assert b.buffer is not None
                arr[i].buffer = stack.enter_context(b.buffer._use())
            out = self._op(lib.hl_queue_native_call, wait, signal, cb, None,
                           len(bindings), arr, keep=(cb, fn))
        return out

    def alloca(self, size: int, wait: Optional[Fence] = None,
               signal: Optional[Fence] = None) -> Buffer:
        """A new buffer of |size| bytes, usable once `buffer.ready` (the
        returned buffer's fence) is reached."""
        size = _int_arg(size, "size")
        out = c_void_p()
        signal = self._op(lib.hl_queue_alloca, wait, signal, size, 0,
                          byref(out))
        b = Buffer._adopt(out.value)
        b.ready = signal
        return b

    def dealloca(self, buffer: Buffer, wait: Optional[Fence] = None,
                 signal: Optional[Fence] = None) -> Fence:
        """Frees |buffer|'s root in queue order."""
        _handle_arg(buffer, Buffer, "buffer")
        return self._op(lib.hl_queue_dealloca, wait, signal, buffer)

    def fill(self, buffer: Buffer, pattern: int, offset: int = 0,
             length: Optional[int] = None, wait: Optional[Fence] = None,
             signal: Optional[Fence] = None) -> Fence:
        """Fills with the 32-bit |pattern| (offset, length multiples of 4)."""
        _handle_arg(buffer, Buffer, "buffer")
        pattern = _int_arg(pattern, "pattern", -2**31, U32_MAX) & U32_MAX
        offset = _int_arg(offset, "offset")
        if length is None:
            length = max(0, len(buffer) - offset)
        length = _int_arg(length, "length")
        return self._op(lib.hl_queue_fill, wait, signal, buffer, offset,
                        length, pattern)

    def copy(self, source: Buffer, target: Buffer, source_offset: int = 0,
             target_offset: int = 0, length: Optional[int] = None,
             wait: Optional[Fence] = None,
             signal: Optional[Fence] = None) -> Fence:
        """Copies |length| bytes (default: the rest of |source|) from
        |source| at |source_offset| to |target| at |target_offset|.

        Either buffer may belong to another device of the queue's backend
        (docs/multi-device.md): when this queue's device reaches both
        (hipline.enable_peer_access) it is one peer copy on this queue;
        otherwise it is staged through host memory on queues of each side
        (Device.peer_stats counts both kinds). The use is recorded on both
        roots, so a dealloca or the last release of either, on any
        device's queue, waits for this copy."""
        _handle_arg(source, Buffer, "source")
        _handle_arg(target, Buffer, "target")
        source_offset = _int_arg(source_offset, "source_offset")
        target_offset = _int_arg(target_offset, "target_offset")
        if length is None:
            length = max(0, len(source) - source_offset)
        length = _int_arg(length, "length")
        return self._op(lib.hl_queue_copy, wait, signal, source,
                        source_offset, target, target_offset, length)

    def read(self, buffer: Buffer, into: Any, offset: int = 0,
             wait: Optional[Fence] = None,
             signal: Optional[Fence] = None) -> Fence:
        """Reads len(into) bytes at |offset| into the writable buffer-protocol
        object |into| (kept alive until the read itself finishes)."""
        _handle_arg(buffer, Buffer, "buffer")
        offset = _int_arg(offset, "offset")
        addr, n, keep = _host_span(into, True, "into")
        return self._op(lib.hl_queue_read, wait, signal, buffer, offset, addr,
                        n, keep=(keep, into))

    async def read_bytes(self, buffer: Buffer, offset: int = 0,
                         length: Optional[int] = None,
                         wait: Optional[Fence] = None) -> bytearray:
        """Reads into a new bytearray and returns it once the read is done."""
        _handle_arg(buffer, Buffer, "buffer")
        offset = _int_arg(offset, "offset")
        if length is None:
            length = max(0, len(buffer) - offset)
        out = bytearray(_int_arg(length, "length", 0, 2**63 - 1))
        await self.read(buffer, out, offset, wait)
        return out

    def write(self, buffer: Buffer, data: Any, offset: int = 0,
              wait: Optional[Fence] = None,
              signal: Optional[Fence] = None) -> Fence:
        """Writes any buffer-protocol object |data| (kept alive until the
        write itself finishes; a read-only one that is not bytes is copied
        once)."""
        _handle_arg(buffer, Buffer, "buffer")
        offset = _int_arg(offset, "offset")
        addr, n, keep = _host_span(data, False, "data")
        return self._op(lib.hl_queue_write, wait, signal, addr, buffer,
                        offset, n, keep=(keep, data))

    def dispatch(self, kernel: str,
                 args: Iterable[Union[BufferArg, Scalar]],
                 grid: _Dims = (1, 1, 1), block: _Dims = (1, 1, 1),
                 shared_bytes: int = 0, wait: Optional[Fence] = None,
                 signal: Optional[Fence] = None,
                 executable: Optional[Executable] = None) -> Fence:
        """Launches |kernel| with BufferArg / Scalar arguments in parameter
        order on a grid of |grid| blocks of |block| threads.

        Without |executable|, |kernel| is a built-in kernel (see
        hipline.kernel_names()). With an Executable, it is a kernel of
        that executable: one argument per explicit argument of its
        signature (the code object's metadata), a BufferArg for a
        "global_buffer" (declaring the access and range it touches) and a
        Scalar of the argument's size for a "by_value" one. A wrong count,
        kind or size raises InvalidArgumentError naming the argument. The
        executable stays alive until the work completes."""
        name = _str_arg(kernel, "kernel")
        args = list(args)
        arr = _kernel_args(args)
        cfg = _dispatch_config(grid, block, shared_bytes)
        with contextlib.ExitStack() as stack:
            for i, a in enumerate(args):
                if isinstance(a, BufferArg) and a.buffer is not None:
                    arr[i].buffer = stack.enter_context(a.buffer._use())
            if executable is None:
                out = self._op(lib.hl_queue_dispatch, wait, signal, name,
                               byref(cfg), len(args), arr)
            else:
                from .executable import Executable  # It imports queue.py.
                _handle_arg(executable, Executable, "executable")
                out = self._op(lib.hl_queue_dispatch_executable, wait,
                               signal, executable, name, byref(cfg),
                               len(args), arr)
        return out

    def fill_pattern(self, buffer: Buffer, seed: int,
                     wait: Optional[Fence] = None,
                     signal: Optional[Fence] = None) -> Fence:
        """Writes the pattern of |seed| over the whole buffer: word i is
        hipline.pattern_value(seed, i)."""
        _handle_arg(buffer, Buffer, "buffer")
        return self._op(lib.hl_queue_fill_pattern, wait, signal, buffer,
                        _int_arg(seed, "seed", 0, U32_MAX))

    def verify_pattern(self, buffer: Buffer, seed: int, counter: Buffer,
                       wait: Optional[Fence] = None,
                       signal: Optional[Fence] = None) -> Fence:
        """Adds the number of words of |buffer| that differ from the pattern
        of |seed| to the uint32 at the start of |counter| (zero it first)."""
        _handle_arg(buffer, Buffer, "buffer")
        _handle_arg(counter, Buffer, "counter")
        return self._op(lib.hl_queue_verify_pattern, wait, signal, buffer,
                        _int_arg(seed, "seed", 0, U32_MAX), counter)

    def spin(self, cycles: int, wait: Optional[Fence] = None,
             signal: Optional[Fence] = None) -> Fence:
        """Busy work of |cycles| on the stream (for tests and benchmarks)."""
        return self._op(lib.hl_queue_spin, wait, signal,
                        _int_arg(cycles, "cycles"))

    def idle(self) -> Fence:
        """A fence reached once everything submitted so far completes:
        `await queue.idle()`."""
        s = _lib.queue_stats_t()
        _call(lib.hl_queue_stats, self, byref(s))
        f = Fence(device=self.device if not self.device.closed else None)
        with self.timeline as t:
            f.insert(t, s.submitted_value)
        return f

    def wait_idle(self, timeout: Optional[float] = None) -> None:
        """Blocks until everything submitted has finished (None or inf:
        forever)."""
        _ccall(lib.hl_queue_wait_idle, self, _deadline(timeout))

    def check(self) -> None:
        """Raises the queue's failure, if it has failed."""
        _ccall(lib.hl_queue_status, self)

    def stats(self) -> QueueStats:
        """The queue's QueueStats."""
        s = _lib.queue_stats_t()
        _call(lib.hl_queue_stats, self, byref(s))
        return _struct_to(QueueStats, s)

    def memory_stats(self) -> MemoryStats:
        """The MemoryStats of this queue's allocations."""
        s = _lib.memory_stats_t()
        _ccall(lib.hl_queue_memory_stats, self, byref(s))
        return _struct_to(MemoryStats, s)

