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
import contextlib
import ctypes
import dataclasses
import enum
import math
import operator
import os
import threading
import time
import weakref
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
    # Bad arguments are also ValueErrors, as Python code expects.
    _bases = ((Error, ValueError) if _code in (StatusCode.INVALID_ARGUMENT,
                                               StatusCode.OUT_OF_RANGE)
              else (Error,))
    _cls = type(_error_class_name(_code), _bases, {"code": _code})
    _cls.__module__ = __name__
    globals()[_cls.__name__] = _cls
    _ERROR_CLASSES[_code] = _cls
del _code, _cls, _bases


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


#===----------------------------------------------------------------------===#
# Argument checks: every public integer, float, string and handle argument
# is checked here, so nothing is truncated to a C width on the way down.
#===----------------------------------------------------------------------===#

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
I32_MAX = 2**31 - 1


def _int_arg(value, name, lo=0, hi=U64_MAX):
    """|value| as an int in [lo, hi]; TypeError or OutOfRangeError naming
    |name| otherwise (bools are refused: they are not counts)."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError("%s must be an int, not %s" %
                        (name, type(value).__name__))
    value = operator.index(value)
    if not lo <= value <= hi:
        raise _make_error(StatusCode.OUT_OF_RANGE,
                          "%s=%d is out of range [%d, %d]" %
                          (name, value, lo, hi))
    return value


def _str_arg(value, name):
    """|value| as NUL-free UTF-8 bytes."""
    if not isinstance(value, str):
        raise TypeError("%s must be a str, not %s" %
                        (name, type(value).__name__))
    if "\0" in value:
        raise _make_error(StatusCode.INVALID_ARGUMENT,
                          "%s contains a NUL character: %r" % (name, value))
    return value.encode("utf-8")


def _handle_arg(value, cls, name, optional=False):
    if value is None and optional:
        return None
    if not isinstance(value, cls):
        raise TypeError("%s must be a %s%s, not %s" %
                        (name, cls.__name__, " or None" if optional else "",
                         type(value).__name__))
    return value


def _deadline(timeout, name="timeout"):
    """A deadline |timeout| seconds away: None or inf is forever; NaN,
    negative values and non-numbers are refused."""
    if timeout is None:
        return INFINITE
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError("%s must be a number of seconds or None, not %s" %
                        (name, type(timeout).__name__))
    if math.isnan(timeout) or timeout < 0:
        raise _make_error(StatusCode.OUT_OF_RANGE,
                          "%s=%r must be >= 0 seconds (None or inf: forever)"
                          % (name, timeout))
    if math.isinf(timeout) or timeout * 1e9 >= INFINITE:
        return INFINITE
    return lib.hl_deadline_after(int(timeout * 1e9))


def _name(ptr_fn, value):
    return (ptr_fn(value) or b"").decode()


#===----------------------------------------------------------------------===#
# Handles: released once, deterministically or by the GC
#===----------------------------------------------------------------------===#

_tls = threading.local()  # .runtime_thread: inside a callback from hipline.
_graveyard = []  # (release_fn, ptr) dropped on a hipline thread.
_graveyard_lock = threading.Lock()
_handle_lock = threading.Lock()
_forked = [False]  # In a child forked from a process that loaded hipline.


def _after_fork_in_child():
    _forked[0] = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def _check_not_forked():
    if _forked[0]:
        raise _make_error(
            StatusCode.FAILED_PRECONDITION,
            "hipline cannot be used in a process forked (os.fork) from one "
            "that loaded it: the runtime's threads did not survive the fork "
            "(use multiprocessing's 'spawn' or 'forkserver' start method)")


def _on_runtime_thread():
    return getattr(_tls, "runtime_thread", False)


def _drain_graveyard():
    if not _graveyard or _on_runtime_thread() or _forked[0]:
        return
    with _graveyard_lock:
        items = list(_graveyard)
        _graveyard.clear()
    for release, ptr in items:
        release(ptr)


def _release_ptr(release, ptr):
    if _forked[0]:
        return  # The parent owns it; nothing here can release it safely.
    if _on_runtime_thread():
        # Never release on hipline's own threads: a last queue or device
        # release waits for work those threads complete.
        with _graveyard_lock:
            _graveyard.append((release, ptr))
    else:
        release(ptr)


class _Use:
    """`with handle._use() as ptr:` the pointer stays valid inside, even if
    another thread closes the handle meanwhile (the release waits for the
    last use to end)."""

    __slots__ = ("handle",)

    def __init__(self, handle):
        self.handle = handle

    def __enter__(self):
        return self.handle._acquire()

    def __exit__(self, *exc):
        self.handle._unuse()


class _Handle:
    """Owns one reference to a C object.

    Every call into C that passes the pointer holds a *use* (`_acquire` /
    `_unuse`, or `_call`); `close()` from any thread takes the pointer away
    at once (later uses raise FailedPreconditionError) and the C release
    happens when the last use in flight ends."""

    _release = None  # The C release function.
    _kind = "handle"
    _ptr = None
    _uses = 0
    _doomed = None  # Pointer closed while uses were in flight.

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

    def _acquire(self):
        _check_not_forked()
        with _handle_lock:
            ptr = self._ptr
            if ptr is None:
                raise _closed(self._kind)
            self._uses += 1
        return ptr

    def _unuse(self):
        with _handle_lock:
            self._uses -= 1
            ptr = None
            if self._uses == 0 and self._doomed is not None:
                ptr, self._doomed = self._doomed, None
        if ptr is not None:
            _release_ptr(type(self)._release, ptr)

    def _use(self):
        return _Use(self)

    @property
    def _p(self):
        # Only for pointers handed straight to a borrow (the caller holds a
        # use of another handle that keeps the object alive).
        _check_not_forked()
        ptr = self._ptr
        if ptr is None:
            raise _closed(self._kind)
        return ptr

    @property
    def closed(self):
        return self._ptr is None

    def close(self):
        """Releases the reference now (once the calls in flight on other
        threads return). Further use raises FailedPreconditionError; closing
        twice is a no-op."""
        with _handle_lock:
            ptr, self._ptr = self._ptr, None
            if ptr is not None and self._uses:
                self._doomed, ptr = ptr, None
        if ptr is not None:
            _release_ptr(type(self)._release, ptr)
        _drain_graveyard()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._ptr is None else "0x%x" % self._ptr
        return "<hipline.%s %s>" % (type(self).__name__, state)

    def __del__(self):
        ptr = self.__dict__.get("_ptr")
        if ptr is None:
            return
        self._ptr = None
        try:
            _release_ptr(type(self)._release, ptr)
        except Exception:  # Interpreter shutdown: nothing left to do.
            pass


def _call(fn, *args):
    """fn(*args) with every _Handle argument replaced by its pointer, each
    held in use for the call."""
    held = []
    try:
        cargs = []
        for a in args:
            if isinstance(a, _Handle):
                cargs.append(a._acquire())
                held.append(a)
            else:
                cargs.append(a)
        return fn(*cargs)
    finally:
        for h in held:
            h._unuse()


def _ccall(fn, *args):
    """_call, raising the returned status."""
    _check(_call(fn, *args))


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
    if (isinstance(value, int) and not isinstance(value, bool) and
            value in table.values()):
        return value
    try:
        return table[value]
    except (KeyError, TypeError):
        raise _make_error(
            StatusCode.INVALID_ARGUMENT, "unknown %s %r (accepted: %s)" %
            (what, value, ", ".join(str(k) for k in table if k is not None)))


def backend_query(kind="host"):
    """What a backend offers here: BackendInfo(kind, available,
    device_count, reason)."""
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
    """Devices created and not yet destroyed, process-wide."""
    return lib.hl_device_live_count()


def invocation_stats_global():
    """InvocationStats summed over every device."""
    s = _lib.invocation_stats_t()
    lib.hl_invocation_stats_global(byref(s))
    return _struct_to(InvocationStats, s)


def kernel_names():
    """Names Queue.dispatch accepts."""
    return [lib.hl_dispatch_kernel_name(i).decode()
            for i in range(lib.hl_dispatch_kernel_count())]


def pattern_value(seed, index):
    """Word |index| of the fill_pattern sequence of |seed|."""
    return lib.hl_pattern_value(_int_arg(seed, "seed", 0, U32_MAX),
                                _int_arg(index, "index"))


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


def _notify(fence, device, loop, fut, keep):
    """Calls back when |fence| is reached or fails, on |device|'s completion
    thread; |keep| stays referenced until then."""
    _drain_graveyard()
    with _pending_lock:
        token = _next_token[0]
        _next_token[0] += 1
        _pending[token] = (loop, fut, keep)
    try:
        _ccall(lib.hl_fence_call_when_reached, fence, device, _ON_REACHED,
               token)
    except BaseException:
        with _pending_lock:
            _pending.pop(token, None)
        raise


#===----------------------------------------------------------------------===#
# Exit: what queued work can still run finishes; what cannot is cancelled
#===----------------------------------------------------------------------===#

_user_semaphores = weakref.WeakValueDictionary()  # ptr -> Semaphore().
_awaited = {}  # semaphore ptr -> highest value queued work waits for.
_promised = {}  # semaphore ptr -> highest value queued work will signal.
_live_queues = weakref.WeakSet()
_track_lock = threading.Lock()


def _fence_pairs(fence):
    """[(semaphore ptr, value)] of a Fence (its use held by the caller)."""
    out, p = [], fence._ptr
    for i in range(lib.hl_fence_count(p)):
        sem, value = c_void_p(), c_uint64()
        lib.hl_fence_entry(p, i, byref(sem), byref(value))
        out.append((sem.value, value.value))
    return out


def _track(table, pairs):
    with _track_lock:
        for ptr, value in pairs:
            if ptr in _user_semaphores and table.get(ptr, -1) < value:
                table[ptr] = value


def _cancel_unsignalable():
    """Fails every Python-made semaphore that queued work waits for at a
    value no queued work will signal (at exit nothing else can). Returns
    how many."""
    with _track_lock:
        stuck = [(sem, _awaited[ptr]) for ptr, sem in
                 list(_user_semaphores.items())
                 if ptr in _awaited and _promised.get(ptr, -1) <
                 _awaited[ptr]]
    n = 0
    for sem, value in stuck:
        try:
            if sem.value >= value:
                continue
            sem.fail(StatusCode.CANCELLED,
                     "the interpreter is exiting and nothing can signal "
                     "this semaphore any more")
            n += 1
        except Error:  # Closed, or failed already.
            pass
    return n


def _settle_at_exit():
    """Before the interpreter finalizes, so no completion callback runs into
    a dying interpreter: cancels the work that cannot run any more (it waits
    on a semaphore only host code could signal), then waits for the rest."""
    if _forked[0]:
        return
    cancelled = _cancel_unsignalable()
    if cancelled:
        import sys
        print("hipline: at exit, %d semaphore(s) that queued work waited on "
              "could no longer be signalled; they were failed (CANCELLED) "
              "and that work did not run" % cancelled, file=sys.stderr)
    for q in list(_live_queues):
        try:
            with q._use() as p:
                # Bounded: a semaphore made outside Python can still hold it.
                _check(lib.hl_queue_wait_idle(p, _deadline(30)))
        except Exception:  # Closed, or failed: its callbacks have fired.
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


def _await_fence(fence, device, keep):
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    if device is None or device.closed:
        device = _default_notifier()
    _notify(fence, device, loop, fut, (keep, device))
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
    pool_release_threshold, pool_reuse_flags: None (the defaults) or
        unsigned 64- and 32-bit values.
    """

    _release = lib.hl_device_release
    _kind = "Device"

    def __init__(self, backend="auto", ordinal=0, fallback=None, checked=None,
                 pool_release_threshold=None, pool_reuse_flags=None):
        _check_not_forked()
        opts = _lib.device_options_t()
        lib.hl_device_options_initialize(byref(opts))
        opts.backend = _enum_arg(_BACKENDS, backend, "backend")
        opts.ordinal = _int_arg(ordinal, "ordinal", 0, I32_MAX)
        opts.fallback = _enum_arg(_FALLBACKS, fallback, "fallback mode")
        if checked is not None:
            if not isinstance(checked, bool):
                raise TypeError("checked must be None, True or False, not %s"
                                % type(checked).__name__)
            opts.checked = 1 if checked else 0
        if pool_release_threshold is not None:
            opts.pool.release_threshold = _int_arg(
                pool_release_threshold, "pool_release_threshold")
            opts.pool_release_threshold_set = True
        if pool_reuse_flags is not None:
            opts.pool.reuse_flags = _int_arg(pool_reuse_flags,
                                             "pool_reuse_flags", 0, U32_MAX)
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
        """DeviceProperties(backend, ordinal, name, target, memory_bytes,
        compute_units)."""
        p = _lib.device_properties_t()
        _ccall(lib.hl_device_properties, self, byref(p))
        return DeviceProperties(_name(lib.hl_backend_kind_name, p.backend),
                                p.ordinal, p.name.decode(), p.target.decode(),
                                p.memory_bytes, p.compute_units)

    @property
    def fallback_mode(self):
        return _name(lib.hl_fallback_mode_name,
                     _call(lib.hl_device_fallback_mode, self))

    @property
    def checked(self):
        return bool(_call(lib.hl_device_checked, self))

    @property
    def pool_attributes(self):
        a = _lib.pool_attributes_t()
        _ccall(lib.hl_device_pool_attributes, self, byref(a))
        return PoolAttributes(a.release_threshold, a.reuse_flags,
                              a.limit_bytes)

    def trim(self, min_bytes_to_keep=0):
        """Returns pooled memory beyond |min_bytes_to_keep| to the system."""
        _ccall(lib.hl_device_trim, self,
               _int_arg(min_bytes_to_keep, "min_bytes_to_keep"))

    def wait_idle(self, timeout=None):
        """Blocks until every queue of the device is idle (None or inf:
        forever)."""
        _ccall(lib.hl_device_wait_idle, self, _deadline(timeout))

    def memory_stats(self):
        s = _lib.memory_stats_t()
        _ccall(lib.hl_device_memory_stats, self, byref(s))
        return _struct_to(MemoryStats, s)

    def reset_peak_memory_stats(self):
        """Starts the memory peaks (bytes_in_use_peak of the device and its
        queues, bytes_reserved_peak) again from the current values, like
        torch.cuda.reset_peak_memory_stats."""
        _check(lib.hl_device_reset_peak_memory_stats(self._p))

    def invocation_stats(self):
        s = _lib.invocation_stats_t()
        _ccall(lib.hl_device_invocation_stats, self, byref(s))
        return _struct_to(InvocationStats, s)

    def create_queue(self):
        """A new Queue on this device."""
        return Queue(self)

    def fence(self):
        """An empty fence whose awaits are delivered by this device."""
        return Fence(device=self)


