"""hipline from Python: devices, queues, timelines, buffers and invocations.

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
"""

import asyncio
import atexit
import ctypes
import dataclasses
import enum
import threading
import time
from ctypes import byref, c_bool, c_int, c_uint64, c_void_p
from typing import Optional

from . import _lib
from ._lib import lib

__version__ = "0.1.0"
library_path = _lib.library_path

INFINITE = 2**63 - 1  # HL_INFINITE_FUTURE

#===----------------------------------------------------------------------===#
# Status and errors
#===----------------------------------------------------------------------===#


class StatusCode(enum.IntEnum):
    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class Error(Exception):
    """A hipline status: `code` (StatusCode), `message`, `source`.

    Error(code, message) or, for a per-code subclass, just
    NotFoundError(message)."""

    code = StatusCode.UNKNOWN

    def __init__(self, code, message=None, source=""):
        if message is None and isinstance(code, str):
            code, message = type(self).code, code
        self.code = StatusCode(code)
        self.message = message
        self.source = source
        super().__init__("%s: %s" % (self.code.name, message))


def _error_class_name(code):
    return "".join(p.capitalize() for p in code.name.split("_")) + "Error"


_ERROR_CLASSES = {}
for _code in StatusCode:
    if _code is StatusCode.OK:
        continue
    _cls = type(_error_class_name(_code), (Error,), {"code": _code})
    _cls.__module__ = __name__
    globals()[_cls.__name__] = _cls
    _ERROR_CLASSES[_code] = _cls
del _code, _cls


def _make_error(code, message, source=""):
    cls = _ERROR_CLASSES.get(code, Error)
    return cls(code, message, source)


def _status_error(status, free):
    """Turns a non-OK status pointer into an Error (freeing it if |free|)."""
    code = lib.hl_status_code(status)
    message = (lib.hl_status_message(status) or b"").decode("utf-8", "replace")
    source = (lib.hl_status_source(status) or b"").decode("utf-8", "replace")
    if free:
        lib.hl_status_free(status)
    return _make_error(code, message, source)


def _check(status):
    if status:
        raise _status_error(status, True)


def _status_from_exception(exc, context):
    """A new hl_status_t (owned by the caller) describing |exc|."""
    if isinstance(exc, Error):
        code, text = exc.code, "%s: %s" % (context, exc.message)
    else:
        code = StatusCode.INTERNAL
        text = "%s: %s: %s" % (context, type(exc).__name__, exc)
    return lib.hl_status_make(int(code), b"python", 0, b"%s",
                              text.encode("utf-8", "replace"))


def _closed(what):
    return _make_error(StatusCode.FAILED_PRECONDITION,
                       "%s is closed (already released)" % what)


def _deadline(timeout):
    if timeout is None:
        return INFINITE
    return lib.hl_deadline_after(max(0, int(timeout * 1e9)))


def _name(ptr_fn, value):
    return (ptr_fn(value) or b"").decode()


#===----------------------------------------------------------------------===#
# Handles: released once, deterministically or by the GC
#===----------------------------------------------------------------------===#

_tls = threading.local()  # .runtime_thread: inside a callback from hipline.
_graveyard = []  # (release_fn, ptr) dropped on a hipline thread.
_graveyard_lock = threading.Lock()
_handle_lock = threading.Lock()


def _on_runtime_thread():
    return getattr(_tls, "runtime_thread", False)


def _drain_graveyard():
    if not _graveyard or _on_runtime_thread():
        return
    with _graveyard_lock:
        items = list(_graveyard)
        _graveyard.clear()
    for release, ptr in items:
        release(ptr)


class _Handle:
    """Owns one reference to a C object."""

    _release = None  # The C release function.
    _kind = "handle"

    def __init__(self, ptr):
        self._ptr = ptr

    @classmethod
    def _adopt(cls, ptr, *args):
        obj = cls.__new__(cls)
        _Handle.__init__(obj, ptr)
        obj._init_borrowed(*args)
        return obj

    def _init_borrowed(self, *args):
        pass

    @property
    def _p(self):
        ptr = self._ptr
        if ptr is None:
            raise _closed(self._kind)
        return ptr

    @property
    def closed(self):
        return self._ptr is None

    def close(self):
        """Releases the reference now. Further use raises; closing twice is a
        no-op."""
        with _handle_lock:
            ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr is not None:
            type(self)._release(ptr)
        _drain_graveyard()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        ptr = getattr(self, "_ptr", None)
        if ptr is None:
            return
        self._ptr = None
        release = type(self)._release
        try:
            if _on_runtime_thread():
                # Never release on hipline's own threads: a last queue or
                # device release waits for work those threads complete.
                with _graveyard_lock:
                    _graveyard.append((release, ptr))
            else:
                release(ptr)
        except Exception:  # Interpreter shutdown: nothing left to do.
            pass


#===----------------------------------------------------------------------===#
# Plain data
#===----------------------------------------------------------------------===#


