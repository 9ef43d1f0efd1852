# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Functions and invocations: the import/export layer."""

from __future__ import annotations

from ctypes import byref, c_bool, c_int, c_void_p
from typing import (Any, Callable, Generator, Iterable, List, Optional,
                    Sequence, Union)

from . import _lib
from ._args import U32_MAX, _ACCESS, _enum_arg, _handle_arg, _int_arg, _str_arg
from ._completion import _awaited, _track
from ._handle import _call, _ccall, _check_not_forked, _Handle
from ._lib import lib
from .buffer import Buffer
from .errors import StatusCode, _check, _make_error, _status_from_exception
from .info import AssumeNoAlias, InvocationStats, _struct_to
from .queue import Queue
from .semaphore import Fence, Semaphore

__all__ = ["Function", "Invocation", "ProgramInvocation",
           "invocation_stats_global", "register_kernel_functions"]

# A Python function's callable: fn(queue, args, wait, signal) -> results.
_FunctionCallable = Callable[[Queue, List[Buffer], Optional[Fence], Fence],
                            Union[None, Buffer, Sequence[Buffer]]]

def invocation_stats_global() -> InvocationStats:
    """InvocationStats summed over every device."""
    s = _lib.invocation_stats_t()
    lib.hl_invocation_stats_global(byref(s))
    return _struct_to(InvocationStats, s)



def register_kernel_functions() -> None:
    """Registers the kernel-backed functions hipline.fill_pattern, .copy,
    .clone and .axpy2 (idempotent)."""
    _check(lib.hl_kernels_register_functions())


# Callbacks of functions ever registered: kept forever.
_registered_callbacks: List[Any] = []


def _function_result(res: Any, rcount: int) -> List[Buffer]:
    if res is None:
        res = ()
    elif isinstance(res, Buffer):
        res = (res,)
    buffers: List[Buffer] = list(res)
    if len(buffers) != rcount:
        raise _make_error(StatusCode.INVALID_ARGUMENT,
                          "returned %d results, the signature has %d" %
                          (len(buffers), rcount))
    for i, b in enumerate(buffers):
        if not isinstance(b, Buffer):
            raise _make_error(StatusCode.INVALID_ARGUMENT,
                              "result %d is a %s, not a Buffer" %
                              (i, type(b).__name__))
    return buffers


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

    def __init__(self, name: str, fn: _FunctionCallable,
                 args: Iterable[Union[str, int]] = (),
                 results: int = 0) -> None:
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

        def tramp(_user: Any, q: int, argv: Any, argc: int, wait: Any,
                  signal: int, out: Any, rcount: int) -> Optional[int]:
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
    def _borrow(cls, ptr: Optional[int]) -> Function:
        lib.hl_function_retain(ptr)
        return cls._adopt(ptr)

    @classmethod
    def lookup(cls, name: str) -> Function:
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
    def name(self) -> str:
        """The function's name."""
        return str(_call(lib.hl_function_name, self).decode())

    def register(self) -> None:
        """Registers the function under its name (Function.lookup finds it).
        Its Python callable is then kept for the life of the process."""
        if self._callback is not None:  # The registry may outlive us.
            _registered_callbacks.append(self._callback)
        _ccall(lib.hl_function_register, self)

    @staticmethod
    def unregister(name: str) -> None:
        """Removes the function registered as |name| (NotFoundError when
        there is none)."""
        _check_not_forked()
        _check(lib.hl_function_unregister(_str_arg(name, "name")))

    def _describe(self) -> str:
        return repr(self.name)


_SOURCES = {0: "invocation", 1: "api", 2: "environment"}