#===----------------------------------------------------------------------===#
# Semaphores and fences
#===----------------------------------------------------------------------===#


class Semaphore(_Handle):
    """A timeline semaphore: a 64-bit value that only rises, or a failure."""

    _release = lib.hl_semaphore_release
    _kind = "Semaphore"

    def __init__(self, initial_value=0):
        _check_not_forked()
        value = _int_arg(initial_value, "initial_value")
        out = c_void_p()
        _check(lib.hl_semaphore_create(value, lib.hl_allocator_system(),
                                       byref(out)))
        super().__init__(out.value)
        _user_semaphores[out.value] = self

    @classmethod
    def _borrow(cls, ptr):
        lib.hl_semaphore_retain(ptr)
        return cls._adopt(ptr)

    @property
    def value(self):
        """The current value; raises the failure of a failed semaphore."""
        v = c_uint64()
        _ccall(lib.hl_semaphore_query, self, byref(v))
        return v.value

    def signal(self, value):
        """Raises the value to |value|."""
        _ccall(lib.hl_semaphore_signal, self, _int_arg(value, "value"))

    def fail(self, code=StatusCode.ABORTED, message="failed from Python"):
        """Fails the semaphore: every waiter gets Error(code, message)."""
        try:
            code = StatusCode(code)
        except ValueError:
            raise _make_error(StatusCode.OUT_OF_RANGE,
                              "code=%r is not a StatusCode" % (code,))
        if code is StatusCode.OK:
            raise _make_error(StatusCode.INVALID_ARGUMENT,
                              "Semaphore.fail needs a code other than OK")
        text = str(message).replace("\0", "\\0").encode("utf-8", "replace")
        with self._use() as p:
            _check(lib.hl_semaphore_fail(p, lib.hl_status_make(
                int(code), b"python", 0, b"%s", text)))

    def wait(self, value, timeout=None):
        """Blocks (GIL released) until |value|, a failure or the timeout
        (DeadlineExceededError; None or inf: forever)."""
        _ccall(lib.hl_semaphore_wait, self, _int_arg(value, "value"),
               _deadline(timeout))

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
    _watch = None  # A Python function's signal fence: handed to a queue?

    def __init__(self, pairs=(), device=None):
        _check_not_forked()
        self.device = _handle_arg(device, Device, "device", optional=True)
        out = c_void_p()
        _check(lib.hl_fence_create(lib.hl_allocator_system(), byref(out)))
        super().__init__(out.value)
        for sem, value in pairs:
            self.insert(sem, value)

    def _init_borrowed(self, device=None):
        self.device = device

    @classmethod
    def _borrow(cls, ptr, device=None):
        lib.hl_fence_retain(ptr)
        return cls._adopt(ptr, device)

    def insert(self, semaphore, value):
        """Adds semaphore@value (a semaphore already present keeps the
        higher value)."""
        _handle_arg(semaphore, Semaphore, "semaphore")
        _ccall(lib.hl_fence_insert, self, semaphore, _int_arg(value, "value"))
        return self

    def join(self, other):
        """Adds every pair of |other| (None: nothing)."""
        if other is not None:
            _handle_arg(other, Fence, "other")
            _ccall(lib.hl_fence_join, self, other)
            if other._watch is not None:
                self._watch = other._watch
        return self

    def clear(self):
        _call(lib.hl_fence_clear, self)

    def __len__(self):
        return _call(lib.hl_fence_count, self)

    @property
    def entries(self):
        """[(Semaphore, value)]: new references to the semaphores."""
        with self._use():
            return [(Semaphore._borrow(s), v) for s, v in _fence_pairs(self)]

    def is_reached(self):
        r = c_bool()
        _ccall(lib.hl_fence_is_reached, self, byref(r))
        return bool(r.value)

    def wait(self, timeout=None):
        """Blocks until every pair is reached (None or inf: forever)."""
        _ccall(lib.hl_fence_wait, self, _deadline(timeout))

    def __await__(self):
        return _await_fence(self, self.device, self).__await__()

    def __repr__(self):
        if self._ptr is None:
            return "<hipline.Fence closed>"
        return "<hipline.Fence %d pair(s)>" % len(self)


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
        return _call(lib.hl_buffer_length, self)

    @property
    def length(self):
        return _call(lib.hl_buffer_length, self)

    @property
    def offset(self):
        return _call(lib.hl_buffer_offset, self)

    @property
    def origin(self):
        return _name(lib.hl_buffer_origin_name,
                     _call(lib.hl_buffer_origin, self))

    @property
    def root_id(self):
        return _call(lib.hl_buffer_root_id, self)

    @property
    def is_freed(self):
        return bool(_call(lib.hl_buffer_is_freed, self))

    @property
    def device(self):
        """A new reference to the buffer's Device."""
        with self._use() as p:
            return Device._borrow(lib.hl_buffer_device(p))

    def device_pointer(self):
        """The device address (or None before the alloca is issued). The
        root escapes: its fallback release can no longer be queue-ordered."""
        return _call(lib.hl_buffer_device_pointer, self)

    def subview(self, offset, length):
        """A view of [offset, offset + length) of this buffer."""
        out = c_void_p()
        _ccall(lib.hl_buffer_subview, self, _int_arg(offset, "offset"),
               _int_arg(length, "length"), byref(out))
        return Buffer._adopt(out.value)

    def register_global(self):
        """Makes the root PERSISTENT: it survives until unregister_global(),
        which needs a handle of it. A global keeps its device alive: drop
        it with unregister_global() before the last handle goes, or the
        device is destroyed only at process exit."""
        _ccall(lib.hl_buffer_register_global, self)

    def unregister_global(self):
        _ccall(lib.hl_buffer_unregister_global, self)

    def use_fence(self):
        f = Fence(device=None)
        _ccall(lib.hl_buffer_use_fence, self, f)
        return f

    def mutation_barrier(self):
        f = Fence(device=None)
        _ccall(lib.hl_buffer_mutation_barrier, self, f)
        return f

    def __repr__(self):
        if self._ptr is None:
            return "<hipline.Buffer closed>"
        return "<hipline.Buffer root %d, %d bytes at offset %d>" % (
            self.root_id, len(self), self.offset)