def _struct_to(cls, s):
    return cls(**{f.name: getattr(s, f.name) for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class BackendInfo:
    kind: str
    available: bool
    device_count: int
    reason: str


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    backend: str
    ordinal: int
    name: str
    target: str
    memory_bytes: int
    compute_units: int


@dataclasses.dataclass(frozen=True)
class PoolAttributes:
    release_threshold: int
    reuse_flags: int
    limit_bytes: int


@dataclasses.dataclass(frozen=True)
class QueueStats:
    submissions: int
    submitted_value: int
    waits_issued: int
    waits_elided: int
    parked: int
    failed: int
    depth_stalls: int


@dataclasses.dataclass(frozen=True)
class MemoryStats:
    bytes_in_use: int
    bytes_in_use_peak: int
    bytes_reserved: int
    bytes_reserved_peak: int
    allocas: int
    deallocas: int
    deallocas_cancelled: int
    fallback_releases_frontier: int
    fallback_releases_device_sync: int
    ooms: int
    use_after_free: int
    command_buffer_executions: int
    fills_elided: int
    fills_shrunk: int
    fill_bytes_elided: int
    events_live: int
    events_pooled: int
    streams_live: int
    fallback_releases_ordered: int
    escaped_roots: int
    fallback_device_sync_owed: int
    pool_slabs: int
    pool_slab_bytes: int
    pool_used_bytes: int
    pool_free_bytes: int
    pool_largest_free_block: int
    pool_fragmentation: float
    pool_pending_free_blocks: int
    pool_slab_allocs: int
    pool_slab_releases: int
    pool_block_reuses: int
    pool_cross_queue_reuses: int
    pool_peak_slab_bytes: int
    pool_peak_requested_bytes: int
    pool_peak_rounding_bytes: int
    pool_peak_tail_bytes: int
    pool_peak_fragment_bytes: int
    pool_peak_free_slab_bytes: int


@dataclasses.dataclass(frozen=True)
class InvocationStats:
    invocations: int
    async_imports: int
    sync_imports: int
    alias_detected: int
    async_deallocs: int
    fallback_releases_frontier: int
    fallback_releases_device_sync: int
    fallback_releases_ordered: int


@dataclasses.dataclass(frozen=True)
class AssumeNoAlias:
    """The value an invocation will use and where it comes from:
    "invocation", "api" (ProgramInvocation.global_assume_no_alias) or
    "environment" (HIPLINE_ASSUME_NO_ALIAS)."""
    value: bool
    source: str


_BACKENDS = {"auto": 0, "host": 1, "hip": 2}
_FALLBACKS = {None: 0, "default": 0, "frontier": 1, "device-sync": 2,
              "ordered": 3}
_ACCESS = {"r": 1, "read": 1, "w": 2, "write": 2, "rw": 3, "read_write": 3}


def _enum_arg(table, value, what):
    if isinstance(value, int) and value in table.values():
        return value
    try:
        return table[value]
    except (KeyError, TypeError):
        raise _make_error(
            StatusCode.INVALID_ARGUMENT, "unknown %s %r (accepted: %s)" %
            (what, value, ", ".join(str(k) for k in table if k is not None)))


def backend_query(kind="host"):
    info = _lib.backend_info_t()
    _check(lib.hl_backend_query(_enum_arg(_BACKENDS, kind, "backend"),
                                byref(info)))
    return BackendInfo(_name(lib.hl_backend_kind_name, info.kind),
                       bool(info.available), info.device_count,
                       info.reason.decode("utf-8", "replace"))


def environment_check():
    """Raises InvalidArgumentError naming the first invalid HIPLINE_*
    variable."""
    _check(lib.hl_environment_check())


def live_device_count():
    return lib.hl_device_live_count()


def invocation_stats_global():
    s = _lib.invocation_stats_t()
    lib.hl_invocation_stats_global(byref(s))
    return _struct_to(InvocationStats, s)


def kernel_names():
    return [lib.hl_dispatch_kernel_name(i).decode()
            for i in range(lib.hl_dispatch_kernel_count())]


def pattern_value(seed, index):
    return lib.hl_pattern_value(seed, index)


def register_kernel_functions():
    """Registers hipline.fill_pattern, .copy, .clone and .axpy2 (idempotent)."""
    _check(lib.hl_kernels_register_functions())


#===----------------------------------------------------------------------===#
# Completion callbacks: one ctypes callback for every wait
#===----------------------------------------------------------------------===#

_pending = {}  # token -> (loop or None, future or None, keep-alive objects)
_pending_lock = threading.Lock()
_next_token = [1]
_notifier_device = [None]


def _settle(fut, err):
    if fut.done():  # Cancelled by the awaiting task.
        return
    if err is None:
        fut.set_result(None)
    else:
        fut.set_exception(err)


def _on_reached(user, status):
    # Runs on the device's completion thread with the GIL.
    _tls.runtime_thread = True
    try:
        with _pending_lock:
            entry = _pending.pop(user, None)
        if entry is None:
            return
        loop, fut, keep = entry
        err = _status_error(status, False) if status else None
        if loop is not None:
            try:
                # |keep| rides along so it is dropped on the loop's thread.
                loop.call_soon_threadsafe(_settle_keep, fut, err, keep)
            except RuntimeError:  # The loop is closed.
                pass
        # Whatever |keep| releases here goes to the graveyard (flag above).
        del entry, keep
    except BaseException:  # Never let an exception into C.
        pass
    finally:
        _tls.runtime_thread = False


def _settle_keep(fut, err, keep):
    _settle(fut, err)


_ON_REACHED = _lib.fence_reached_fn(_on_reached)  # Lives as long as the module.


def _notify(fence_ptr, device_ptr, loop, fut, keep):
    _drain_graveyard()
    with _pending_lock:
        token = _next_token[0]
        _next_token[0] += 1
        _pending[token] = (loop, fut, keep)
    status = lib.hl_fence_call_when_reached(fence_ptr, device_ptr,
                                            _ON_REACHED, token)
    if status:
        with _pending_lock:
            _pending.pop(token, None)
        raise _status_error(status, True)


def _settle_at_exit():
    """Before the interpreter finalizes: lets work in flight complete so no
    completion callback runs into a dying interpreter. Callbacks that wait
    on semaphores nobody will signal are left (they never fire)."""
    with _pending_lock:
        devices = {id(e[2][1]): e[2][1] for e in _pending.values()
                   if isinstance(e[2], tuple) and len(e[2]) == 2 and
                   isinstance(e[2][1], Device)}
    for dev in devices.values():
        try:
            dev.wait_idle(timeout=30)
        except Exception:  # A failed queue: its callbacks have fired.
            pass
    # Callbacks already queued on completion threads: wait while they drain.
    last, quiet_since = -1, time.monotonic()
    while True:
        n = pending_callbacks()
        now = time.monotonic()
        if n != last:
            last, quiet_since = n, now
        if n == 0 or now - quiet_since > 0.2:
            break
        time.sleep(0.005)
    _drain_graveyard()


atexit.register(_settle_at_exit)


def pending_callbacks():
    """Number of completion callbacks registered and not yet fired."""
    with _pending_lock:
        return len(_pending)


def _default_notifier():
    # For fences that belong to no device (built by hand from semaphores):
    # a host device whose completion thread delivers their callbacks.
    with _pending_lock:
        dev = _notifier_device[0]
    if dev is None:
        dev = Device("host")
        with _pending_lock:
            if _notifier_device[0] is None:
                _notifier_device[0] = dev
            else:
                dev.close()
                dev = _notifier_device[0]
    return dev


def _await_fence(fence_ptr, device, keep):
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    if device is None:
        device = _default_notifier()
    _notify(fence_ptr, device._p, loop, fut, (keep, device))
    return fut


#===----------------------------------------------------------------------===#
# Devices
#===----------------------------------------------------------------------===#


class Device(_Handle):
    """A device: `Device("host")`, `Device("hip", ordinal=1)`, `Device()`
    (HIPLINE_BACKEND, then hip if present, else host).

    fallback: None (HIPLINE_FALLBACK, else "ordered"), "ordered",
        "frontier" or "device-sync".
    checked: None (HIPLINE_CHECKED), True or False.
    """

    _release = lib.hl_device_release
    _kind = "Device"

    def __init__(self, backend="auto", ordinal=0, fallback=None, checked=None,
                 pool_release_threshold=None, pool_reuse_flags=None):
        opts = _lib.device_options_t()
        lib.hl_device_options_initialize(byref(opts))
        opts.backend = _enum_arg(_BACKENDS, backend, "backend")
        opts.ordinal = ordinal
        opts.fallback = _enum_arg(_FALLBACKS, fallback, "fallback mode")
        if checked is not None:
            opts.checked = 1 if checked else 0
        if pool_release_threshold is not None:
            opts.pool.release_threshold = pool_release_threshold
            opts.pool_release_threshold_set = True
        if pool_reuse_flags is not None:
            opts.pool.reuse_flags = pool_reuse_flags
            opts.pool_reuse_flags_set = True
        out = c_void_p()
        _check(lib.hl_device_create(byref(opts), lib.hl_allocator_system(),
                                    byref(out)))
        super().__init__(out.value)

    @classmethod
    def _borrow(cls, ptr):
        lib.hl_device_retain(ptr)
        return cls._adopt(ptr)

    @property
    def properties(self):
        p = _lib.device_properties_t()
        _check(lib.hl_device_properties(self._p, byref(p)))
        return DeviceProperties(_name(lib.hl_backend_kind_name, p.backend),
                                p.ordinal, p.name.decode(), p.target.decode(),
                                p.memory_bytes, p.compute_units)

    @property
    def fallback_mode(self):
        return _name(lib.hl_fallback_mode_name,
                     lib.hl_device_fallback_mode(self._p))

    @property
    def checked(self):
        return bool(lib.hl_device_checked(self._p))

    @property
    def pool_attributes(self):
        a = _lib.pool_attributes_t()
        _check(lib.hl_device_pool_attributes(self._p, byref(a)))
        return PoolAttributes(a.release_threshold, a.reuse_flags,
                              a.limit_bytes)

    def trim(self, min_bytes_to_keep=0):
        _check(lib.hl_device_trim(self._p, min_bytes_to_keep))

    def wait_idle(self, timeout=None):
        _check(lib.hl_device_wait_idle(self._p, _deadline(timeout)))

    def memory_stats(self):
        s = _lib.memory_stats_t()
        _check(lib.hl_device_memory_stats(self._p, byref(s)))
        return _struct_to(MemoryStats, s)

    def reset_peak_memory_stats(self):
        """Starts the memory peaks (bytes_in_use_peak of the device and its
        queues, bytes_reserved_peak) again from the current values, like
        torch.cuda.reset_peak_memory_stats."""
        _check(lib.hl_device_reset_peak_memory_stats(self._p))

    def invocation_stats(self):
        s = _lib.invocation_stats_t()
        _check(lib.hl_device_invocation_stats(self._p, byref(s)))
        return _struct_to(InvocationStats, s)

    def create_queue(self):
        return Queue(self)

    def fence(self):
        """An empty fence whose awaits are delivered by this device."""
        return Fence(device=self)


#===----------------------------------------------------------------------===#
# Semaphores and fences
#===----------------------------------------------------------------------===#


class Semaphore(_Handle):
    _release = lib.hl_semaphore_release
    _kind = "Semaphore"

    def __init__(self, initial_value=0):
        out = c_void_p()
        _check(lib.hl_semaphore_create(initial_value,
                                       lib.hl_allocator_system(), byref(out)))
        super().__init__(out.value)

    @classmethod
    def _borrow(cls, ptr):
        lib.hl_semaphore_retain(ptr)
        return cls._adopt(ptr)

    @property
    def value(self):
        """The current value; raises the failure of a failed semaphore."""
        v = c_uint64()
        _check(lib.hl_semaphore_query(self._p, byref(v)))
        return v.value

    def signal(self, value):
        _check(lib.hl_semaphore_signal(self._p, value))

    def fail(self, code=StatusCode.ABORTED, message="failed from Python"):
        code = StatusCode(code)
        if code is StatusCode.OK:
            raise _make_error(StatusCode.INVALID_ARGUMENT,
                              "Semaphore.fail needs a code other than OK")
        p = self._p
        _check(lib.hl_semaphore_fail(p, lib.hl_status_make(
            int(code), b"python", 0, b"%s", str(message).encode())))

    def wait(self, value, timeout=None):
        """Blocks (GIL released) until |value|, a failure or the timeout
        (DeadlineExceededError)."""
        _check(lib.hl_semaphore_wait(self._p, value, _deadline(timeout)))

    def at(self, value, device=None):
        """A fence holding self@value."""
        f = Fence(device=device)
        f.insert(self, value)
        return f


class Fence(_Handle):
    """A set of semaphore@value pairs. `await fence` waits for all of them
    (or raises the first failure). `device` names the completion thread that
    delivers awaits; fences from queue operations carry their queue's."""

    _release = lib.hl_fence_release
    _kind = "Fence"

    def __init__(self, pairs=(), device=None):
        out = c_void_p()
        _check(lib.hl_fence_create(lib.hl_allocator_system(), byref(out)))
        super().__init__(out.value)
        self.device = device
        for sem, value in pairs:
            self.insert(sem, value)

    def _init_borrowed(self, device=None):
        self.device = device

    @classmethod
    def _borrow(cls, ptr, device=None):
        lib.hl_fence_retain(ptr)
        return cls._adopt(ptr, device)

    def insert(self, semaphore, value):
        _check(lib.hl_fence_insert(self._p, semaphore._p, value))
        return self

    def join(self, other):
        if other is not None:
            _check(lib.hl_fence_join(self._p, other._p))
        return self

    def clear(self):
        lib.hl_fence_clear(self._p)

    def __len__(self):
        return lib.hl_fence_count(self._p)

    @property
    def entries(self):
        out, p = [], self._p
        for i in range(lib.hl_fence_count(p)):
            sem, value = c_void_p(), c_uint64()
            lib.hl_fence_entry(p, i, byref(sem), byref(value))
            out.append((Semaphore._borrow(sem.value), value.value))
        return out

    def is_reached(self):
        r = c_bool()
        _check(lib.hl_fence_is_reached(self._p, byref(r)))
        return bool(r.value)

    def wait(self, timeout=None):
        _check(lib.hl_fence_wait(self._p, _deadline(timeout)))

    def __await__(self):
        return _await_fence(self._p, self.device, self).__await__()


def _fp(fence):
    return None if fence is None else fence._p


#===----------------------------------------------------------------------===#
# Queues and buffers
#===----------------------------------------------------------------------===#


class Buffer(_Handle):
    """A view of an allocation. `ready` is the fence of the alloca that made
    it (None for other buffers)."""

    _release = lib.hl_buffer_release
    _kind = "Buffer"
    ready = None

    @classmethod
    def _borrow(cls, ptr):
        lib.hl_buffer_retain(ptr)
        return cls._adopt(ptr)

    def __len__(self):
        return lib.hl_buffer_length(self._p)

    @property
    def length(self):
        return lib.hl_buffer_length(self._p)

    @property
    def offset(self):
        return lib.hl_buffer_offset(self._p)

    @property
    def origin(self):
        return _name(lib.hl_buffer_origin_name, lib.hl_buffer_origin(self._p))

    @property
    def root_id(self):
        return lib.hl_buffer_root_id(self._p)

    @property
    def is_freed(self):
        return bool(lib.hl_buffer_is_freed(self._p))

    @property
    def device(self):
        return Device._borrow(lib.hl_buffer_device(self._p))

    def device_pointer(self):
        """The device address (or None before the alloca is issued). The
        root escapes: its fallback release can no longer be queue-ordered."""
        return lib.hl_buffer_device_pointer(self._p)

    def subview(self, offset, length):
        out = c_void_p()
        _check(lib.hl_buffer_subview(self._p, offset, length, byref(out)))
        return Buffer._adopt(out.value)

    def register_global(self):
        _check(lib.hl_buffer_register_global(self._p))

    def unregister_global(self):
        _check(lib.hl_buffer_unregister_global(self._p))

    def use_fence(self):
        f = Fence(device=None)
        _check(lib.hl_buffer_use_fence(self._p, f._p))
        return f

    def mutation_barrier(self):
        f = Fence(device=None)
        _check(lib.hl_buffer_mutation_barrier(self._p, f._p))
        return f


class BufferArg:
    """A buffer argument of Queue.dispatch with its access ("r", "w",
    "rw") and range (default: the whole buffer)."""

    def __init__(self, buffer, access="rw", offset=0, length=None):
        self.buffer = buffer
        self.access = _enum_arg(_ACCESS, access, "access")
        self.offset = offset
        self.length = length


class Scalar:
    """A scalar argument of Queue.dispatch: Scalar.u32(7), Scalar.u64(n),
    Scalar.f32(2.0)."""

    def __init__(self, bits, size):
        self.bits, self.size = bits, size

    @classmethod
    def u32(cls, v):
        return cls(v & 0xFFFFFFFF, 4)

    @classmethod
    def u64(cls, v):
        return cls(v & 0xFFFFFFFFFFFFFFFF, 8)

    @classmethod
    def f32(cls, v):
        return cls(ctypes.c_uint32.from_buffer(ctypes.c_float(v)).value, 4)


def _host_span(obj, writable):
    """(address, length, keep-alive) for a buffer-protocol object."""
    mv = memoryview(obj)
    if not mv.c_contiguous:
        raise _make_error(StatusCode.INVALID_ARGUMENT,
                          "host buffer must be C-contiguous")
    mv = mv.cast("B")
    n = mv.nbytes
    if writable:
        if mv.readonly:
            raise _make_error(StatusCode.INVALID_ARGUMENT,
                              "read target must be writable (bytearray, "
                              "memoryview of one, array.array...)")
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


class Queue(_Handle):
    """A queue of |device|. Every operation takes optional `wait` and
    `signal` fences and returns its signal fence (a fresh one when none is
    given), which can be awaited."""

    _release = lib.hl_queue_release
    _kind = "Queue"

    def __init__(self, device):
        out = c_void_p()
        _check(lib.hl_queue_create(device._p, byref(out)))
        super().__init__(out.value)
        self.device = device

    def _init_borrowed(self):
        self.device = Device._borrow(lib.hl_queue_device(self._ptr))

    @classmethod
    def _borrow(cls, ptr):
        lib.hl_queue_retain(ptr)
        return cls._adopt(ptr)

    @property
    def id(self):
        return lib.hl_queue_id(self._p)

    @property
    def timeline(self):
        return Semaphore._borrow(lib.hl_queue_timeline(self._p))

    def _signal(self, signal):
        if signal is not None:
            return signal
        f = Fence(device=self.device)
        with Semaphore(0) as s:
            f.insert(s, 1)
        return f

    def barrier(self, wait=None, signal=None):
        signal = self._signal(signal)
        _check(lib.hl_queue_barrier(self._p, _fp(wait), signal._p))
        return signal

    def host_call(self, fn, wait=None, signal=None):
        """Runs |fn()| on a runtime thread in queue order. Exceptions are
        swallowed (printed); keep |fn| short and non-blocking."""
        signal = self._signal(signal)
        cell = []

        def tramp(_user):
            _tls.runtime_thread = True
            try:
                fn()
            except BaseException as e:  # noqa: BLE001
                import sys
                print("hipline host_call: %r" % (e,), file=sys.stderr)
            finally:
                _tls.runtime_thread = False

        cb = _lib.queue_host_fn(tramp)
        cell.append(cb)
        _check(lib.hl_queue_host_call(self._p, _fp(wait), signal._p, cb,
                                      None))
        self._keep_until(signal, (cb, fn))
        return signal

    def _keep_until(self, signal, keep):
        """Keeps |keep| alive until |signal| is reached or failed."""
        _notify(signal._p, self.device._p, None, None, (keep, self.device))

    def alloca(self, size, wait=None, signal=None):
        signal = self._signal(signal)
        out = c_void_p()
        _check(lib.hl_queue_alloca(self._p, _fp(wait), signal._p, size, 0,
                                   byref(out)))
        b = Buffer._adopt(out.value)
        b.ready = signal
        return b

    def dealloca(self, buffer, wait=None, signal=None):
        signal = self._signal(signal)
        _check(lib.hl_queue_dealloca(self._p, _fp(wait), signal._p,
                                     buffer._p))
        return signal

    def fill(self, buffer, pattern, offset=0, length=None, wait=None,
             signal=None):
        """Fills with the 32-bit |pattern| (offset, length multiples of 4)."""
        if length is None:
            length = len(buffer) - offset
        signal = self._signal(signal)
        _check(lib.hl_queue_fill(self._p, _fp(wait), signal._p, buffer._p,
                                 offset, length, pattern & 0xFFFFFFFF))
        return signal

    def copy(self, source, target, source_offset=0, target_offset=0,
             length=None, wait=None, signal=None):
        if length is None:
            length = len(source) - source_offset
        signal = self._signal(signal)
        _check(lib.hl_queue_copy(self._p, _fp(wait), signal._p, source._p,
                                 source_offset, target._p, target_offset,
                                 length))
        return signal

    def read(self, buffer, into, offset=0, wait=None, signal=None):
        """Reads len(into) bytes at |offset| into the writable buffer-protocol
        object |into| (kept alive until the read completes)."""
        addr, n, keep = _host_span(into, True)
        signal = self._signal(signal)
        _check(lib.hl_queue_read(self._p, _fp(wait), signal._p, buffer._p,
                                 offset, addr, n))
        self._keep_until(signal, (keep, into))
        return signal

    async def read_bytes(self, buffer, offset=0, length=None, wait=None):
        """Reads into a new bytearray and returns it once the read is done."""
        if length is None:
            length = len(buffer) - offset
        out = bytearray(length)
        await self.read(buffer, out, offset, wait)
        return out

    def write(self, buffer, data, offset=0, wait=None, signal=None):
        """Writes any buffer-protocol object |data| (kept alive until the
        write completes; a read-only one that is not bytes is copied once)."""
        addr, n, keep = _host_span(data, False)
        signal = self._signal(signal)
        _check(lib.hl_queue_write(self._p, _fp(wait), signal._p, addr,
                                  buffer._p, offset, n))
        self._keep_until(signal, (keep, data))
        return signal

    def dispatch(self, kernel, args, grid=(1, 1, 1), block=(1, 1, 1),
                 shared_bytes=0, wait=None, signal=None):
        """Launches |kernel| (see hipline.kernel_names()) with BufferArg /
        Scalar arguments in parameter order."""
        n = len(args)
        arr = (_lib.kernel_arg_t * max(n, 1))()
        for i, a in enumerate(args):
            if isinstance(a, BufferArg):
                arr[i].kind = 0
                arr[i].buffer = None if a.buffer is None else a.buffer._p
                arr[i].offset = a.offset
                arr[i].length = (a.length if a.length is not None else
                                 (len(a.buffer) - a.offset
                                  if a.buffer is not None else 0))
                arr[i].access = a.access
            elif isinstance(a, Scalar):
                arr[i].kind = 1
                arr[i].scalar = a.bits
                arr[i].size = a.size
            else:
                raise _make_error(StatusCode.INVALID_ARGUMENT,
                                  "dispatch argument %d must be BufferArg or "
                                  "Scalar, not %s" % (i, type(a).__name__))
        cfg = _lib.dispatch_config_t()
        for j in range(3):
            cfg.grid[j] = tuple(grid)[j] if j < len(grid) else 1
            cfg.block[j] = tuple(block)[j] if j < len(block) else 1
        cfg.shared_bytes = shared_bytes
        signal = self._signal(signal)
        _check(lib.hl_queue_dispatch(self._p, _fp(wait), signal._p,
                                     kernel.encode(), byref(cfg), n, arr))
        return signal

    def fill_pattern(self, buffer, seed, wait=None, signal=None):
        signal = self._signal(signal)
        _check(lib.hl_queue_fill_pattern(self._p, _fp(wait), signal._p,
                                         buffer._p, seed))
        return signal

    def verify_pattern(self, buffer, seed, counter, wait=None, signal=None):
        signal = self._signal(signal)
        _check(lib.hl_queue_verify_pattern(self._p, _fp(wait), signal._p,
                                           buffer._p, seed, counter._p))
        return signal

    def spin(self, cycles, wait=None, signal=None):
        signal = self._signal(signal)
        _check(lib.hl_queue_spin(self._p, _fp(wait), signal._p, cycles))
        return signal

    def idle(self):
        """A fence reached once everything submitted so far completes:
        `await queue.idle()`."""
        s = _lib.queue_stats_t()
        lib.hl_queue_stats(self._p, byref(s))
        f = Fence(device=self.device)
        with self.timeline as t:
            f.insert(t, s.submitted_value)
        return f

    def wait_idle(self, timeout=None):
        _check(lib.hl_queue_wait_idle(self._p, _deadline(timeout)))

    def check(self):
        """Raises the queue's failure, if it has failed."""
        _check(lib.hl_queue_status(self._p))

    def stats(self):
        s = _lib.queue_stats_t()
        lib.hl_queue_stats(self._p, byref(s))
        return _struct_to(QueueStats, s)

    def memory_stats(self):
        s = _lib.memory_stats_t()
        _check(lib.hl_queue_memory_stats(self._p, byref(s)))
        return _struct_to(MemoryStats, s)


#===----------------------------------------------------------------------===#
# Functions and invocations
#===----------------------------------------------------------------------===#

_registered_callbacks = []  # Callbacks of functions ever registered: forever.


class Function(_Handle):
    """A function: a Python callable, or a registered one (kernel-backed
    built-ins: Function.lookup("hipline.clone")).

    Function(name, fn, args=("r", "rw"), results=1): |fn(queue, args, wait,
    signal)| runs on the invoking thread; it must enqueue work on |queue|
    that waits on |wait| and signals |signal|, and return |results| Buffers
    (each gets a new reference). An exception fails the invocation with its
    code (hipline.Error) or INTERNAL.
    """

    _release = lib.hl_function_release
    _kind = "Function"
    _callback = None

    def __init__(self, name, fn, args=(), results=0):
        access = [_enum_arg(_ACCESS, a, "access") for a in args]
        acc = (c_int * max(len(access), 1))(*access)
        sig = _lib.function_signature_t(len(access), results, acc)
        self._fn = fn

        def tramp(_user, q, argv, argc, wait, signal, out, rcount):
            try:
                queue = Queue._borrow(q)
                bufs = [Buffer._borrow(argv[i]) for i in range(argc)]
                w = Fence._borrow(wait, queue.device) if wait else None
                s = Fence._borrow(signal, queue.device)
                res = fn(queue, bufs, w, s)
                if res is None:
                    res = ()
                elif isinstance(res, Buffer):
                    res = (res,)
                res = list(res)
                if len(res) != rcount:
                    raise _make_error(
                        StatusCode.INVALID_ARGUMENT,
                        "returned %d results, the signature has %d" %
                        (len(res), rcount))
                for i, b in enumerate(res):
                    if not isinstance(b, Buffer):
                        raise _make_error(StatusCode.INVALID_ARGUMENT,
                                          "result %d is a %s, not a Buffer" %
                                          (i, type(b).__name__))
                for i, b in enumerate(res):
                    lib.hl_buffer_retain(b._p)
                    out[i] = b._p
                return None
            except BaseException as e:  # noqa: BLE001
                return _status_from_exception(e, "python function %r" % name)

        cb = _lib.function_fn(tramp)
        out = c_void_p()
        _check(lib.hl_function_create(name.encode(), byref(sig), cb, None,
                                      lib.hl_allocator_system(), byref(out)))
        super().__init__(out.value)
        self._callback = cb

    @classmethod
    def _borrow(cls, ptr):
        lib.hl_function_retain(ptr)
        return cls._adopt(ptr)

    @classmethod
    def lookup(cls, name):
        """A registered function. The kernel-backed built-ins ("hipline.*")
        are registered on first lookup."""
        out = c_void_p()
        status = lib.hl_function_lookup(name.encode(), byref(out))
        if status and name.startswith("hipline."):
            lib.hl_status_free(status)
            register_kernel_functions()
            status = lib.hl_function_lookup(name.encode(), byref(out))
        _check(status)
        return cls._adopt(out.value)

    @property
    def name(self):
        return lib.hl_function_name(self._p).decode()

    def register(self):
        _check(lib.hl_function_register(self._p))
        if self._callback is not None:  # The registry may outlive us.
            _registered_callbacks.append(self._callback)

    @staticmethod
    def unregister(name):
        _check(lib.hl_function_unregister(name.encode()))


_SOURCES = {0: "invocation", 1: "api", 2: "environment"}


class _InvocationMeta(type):
    @property
    def global_assume_no_alias(cls):
        """The process-wide value: None (unset), True or False. When set (here
        or by HIPLINE_ASSUME_NO_ALIAS) it overrides every invocation's own."""
        v, src = c_int(), c_int()
        _check(lib.hl_get_assume_no_alias(byref(v), byref(src)))
        return None if v.value < 0 else bool(v.value)

    @global_assume_no_alias.setter
    def global_assume_no_alias(cls, value):
        if value is None:
            lib.hl_set_assume_no_alias(-1)
        elif isinstance(value, bool):
            lib.hl_set_assume_no_alias(1 if value else 0)
        else:
            raise _make_error(StatusCode.INVALID_ARGUMENT,
                              "global_assume_no_alias must be None, True or "
                              "False, not %r" % (value,))

    @property
    def global_assume_no_alias_source(cls):
        """"api", "environment", or None while unset."""
        v, src = c_int(), c_int()
        _check(lib.hl_get_assume_no_alias(byref(v), byref(src)))
        return None if v.value < 0 else _SOURCES.get(src.value, "unknown")


class ProgramInvocation(_Handle, metaclass=_InvocationMeta):
    """One call of |function| on |queue| (shortfin's name).

    inv = ProgramInvocation(fn, queue, [a, b]); inv.assume_no_alias = False
    results = await inv          # invokes if needed, waits, takes results
    """

    _release = lib.hl_invocation_release
    _kind = "ProgramInvocation"

    def __init__(self, function, queue, args=(), assume_no_alias=None):
        out = c_void_p()
        _check(lib.hl_invocation_create(function._p, queue._p, byref(out)))
        super().__init__(out.value)
        self.function, self.queue = function, queue  # Keep callbacks alive.
        self._results = None
        for a in args:
            self.add_arg(a)
        if assume_no_alias is not None:
            self.assume_no_alias = assume_no_alias

    def add_arg(self, buffer):
        _check(lib.hl_invocation_add_argument(self._p, buffer._p))
        return self

    def add_wait(self, semaphore_or_fence, value=None):
        """Waits on semaphore@value, or on every pair of a fence."""
        if isinstance(semaphore_or_fence, Fence):
            for sem, v in semaphore_or_fence.entries:
                with sem:
                    _check(lib.hl_invocation_add_wait(self._p, sem._p, v))
        else:
            _check(lib.hl_invocation_add_wait(self._p, semaphore_or_fence._p,
                                              value))
        return self

    @property
    def assume_no_alias(self):
        return bool(lib.hl_invocation_assume_no_alias(self._p))

    @assume_no_alias.setter
    def assume_no_alias(self, value):
        if not isinstance(value, bool):
            raise _make_error(StatusCode.INVALID_ARGUMENT,
                              "assume_no_alias must be True or False, not %r"
                              % (value,))
        lib.hl_invocation_set_assume_no_alias(self._p, value)

    @property
    def effective_assume_no_alias(self):
        v, src = c_bool(), c_int()
        _check(lib.hl_invocation_effective_assume_no_alias(
            self._p, byref(v), byref(src)))
        return AssumeNoAlias(bool(v.value), _SOURCES.get(src.value, "unknown"))

    def invoke(self):
        """Exports the arguments, calls the function, imports the results;
        returns once the work is enqueued. Once only."""
        _check(lib.hl_invocation_invoke(self._p))
        self._did_invoke = True
        return self

    @property
    def signal_fence(self):
        return Fence._borrow(lib.hl_invocation_signal_fence(self._p),
                             self.queue.device)

    @property
    def result_count(self):
        return lib.hl_invocation_result_count(self._p)

    def take_result(self, index):
        out = c_void_p()
        _check(lib.hl_invocation_take_result(self._p, index, byref(out)))
        return Buffer._adopt(out.value)

    @property
    def results(self):
        """Every result, taken once (the caller owns them)."""
        if self._results is None:
            self._results = [self.take_result(i)
                             for i in range(self.result_count)]
        return self._results

    async def _wait(self):
        if not self._invoked():
            self.invoke()
        results = self.results  # Handles exist before the data is ready.
        with self.signal_fence as f:
            await f
        return results

    def _invoked(self):
        # The C API has no getter; invoking twice is FAILED_PRECONDITION.
        return getattr(self, "_did_invoke", False)

    def __await__(self):
        return self._wait().__await__()


Invocation = ProgramInvocation

__all__ = [
    "AssumeNoAlias", "BackendInfo", "Buffer", "BufferArg", "Device",
    "DeviceProperties", "Error", "Fence", "Function", "Invocation",
    "InvocationStats", "MemoryStats", "PoolAttributes", "ProgramInvocation",
    "Queue", "QueueStats", "Scalar", "Semaphore", "StatusCode",
    "backend_query", "environment_check", "invocation_stats_global",
    "kernel_names", "live_device_count", "pattern_value", "pending_callbacks",
    "register_kernel_functions", "library_path",
] + [c.__name__ for c in _ERROR_CLASSES.values()]