class _InvocationMeta(type):
    @property
    def global_assume_no_alias(cls) -> Optional[bool]:
        """The process-wide value: None (unset), True or False. When set (here
        or by HIPLINE_ASSUME_NO_ALIAS) it overrides every invocation's own."""
        v, src = c_int(), c_int()
        _check(lib.hl_get_assume_no_alias(byref(v), byref(src)))
        return None if v.value < 0 else bool(v.value)

    @global_assume_no_alias.setter
    def global_assume_no_alias(cls, value: Optional[bool]) -> None:
        if value is None:
            lib.hl_set_assume_no_alias(-1)
        elif isinstance(value, bool):
            lib.hl_set_assume_no_alias(1 if value else 0)
        else:
            raise _make_error(StatusCode.INVALID_ARGUMENT,
                              "global_assume_no_alias must be None, True or "
                              "False, not %r" % (value,))

    @property
    def global_assume_no_alias_source(cls) -> Optional[str]:
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

    def __init__(self, function: Function, queue: Queue,
                 args: Iterable[Buffer] = (),
                 assume_no_alias: Optional[bool] = None) -> None:
        _handle_arg(function, Function, "function")
        _handle_arg(queue, Queue, "queue")
        out = c_void_p()
        _ccall(lib.hl_invocation_create, function, queue, byref(out))
        super().__init__(out.value)
        self.function, self.queue = function, queue  # Keep callbacks alive.
        self._results: Optional[List[Buffer]] = None
        for a in args:
            self.add_arg(a)
        if assume_no_alias is not None:
            self.assume_no_alias = assume_no_alias

    def add_arg(self, buffer: Buffer) -> ProgramInvocation:
        """Appends |buffer| to the arguments (in the function's order)."""
        _handle_arg(buffer, Buffer, "buffer")
        _ccall(lib.hl_invocation_add_argument, self, buffer)
        return self

    def add_wait(self, semaphore_or_fence: Union[Semaphore, Fence],
                 value: Optional[int] = None) -> ProgramInvocation:
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
    def assume_no_alias(self) -> bool:
        """This invocation's own value (default True): may a result that is
        not provably unique still be freed in queue order? A process-wide
        value (global_assume_no_alias) overrides it."""
        return bool(_call(lib.hl_invocation_assume_no_alias, self))

    @assume_no_alias.setter
    def assume_no_alias(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise _make_error(StatusCode.INVALID_ARGUMENT,
                              "assume_no_alias must be True or False, not %r"
                              % (value,))
        _call(lib.hl_invocation_set_assume_no_alias, self, value)

    @property
    def effective_assume_no_alias(self) -> AssumeNoAlias:
        """AssumeNoAlias(value, source): the value the invocation will use
        and where it comes from."""
        v, src = c_bool(), c_int()
        _ccall(lib.hl_invocation_effective_assume_no_alias, self, byref(v),
               byref(src))
        return AssumeNoAlias(bool(v.value), _SOURCES.get(src.value, "unknown"))

    def invoke(self) -> ProgramInvocation:
        """Exports the arguments, calls the function, imports the results;
        returns once the work is enqueued. Once only."""
        _ccall(lib.hl_invocation_invoke, self)
        self._did_invoke = True
        return self

    @property
    def signal_fence(self) -> Fence:
        """A new reference to the fence the invocation signals when its work
        is done."""
        with self._use() as p:
            device = self.queue.device
            return Fence._borrow(lib.hl_invocation_signal_fence(p),
                                 None if device.closed else device)

    @property
    def result_count(self) -> int:
        """The number of results (the function's signature)."""
        return int(_call(lib.hl_invocation_result_count, self))

    def take_result(self, index: int) -> Buffer:
        """Result |index| (the caller owns it; once per index)."""
        out = c_void_p()
        _ccall(lib.hl_invocation_take_result, self,
               _int_arg(index, "index"), byref(out))
        return Buffer._adopt(out.value)

    @property
    def results(self) -> List[Buffer]:
        """Every result, taken once (the caller owns them)."""
        if self._results is None:
            self._results = [self.take_result(i)
                             for i in range(self.result_count)]
        return self._results

    async def _wait(self) -> List[Buffer]:
        if not self._invoked():
            self.invoke()
        results = self.results  # Handles exist before the data is ready.
        with self.signal_fence as f:
            await f
        return results

    def _describe(self) -> str:
        return "%r on queue %d, %s" % (
            self.function.name, self.queue.id,
            "invoked" if self._invoked() else "not invoked")

    def _invoked(self) -> bool:
        # The C API has no getter; invoking twice is FAILED_PRECONDITION.
        return getattr(self, "_did_invoke", False)

    def __await__(self) -> Generator[Any, None, List[Buffer]]:
        return self._wait().__await__()


Invocation = ProgramInvocation