class BufferArg:
    """A buffer argument of Queue.dispatch with its access ("r", "w",
    "rw") and range (default: the whole buffer)."""

    def __init__(self, buffer, access="rw", offset=0, length=None):
        self.buffer = _handle_arg(buffer, Buffer, "buffer", optional=True)
        self.access = _enum_arg(_ACCESS, access, "access")
        self.offset = _int_arg(offset, "offset")
        self.length = None if length is None else _int_arg(length, "length")

    def __repr__(self):
        return "BufferArg(%r, access=%d, offset=%d, length=%r)" % (
            self.buffer, self.access, self.offset, self.length)


class Scalar:
    """A scalar argument of Queue.dispatch: Scalar.u32(7), Scalar.u64(n),
    Scalar.f32(2.0). Out-of-range values are refused, not wrapped."""

    def __init__(self, bits, size):
        self.size = _int_arg(size, "size", 1, 8)
        self.bits = _int_arg(bits, "bits", 0, 2**(8 * self.size) - 1)

    @classmethod
    def u32(cls, v):
        return cls(_int_arg(v, "value", 0, U32_MAX), 4)

    @classmethod
    def u64(cls, v):
        return cls(_int_arg(v, "value"), 8)

    @classmethod
    def f32(cls, v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError("value must be a float, not %s" %
                            type(v).__name__)
        return cls(ctypes.c_uint32.from_buffer(ctypes.c_float(v)).value, 4)

    def __repr__(self):
        return "Scalar(bits=0x%x, size=%d)" % (self.bits, self.size)


def _host_span(obj, writable, name):
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


def _private_semaphore():
    # Not a user semaphore: nobody else can signal or fail it.
    out = c_void_p()
    _check(lib.hl_semaphore_create(0, lib.hl_allocator_system(), byref(out)))
    return Semaphore._adopt(out.value)


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

    def __init__(self, device):
        _handle_arg(device, Device, "device")
        out = c_void_p()
        _ccall(lib.hl_queue_create, device, byref(out))
        super().__init__(out.value)
        self.device = device
        self._notifier = Device._borrow(lib.hl_queue_device(out.value))
        _live_queues.add(self)

    def _init_borrowed(self):
        self.device = Device._borrow(lib.hl_queue_device(self._ptr))
        self._notifier = self.device
        _live_queues.add(self)

    @classmethod
    def _borrow(cls, ptr):
        lib.hl_queue_retain(ptr)
        return cls._adopt(ptr)

    def close(self):
        super().close()
        notifier = self.__dict__.get("_notifier")
        if notifier is not None and notifier is not self.device:
            notifier.close()

    @property
    def id(self):
        return _call(lib.hl_queue_id, self)

    @property
    def timeline(self):
        """A new reference to the queue's timeline semaphore."""
        with self._use() as p:
            return Semaphore._borrow(lib.hl_queue_timeline(p))

    def _fresh_signal(self):
        f = Fence(device=self.device if not self.device.closed else None)
        with _private_semaphore() as s:
            f.insert(s, 1)
        return f

    def _op(self, cfn, wait, signal, *args, keep=None):
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

    def _submit_keeping(self, cfn, wait, out, args, keep):
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

    def barrier(self, wait=None, signal=None):
        """Completes once |wait| is reached and earlier work is done."""
        return self._op(lib.hl_queue_barrier, wait, signal)

    def host_call(self, fn, wait=None, signal=None):
        """Runs |fn()| on a runtime thread in queue order. Exceptions are
        swallowed (printed); keep |fn| short and non-blocking."""
        if not callable(fn):
            raise TypeError("fn must be callable, not %s" % type(fn).__name__)

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
        return self._op(lib.hl_queue_host_call, wait, signal, cb, None,
                        keep=(cb, fn))

    def alloca(self, size, wait=None, signal=None):
        """A new buffer of |size| bytes, usable once `buffer.ready` (the
        returned buffer's fence) is reached."""
        size = _int_arg(size, "size")
        out = c_void_p()
        signal = self._op(lib.hl_queue_alloca, wait, signal, size, 0,
                          byref(out))
        b = Buffer._adopt(out.value)
        b.ready = signal
        return b

    def dealloca(self, buffer, wait=None, signal=None):
        """Frees |buffer|'s root in queue order."""
        _handle_arg(buffer, Buffer, "buffer")
        return self._op(lib.hl_queue_dealloca, wait, signal, buffer)

    def fill(self, buffer, pattern, offset=0, length=None, wait=None,
             signal=None):
        """Fills with the 32-bit |pattern| (offset, length multiples of 4)."""
        _handle_arg(buffer, Buffer, "buffer")
        pattern = _int_arg(pattern, "pattern", -2**31, U32_MAX) & U32_MAX
        offset = _int_arg(offset, "offset")
        if length is None:
            length = max(0, len(buffer) - offset)
        length = _int_arg(length, "length")
        return self._op(lib.hl_queue_fill, wait, signal, buffer, offset,
                        length, pattern)

    def copy(self, source, target, source_offset=0, target_offset=0,
             length=None, wait=None, signal=None):
        _handle_arg(source, Buffer, "source")
        _handle_arg(target, Buffer, "target")
        source_offset = _int_arg(source_offset, "source_offset")
        target_offset = _int_arg(target_offset, "target_offset")
        if length is None:
            length = max(0, len(source) - source_offset)
        length = _int_arg(length, "length")
        return self._op(lib.hl_queue_copy, wait, signal, source,
                        source_offset, target, target_offset, length)

    def read(self, buffer, into, offset=0, wait=None, signal=None):
        """Reads len(into) bytes at |offset| into the writable buffer-protocol
        object |into| (kept alive until the read itself finishes)."""
        _handle_arg(buffer, Buffer, "buffer")
        offset = _int_arg(offset, "offset")
        addr, n, keep = _host_span(into, True, "into")
        return self._op(lib.hl_queue_read, wait, signal, buffer, offset, addr,
                        n, keep=(keep, into))

    async def read_bytes(self, buffer, offset=0, length=None, wait=None):
        """Reads into a new bytearray and returns it once the read is done."""
        _handle_arg(buffer, Buffer, "buffer")
        offset = _int_arg(offset, "offset")
        if length is None:
            length = max(0, len(buffer) - offset)
        out = bytearray(_int_arg(length, "length", 0, 2**63 - 1))
        await self.read(buffer, out, offset, wait)
        return out

    def write(self, buffer, data, offset=0, wait=None, signal=None):
        """Writes any buffer-protocol object |data| (kept alive until the
        write itself finishes; a read-only one that is not bytes is copied
        once)."""
        _handle_arg(buffer, Buffer, "buffer")
        offset = _int_arg(offset, "offset")
        addr, n, keep = _host_span(data, False, "data")
        return self._op(lib.hl_queue_write, wait, signal, addr, buffer,
                        offset, n, keep=(keep, data))

    def dispatch(self, kernel, args, grid=(1, 1, 1), block=(1, 1, 1),
                 shared_bytes=0, wait=None, signal=None):
        """Launches |kernel| (see hipline.kernel_names()) with BufferArg /
        Scalar arguments in parameter order."""
        name = _str_arg(kernel, "kernel")
        args = list(args)
        n = len(args)
        arr = (_lib.kernel_arg_t * max(n, 1))()
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
        with contextlib.ExitStack() as stack:
            for i, a in enumerate(args):
                if isinstance(a, BufferArg) and a.buffer is not None:
                    arr[i].buffer = stack.enter_context(a.buffer._use())
            return self._op(lib.hl_queue_dispatch, wait, signal, name,
                            byref(cfg), n, arr)

    def fill_pattern(self, buffer, seed, wait=None, signal=None):
        _handle_arg(buffer, Buffer, "buffer")
        return self._op(lib.hl_queue_fill_pattern, wait, signal, buffer,
                        _int_arg(seed, "seed", 0, U32_MAX))

    def verify_pattern(self, buffer, seed, counter, wait=None, signal=None):
        _handle_arg(buffer, Buffer, "buffer")
        _handle_arg(counter, Buffer, "counter")
        return self._op(lib.hl_queue_verify_pattern, wait, signal, buffer,
                        _int_arg(seed, "seed", 0, U32_MAX), counter)

    def spin(self, cycles, wait=None, signal=None):
        """Busy work of |cycles| on the stream (for tests and benchmarks)."""
        return self._op(lib.hl_queue_spin, wait, signal,
                        _int_arg(cycles, "cycles"))

    def idle(self):
        """A fence reached once everything submitted so far completes:
        `await queue.idle()`."""
        s = _lib.queue_stats_t()
        _call(lib.hl_queue_stats, self, byref(s))
        f = Fence(device=self.device if not self.device.closed else None)
        with self.timeline as t:
            f.insert(t, s.submitted_value)
        return f

    def wait_idle(self, timeout=None):
        """Blocks until everything submitted has finished (None or inf:
        forever)."""
        _ccall(lib.hl_queue_wait_idle, self, _deadline(timeout))

    def check(self):
        """Raises the queue's failure, if it has failed."""
        _ccall(lib.hl_queue_status, self)

    def stats(self):
        s = _lib.queue_stats_t()
        _call(lib.hl_queue_stats, self, byref(s))
        return _struct_to(QueueStats, s)

    def memory_stats(self):
        s = _lib.memory_stats_t()
        _ccall(lib.hl_queue_memory_stats, self, byref(s))
        return _struct_to(MemoryStats, s)


#===----------------------------------------------------------------------===#
# Functions and invocations
#===----------------------------------------------------------------------===#

_registered_callbacks = []  # Callbacks of functions ever registered: forever.


def _function_result(res, rcount):
    if res is None:
        res = ()
    elif isinstance(res, Buffer):
        res = (res,)
    res = list(res)
    if len(res) != rcount:
        raise _make_error(StatusCode.INVALID_ARGUMENT,
                          "returned %d results, the signature has %d" %
                          (len(res), rcount))
    for i, b in enumerate(res):
        if not isinstance(b, Buffer):
            raise _make_error(StatusCode.INVALID_ARGUMENT,
                              "result %d is a %s, not a Buffer" %
                              (i, type(b).__name__))
    return res


class Function(_Handle):
    """A function: a Python callable, or a registered one (kernel-backed
    built-ins: Function.lookup("hipline.clone")).

    Function(name, fn, args=("r", "rw"), results=1): |fn(queue, args, wait,
    signal)| runs on the invoking thread; it must enqueue work on |queue|
    that waits on |wait| and signals |signal| (pass `signal=signal` to a
    queue operation), or reach |signal| itself, before it returns, and
    return |results| Buffers (each gets a new reference). An exception
    fails the invocation with its code (hipline.Error) or INTERNAL; so does
    returning without handing |signal| to the queue (FAILED_PRECONDITION:
    nothing could ever reach it, and `await invocation` would hang).
    """

    _release = lib.hl_function_release
    _kind = "Function"
    _callback = None

    def __init__(self, name, fn, args=(), results=0):
        _check_not_forked()
        cname = _str_arg(name, "name")
        if not callable(fn):
            raise TypeError("fn must be callable, not %s" % type(fn).__name__)
        if isinstance(args, str):
            raise TypeError("args must be a sequence of accesses, not a str")
        access = [_enum_arg(_ACCESS, a, "access") for a in args]
        results = _int_arg(results, "results", 0, U32_MAX)
        acc = (c_int * max(len(access), 1))(*access)
        sig = _lib.function_signature_t(len(access), results, acc)
        self._fn = fn

        def tramp(_user, q, argv, argc, wait, signal, out, rcount):
            try:
                queue = Queue._borrow(q)
                bufs = [Buffer._borrow(argv[i]) for i in range(argc)]
                w = Fence._borrow(wait, queue.device) if wait else None
                s = Fence._borrow(signal, queue.device)
                s._watch = []
                res = _function_result(fn(queue, bufs, w, s), rcount)
                if not s._watch and not s.is_reached():
                    raise _make_error(
                        StatusCode.FAILED_PRECONDITION,
                        "returned without submitting work that signals its "
                        "signal fence (pass signal=signal to a queue "
                        "operation); nothing could ever reach it")
                for i, b in enumerate(res):
                    with b._use() as p:
                        lib.hl_buffer_retain(p)
                        out[i] = p
                return None
            except BaseException as e:  # noqa: BLE001
                return _status_from_exception(e, "python function %r" % name)

        cb = _lib.function_fn(tramp)
        out = c_void_p()
        _check(lib.hl_function_create(cname, byref(sig), cb, None,
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
        _check_not_forked()
        cname = _str_arg(name, "name")
        out = c_void_p()
        status = lib.hl_function_lookup(cname, byref(out))
        if status and name.startswith("hipline."):
            lib.hl_status_free(status)
            register_kernel_functions()
            status = lib.hl_function_lookup(cname, byref(out))
        _check(status)
        return cls._adopt(out.value)

    @property
    def name(self):
        return _call(lib.hl_function_name, self).decode()

    def register(self):
        """Registers the function under its name (Function.lookup finds it).
        Its Python callable is then kept for the life of the process."""
        if self._callback is not None:  # The registry may outlive us.
            _registered_callbacks.append(self._callback)
        _ccall(lib.hl_function_register, self)

    @staticmethod
    def unregister(name):
        _check_not_forked()
        _check(lib.hl_function_unregister(_str_arg(name, "name")))

    def __repr__(self):
        if self._ptr is None:
            return "<hipline.Function closed>"
        return "<hipline.Function %r>" % self.name


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
        _handle_arg(function, Function, "function")
        _handle_arg(queue, Queue, "queue")
        out = c_void_p()
        _ccall(lib.hl_invocation_create, function, queue, byref(out))
        super().__init__(out.value)
        self.function, self.queue = function, queue  # Keep callbacks alive.
        self._results = None
        for a in args:
            self.add_arg(a)
        if assume_no_alias is not None:
            self.assume_no_alias = assume_no_alias

    def add_arg(self, buffer):
        _handle_arg(buffer, Buffer, "buffer")
        _ccall(lib.hl_invocation_add_argument, self, buffer)
        return self

    def add_wait(self, semaphore_or_fence, value=None):
        """Waits on semaphore@value, or on every pair of a fence."""
        if isinstance(semaphore_or_fence, Fence):
            for sem, v in semaphore_or_fence.entries:
                with sem:
                    _ccall(lib.hl_invocation_add_wait, self, sem, v)
                    _track(_awaited, [(sem._ptr, v)])
        elif isinstance(semaphore_or_fence, Semaphore):
            v = _int_arg(value, "value")
            _ccall(lib.hl_invocation_add_wait, self, semaphore_or_fence, v)
            _track(_awaited, [(semaphore_or_fence._ptr, v)])
        else:
            raise TypeError("semaphore_or_fence must be a Semaphore or a "
                            "Fence, not %s" %
                            type(semaphore_or_fence).__name__)
        return self

    @property
    def assume_no_alias(self):
        return bool(_call(lib.hl_invocation_assume_no_alias, self))

    @assume_no_alias.setter
    def assume_no_alias(self, value):
        if not isinstance(value, bool):
            raise _make_error(StatusCode.INVALID_ARGUMENT,
                              "assume_no_alias must be True or False, not %r"
                              % (value,))
        _call(lib.hl_invocation_set_assume_no_alias, self, value)

    @property
    def effective_assume_no_alias(self):
        v, src = c_bool(), c_int()
        _ccall(lib.hl_invocation_effective_assume_no_alias, self, byref(v),
               byref(src))
        return AssumeNoAlias(bool(v.value), _SOURCES.get(src.value, "unknown"))

    def invoke(self):
        """Exports the arguments, calls the function, imports the results;
        returns once the work is enqueued. Once only."""
        _ccall(lib.hl_invocation_invoke, self)
        self._did_invoke = True
        return self

    @property
    def signal_fence(self):
        with self._use() as p:
            device = self.queue.device
            return Fence._borrow(lib.hl_invocation_signal_fence(p),
                                 None if device.closed else device)

    @property
    def result_count(self):
        return _call(lib.hl_invocation_result_count, self)

    def take_result(self, index):
        out = c_void_p()
        _ccall(lib.hl_invocation_take_result, self,
               _int_arg(index, "index"), byref(out))
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
